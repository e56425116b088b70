-- Settlement and refunds on chain: the treasury pays each merchant the net of its payments, in
-- the asset and on the network they were paid in, and customers their refunds, with
-- transactions it signs itself.

-- The PSP fee per institution, in basis points of the gross (100 = 1 %, the former flat rate).
ALTER TABLE institutions ADD COLUMN psp_fee_bps INTEGER NOT NULL DEFAULT 100
    CHECK (psp_fee_bps BETWEEN 0 AND 5000);

-- Payments waiting to settle are found by this small index (succeeded: held in custody).
CREATE INDEX transactions_succeeded ON transactions (id) WHERE raw_status = 'succeeded';

-- One transfer to one merchant wallet for one or more of its payments (a batch), carried by one
-- signed transaction at a time (a replacement at a higher price keeps the nonce).
CREATE TABLE settlements (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    merchant_id     INTEGER NOT NULL REFERENCES merchants (id),
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
CREATE INDEX settlements_by_state ON settlements (state, merchant_id);

-- A payment belongs to at most one settlement that is not failed: the primary key refuses a
-- second, so two workers planning the same payment cannot both send (the loser's whole batch
-- fails). A failed settlement's claims are deleted.
CREATE TABLE settlement_claims (
    transaction_id  INTEGER PRIMARY KEY REFERENCES transactions (id),
    settlement_id   TEXT NOT NULL REFERENCES settlements (id)
);
CREATE INDEX settlement_claims_by_settlement ON settlement_claims (settlement_id);

-- A refund to a customer: an amount of the order currency, paid in the payment's asset on its
-- network at the payment's own quote, to an address the customer gave.
CREATE TABLE refunds (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
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
) WITHOUT ROWID;
CREATE UNIQUE INDEX refunds_by_key ON refunds (institution_id, idempotency_key);
CREATE INDEX refunds_by_transaction ON refunds (transaction_id);
CREATE INDEX refunds_by_state ON refunds (state);

-- Every transaction the treasury signed, as signed (the raw bytes, to broadcast again), for a
-- settlement or a refund.
CREATE TABLE chain_sends (
    id              TEXT PRIMARY KEY,
    settlement_id   TEXT REFERENCES settlements (id),
    refund_id       TEXT REFERENCES refunds (id),
    network         TEXT NOT NULL,
    -- The treasury address (lower-case hex) and its nonce.
    sender          TEXT NOT NULL,
    nonce           INTEGER NOT NULL,
    -- Gas limit, and the fixed price per gas in wei (max fee = tip: the price is known when
    -- signing, so the fee charged is the fee paid).
    gas_limit       INTEGER NOT NULL,
    gas_price       TEXT NOT NULL,
    -- What the coin's price in the order currencies came from (converting the gas).
    rate_source     TEXT NOT NULL,
    -- Base units transferred.
    units           TEXT NOT NULL,
    tx_hash         TEXT NOT NULL UNIQUE,
    raw             TEXT NOT NULL,
    -- live: out, not yet at depth; replaced: a higher-priced one with its nonce took over;
    -- confirmed: at depth, succeeded; failed: mined and reverted (its nonce used); dropped: its
    -- nonce was used by another transaction.
    state           TEXT NOT NULL
        CHECK (state IN ('live', 'replaced', 'confirmed', 'failed', 'dropped')),
    -- The newest block when it was last broadcast; a live one still unmined many blocks later is
    -- replaced.
    sent_block      INTEGER NOT NULL,
    block_number    INTEGER,
    gas_used        TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    CHECK ((settlement_id IS NULL) <> (refund_id IS NULL))
) WITHOUT ROWID;
-- The nonce allocator: a nonce is taken by the batch that stores its signed transaction (so
-- none is ever skipped), and never by two transactions that can both be mined.
CREATE UNIQUE INDEX chain_sends_nonce ON chain_sends (network, sender, nonce)
    WHERE state IN ('live', 'confirmed', 'failed');
CREATE INDEX chain_sends_by_state ON chain_sends (state, settlement_id);
CREATE INDEX chain_sends_by_refund ON chain_sends (refund_id, state);

-- What each payment of a transaction's transfer was charged and paid (amounts in the order
-- currency as decimal text; units in the asset's base units).
CREATE TABLE settlement_items (
    send_id         TEXT NOT NULL REFERENCES chain_sends (id),
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    psp_fee         TEXT NOT NULL,
    gas_fee         TEXT NOT NULL,
    net             TEXT NOT NULL,
    units           TEXT NOT NULL,
    PRIMARY KEY (send_id, transaction_id)
) WITHOUT ROWID;
CREATE INDEX settlement_items_by_transaction ON settlement_items (transaction_id);

-- Why a payment held in custody is not settling (no wallet on its network, the treasury short
-- of the asset or of gas, ...): shown on the payment, cleared when it settles.
CREATE TABLE settlement_holds (
    transaction_id  INTEGER PRIMARY KEY REFERENCES transactions (id),
    reason          TEXT NOT NULL,
    since           INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
