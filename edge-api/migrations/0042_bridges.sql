-- Settlement across networks with CCTP (docs/CCTP.md): the treasury burns the merchant's USDC on
-- the network it was paid on (the source) and mints it to the merchant's wallet on the network
-- the merchant chose (the destination). Both legs are the treasury's transactions
-- (`chain_sends`, under the settlement), and `bridges` follows the transfer between them.

-- A transaction that calls a contract (a burn, a mint) rather than paying a wallet: the contract
-- and the call data (0x hex) it was signed with, so a replacement signs the same call; and which
-- leg of its settlement's transfer it is. NULL for a settlement paid on its own network, and for
-- refunds.
ALTER TABLE chain_sends ADD COLUMN call_to TEXT;
ALTER TABLE chain_sends ADD COLUMN call_data TEXT;
ALTER TABLE chain_sends ADD COLUMN leg TEXT CHECK (leg IN ('burn', 'mint'));

-- One per settlement paid across. What the burn asked (the amount, the most fee, the finality,
-- the recipient on the destination), then what came of it:
--   burning:   the burn is out, not yet final on the source network;
--   attesting: the burn is final: the attestation is awaited, then the mint is signed;
--   minting:   the mint is out on the destination network;
--   minted:    the message was received on the destination (by the treasury's mint or anyone's):
--              the settlement is confirmed;
--   failed:    the burn reverted (the settlement failed; its payments settle again).
CREATE TABLE bridges (
    settlement_id        TEXT PRIMARY KEY REFERENCES settlements (id),
    institution_id       INTEGER NOT NULL,
    source_network       TEXT NOT NULL,
    destination_network  TEXT NOT NULL,
    -- The USDC contract burnt on the source (lower-case hex).
    token                TEXT NOT NULL,
    -- Base units burnt, the most fee accepted out of them, and the finality asked (1000 fast,
    -- 2000 standard).
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
    -- The attested message and its attestation (0x hex), and the message's nonce.
    message              TEXT,
    attestation          TEXT,
    nonce                TEXT,
    -- The transaction that received the message on the destination (the treasury's or a third
    -- party's) and the fee it collected, in base units.
    mint_tx_hash         TEXT,
    fee                  TEXT,
    -- Why it waits, when it does.
    note                 TEXT,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX bridges_by_state ON bridges (state, updated_at);
