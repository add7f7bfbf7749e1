//! Reading a table through a secondary index: the entries under a key prefix, optionally
//! bounded on the column after it (`Access::IndexRange`), each looked up in its row's
//! partition; and through a range of its primary key the same way (`Access::KeyRange`).
//! With `FirstRows` the index or the table is walked in its order (or against it) in
//! growing batches and each partition stops once it has the rows a LIMIT keeps that pass
//! the filter; the sort above merges the partitions' rows (planner's `first_rows.rs`).

use std::ops::Bound;

use kv::Direction;
use plan::{Access, EvalEnv, Expr, FirstRows, IndexDef, TableDef};
use sql::{DataType, SqlError, SqlResult, Value};

use crate::change_events::{decided_on_a_part, is_merged};
use crate::query::{as_ref_bound, passes, successor, Candidates, Reader};
use crate::row::{decode_row, encode_key};

/// The first batch of entries an ordered walk takes; each next one is twice as large.
const FIRST_BATCH: usize = 16;

/// Owned bounds on index entry keys.
type EntryBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// How far a walk goes: every entry, or the first `rows` passing the filter, read in
/// `direction`.
#[derive(Clone, Copy)]
struct Stop {
    rows: usize,
    direction: Direction,
}

impl Reader<'_> {
    /// The rows an index access path finds, with their keys (unfiltered unless the walk
    /// stops at a row count: then only rows passing `filter`); None for an access path
    /// that selects nothing (a NULL key or bound).
    pub(crate) fn index_candidates(
        &self,
        table: &TableDef,
        access: &Access,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Option<Candidates>> {
        let (index, key, range, first) = match access {
            Access::Index { index, key, .. } => (*index, key, None, None),
            Access::IndexRange {
                index,
                key,
                lower,
                upper,
                first,
                ..
            } => (*index, key, Some((lower, upper)), first.as_deref()),
            _ => return Err(SqlError::internal("not an index access path")),
        };
        let def = table
            .indexes
            .get(index)
            .ok_or_else(|| SqlError::internal("index position out of range"))?;
        let Some(prefix) = self.index_prefix(table, def, key, outer, env)? else {
            return Ok(None);
        };
        let (lower, upper) = range.unwrap_or((&None, &None));
        let next = def.columns.get(key.len()).map(|&c| table.columns[c].ty);
        let Some(bounds) = range_bounds(prefix, lower, upper, next, outer, env)? else {
            return Ok(None);
        };
        let stop = match first {
            Some(first) if !self.has_own_rows(table) => self.stop(first, outer, env)?,
            _ => None,
        };
        self.walk_index(table, def, bounds, stop, filter, outer, env)
            .map(Some)
    }

    /// The encoded values of the index key prefix; None when one is NULL.
    fn index_prefix(
        &self,
        table: &TableDef,
        def: &IndexDef,
        key: &[Expr],
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Option<Vec<u8>>> {
        // The key's types: the key expressions' of an expression index, the columns'
        // otherwise.
        let key_exprs = def.key_exprs(&self.catalog.index_derivations);
        let mut values = Vec::with_capacity(key.len());
        for (n, e) in key.iter().enumerate() {
            let v = e.eval(outer, env)?;
            if v.is_null() {
                return Ok(None);
            }
            let ty = match key_exprs {
                Some(keys) => keys[n].expr.ty(),
                None => table.columns[def.columns[n]].ty,
            };
            values.push(v.cast(ty)?);
        }
        encode_key(&values).map(Some)
    }

    /// How many rows an ordered walk needs: LIMIT plus OFFSET (None for `LIMIT NULL`, which
    /// limits nothing; a negative count is the LIMIT's to refuse, so it reads nothing).
    fn stop(
        &self,
        first: &FirstRows,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Option<Stop>> {
        let count = |e: &Expr| -> SqlResult<Option<i64>> {
            Ok(match e.eval(outer, env)? {
                Value::Int(n) => Some(n),
                _ => None,
            })
        };
        let Some(limit) = count(&first.limit)? else {
            return Ok(None);
        };
        let offset = match &first.offset {
            Some(e) => count(e)?.unwrap_or(0),
            None => 0,
        };
        let rows = limit.max(0).saturating_add(offset.max(0));
        Ok(Some(Stop {
            rows: usize::try_from(rows).unwrap_or(usize::MAX),
            direction: if first.descending {
                Direction::Backward
            } else {
                Direction::Forward
            },
        }))
    }

    /// Walks the index entries between `bounds` in every partition of the table and reads
    /// their rows; with `stop`, each partition's walk ends at that many rows passing
    /// `filter`.
    #[allow(clippy::too_many_arguments)]
    fn walk_index(
        &self,
        table: &TableDef,
        def: &IndexDef,
        bounds: EntryBounds,
        stop: Option<Stop>,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<Candidates> {
        let partitions = self.partitions()?;
        let mut raw: Candidates = Vec::new();
        for part in self.shards_of(table)? {
            let index_storage = partitions.handle(part, def.id)?;
            let storage = partitions.handle(part, table.id)?;
            let mut row_of = |entry: Vec<u8>, value: Vec<u8>| {
                let row_key = crate::executor::indexed_row_key(def, entry, value)?;
                Ok(partitions
                    .get(part, storage, &row_key)?
                    .map(|bytes| (row_key, bytes)))
            };
            let walk = Walk {
                part,
                storage: index_storage,
                stop,
                filter,
                outer,
            };
            self.walk_partition(&walk, bounds.clone(), env, &mut raw, &mut row_of)?;
        }
        self.order_walked(table, stop, &mut raw)?;
        Ok(raw)
    }

    /// The rows of a primary key range access (`Access::KeyRange`): the storage key bounds
    /// to scan, or with `FirstRows` the first rows in key order passing `filter`, read
    /// already.
    pub(crate) fn key_range(
        &self,
        table: &TableDef,
        access: &Access,
        filter: Option<&Expr>,
        outer: &[Value],
        env: &EvalEnv<'_>,
    ) -> SqlResult<KeyRead> {
        let Access::KeyRange {
            key,
            lower,
            upper,
            first,
        } = access
        else {
            return Err(SqlError::internal("not a primary key range access path"));
        };
        let primary = &table.primary_key;
        let mut values = Vec::with_capacity(key.len());
        for (n, e) in key.iter().enumerate() {
            let v = e.eval(outer, env)?;
            if v.is_null() {
                return Ok(KeyRead::Nothing);
            }
            values.push(v.cast(table.columns[primary[n]].ty)?);
        }
        let prefix = encode_key(&values)?;
        let next = primary.get(key.len()).map(|&c| table.columns[c].ty);
        let Some(bounds) = range_bounds(prefix, lower, upper, next, outer, env)? else {
            return Ok(KeyRead::Nothing);
        };
        // A table stored in parts is walked part by part: the filter must be one a part
        // decides alone (`change_events`).
        let parts_decide =
            !is_merged(table) || filter.is_none_or(|f| decided_on_a_part(table, f, outer.len()));
        let stop = match first {
            Some(first) if parts_decide && !self.has_own_rows(table) => {
                self.stop(first, outer, env)?
            }
            _ => None,
        };
        let Some(stop) = stop else {
            return Ok(KeyRead::Bounds(bounds));
        };
        let partitions = self.partitions()?;
        let mut raw: Candidates = Vec::new();
        for part in self.shards_of(table)? {
            let walk = Walk {
                part,
                storage: partitions.table(part, table)?,
                stop: Some(stop),
                filter,
                outer,
            };
            let mut row_of = |key: Vec<u8>, bytes: Vec<u8>| Ok(Some((key, bytes)));
            self.walk_partition(&walk, bounds.clone(), env, &mut raw, &mut row_of)?;
        }
        self.order_walked(table, Some(stop), &mut raw)?;
        Ok(KeyRead::Walked(raw))
    }

    /// Whether the transaction has rows of its own in `table`: they are merged in after a
    /// walk, which must then not stop early, as one of them may come first.
    pub(crate) fn has_own_rows(&self, table: &TableDef) -> bool {
        self.overlay.is_some_and(|o| {
            o.range((table.id, Vec::new())..)
                .next()
                .is_some_and(|((t, _), _)| *t == table.id)
        })
    }

    /// Walks one partition's entries of `walk.storage` between `bounds` in growing batches,
    /// adding the row each entry names (`row_of`: its key and stored bytes, None if gone)
    /// to `raw`; with a stop, only rows passing the filter, and only that many.
    fn walk_partition(
        &self,
        walk: &Walk<'_>,
        mut remaining: EntryBounds,
        env: &EvalEnv<'_>,
        raw: &mut Candidates,
        row_of: &mut RowOf<'_>,
    ) -> SqlResult<()> {
        let partitions = self.partitions()?;
        let direction = walk.stop.map_or(Direction::Forward, |s| s.direction);
        let mut found = 0;
        let mut batch = FIRST_BATCH;
        loop {
            let want = if walk.stop.is_some() {
                batch
            } else {
                usize::MAX
            };
            let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            partitions.walk(
                walk.part,
                walk.storage,
                (as_ref_bound(&remaining.0), as_ref_bound(&remaining.1)),
                direction,
                &mut |entry, value| {
                    entries.push((entry, value));
                    Ok(entries.len() < want)
                },
            )?;
            let exhausted = entries.len() < want;
            let last = entries.last().map(|(entry, _)| entry.clone());
            for (entry, value) in entries {
                self.tick()?;
                let Some((row_key, bytes)) = row_of(entry, value)? else {
                    continue;
                };
                let row = decode_row(&bytes)?;
                if let Some(stop) = walk.stop {
                    if found == stop.rows || !passes(walk.filter, walk.outer, &row.1, env)? {
                        continue;
                    }
                    found += 1;
                }
                raw.push((row_key, Some(row)));
            }
            let Some(stop) = walk.stop else { break };
            let Some(last) = last else { break };
            if exhausted || found >= stop.rows {
                break;
            }
            match direction {
                Direction::Forward => remaining.0 = Bound::Excluded(last),
                Direction::Backward => remaining.1 = Bound::Excluded(last),
            }
            batch = batch.saturating_mul(2);
        }
        Ok(())
    }

    /// Puts walked rows in row key order, the scan's contract: each partition's come in
    /// the walk's order.
    fn order_walked(
        &self,
        table: &TableDef,
        stop: Option<Stop>,
        raw: &mut Candidates,
    ) -> SqlResult<()> {
        let backward = stop.is_some_and(|s| matches!(s.direction, Direction::Backward));
        if self.shards_of(table)?.len() > 1 || backward {
            raw.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(())
    }
}

/// What a primary key range access reads.
pub(crate) enum KeyRead {
    /// Nothing: a NULL key or bound.
    Nothing,
    /// The rows between these storage key bounds, scanned as any range is.
    Bounds(EntryBounds),
    /// The first rows in key order that pass the filter, read already.
    Walked(Candidates),
}

/// The row a walked entry names: its key and stored bytes, None if it is gone.
type RowOf<'a> = dyn FnMut(Vec<u8>, Vec<u8>) -> SqlResult<Option<(Vec<u8>, Vec<u8>)>> + 'a;

/// One partition's ordered walk: which storage, how far, and the filter rows must pass.
struct Walk<'a> {
    part: usize,
    storage: kv::Table,
    stop: Option<Stop>,
    filter: Option<&'a Expr>,
    outer: &'a [Value],
}

/// The entries under `prefix` whose next column (of type `next`) lies between the bounds;
/// every entry under it, NULLs included, when nothing bounds it. None: nothing qualifies.
fn range_bounds(
    prefix: Vec<u8>,
    lower: &Option<(Expr, bool)>,
    upper: &Option<(Expr, bool)>,
    next: Option<DataType>,
    outer: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Option<EntryBounds>> {
    let (None, None) = (lower, upper) else {
        let ty = next.ok_or_else(|| SqlError::internal("a bound past the key's last column"))?;
        let value = |b: &Option<(Expr, bool)>| -> SqlResult<Option<(Value, bool)>> {
            b.as_ref()
                .map(|(e, inclusive)| Ok((e.eval(outer, env)?.cast(ty)?, *inclusive)))
                .transpose()
        };
        return bounded(&prefix, value(lower)?, value(upper)?);
    };
    Ok(Some(under_prefix(prefix)))
}

/// Every entry whose key starts with `prefix`.
fn under_prefix(prefix: Vec<u8>) -> EntryBounds {
    let upper = match successor(&prefix) {
        Some(s) => Bound::Excluded(s),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix), upper)
}

/// The entries under `prefix` whose next column lies between the bounds (value,
/// inclusive); NULL entries of that column lie outside any bound, and a NULL bound selects
/// nothing (None).
fn bounded(
    prefix: &[u8],
    lower: Option<(Value, bool)>,
    upper: Option<(Value, bool)>,
) -> SqlResult<Option<EntryBounds>> {
    if [&lower, &upper]
        .iter()
        .any(|b| b.as_ref().is_some_and(|(v, _)| v.is_null()))
    {
        return Ok(None);
    }
    let with = |v: &Value| -> SqlResult<Vec<u8>> {
        let mut key = prefix.to_vec();
        key.extend(encode_key(std::slice::from_ref(v))?);
        Ok(key)
    };
    // Past every entry equal to `v`; None when nothing sorts after it.
    let after = |v: &Value| -> SqlResult<Option<Vec<u8>>> { Ok(successor(&with(v)?)) };
    let start = match &lower {
        Some((v, true)) => Some(with(v)?),
        Some((v, false)) => after(v)?,
        None => after(&Value::Null)?,
    };
    let Some(start) = start else {
        return Ok(None);
    };
    let end = match &upper {
        Some((v, true)) => after(v)?,
        Some((v, false)) => Some(with(v)?),
        None => successor(prefix),
    };
    Ok(Some((
        Bound::Included(start),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    )))
}
