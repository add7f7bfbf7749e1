//! Reading only the first rows: a `LIMIT` over an `ORDER BY` that an index's order already
//! gives (`WHERE account = $1 ORDER BY timestamp DESC LIMIT 10` over an index on
//! `(account, timestamp)`) reads the index in that order and stops once it has the rows the
//! LIMIT keeps, instead of reading every row the filter selects and sorting them all.
//!
//! The plan keeps its sort: the scan only hands it fewer rows, the first ones in index order
//! that pass the filter (from each partition, so the sort merges them). That is the same
//! answer whenever the index's order is the sort's order on the rows the filter passes:
//! the sort keys are index columns right after the ones the filter fixes, in one
//! direction, of types whose stored key orders as the sort compares, and NULLs (first in
//! an index) either impossible or placed by the sort where the index has them.

use plan::{Access, Expr, FirstRows, IndexDef, Rel, SortKey, TableDef, TableSource};
use sql::DataType;

/// Marks the scan under `input` (the rel a LIMIT applies to) to read only its first rows,
/// when the shape `[Project] Sort (Project (Scan))` allows it; anything else is left as it
/// is. `outer` is the length of the outer row the query's expressions see first.
pub(crate) fn limit_scan(
    input: &mut Rel,
    limit: Option<&Expr>,
    offset: Option<&Expr>,
    outer: usize,
) {
    let Some(limit) = limit else { return };
    let sort = match input {
        Rel::Project { input, exprs } if exprs.iter().all(|e| matches!(e, Expr::Column(..))) => {
            input.as_mut()
        }
        other => other,
    };
    let Rel::Sort { input, keys } = sort else {
        return;
    };
    let Rel::Project { input, exprs } = input.as_mut() else {
        return;
    };
    let Rel::Scan {
        source: TableSource::User(table),
        access,
        ..
    } = input.as_mut()
    else {
        return;
    };
    // The scanned columns the sort keys name, through the projection.
    let Some(sorted) = keys
        .iter()
        .map(|k| sorted_column(k, exprs, outer))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    if let Some(ordered) = ordered_access(table, access, &sorted, limit, offset) {
        *access = ordered;
    }
}

/// The scanned column a sort key orders by, with the key: `Column(outer + j)` of the
/// projection whose j-th expression is `Column(outer + c)`.
fn sorted_column<'k>(
    key: &'k SortKey,
    exprs: &[Expr],
    outer: usize,
) -> Option<(usize, &'k SortKey)> {
    let Expr::Column(at, _) = key.expr else {
        return None;
    };
    let Expr::Column(column, _) = exprs.get(at.checked_sub(outer)?)? else {
        return None;
    };
    Some((column.checked_sub(outer)?, key))
}

/// The access path that reads `table` in the order of `sorted` as far as the limit, if an
/// index gives that order.
fn ordered_access(
    table: &TableDef,
    access: &Access,
    sorted: &[(usize, &SortKey)],
    limit: &Expr,
    offset: Option<&Expr>,
) -> Option<Access> {
    let (index, key, lower, upper) = match access {
        Access::Index { index, key, .. } => (*index, key.clone(), None, None),
        Access::IndexRange {
            index,
            key,
            lower,
            upper,
            first: None,
            ..
        } => (*index, key.clone(), lower.clone(), upper.clone()),
        Access::Full => {
            let index = table
                .indexes
                .iter()
                .position(|i| read_direction(table, i, 0, false, sorted).is_some())?;
            (index, Vec::new(), None, None)
        }
        Access::Point(_) | Access::Range { .. } | Access::IndexRange { .. } => return None,
    };
    let def = &table.indexes[index];
    let bounded = lower.is_some() || upper.is_some();
    let descending = read_direction(table, def, key.len(), bounded, sorted)?;
    Some(Access::IndexRange {
        index,
        name: def.name.clone(),
        key,
        lower,
        upper,
        first: Some(Box::new(FirstRows {
            descending,
            limit: limit.clone(),
            offset: offset.cloned(),
        })),
    })
}

/// Whether reading `index` with its first `fixed` columns fixed gives the sort's order,
/// and if so whether backward (`Some(true)`): the index is not derived and the sort's
/// columns (past the fixed ones, which order nothing) are its next ones, all in one
/// direction, each of a type whose key orders as the sort compares, with NULLs
/// impossible, bounded out (`bounded`: the first column past the fixed ones has a range)
/// or placed where the index read puts them.
fn read_direction(
    table: &TableDef,
    index: &IndexDef,
    fixed: usize,
    bounded: bool,
    sorted: &[(usize, &SortKey)],
) -> Option<bool> {
    if index.is_derived() {
        return None;
    }
    let free: Vec<&(usize, &SortKey)> = sorted
        .iter()
        .filter(|(c, _)| !index.columns[..fixed].contains(c))
        .collect();
    let (_, lead) = free.first()?;
    let gives = free.len() <= index.columns.len() - fixed
        && free.iter().enumerate().all(|(n, (column, key))| {
            let def = &table.columns[*column];
            // Reading forward, NULL entries come first; reading backward, last.
            let nulls_placed = key.nulls_first != key.descending;
            index.columns[fixed + n] == *column
                && key.descending == lead.descending
                && key_orders_as_compared(def.ty)
                && (!def.nullable || (n == 0 && bounded) || nulls_placed)
        });
    gives.then_some(lead.descending)
}

/// Types whose key encoding sorts as their values compare (text compares by its bytes, as
/// its key does; floats have NaN and -0, numeric has no key encoding).
fn key_orders_as_compared(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::Bool
            | DataType::Int2
            | DataType::Int4
            | DataType::Int8
            | DataType::Timestamp
            | DataType::TimestampTz
            | DataType::Date
            | DataType::Text
            | DataType::Varchar(_)
    )
}
