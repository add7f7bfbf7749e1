//! Running relational plans over storage: scans through the primary key (merged with a
//! transaction's own uncommitted writes), nested-loop joins, grouping, sorting.

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::rc::Rc;
use std::sync::{Arc, Weak};

use plan::{
    Access, AggCall, AggFunc, BackendSignals, Catalog, EvalEnv, Expr, Interrupt, JoinKind,
    NoBackends, NoSequences, Rel, SequenceSource, SortKey, SubqueryRunner, TableDef, TableSource,
};
use sql::{SqlError, SqlResult, Value};

use crate::accumulator::Accumulator;
use crate::change_events::{is_merged, merge_parts};
use crate::command::{Overlay, ReadCheck};
use crate::error::kv_error;
use crate::index_scan::KeyRead;
use crate::partition::{is_partitioned, partition_of_row};
use crate::partitions_read::Partitions;
use crate::row::{cast_key, decode_row, encode_key, row_version, Row};
use crate::window::window_rows;

/// Everything a read needs: storage, the catalog it was planned against, the transaction's
/// overlay, and where to record reads for serializable validation.
pub struct Reader<'a> {
    /// Where rows are read: the executor's partitions or their snapshots; None for plans
    /// that read no user table (evaluated outside the executor).
    pub(crate) partitions: Option<Partitions<'a>>,
    pub catalog: &'a Catalog,
    pub overlay: Option<&'a Overlay>,
    pub record_reads: bool,
    pub reads: RefCell<Vec<ReadCheck>>,
    /// A query's reader, which may report relation sizes. A write's may not: sizes are the
    /// pages a replica's trees hold, which replicas need not share, and a write must compute
    /// the same everywhere.
    pub(crate) sizes: bool,
    /// Where sequence calls go: a command's states, a statement's allocated values, or
    /// (None) nowhere.
    pub(crate) sequences: Option<Box<dyn SequenceSource + 'a>>,
    /// The working tables of the `WITH RECURSIVE` queries being run, by id.
    pub(crate) working: RefCell<BTreeMap<u32, Vec<Row>>>,
    /// Whether what it evaluates is recorded rather than computed again by each replica (a
    /// query's rows, rows a transaction stages for its commit), so `random()` and
    /// `gen_random_uuid()` may draw values ([`EvalEnv::random`]).
    pub(crate) random: bool,
    /// The node's sessions, where the statement runs in one (never on the executor).
    pub(crate) backends: Option<&'a dyn BackendSignals>,
    /// Subqueries run so far, by the address of their relation's allocation, which the
    /// `Weak` keeps from being reused while the reader lives: the rows of one that reads
    /// nothing of the row it runs for, from its first run; `None` for one that does.
    pub(crate) shared_subqueries: RefCell<SharedSubqueries>,
    /// Whether the statement must stop: checked once per row read, joined, filtered or
    /// aggregated. Never raised for a command applied from the log.
    pub(crate) interrupt: Interrupt,
    /// What the statement's thread held when it started, checked with the interrupt
    /// against the server's memory budget; unlimited for a command applied from the log.
    pub(crate) memory: plan::memory::StatementMemory,
}

type SharedSubqueries = HashMap<usize, (Weak<Rel>, Option<Rc<Vec<Row>>>)>;

/// The most rows a `WITH RECURSIVE` query may produce: reads run on the executor's
/// thread, so a recursion that never ends must end here rather than stall every write.
const MAX_RECURSIVE_ROWS: usize = 1_000_000;

/// Rows a scan found before filtering, by key: (version, values), or None where the
/// transaction deleted the row.
pub(crate) type Candidates = Vec<(Vec<u8>, Option<(u64, Row)>)>;

/// A row a scan selected: its storage key, stored version and values.
pub struct ScannedRow {
    pub key: Vec<u8>,
    pub version: u64,
    pub row: Row,
}

/// The most values a join's rows may hold: joins materialize their rows, and one of tables
/// unrelated by its conditions grows as their product — the server must not run out of
/// memory for it (about a gigabyte of rows).
const MAX_JOIN_VALUES: usize = 16 << 20;

fn join_too_large() -> SqlError {
    SqlError::new(
        sql::ErrorKind::ProgramLimitExceeded,
        format!("a join would hold more than {MAX_JOIN_VALUES} values"),
    )
    .with_detail("Joins are materialized: not supported yet for results this large; add conditions that relate the joined tables.")
}

/// A join's right rows by the values of its equi-join keys (`plan::equi_keys`).
struct KeyedRows {
    /// (left side's key expression, right side's).
    keys: Vec<(Expr, Expr)>,
    /// Positions of the right rows with each key (none with a NULL in it), in order.
    by_key: BTreeMap<RowKey, Vec<usize>>,
}

