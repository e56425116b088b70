-- The directory's index of custody's addresses (docs/SCALING.md): every address derived from the
-- deposit key, at its index, with the institution it was given to and what for. A settlement
-- wallet is checked against it, so no merchant of any institution can name a deposit or top-up
-- address held in another institution's object (money settled there would be credited as that
-- institution's payment).
--
-- The cron derives addresses ahead of the family's counter (`deposit_indexes.next`), so a
-- checkout's batch that takes the next index finds its address already here and marks it given
-- in the same batch: the address is in the index before anyone sees it. An index taken before
-- its address was derived gets its row with the address empty, filled by the checkout right
-- after (or by the cron, should that write be lost). Every index below the counter is given out;
-- every row at or above it is a free one, derived ahead.
CREATE TABLE custody_addresses (
    family            TEXT NOT NULL,
    derivation_index  INTEGER NOT NULL CHECK (derivation_index >= 0),
    -- Lower-case hex; NULL only between an index taken before it was derived and its filling.
    address           TEXT CHECK (address = lower(address)),
    -- Who it was given to and what for; NULL while free, and for an index given before this
    -- index was kept (filled in by the cron from the family's counter alone).
    institution_id    INTEGER REFERENCES institutions (id),
    purpose           TEXT CHECK (purpose IN ('checkout', 'topup')),
    PRIMARY KEY (family, derivation_index)
) WITHOUT ROWID;

CREATE UNIQUE INDEX custody_addresses_by_address ON custody_addresses (address);

-- Every index below `indexed_to` has its row with its address: the wallet check derives only
-- the indexes at or above it that are below `next` and have none. A deployment that gave out
-- addresses before this index existed starts at 0, and the cron derives its earlier addresses
-- a bounded number a run.
ALTER TABLE deposit_indexes ADD COLUMN indexed_to INTEGER NOT NULL DEFAULT 0;
