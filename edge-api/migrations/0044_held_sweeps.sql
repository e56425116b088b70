-- Custody sweeps of deposits held in institutions' objects (docs/SCALING.md). The sweep's row
-- stays the treasury's (here, until the treasury has its own object): it names the institution
-- whose object keeps the deposit's custody account (`held_by`), so the worker posts the sweep as
-- a half in each store, the deposit's side in that object and the treasury's here. NULL for a
-- deposit of an institution whose money is in D1 (and for the custody gas address's own gas).
ALTER TABLE custody_sweeps ADD COLUMN held_by INTEGER REFERENCES institutions (id);
