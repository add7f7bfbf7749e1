//! SQL-level prepared statements: `PREPARE`, `EXECUTE`, `DEALLOCATE`. They share one namespace
//! with the protocol's named statements (`crate::statements`).

use super::*;
use crate::statements::{no_such_statement, Prepared};
use pgwire::api::stmt::StoredStatement;

impl Session {
    /// `PREPARE name AS statement`, its statement already bound.
    pub(super) fn prepare(
        &mut self,
        name: &str,
        statement: &sql::ParsedStatement,
        hints: &[DataType],
        bound: &Bound,
    ) -> SqlResult<StatementResult> {
        let prepared = Prepared::new(
            statement.clone(),
            hints.to_vec(),
            bound.clone(),
            self.catalog().version,
            self.plan_generation,
            self.bind_context(),
        );
        let stored = StoredStatement::new(name.to_string(), Arc::new(prepared), Vec::new());
        self.statements.add(Arc::new(stored), true, now_micros())?;
        Ok(StatementResult::Command("PREPARE".into()))
    }

    /// `EXECUTE name(args)`: the arguments evaluated and cast to the statement's parameter
    /// types, then the statement run as if sent itself (its command tag and rows).
    pub(super) async fn execute_prepared(
        &mut self,
        name: &str,
        args: &[Expr],
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let stored = self.statements.named(name)?;
        let prepared = &stored.statement;
        let types = &prepared.bound.param_types;
        if args.len() != types.len() {
            return Err(SqlError::syntax(format!(
                "wrong number of parameters for prepared statement \"{name}\" (it takes {}, EXECUTE gave {})",
                types.len(),
                args.len()
            )));
        }
        let values = {
            let env = EvalEnv::without_subqueries(params, self.statement_time());
            args.iter()
                .zip(types)
                .map(|(a, ty)| a.eval(&[], &env).and_then(|v| v.cast(*ty)))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let rebound = self.binding_to_run(prepared)?;
        let bound = rebound.as_ref().unwrap_or(&prepared.bound);
        if matches!(bound.plan, Plan::Execute { .. } | Plan::Prepare { .. }) {
            return Err(SqlError::internal(
                "a prepared statement that prepares or executes",
            ));
        }
        self.locking_read = bound.locks_rows;
        Box::pin(self.execute_inner(&bound.plan, &values)).await
    }

    /// `DEALLOCATE name` or `DEALLOCATE ALL` (None).
    pub(super) fn deallocate(&mut self, name: Option<&str>) -> SqlResult<StatementResult> {
        match name {
            Some(name) => {
                if !self.statements.remove(name) {
                    return Err(no_such_statement(name));
                }
                Ok(StatementResult::Command("DEALLOCATE".into()))
            }
            None => {
                self.statements.clear();
                Ok(StatementResult::Command("DEALLOCATE ALL".into()))
            }
        }
    }

    /// The binding a prepared statement runs with now (see `Prepared::binding_to_run`).
    pub fn binding_to_run(&self, prepared: &Prepared) -> SqlResult<Option<Bound>> {
        prepared.binding_to_run(&self.catalog(), self.plan_generation, self.bind_context())
    }

    /// The generation statements prepared now belong to.
    pub fn plan_generation(&self) -> u64 {
        self.plan_generation
    }
}
