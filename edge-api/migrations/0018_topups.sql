-- Merchants' top-ups: a merchant can add to its balance (to allow a refund now, when what it is
-- owed does not cover it) by sending money to a top-up address of its own, one per network,
-- derived from the same deposit key as checkout deposits at a fresh index of the same allocator
-- (`deposit_indexes`, family `evm`): never reused, never a checkout's. Each address is watched
-- for every asset of its network (the configured tokens and the network's coin) while its
-- merchant is active, with the same read progress as a checkout's watch, and every transfer
-- confirmed there is posted to the books in the batch that stores it (receipt: custody ←
-- unallocated; topup: unallocated → the merchant).
--
-- Tables of their own rather than deposit_watches and chain_transfers, whose rows belong to a
-- checkout session and its payment (NOT NULL references): a top-up has neither, and no end.

CREATE TABLE topup_addresses (
    -- Lower-case hex: what transfer logs name.
    address          TEXT PRIMARY KEY,
    -- The BIP32 index of the deposit key it was derived at.
    derivation_index INTEGER NOT NULL UNIQUE,
    merchant_id      INTEGER NOT NULL REFERENCES merchants (id),
    -- The merchant's institution, to scope reads and to name its account's owner.
    institution_id   INTEGER NOT NULL REFERENCES institutions (id),
    network          TEXT NOT NULL,
    -- The newest block when it was given out: a fresh address holds nothing before it, so every
    -- asset's watch reads from here (an asset configured later too).
    from_block       INTEGER NOT NULL,
    -- The portal user who asked for it, and when (Unix seconds).
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL
) WITHOUT ROWID;
-- One address per merchant and network: of two created at once, the second inserts nothing.
CREATE UNIQUE INDEX topup_addresses_by_merchant ON topup_addresses (merchant_id, network);

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
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (address, token)
) WITHOUT ROWID;
CREATE INDEX topup_watches_due ON topup_watches (checked_at);

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
    seen_at         INTEGER NOT NULL,
    PRIMARY KEY (network, tx_hash, log_index, address, token)
) WITHOUT ROWID;
CREATE INDEX topup_transfers_by_address ON topup_transfers (address, block_number);
