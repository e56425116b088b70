-- A move's progress, kept where its rows are written (D1's migration 0046): the object records
-- each page of D1's rows it was sent, in the same transaction as the rows, keyed by the move
-- (D1's `institutions.moving_since`), the table and the page's first row in key order. A move
-- stopped anywhere resumes from the pages recorded; two requests sending one page commit it
-- once (the second breaks the key and commits nothing). The row with an empty table name marks
-- the move's start: the object emptied for it.
CREATE TABLE object_move_pages (
    since       INTEGER NOT NULL,
    table_name  TEXT NOT NULL,
    first_row   INTEGER NOT NULL CHECK (first_row >= 0),
    -- A page of a move that did not start here is refused by name.
    rows        INTEGER NOT NULL CONSTRAINT object_move_pages_started CHECK (rows >= 0),
    PRIMARY KEY (since, table_name, first_row)
) WITHOUT ROWID;
