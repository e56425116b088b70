-- The portal's payments view: a transaction's timeline reads its events' deliveries by event, and
-- the overview sums an institution's recent volume per status and currency from one range scan.

CREATE INDEX deliveries_by_event ON deliveries (event_id);
-- Covering: the overview reads only these columns, never the table.
CREATE INDEX transactions_by_institution_created
    ON transactions (institution_id, created_at, status, currency, amount_gross);
