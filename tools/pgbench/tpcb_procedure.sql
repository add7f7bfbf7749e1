-- pgbench's TPC-B transaction as one CALL (create the procedure first with
-- tools/pgbench/tpcb_procedure_create.sql). Run: pgbench -n -M prepared -f tpcb_procedure.sql
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
CALL tpcb(:aid, :bid, :tid, :delta);
