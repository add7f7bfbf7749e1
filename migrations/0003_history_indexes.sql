-- An account's transfers by time: the history indexes key each entry by (account,
-- created_at) instead of by the account alone, under which an account's entries were ordered
-- by their random transfer ids. The ledger clock only moves forward, so a hot account's new
-- entries go to the end of its range — one warm leaf — instead of each to a random leaf that
-- a checkpoint then has to write, and an account's transfers come out of the index in time
-- order. Safe to run twice (IF EXISTS, IF NOT EXISTS).
DROP INDEX IF EXISTS transfers_debit_account_id;
DROP INDEX IF EXISTS transfers_credit_account_id;
CREATE INDEX IF NOT EXISTS transfers_debit_account_id_created_at
    ON transfers (debit_account_id, created_at);
CREATE INDEX IF NOT EXISTS transfers_credit_account_id_created_at
    ON transfers (credit_account_id, created_at);
