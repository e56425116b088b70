-- Merchants' top-ups screened like payments (D1's migration 0039): each top-up transfer's
-- sender and screening state, the review of each held top-up, and screening decisions that
-- gate a top-up (the table rebuilt with the wider CHECK).
ALTER TABLE topup_transfers ADD COLUMN sender TEXT;
ALTER TABLE topup_transfers ADD COLUMN screening TEXT
    CHECK (screening IN ('held', 'released', 'blocked'));

CREATE TABLE topup_reviews (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    merchant_id     INTEGER NOT NULL,
    network         TEXT NOT NULL,
    tx_hash         TEXT NOT NULL,
    log_index       INTEGER NOT NULL,
    address         TEXT NOT NULL,
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
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

CREATE TRIGGER topup_reviews_own_institution BEFORE INSERT ON topup_reviews
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: topup_reviews.institution_id is this object''s institution'); END;

CREATE TABLE screenings_new (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    subject         TEXT NOT NULL CHECK (subject IN ('payment', 'payout', 'refund', 'return',
                        'topup')),
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
CREATE TRIGGER screenings_own_institution BEFORE INSERT ON screenings
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: screenings.institution_id is this object''s institution'); END;
