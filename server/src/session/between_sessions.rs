//! What a session does with the node's other sessions: advisory locks and NOTIFY.

use super::*;

impl Session {
    /// `SELECT pg_advisory_lock(key)` and the other advisory lock functions: the lock
    /// table is the node's (`Shared::advisory_locks`); a transaction-level lock outside a
    /// transaction block is given back when the statement ends, as in PostgreSQL.
    pub(super) async fn advisory_lock(
        &mut self,
        call: &plan::AdvisoryLockCall,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        use plan::AdvisoryAction as A;
        let key = {
            let env = EvalEnv::without_subqueries(params, now_micros());
            call.key
                .iter()
                .map(|e| e.eval(&[], &env))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let answer = |v: Value| StatementResult::Rows {
            columns: vec![call.column.clone()],
            rows: vec![vec![v]],
            tag: "SELECT".into(),
        };
        let key = match key.as_slice() {
            [] => None,
            [Value::Int(k)] => Some(LockKey::Big(*k)),
            [Value::Int(a), Value::Int(b)] => Some(LockKey::Pair(*a as i32, *b as i32)),
            // The functions are strict: a NULL key locks nothing.
            _ => return Ok(answer(Value::Null)),
        };
        let in_block = self.transaction.is_some();
        let holder = Holder {
            session: self.id,
            transaction: call.transaction && in_block,
        };
        let locks = &self.shared.advisory_locks;
        let result = match (call.action, key) {
            (A::UnlockAll, _) => {
                locks.unlock_all(self.id, Some(false));
                Value::Text(String::new())
            }
            (_, None) => return Err(SqlError::internal("an advisory lock without a key")),
            (A::Lock, Some(key)) => {
                self.wait_interruptibly(locks.lock(holder, key, call.shared))
                    .await?;
                Value::Text(String::new())
            }
            (A::TryLock, Some(key)) => Value::Bool(locks.try_lock(holder, key, call.shared)),
            (A::Unlock, Some(key)) => {
                let held = locks.unlock(holder, key, call.shared);
                if !held {
                    let mode = if call.shared {
                        "ShareLock"
                    } else {
                        "ExclusiveLock"
                    };
                    self.notices.push(SqlError::new(
                        ErrorKind::Warning,
                        format!("you don't own a lock of type {mode}"),
                    ));
                }
                Value::Bool(held)
            }
        };
        // A transaction-level lock outside a transaction block: the statement was its
        // transaction, which has ended.
        let taken = matches!(call.action, A::Lock) || matches!(result, Value::Bool(true));
        if call.transaction && !in_block && taken {
            if let Some(key) = key {
                locks.unlock(holder, key, call.shared);
            }
        }
        Ok(answer(result))
    }

    /// NOTIFY or `SELECT pg_notify(...)`: delivered to the listening sessions at once, or
    /// when the transaction block commits (nothing if it rolls back), as in PostgreSQL.
    pub(super) fn notify(
        &mut self,
        call: &plan::NotifyCall,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let env = EvalEnv::without_subqueries(params, now_micros());
        let text = |e: &plan::Expr| -> SqlResult<Option<String>> {
            Ok(match e.eval(&[], &env)? {
                Value::Null => None,
                v => Some(v.to_pg_text(DataType::Text).unwrap_or_default()),
            })
        };
        let channel = text(&call.channel)?.unwrap_or_default();
        let payload = text(&call.payload)?.unwrap_or_default();
        if channel.is_empty() {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "channel name cannot be empty",
            ));
        }
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "payload string too long",
            ));
        }
        let n = Notification {
            pid: self.pid,
            channel,
            payload,
        };
        match &mut self.transaction {
            Some(t) if !t.notifies.contains(&n) => t.notifies.push(n),
            Some(_) => {}
            None => self.shared.notifications.notify(&n),
        }
        Ok(match &call.column {
            Some(column) => StatementResult::Rows {
                columns: vec![column.clone()],
                rows: vec![vec![Value::Text(String::new())]],
                tag: "SELECT".into(),
            },
            None => StatementResult::Command("NOTIFY".into()),
        })
    }

    /// Gives back the transaction-level advisory locks when a transaction ends.
    pub(super) fn release_transaction_locks(&self) {
        self.shared.advisory_locks.unlock_all(self.id, Some(true));
    }
}
