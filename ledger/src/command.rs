//! Commands: the deterministic units of work that travel through the replicated log, and
//! their outcomes. Everything nondeterministic (`now()`, parameters) is fixed in a command
//! before it is proposed, so every replica applying it computes the same result.

use std::collections::BTreeMap;
use std::sync::Arc;

use bincode::Options;
use plan::{
    DdlPlan, Expr, Isolation, OnConflict, SelectPlan, SessionSequences, Step, TableRef, WritePlan,
};
use serde::{Deserialize, Serialize};
use sql::{SqlError, SqlResult, Value};

use crate::row::Row;
use crate::schema_transaction::SchemaChanges;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Command {
    /// A write statement outside a transaction, applied whole at its log position.
    Write {
        plan: Arc<WritePlan>,
        params: Vec<Value>,
        now_micros: i64,
    },
    /// The commit of an interactive transaction: validate the reads, then apply the writes.
    Commit {
        isolation: Isolation,
        reads: Vec<ReadCheck>,
        ops: Vec<WriteOp>,
        /// The time of COMMIT: moves the ledger clock like a statement's `now()`.
        now_micros: i64,
    },
    Ddl {
        plan: DdlPlan,
    },
    /// A stored procedure's body, applied whole: each statement in order, all or nothing;
    /// the outcome is the last statement's.
    Procedure {
        steps: Vec<Step>,
        params: Vec<Value>,
        now_micros: i64,
    },
    /// `create_transfers` or `create_accounts`: rows for `columns` of the transfers or the
    /// accounts table, each applied with its own outcome; `linked[i]` chains row i+1 to row
    /// i.
    LedgerBatch {
        table: TableRef,
        columns: Vec<usize>,
        rows: Vec<Row>,
        linked: Vec<bool>,
        now_micros: i64,
    },
    /// A chunk of COPY FROM STDIN rows, already parsed and typed.
    Copy {
        table: TableRef,
        columns: Vec<usize>,
        rows: Vec<Row>,
        now_micros: i64,
    },
    /// A write statement that calls sequence functions (its defaults included), with the
    /// proposing session's sequence values for `currval` and `lastval`.
    WriteWithSequences {
        plan: Arc<WritePlan>,
        params: Vec<Value>,
        now_micros: i64,
        session: SessionSequences,
    },
    /// A query that advances sequences (`SELECT nextval(...)`): applied in log order like a
    /// write, its rows the outcome's.
    QueryWithSequences {
        plan: Arc<SelectPlan>,
        params: Vec<Value>,
        now_micros: i64,
        session: SessionSequences,
    },
    /// `count` values of each sequence (by id), allocated for the `nextval` calls of a
    /// statement a transaction stages; the outcome has one row (id, value) per value.
    AllocateSequenceValues {
        sequences: Vec<(u32, u64)>,
    },
    /// The commit of a transaction that changed the schema: its reads validated, its
    /// changes and the writes staged before each (refused if the catalog moved on from the
    /// version they were planned against), then its later writes, all or nothing.
    CommitWithSchema {
        schema: SchemaChanges,
        isolation: Isolation,
        reads: Vec<ReadCheck>,
        ops: Vec<WriteOp>,
        now_micros: i64,
    },
    /// The settings a node of a cluster was started with, proposed as it starts: the
    /// first recorded are the cluster's, and every replica checks its own against them
    /// (`cluster_settings`).
    ClusterSettings(crate::cluster_settings::ClusterSettings),
    /// TigerBeetle's pulse: nothing but the clock moving to `now_micros`, proposed when the
    /// earliest pending transfer's deadline has passed, so that it expires then, at this
    /// log position on every replica, rather than at the next command that happens by.
    Pulse {
        now_micros: i64,
    },
}

impl Command {
    /// The `now()` fixed for the command before it was proposed (schema changes have none).
    pub fn now_micros(&self) -> Option<i64> {
        match self {
            Command::Write { now_micros, .. }
            | Command::Commit { now_micros, .. }
            | Command::CommitWithSchema { now_micros, .. }
            | Command::Procedure { now_micros, .. }
            | Command::LedgerBatch { now_micros, .. }
            | Command::Copy { now_micros, .. }
            | Command::WriteWithSequences { now_micros, .. }
            | Command::QueryWithSequences { now_micros, .. }
            | Command::Pulse { now_micros } => Some(*now_micros),
            Command::Ddl { .. }
            | Command::AllocateSequenceValues { .. }
            | Command::ClusterSettings(_) => None,
        }
    }
}

