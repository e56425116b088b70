-- A payment made on chain in more than one way to pay (part in USDC, the rest in ether after
-- the customer changed the way to pay) is settled and refunded per part, each in the asset and
-- on the network it came in. A part is the money confirmed at one way to pay's addresses,
-- written once, in the same batch as the credit.
CREATE TABLE payment_parts (
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    -- 0: the way to pay the payment is recorded in (its first confirmed transfer's); then the
    -- others in the order their money came.
    part            INTEGER NOT NULL CHECK (part >= 0),
    network         TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- The token contract (lower-case hex) or `native`, and its decimals.
    token           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- Its share of the payment's gross, in the order currency (decimal text, the currency's
    -- minor unit); the parts add up to the gross exactly.
    gross           TEXT NOT NULL,
    -- The rate it settles and refunds at: `expected` of the order currency is worth
    -- `crypto_amount` of the asset (the quote it was paid under, or, when some of it came after
    -- the checkout's end or it came under more than one quote, its value over its amount
    -- and '1'), with where that rate came from when it is not the quote.
    expected        TEXT NOT NULL,
    crypto_amount   TEXT NOT NULL,
    rate_source     TEXT,
    PRIMARY KEY (transaction_id, part),
    UNIQUE (transaction_id, network, asset)
);

-- Every payment credited on chain before today was credited in one way to pay: its part 0.
INSERT OR IGNORE INTO payment_parts (institution_id, transaction_id, part, network, asset, token,
    decimals, gross, expected, crypto_amount, rate_source)
SELECT t.institution_id, t.id, 0, t.network_payment, t.asset, w.token, w.decimals,
       t.amount_gross, COALESCE(t.late_rate, t.amount_expected),
       CASE WHEN t.late_rate IS NULL THEN w.crypto_amount ELSE '1' END, t.late_rate_source
FROM transactions t
JOIN deposit_watches w ON w.transaction_id = t.id AND w.institution_id = t.institution_id
     AND w.network = t.network_payment AND w.asset = t.asset
WHERE t.amount_gross IS NOT NULL
  AND t.raw_status IN ('succeeded', 'paid', 'partially_refunded', 'refunded')
  AND EXISTS (SELECT 1 FROM chain_transfers ct WHERE ct.address = w.address
              AND ct.institution_id = w.institution_id AND ct.confirmed = 1
              AND ct.kind = 'payment');

-- A settlement claims a part of a payment, not the whole: two parts settle in two settlements
-- (one per asset and network), at the same time or not.
CREATE TABLE settlement_claims_by_part (
    transaction_id  INTEGER NOT NULL REFERENCES transactions (id),
    part            INTEGER NOT NULL DEFAULT 0,
    settlement_id   TEXT NOT NULL REFERENCES settlements (id),
    institution_id  INTEGER REFERENCES institutions (id),
    PRIMARY KEY (transaction_id, part)
);
INSERT INTO settlement_claims_by_part (transaction_id, part, settlement_id, institution_id)
SELECT transaction_id, 0, settlement_id, institution_id FROM settlement_claims;
DROP TABLE settlement_claims;
ALTER TABLE settlement_claims_by_part RENAME TO settlement_claims;
CREATE INDEX settlement_claims_by_settlement ON settlement_claims (settlement_id);
CREATE TRIGGER settlement_claims_institution BEFORE INSERT ON settlement_claims
    WHEN NEW.institution_id IS NULL
    BEGIN SELECT RAISE(ABORT, 'NOT NULL constraint failed: settlement_claims.institution_id'); END;

-- Which part of its payment a settlement item pays, and a refund sends back.
ALTER TABLE settlement_items ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
CREATE INDEX refunds_by_part ON refunds (transaction_id, part);
