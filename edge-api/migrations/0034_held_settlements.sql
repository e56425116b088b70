-- Settlements of institutions held in their own objects (docs/SCALING.md). The object holds the
-- settlement with its claims, items, holds and the merchant's side of the books; the treasury's
-- books (here, until the treasury has its own object) keep a row of each settlement it pays,
-- naming the object that holds it (`held_by`) and the asset's decimals (its items, which say
-- them for D1's own settlements, are in the object), beside the transaction that pays it. NULL
-- for a settlement of an institution whose money is in D1.
ALTER TABLE settlements ADD COLUMN held_by INTEGER;
ALTER TABLE settlements ADD COLUMN decimals INTEGER;
