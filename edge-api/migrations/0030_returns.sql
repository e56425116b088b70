-- Money that reaches a payment's deposit address after the payment was credited (the rest of
-- an underpaid payment, a second transfer by mistake) is recorded at the address but is owed to
-- nobody: it can be returned to the customer. A return is a refund row (the same sends, books
-- and states) marked `extra`, naming the deposit address whose money it sends back; it never
-- counts against the payment's refundable amount nor changes the payment.
ALTER TABLE refunds ADD COLUMN extra INTEGER NOT NULL DEFAULT 0 CHECK (extra IN (0, 1));
ALTER TABLE refunds ADD COLUMN from_address TEXT;
