-- The custody sweep screens its destination, the treasury, before it signs a sweep on a network
-- (docs/SCREENING.md): against the operator's list and the network's sanctions oracle. Each
-- sweep stored keeps what that screening read, in the row that records it: the oracle and the
-- block it answered at (NULL where the network has none), and the operator's list's version.
-- A listed treasury, or an oracle that cannot be read, refuses the network: nothing is signed.
ALTER TABLE custody_sweeps ADD COLUMN screened_oracle TEXT;
ALTER TABLE custody_sweeps ADD COLUMN screened_block INTEGER;
ALTER TABLE custody_sweeps ADD COLUMN screened_list_version INTEGER;
