//! Demo and bulk data for local runs. Never part of a production deploy: it is written straight
//! into the local D1 file, which only `wrangler dev` reads.
//!
//! Generation is deterministic (a seeded ChaCha RNG), so every machine gets the same rows, ids
//! and keys. Ids are allocated in creation order, as the worker's list queries require.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rusqlite::{params, Connection, Transaction as SqlTx};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use shared_types::{time, RawStatus, Scope};

use crate::secrets::secret_hash;

/// A demo institution's fixed credentials.
pub struct DemoClient {
    /// Public client id.
    pub client_id: &'static str,
    /// Client secret (demo only; production secrets are generated and shown once).
    pub client_secret: &'static str,
    /// Display name of the client.
    pub name: &'static str,
    /// Granted scopes.
    pub scopes: &'static [Scope],
}

/// A demo institution.
pub struct DemoInstitution {
    /// Display name.
    pub name: &'static str,
    /// Its portal admin: (e-mail, password).
    pub admin: (&'static str, &'static str),
    /// Its full-access API client.
    pub client: DemoClient,
    /// Its sandbox client (`sandbox:write`: drives the sandbox lifecycle).
    pub sandbox_client: DemoClient,
    /// Its merchants: (name, legal name, status, onboarding status, crypto enabled).
    pub merchants: &'static [(&'static str, &'static str, &'static str, &'static str, bool)],
}

/// The demo institutions, in id order (ids 1, 2, ...).
pub const INSTITUTIONS: &[DemoInstitution] = &[
    DemoInstitution {
        name: "Northwind Payments",
        admin: ("admin@northwind.example", "Northwind-Portal-Demo-2026"),
        client: DemoClient {
            client_id: "cli_demo_northwind",
            client_secret: "sk_live_STWHmccuqJOlqc0xSilXUIi_RVJ5RCQC0eP4oOoWNCo",
            name: "Northwind back office",
            scopes: &[Scope::TransactionsRead, Scope::MerchantsRead],
        },
        sandbox_client: DemoClient {
            client_id: "cli_demo_northwind_sandbox",
            client_secret: "sk_live_rzress-wPQWrAuOhtKU8GWm2tnda-sPwRZYmu56h-Z0",
            name: "Northwind sandbox scripts",
            scopes: &[Scope::TransactionsRead, Scope::SandboxWrite],
        },
        merchants: &[
            (
                "Alpine Outfitters",
                "Alpine Outfitters GmbH",
                "active",
                "completed",
                true,
            ),
            (
                "Harbor Coffee",
                "Harbor Coffee Roasters Ltd",
                "active",
                "completed",
                true,
            ),
            (
                "Lumen Books",
                "Lumen Books B.V.",
                "active",
                "completed",
                true,
            ),
            (
                "Pixel Forge",
                "Pixel Forge Studios SAS",
                "active",
                "completed",
                false,
            ),
            (
                "Quartz Audio",
                "Quartz Audio AB",
                "suspended",
                "completed",
                true,
            ),
            (
                "Nimbus Travel",
                "Nimbus Travel S.L.",
                "active",
                "in_review",
                false,
            ),
        ],
    },
    DemoInstitution {
        name: "Globex Merchant Services",
        admin: ("admin@globex.example", "Globex-Portal-Demo-2026"),
        client: DemoClient {
            client_id: "cli_demo_globex",
            client_secret: "sk_live_NRL_V26iE0mwJFbtKYny0-QekTmkfUQjUihnMUNpxUs",
            name: "Globex reconciliation",
            scopes: &[Scope::TransactionsRead, Scope::MerchantsRead],
        },
        sandbox_client: DemoClient {
            client_id: "cli_demo_globex_sandbox",
            client_secret: "sk_live_lDRjoTxC3MbeP2QhpGZNDDUk1QOu1tsUm8GBtHwk29s",
            name: "Globex sandbox scripts",
            scopes: &[Scope::TransactionsRead, Scope::SandboxWrite],
        },
        merchants: &[
            (
                "Cedar Home",
                "Cedar Home Furnishings Inc.",
                "active",
                "completed",
                true,
            ),
            (
                "Orbit Games",
                "Orbit Games Ltd",
                "active",
                "completed",
                true,
            ),
            (
                "Sable Fashion",
                "Sable Fashion S.r.l.",
                "active",
                "completed",
                true,
            ),
            (
                "Tern Electronics",
                "Tern Electronics Pte. Ltd.",
                "disabled",
                "completed",
                true,
            ),
            (
                "Willow Florists",
                "Willow Florists LLC",
                "active",
                "pending",
                false,
            ),
        ],
    },
];

