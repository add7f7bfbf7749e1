//! Access paths: which part of the primary key or of a secondary index a filter pins down.
//! The filter is always re-checked on the rows an access path returns, so an access path
//! only narrows the search.

use crate::catalog::TableDef;
use crate::expr::{BinaryOp, Expr};
use crate::plan::Access;

/// Splits a predicate into its AND-ed parts.
pub(crate) fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
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
pub fn choose_access(table: &TableDef, filter: Option<&Expr>, own_start: usize) -> Access {
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
    // The index whose leading columns the filter fixes the most of (a unique index fixed
    // completely first); never a partial one, which lacks the rows its predicate refuses.
    let best_index = table
        .indexes
        .iter()
        .enumerate()
        .filter(|(_, index)| !index.is_derived())
        .map(|(i, index)| {
            let key: Vec<Expr> = index.columns.iter().map_while(|c| equal(*c)).collect();
            let complete = key.len() == index.columns.len();
            (i, key, complete && index.unique)
        })
        .filter(|(_, key, _)| !key.is_empty())
        .max_by_key(|(_, key, unique)| (*unique, key.len()));
    if let Some((index, key, unique)) = &best_index {
        if *unique || table.primary_key.is_empty() || equal(table.primary_key[0]).is_none() {
            return Access::Index {
                index: *index,
                name: table.indexes[*index].name.clone(),
                key: key.clone(),
            };
        }
    }
    if table.primary_key.is_empty() {
        return Access::Full;
    }
    let first = table.primary_key[0];
    if table.primary_key.len() > 1 {
        if let Some(e) = equal(first) {
            return Access::Range {
                lower: Some((e.clone(), true)),
                upper: Some((e, true)),
            };
        }
    }
    let mut lower = None;
    let mut upper = None;
    for (c, op, e) in &comparisons {
        if *c != first {
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
    if lower.is_some() || upper.is_some() {
        Access::Range { lower, upper }
    } else {
        Access::Full
    }
}
