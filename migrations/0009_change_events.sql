-- Change events (TigerBeetle's `get_change_events`): one row for every change of balances —
-- a transfer, a post, a void, an expiry — with both accounts' balances after it, keyed by
-- the event's timestamp, so an application can follow the ledger in order
-- (`WHERE timestamp > $last ORDER BY timestamp LIMIT n`). Written by the engine only: each
-- account's side of a row is stored in that account's partition, and a read puts the sides
-- of a row together. Events from before this migration are not recorded. Safe to run twice
-- (IF NOT EXISTS).
CREATE TABLE IF NOT EXISTS change_events (
    timestamp BIGINT PRIMARY KEY,
    type TEXT NOT NULL,
    transfer_id BIGINT NOT NULL,
    transfer_amount BIGINT NOT NULL,
    transfer_pending_id BIGINT NOT NULL,
    ledger INT NOT NULL,
    debit_account_id BIGINT NOT NULL,
    debit_account_debits_pending BIGINT NOT NULL,
    debit_account_debits_posted BIGINT NOT NULL,
    debit_account_credits_pending BIGINT NOT NULL,
    debit_account_credits_posted BIGINT NOT NULL,
    credit_account_id BIGINT NOT NULL,
    credit_account_debits_pending BIGINT NOT NULL,
    credit_account_debits_posted BIGINT NOT NULL,
    credit_account_credits_pending BIGINT NOT NULL,
    credit_account_credits_posted BIGINT NOT NULL
) WITH (ledger_role = 'change_events');
