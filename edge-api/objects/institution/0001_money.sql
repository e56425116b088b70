-- An institution's object: its money tables as they are in D1 (the same columns in the same
-- order, the same indexes, the same checks; a test compares them), without the foreign keys
-- that point out of the object (to the directory's institutions and merchants, to the
-- treasury's sends): those rows live in other stores. Applied by the object itself before its
-- first statement, recorded in `object_migrations`.
--
-- The object knows its institution: `object_identity` holds it (written with the first
-- request, which names it), and every money table that carries the institution refuses a row
-- of any other, on insert and on update (idempotency keys and delivery attempts are reached
-- through their merchant and delivery).

CREATE TABLE object_identity (
    only_row        INTEGER PRIMARY KEY CHECK (only_row = 1),
    institution_id  INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);

CREATE TABLE transactions (
    -- Allocated in creation order: newest first is id descending.
    id                  INTEGER PRIMARY KEY,
    institution_id      INTEGER NOT NULL,
    merchant_id         INTEGER NOT NULL,
    status              TEXT NOT NULL
        CHECK (status IN ('pending', 'paid', 'failed', 'refunded', 'partially_refunded')),
    raw_status          TEXT NOT NULL
        CHECK (raw_status IN ('pending', 'succeeded', 'paid', 'failed', 'expired', 'refunded',
                              'partially_refunded')),
    amount_status       TEXT CHECK (amount_status IN ('EXACT', 'UNDERPAID', 'OVERPAID')),
    asset               TEXT,
    currency            TEXT,
    -- Decimal strings, never floats.
    amount_gross        TEXT,
    amount_net          TEXT,
    amount_expected     TEXT,
    psp_fee             TEXT,
    gas_fee             TEXT,
    bridge_fee          TEXT,
    network_payment     TEXT,
    network_settlement  TEXT,
    tx_hash_source      TEXT,
    tx_hash_bridge      TEXT,
    tx_hash_settlement  TEXT,
    customer_email      TEXT,
    external_reference  TEXT,
    created_at          TEXT NOT NULL,
    paid_at             TEXT,
    updated_at          TEXT NOT NULL
, amount_refunded TEXT, version INTEGER NOT NULL DEFAULT 0, late_rate TEXT, late_rate_source TEXT);

CREATE INDEX transactions_by_created ON transactions (created_at, id);

CREATE INDEX transactions_by_institution ON transactions (institution_id, id);

CREATE INDEX transactions_by_institution_created
    ON transactions (institution_id, created_at, status, currency, amount_gross);

CREATE INDEX transactions_by_merchant ON transactions (institution_id, merchant_id, id);

CREATE INDEX transactions_by_merchant_status
    ON transactions (institution_id, merchant_id, status, id);

CREATE INDEX transactions_by_reference ON transactions (institution_id, external_reference, id);

CREATE INDEX transactions_by_settlement_hash
    ON transactions (institution_id, tx_hash_settlement) WHERE tx_hash_settlement IS NOT NULL;

CREATE INDEX transactions_by_source_hash
    ON transactions (institution_id, tx_hash_source) WHERE tx_hash_source IS NOT NULL;

CREATE INDEX transactions_by_status ON transactions (institution_id, status, id);

CREATE INDEX transactions_pending ON transactions (id) WHERE raw_status = 'pending';

CREATE INDEX transactions_succeeded ON transactions (id) WHERE raw_status = 'succeeded';

CREATE TRIGGER transactions_own_institution BEFORE INSERT ON transactions
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: transactions.institution_id is this object''s institution'); END;
CREATE TRIGGER transactions_keeps_institution BEFORE UPDATE OF institution_id ON transactions
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: transactions.institution_id is this object''s institution'); END;

CREATE TABLE payment_parts (
    institution_id  INTEGER NOT NULL,
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    -- 0: the way to pay the payment is recorded in (its first confirmed transfer's); then the
    -- others in the order their money came.
    part            INTEGER NOT NULL CHECK (part >= 0),
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- The token contract (lower-case hex) or `native`, and its decimals.
    token           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- Its share of the payment's gross, in the order currency (decimal text, the currency's
    -- minor unit); the parts add up to the gross exactly.
    gross           TEXT NOT NULL,
    -- The rate it settles and refunds at: `expected` of the order currency is worth
    -- `crypto_amount` of the asset (the quote it was paid under, or, when some of it came after
    -- the checkout's end or it came under more than one quote, its value over its amount
    -- and '1'), with where that rate came from when it is not the quote.
    expected        TEXT NOT NULL,
    crypto_amount   TEXT NOT NULL,
    rate_source     TEXT,
    PRIMARY KEY (transaction_id, part),
    UNIQUE (transaction_id, network, asset)
);

CREATE TRIGGER payment_parts_own_institution BEFORE INSERT ON payment_parts
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_parts.institution_id is this object''s institution'); END;
CREATE TRIGGER payment_parts_keeps_institution BEFORE UPDATE OF institution_id ON payment_parts
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_parts.institution_id is this object''s institution'); END;

CREATE TABLE checkout_sessions (
    -- `cs_` + 256 random bits: the hosted page URL is a capability.
    id               TEXT PRIMARY KEY,
    transaction_id   INTEGER NOT NULL UNIQUE REFERENCES transactions (id),
    merchant_id      INTEGER NOT NULL,
    title            TEXT NOT NULL,
    redirect_url     TEXT NOT NULL,
    -- The quote: what the customer sends, where, in which asset on which network.
    asset            TEXT NOT NULL,
    network          TEXT NOT NULL,
    deposit_address  TEXT NOT NULL,
    crypto_amount    TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
, deposit_index INTEGER, locale TEXT, institution_id INTEGER) WITHOUT ROWID;

CREATE INDEX checkout_sessions_by_deposit_address ON checkout_sessions (deposit_address);

CREATE INDEX checkout_sessions_by_expiry ON checkout_sessions (expires_at);

CREATE TRIGGER checkout_sessions_own_institution BEFORE INSERT ON checkout_sessions
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: checkout_sessions.institution_id is this object''s institution'); END;
CREATE TRIGGER checkout_sessions_keeps_institution BEFORE UPDATE OF institution_id ON checkout_sessions
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: checkout_sessions.institution_id is this object''s institution'); END;

CREATE TABLE idempotency_keys (
    merchant_id     INTEGER NOT NULL,
    key             TEXT NOT NULL,
    -- Hex SHA-256 of the options that created the session.
    fingerprint     TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES checkout_sessions (id),
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, key)
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

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
, institution_id INTEGER) WITHOUT ROWID;

