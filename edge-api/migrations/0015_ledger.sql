-- The books: a double-entry ledger in the model TigerBeetle uses. Every movement of money is a
-- transfer of an integer amount of base units from one account to another of the same ledger
-- (a network and an asset), posted in the same D1 batch as the state change it records; each
-- account keeps its running totals, which can always be recomputed from the transfers.
--
-- Amounts are base units as decimal text: 18-decimal assets overflow SQLite's 64-bit integers
-- at 9.2 units. The worker adds them up with 128-bit integers and writes the new totals with a
-- guard on the version it read (see db::ledger), so no total is ever written on stale figures.

CREATE TABLE ledger_accounts (
    -- `{network}:{token}:{kind}` or `{network}:{token}:{kind}:{owner}`, the token lower-case
    -- hex or `native`: what the worker derives from what the account is.
    id              TEXT PRIMARY KEY,
    network         TEXT NOT NULL,
    token           TEXT NOT NULL,
    -- The asset's symbol and decimals (to show amounts).
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- custody (a deposit address, or the custody gas address), unallocated (received at a
    -- deposit address, owed to no payment yet), merchant (what Payrail owes it), fees (an
    -- institution's PSP fees), network_fees (network fees charged to merchants), treasury,
    -- gas (coin spent on gas), world (money from outside: the operator's funding).
    kind            TEXT NOT NULL CHECK (kind IN ('custody', 'unallocated', 'merchant', 'fees',
                        'network_fees', 'treasury', 'gas', 'world')),
    -- The address, merchant id or institution id; '' when the kind has one account a ledger.
    owner           TEXT NOT NULL,
    -- The merchant's institution (merchant accounts), to scope reads.
    institution_id  INTEGER,
    debits_posted   TEXT NOT NULL DEFAULT '0',
    credits_posted  TEXT NOT NULL DEFAULT '0',
    debits_pending  TEXT NOT NULL DEFAULT '0',
    credits_pending TEXT NOT NULL DEFAULT '0',
    -- How far debits may exceed credits (a merchant's allowed debt; 0 elsewhere).
    debt_limit      TEXT NOT NULL DEFAULT '0',
    -- Bumped by every write of the totals: a write guarded on it fails once another landed.
    version         INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ledger_accounts_by_kind ON ledger_accounts (kind, owner);
CREATE INDEX ledger_accounts_by_institution ON ledger_accounts (institution_id, kind)
    WHERE institution_id IS NOT NULL;

CREATE TABLE ledger_transfers (
    -- Derived from what it records (`receipt:…`, `settlement:…`), so a retry cannot post it
    -- twice: the key refuses a second.
    id              TEXT PRIMARY KEY,
    -- Posting order.
    seq             INTEGER NOT NULL UNIQUE,
    network         TEXT NOT NULL,
    token           TEXT NOT NULL,
    debit_account   TEXT NOT NULL REFERENCES ledger_accounts (id),
    credit_account  TEXT NOT NULL REFERENCES ledger_accounts (id),
    amount          TEXT NOT NULL,
    -- What it records: receipt, credit, fee, network_fee, settlement, refund, gas, sweep,
    -- sweep_gas, gas_funding, funding, topup.
    code            TEXT NOT NULL,
    -- single (posted at once), pending (reserved: counts against the limits, not yet moved),
    -- post or void (ends the pending transfer `pending_id`, which only one of them can).
    phase           TEXT NOT NULL CHECK (phase IN ('single', 'pending', 'post', 'void')),
    pending_id      TEXT UNIQUE REFERENCES ledger_transfers (id),
    -- The payment, settlement, refund, sweep or chain transaction it belongs to (for
    -- statements and reconciliation), and a line a person can read.
    transaction_id  INTEGER,
    reference       TEXT NOT NULL,
    -- 1 when the accounts were still at the versions the posting was computed on (the batch
    -- fails on NULL: the totals changed meanwhile, and nothing of it is written).
    guard           INTEGER NOT NULL CHECK (guard = 1),
    created_at      INTEGER NOT NULL,
    CHECK ((phase IN ('post', 'void')) = (pending_id IS NOT NULL)),
    CHECK (debit_account <> credit_account)
) WITHOUT ROWID;
CREATE INDEX ledger_transfers_by_debit ON ledger_transfers (debit_account, seq);
CREATE INDEX ledger_transfers_by_credit ON ledger_transfers (credit_account, seq);
CREATE INDEX ledger_transfers_by_reference ON ledger_transfers (reference);
CREATE INDEX ledger_transfers_by_transaction ON ledger_transfers (transaction_id)
    WHERE transaction_id IS NOT NULL;

-- A settlement that nets a merchant's debt pays less than its payments' net: by how much.
ALTER TABLE chain_sends ADD COLUMN netted TEXT NOT NULL DEFAULT '0';
-- Each payment's fees in the asset's base units, at its quote (what the books charge).
ALTER TABLE settlement_items ADD COLUMN psp_units TEXT NOT NULL DEFAULT '0';
ALTER TABLE settlement_items ADD COLUMN gas_units TEXT NOT NULL DEFAULT '0';

-- Sweeps of custody: the offline signer moves what a deposit address holds, once its watch has
-- ended, to the treasury, first funding its gas from the custody gas address where a token
-- deposit holds no coin. It stores each transaction before broadcasting it; the worker follows
-- them and posts them to the books once final.
CREATE TABLE custody_sweeps (
    -- The transaction's hash, lower-case hex.
    tx_hash         TEXT PRIMARY KEY,
    network         TEXT NOT NULL,
    -- The token contract or `native`, and the asset.
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- sweep (a deposit to the treasury) or gas (the custody gas address to a deposit).
    kind            TEXT NOT NULL CHECK (kind IN ('sweep', 'gas')),
    from_address    TEXT NOT NULL,
    to_address      TEXT NOT NULL,
    nonce           INTEGER NOT NULL,
    -- Base units moved, gas limit and wei per gas as signed.
    units           TEXT NOT NULL,
    gas_limit       INTEGER NOT NULL,
    gas_price       TEXT NOT NULL,
    raw             TEXT NOT NULL,
    -- sent: stored and broadcast; confirmed or failed (reverted): final, posted to the books.
    state           TEXT NOT NULL CHECK (state IN ('sent', 'confirmed', 'failed')),
    block_number    INTEGER,
    gas_used        TEXT,
    -- Wei per gas actually paid (the receipt's effective price).
    gas_paid        TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX custody_sweeps_nonce ON custody_sweeps (network, from_address, nonce);
CREATE INDEX custody_sweeps_by_state ON custody_sweeps (state, network);
CREATE INDEX custody_sweeps_by_from ON custody_sweeps (from_address, state);

-- Reconciliation of the books with the chain: for a network and asset, at a confirmed block,
-- what the chain holds and what the books say, for the treasury and for custody.
CREATE TABLE reconciliations (
    id              INTEGER PRIMARY KEY,
    network         TEXT NOT NULL,
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    -- treasury or custody.
    scope           TEXT NOT NULL,
    block_number    INTEGER NOT NULL,
    chain_units     TEXT NOT NULL,
    book_units      TEXT NOT NULL,
    -- chain minus books, signed decimal text: '0' when they agree.
    drift           TEXT NOT NULL,
    -- How many addresses were read (custody).
    addresses       INTEGER NOT NULL DEFAULT 1,
    checked_at      INTEGER NOT NULL
);
CREATE INDEX reconciliations_latest ON reconciliations (network, token, scope, id);
