-- The hot-account transfer: every transfer credits account 1 from a random one of 100,000
-- accounts, as one CALL (tools/bench, workload `transfer`). Ids are random
-- bigints: a repeat (about 1 in 10^13 per pair) would be answered as an idempotent retry.
\set id random(1, 9000000000000000000)
\set aid random(2, 100001)
CALL transfer(:id, :aid, 1, 1, 1, 1);