/// One row write of a transaction, with every expression's parameters already bound.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WriteOp {
    /// A full row (defaults filled in). `on_conflict` decides what a duplicate key does.
    Insert {
        table: TableRef,
        row: Row,
        on_conflict: Option<OnConflict>,
    },
    /// Assignments evaluated against the row as it is when the commit applies, so
    /// `x = x + 1` from many transactions commutes instead of conflicting. `recheck` is the
    /// statement's WHERE, re-evaluated then (as PostgreSQL re-checks an updated row).
    Update {
        table: TableRef,
        key: Vec<u8>,
        assignments: Vec<(usize, Expr)>,
        recheck: Option<Expr>,
    },
    Delete {
        table: TableRef,
        key: Vec<u8>,
        recheck: Option<Expr>,
    },
}

/// What a serializable transaction read, to be validated at commit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ReadCheck {
    /// A row (by key) had this version; 0 means it did not exist.
    Row {
        table: u32,
        key: Vec<u8>,
        version: u64,
    },
    /// A scan of the table saw it as of this table version.
    Table { table: u32, version: u64 },
    /// Only whether the row existed mattered (an UPDATE or DELETE by primary key whose
    /// result depends on nothing else): later changes to its values do not conflict.
    Exists {
        table: u32,
        key: Vec<u8>,
        exists: bool,
    },
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub rows_affected: u64,
    /// RETURNING rows.
    pub rows: Vec<Row>,
    /// The values the command's `nextval` calls handed out, for the session's `currval`.
    pub sequences: SessionSequences,
}

pub type CommandResult = Result<Outcome, SqlError>;

/// A transaction's own uncommitted writes as later statements in it must see them:
/// (table id, key) to the row after the writes, or None when deleted.
pub type Overlay = BTreeMap<OverlayKey, Option<Row>>;

/// A row's place in an overlay: (table id, storage key).
pub type OverlayKey = (u32, Vec<u8>);

/// What staging a write statement inside a transaction produced.
#[derive(Clone, Debug, Default)]
pub struct Staged {
    pub ops: Vec<WriteOp>,
    /// The ops' bytes in the log's encoding: what they add to the transaction's COMMIT.
    pub bytes: usize,
    pub overlay: Vec<(OverlayKey, Option<Row>)>,
    pub rows_affected: u64,
    pub rows: Vec<Row>,
    pub reads: Vec<ReadCheck>,
    /// The allocated values its `nextval` calls took.
    pub sequences: SessionSequences,
}

/// The rows of a query and, for serializable transactions, what it read.
#[derive(Clone, Debug, Default)]
pub struct QueryResult {
    pub rows: Vec<Row>,
    pub reads: Vec<ReadCheck>,
}

/// The first byte of a command in the compact encoding: bincode with variable-length
/// integers, in which a row of small numbers takes a few bytes a value instead of twelve
/// (less to write to the log, to copy and to sync). Commands logged before it carry no
/// marker: they start with the low byte of a fixed-width variant index, 0 to 5.
const COMPACT: u8 = 0xC1;

fn compact() -> impl bincode::Options {
    bincode::DefaultOptions::new()
}

/// One command as it travels in a log entry (an entry carries many: group commit).
/// The largest encoded command proposed to the log (the proposer adds up to 8 MiB of other
/// commands to an entry, and the log store's limit is 64 MiB per entry). A transaction's
/// staged writes are held to it as they are staged, so one that could never commit fails
/// at the statement that passes it instead of holding its rows in memory until COMMIT.
pub const COMMAND_BYTES_MAX: usize = 48 << 20;

/// 54000 for a command (or a transaction's staged writes) of `bytes`, past the limit.
pub fn command_too_large(bytes: usize) -> SqlError {
    SqlError::new(
        sql::ErrorKind::ProgramLimitExceeded,
        format!(
            "not supported yet: a write of {} MiB in one command or transaction (the limit is {} MiB); split the transaction or statement",
            bytes >> 20,
            COMMAND_BYTES_MAX >> 20
        ),
    )
}

/// How many bytes `value` takes in the log's encoding, without encoding it.
pub fn encoded_len<T: Serialize>(value: &T) -> usize {
    compact()
        .serialized_size(value)
        .map_or(usize::MAX, |n| n as usize)
}

impl Staged {
    /// Adds one op to what the statement stages, counting its encoded bytes: past
    /// `COMMAND_BYTES_MAX` together with the transaction's `earlier` ones, the statement
    /// fails (54000) before it builds more.
    pub fn push_op(&mut self, op: WriteOp, earlier: usize) -> SqlResult<()> {
        self.bytes += encoded_len(&op);
        if earlier.saturating_add(self.bytes) > COMMAND_BYTES_MAX {
            return Err(command_too_large(earlier.saturating_add(self.bytes)));
        }
        self.ops.push(op);
        Ok(())
    }
}

