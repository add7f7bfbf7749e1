-- The ledger (docs/ledger.md). TigerBeetle's field names, its flags as boolean columns.
-- `ledger_role` tells the executor which table plays which part; balances, created_at,
-- pending_transfers and account_balances are written by the engine only.

CREATE TABLE IF NOT EXISTS accounts (
    id BIGINT PRIMARY KEY,
    ledger INT NOT NULL,
    code INT NOT NULL,
    debits_pending BIGINT NOT NULL DEFAULT 0,
    debits_posted BIGINT NOT NULL DEFAULT 0,
    credits_pending BIGINT NOT NULL DEFAULT 0,
    credits_posted BIGINT NOT NULL DEFAULT 0,
    debits_must_not_exceed_credits BOOLEAN NOT NULL DEFAULT false,
    credits_must_not_exceed_debits BOOLEAN NOT NULL DEFAULT false,
    history BOOLEAN NOT NULL DEFAULT false,
    user_data BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT accounts_id_positive CHECK (id > 0),
    CONSTRAINT accounts_ledger_positive CHECK (ledger > 0),
    CONSTRAINT accounts_code_positive CHECK (code > 0),
    CONSTRAINT accounts_flags_exclusive
        CHECK (NOT (debits_must_not_exceed_credits AND credits_must_not_exceed_debits))
) WITH (ledger_role = 'accounts');

CREATE TABLE IF NOT EXISTS transfers (
    id BIGINT PRIMARY KEY,
    debit_account_id BIGINT,
    credit_account_id BIGINT,
    amount BIGINT,
    ledger INT,
    code INT,
    pending BOOLEAN NOT NULL DEFAULT false,
    pending_id BIGINT,
    post_pending BOOLEAN NOT NULL DEFAULT false,
    void_pending BOOLEAN NOT NULL DEFAULT false,
    timeout INT NOT NULL DEFAULT 0,
    user_data BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
) WITH (ledger_role = 'transfers');

CREATE INDEX IF NOT EXISTS transfers_debit_account_id ON transfers (debit_account_id);
CREATE INDEX IF NOT EXISTS transfers_credit_account_id ON transfers (credit_account_id);

CREATE TABLE IF NOT EXISTS pending_transfers (
    id BIGINT PRIMARY KEY,
    status TEXT NOT NULL,
    expires_at TIMESTAMPTZ,
    resolved_by BIGINT
) WITH (ledger_role = 'pending_transfers');

CREATE TABLE IF NOT EXISTS account_balances (
    account_id BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    transfer_id BIGINT NOT NULL,
    debits_pending BIGINT NOT NULL,
    debits_posted BIGINT NOT NULL,
    credits_pending BIGINT NOT NULL,
    credits_posted BIGINT NOT NULL,
    PRIMARY KEY (account_id, created_at, transfer_id)
) WITH (ledger_role = 'account_balances');
