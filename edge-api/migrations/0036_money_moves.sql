-- Moving an institution's money from D1 into its own object (docs/SCALING.md, "The move").
--
-- While a move runs (`moving_since` set) and once the directory holds the institution in its
-- object (`store = 'object'`), D1's money rows of that institution are frozen: every insert or
-- update of one aborts its statement's batch, whoever runs it (a request, a cron run, a worker
-- of an older version). So the copy taken during the move is the whole truth, and nothing can
-- be credited, settled or delivered from D1's copy afterwards. The worker answers such an abort
-- as 503 with Retry-After (`error::MONEY_MOVING` is the message's start): a move pauses the
-- institution for its seconds. Deletes stay allowed (retention prunes across institutions,
-- and a moved institution's D1 rows are only a copy). Two money tables carry no institution
-- and need no trigger: an idempotency key is written with its checkout, a delivery attempt
-- with its delivery. The treasury's own row of a held institution's payout
-- (`settlements.held_by`) is the treasury's and stays writable.
ALTER TABLE institutions ADD COLUMN moving_since INTEGER;

CREATE TRIGGER transactions_frozen_insert BEFORE INSERT ON transactions
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER transactions_frozen_update BEFORE UPDATE ON transactions
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER payment_parts_frozen_insert BEFORE INSERT ON payment_parts
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER payment_parts_frozen_update BEFORE UPDATE ON payment_parts
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER checkout_sessions_frozen_insert BEFORE INSERT ON checkout_sessions
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER checkout_sessions_frozen_update BEFORE UPDATE ON checkout_sessions
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER deposit_watches_frozen_insert BEFORE INSERT ON deposit_watches
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER deposit_watches_frozen_update BEFORE UPDATE ON deposit_watches
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER chain_transfers_frozen_insert BEFORE INSERT ON chain_transfers
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER chain_transfers_frozen_update BEFORE UPDATE ON chain_transfers
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlements_frozen_insert BEFORE INSERT ON settlements
WHEN NEW.held_by IS NULL AND (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlements_frozen_update BEFORE UPDATE ON settlements
WHEN NEW.held_by IS NULL AND (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_claims_frozen_insert BEFORE INSERT ON settlement_claims
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_claims_frozen_update BEFORE UPDATE ON settlement_claims
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_items_frozen_insert BEFORE INSERT ON settlement_items
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_items_frozen_update BEFORE UPDATE ON settlement_items
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_holds_frozen_insert BEFORE INSERT ON settlement_holds
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER settlement_holds_frozen_update BEFORE UPDATE ON settlement_holds
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER refunds_frozen_insert BEFORE INSERT ON refunds
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER refunds_frozen_update BEFORE UPDATE ON refunds
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_addresses_frozen_insert BEFORE INSERT ON topup_addresses
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_addresses_frozen_update BEFORE UPDATE ON topup_addresses
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_watches_frozen_insert BEFORE INSERT ON topup_watches
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_watches_frozen_update BEFORE UPDATE ON topup_watches
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_transfers_frozen_insert BEFORE INSERT ON topup_transfers
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_transfers_frozen_update BEFORE UPDATE ON topup_transfers
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER events_frozen_insert BEFORE INSERT ON events
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER events_frozen_update BEFORE UPDATE ON events
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER deliveries_frozen_insert BEFORE INSERT ON deliveries
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER deliveries_frozen_update BEFORE UPDATE ON deliveries
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;
