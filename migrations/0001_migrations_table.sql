-- The record of applied migrations. Every later migration is recorded here by the server
-- after its statements succeed; statements must be safe to run twice (IF NOT EXISTS), since
-- schema changes cannot yet run inside a transaction block.
CREATE TABLE IF NOT EXISTS hotledger_migrations (
    version INT PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
