-- The hosted page's language when the merchant chose one (the `locale` checkout option: a
-- language the page speaks, such as `de`); NULL follows the customer's browser (Accept-Language).
ALTER TABLE checkout_sessions ADD COLUMN locale TEXT;
