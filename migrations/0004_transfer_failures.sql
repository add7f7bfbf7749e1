-- Burned transfer ids (TigerBeetle's `id_already_failed`): a transfer that failed for a
-- reason that can change — an account or a pending transfer not found, a limit exceeded —
-- leaves its id here, so a retry after the world changed cannot create a different outcome
-- under the same id. Written by the engine only, in the transfer id's partition.
CREATE TABLE IF NOT EXISTS transfer_failures (
    id BIGINT PRIMARY KEY,
    result TEXT NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL
) WITH (ledger_role = 'transfer_failures');
