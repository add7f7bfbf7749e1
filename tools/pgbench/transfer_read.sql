-- A transfer and a point read: the hot-account transfer of transfer.sql, then the balance of
-- another random account by its key (tools/bench, workload `transfer_read`; the mix the
-- "report during load" run can use to show point reads beside a long report).
\set id random(1, 9000000000000000000)
\set aid random(2, 100001)
\set rid random(2, 100001)
CALL transfer(:id, :aid, 1, 1, 1, 1);
SELECT debits_posted, credits_posted FROM accounts WHERE id = :rid;
