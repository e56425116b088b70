-- Portal users get a role, and events record which version of their transaction they describe.

-- `admin` may do everything; `viewer` reads payments, merchants and the delivery log, and may
-- change nothing and see no secret. Existing users are admins.
ALTER TABLE portal_admins ADD COLUMN role TEXT NOT NULL DEFAULT 'admin'
    CHECK (role IN ('admin', 'viewer'));

-- The transaction's row version after the change the event describes: a payment's timeline
-- orders its events by it (two changes within one second share a `created`). Test events have
-- none.
ALTER TABLE events ADD COLUMN transaction_version INTEGER;
