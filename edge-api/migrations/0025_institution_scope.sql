-- Every money table carries its institution, so every money statement can be keyed by it: the
-- schema the sharding plan (docs/SCALING.md) moves unchanged into one database per institution.
-- transactions, settlements, refunds and topup_addresses had it already; the tables below get
-- it, filled from the row that owns each (a checkout's transaction, a watch's, a transfer's
-- watch, a top-up watch's address), and every writer sets it from now on.
--
-- SQLite adds a column with a REFERENCES clause only as nullable (with foreign keys on, its
-- default must be NULL), and rebuilding these tables would rewrite every row of the largest
-- ones; so the column is added as nullable and a trigger per table refuses a row without one:
-- the same rule as NOT NULL, for every row written after this migration, while the backfill
-- covers every row written before it. (A row whose owner is gone would keep NULL: none can
-- be, as each is referenced by a foreign key.)
--
-- What stays out, by design (docs/SCALING.md, "Schema readiness"): the treasury's signed
-- transactions and nonces (chain_sends), custody sweeps, reconciliations and node heads belong
-- to a (network, treasury), not an institution.

ALTER TABLE checkout_sessions ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE checkout_sessions SET institution_id =
    (SELECT t.institution_id FROM transactions t WHERE t.id = checkout_sessions.transaction_id);

ALTER TABLE deposit_watches ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE deposit_watches SET institution_id =
    (SELECT t.institution_id FROM transactions t WHERE t.id = deposit_watches.transaction_id);

ALTER TABLE chain_transfers ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE chain_transfers SET institution_id =
    (SELECT w.institution_id FROM deposit_watches w WHERE w.address = chain_transfers.address);

ALTER TABLE settlement_claims ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE settlement_claims SET institution_id =
    (SELECT t.institution_id FROM transactions t WHERE t.id = settlement_claims.transaction_id);

ALTER TABLE settlement_items ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE settlement_items SET institution_id =
    (SELECT t.institution_id FROM transactions t WHERE t.id = settlement_items.transaction_id);

ALTER TABLE settlement_holds ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE settlement_holds SET institution_id =
    (SELECT t.institution_id FROM transactions t WHERE t.id = settlement_holds.transaction_id);

ALTER TABLE topup_watches ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE topup_watches SET institution_id =
    (SELECT a.institution_id FROM topup_addresses a WHERE a.address = topup_watches.address);

ALTER TABLE topup_transfers ADD COLUMN institution_id INTEGER REFERENCES institutions (id);
UPDATE topup_transfers SET institution_id =
    (SELECT a.institution_id FROM topup_addresses a WHERE a.address = topup_transfers.address);

-- NOT NULL for every new row (see above). An insert without its institution fails, and with it
-- the batch it is in, as a NOT NULL column would make it.
CREATE TRIGGER checkout_sessions_institution BEFORE INSERT ON checkout_sessions
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: checkout_sessions.institution_id'); END;
CREATE TRIGGER deposit_watches_institution BEFORE INSERT ON deposit_watches
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: deposit_watches.institution_id'); END;
CREATE TRIGGER chain_transfers_institution BEFORE INSERT ON chain_transfers
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: chain_transfers.institution_id'); END;
CREATE TRIGGER settlement_claims_institution BEFORE INSERT ON settlement_claims
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: settlement_claims.institution_id'); END;
CREATE TRIGGER settlement_items_institution BEFORE INSERT ON settlement_items
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: settlement_items.institution_id'); END;
CREATE TRIGGER settlement_holds_institution BEFORE INSERT ON settlement_holds
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: settlement_holds.institution_id'); END;
CREATE TRIGGER topup_watches_institution BEFORE INSERT ON topup_watches
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: topup_watches.institution_id'); END;
CREATE TRIGGER topup_transfers_institution BEFORE INSERT ON topup_transfers
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: topup_transfers.institution_id'); END;
-- The settlement cron groups what is due by institution first (its batches are per
-- institution, merchant, network and asset), and sharded each institution reads only its own.
CREATE INDEX settlements_by_institution ON settlements (institution_id, state, merchant_id);
