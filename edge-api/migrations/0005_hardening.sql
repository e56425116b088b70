-- Hardening: every lifecycle write is guarded on the row it read, and the cron finds open
-- checkouts without a look-back window.

-- Bumped by every write to a transaction's lifecycle or way to pay. A write computed from a
-- transaction is guarded on the version it read, so two racing refunds (or a settlement racing
-- a refund) cannot both apply on the same state: the loser changes nothing and answers 409.
ALTER TABLE transactions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

-- Only open checkouts are pending, so this stays small however many transactions there are: the
-- cron's expiry scans it instead of every session ever created.
CREATE INDEX transactions_pending ON transactions (id) WHERE raw_status = 'pending';