impl KeyedRows {
    /// None when the ON equates nothing between the sides (every pair must be tried).
    fn build(
        on: &Expr,
        outer: &[Value],
        left_width: usize,
        right_rows: &[Row],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Option<KeyedRows>> {
        let split = outer.len() + left_width;
        let keys = plan::equi_keys(on, outer.len(), split);
        if keys.is_empty() {
            return Ok(None);
        }
        // The right side's expressions read the outer row and the right row: the left
        // row's place is left NULL.
        let mut probe: Vec<Value> = outer.to_vec();
        probe.resize(split, Value::Null);
        let mut by_key: BTreeMap<RowKey, Vec<usize>> = BTreeMap::new();
        for (i, r) in right_rows.iter().enumerate() {
            probe.truncate(split);
            probe.extend_from_slice(r);
            let key = keys
                .iter()
                .map(|(_, right)| right.eval(&probe, env))
                .collect::<SqlResult<Vec<Value>>>()?;
            if !key.iter().any(Value::is_null) {
                by_key.entry(RowKey(key)).or_default().push(i);
            }
        }
        Ok(Some(KeyedRows { keys, by_key }))
    }

    /// The right rows whose keys equal the left row's (`prefix`: the outer row, then it).
    fn matches<'r>(
        &self,
        prefix: &[Value],
        right_rows: &'r [Row],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<&'r Row>> {
        let key = self
            .keys
            .iter()
            .map(|(left, _)| left.eval(prefix, env))
            .collect::<SqlResult<Vec<Value>>>()?;
        if key.iter().any(Value::is_null) {
            return Ok(Vec::new());
        }
        Ok(self
            .by_key
            .get(&RowKey(key))
            .map(|positions| positions.iter().map(|&i| &right_rows[i]).collect())
            .unwrap_or_default())
    }
}

/// Orders rows for grouping and DISTINCT.
#[derive(Clone, Debug)]
pub struct RowKey(pub Vec<Value>);

impl PartialEq for RowKey {
    fn eq(&self, other: &RowKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for RowKey {}
impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &RowKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for RowKey {
    fn cmp(&self, other: &RowKey) -> Ordering {
        for (a, b) in self.0.iter().zip(&other.0) {
            match a.sort_cmp(b) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        self.0.len().cmp(&other.0.len())
    }
}

/// Whether a row passes a scan's filter (none passes every row).
pub(crate) fn passes(
    filter: Option<&Expr>,
    outer: &[Value],
    row: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<bool> {
    match filter {
        None => Ok(true),
        Some(f) => Ok(f.eval(&joined(outer, row), env)?.is_true()),
    }
}

pub(crate) fn joined<'r>(outer: &[Value], row: &'r [Value]) -> Cow<'r, [Value]> {
    if outer.is_empty() {
        Cow::Borrowed(row)
    } else {
        let mut v = Vec::with_capacity(outer.len() + row.len());
        v.extend_from_slice(outer);
        v.extend_from_slice(row);
        Cow::Owned(v)
    }
}

/// The most rows a `generate_series` may produce.
const MAX_SERIES_ROWS: usize = 100_000_000;

/// `generate_series(start, stop, step)` over timestamps: `start`, `start + step`, ... while
/// not past `stop`, each step added to the one before (so months carry as PostgreSQL's do);
/// no rows when an argument is NULL.
fn time_series(first: Value, last: Value, step: Value) -> SqlResult<Vec<Row>> {
    let micros = |v: &Value| match v {
        Value::Timestamp(t) | Value::TimestampTz(t) => Some(*t),
        _ => None,
    };
    let (Some(mut at), Some(last), Value::Interval(step)) = (micros(&first), micros(&last), step)
    else {
        return Ok(Vec::new());
    };
    let tz = matches!(first, Value::TimestampTz(_));
    let forward = match step.span().cmp(&0) {
        Ordering::Equal => {
            return Err(SqlError::new(
                sql::ErrorKind::InvalidParameterValue,
                "step size cannot equal zero",
            ))
        }
        order => order == Ordering::Greater,
    };
    let mut rows = Vec::new();
    while (forward && at <= last) || (!forward && at >= last) {
        if rows.len() >= MAX_SERIES_ROWS {
            return Err(SqlError::new(
                sql::ErrorKind::ProgramLimitExceeded,
                "generate_series of more than 100 million rows",
            ));
        }
        rows.push(vec![if tz {
            Value::TimestampTz(at)
        } else {
            Value::Timestamp(at)
        }]);
        match sql::datetime::add_interval(at, &step) {
            Ok(next) if next != at => at = next,
            _ => break,
        }
    }
    Ok(rows)
}

/// The smallest byte string greater than every string starting with `prefix`.
pub(crate) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

impl<'a> Reader<'a> {
    /// Whether a read on a snapshot needed the executor (see `Partitions::incomplete`).
    pub(crate) fn incomplete(&self) -> bool {
        self.partitions.as_ref().is_some_and(Partitions::incomplete)
    }

    pub fn env<'e>(&'e self, params: &'e [Value], now_micros: i64) -> EvalEnv<'e> {
        EvalEnv {
            params,
            now_micros,
            subqueries: self,
            sequences: self.sequences.as_deref().unwrap_or(&NoSequences),
            random: self.random,
            backends: self.backends.unwrap_or(&NoBackends),
            interrupt: &self.interrupt,
        }
    }

    /// What the loops that may run long call once per row: the statement stops when its
    /// interrupt is raised or it holds too much memory.
    #[inline]
    pub(crate) fn tick(&self) -> SqlResult<()> {
        self.interrupt.check()?;
        self.memory.check()
    }

    pub(crate) fn partitions(&self) -> SqlResult<&Partitions<'a>> {
        self.partitions
            .as_ref()
            .ok_or_else(|| SqlError::internal("a user table read outside the executor"))
    }

    /// The partitions that may hold rows of `table`: all for the ledger's tables, else 0.
    pub(crate) fn shards_of(&self, table: &TableDef) -> SqlResult<std::ops::Range<usize>> {
        let count = self.partitions()?.count();
        Ok(if is_partitioned(table) {
            0..count
        } else {
            0..1
        })
    }

    /// Reads the row with key `key` from the partition that holds it.
    fn get(&self, table: &TableDef, key: &[u8]) -> SqlResult<Option<Vec<u8>>> {
        let partitions = self.partitions()?;
        let index = partition_of_row(table, key, partitions.count());
        let handle = partitions.table(index, table)?;
        partitions.get(index, handle, key)
    }

    /// The log index of the last write to `table`, in any partition.
    fn table_version(&self, table: &TableDef) -> SqlResult<u64> {
        Ok(self.partitions()?.table_version(table.id))
    }

    fn record(&self, check: ReadCheck) {
        if self.record_reads {
            self.reads.borrow_mut().push(check);
        }
    }

    /// The rows of `table` the access path and filter select, with their keys, in key order.
    pub fn scan(
        &self,
        table: &TableDef,
        access: &Access,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<(Vec<u8>, Row)>> {
        let rows = self.scan_stored(table, access, filter, outer, env)?;
        Ok(rows.into_iter().map(|r| (r.key, r.row)).collect())
    }

    /// `scan`, also giving each row's stored version (0 for a transaction's own rows), so a
    /// write can keep the row's prior state for undo without reading it again.
    pub fn scan_stored(
        &self,
        table: &TableDef,
        access: &Access,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<ScannedRow>> {
        let mut raw: Candidates = Vec::new();
        let mut prefetched = false;
        let (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>) = match access {
            Access::Point(exprs) => {
                let values: Vec<Value> = exprs
                    .iter()
                    .map(|e| e.eval(outer, env))
                    .collect::<SqlResult<_>>()?;
                let Some(key_values) = cast_key(table, &values) else {
                    return Ok(Vec::new());
                };
                let key = encode_key(&key_values)?;
                if is_merged(table) {
                    // Its parts may be in any partition: a range of the one key.
                    let end = successor(&key).map_or(Bound::Unbounded, Bound::Excluded);
                    let bounds = (Bound::Included(key), end);
                    return self.scan_bounds(table, bounds, raw, false, filter, outer, env);
                }
                let overlaid = self.overlay.and_then(|o| o.get(&(table.id, key.clone())));
                match overlaid {
                    Some(row) => raw.push((key, row.clone().map(|r| (0, r)))),
                    None => {
                        let stored = self.get(table, &key)?;
                        self.record(ReadCheck::Row {
                            table: table.id,
                            key: key.clone(),
                            version: stored.as_deref().map(row_version).unwrap_or(0),
                        });
                        if let Some(bytes) = stored {
                            raw.push((key, Some(decode_row(&bytes)?)));
                        }
                    }
                }
                return self.finish_scan(raw, filter, outer, env);
            }
            Access::Range { lower, upper } => {
                let bound =
                    |b: &Option<(Expr, bool)>| -> SqlResult<Option<(Option<Vec<u8>>, bool)>> {
                        let Some((e, inclusive)) = b else {
                            return Ok(None);
                        };
                        let v = e.eval(outer, env)?;
                        let column = table.primary_key[0];
                        if v.is_null() {
                            return Ok(Some((None, *inclusive)));
                        }
                        let v = v.cast(table.columns[column].ty)?;
                        Ok(Some((Some(encode_key(&[v])?), *inclusive)))
                    };
                let lo = bound(lower)?;
                let hi = bound(upper)?;
                if matches!(lo, Some((None, _))) || matches!(hi, Some((None, _))) {
                    return Ok(Vec::new());
                }
                let lower = match lo {
                    Some((Some(p), true)) => Bound::Included(p),
                    Some((Some(p), false)) => match successor(&p) {
                        Some(s) => Bound::Included(s),
                        None => return Ok(Vec::new()),
                    },
                    _ => Bound::Unbounded,
                };
                let upper = match hi {
                    Some((Some(p), true)) => match successor(&p) {
                        Some(s) => Bound::Excluded(s),
                        None => Bound::Unbounded,
                    },
                    Some((Some(p), false)) => Bound::Excluded(p),
                    _ => Bound::Unbounded,
                };
                (lower, upper)
            }
            Access::Index { .. } | Access::IndexRange { .. } => {
                match self.index_candidates(table, access, filter, outer, env)? {
                    Some(rows) => raw = rows,
                    None => return Ok(Vec::new()),
                }
                prefetched = true;
                (Bound::Unbounded, Bound::Unbounded)
            }
            Access::KeyRange { .. } => match self.key_range(table, access, filter, outer, env)? {
                KeyRead::Nothing => return Ok(Vec::new()),
                KeyRead::Bounds(bounds) => bounds,
                KeyRead::Walked(rows) => {
                    raw = rows;
                    prefetched = true;
                    (Bound::Unbounded, Bound::Unbounded)
                }
            },
            Access::Full => (Bound::Unbounded, Bound::Unbounded),
        };
        self.scan_bounds(table, (lower, upper), raw, prefetched, filter, outer, env)
    }

    /// The rest of `scan_stored`: the rows between the bounds (unless `prefetched` holds
    /// them already in `raw`), a merged table's parts put together, the transaction's own
    /// rows merged in, the filter applied.
    #[allow(clippy::too_many_arguments)]
    fn scan_bounds(
        &self,
        table: &TableDef,
        (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        mut raw: Candidates,
        prefetched: bool,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<ScannedRow>> {
        self.record_table_read(table)?;
        if !prefetched {
            self.each_stored(table, &lower, &upper, &mut |key, row| {
                raw.push((key, Some(row)));
                Ok(())
            })?;
            // Each partition's rows come in key order; the scan's contract is one order.
            if self.shards_of(table)?.len() > 1 {
                raw.sort_by(|a, b| a.0.cmp(&b.0));
            }
        }
        if is_merged(table) {
            merge_parts(&mut raw);
        }
        if let Some(overlay) = self.overlay {
            let start = (
                table.id,
                match &lower {
                    Bound::Included(k) | Bound::Excluded(k) => k.clone(),
                    Bound::Unbounded => Vec::new(),
                },
            );
            let changes: BTreeMap<Vec<u8>, Option<(u64, Row)>> = overlay
                .range(start..)
                .take_while(|((t, _), _)| *t == table.id)
                .filter(|((_, key), _)| within(key, &lower, &upper))
                .map(|((_, key), row)| (key.clone(), row.clone().map(|r| (0, r))))
                .collect();
            if !changes.is_empty() {
                let mut merged: BTreeMap<Vec<u8>, Option<(u64, Row)>> = raw.into_iter().collect();
                merged.extend(changes);
                raw = merged.into_iter().collect();
            }
        }
        self.finish_scan(raw, filter, outer, env)
    }

    fn finish_scan(
        &self,
        raw: Candidates,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<ScannedRow>> {
        let mut out = Vec::with_capacity(raw.len());
        for (key, stored) in raw {
            self.tick()?;
            let Some((version, row)) = stored else {
                continue;
            };
            if !passes(filter, outer, &row, env)? {
                continue;
            }
            out.push(ScannedRow { key, version, row });
        }
        Ok(out)
    }

    /// A nested-loop join. When its ON equates expressions of the two sides (and the right
    /// side does not depend on the left row), the right rows are looked up by those keys
    /// instead of each being tried; the ON is still evaluated on every pair, and the rows
    /// come out in the same order.
    fn join(&self, rel: &Rel, outer: &[Value], env: &EvalEnv<'_>) -> SqlResult<Vec<Row>> {
        let Rel::Join {
            left,
            right,
            kind,
            on,
            lateral,
            right_width,
        } = rel
        else {
            return Err(SqlError::internal("a join expected"));
        };
        let left_rows = self.rows(left, outer, env)?;
        let fixed_right = if *lateral {
            None
        } else {
            Some(self.rows(right, outer, env)?)
        };
        let keyed = match (&fixed_right, on, left_rows.first()) {
            (Some(right_rows), Some(on), Some(first)) => {
                KeyedRows::build(on, outer, first.len(), right_rows, env)?
            }
            _ => None,
        };
        let mut out = Vec::new();
        for l in left_rows {
            let prefix: Vec<Value> = outer.iter().chain(l.iter()).cloned().collect();
            let lateral_rows;
            let right_rows = match &fixed_right {
                Some(r) => r,
                None => {
                    lateral_rows = self.rows(right, &prefix, env)?;
                    &lateral_rows
                }
            };
            let keyed_matches;
            let candidates: &mut dyn Iterator<Item = &Row> = match &keyed {
                Some(keyed) => {
                    keyed_matches = keyed.matches(&prefix, right_rows, env)?;
                    &mut keyed_matches.into_iter()
                }
                None => &mut right_rows.iter(),
            };
            let mut matched = false;
            for r in candidates {
                self.tick()?;
                let mut full = prefix.clone();
                full.extend_from_slice(r);
                if let Some(on) = on {
                    if !on.eval(&full, env)?.is_true() {
                        continue;
                    }
                }
                matched = true;
                let row = full.split_off(outer.len());
                if out.len().saturating_mul(row.len()) > MAX_JOIN_VALUES {
                    return Err(join_too_large());
                }
                out.push(row);
            }
            if !matched && *kind == JoinKind::Left {
                let mut row = l.clone();
                row.extend(std::iter::repeat_n(Value::Null, *right_width));
                out.push(row);
            }
        }
        Ok(out)
    }

    /// Runs a relation with `outer` as the enclosing row.
    pub fn rows(&self, rel: &Rel, outer: &[Value], env: &EvalEnv<'_>) -> SqlResult<Vec<Row>> {
        Ok(match rel {
            Rel::Scan {
                source: TableSource::User(table),
                access,
                filter,
            } => {
                let current = self
                    .catalog
                    .table_by_id(table.id)
                    .filter(|t| t.shape_version == table.shape_version);
                let Some(current) = current else {
                    return Err(SqlError::serialization_failure(format!(
                        "table \"{}\" changed while the statement was planned; retry",
                        table.name
                    )));
                };
                self.scan(current, access, filter.as_ref(), outer, env)?
                    .into_iter()
                    .map(|(_, r)| r)
                    .collect()
            }
            Rel::Scan {
                source: TableSource::System(system),
                filter,
                ..
            } => {
                let mut out = Vec::new();
                for row in system.rows(self.catalog) {
                    self.tick()?;
                    if !passes(filter.as_ref(), outer, &row, env)? {
                        continue;
                    }
                    out.push(row);
                }
                out
            }
            Rel::Values { rows } => rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|e| e.eval(outer, env))
                        .collect::<SqlResult<Row>>()
                })
                .collect::<SqlResult<_>>()?,
            Rel::Filter { input, predicate } => {
                let mut out = Vec::new();
                for row in self.rows(input, outer, env)? {
                    self.tick()?;
                    if predicate.eval(&joined(outer, &row), env)?.is_true() {
                        out.push(row);
                    }
                }
                out
            }
            Rel::Project { input, exprs } => {
                let rows = self.rows(input, outer, env)?;
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    self.tick()?;
                    let full = joined(outer, &row);
                    out.push(
                        exprs
                            .iter()
                            .map(|e| e.eval(&full, env))
                            .collect::<SqlResult<Row>>()?,
                    );
                }
                out
            }
            Rel::Join { .. } => self.join(rel, outer, env)?,
            Rel::Aggregate {
                input,
                group_by,
                aggregates,
            } => self.aggregate(input, group_by, aggregates, outer, env)?,
            Rel::Sort { input, keys } => {
                let rows = self.rows(input, outer, env)?;
                sort_rows(rows, keys, outer, env)?
            }
            Rel::Limit {
                input,
                limit,
                offset,
            } => {
                let count = |e: &Option<Expr>| -> SqlResult<Option<usize>> {
                    match e {
                        None => Ok(None),
                        Some(e) => match e.eval(outer, env)? {
                            Value::Null => Ok(None),
                            Value::Int(n) if n >= 0 => Ok(Some(n as usize)),
                            Value::Int(_) => Err(SqlError::new(
                                sql::ErrorKind::InvalidParameterValue,
                                "LIMIT and OFFSET must not be negative",
                            )),
                            other => Err(SqlError::mismatch(format!(
                                "LIMIT must be an integer, not {}",
                                other.natural_type()
                            ))),
                        },
                    }
                };
                let (limit, offset) = (count(limit)?, count(offset)?.unwrap_or(0));
                let rows = self.rows(input, outer, env)?;
                rows.into_iter()
                    .skip(offset)
                    .take(limit.unwrap_or(usize::MAX))
                    .collect()
            }
            Rel::Distinct { input } => {
                let mut seen = BTreeSet::new();
                let mut out = Vec::new();
                for row in self.rows(input, outer, env)? {
                    self.tick()?;
                    if seen.insert(RowKey(row.clone())) {
                        out.push(row);
                    }
                }
                out
            }
            Rel::Window { input, calls } => {
                let rows = self.rows(input, outer, env)?;
                window_rows(rows, calls, outer, env)?
            }
            Rel::CommonTable {
                input, outer_len, ..
            } => self.rows(input, &outer[..(*outer_len).min(outer.len())], env)?,
            Rel::SequenceState { sequence } => {
                let state = env.sequences.state(*sequence).ok_or_else(|| {
                    SqlError::new(
                        sql::ErrorKind::UndefinedTable,
                        "the sequence was dropped while the query was planned",
                    )
                })?;
                vec![vec![
                    Value::Int(state.last),
                    Value::Int(0),
                    Value::Bool(state.called),
                ]]
            }
            Rel::Ordinality { input } => {
                let mut rows = self.rows(input, outer, env)?;
                for (n, row) in rows.iter_mut().enumerate() {
                    row.push(Value::Int(n as i64 + 1));
                }
                rows
            }
            Rel::Unnest { array } => match array.eval(outer, env)? {
                Value::Null => Vec::new(),
                Value::Array(items) => items.into_iter().map(|item| vec![item]).collect(),
                other => {
                    return Err(SqlError::mismatch(format!(
                        "unnest needs an array, not {}",
                        other.natural_type()
                    )))
                }
            },
            Rel::Series { start, stop, step } => {
                let first = start.eval(outer, env)?;
                if let Value::Timestamp(_) | Value::TimestampTz(_) = first {
                    let step = match step {
                        Some(s) => s.eval(outer, env)?,
                        None => Value::Null,
                    };
                    return time_series(first, stop.eval(outer, env)?, step);
                }
                let int = |v: Value| -> SqlResult<Option<i64>> {
                    match v {
                        Value::Null => Ok(None),
                        Value::Int(i) => Ok(Some(i)),
                        other => Err(SqlError::mismatch(format!(
                            "generate_series needs integers, not {}",
                            other.natural_type()
                        ))),
                    }
                };
                let (Some(first), Some(last)) = (int(first)?, int(stop.eval(outer, env)?)?) else {
                    return Ok(Vec::new());
                };
                let step = match step {
                    Some(s) => match int(s.eval(outer, env)?)? {
                        Some(0) => {
                            return Err(SqlError::new(
                                sql::ErrorKind::InvalidParameterValue,
                                "step size cannot equal zero",
                            ))
                        }
                        Some(s) => s,
                        None => return Ok(Vec::new()),
                    },
                    None => 1,
                };
                // i128: the span of two i64 bounds, or a step of i64::MIN, cannot overflow.
                let span = last as i128 - first as i128;
                let count = if (span >= 0) == (step > 0) {
                    span / step as i128 + 1
                } else {
                    0
                };
                if count > MAX_SERIES_ROWS as i128 {
                    return Err(SqlError::new(
                        sql::ErrorKind::ProgramLimitExceeded,
                        "generate_series of more than 100 million rows",
                    ));
                }
                let mut rows = Vec::with_capacity(count as usize);
                let mut v = first;
                while (step > 0 && v <= last) || (step < 0 && v >= last) {
                    self.tick()?;
                    rows.push(vec![Value::Int(v)]);
                    v = match v.checked_add(step) {
                        Some(n) => n,
                        None => break,
                    };
                }
                rows
            }
            Rel::SetDifference {
                left,
                right,
                except,
                all,
            } => {
                let left = self.rows(left, outer, env)?;
                let mut counts: BTreeMap<RowKey, usize> = BTreeMap::new();
                for row in self.rows(right, outer, env)? {
                    *counts.entry(RowKey(row)).or_default() += 1;
                }
                let mut emitted = BTreeSet::new();
                let mut out = Vec::new();
                for row in left {
                    self.tick()?;
                    let key = RowKey(row);
                    let in_right = match counts.get_mut(&key) {
                        // ALL: each right row matches one left row.
                        Some(n) if *n > 0 => {
                            if *all {
                                *n -= 1;
                            }
                            true
                        }
                        _ => false,
                    };
                    if in_right == *except {
                        continue;
                    }
                    if *all || emitted.insert(key.clone()) {
                        out.push(key.0);
                    }
                }
                out
            }
            Rel::DistinctOn { input, columns } => {
                let mut rows = self.rows(input, outer, env)?;
                rows.dedup_by(|row, kept| {
                    columns
                        .iter()
                        .all(|&c| row[c].sort_cmp(&kept[c]) == Ordering::Equal)
                });
                rows
            }
            Rel::RecursiveUnion {
                id,
                anchor,
                recursive,
                all,
            } => self.recursive_union(*id, anchor, recursive, *all, outer, env)?,
            Rel::WorkingTable { id } => self.working.borrow().get(id).cloned().unwrap_or_default(),
            Rel::Union { left, right, all } => {
                let mut rows = self.rows(left, outer, env)?;
                rows.extend(self.rows(right, outer, env)?);
                if *all {
                    rows
                } else {
                    let mut seen = BTreeSet::new();
                    rows.into_iter()
                        .filter(|r| seen.insert(RowKey(r.clone())))
                        .collect()
                }
            }
        })
    }

    /// `WITH RECURSIVE`: the anchor's rows, then the recursive part over each run's new
    /// rows until a run adds none (without `all`, only rows not produced before count).
    fn recursive_union(
        &self,
        id: u32,
        anchor: &Rel,
        recursive: &Rel,
        all: bool,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<Row>> {
        let mut seen = BTreeSet::new();
        let mut fresh = |rows: Vec<Row>| -> Vec<Row> {
            if all {
                rows
            } else {
                rows.into_iter()
                    .filter(|r| seen.insert(RowKey(r.clone())))
                    .collect()
            }
        };
        let mut result = fresh(self.rows(anchor, outer, env)?);
        let mut working = result.clone();
        // A working table of an enclosing run of the same query (a correlated subquery
        // evaluated inside it) is put back afterwards.
        let enclosing = self.working.borrow_mut().remove(&id);
        let outcome = (|| {
            while !working.is_empty() {
                self.tick()?;
                self.working
                    .borrow_mut()
                    .insert(id, std::mem::take(&mut working));
                working = fresh(self.rows(recursive, outer, env)?);
                result.extend(working.iter().cloned());
                if result.len() > MAX_RECURSIVE_ROWS {
                    return Err(SqlError::new(
                        sql::ErrorKind::ProgramLimitExceeded,
                        format!(
                            "a recursive query produced more than {MAX_RECURSIVE_ROWS} rows \
                             (not supported yet; check that its recursion ends)"
                        ),
                    ));
                }
            }
            Ok(())
        })();
        let mut tables = self.working.borrow_mut();
        tables.remove(&id);
        if let Some(rows) = enclosing {
            tables.insert(id, rows);
        }
        outcome.map(|()| result)
    }

    fn aggregate(
        &self,
        input: &Rel,
        group_by: &[Expr],
        aggregates: &[AggCall],
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Vec<Row>> {
        let mut groups: BTreeMap<RowKey, Vec<Accumulator>> = BTreeMap::new();
        let mut add = |row: Row| -> SqlResult<()> {
            self.tick()?;
            let full = joined(outer, &row);
            let key = RowKey(
                group_by
                    .iter()
                    .map(|e| e.eval(&full, env))
                    .collect::<SqlResult<_>>()?,
            );
            let accs = groups
                .entry(key)
                .or_insert_with(|| aggregates.iter().map(Accumulator::new).collect());
            for (acc, call) in accs.iter_mut().zip(aggregates) {
                let args: Vec<Value> = call
                    .args
                    .iter()
                    .map(|e| e.eval(&full, env))
                    .collect::<SqlResult<_>>()?;
                acc.add(call, args)?;
            }
            Ok(())
        };
        // A whole table aggregated goes through the accumulators row by row instead of
        // being held first (a count over a large table would hold all of it). Expressions
        // with subqueries cannot run while the table is being read.
        let plain = !group_by
            .iter()
            .chain(aggregates.iter().flat_map(|a| &a.args))
            .any(Expr::has_subquery);
        // string_agg and array_agg keep the rows' order: the key order of one partition.
        let order_free = aggregates
            .iter()
            .all(|a| !matches!(a.func, AggFunc::StringAgg | AggFunc::ArrayAgg));
        if !(plain && self.stream_full_scan(input, outer, env, order_free, &mut add)?) {
            for row in self.rows(input, outer, env)? {
                add(row)?;
            }
        }
        // An aggregate without GROUP BY over no rows still yields one row.
        if groups.is_empty() && group_by.is_empty() {
            groups.insert(
                RowKey(Vec::new()),
                aggregates.iter().map(Accumulator::new).collect(),
            );
        }
        let mut out = Vec::with_capacity(groups.len());
        for (key, accs) in groups {
            let mut row = key.0;
            for (acc, call) in accs.into_iter().zip(aggregates) {
                row.push(acc.finish(call)?);
            }
            out.push(row);
        }
        Ok(out)
    }
}

impl Reader<'_> {
    /// Hands every row of a full scan of a table (`input`, when it is one) that passes its
    /// filter to `each`, one at a time, reading the table as `scan_stored` would but one
    /// partition after another (in key order only within each: `order_free` says that will
    /// do); false (nothing done) for any other input, or when the scan's filter has
    /// subqueries or a transaction's own writes to the table must be merged in.
    fn stream_full_scan(
        &self,
        input: &Rel,
        outer: &[Value],
        env: &EvalEnv<'_>,
        order_free: bool,
        each: &mut dyn FnMut(Row) -> SqlResult<()>,
    ) -> SqlResult<bool> {
        let Rel::Scan {
            source: TableSource::User(planned),
            access: Access::Full,
            filter,
        } = input
        else {
            return Ok(false);
        };
        if self.has_own_rows(planned) || filter.as_ref().is_some_and(Expr::has_subquery) {
            return Ok(false);
        }
        let Some(table) = self
            .catalog
            .table_by_id(planned.id)
            .filter(|t| t.shape_version == planned.shape_version)
        else {
            return Ok(false);
        };
        let partitions = self.shards_of(table)?;
        // A table stored in parts streams whole rows only once its parts are together.
        if (partitions.len() > 1 && !order_free) || is_merged(table) {
            return Ok(false);
        }
        self.record_table_read(table)?;
        self.each_stored(
            table,
            &Bound::Unbounded,
            &Bound::Unbounded,
            &mut |_, (_, row)| {
                if !passes(filter.as_ref(), outer, &row, env)? {
                    return Ok(());
                }
                each(row)
            },
        )?;
        Ok(true)
    }

    /// Notes that a scan read `table` as a whole, for a serializable transaction's check.
    fn record_table_read(&self, table: &TableDef) -> SqlResult<()> {
        if self.record_reads {
            self.record(ReadCheck::Table {
                table: table.id,
                version: self.table_version(table)?,
            });
        }
        Ok(())
    }

    /// Hands `each` every stored row of `table` (its key, version and values) with a key
    /// between `lower` and `upper`: partition after partition, each in key order. `each`
    /// runs while the partitions are borrowed: it may not read tables.
    fn each_stored(
        &self,
        table: &TableDef,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        each: &mut dyn FnMut(Vec<u8>, (u64, Row)) -> SqlResult<()>,
    ) -> SqlResult<()> {
        let indexes = self.shards_of(table)?;
        let partitions = self.partitions()?;
        for index in indexes {
            let storage = partitions.table(index, table)?;
            let bounds = (as_ref_bound(lower), as_ref_bound(upper));
            partitions.for_each(index, storage, bounds, &mut |key, bytes| {
                self.tick()?;
                each(key, decode_row(&bytes)?)
            })?;
        }
        Ok(())
    }
}

fn within(key: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    let above = match lower {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(u) => key <= u.as_slice(),
        Bound::Excluded(u) => key < u.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

pub(crate) fn as_ref_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub fn sort_rows(
    rows: Vec<Row>,
    keys: &[SortKey],
    outer: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Vec<Row>> {
    let mut keyed: Vec<(Vec<Value>, Row)> = Vec::with_capacity(rows.len());
    for row in rows {
        env.interrupt.check()?;
        let full = joined(outer, &row);
        let k = keys
            .iter()
            .map(|k| k.expr.eval(&full, env))
            .collect::<SqlResult<_>>()?;
        keyed.push((k, row));
    }
    sort_interruptibly(&mut keyed, env.interrupt, |(a, _), (b, _)| {
        compare_keys(a, b, keys)
    })?;
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

/// Sorts `items` (stably) by `compare`, looking at `interrupt` every 65,536 comparisons:
/// once it is raised the rest of the sort compares nothing and the stop is reported.
pub(crate) fn sort_interruptibly<T>(
    items: &mut [T],
    interrupt: &Interrupt,
    mut compare: impl FnMut(&T, &T) -> Ordering,
) -> SqlResult<()> {
    let (mut compared, mut stopped) = (0u32, false);
    items.sort_by(|a, b| {
        if stopped {
            return Ordering::Equal;
        }
        compared = compared.wrapping_add(1);
        if compared & 0xFFFF == 0 && interrupt.check().is_err() {
            stopped = true;
        }
        compare(a, b)
    });
    interrupt.check()
}

/// Orders two rows' evaluated sort keys as ORDER BY `keys` does (NULLs first or last,
/// descending reversed).
pub(crate) fn compare_keys(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for ((x, y), key) in a.iter().zip(b).zip(keys) {
        let ord = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) if key.nulls_first => Ordering::Less,
            (true, false) => Ordering::Greater,
            (false, true) if key.nulls_first => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ if key.descending => x.sort_cmp(y).reverse(),
            _ => x.sort_cmp(y),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Evaluates a plan that reads no user table (constants, catalog views) without the
/// executor: it needs only the catalog.
pub fn evaluate_without_storage(
    plan: &plan::SelectPlan,
    catalog: &Catalog,
    params: &[Value],
    now_micros: i64,
    sequences: &plan::SessionSequences,
    backends: &dyn BackendSignals,
    interrupt: &Interrupt,
) -> SqlResult<Vec<Row>> {
    let view = plan::SessionView { catalog, sequences };
    evaluate_with_sequences(
        plan, catalog, params, now_micros, &view, backends, interrupt,
    )
}

/// `evaluate_without_storage` with the sequence calls going to `sequences` (a transaction's
/// own sequences, say, whose values it hands out itself).
pub fn evaluate_with_sequences(
    plan: &plan::SelectPlan,
    catalog: &Catalog,
    params: &[Value],
    now_micros: i64,
    sequences: &dyn plan::SequenceSource,
    backends: &dyn BackendSignals,
    interrupt: &Interrupt,
) -> SqlResult<Vec<Row>> {
    let reader = Reader {
        partitions: None,
        catalog,
        overlay: None,
        record_reads: false,
        reads: RefCell::new(Vec::new()),
        sizes: false,
        sequences: Some(Box::new(sequences)),
        working: RefCell::default(),
        random: true,
        backends: Some(backends),
        shared_subqueries: RefCell::default(),
        interrupt: interrupt.clone(),
        memory: plan::memory::StatementMemory::start(),
    };
    let env = reader.env(params, now_micros);
    reader.rows(&plan.rel, &[], &env)
}

impl SubqueryRunner for Reader<'_> {
    fn run(&self, rel: &Rel, outer: &[Value], env: &EvalEnv<'_>) -> SqlResult<Vec<Vec<Value>>> {
        self.rows(rel, outer, env)
    }

    fn run_shared(
        &self,
        rel: &Arc<Rel>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Rc<Vec<Vec<Value>>>> {
        let address = Arc::as_ptr(rel) as usize;
        let known = self
            .shared_subqueries
            .borrow()
            .get(&address)
            .map(|(_, rows)| rows.clone());
        match known {
            Some(Some(rows)) => return Ok(rows),
            Some(None) => return Ok(Rc::new(self.rows(rel, outer, env)?)),
            None => {}
        }
        let rows = Rc::new(self.rows(rel, outer, env)?);
        let shared = (!plan::rel_depends_on_row(rel, outer.len())).then(|| rows.clone());
        let entry = (Arc::downgrade(rel), shared);
        self.shared_subqueries.borrow_mut().insert(address, entry);
        Ok(rows)
    }

    fn catalog(&self) -> Option<&Catalog> {
        Some(self.catalog)
    }

    /// Adds up the bytes of the relation's trees in every partition (see
    /// `kv::Engine::table_bytes`: the inner pages are read, the leaves counted).
    fn relation_bytes(&self, oid: u32, func: plan::Func) -> SqlResult<Option<i64>> {
        let shards = match self.partitions.as_ref() {
            Some(Partitions::Live(shards)) if self.sizes => shards,
            Some(snapshot @ Partitions::Snapshot { .. }) => {
                // Counted on the executor: the statement is run there instead.
                return Err(snapshot.needs_executor("relation sizes"));
            }
            _ => {
                return Err(SqlError::feature_not_supported(
                    "relation sizes in a write (they differ between replicas)",
                ))
            }
        };
        let Some(ids) = plan::relation_storage(self.catalog, oid, func) else {
            return Ok(None);
        };
        let Ok(mut shards) = shards.try_borrow_mut() else {
            return Err(SqlError::feature_not_supported(
                "a relation's size asked for while a scan reads storage",
            ));
        };
        let mut bytes = 0u64;
        for shard in shards.iter_mut().flatten() {
            for id in &ids {
                if let Some(&table) = shard.storage.get(id) {
                    bytes += shard.engine.table_bytes(table).map_err(kv_error)?;
                }
            }
        }
        Ok(Some(i64::try_from(bytes).unwrap_or(i64::MAX)))
    }
}

impl Reader<'_> {
    /// The rows of `table` the reader sees whose `columns` hold `key`'s values there (none
    /// NULL), found through the primary key or an index leading with those columns when
    /// there is one (foreign keys, and a transaction's unique checks, look rows up so).
    pub(crate) fn rows_with(
        &self,
        table: &TableDef,
        columns: &[usize],
        key: &[Value],
    ) -> SqlResult<Vec<ScannedRow>> {
        let env = EvalEnv::without_subqueries(&[], 0);
        let rows = self.scan_stored(table, &access_for(table, columns, key), None, &[], &env)?;
        Ok(rows
            .into_iter()
            .filter(|r| holds_key(table, columns, key, &r.row))
            .collect())
    }
}

/// How to find the rows of `table` whose `columns` hold `key`'s values there: through the
/// primary key or an index leading with those columns when there is one.
fn access_for(table: &TableDef, columns: &[usize], key: &[Value]) -> Access {
    let covers = |lead: &[usize]| plan::same_columns(lead, columns);
    if table.has_primary_key() && covers(&table.primary_key) {
        Access::Point(
            table
                .primary_key
                .iter()
                .map(|&c| Expr::literal(key[c].clone()))
                .collect(),
        )
    } else if let Some((n, index)) = table.indexes.iter().enumerate().find(|(_, i)| {
        !i.is_derived() && i.columns.len() >= columns.len() && covers(&i.columns[..columns.len()])
    }) {
        Access::Index {
            index: n,
            name: index.name.clone(),
            key: index.columns[..columns.len()]
                .iter()
                .map(|&c| Expr::literal(key[c].clone()))
                .collect(),
        }
    } else {
        Access::Full
    }
}

/// Whether `row` holds `key`'s values (none NULL) at `columns`.
fn holds_key(table: &TableDef, columns: &[usize], key: &[Value], row: &[Value]) -> bool {
    columns.iter().all(|&c| {
        row[c]
            .cast(table.columns[c].ty)
            .is_ok_and(|v| same_key_value(&v, &key[c]))
    })
}

/// Whether two values of a key are equal (NULL equals nothing).
pub(crate) fn same_key_value(a: &Value, b: &Value) -> bool {
    !a.is_null() && !b.is_null() && a.compare(b) == Some(std::cmp::Ordering::Equal)
}
