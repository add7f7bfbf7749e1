-- 128-bit amounts and balances (TigerBeetle's u128): every amount and balance column of the
-- ledger widened from BIGINT to NUMERIC(39,0), which holds 0 to 2^128 − 1. Every value stays
-- the same number and every row where it is. Safe to run twice (a column that already has
-- the type is left as it is).
ALTER TABLE accounts
    ALTER COLUMN debits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN debits_posted TYPE NUMERIC(39,0),
    ALTER COLUMN credits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN credits_posted TYPE NUMERIC(39,0);

ALTER TABLE transfers ALTER COLUMN amount TYPE NUMERIC(39,0);

ALTER TABLE account_balances
    ALTER COLUMN debits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN debits_posted TYPE NUMERIC(39,0),
    ALTER COLUMN credits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN credits_posted TYPE NUMERIC(39,0);

ALTER TABLE change_events
    ALTER COLUMN transfer_amount TYPE NUMERIC(39,0),
    ALTER COLUMN debit_account_debits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN debit_account_debits_posted TYPE NUMERIC(39,0),
    ALTER COLUMN debit_account_credits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN debit_account_credits_posted TYPE NUMERIC(39,0),
    ALTER COLUMN credit_account_debits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN credit_account_debits_posted TYPE NUMERIC(39,0),
    ALTER COLUMN credit_account_credits_pending TYPE NUMERIC(39,0),
    ALTER COLUMN credit_account_credits_posted TYPE NUMERIC(39,0);