/// A client of the first institution limited to `transactions:read`.
pub const LIMITED_CLIENT: DemoClient = DemoClient {
    client_id: "cli_demo_northwind_reports",
    client_secret: "sk_live_VeC9wWGJIawhWNSwO2XoGwKC9vSU8h7TbSW_jLht6yg",
    name: "Northwind reporting (transactions only)",
    scopes: &[Scope::TransactionsRead],
};

/// Demo transactions in all.
pub const DEMO_TRANSACTIONS: usize = 700;

/// `edge-api/seed/demo-credentials.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CredentialsFile {
    /// Where the local worker listens.
    pub base_url: String,
    /// Each demo institution.
    pub institutions: Vec<InstitutionCredentials>,
    /// The transactions-only client.
    pub limited_client: LimitedClient,
}

/// One institution in the credentials file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstitutionCredentials {
    /// Institution name.
    pub name: String,
    /// Public client id.
    pub client_id: String,
    /// Client secret.
    pub client_secret: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The sandbox client's id (`sandbox:write`).
    pub sandbox_client_id: String,
    /// The sandbox client's secret.
    pub sandbox_client_secret: String,
    /// Its merchants' ids.
    pub merchant_ids: Vec<i64>,
    /// Its merchants, with their publishable keys.
    pub merchants: Vec<MerchantKey>,
    /// The portal admin's e-mail.
    pub admin_email: String,
    /// The portal admin's password.
    pub admin_password: String,
}

/// A demo merchant's publishable key, and whether checkout will take payments for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MerchantKey {
    /// Merchant id.
    pub id: i64,
    /// Display name.
    pub name: String,
    /// Publishable key for checkout.js.
    pub public_key: String,
    /// Active, onboarded and crypto-enabled.
    pub can_take_payments: bool,
}

/// The limited client in the credentials file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LimitedClient {
    /// Public client id.
    pub client_id: String,
    /// Client secret.
    pub client_secret: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Name of the owning institution.
    pub institution: String,
}

fn scopes(list: &[Scope]) -> String {
    list.iter()
        .copied()
        .collect::<shared_types::ScopeSet>()
        .to_string()
}

/// Whether the database already holds data.
pub fn is_seeded(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM institutions)", [], |r| {
        r.get(0)
    })
}

