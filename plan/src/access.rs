//! Access paths: which part of the primary key or of a secondary index a filter pins down.
//! The filter is always re-checked on the rows an access path returns, so an access path
//! only narrows the search.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{IndexDerivation, TableDef};
use crate::expr::{BinaryOp, Expr};
use crate::plan::Access;
use sql::DataType;

/// Splits a predicate into its AND-ed parts.
pub fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
            ..
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        other => out.push(other),
    }
}

/// True when a filter is nothing but equalities between primary-key columns and values
/// known before the scan (so a point lookup decides it completely).
pub fn filter_is_key_equality(table: &TableDef, filter: Option<&Expr>) -> bool {
    let Some(filter) = filter else { return false };
    let mut parts = Vec::new();
    conjuncts(filter.clone(), &mut parts);
    parts.iter().all(|p| match p {
        Expr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
            ..
        } => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c, _), other) | (other, Expr::Column(c, _)) => {
                table.primary_key.contains(c) && other.is_independent_of(0)
            }
            _ => false,
        },
        _ => false,
    })
}

/// Picks the primary-key access path a filter allows. The filter stays whole: it is
/// re-checked on every row the access path returns, so the key only narrows the search.
/// A derived index (`derivations`) serves when the filter compares its key expressions
/// with known values and, for a partial one, holds its predicate as one of its parts.
pub fn choose_access(
    table: &TableDef,
    derivations: &BTreeMap<u32, Arc<IndexDerivation>>,
    filter: Option<&Expr>,
    own_start: usize,
) -> Access {
    let Some(filter) = filter else {
        return Access::Full;
    };
    let mut parts = Vec::new();
    conjuncts(filter.clone(), &mut parts);
    // (column, op, independent expression) for each comparison against a known value.
    let mut comparisons: Vec<(usize, BinaryOp, Expr)> = Vec::new();
    for p in &parts {
        if let Expr::Binary {
            op, left, right, ..
        } = p
        {
            if !op.is_comparison() || *op == BinaryOp::NotEq {
                continue;
            }
            match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c, _), other)
                    if *c >= own_start && other.is_independent_of(own_start) =>
                {
                    comparisons.push((*c - own_start, *op, other.clone()))
                }
                (other, Expr::Column(c, _))
                    if *c >= own_start && other.is_independent_of(own_start) =>
                {
                    comparisons.push((*c - own_start, op.flipped(), other.clone()))
                }
                _ => {}
            }
        }
    }
    let equal = |col: usize| {
        comparisons
            .iter()
            .find(|(c, op, _)| *c == col && *op == BinaryOp::Eq)
            .map(|(_, _, e)| e.clone())
    };
    if !table.primary_key.is_empty() {
        let key: Option<Vec<Expr>> = table.primary_key.iter().map(|c| equal(*c)).collect();
        if let Some(key) = key {
            return Access::Point(key);
        }
    }
    let first = table.primary_key.first().copied();
    let key_range = first.and_then(|c| bounds_on(&comparisons, c, table.columns[c].ty));
    // The index whose leading columns (or key expressions) the filter fixes the most of (a
    // unique index fixed completely first), then one that bounds the column after them. A
    // partial index only when the filter holds its predicate: otherwise it lacks rows the
    // filter may accept.
    let best_index = table
        .indexes
        .iter()
        .enumerate()
        .filter_map(|(i, index)| {
            let derivation = if index.is_derived() {
                let derivation = derivations.get(&index.id)?;
                let holds_predicate = derivation
                    .predicate
                    .as_ref()
                    .is_none_or(|p| parts.iter().any(|part| same_tree(part, &p.expr)));
                if own_start != 0 || !holds_predicate {
                    return None;
                }
                Some(derivation)
            } else {
                None
            };
            let keyed = derivation.filter(|d| !d.keys.is_empty());
            let key: Vec<Expr> = match keyed {
                Some(d) => d
                    .keys
                    .iter()
                    .map_while(|k| equal_to(&parts, &k.expr))
                    .collect(),
                None => index.columns.iter().map_while(|c| equal(*c)).collect(),
            };
            let range = match keyed {
                Some(_) => None,
                None => index
                    .columns
                    .get(key.len())
                    .and_then(|&c| bounds_on(&comparisons, c, table.columns[c].ty)),
            };
            let complete = key.len() == index.key_len(derivations);
            (!key.is_empty() || range.is_some()).then_some((
                i,
                key,
                complete && index.unique,
                range,
            ))
        })
        .max_by_key(|(_, key, unique, range)| (*unique, key.len(), range.is_some()));
    let pk_fixed = first.is_some_and(|c| equal(c).is_some());
    if let Some((index, key, unique, range)) = best_index {
        let usable = if key.is_empty() {
            !pk_fixed && key_range.is_none()
        } else {
            unique || !pk_fixed
        };
        if usable {
            let name = table.indexes[index].name.clone();
            return match range {
                None => Access::Index { index, name, key },
                Some((lower, upper)) => Access::IndexRange {
                    index,
                    name,
                    key,
                    lower,
                    upper,
                    first: None,
                },
            };
        }
    }
    // The leading primary key columns fixed, and bounds on the one after them.
    let key: Vec<Expr> = table.primary_key.iter().map_while(|c| equal(*c)).collect();
    if !key.is_empty() {
        let range = table
            .primary_key
            .get(key.len())
            .and_then(|&c| bounds_on(&comparisons, c, table.columns[c].ty));
        let (lower, upper) = range.unwrap_or((None, None));
        return Access::KeyRange {
            key,
            lower,
            upper,
            first: None,
        };
    }
    match key_range {
        Some((lower, upper)) => Access::Range { lower, upper },
        None => Access::Full,
    }
}

