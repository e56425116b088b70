-- A settlement wallet is used only after a cool-off once it is set or changed, as exchanges do
-- for new withdrawal addresses: a stolen admin password cannot send the next settlements to an
-- attacker's wallet before the institution's admins (e-mailed at every change) can react.
-- Wallets set before this migration are usable at once (0).
ALTER TABLE merchant_wallets ADD COLUMN usable_from INTEGER NOT NULL DEFAULT 0;
