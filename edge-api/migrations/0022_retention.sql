-- Retention: the cron prunes events (with their deliveries and attempts) past the events'
-- retention, oldest first, in bounded batches; this index finds them without a scan.
CREATE INDEX events_by_created ON events (created);
