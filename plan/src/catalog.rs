//! The catalog: table definitions as the executor stores them in the database and as the
//! binder resolves names against them. A `Catalog` value is immutable once published; DDL
//! produces a new one with a higher version.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::expr::Expr;
use crate::ledger::LedgerRole;
use crate::sequence::{Identity, SequenceDef};

/// User tables get OIDs from here up, as in PostgreSQL.
pub const FIRST_USER_OID: u32 = 16_384;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    pub default: Option<Expr>,
    /// The default as written, for `\d` and information_schema.
    pub default_sql: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckDef {
    pub name: String,
    /// Evaluated over the table row; NULL passes, as in SQL.
    pub expr: Expr,
    pub sql: String,
}

/// A secondary index: its own kv table mapping the indexed values to the row's key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexDef {
    /// Shares the id space with tables (its OID is `FIRST_USER_OID + id`).
    pub id: u32,
    pub name: String,
    pub columns: Vec<usize>,
    pub unique: bool,
    pub storage: String,
}

impl IndexDef {
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    /// A partial index (`CREATE INDEX ... WHERE`) or an expression index (`ON t
    /// (lower(email))`) is derived from its rows by `Catalog::index_derivations`: it holds
    /// only the rows a predicate accepts, or keys its columns do not hold as such, so only
    /// an access path chosen knowing the derivation (`choose_access`) may look rows up
    /// through it. Its storage is named `d<id>` (`i<id>` otherwise): the definition's
    /// stored layout has no room for a flag, and the readers that must pass it by have only
    /// the table's definition.
    pub fn is_derived(&self) -> bool {
        self.storage.starts_with('d')
    }

    /// The key expressions of an expression index; None for one keyed by its columns.
    pub fn key_exprs<'d>(
        &self,
        derivations: &'d BTreeMap<u32, Arc<IndexDerivation>>,
    ) -> Option<&'d [IndexExpr]> {
        derivations
            .get(&self.id)
            .map(|d| d.keys.as_slice())
            .filter(|keys| !keys.is_empty())
    }

    /// How many values its entries are keyed by.
    pub fn key_len(&self, derivations: &BTreeMap<u32, Arc<IndexDerivation>>) -> usize {
        self.key_exprs(derivations)
            .map_or(self.columns.len(), <[IndexExpr]>::len)
    }
}

/// An expression over a table's row in an index definition, with its text as written (for
/// `pg_indexes` and `pg_get_indexdef`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexExpr {
    pub expr: Expr,
    pub sql: String,
}

/// How a derived index is made from its table's rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexDerivation {
    /// The rows it holds: those this accepts (`WHERE`); every row when None.
    pub predicate: Option<IndexExpr>,
    /// Its key: these expressions' values; the index's columns' when empty.
    pub keys: Vec<IndexExpr>,
}

impl IndexDerivation {
    /// `row`'s key values in the index, or None when the predicate leaves it out (NULL
    /// leaves it out too).
    pub fn key_of(&self, row: &[Value], columns: &[usize]) -> SqlResult<Option<Vec<Value>>> {
        let env = crate::eval_env::EvalEnv::without_subqueries(&[], 0);
        if let Some(predicate) = &self.predicate {
            if !predicate.expr.eval(row, &env)?.is_true() {
                return Ok(None);
            }
        }
        Ok(Some(if self.keys.is_empty() {
            columns.iter().map(|&c| row[c].clone()).collect()
        } else {
            self.keys
                .iter()
                .map(|k| k.expr.eval(row, &env))
                .collect::<SqlResult<_>>()?
        }))
    }

