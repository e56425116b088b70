-- An institution's books in its object: `ledger_accounts` and `ledger_transfers` as they are in
-- D1 (the same columns, indexes and checks; a test compares them), holding the accounts that are
-- the institution's alone: its deposit addresses' custody and unallocated money (an address is
-- derived for one payment of one institution), its merchants' balances, its PSP fees and the
-- network fees it charged. Money arriving (receipts) and payments credited post here, in the
-- same transaction as the state change they record, exactly as in D1. The accounts every
-- institution shares (the treasury, gas, the world, the custody gas address) stay with the
-- treasury's books, and an account of any other institution is refused. A transfer between
-- the two (a settlement's payout) is posted as a half on each side under one id, this side's
-- against its link to the treasury's books: the `world` account owned by `treasury`
-- (`shared_types::ledger::split`).

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

CREATE TRIGGER ledger_accounts_own_institution BEFORE INSERT ON ledger_accounts
    WHEN NEW.institution_id IS NOT NULL
        AND NEW.institution_id IS NOT (SELECT institution_id FROM object_identity)
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: ledger_accounts.institution_id is this object''s institution'); END;
CREATE TRIGGER ledger_accounts_keeps_institution BEFORE UPDATE OF institution_id ON ledger_accounts
    WHEN NEW.institution_id IS NOT OLD.institution_id
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: ledger_accounts.institution_id is this object''s institution'); END;
CREATE TRIGGER ledger_accounts_of_an_institution BEFORE INSERT ON ledger_accounts
    WHEN NEW.kind NOT IN ('custody', 'unallocated', 'merchant', 'fees', 'network_fees')
        AND NOT (NEW.kind = 'world' AND NEW.owner = 'treasury')
    BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: ledger_accounts.kind is an institution''s (the treasury''s accounts live in its books)'); END;
