-- The directory's index of checkouts held in institutions' objects: the hosted page and its
-- polls name only the checkout, so the directory says whose object holds it (and the merchant,
-- whose name the page shows). Written in the batch that counts the checkout against its limits,
-- before its session is stored in the object; a checkout of an institution whose money is in
-- D1 has no entry (its session is read here, as before).
CREATE TABLE checkout_index (
    session_id      TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    merchant_id     INTEGER NOT NULL REFERENCES merchants (id),
    created_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX checkout_index_by_age ON checkout_index (created_at);