    /// `Key (...)=(...)` for a unique violation, naming the key expressions.
    pub fn key_description(&self, values: &[Value]) -> String {
        let names: Vec<&str> = self.keys.iter().map(|k| k.sql.as_str()).collect();
        let shown: Vec<String> = values
            .iter()
            .zip(&self.keys)
            .map(|(v, k)| v.to_pg_text(k.expr.ty()).unwrap_or_default())
            .collect();
        format!("Key ({})=({})", names.join(", "), shown.join(", "))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableDef {
    pub id: u32,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Column positions of the primary key; empty means rows are keyed by a hidden row id.
    pub primary_key: Vec<usize>,
    pub primary_key_name: Option<String>,
    pub checks: Vec<CheckDef>,
    pub indexes: Vec<IndexDef>,
    /// Bumped by every change to the definition; plans carry it so a statement planned
    /// against an older shape is refused instead of misapplied.
    pub shape_version: u64,
    /// The kv table holding the rows.
    pub storage: String,
    /// The part the table plays in the ledger, for the tables the ledger migration creates.
    pub ledger: Option<LedgerRole>,
}

impl TableDef {
    /// Its primary key's constraint name: as declared, or PostgreSQL's `<table>_pkey`.
    pub fn key_name(&self) -> String {
        self.primary_key_name
            .clone()
            .unwrap_or_else(|| format!("{}_pkey", self.name))
    }

    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn has_primary_key(&self) -> bool {
        !self.primary_key.is_empty()
    }

    pub fn reference(&self) -> TableRef {
        TableRef {
            id: self.id,
            name: self.name.clone(),
            shape_version: self.shape_version,
        }
    }
}

/// How a plan names a table it writes: the executor resolves the id against its own catalog
/// and refuses the command if the shape changed since planning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRef {
    pub id: u32,
    pub name: String,
    pub shape_version: u64,
}

/// A stored procedure: its parameters and its body as written. The body's statements are
/// bound against the catalog in force when it is called.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcedureDef {
    pub name: String,
    pub params: Vec<(String, DataType)>,
    pub body: String,
}

/// A view: its query as written (bound afresh, against the catalog in force, wherever the
/// view is read), its columns when it was created, and the tables it reads, which cannot be
/// dropped or altered while it exists.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ViewDef {
    pub id: u32,
    pub name: String,
    pub sql: String,
    pub columns: Vec<(String, DataType)>,
    pub tables: Vec<u32>,
}

