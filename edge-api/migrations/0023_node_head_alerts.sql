-- The operator is e-mailed once when a network node's head stands still too long: the head the
-- alert was sent about (a later stall at another head alerts again), when, and what became of
-- the e-mail.
ALTER TABLE node_heads ADD COLUMN alerted_head INTEGER;
ALTER TABLE node_heads ADD COLUMN alerted_at INTEGER;
ALTER TABLE node_heads ADD COLUMN alert_email_status TEXT;
