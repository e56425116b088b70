-- The L1 data fee an OP Stack chain (Base) charges a transaction besides its gas: the most
-- this transaction can pay, as the network's GasPriceOracle bounded it when it was signed
-- (wei, decimal text). Counted with its gas in what the treasury has in flight, and reserved
-- with it in the books; what it paid is the receipt's `l1Fee`. Zero elsewhere.
ALTER TABLE chain_sends ADD COLUMN l1_fee TEXT NOT NULL DEFAULT '0';

-- What a final custody sweep (or its gas funding) paid in L1 data fee, from its receipt's
-- `l1Fee` (wei, decimal text; 0 off OP Stack chains): booked with its gas.
ALTER TABLE custody_sweeps ADD COLUMN l1_fee TEXT;
