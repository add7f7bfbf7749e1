-- TigerBeetle's remaining account and transfer fields (docs/ledger.md): an account's
-- `closed` flag (set at creation, by a closing transfer, cleared by voiding it), the
-- balancing and closing flags of a transfer, and the 64- and 32-bit user data of both
-- (`user_data` is TigerBeetle's `user_data_128`). Each added column takes its default in
-- every existing row; safe to run twice (IF NOT EXISTS).
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS closed BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS user_data_64 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS user_data_32 INT NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS balancing_debit BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS balancing_credit BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS closing_debit BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS closing_credit BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS user_data_64 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE transfers ADD COLUMN IF NOT EXISTS user_data_32 INT NOT NULL DEFAULT 0;
