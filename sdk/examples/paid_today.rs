//! Lists today's paid transactions, every page.
//!
//! `PAYRAIL_API_URL=http://127.0.0.1:8787 PAYRAIL_CLIENT_ID=… PAYRAIL_CLIENT_SECRET=… \
//!  cargo run -p payrail --example paid_today`

use futures_util::TryStreamExt;
use payrail::{Client, Status, TransactionQuery};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::new(
        std::env::var("PAYRAIL_API_URL")?,
        std::env::var("PAYRAIL_CLIENT_ID")?,
        std::env::var("PAYRAIL_CLIENT_SECRET")?,
    )?;
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64
        / 86_400
        * 86_400;
    let query = TransactionQuery::new()
        .status(Status::Paid)
        .created_after(today)
        .limit(100);
    let mut transactions = Box::pin(client.transactions(query));
    let mut count = 0;
    while let Some(t) = transactions.try_next().await? {
        count += 1;
        println!(
            "{:>8}  {:<24}  {} {}",
            t.id,
            t.external_reference.as_deref().unwrap_or("-"),
            t.amount.gross.map(|g| g.to_string()).unwrap_or_default(),
            t.currency.as_deref().unwrap_or("")
        );
    }
    println!("{count} paid today");
    Ok(())
}
