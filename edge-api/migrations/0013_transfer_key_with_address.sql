-- A transfer seen on chain is keyed by its address too. Ether sent from inside a contract call
-- has no log and no transaction of its own that JSON-RPC can name, so it is recorded under its
-- block's hash with log index 0: two deposit addresses paid from inside calls in one block had
-- the same (network, tx_hash, log_index), and the second was taken for the first and never
-- recorded. SQLite cannot change a primary key, so the table is made again with the address in
-- its key and the rows copied over.
CREATE TABLE chain_transfers_new (
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
    seen_at         INTEGER NOT NULL,
    PRIMARY KEY (network, tx_hash, log_index, address)
) WITHOUT ROWID;
INSERT INTO chain_transfers_new (network, tx_hash, log_index, address, session_id, token, amount,
    block_number, confirmed, kind, after_expiry, seen_at)
SELECT network, tx_hash, log_index, address, session_id, token, amount, block_number, confirmed,
    kind, after_expiry, seen_at FROM chain_transfers;
DROP TABLE chain_transfers;
ALTER TABLE chain_transfers_new RENAME TO chain_transfers;
CREATE INDEX chain_transfers_by_address ON chain_transfers (address, confirmed);
CREATE INDEX chain_transfers_by_session ON chain_transfers (session_id);
