-- The newest block in which the books saw a treasury transaction or a custody sweep end, per
-- network: the reconciliation reads nothing from a node whose confirmed block is behind it (a
-- lagging backend behind a load balancer would show money that has left as still there, and
-- pass it for the operator's funding). Partial indexes, so finding it is one seek however many
-- transactions and sweeps there were.
CREATE INDEX chain_sends_final ON chain_sends (network, sender, block_number)
    WHERE state IN ('confirmed', 'failed');
CREATE INDEX custody_sweeps_final ON custody_sweeps (network, block_number)
    WHERE state IN ('confirmed', 'failed');
