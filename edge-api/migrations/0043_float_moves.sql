-- Moving the treasury's float between networks with CCTP (docs/CCTP.md, "Moving float"): the
-- operator burns the treasury's USDC on one network and mints it to the treasury's own address
-- on another, through the same path as a settlement paid across. Both legs are the treasury's
-- transactions (`chain_sends`), so they take its nonces with its other sends.

-- One per move the operator asked for, with the same columns as a settlement's bridge
-- (`bridges`) so one follower reads both:
--   burning:   the burn is out, not yet final on the source network;
--   attesting: the burn is final: the attestation is awaited, then the mint is signed;
--   minting:   the mint is out on the destination network;
--   minted:    the message was received on the destination (by the treasury's mint or anyone's):
--              the float is moved;
--   failed:    the burn reverted: nothing moved but its gas.
CREATE TABLE float_moves (
    id                   TEXT PRIMARY KEY,
    -- The operator's reference: the same reference again is the same move.
    reference            TEXT NOT NULL UNIQUE,
    source_network       TEXT NOT NULL,
    destination_network  TEXT NOT NULL,
    -- The USDC contract burnt on the source (lower-case hex).
    token                TEXT NOT NULL,
    -- Base units burnt, the most fee accepted out of them, the finality asked (1000 fast, 2000
    -- standard), and the treasury's own address the destination mints to.
    amount               TEXT NOT NULL,
    max_fee              TEXT NOT NULL,
    min_finality         INTEGER NOT NULL,
    mint_recipient       TEXT NOT NULL,
    -- The destination's newest block before the burn was signed: the message cannot be received
    -- before it, so its MessageReceived log is looked for from there.
    destination_block    INTEGER NOT NULL,
    state                TEXT NOT NULL
        CHECK (state IN ('burning', 'attesting', 'minting', 'minted', 'failed')),
    burn_tx_hash         TEXT,
    message              TEXT,
    attestation          TEXT,
    nonce                TEXT,
    mint_tx_hash         TEXT,
    fee                  TEXT,
    note                 TEXT,
    -- Who asked (the operator's tool, as it named itself).
    requested_by         TEXT NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX float_moves_by_state ON float_moves (state, updated_at);
CREATE INDEX float_moves_by_creation ON float_moves (created_at, id);

-- `chain_sends` rebuilt (SQLite cannot change a CHECK in place) so that a transaction pays
-- exactly one of a settlement, a refund or a float move; rows, columns and indexes otherwise as
-- they were. settlement_items refers to it, so its rows are copied aside, the table dropped (its
-- references left dangling, counted as deferred violations), created again under its own name
-- and filled from the copy (which resolves each of them): a row lost on the way fails the
-- migration at its commit.
PRAGMA defer_foreign_keys = true;

CREATE TABLE chain_sends_copy AS SELECT * FROM chain_sends;
DROP TABLE chain_sends;

CREATE TABLE chain_sends (
    id              TEXT PRIMARY KEY,
    settlement_id   TEXT REFERENCES settlements (id),
    refund_id       TEXT REFERENCES refunds (id),
    float_move_id   TEXT REFERENCES float_moves (id),
    network         TEXT NOT NULL,
    sender          TEXT NOT NULL,
    nonce           INTEGER NOT NULL,
    gas_limit       INTEGER NOT NULL,
    gas_price       TEXT NOT NULL,
    rate_source     TEXT NOT NULL,
    units           TEXT NOT NULL,
    tx_hash         TEXT NOT NULL UNIQUE,
    raw             TEXT NOT NULL,
    state           TEXT NOT NULL
        CHECK (state IN ('live', 'replaced', 'confirmed', 'failed', 'dropped')),
    sent_block      INTEGER NOT NULL,
    block_number    INTEGER,
    gas_used        TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    netted          TEXT NOT NULL DEFAULT '0',
    l1_fee          TEXT NOT NULL DEFAULT '0',
    call_to         TEXT,
    call_data       TEXT,
    leg             TEXT CHECK (leg IN ('burn', 'mint')),
    CHECK ((settlement_id IS NOT NULL) + (refund_id IS NOT NULL) + (float_move_id IS NOT NULL)
        = 1)
) WITHOUT ROWID;

INSERT INTO chain_sends (id, settlement_id, refund_id, network, sender, nonce, gas_limit,
    gas_price, rate_source, units, tx_hash, raw, state, sent_block, block_number, gas_used,
    error, created_at, updated_at, netted, l1_fee, call_to, call_data, leg)
SELECT id, settlement_id, refund_id, network, sender, nonce, gas_limit, gas_price, rate_source,
    units, tx_hash, raw, state, sent_block, block_number, gas_used, error, created_at,
    updated_at, netted, l1_fee, call_to, call_data, leg
FROM chain_sends_copy;
DROP TABLE chain_sends_copy;

CREATE UNIQUE INDEX chain_sends_nonce ON chain_sends (network, sender, nonce)
    WHERE state IN ('live', 'confirmed', 'failed');
CREATE INDEX chain_sends_by_state ON chain_sends (state, settlement_id);
CREATE INDEX chain_sends_by_refund ON chain_sends (refund_id, state);
CREATE INDEX chain_sends_final ON chain_sends (network, sender, block_number)
    WHERE state IN ('confirmed', 'failed');
CREATE INDEX chain_sends_by_float_move ON chain_sends (float_move_id)
    WHERE float_move_id IS NOT NULL;
