-- The portal's payment search: one box that finds a payment by its id, its external reference,
-- a transaction hash (the customer's, the settlement's, or any transfer seen to its deposit
-- address) or a deposit address, exact matches only, each an index search. The id and the
-- reference already have theirs (the primary key, transactions_by_reference).

-- Hashes stamped on the payment, per institution; partial, as most rows have none yet.
CREATE INDEX transactions_by_source_hash
    ON transactions (institution_id, tx_hash_source) WHERE tx_hash_source IS NOT NULL;
CREATE INDEX transactions_by_settlement_hash
    ON transactions (institution_id, tx_hash_settlement) WHERE tx_hash_settlement IS NOT NULL;
-- Every transfer seen on chain by its hash (its key starts with the network).
CREATE INDEX chain_transfers_by_hash ON chain_transfers (tx_hash);
-- A checkout's current deposit address (sandbox's simulated ones have no watch).
CREATE INDEX checkout_sessions_by_deposit_address ON checkout_sessions (deposit_address);
