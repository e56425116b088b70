-- Money that arrives after a checkout's end is valued at the rate when it arrived, not at the
-- address's quote (BTCPay's rule for invoices paid late). Each late payment transfer records the
-- rate it was valued at (order currency per unit of the asset, decimal text) and where that
-- rate came from; a late transfer with no rate yet is not counted: the payment's decision waits
-- for it, and no old quote stands in.
ALTER TABLE chain_transfers ADD COLUMN rate TEXT;
ALTER TABLE chain_transfers ADD COLUMN rate_source TEXT;
-- A payment some of whose money was valued at arrival: the rate its recorded asset's money was
-- valued at overall (what its settlement and refunds convert at, instead of the quote) and how.
ALTER TABLE transactions ADD COLUMN late_rate TEXT;
ALTER TABLE transactions ADD COLUMN late_rate_source TEXT;
