-- Watching EVM chains for payments: one watch per deposit address given out (a session has one
-- per way to pay the customer picked), with the quote it was given under and how far its chain
-- has been read; and every ERC-20 transfer seen to a watched address, of the expected token or
-- not (never silently lost).

CREATE TABLE deposit_watches (
    -- The deposit address, lower-case hex: what transfer logs name, and the BIP32 index of
    -- the custody key it was derived at.
    address         TEXT PRIMARY KEY,
    derivation_index INTEGER NOT NULL,
    session_id      TEXT NOT NULL REFERENCES checkout_sessions (id),
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- The token contract, lower-case hex, and its decimals.
    token           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- The quote: the crypto amount asked (decimal text and base units), the rate (order
    -- currency per unit of the asset, decimal text), where the rate came from, and when.
    crypto_amount   TEXT NOT NULL,
    base_units      TEXT NOT NULL,
    rate            TEXT NOT NULL,
    rate_source     TEXT NOT NULL,
    quoted_at       INTEGER NOT NULL,
    -- Logs are read from from_block; every block up to scanned_to is final and its transfers
    -- are stored as confirmed. head_block is the newest block at the last check.
    from_block      INTEGER NOT NULL,
    scanned_to      INTEGER NOT NULL,
    head_block      INTEGER NOT NULL,
    -- The last check taken (Unix seconds), the last one that read the chain, and, when the
    -- last check could not read it, why.
    checked_at      INTEGER NOT NULL DEFAULT 0,
    read_at         INTEGER NOT NULL DEFAULT 0,
    node_error      TEXT,
    -- Watched until then: the checkout's end plus the window for late payments.
    watch_until     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
) WITHOUT ROWID;
-- One address per way to pay of a session: a concurrent second one fails its batch.
CREATE UNIQUE INDEX deposit_watches_by_session ON deposit_watches (session_id, network, asset);
CREATE INDEX deposit_watches_due ON deposit_watches (watch_until, checked_at);

CREATE TABLE chain_transfers (
    network         TEXT NOT NULL,
    tx_hash         TEXT NOT NULL,
    log_index       INTEGER NOT NULL,
    -- The watched address it went to, and that address's session.
    address         TEXT NOT NULL REFERENCES deposit_watches (address),
    session_id      TEXT NOT NULL,
    -- The token contract (lower-case hex) and the amount in its base units (decimal text; NULL
    -- when it exceeds 128 bits).
    token           TEXT NOT NULL,
    amount          TEXT,
    block_number    INTEGER NOT NULL,
    -- 1 once the block is at the network's confirmation depth: final, never deleted. Rows still
    -- at 0 are replaced at every check, so a transfer reorged away disappears.
    confirmed       INTEGER NOT NULL,
    -- `payment` (the quoted token, a positive amount: counted), `no_value` (the quoted token
    -- with a zero or unreadable amount, as address-poisoning spam sends) or `unexpected_token`
    -- (another contract); only payments are credited, the rest is recorded for review.
    kind            TEXT NOT NULL,
    -- 1 when its block came after the checkout's end.
    after_expiry    INTEGER NOT NULL,
    seen_at         INTEGER NOT NULL,
    PRIMARY KEY (network, tx_hash, log_index)
) WITHOUT ROWID;
CREATE INDEX chain_transfers_by_address ON chain_transfers (address, confirmed);
CREATE INDEX chain_transfers_by_session ON chain_transfers (session_id);