/// A bound: an expression known before the scan and whether it is included.
type Bound = Option<(Expr, bool)>;

/// The bounds the comparisons put on `column` (of type `ty`), if any: only comparisons
/// with values of its own type (or a narrower integer), which its key encodes exactly —
/// `c > 1.5` must not become `c > 2`.
fn bounds_on(
    comparisons: &[(usize, BinaryOp, Expr)],
    column: usize,
    ty: DataType,
) -> Option<(Bound, Bound)> {
    let mut lower = None;
    let mut upper = None;
    for (c, op, e) in comparisons {
        if *c != column || !encodes_exactly(ty, e.ty()) {
            continue;
        }
        match op {
            BinaryOp::Gt => lower = Some((e.clone(), false)),
            BinaryOp::GtEq => lower = Some((e.clone(), true)),
            BinaryOp::Lt => upper = Some((e.clone(), false)),
            BinaryOp::LtEq => upper = Some((e.clone(), true)),
            _ => {}
        }
    }
    (lower.is_some() || upper.is_some()).then_some((lower, upper))
}

/// Whether a value of type `value` cast to a key column of type `column` keeps its order
/// against the column's values exactly.
fn encodes_exactly(column: DataType, value: DataType) -> bool {
    let integer_width = |t: DataType| match t {
        DataType::Int2 => Some(2),
        DataType::Int4 => Some(4),
        DataType::Int8 => Some(8),
        _ => None,
    };
    match (integer_width(column), integer_width(value)) {
        (Some(c), Some(v)) => v <= c,
        _ => column == value,
    }
}

/// The value a part of a filter fixes `expr` (an index key expression over the scanned
/// table's own columns, at offset 0) to: `expr = e` or `e = expr` with `e` independent of
/// the row.
fn equal_to(parts: &[Expr], expr: &Expr) -> Option<Expr> {
    parts.iter().find_map(|part| match part {
        Expr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
            ..
        } => {
            if same_tree(left, expr) && right.is_independent_of(0) {
                Some((**right).clone())
            } else if same_tree(right, expr) && left.is_independent_of(0) {
                Some((**left).clone())
            } else {
                None
            }
        }
        _ => None,
    })
}

/// Whether two bound expressions are the same tree (the same operators, functions, columns,
/// constants and types): their debug forms print every field.
fn same_tree(a: &Expr, b: &Expr) -> bool {
    format!("{a:?}") == format!("{b:?}")
}