CREATE UNIQUE INDEX deposit_watches_by_session ON deposit_watches (session_id, network, asset);

CREATE INDEX deposit_watches_due ON deposit_watches (watch_until, checked_at);

CREATE TRIGGER deposit_watches_own_institution BEFORE INSERT ON deposit_watches
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: deposit_watches.institution_id is this object''s institution'); END;
CREATE TRIGGER deposit_watches_keeps_institution BEFORE UPDATE OF institution_id ON deposit_watches
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: deposit_watches.institution_id is this object''s institution'); END;

CREATE TABLE "chain_transfers" (
    network         TEXT NOT NULL,
    tx_hash         TEXT NOT NULL,
    log_index       INTEGER NOT NULL,
    address         TEXT NOT NULL REFERENCES deposit_watches (address),
    session_id      TEXT NOT NULL,
    token           TEXT NOT NULL,
    amount          TEXT,
    block_number    INTEGER NOT NULL,
    confirmed       INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    after_expiry    INTEGER NOT NULL,
    seen_at         INTEGER NOT NULL, institution_id INTEGER, rate TEXT, rate_source TEXT,
    PRIMARY KEY (network, tx_hash, log_index, address)
) WITHOUT ROWID;

CREATE INDEX chain_transfers_by_address ON chain_transfers (address, confirmed);

