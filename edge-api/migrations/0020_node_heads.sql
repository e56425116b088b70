-- The newest block each network's node has reported, and when it was first reported: a node
-- whose head stops moving (stalled, cut off from its peers, or a backend behind a load balancer
-- that fell behind) answers reads that look fine but describe the past. Once the head has not
-- moved for longer than the network's configured multiple of its block time, nothing is decided
-- on that node's answers (no credit, no expiry, no transaction taken for failed or dropped)
-- until it moves again.
CREATE TABLE node_heads (
    network         TEXT PRIMARY KEY,
    -- The highest block number the node has answered.
    head            INTEGER NOT NULL,
    -- When that block number was first answered, and when the node was last asked (Unix
    -- seconds).
    first_seen_at   INTEGER NOT NULL,
    checked_at      INTEGER NOT NULL
) WITHOUT ROWID;
