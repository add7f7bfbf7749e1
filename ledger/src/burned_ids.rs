//! Burned transfer ids (TigerBeetle's `id_already_failed`). A transfer that fails for a
//! reason the world can change — an account or the pending transfer not there yet, a limit
//! that a later transfer would leave room for — leaves its id in `transfer_failures`, and
//! no transfer may be created under that id afterwards. Without it, a client retrying a
//! failed transfer after the world changed would apply it, where the first answer said it
//! failed: the same id, two outcomes.
//!
//! The failure's writes are rolled back as always; the burned id is written after that
//! rollback and stays, whatever becomes of the rest of the command (as sequence calls do),
//! in the transfer id's partition. Every replica burns the same ids at the same log
//! positions, since the failures are decided in log order. Before migration 0004 has made
//! the table, nothing is burned.

use plan::LedgerSchema;
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::error::kv_error;
use crate::executor::Executor;
use crate::row::encode_key;
use crate::transfer::rule;

/// TigerBeetle's transient results: those a retry of the same transfer could get otherwise.
const TRANSIENT: &[&str] = &[
    "debit_account_not_found",
    "credit_account_not_found",
    "pending_transfer_not_found",
    "exceeds_credits",
    "exceeds_debits",
    "debit_account_already_closed",
    "credit_account_already_closed",
];

/// The transient result an error stands for, if it is one.
pub(crate) fn transient_result(e: &SqlError) -> Option<&'static str> {
    let result = e.detail.as_deref()?.strip_prefix("result: ")?;
    TRANSIENT.iter().copied().find(|t| *t == result)
}

impl Executor {
    /// The result under which transfer `id` (stored under `key`) failed before, if its id
    /// is burned. A partition that has never burned an id answers without a lookup.
    pub(crate) fn burned_result(
        &mut self,
        schema: &LedgerSchema,
        key: &[u8],
    ) -> SqlResult<Option<String>> {
        let Some((table, columns)) = &schema.failures else {
            return Ok(None);
        };
        let storage = self.storage_of(table)?;
        let shard = self.shard_of(storage, key);
        let any = match self.shard(shard)?.burned_ids {
            Some(any) => any,
            None => {
                let partition = self.shard(shard)?;
                let handle = partition.handle(storage.id)?;
                let any = crate::partition::entries(partition, handle)?
                    .next()
                    .transpose()
                    .map_err(kv_error)?
                    .is_some();
                partition.burned_ids = Some(any);
                any
            }
        };
        if !any {
            return Ok(None);
        }
        Ok(self
            .get_row(storage, key)?
            .map(|(_, _, row)| match &row[columns.result] {
                Value::Text(t) => t.clone(),
                _ => String::new(),
            }))
    }

    /// The error for a transfer whose id is burned.
    pub(crate) fn id_already_failed(id: i64, result: &str) -> SqlError {
        rule(
            ErrorKind::UniqueViolation,
            id,
            format!(
                "a transfer with this id failed before ({result}), so the id cannot be used again"
            ),
            "id_already_failed",
        )
    }

    /// Writes the ids burned since the last call (after their failures were rolled back).
    pub(crate) fn burn_failed_ids(&mut self, version: u64) -> SqlResult<()> {
        if self.transfers.burned.is_empty() {
            return Ok(());
        }
        let burned = std::mem::take(&mut self.transfers.burned);
        let schema = self.ledger_schema()?;
        let Some((table, columns)) = &schema.failures else {
            return Ok(());
        };
        let storage = self.storage_of(table)?;
        let now = self.clock.now;
        for (id, result) in burned {
            let key = encode_key(&[Value::Int(id)])?;
            let mut row = vec![Value::Null; table.columns.len()];
            row[columns.id] = Value::Int(id);
            row[columns.result] = Value::Text(result.into());
            row[columns.failed_at] = Value::TimestampTz(now);
            // Burned once: a second failure of the same id cannot happen (the first made it
            // `id_already_failed`), so the row is always new.
            self.put_row(table, &key, None, &row, version)?;
            let shard = self.shard_of(storage, &key);
            self.shard(shard)?.burned_ids = Some(true);
        }
        Ok(())
    }
}
