-- The watcher's pass over each network (docs/SCALING.md, "The watcher by the directory's index"):
-- each cron run reads every transfer of the network's tokens once, in new blocks, looks the
-- receivers up in the directory's index of custody's addresses (`custody_addresses`) and sends
-- each to the store that keeps its deposit, so an institution's object is read only when money
-- came to one of its addresses. How far each network was read: every block up to `scanned_to`
-- was read with the network's depth on it; the next pass reads again from `confirmations`
-- blocks below it. A pass is recorded guarded on the `scanned_to` it started from, so racing
-- runs record one.
CREATE TABLE network_passes (
    network     TEXT PRIMARY KEY,
    scanned_to  INTEGER NOT NULL CHECK (scanned_to >= 0),
    -- The node's newest block at the last pass, and when it ran (Unix seconds).
    head_block  INTEGER NOT NULL,
    passed_at   INTEGER NOT NULL,
    -- Why the last pass could not read the node or route what it read (NULL once it could).
    error       TEXT CHECK (length(error) <= 500),
    error_at    INTEGER
) WITHOUT ROWID;

-- Money that came to custody and that no store credits (docs/SCALING.md): a token transfer,
-- final at the network's depth, to one of custody's addresses that was never given out
-- (`not_given`: derived ahead, free), or given out to a checkout whose store watches the address
-- on no network of it any more, or never did on this one (`not_watched`). Held: never credited,
-- listed for the operator (`GET /operator/held-deposits`), who returns or books it by hand. One
-- row per log, whoever records it first.
CREATE TABLE held_deposits (
    network         TEXT NOT NULL,
    tx_hash         TEXT NOT NULL CHECK (tx_hash = lower(tx_hash)),
    log_index       INTEGER NOT NULL CHECK (log_index >= 0),
    address         TEXT NOT NULL CHECK (address = lower(address)),
    token           TEXT NOT NULL CHECK (token = lower(token)),
    sender          TEXT CHECK (sender = lower(sender)),
    -- Base units, decimal text; NULL when the log carries no readable ERC-20 amount.
    amount_units    TEXT,
    block_number    INTEGER NOT NULL CHECK (block_number >= 0),
    reason          TEXT NOT NULL CHECK (reason IN ('not_given', 'not_watched')),
    -- Whose address it is, for `not_watched`.
    institution_id  INTEGER REFERENCES institutions (id),
    seen_at         INTEGER NOT NULL,
    PRIMARY KEY (network, tx_hash, log_index)
) WITHOUT ROWID;

CREATE INDEX held_deposits_by_time ON held_deposits (seen_at DESC, network, tx_hash, log_index);
