-- Payments held by their screening (D1's migration 0038): each transfer's sender, the payment's
-- screening state, and the review of each held payment.
ALTER TABLE chain_transfers ADD COLUMN sender TEXT;

ALTER TABLE transactions ADD COLUMN screening TEXT
    CHECK (screening IN ('held', 'released', 'blocked'));

CREATE TABLE screening_reviews (
    transaction_id  INTEGER PRIMARY KEY REFERENCES transactions (id),
    institution_id  INTEGER NOT NULL,
    reason          TEXT NOT NULL,
    held            TEXT NOT NULL,
    opened_at       INTEGER NOT NULL,
    decision        TEXT CHECK (decision IN ('released', 'blocked')),
    note            TEXT CHECK (length(note) BETWEEN 1 AND 2000),
    decided_by      TEXT,
    decided_at      INTEGER,
    CHECK ((decision IS NULL) = (decided_at IS NULL)
        AND (decision IS NULL) = (note IS NULL)
        AND (decision IS NULL) = (decided_by IS NULL))
);
CREATE INDEX screening_reviews_by_institution
    ON screening_reviews (institution_id, decision, opened_at);

CREATE TRIGGER screening_reviews_own_institution BEFORE INSERT ON screening_reviews
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: screening_reviews.institution_id is this object''s institution'); END;
CREATE TRIGGER screenings_own_institution BEFORE INSERT ON screenings
    WHEN NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: screenings.institution_id is this object''s institution'); END;