/// Loads the demo data into an empty, migrated database and returns the credentials file.
pub fn seed(conn: &mut Connection, base_url: &str) -> rusqlite::Result<CredentialsFile> {
    let mut rng = ChaCha8Rng::seed_from_u64(20261121);
    let tx = conn.transaction()?;
    let created = "2026-06-01T09:00:00Z";
    let mut institutions = Vec::new();
    let mut sellers: Vec<(i64, i64)> = Vec::new();
    for (index, institution) in INSTITUTIONS.iter().enumerate() {
        let institution_id = index as i64 + 1;
        tx.execute(
            "INSERT INTO institutions (id, name, created_at) VALUES (?1, ?2, ?3)",
            params![institution_id, institution.name, created],
        )?;
        insert_client(&tx, institution_id, &institution.client, created)?;
        insert_client(&tx, institution_id, &institution.sandbox_client, created)?;
        let (admin_email, admin_password) = institution.admin;
        tx.execute(
            payrail_credentials::sql::INSERT_PORTAL_ADMIN,
            params![
                institution_id,
                admin_email,
                format!("{} admin", institution.name),
                crate::secrets::password_hash(admin_password),
                created
            ],
        )?;
        let mut merchant_ids = Vec::new();
        let mut merchants = Vec::new();
        for (name, legal, status, onboarding, crypto) in institution.merchants {
            let id = insert_merchant(
                &tx,
                &mut rng,
                institution_id,
                name,
                legal,
                status,
                onboarding,
                *crypto,
            )?;
            if *onboarding == "completed" {
                sellers.push((institution_id, id));
                add_wallets_and_origins(&tx, id, base_url, created)?;
            }
            merchant_ids.push(id);
            merchants.push(MerchantKey {
                id,
                name: (*name).to_owned(),
                public_key: tx.query_row(
                    "SELECT public_key FROM merchants WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )?,
                can_take_payments: *status == "active" && *onboarding == "completed" && *crypto,
            });
        }
        institutions.push(InstitutionCredentials {
            name: institution.name.to_owned(),
            client_id: institution.client.client_id.to_owned(),
            client_secret: institution.client.client_secret.to_owned(),
            scopes: institution
                .client
                .scopes
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            sandbox_client_id: institution.sandbox_client.client_id.to_owned(),
            sandbox_client_secret: institution.sandbox_client.client_secret.to_owned(),
            merchant_ids,
            merchants,
            admin_email: admin_email.to_owned(),
            admin_password: admin_password.to_owned(),
        });
    }
    insert_client(&tx, 1, &LIMITED_CLIENT, created)?;

    let start = time::parse_unix("2026-07-01T00:00:00Z").expect("valid");
    let end = time::parse_unix("2026-11-20T18:00:00Z").expect("valid");
    let mut instants: Vec<i64> = (0..DEMO_TRANSACTIONS)
        .map(|_| rng.gen_range(start..end))
        .collect();
    instants.sort_unstable();
    insert_transactions(&tx, &mut rng, &sellers, &instants, 0)?;
    tx.commit()?;

    Ok(CredentialsFile {
        base_url: base_url.to_owned(),
        institutions,
        limited_client: LimitedClient {
            client_id: LIMITED_CLIENT.client_id.to_owned(),
            client_secret: LIMITED_CLIENT.client_secret.to_owned(),
            scopes: LIMITED_CLIENT
                .scopes
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            institution: INSTITUTIONS[0].name.to_owned(),
        },
    })
}

/// Settlement wallets of onboarded demo merchants, one per network (well-formed addresses that
/// belong to nobody: EIP-55's own example, BIP-173's, and so on).
pub const DEMO_WALLETS: &[(&str, &str)] = &[
    ("arbitrum", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"),
    ("base", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"),
    ("bitcoin", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"),
    ("ethereum", "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"),
    ("polygon", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"),
    ("solana", "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"),
    ("tron", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"),
];

/// The return origins of demo merchants: the local worker itself (its demo shop) and the shop
/// the tests' orders return to.
fn demo_origins(base_url: &str) -> Vec<String> {
    let mut origins = vec!["https://shop.example".to_owned()];
    if let Some(origin) = base_url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest)))
    {
        origins.push(origin);
    }
    origins
}

fn add_wallets_and_origins(
    tx: &SqlTx<'_>,
    merchant_id: i64,
    base_url: &str,
    created: &str,
) -> rusqlite::Result<()> {
    for (network, address) in DEMO_WALLETS {
        tx.execute(
            "INSERT INTO merchant_wallets (merchant_id, network, address, updated_at) \
             VALUES (?1, ?2, ?3, ?4)",
            params![merchant_id, network, address, created],
        )?;
    }
    for origin in demo_origins(base_url) {
        tx.execute(
            "INSERT INTO merchant_origins (merchant_id, origin, created_at) VALUES (?1, ?2, ?3)",
            params![merchant_id, origin, created],
        )?;
    }
    Ok(())
}

/// Adds `count` transactions after the newest one, spread over every institution's onboarded
/// merchants (and three bulk institutions with 25 merchants each, created on first use), in one
/// SQLite transaction. For benchmarks: a million rows take seconds.
pub fn bulk(conn: &mut Connection, count: usize, seed: u64) -> rusqlite::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let tx = conn.transaction()?;
    let created = "2026-06-01T09:00:00Z";
    for k in 1..=3 {
        let name = format!("Bulk Institution {k}");
        let exists: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM institutions WHERE name = ?1)",
            params![name],
            |r| r.get(0),
        )?;
        if exists {
            continue;
        }
        tx.execute(
            "INSERT INTO institutions (name, created_at) VALUES (?1, ?2)",
            params![name, created],
        )?;
        let institution_id = tx.last_insert_rowid();
        for m in 1..=25 {
            let name = format!("Bulk Merchant {k}-{m}");
            insert_merchant(
                &tx,
                &mut rng,
                institution_id,
                &name,
                &format!("{name} Ltd"),
                "active",
                "completed",
                true,
            )?;
        }
    }
    let sellers: Vec<(i64, i64)> = {
        let mut stmt = tx.prepare(
            "SELECT institution_id, id FROM merchants WHERE onboarding_status = 'completed' \
             ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let newest: Option<String> =
        tx.query_row("SELECT max(created_at) FROM transactions", [], |r| r.get(0))?;
    let mut at = newest
        .and_then(|t| time::parse_unix(&t))
        .unwrap_or_else(|| time::parse_unix("2025-01-01T00:00:00Z").expect("valid"));
    let instants: Vec<i64> = (0..count)
        .map(|_| {
            at += rng.gen_range(0..4);
            at
        })
        .collect();
    let first_id: i64 = tx.query_row(
        "SELECT coalesce(max(id), 0) + 1 FROM transactions",
        [],
        |r| r.get(0),
    )?;
    insert_transactions(&tx, &mut rng, &sellers, &instants, first_id - 1)?;
    tx.commit()
}

fn insert_client(
    tx: &SqlTx<'_>,
    institution_id: i64,
    client: &DemoClient,
    created: &str,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO api_clients (institution_id, client_id, name, secret_hash, scopes, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            institution_id,
            client.client_id,
            client.name,
            secret_hash(client.client_secret),
            scopes(client.scopes),
            created
        ],
    )
    .map(drop)
}

#[allow(clippy::too_many_arguments)]
fn insert_merchant(
    tx: &SqlTx<'_>,
    rng: &mut ChaCha8Rng,
    institution_id: i64,
    name: &str,
    legal: &str,
    status: &str,
    onboarding: &str,
    crypto: bool,
) -> rusqlite::Result<i64> {
    let slug: String = name
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    // Demo keys are readable and stable (the demo shop page embeds one); bulk ones are random.
    let key: String = if institution_id <= INSTITUTIONS.len() as i64 {
        let words: String = name.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        format!("{:0<24}", format!("demo{words}"))
    } else {
        (0..24)
            .map(|_| {
                *b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                    .choose(rng)
                    .expect("non-empty") as char
            })
            .collect()
    };
    let created = time::format_unix(
        time::parse_unix("2026-06-01T09:00:00Z").expect("valid") + rng.gen_range(0..2_000_000),
    )
    .expect("in range");
    tx.execute(
        "INSERT INTO merchants (institution_id, name, legal_name, email, public_key, \
         psp_reference_id, status, onboarding_status, crypto_enabled, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            institution_id,
            name,
            legal,
            format!("payments@{slug}.example"),
            format!("pk_live_{key}"),
            format!("PSP-{institution_id}-{}", slug.to_uppercase()),
            status,
            onboarding,
            crypto,
            created
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

/// (asset, payment networks) the demo shows.
const ASSETS: &[(&str, &[&str])] = &[
    ("USDC", &["ethereum", "polygon", "solana", "base"]),
    ("USDT", &["ethereum", "tron", "polygon"]),
    ("ETH", &["ethereum", "arbitrum", "base"]),
    ("BTC", &["bitcoin"]),
    ("SOL", &["solana"]),
];
const CURRENCIES: &[&str] = &["EUR", "USD", "GBP", "CHF"];
const FIRST_NAMES: &[&str] = &[
    "ada", "ben", "chloe", "dmitri", "elena", "farid", "grace", "hiro", "ines", "jonas", "kemi",
    "lucia", "mateo", "nora", "omar", "priya",
];
const LAST_NAMES: &[&str] = &[
    "lovelace", "okafor", "schmidt", "tanaka", "rossi", "dubois", "nguyen", "silva", "kowalski",
    "haddad",
];

fn money(cents: i64) -> String {
    Decimal::new(cents, 2).to_string()
}

fn tx_hash(rng: &mut ChaCha8Rng, network: &str) -> String {
    let bytes: [u8; 32] = rng.gen();
    match network {
        "bitcoin" | "tron" => hex::encode(bytes),
        "solana" => {
            let alphabet = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
            (0..88)
                .map(|_| *alphabet.choose(rng).expect("non-empty") as char)
                .collect()
        }
        _ => format!("0x{}", hex::encode(bytes)),
    }
}

fn insert_transactions(
    tx: &SqlTx<'_>,
    rng: &mut ChaCha8Rng,
    sellers: &[(i64, i64)],
    instants: &[i64],
    last_id: i64,
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare(
        "INSERT INTO transactions (id, institution_id, merchant_id, status, raw_status, \
         amount_status, asset, currency, amount_gross, amount_net, amount_expected, psp_fee, \
         gas_fee, bridge_fee, network_payment, network_settlement, tx_hash_source, tx_hash_bridge, \
         tx_hash_settlement, customer_email, external_reference, created_at, paid_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
         ?19, ?20, ?21, ?22, ?23, ?24)",
    )?;
    for (offset, &created) in instants.iter().enumerate() {
        let id = last_id + offset as i64 + 1;
        let (institution_id, merchant_id) = *sellers.choose(rng).expect("sellers exist");
        let raw = match rng.gen_range(0..100) {
            0..=14 => RawStatus::Pending,
            15..=29 => RawStatus::Succeeded,
            30..=64 => RawStatus::Paid,
            65..=71 => RawStatus::Failed,
            72..=78 => RawStatus::Expired,
            79..=89 => RawStatus::Refunded,
            _ => RawStatus::PartiallyRefunded,
        };
        let (asset, networks) = ASSETS.choose(rng).expect("assets exist");
        let network = *networks.choose(rng).expect("networks exist");
        let chose_asset = raw != RawStatus::Pending || rng.gen_bool(0.5);
        let expected = rng.gen_range(500..250_000i64);
        let landed = matches!(
            raw,
            RawStatus::Succeeded
                | RawStatus::Paid
                | RawStatus::Refunded
                | RawStatus::PartiallyRefunded
        );
        let settled = landed && raw != RawStatus::Succeeded;

        let (gross, amount_status) = if landed {
            match rng.gen_range(0..10) {
                0 => (
                    expected - rng.gen_range(1..=expected / 10),
                    Some("UNDERPAID"),
                ),
                1 => (
                    expected + rng.gen_range(1..=expected / 10),
                    Some("OVERPAID"),
                ),
                _ => (expected, Some("EXACT")),
            }
        } else {
            (0, None)
        };
        let paid_at = landed.then(|| created + rng.gen_range(60..1800));
        let settlement_network = if settled && rng.gen_bool(0.25) {
            // Bridged: settled on another network of the same asset, or to Ethereum.
            networks
                .iter()
                .copied()
                .find(|n| *n != network)
                .unwrap_or("ethereum")
        } else {
            network
        };
        let bridged = settled && settlement_network != network;
        let psp_fee = settled.then(|| (gross + 50) / 100);
        let gas_fee = settled.then(|| match network {
            "ethereum" => rng.gen_range(80..450),
            "bitcoin" => rng.gen_range(40..300),
            _ => rng.gen_range(1..25),
        });
        let bridge_fee = bridged.then(|| rng.gen_range(10..150));
        let net = settled
            .then(|| gross - psp_fee.unwrap_or(0) - gas_fee.unwrap_or(0) - bridge_fee.unwrap_or(0));
        let email = rng.gen_bool(0.7).then(|| {
            format!(
                "{}.{}@{}",
                FIRST_NAMES.choose(rng).expect("names"),
                LAST_NAMES.choose(rng).expect("names"),
                ["example.com", "example.org", "example.net"]
                    .choose(rng)
                    .expect("domains")
            )
        });
        let reference = rng
            .gen_bool(0.95)
            .then(|| format!("ORD-{merchant_id}-{:06}", id));
        let source_hash = landed.then(|| tx_hash(rng, network));
        let bridge_hash = bridged.then(|| tx_hash(rng, network));
        let settlement_hash = settled.then(|| tx_hash(rng, settlement_network));
        let updated = paid_at.map_or(created, |p| p + if settled { 3600 } else { 0 });
        let ts = |t: i64| time::format_unix(t).expect("in range");
        stmt.execute(params![
            id,
            institution_id,
            merchant_id,
            raw.normalized().as_str(),
            raw.as_str(),
            amount_status,
            chose_asset.then_some(*asset),
            CURRENCIES.choose(rng).copied(),
            landed.then(|| money(gross)),
            net.map(money),
            money(expected),
            psp_fee.map(money),
            gas_fee.map(money),
            bridge_fee.map(money),
            chose_asset.then_some(network),
            settled.then_some(settlement_network),
            source_hash,
            bridge_hash,
            settlement_hash,
            email,
            reference,
            ts(created),
            paid_at.map(ts),
            ts(updated),
        ])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_admins_log_in_with_their_demo_passwords() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::localdb::apply_migrations(&conn).unwrap();
        seed(&mut conn, "http://127.0.0.1:8787").unwrap();
        for institution in INSTITUTIONS {
            let (email, password) = institution.admin;
            let phc: String = conn
                .query_row(
                    "SELECT password_hash FROM portal_admins WHERE email = ?1",
                    [email],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(
                payrail_credentials::verify_password(password, &phc),
                "{email}"
            );
        }
    }
}