pub fn encode_command(command: &Command) -> Vec<u8> {
    let mut out = vec![COMPACT];
    compact()
        .serialize_into(&mut out, command)
        .expect("commands always serialize");
    out
}

pub fn decode_command(bytes: &[u8]) -> SqlResult<Command> {
    match bytes.split_first() {
        Some((&COMPACT, rest)) => compact().deserialize(rest),
        // Written before the compact encoding.
        _ => bincode::deserialize(bytes),
    }
    .map_err(|e| SqlError::internal(format!("undecodable log command: {e}")))
}

pub fn encode_result(result: &CommandResult) -> Vec<u8> {
    bincode::serialize(result).expect("results always serialize")
}

pub fn decode_result(bytes: &[u8]) -> CommandResult {
    bincode::deserialize(bytes)
        .map_err(|e| SqlError::internal(format!("undecodable command result: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan::{InsertPlan, InsertSource};
    use sql::PackedRows;

    fn transfer_rows(n: i64) -> Command {
        Command::Copy {
            table: TableRef {
                id: 7,
                name: "transfers".into(),
                shape_version: 3,
            },
            columns: vec![0, 1, 2, 3, 4, 5],
            rows: (0..n)
                .map(|i| {
                    vec![
                        Value::Int(9_000_000_000 + i),
                        Value::Int(i % 100_000 + 2),
                        Value::Int(1),
                        Value::Int(1),
                        Value::Int(1),
                        Value::Text("code".into()),
                    ]
                })
                .collect(),
            now_micros: 1_790_000_000_000_000,
        }
    }

    /// A 1,000-row INSERT as a session proposes it: rows built, in `source`'s form.
    fn insert_of(source: fn(Vec<Row>) -> InsertSource) -> Command {
        let Command::Copy { table, rows, .. } = transfer_rows(1000) else {
            unreachable!()
        };
        Command::Write {
            plan: Arc::new(WritePlan::Insert(InsertPlan {
                table,
                source: source(rows),
                target_columns: (0..6).collect(),
                on_conflict: None,
                returning: None,
                call: false,
            })),
            params: vec![],
            now_micros: 1_790_000_000_000_000,
        }
    }

    fn same(a: &Command, b: &Command) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn commands_round_trip_in_the_compact_encoding() {
        let command = transfer_rows(1000);
        let bytes = encode_command(&command);
        assert_eq!(bytes[0], COMPACT);
        assert!(same(&decode_command(&bytes).unwrap(), &command));
        let fixed = bincode::serialize(&command).unwrap();
        assert!(
            bytes.len() * 3 < fixed.len(),
            "compact {} bytes, fixed-width {}",
            bytes.len(),
            fixed.len()
        );
    }

    #[test]
    fn built_rows_travel_packed_and_rows_logged_before_still_decode() {
        let packed = insert_of(|rows| InsertSource::Packed(PackedRows::pack(&rows)));
        let packed_bytes = encode_command(&packed);
        assert!(same(&decode_command(&packed_bytes).unwrap(), &packed));
        // Logged before packed rows: the same rows as bincode's values.
        let legacy = insert_of(InsertSource::Rows);
        let legacy_bytes = encode_command(&legacy);
        assert!(same(&decode_command(&legacy_bytes).unwrap(), &legacy));
        assert!(
            packed_bytes.len() <= legacy_bytes.len(),
            "packed {} bytes, bincode {}",
            packed_bytes.len(),
            legacy_bytes.len()
        );
    }

    #[test]
    fn commands_logged_before_the_compact_encoding_still_decode() {
        let command = transfer_rows(3);
        let old = bincode::serialize(&command).unwrap();
        assert!(old[0] < COMPACT);
        assert!(same(&decode_command(&old).unwrap(), &command));
        let ddl = bincode::serialize(&Command::Ddl {
            plan: DdlPlan::DropProcedures {
                names: vec!["p".into()],
                if_exists: true,
            },
        })
        .unwrap();
        assert!(matches!(decode_command(&ddl), Ok(Command::Ddl { .. })));
    }

    #[test]
    fn damaged_commands_are_errors() {
        let mut bytes = encode_command(&transfer_rows(2));
        bytes.truncate(bytes.len() - 3);
        assert!(decode_command(&bytes).is_err());
        assert!(decode_command(&[]).is_err());
        assert!(decode_command(&[COMPACT, 0xFF, 0xFF]).is_err());
    }
}
