//! `payrail configure`: saves the API URL and a client's credentials in the config file.

use std::io::Write;

use crate::args::ConfigureArgs;
use crate::context::Context;
use crate::output::Outcome;
use crate::Io;

pub(super) fn run(cx: &mut Context<'_>, io: &mut Io, args: ConfigureArgs) -> Outcome {
    let api_url = cx.api_url()?;
    let client_secret = cx.secret(io, "PAYRAIL_CLIENT_SECRET", "Client secret: ")?;
    cx.config.api_url = Some(api_url);
    cx.config.client_id = Some(args.client_id);
    cx.config.client_secret = Some(client_secret);
    cx.save()?;
    writeln!(
        io.err,
        "Saved to {} (readable by you only).",
        cx.path.display()
    )?;
    Ok(())
}
