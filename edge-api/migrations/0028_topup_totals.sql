-- What every confirmed transfer to a top-up watch's address adds up to (base units, decimal
-- text), kept by the check that stores them: before a check credits more, the address's
-- `balanceOf` at its last final block must cover this and what it adds, so a node that invents
-- a transfer log credits nothing. NULL for a watch from before this migration: it is totalled
-- from its stored transfers at its next check (SQL's sum cannot add 18-decimal amounts exactly).
ALTER TABLE topup_watches ADD COLUMN confirmed_units TEXT;
