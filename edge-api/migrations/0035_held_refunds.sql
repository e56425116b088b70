-- Refunds of institutions held in their own objects (docs/SCALING.md). The object holds the
-- refund, its attempts and the institution's half of the books. Each attempt is paid like a
-- held settlement: the treasury's books keep a row of it in `settlements` (`held_by` names the
-- object; the row pays the customer's address instead of a merchant's wallet), beside the
-- transactions that carry it, and `refund_of` names the object's refund it pays. NULL for every
-- settlement (of D1's institutions, or held).
ALTER TABLE settlements ADD COLUMN refund_of TEXT;
