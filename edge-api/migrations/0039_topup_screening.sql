-- Merchants' top-ups are screened like payments (docs/SCREENING.md): each transfer to a top-up
-- address keeps its sender, screened once the transfer is final. One from a listed address (or
-- ether from inside a contract call, whose sender the chain does not name) is held: its receipt
-- is booked (the money sits in the address's `unallocated` account, owed to no one), the top-up
-- to the merchant is not, until an admin releases it; blocked, it stays there, frozen.
ALTER TABLE topup_transfers ADD COLUMN sender TEXT;
ALTER TABLE topup_transfers ADD COLUMN screening TEXT
    CHECK (screening IN ('held', 'released', 'blocked'));

-- The review of each held top-up: the transfer, why it was held, and the decision, made once,
-- with its required note, by whom and when. `told_at`: when the admins were told (once, by the
-- first check to store it).
CREATE TABLE topup_reviews (
    -- `tpr_` + random.
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    merchant_id     INTEGER NOT NULL,
    network         TEXT NOT NULL,
    tx_hash         TEXT NOT NULL,
    log_index       INTEGER NOT NULL,
    address         TEXT NOT NULL,
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- Base units, decimal text.
    units           TEXT NOT NULL,
    sender          TEXT,
    reason          TEXT NOT NULL,
    opened_at       INTEGER NOT NULL,
    told_at         INTEGER,
    decision        TEXT CHECK (decision IN ('released', 'blocked')),
    note            TEXT CHECK (length(note) BETWEEN 1 AND 2000),
    decided_by      TEXT,
    decided_at      INTEGER,
    CHECK ((decision IS NULL) = (decided_at IS NULL)
        AND (decision IS NULL) = (note IS NULL)
        AND (decision IS NULL) = (decided_by IS NULL)),
    UNIQUE (network, tx_hash, log_index, address, token)
);
CREATE INDEX topup_reviews_by_institution ON topup_reviews (institution_id, decision, opened_at);

CREATE TRIGGER topup_reviews_frozen_insert BEFORE INSERT ON topup_reviews
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER topup_reviews_frozen_update BEFORE UPDATE ON topup_reviews
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

-- A screening decision may gate a top-up (subject 'topup', its id the transfer's
-- `tx_hash:log_index`): the table is rebuilt with the wider CHECK (SQLite cannot alter one),
-- every row, index and trigger as before.
CREATE TABLE screenings_new (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    subject         TEXT NOT NULL CHECK (subject IN ('payment', 'wallet', 'payout', 'refund',
                        'return', 'topup')),
    subject_id      TEXT NOT NULL,
    network         TEXT NOT NULL,
    address         TEXT NOT NULL,
    result          TEXT NOT NULL CHECK (result IN ('clear', 'listed')),
    oracle          TEXT,
    oracle_block    INTEGER,
    list_version    INTEGER NOT NULL,
    listed_by       TEXT,
    screened_at     INTEGER NOT NULL
);
INSERT INTO screenings_new (id, institution_id, subject, subject_id, network, address, result,
    oracle, oracle_block, list_version, listed_by, screened_at)
SELECT id, institution_id, subject, subject_id, network, address, result, oracle, oracle_block,
    list_version, listed_by, screened_at FROM screenings;
DROP TABLE screenings;
ALTER TABLE screenings_new RENAME TO screenings;
CREATE INDEX screenings_by_institution ON screenings (institution_id, screened_at, id);
CREATE INDEX screenings_by_subject ON screenings (institution_id, subject, subject_id);

CREATE TRIGGER screenings_frozen_insert BEFORE INSERT ON screenings
WHEN NEW.subject <> 'wallet' AND (SELECT store <> 'd1' OR moving_since IS NOT NULL
    FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;
