-- Every account and transfer its own timestamp (TigerBeetle's `timestamp`: nanoseconds since
-- the epoch, unique across both tables, strictly increasing in the order the ledger created
-- them, even many in one statement; docs/ledger.md, "Time"). Set by the engine; rows from
-- before this migration keep 0. Safe to run twice (IF NOT EXISTS).
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS timestamp BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS timestamp BIGINT NOT NULL DEFAULT 0;
