-- Reconciliation of the books with the chain (the cron's `chain::books`, `xtask reconcile`): what
-- each reconciliation read and whether it found a new drift (the operator is e-mailed once per
-- new drift, and what became of that e-mail is kept), and each address's last comparison, so a
-- run reads the least recently compared custody addresses first and a drift that persists is
-- not news again.

-- The addresses read, a JSON array of lower-case hex.
ALTER TABLE reconciliations ADD COLUMN address_list TEXT NOT NULL DEFAULT '[]';
-- 1 when an address read differs from the books by another amount than at its last comparison
-- (and not by 0): a new drift, e-mailed to the operator. Such rows are kept; other rows beyond
-- the newest hundred of their network, token and scope are pruned.
ALTER TABLE reconciliations ADD COLUMN new_drift INTEGER NOT NULL DEFAULT 0;
-- A new drift's e-mail: sent, not_configured (no e-mail binding), no_recipients (no
-- PAYRAIL_OPERATOR_EMAIL) or failed; NULL on other rows.
ALTER TABLE reconciliations ADD COLUMN email_status TEXT;

CREATE TABLE reconciled_addresses (
    network         TEXT NOT NULL,
    -- The token contract (lower-case hex) or `native`.
    token           TEXT NOT NULL,
    -- The treasury, a deposit address or the custody gas address, lower-case hex.
    address         TEXT NOT NULL,
    -- At the last comparison: the block read, what the chain held, what the books held, and
    -- chain minus books (signed decimal text, '0' when they agreed).
    block_number    INTEGER NOT NULL,
    chain_units     TEXT NOT NULL,
    book_units      TEXT NOT NULL,
    drift           TEXT NOT NULL,
    checked_at      INTEGER NOT NULL,
    PRIMARY KEY (network, token, address)
) WITHOUT ROWID;
