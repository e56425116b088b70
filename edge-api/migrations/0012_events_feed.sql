-- The events feed (GET /v1/events): every event gets a sequence number in creation order, so a
-- feed page is a range of an index and its cursor is stable (two events of one second share a
-- `created`). Existing events are numbered in (created, id) order.

ALTER TABLE events ADD COLUMN seq INTEGER;
UPDATE events SET seq = (
    SELECT count(*) FROM events e2
    WHERE e2.created < events.created OR (e2.created = events.created AND e2.id <= events.id)
);
CREATE UNIQUE INDEX events_by_seq ON events (seq);
-- One index per filter shape of the feed, newest first by seq.
CREATE INDEX events_by_institution ON events (institution_id, seq);
CREATE INDEX events_by_type ON events (institution_id, type, seq);
CREATE INDEX events_by_institution_transaction ON events (institution_id, transaction_id, seq);
