-- An account's transfers in TigerBeetle's order: the history indexes key each entry by
-- (account, timestamp) instead of (account, created_at). `timestamp` is unique and strictly
-- increasing (migration 0006), where every transfer of one command shares `created_at`, so
-- an account's transfers come out of the index in the exact order the ledger made them and
-- `ORDER BY timestamp LIMIT n` reads only the first n entries. New entries of a hot account
-- still append to the end of its range. Rows from before migration 0006 have timestamp 0
-- and sort first. Safe to run twice (IF EXISTS, IF NOT EXISTS).
DROP INDEX IF EXISTS transfers_debit_account_id_created_at;
DROP INDEX IF EXISTS transfers_credit_account_id_created_at;
CREATE INDEX IF NOT EXISTS transfers_debit_account_id_timestamp
    ON transfers (debit_account_id, timestamp);
CREATE INDEX IF NOT EXISTS transfers_credit_account_id_timestamp
    ON transfers (credit_account_id, timestamp);
