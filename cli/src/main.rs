//! `payrail`: see the library's documentation, or `payrail --help`.

use std::io::IsTerminal;

#[tokio::main]
async fn main() {
    let mut io = payrail_cli::Io {
        out: Box::new(std::io::stdout()),
        err: Box::new(std::io::stderr()),
        stdin_is_terminal: std::io::stdin().is_terminal(),
        stdin: Box::new(std::io::BufReader::new(std::io::stdin())),
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let code = payrail_cli::run(
        std::env::args().collect(),
        std::env::vars().collect(),
        &mut io,
        shutdown,
    )
    .await;
    std::process::exit(code);
}
