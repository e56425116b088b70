//! `payrail login`: opens a portal session and saves it in the config file.

use std::io::Write;

use crate::args::LoginArgs;
use crate::config::PortalLogin;
use crate::context::Context;
use crate::output::{Failure, Outcome};
use crate::{portal, Io};

pub(super) async fn run(cx: &mut Context<'_>, io: &mut Io, args: LoginArgs) -> Outcome {
    let LoginArgs { email } = args;
    let api_url = cx.api_url()?;
    let password = cx.secret(io, "PAYRAIL_PORTAL_PASSWORD", "Portal password: ")?;
    let answer = portal::post(&api_url, "portal/api/login", |request| {
        request.json(&serde_json::json!({ "email": email, "password": password }))
    })
    .await?;
    if answer.status != 200 {
        return Err(answer.failure());
    }
    let (Some(cookie), Some(csrf)) = (answer.session, answer.body["csrf_token"].as_str()) else {
        return Err(Failure::from(
            "the portal answered a login without a session".to_owned(),
        ));
    };
    cx.config.portal = Some(PortalLogin {
        email: email.clone(),
        cookie,
        csrf: csrf.to_owned(),
    });
    cx.save()?;
    writeln!(io.err, "Logged in to the portal as {email}.")?;
    Ok(())
}
