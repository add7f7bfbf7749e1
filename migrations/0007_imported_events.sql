-- Imported events (TigerBeetle's `imported` flag, docs/ledger.md): accounts and transfers
-- whose timestamp their creator gives, for moving history in. Safe to run twice (IF NOT
-- EXISTS).
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS imported BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS imported BOOLEAN NOT NULL DEFAULT false;
