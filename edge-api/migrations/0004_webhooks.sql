-- Webhooks: the event outbox, one delivery per event and endpoint, every attempt, endpoint
-- health for the auto-disable rule, and admin notifications.

CREATE TABLE events (
    -- `evt_` + random.
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    type            TEXT NOT NULL,
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    -- The exact JSON body every delivery of this event sends.
    payload         TEXT NOT NULL,
    created         INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX events_by_transaction ON events (transaction_id);

CREATE TABLE deliveries (
    -- `dlv_` + random.
    id               TEXT PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id),
    endpoint_id      TEXT NOT NULL,
    institution_id   INTEGER NOT NULL REFERENCES institutions (id),
    event_type       TEXT NOT NULL,
    -- pending: an attempt is due at next_attempt_at; succeeded; failed: given up (the endpoint
    -- was disabled or deleted). Resending makes a new delivery.
    status           TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,
    last_attempt_at  INTEGER,
    -- The delivery this one resends, if any.
    redelivery_of    TEXT,
    created_at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, created_at);

CREATE TABLE delivery_attempts (
    id               INTEGER PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES deliveries (id),
    endpoint_id      TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    -- HTTP status when the receiver answered.
    status_code      INTEGER,
    -- ok, http_status, redirect, timeout, connection.
    outcome          TEXT NOT NULL,
    latency_ms       INTEGER NOT NULL,
    -- The first 4 KB of the response body.
    response_body    TEXT,
    -- When the next attempt is due (NULL after a success or when giving up).
    next_attempt_at  INTEGER
);
CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (delivery_id, attempt);
CREATE INDEX delivery_attempts_by_endpoint ON delivery_attempts (endpoint_id, id);

-- Endpoint health: the first failure with no success since (cleared by any success).
ALTER TABLE webhook_endpoints ADD COLUMN first_failure_at INTEGER;
ALTER TABLE webhook_endpoints ADD COLUMN last_success_at INTEGER;
ALTER TABLE webhook_endpoints ADD COLUMN disabled_reason TEXT;

CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    kind            TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    -- sent, not_configured (no e-mail binding), failed.
    email_status    TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX notifications_by_institution ON notifications (institution_id, id);
