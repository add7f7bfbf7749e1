//! `EvalEnv`: what an expression is evaluated with besides its row — parameters, the
//! statement's time, and the traits through which evaluation reaches what `plan` does not
//! own: subqueries (`SubqueryRunner`), sequences, other sessions (`BackendSignals`), and the
//! statement's `Interrupt`.

use std::sync::Arc;

use sql::{SqlError, SqlResult, Value};

use crate::expr::Func;
use crate::interrupt::Interrupt;
use crate::plan::Rel;
use crate::sequence::{NoSequences, SequenceSource};

/// Runs subqueries for the evaluator; the executor implements it over its storage.
pub trait SubqueryRunner {
    fn run(&self, rel: &Rel, outer: &[Value], env: &EvalEnv<'_>) -> SqlResult<Vec<Vec<Value>>>;

    /// The rows of a subquery for `outer`, which a runner may share between the rows it is
    /// run for when it reads nothing of them (`rel_depends_on_row`): an uncorrelated
    /// `IN (SELECT ...)` over 1,000 outer rows need not run its query 1,000 times.
    fn run_shared(
        &self,
        rel: &Arc<Rel>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<std::rc::Rc<Vec<Vec<Value>>>> {
        Ok(std::rc::Rc::new(self.run(rel, outer, env)?))
    }

    /// The catalog, for functions that describe it (`pg_get_indexdef`, `::regclass`).
    fn catalog(&self) -> Option<&crate::catalog::Catalog> {
        None
    }

    /// The bytes storage holds for relation `oid` as a size function (`Func::reads_storage`)
    /// counts them; None for an oid that names no relation. Only the executor knows.
    fn relation_bytes(&self, oid: u32, func: Func) -> SqlResult<Option<i64>> {
        let _ = (oid, func);
        Err(SqlError::feature_not_supported(
            "relation sizes outside a query (in a default, a check or a write)",
        ))
    }
}

/// A runner for contexts where subqueries cannot appear (checks, defaults).
pub struct NoSubqueries;

impl SubqueryRunner for NoSubqueries {
    fn run(&self, _: &Rel, _: &[Value], _: &EvalEnv<'_>) -> SqlResult<Vec<Vec<Value>>> {
        Err(SqlError::feature_not_supported(
            "subqueries in this context",
        ))
    }
}

/// What an expression is evaluated with besides its row.
pub struct EvalEnv<'a> {
    pub params: &'a [Value],
    /// The statement's timestamp (microseconds since the Unix epoch), fixed before proposing
    /// so every replica computes the same `now()`.
    pub now_micros: i64,
    pub subqueries: &'a dyn SubqueryRunner,
    /// Where `nextval` and `setval` take and leave sequence states.
    pub sequences: &'a dyn SequenceSource,
    /// Whether `random()` and `gen_random_uuid()` may draw values here: only where what
    /// they give is recorded (a read's rows, rows built before they are proposed or staged
    /// for a commit), never where each replica computes the statement again.
    pub random: bool,
    /// The node's sessions, for `pg_cancel_backend` and `pg_terminate_backend`.
    pub backends: &'a dyn BackendSignals,
    /// Whether the statement must stop (checked per row by the loops that may run long).
    pub interrupt: &'a Interrupt,
}

/// Signals to this node's client sessions, by process id (`pg_backend_pid()`).
pub trait BackendSignals {
    /// Cancels the statement session `pid` is running, or (`terminate`) also ends its
    /// connection; false when no session has that process id.
    fn signal(&self, pid: i32, terminate: bool) -> SqlResult<bool>;
}

/// Where no session can be signalled: statements that read tables run on the executor.
pub struct NoBackends;

impl BackendSignals for NoBackends {
    fn signal(&self, _: i32, terminate: bool) -> SqlResult<bool> {
        Err(SqlError::feature_not_supported(format!(
            "{}() in a statement that reads tables (call it on its own or over pg_stat_activity)",
            if terminate {
                "pg_terminate_backend"
            } else {
                "pg_cancel_backend"
            }
        )))
    }
}

impl<'a> EvalEnv<'a> {
    /// For expressions that cannot contain subqueries (defaults, checks, arguments).
    pub fn without_subqueries(params: &'a [Value], now_micros: i64) -> EvalEnv<'a> {
        EvalEnv {
            params,
            now_micros,
            subqueries: &NoSubqueries,
            sequences: &NoSequences,
            random: false,
            backends: &NoBackends,
            interrupt: &crate::interrupt::NEVER,
        }
    }

    /// An evaluation of nothing but random draws.
    pub(crate) fn drawing() -> EvalEnv<'static> {
        EvalEnv::without_subqueries(&[], 0).with_random(true)
    }

    /// The same evaluation, where random values may (or may not) be drawn.
    pub fn with_random(self, random: bool) -> EvalEnv<'a> {
        EvalEnv { random, ..self }
    }

    /// The same evaluation, with sequences answered by `sequences`.
    pub fn with_sequences(&self, sequences: &'a dyn SequenceSource) -> EvalEnv<'a> {
        EvalEnv {
            params: self.params,
            now_micros: self.now_micros,
            subqueries: self.subqueries,
            sequences,
            random: self.random,
            backends: self.backends,
            interrupt: self.interrupt,
        }
    }
}
