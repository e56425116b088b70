-- Moves that resume (docs/SCALING.md, "The move"): a move of an institution too large for one
-- request goes on over several, each continuing from the pages its object has recorded. When a
-- request of the move last went on (`move_touched_at`, Unix seconds): a move no request has gone
-- on with for five minutes is given up by the cron (the institution works from D1 again, and the
-- next move starts afresh), so an operator who stops midway never leaves it paused.
ALTER TABLE institutions ADD COLUMN move_touched_at INTEGER;

-- The last move's start (`moving_since` is NULL between moves): a new move starts after it,
-- even within the same second, so its pages in the object are never an earlier move's.
ALTER TABLE institutions ADD COLUMN move_last INTEGER;
