-- Money from an address on a sanctions list is held for the institution's review (docs/
-- SCREENING.md).
--
-- Each transfer seen on chain keeps its sender (the ERC-20 log's `from`, or the transaction's
-- for ether paid directly; NULL for ether sent from inside a contract call, which standard
-- JSON-RPC cannot name), screened before the payment is credited.
ALTER TABLE chain_transfers ADD COLUMN sender TEXT;

-- A payment held by its screening: the API shows `raw_status` `held` (`status` `pending`). The
-- stored `raw_status` stays `pending` (its CHECK names the statuses a payment had before
-- screening, and every query that moves money reads only `succeeded` and later ones, so a held
-- payment is never settled, refunded or returned); `screening` says held, then what the review
-- decided: released (credited, `succeeded`) or blocked (`failed`, its money frozen in custody).
ALTER TABLE transactions ADD COLUMN screening TEXT
    CHECK (screening IN ('held', 'released', 'blocked'));

-- The review of each held payment: why it was held (the addresses and the lists that name them,
-- or a sender the chain does not name), the money held at each of its deposit addresses (what a
-- release credits, exactly as the credit would have), and the decision, made once, with its
-- required note, by whom and when.
CREATE TABLE screening_reviews (
    transaction_id  INTEGER PRIMARY KEY REFERENCES transactions (id),
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    reason          TEXT NOT NULL,
    -- JSON: [{"part": n, "address": "0x…", "units": "…"}], the base units held at each address.
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

CREATE TRIGGER screening_reviews_frozen_insert BEFORE INSERT ON screening_reviews
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

CREATE TRIGGER screening_reviews_frozen_update BEFORE UPDATE ON screening_reviews
WHEN (SELECT store <> 'd1' OR moving_since IS NOT NULL FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;
