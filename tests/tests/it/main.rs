//! The black-box tests, in one test binary (one link, one process): a module per behaviour,
//! indexed in tests/README.md. Most modules share [`payrail_tests::Worker::shared`]; a module
//! that other tests on one worker would disturb, or that would disturb them, has a worker of its
//! own ([`payrail_tests::Worker::own`]), and the modules that need special settings (production
//! mode, a chain, another webhook schedule) start theirs. One module alone:
//! `cargo test -p payrail-tests --test it checkout::`.

mod balances;
mod books;
mod bridge_settlement;
mod browser;
mod cctp_contracts;
mod chain_browser;
mod chain_payments;
mod checkout;
mod contract;
mod deposit_addresses;
mod docs;
mod events;
mod expiry;
mod faults;
mod lifecycle;
mod limits;
mod local_chains;
mod local_cron;
mod merchants;
mod meter;
mod networks;
mod node_trust;
mod onboarding;
mod onboarding_browser;
mod partner_tools;
mod payments_view;
mod portal;
mod portal_browser;
mod portal_overview;
mod production;
mod races;
mod read_sessions;
mod retention;
mod roles;
mod rotation;
mod screening;
mod service;
mod settlement;
mod shard;
mod stranded;
mod sweep;
mod token;
mod topup;
mod transactions;
mod usdc_across;
mod wallet_browser;
mod webhooks;
mod webhooks_disable;
mod webhooks_timeout;
