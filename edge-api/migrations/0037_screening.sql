-- Sanctions screening (docs/SCREENING.md): the operator's own list of sanctioned addresses, and
-- every screening decision with what it read.
--
-- The operator's list (other authorities' lists than the on-chain oracle's: OFAC's SDN file,
-- the EU's) is directory data: every institution is screened against it. An EVM address is the
-- same account on every EVM network, so an entry holds on all of them. Entries are never
-- deleted: one taken off keeps its row with when and by whom, for the audit trail.
CREATE TABLE sanctioned_addresses (
    -- Lower-case `0x` and 40 hex digits.
    address     TEXT NOT NULL CHECK (length(address) = 42 AND address GLOB '0x*'
                    AND lower(address) = address),
    -- The list it came from ('OFAC SDN', 'EU', or the operator's own 'manual').
    source      TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 64),
    -- The list's entry naming it (for the SDN file: its uid and name).
    entry       TEXT NOT NULL CHECK (length(entry) <= 300),
    -- The date (YYYY-MM-DD) the list was published, or the entry added by hand.
    listed_on   TEXT NOT NULL,
    added_at    INTEGER NOT NULL,
    added_by    TEXT NOT NULL,
    -- Taken off the list: no longer screened against, kept for the record.
    removed_at  INTEGER,
    removed_by  TEXT,
    PRIMARY KEY (address, source)
) WITHOUT ROWID;
CREATE INDEX sanctioned_addresses_by_source ON sanctioned_addresses (source, address);

-- Every screening decision: an address, on a network, for what it gated, with what was read and
-- what it found; written in the same batch as what it gates (the credit, the hold, the payout,
-- the refund) or, for a refusal, alone. A decision about a payment, payout, refund or return is
-- money data, kept in the store that holds the institution's money (D1 here, or its object);
-- a settlement wallet's (subject 'wallet') is the directory's, always here.
CREATE TABLE screenings (
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    -- What it gated: a payment's sender (payment), a settlement wallet when set (wallet), a
    -- payout before it is signed (payout), a refund's or return's address (refund, return).
    subject         TEXT NOT NULL CHECK (subject IN ('payment', 'wallet', 'payout', 'refund',
                        'return')),
    -- Its id: the transaction, the merchant, the settlement group's first payment, the refund.
    subject_id      TEXT NOT NULL,
    network         TEXT NOT NULL,
    address         TEXT NOT NULL,
    result          TEXT NOT NULL CHECK (result IN ('clear', 'listed')),
    -- What was read: the oracle's address and the block it answered at (none when the network
    -- has no oracle), and the version of the operator's list (the time of its last change).
    oracle          TEXT,
    oracle_block    INTEGER,
    list_version    INTEGER NOT NULL,
    -- For a listed address: the list that names it and its entry.
    listed_by       TEXT,
    screened_at     INTEGER NOT NULL
);
CREATE INDEX screenings_by_institution ON screenings (institution_id, screened_at, id);
CREATE INDEX screenings_by_subject ON screenings (institution_id, subject, subject_id);

-- A decision about an institution's money is frozen with the rest of its money while it moves
-- and once it is held in its object (migration 0036).
CREATE TRIGGER screenings_frozen_insert BEFORE INSERT ON screenings
WHEN NEW.subject <> 'wallet' AND (SELECT store <> 'd1' OR moving_since IS NOT NULL
    FROM institutions WHERE id = NEW.institution_id)
BEGIN
    SELECT RAISE(ABORT, 'institution money moving: its rows in D1 are frozen');
END;

-- A network whose oracle could not be read: nothing on it is credited or paid as cleared until
-- it answers again, and the operator is told once per outage (the row is written before the
-- e-mail, so racing readers send one). The cron's next read that gets an answer ends it.
CREATE TABLE screening_outages (
    network         TEXT NOT NULL,
    started_at      INTEGER NOT NULL,
    reason          TEXT NOT NULL,
    -- What became of the operator's e-mail (notifications' statuses), 'pending' until sent.
    email_status    TEXT NOT NULL,
    ended_at        INTEGER,
    PRIMARY KEY (network, started_at)
) WITHOUT ROWID;
CREATE UNIQUE INDEX screening_outages_open ON screening_outages (network) WHERE ended_at IS NULL;
