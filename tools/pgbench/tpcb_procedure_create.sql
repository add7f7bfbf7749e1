-- pgbench's TPC-B transaction as one stored procedure: run once after `pgbench -i`, then
-- drive it with tools/pgbench/tpcb_procedure.sql. The whole body is one command on the
-- executor: no client round trips between its statements. The SELECT comes last so the
-- CALL returns the account's new balance (the same transaction as pgbench's, reordered).
CREATE OR REPLACE PROCEDURE tpcb(p_aid int, p_bid int, p_tid int, p_delta int)
LANGUAGE sql AS $$
    UPDATE pgbench_accounts SET abalance = abalance + p_delta WHERE aid = p_aid;
    UPDATE pgbench_tellers SET tbalance = tbalance + p_delta WHERE tid = p_tid;
    UPDATE pgbench_branches SET bbalance = bbalance + p_delta WHERE bid = p_bid;
    INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
        VALUES (p_tid, p_bid, p_aid, p_delta, CURRENT_TIMESTAMP);
    SELECT abalance FROM pgbench_accounts WHERE aid = p_aid;
$$;