impl ViewDef {
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    /// CREATE OR REPLACE VIEW keeps the old view's columns, in order, as PostgreSQL
    /// requires; it may add columns at the end.
    pub fn check_replacement(&self, new: &ViewDef) -> SqlResult<()> {
        let refused =
            |message: String| Err(SqlError::new(ErrorKind::InvalidTableDefinition, message));
        if new.columns.len() < self.columns.len() {
            return refused("cannot drop columns from view".into());
        }
        for ((old_name, old_ty), (new_name, new_ty)) in self.columns.iter().zip(&new.columns) {
            if old_name != new_name {
                return refused(format!(
                    "cannot change name of view column \"{old_name}\" to \"{new_name}\""
                ));
            }
            if old_ty != new_ty {
                return refused(format!(
                    "cannot change data type of view column \"{old_name}\" from {} to {}",
                    old_ty.pg_name(),
                    new_ty.pg_name()
                ));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u64,
    pub tables: BTreeMap<String, Arc<TableDef>>,
    pub next_table_id: u32,
    pub procedures: BTreeMap<String, Arc<ProcedureDef>>,
    /// Stored under a key of their own (the executor's `META_VIEWS`), so the catalog's
    /// stored layout is what earlier builds wrote.
    #[serde(skip)]
    pub views: BTreeMap<String, Arc<ViewDef>>,
    /// Stored under a key of their own (the executor's `META_SEQUENCES`), as views are;
    /// their states are the executor's, not the catalog's.
    #[serde(skip)]
    pub sequences: BTreeMap<String, Arc<SequenceDef>>,
    /// Stored under a key of their own (the executor's `META_FOREIGN_KEYS`), as views are.
    #[serde(skip)]
    pub foreign_keys: Vec<Arc<crate::foreign_key::ForeignKeyDef>>,
    /// Stored under a key of their own (the executor's `META_ENUMS`), as views are.
    #[serde(skip)]
    pub enums: BTreeMap<String, Arc<crate::enum_type::EnumDef>>,
    /// Partial indexes' predicates by index id; stored under a key of their own (the
    /// executor's `META_INDEX_DERIVATIONS`), as views are.
    #[serde(skip)]
    pub index_derivations: BTreeMap<u32, Arc<IndexDerivation>>,
    /// The unique indexes that are UNIQUE constraints (declared by CREATE TABLE or added by
    /// ALTER TABLE ... ADD CONSTRAINT ... UNIQUE) rather than CREATE UNIQUE INDEX, by index
    /// id; stored under a key of their own (the executor's `META_UNIQUE_CONSTRAINTS`), as
    /// views are.
    #[serde(skip)]
    pub unique_constraints: std::collections::BTreeSet<u32>,
    /// Roles, memberships, ACLs and owners; stored under a key of its own (the executor's
    /// `META_AUTHORIZATION`), as views are.
    #[serde(skip)]
    pub authorization: crate::roles::Authorization,
    /// Never stored: the node's sessions, filled in by the session that reads
    /// `pg_stat_activity` in a copy of the catalog (empty everywhere else).
    #[serde(skip)]
    pub activity: Arc<Vec<SessionActivity>>,
    /// Never stored: the cluster's members as this node sees them, filled in by the session
    /// that reads `hotledger.cluster` in a copy of the catalog (empty everywhere else).
    #[serde(skip)]
    pub cluster: Arc<Vec<ClusterMember>>,
    /// Never stored: the node's counters and measurements, filled in by the session that
    /// reads `hotledger.metrics` and its kin in a copy of the catalog (empty everywhere else).
    #[serde(skip)]
    pub node: Arc<crate::node_views::NodeViews>,
    /// Never stored: the session's prepared statements, filled in by the session that reads
    /// `pg_prepared_statements` in a copy of the catalog (empty everywhere else).
    #[serde(skip)]
    pub prepared_statements: Arc<Vec<PreparedStatementInfo>>,
}

/// What `pg_prepared_statements` shows of one prepared statement.
#[derive(Clone, Debug, Default)]
pub struct PreparedStatementInfo {
    pub name: String,
    /// The text it was prepared from (for SQL PREPARE, the whole PREPARE statement).
    pub statement: String,
    /// Microseconds since the Unix epoch.
    pub prepare_time: i64,
    pub parameter_types: Vec<DataType>,
    /// Prepared by SQL PREPARE rather than the protocol's Parse.
    pub from_sql: bool,
    /// How often it ran (each run binds its parameters: PostgreSQL's custom plans).
    pub executions: i64,
}

/// What `hotledger.cluster` shows of one member of the replication group. What a node
/// cannot know of another (its term or applied index, on a follower) is None.
#[derive(Clone, Debug, Default)]
pub struct ClusterMember {
    pub node_id: i64,
    /// 'leader', 'follower', 'candidate' or 'learner'.
    pub role: String,
    pub voter: bool,
    /// Where it takes clients, as it said when asked (None: it did not answer).
    pub pg_addr: Option<String>,
    pub raft_addr: String,
    pub term: Option<i64>,
    pub last_log_index: Option<i64>,
    pub committed_index: Option<i64>,
    pub applied_index: Option<i64>,
    /// Entries behind the leader's log (known on the leader, and of itself on a follower).
    pub lag_entries: Option<i64>,
    pub reachable: bool,
    pub is_self: bool,
}

/// What `pg_stat_activity` shows of one client session.
#[derive(Clone, Debug, Default)]
pub struct SessionActivity {
    /// The process id its client got at startup (BackendKeyData).
    pub pid: i32,
    pub user: String,
    pub database: String,
    pub application_name: String,
    pub client_addr: Option<String>,
    pub client_port: Option<i32>,
    /// Microseconds since the Unix epoch.
    pub backend_start: i64,
    pub xact_start: Option<i64>,
    pub query_start: Option<i64>,
    pub state_change: i64,
    /// `active`, `idle`, `idle in transaction` or `idle in transaction (aborted)`.
    pub state: String,
    /// The statement running, or the last one.
    pub query: String,
}

impl Catalog {
    pub fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(name)
    }

    pub fn table_by_id(&self, id: u32) -> Option<&Arc<TableDef>> {
        self.tables.values().find(|t| t.id == id)
    }

    /// Every table's and index's kv storage: (relation id, kv table name).
    pub fn storages(&self) -> impl Iterator<Item = (u32, &str)> {
        self.tables.values().flat_map(|t| {
            std::iter::once((t.id, t.storage.as_str()))
                .chain(t.indexes.iter().map(|i| (i.id, i.storage.as_str())))
        })
    }

    /// The table owning the index called `name`, and the index's position in it.
    pub fn index(&self, name: &str) -> Option<(&Arc<TableDef>, usize)> {
        self.tables.values().find_map(|t| {
            t.indexes
                .iter()
                .position(|i| i.name == name)
                .map(|p| (t, p))
        })
    }

    pub fn ledger_table(&self, role: LedgerRole) -> Option<&Arc<TableDef>> {
        self.tables.values().find(|t| t.ledger == Some(role))
    }

    pub fn sequence_by_id(&self, id: u32) -> Option<&Arc<SequenceDef>> {
        self.sequences.values().find(|s| s.id == id)
    }

    /// The sequence `arg` names: a relation's name (text) or OID (`'s'::regclass`), as
    /// `nextval` and its kin take it.
    pub fn sequence_named(&self, arg: &Value) -> SqlResult<&Arc<SequenceDef>> {
        match arg {
            Value::Text(name) => {
                let name = name.trim_start_matches("public.");
                // As a regclass reads it: folded to lower case unless double-quoted.
                let bare = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
                    Some(quoted) => quoted.replace("\"\"", "\""),
                    None => name.to_lowercase(),
                };
                match self.sequences.get(&bare) {
                    Some(s) => Ok(s),
                    None if self.relation_exists(&bare) => Err(not_a_sequence(&bare)),
                    None => Err(SqlError::undefined_table(&bare)),
                }
            }
            Value::Int(oid) => {
                let id = (*oid as u32).wrapping_sub(FIRST_USER_OID);
                if let Some(s) = self.sequence_by_id(id) {
                    return Ok(s);
                }
                match self.tables.values().find(|t| t.id == id) {
                    Some(t) => Err(not_a_sequence(&t.name)),
                    None => Err(SqlError::new(
                        ErrorKind::UndefinedTable,
                        format!("could not open relation with OID {oid}"),
                    )),
                }
            }
            _ => Err(SqlError::mismatch(
                "a sequence is named by text or regclass",
            )),
        }
    }

    /// The sequences owned by table `id`'s columns (SERIAL and identity columns).
    pub fn sequences_owned_by(&self, id: u32) -> impl Iterator<Item = &Arc<SequenceDef>> {
        self.sequences
            .values()
            .filter(move |s| s.owner.as_ref().is_some_and(|o| o.table == id))
    }

    /// The sequence column `column` of table `id` owns (SERIAL, identity, OWNED BY).
    pub fn sequence_of_column(&self, id: u32, column: &str) -> Option<&Arc<SequenceDef>> {
        self.sequences_owned_by(id)
            .find(|s| s.owner.as_ref().is_some_and(|o| o.column == column))
    }

    /// The identity kind of column `column` of table `id`, if it is an identity column.
    pub fn identity_of(&self, id: u32, column: &str) -> Option<Identity> {
        self.sequence_of_column(id, column)
            .and_then(|s| s.identity())
    }

    /// The views that read table `id`.
    pub fn views_reading(&self, id: u32) -> impl Iterator<Item = &Arc<ViewDef>> {
        self.views.values().filter(move |v| v.tables.contains(&id))
    }

    /// The id for a new relation called `name` (table, index, view or sequence): 42P07 if
    /// a relation has that name.
    pub fn new_relation_id(&mut self, name: &str) -> SqlResult<u32> {
        if self.relation_exists(name) {
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{name}\" already exists"),
            ));
        }
        self.next_table_id += 1;
        Ok(self.next_table_id)
    }

    /// Whether any relation (table, view or index) is called `name`.
    pub fn relation_exists(&self, name: &str) -> bool {
        self.tables.contains_key(name)
            || self.views.contains_key(name)
            || self.sequences.contains_key(name)
            || self.index(name).is_some()
            || self
                .tables
                .values()
                .any(|t| t.primary_key_name.as_deref() == Some(name))
    }
}

pub fn not_a_sequence(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::WrongObjectType,
        format!("\"{name}\" is not a sequence"),
    )
}

/// 2BP01 for dropping `dropped` while the views `dependents` read them.
pub fn views_depend_error(dropped: &[String], dependents: &[String]) -> SqlError {
    let first = dropped.first().cloned().unwrap_or_default();
    let detail = match dependents {
        [one] => format!("view {one} depends on view {first}"),
        many => format!("views {} depend on view {first}", many.join(", ")),
    };
    SqlError::new(
        ErrorKind::DependentObjectsStillExist,
        format!("cannot drop view {first} because other objects depend on it"),
    )
    .with_detail(format!(
        "{detail}; use DROP VIEW ... CASCADE to drop the dependent views too"
    ))
}

/// The views of a catalog that stop binding once the views `dropped` are gone (and the
/// views that read those, and so on): `planner::dependent_views`. The executor rechecks a
/// DROP VIEW with it when it applies (a view may have been created on one of them since
/// the statement was bound) without binding SQL itself.
pub type DependentViews = fn(&Catalog, &[String]) -> Vec<String>;
