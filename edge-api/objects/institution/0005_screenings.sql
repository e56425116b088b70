-- The screening decisions about the institution's money (D1's migration 0037): a payment's
-- sender, a payout's wallet, a refund's or a return's address. A settlement wallet's decision
-- is the directory's and stays in D1.
CREATE TABLE screenings (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL,
    subject         TEXT NOT NULL CHECK (subject IN ('payment', 'payout', 'refund', 'return')),
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
CREATE INDEX screenings_by_institution ON screenings (institution_id, screened_at, id);
CREATE INDEX screenings_by_subject ON screenings (institution_id, subject, subject_id);