CREATE INDEX chain_transfers_by_hash ON chain_transfers (tx_hash);

CREATE INDEX chain_transfers_by_session ON chain_transfers (session_id);

CREATE TRIGGER chain_transfers_own_institution BEFORE INSERT ON chain_transfers
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: chain_transfers.institution_id is this object''s institution'); END;
CREATE TRIGGER chain_transfers_keeps_institution BEFORE UPDATE OF institution_id ON chain_transfers
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: chain_transfers.institution_id is this object''s institution'); END;

CREATE TABLE settlements (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    merchant_id     INTEGER NOT NULL,
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- The token contract (lower-case hex) or 'native', and the merchant's wallet it pays.
    token           TEXT NOT NULL,
    wallet          TEXT NOT NULL,
    -- sending: a transaction is out; confirmed: at depth, its payments are (being) marked paid;
    -- failed: reverted or dropped on chain, its payments released to settle again.
    state           TEXT NOT NULL CHECK (state IN ('sending', 'confirmed', 'failed')),
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX settlements_by_institution ON settlements (institution_id, state, merchant_id);

CREATE INDEX settlements_by_state ON settlements (state, merchant_id);

CREATE TRIGGER settlements_own_institution BEFORE INSERT ON settlements
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlements.institution_id is this object''s institution'); END;
CREATE TRIGGER settlements_keeps_institution BEFORE UPDATE OF institution_id ON settlements
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlements.institution_id is this object''s institution'); END;

CREATE TABLE "settlement_claims" (
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    part            INTEGER NOT NULL DEFAULT 0,
    settlement_id   TEXT NOT NULL REFERENCES settlements (id),
    institution_id  INTEGER,
    PRIMARY KEY (transaction_id, part)
);

CREATE INDEX settlement_claims_by_settlement ON settlement_claims (settlement_id);

CREATE TRIGGER settlement_claims_own_institution BEFORE INSERT ON settlement_claims
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_claims.institution_id is this object''s institution'); END;
CREATE TRIGGER settlement_claims_keeps_institution BEFORE UPDATE OF institution_id ON settlement_claims
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_claims.institution_id is this object''s institution'); END;

CREATE TABLE settlement_items (
    send_id         TEXT NOT NULL,
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    psp_fee         TEXT NOT NULL,
    gas_fee         TEXT NOT NULL,
    net             TEXT NOT NULL,
    units           TEXT NOT NULL, psp_units TEXT NOT NULL DEFAULT '0', gas_units TEXT NOT NULL DEFAULT '0', institution_id INTEGER, part INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (send_id, transaction_id)
) WITHOUT ROWID;

CREATE INDEX settlement_items_by_transaction ON settlement_items (transaction_id);

CREATE TRIGGER settlement_items_own_institution BEFORE INSERT ON settlement_items
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_items.institution_id is this object''s institution'); END;
CREATE TRIGGER settlement_items_keeps_institution BEFORE UPDATE OF institution_id ON settlement_items
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_items.institution_id is this object''s institution'); END;

CREATE TABLE settlement_holds (
    transaction_id  INTEGER PRIMARY KEY REFERENCES transactions (id),
    reason          TEXT NOT NULL,
    since           INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
, institution_id INTEGER);

CREATE TRIGGER settlement_holds_own_institution BEFORE INSERT ON settlement_holds
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_holds.institution_id is this object''s institution'); END;
CREATE TRIGGER settlement_holds_keeps_institution BEFORE UPDATE OF institution_id ON settlement_holds
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: settlement_holds.institution_id is this object''s institution'); END;

CREATE TABLE refunds (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    -- The request's Idempotency-Key: the same key again is the same refund.
    idempotency_key TEXT NOT NULL,
    -- Order currency (decimal text), and the same in minor units (what the guards add up).
    amount          TEXT NOT NULL,
    amount_minor    INTEGER NOT NULL CHECK (amount_minor > 0),
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- The token contract (lower-case hex) or 'native', its decimals, and the base units sent.
    token           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    units           TEXT NOT NULL,
    -- Order currency per unit of the asset: the payment's quote.
    rate            TEXT NOT NULL,
    to_address      TEXT NOT NULL,
    -- sending: a transaction is or is about to be out; confirmed: at depth; done: the payment
    -- shows it and payment.refunded was written; failed: three transactions failed, given up.
    state           TEXT NOT NULL CHECK (state IN ('sending', 'confirmed', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    requested_by    TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
, part INTEGER NOT NULL DEFAULT 0, extra INTEGER NOT NULL DEFAULT 0 CHECK (extra IN (0, 1)), from_address TEXT) WITHOUT ROWID;

CREATE UNIQUE INDEX refunds_by_key ON refunds (institution_id, idempotency_key);

CREATE INDEX refunds_by_part ON refunds (transaction_id, part);

CREATE INDEX refunds_by_state ON refunds (state);

CREATE INDEX refunds_by_transaction ON refunds (transaction_id);

CREATE TRIGGER refunds_own_institution BEFORE INSERT ON refunds
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds.institution_id is this object''s institution'); END;
CREATE TRIGGER refunds_keeps_institution BEFORE UPDATE OF institution_id ON refunds
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds.institution_id is this object''s institution'); END;

CREATE TABLE topup_addresses (
    -- Lower-case hex: what transfer logs name.
    address          TEXT PRIMARY KEY,
    -- The BIP32 index of the deposit key it was derived at.
    derivation_index INTEGER NOT NULL UNIQUE,
    merchant_id      INTEGER NOT NULL,
    -- The merchant's institution, to scope reads and to name its account's owner.
    institution_id   INTEGER NOT NULL,
    network          TEXT NOT NULL,
    -- The newest block when it was given out: a fresh address holds nothing before it, so every
    -- asset's watch reads from here (an asset configured later too).
    from_block       INTEGER NOT NULL,
    -- The portal user who asked for it, and when (Unix seconds).
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL
) WITHOUT ROWID;

CREATE UNIQUE INDEX topup_addresses_by_merchant ON topup_addresses (merchant_id, network);

CREATE TRIGGER topup_addresses_own_institution BEFORE INSERT ON topup_addresses
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_addresses.institution_id is this object''s institution'); END;
CREATE TRIGGER topup_addresses_keeps_institution BEFORE UPDATE OF institution_id ON topup_addresses
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_addresses.institution_id is this object''s institution'); END;

CREATE TABLE topup_watches (
    address         TEXT NOT NULL REFERENCES topup_addresses (address),
    -- The token contract (lower-case hex) or `native` for the network's coin; its symbol and
    -- decimals.
    token           TEXT NOT NULL,
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- As in deposit_watches: logs are read from from_block; every block up to scanned_to is
    -- final and its transfers are stored as confirmed (and posted). head_block is the newest
    -- block at the last check.
    from_block      INTEGER NOT NULL,
    scanned_to      INTEGER NOT NULL,
    head_block      INTEGER NOT NULL,
    -- The last check taken (Unix seconds), the last one that read the chain, and, when the
    -- last check could not read it, why.
    checked_at      INTEGER NOT NULL DEFAULT 0,
    read_at         INTEGER NOT NULL DEFAULT 0,
    node_error      TEXT,
    created_at      INTEGER NOT NULL, institution_id INTEGER, confirmed_units TEXT,
    PRIMARY KEY (address, token)
) WITHOUT ROWID;

CREATE INDEX topup_watches_due ON topup_watches (checked_at);

CREATE TRIGGER topup_watches_own_institution BEFORE INSERT ON topup_watches
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_watches.institution_id is this object''s institution'); END;
CREATE TRIGGER topup_watches_keeps_institution BEFORE UPDATE OF institution_id ON topup_watches
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_watches.institution_id is this object''s institution'); END;

CREATE TABLE topup_transfers (
    network         TEXT NOT NULL,
    -- As in chain_transfers: the transaction (or, for coin sent from inside a contract call,
    -- the block's hash) and the log index (the transaction's index for coin).
    tx_hash         TEXT NOT NULL,
    log_index       INTEGER NOT NULL,
    address         TEXT NOT NULL REFERENCES topup_addresses (address),
    token           TEXT NOT NULL,
    -- Base units, decimal text (only positive amounts are recorded: nothing else credits).
    amount          TEXT NOT NULL,
    block_number    INTEGER NOT NULL,
    -- 1 once the block is at the network's confirmation depth: final, never deleted, and
    -- posted to the books in the same batch. Rows at 0 are replaced at every check, so a
    -- transfer reorged away disappears and is never credited.
    confirmed       INTEGER NOT NULL,
    seen_at         INTEGER NOT NULL, institution_id INTEGER,
    PRIMARY KEY (network, tx_hash, log_index, address, token)
) WITHOUT ROWID;

CREATE INDEX topup_transfers_by_address ON topup_transfers (address, block_number);

CREATE TRIGGER topup_transfers_own_institution BEFORE INSERT ON topup_transfers
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_transfers.institution_id is this object''s institution'); END;
CREATE TRIGGER topup_transfers_keeps_institution BEFORE UPDATE OF institution_id ON topup_transfers
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_transfers.institution_id is this object''s institution'); END;

CREATE TABLE events (
    -- `evt_` + random.
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    type            TEXT NOT NULL,
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    -- The exact JSON body every delivery of this event sends.
    payload         TEXT NOT NULL,
    created         INTEGER NOT NULL
, transaction_version INTEGER, seq INTEGER) WITHOUT ROWID;

CREATE INDEX events_by_created ON events (created);

CREATE INDEX events_by_institution ON events (institution_id, seq);

CREATE INDEX events_by_institution_transaction ON events (institution_id, transaction_id, seq);

CREATE UNIQUE INDEX events_by_seq ON events (seq);

CREATE INDEX events_by_transaction ON events (transaction_id);

CREATE INDEX events_by_type ON events (institution_id, type, seq);

CREATE TRIGGER events_own_institution BEFORE INSERT ON events
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: events.institution_id is this object''s institution'); END;
CREATE TRIGGER events_keeps_institution BEFORE UPDATE OF institution_id ON events
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: events.institution_id is this object''s institution'); END;

CREATE TABLE deliveries (
    -- `dlv_` + random.
    id               TEXT PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id),
    endpoint_id      TEXT NOT NULL,
    institution_id   INTEGER NOT NULL,
    event_type       TEXT NOT NULL,
    -- pending: an attempt is due at next_attempt_at; succeeded; failed: given up (the endpoint
    -- was disabled or deleted). Resending makes a new delivery.
    status           TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,
    last_attempt_at  INTEGER,
    -- The delivery this one resends, if any.
    redelivery_of    TEXT,
    created_at       INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, created_at);

CREATE INDEX deliveries_by_event ON deliveries (event_id);

CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at);

CREATE TRIGGER deliveries_own_institution BEFORE INSERT ON deliveries
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: deliveries.institution_id is this object''s institution'); END;
CREATE TRIGGER deliveries_keeps_institution BEFORE UPDATE OF institution_id ON deliveries
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: deliveries.institution_id is this object''s institution'); END;

CREATE TABLE delivery_attempts (
    id               INTEGER PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES deliveries (id),
    endpoint_id      TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    -- HTTP status when the receiver answered.
    status_code      INTEGER,
    -- ok, http_status, redirect, timeout, connection.
    outcome          TEXT NOT NULL,
    latency_ms       INTEGER NOT NULL,
    -- The first 4 KB of the response body.
    response_body    TEXT,
    -- When the next attempt is due (NULL after a success or when giving up).
    next_attempt_at  INTEGER
);

CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (delivery_id, attempt);

CREATE INDEX delivery_attempts_by_endpoint ON delivery_attempts (endpoint_id, id);
