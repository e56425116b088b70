-- Where each institution's money lives: 'd1' (this database's money tables, as before) or
-- 'object' (its own SQLite-backed Durable Object, `inst:<id>`; docs/SCALING.md). The directory
-- routes each request by it.
ALTER TABLE institutions ADD COLUMN store TEXT NOT NULL DEFAULT 'd1'
    CHECK (store IN ('d1', 'object'));
