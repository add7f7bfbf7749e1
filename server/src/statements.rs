//! A connection's prepared statements. Those with a name — made by the protocol's Parse or
//! by SQL `PREPARE`, one namespace as in PostgreSQL (`EXECUTE` runs one made by Parse, Bind
//! takes one made by PREPARE) — live in the session's `Statements`, which `DEALLOCATE`,
//! `DISCARD ALL` and `pg_prepared_statements` see; the unnamed statement stays in pgwire's
//! store, which holds the portals.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use pgwire::api::stmt::StoredStatement;
use plan::{Bound, Catalog, PreparedStatementInfo};
use planner::bind_in_session;
use sql::{DataType, ErrorKind, ParsedStatement, SqlError, SqlResult};

/// A prepared statement: its text and parse, the parameter types the client gave, its
/// binding, and what it was bound against.
#[derive(Debug)]
pub struct Prepared {
    pub parsed: ParsedStatement,
    pub hints: Vec<DataType>,
    pub bound: Bound,
    /// The catalog version it was bound against.
    pub catalog_version: u64,
    /// The session's plan generation then (`DISCARD PLANS` starts a new one).
    pub generation: u64,
    /// Who it was bound for (its privileges were checked as that role; `SET ROLE` since
    /// binds it again).
    pub context: planner::BindContext,
    /// How often it ran.
    pub executions: AtomicI64,
}

impl Prepared {
    pub fn new(
        parsed: ParsedStatement,
        hints: Vec<DataType>,
        bound: Bound,
        catalog_version: u64,
        generation: u64,
        context: planner::BindContext,
    ) -> Prepared {
        Prepared {
            parsed,
            hints,
            bound,
            catalog_version,
            generation,
            context,
            executions: AtomicI64::new(0),
        }
    }

    /// Counts a run, and gives its binding against `catalog` for it: bound again when the
    /// schema changed since it was bound (or `DISCARD PLANS` came after); `None` when the
    /// binding it has still holds. A statement whose parameters or result columns would
    /// change is refused, as PostgreSQL refuses it.
    pub fn binding_to_run(
        &self,
        catalog: &Catalog,
        generation: u64,
        context: planner::BindContext,
    ) -> SqlResult<Option<Bound>> {
        self.executions.fetch_add(1, Ordering::Relaxed);
        if catalog.version == self.catalog_version
            && generation == self.generation
            && context == self.context
        {
            return Ok(None);
        }
        let bound = bind_in_session(catalog, &self.parsed, &self.hints, context)?;
        if bound.param_types != self.bound.param_types
            || bound.plan.output_columns().len() != self.bound.plan.output_columns().len()
        {
            return Err(SqlError::new(
                ErrorKind::FeatureNotSupported,
                "cached plan must not change result type",
            ));
        }
        Ok(Some(bound))
    }
}

/// A named statement as pgwire keeps statements.
pub type Stored = Arc<StoredStatement<Arc<Prepared>>>;

struct Entry {
    statement: Stored,
    from_sql: bool,
    prepare_time: i64,
}

/// The session's named prepared statements.
#[derive(Default)]
pub struct Statements {
    named: BTreeMap<String, Entry>,
}

impl Statements {
    /// Adds a statement under its name; a name in use is refused (42P05), as in PostgreSQL.
    pub fn add(&mut self, statement: Stored, from_sql: bool, now_micros: i64) -> SqlResult<()> {
        let name = &statement.id;
        debug_assert!(
            name != pgwire::api::DEFAULT_NAME,
            "the unnamed statement is pgwire's"
        );
        if self.named.contains_key(name) {
            return Err(SqlError::new(
                ErrorKind::DuplicatePreparedStatement,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        let name = name.clone();
        let entry = Entry {
            statement,
            from_sql,
            prepare_time: now_micros,
        };
        self.named.insert(name, entry);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<Stored> {
        self.named.get(name).map(|e| e.statement.clone())
    }

    /// The statement named `name`, or 26000.
    pub fn named(&self, name: &str) -> SqlResult<Stored> {
        self.get(name).ok_or_else(|| no_such_statement(name))
    }

    /// Removes a statement; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        self.named.remove(name).is_some()
    }

    pub fn clear(&mut self) {
        self.named.clear();
    }

    /// What `pg_prepared_statements` shows.
    pub fn listing(&self) -> Vec<PreparedStatementInfo> {
        self.named
            .iter()
            .map(|(name, e)| {
                let prepared = &e.statement.statement;
                PreparedStatementInfo {
                    name: name.clone(),
                    statement: prepared.parsed.text.clone(),
                    prepare_time: e.prepare_time,
                    parameter_types: prepared.bound.param_types.clone(),
                    from_sql: e.from_sql,
                    executions: prepared.executions.load(Ordering::Relaxed),
                }
            })
            .collect()
    }
}

pub fn no_such_statement(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::InvalidPreparedStatement,
        format!("prepared statement \"{name}\" does not exist"),
    )
}
