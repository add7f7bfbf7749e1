-- The hot-account transfer of transfer.sql with ids that increase over the run, as
-- TigerBeetle advises for its ids (time-ordered, ULID-like): each client counts its own
-- transactions and the id is (count, client), so the ids of all clients rise together.
-- Run with `-D n=0`; for a repeated run on the same data, start n higher.
\set n :n + 1
\set id :n * 1024 + :client_id + 1
\set aid random(2, 100001)
CALL transfer(:id, :aid, 1, 1, 1, 1);
