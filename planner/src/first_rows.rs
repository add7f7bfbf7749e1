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

use plan::{Access, Expr, FirstRows, Rel, SortKey, TableDef, TableSource};
use sql::DataType;

/// Marks the scans under `input` (the rel a LIMIT applies to) to read only their first
/// rows, when the shape `[Project] Sort (source)` allows it, where a source is a scan, a
/// projection of columns of a source, or a `UNION ALL` of sources (each branch's first
/// LIMIT + OFFSET rows in the sort's order hold the union's); anything else is left as it
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
    // The columns of the sort's input that the keys order by.
    let Some(sorted) = keys
        .iter()
        .map(|k| match k.expr {
            Expr::Column(at, _) => Some((at.checked_sub(outer)?, k)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let first = First {
        limit,
        offset,
        outer,
    };
    first.order_source(input, &sorted);
}

/// How far the reads under one LIMIT go.
struct First<'a> {
    limit: &'a Expr,
    offset: Option<&'a Expr>,
    outer: usize,
}

impl First<'_> {
    /// Reads the scans of `rel` in the order of `sorted` (columns of `rel`'s output) as far
    /// as the limit, where an index gives that order.
    fn order_source(&self, rel: &mut Rel, sorted: &[(usize, &SortKey)]) {
        match rel {
            Rel::Project { input, exprs } => {
                // The input's columns the sorted ones are, through the projection.
                let Some(inner) = sorted
                    .iter()
                    .map(|&(at, key)| match exprs.get(at)? {
                        Expr::Column(column, _) => Some((column.checked_sub(self.outer)?, key)),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
                else {
                    return;
                };
                self.order_source(input, &inner);
            }
            Rel::Union {
                left,
                right,
                all: true,
            } => {
                self.order_source(left, sorted);
                self.order_source(right, sorted);
            }
            Rel::Scan {
                source: TableSource::User(table),
                access,
                ..
            } => {
                if let Some(ordered) =
                    ordered_access(table, access, sorted, self.limit, self.offset)
                {
                    *access = ordered;
                }
            }
            _ => {}
        }
    }
}

/// The access path that reads `table` in the order of `sorted` as far as the limit, if its
/// primary key or an index gives that order.
fn ordered_access(
    table: &TableDef,
    access: &Access,
    sorted: &[(usize, &SortKey)],
    limit: &Expr,
    offset: Option<&Expr>,
) -> Option<Access> {
    let first = |descending: bool| {
        Some(Box::new(FirstRows {
            descending,
            limit: limit.clone(),
            offset: offset.cloned(),
        }))
    };
    let primary = &table.primary_key;
    let by_key = |key: &Vec<Expr>, lower: &Bound, upper: &Bound| {
        let bounded = lower.is_some() || upper.is_some();
        let descending = read_direction(table, primary, key.len(), bounded, sorted)?;
        Some(Access::KeyRange {
            key: key.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
            first: first(descending),
        })
    };
    let (index, key, lower, upper) = match access {
        Access::Range { lower, upper } => return by_key(&Vec::new(), lower, upper),
        Access::KeyRange {
            key,
            lower,
            upper,
            first: None,
        } => return by_key(key, lower, upper),
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
            if let Some(by_key) = by_key(&Vec::new(), &None, &None) {
                return Some(by_key);
            }
            let index = table.indexes.iter().position(|i| {
                !i.is_derived() && read_direction(table, &i.columns, 0, false, sorted).is_some()
            })?;
            (index, Vec::new(), None, None)
        }
        Access::Point(_) | Access::IndexRange { .. } | Access::KeyRange { .. } => return None,
    };
    let def = &table.indexes[index];
    if def.is_derived() {
        return None;
    }
    let bounded = lower.is_some() || upper.is_some();
    let descending = read_direction(table, &def.columns, key.len(), bounded, sorted)?;
    Some(Access::IndexRange {
        index,
        name: def.name.clone(),
        key,
        lower,
        upper,
        first: first(descending),
    })
}

/// A bound of an access path: an expression known before the scan, and whether included.
type Bound = Option<(Expr, bool)>;

/// Whether reading a key of `columns` (an index's, or the primary key) with its first
/// `fixed` columns fixed gives the sort's order, and if so whether backward
/// (`Some(true)`): the sort's columns (past the fixed ones, which order nothing) are the
/// key's next ones, all in one direction, each of a type whose key orders as the sort
/// compares, with NULLs impossible, bounded out (`bounded`: the first column past the fixed
/// ones has a range) or placed where the read puts them.
fn read_direction(
    table: &TableDef,
    columns: &[usize],
    fixed: usize,
    bounded: bool,
    sorted: &[(usize, &SortKey)],
) -> Option<bool> {
    let free: Vec<&(usize, &SortKey)> = sorted
        .iter()
        .filter(|(c, _)| !columns[..fixed].contains(c))
        .collect();
    let (_, lead) = free.first()?;
    let gives = free.len() <= columns.len() - fixed
        && free.iter().enumerate().all(|(n, (column, key))| {
            let def = &table.columns[*column];
            // Reading forward, NULL entries come first; reading backward, last.
            let nulls_placed = key.nulls_first != key.descending;
            columns[fixed + n] == *column
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
