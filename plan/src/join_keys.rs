//! The equalities of a join's ON between its two sides: the keys the executor matches rows
//! by instead of trying every pair (the ON is still checked on each pair they match), and
//! which side of a join an expression reads, which the planner pushes filters by.

use sql::DataType;

use crate::access::conjuncts;
use crate::expr::{BinaryOp, Expr};

/// Which side of a join a part of a filter reads.
pub enum Side {
    /// The left side only (or no column of either side).
    Left,
    Right,
    /// Both sides, or a subquery (whose column references are not followed).
    Both,
}

/// The side of a join (its left side's columns before `split`, after the outer row's
/// `outer_len`) that `part` reads.
pub fn side(part: &Expr, outer_len: usize, split: usize) -> Side {
    if part.has_subquery() {
        return Side::Both;
    }
    let (mut left, mut right) = (false, false);
    part.visit(&mut |e| {
        if let Expr::Column(c, _) = e {
            right |= *c >= split;
            left |= (outer_len..split).contains(c);
        }
    });
    match (left, right) {
        (_, false) => Side::Left,
        (false, true) => Side::Right,
        (true, true) => Side::Both,
    }
}

/// The equalities `left = right` among the AND-ed parts of a join's ON (which sees the outer
/// row's `outer_len` columns, then the left side's up to `split`, then the right side's):
/// each as (left side's expression, right side's), for types whose equal values are equal
/// keys. The ON is still checked on every pair they match.
pub fn equi_keys(on: &Expr, outer_len: usize, split: usize) -> Vec<(Expr, Expr)> {
    let mut parts = Vec::new();
    conjuncts(on.clone(), &mut parts);
    let mut keys = Vec::new();
    for part in parts {
        let Expr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
            ..
        } = part
        else {
            continue;
        };
        if left.ty() != right.ty() || !keyed_by_value(left.ty()) {
            continue;
        }
        match (
            side(&left, outer_len, split),
            side(&right, outer_len, split),
        ) {
            (Side::Left, Side::Right) => keys.push((*left, *right)),
            (Side::Right, Side::Left) => keys.push((*right, *left)),
            _ => {}
        }
    }
    keys
}

/// Types whose values are equal exactly when they sort equal.
fn keyed_by_value(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::Int2
            | DataType::Int4
            | DataType::Int8
            | DataType::Oid
            | DataType::Bool
            | DataType::Text
            | DataType::Varchar(_)
            | DataType::Name
            | DataType::Uuid
            | DataType::Date
            | DataType::Timestamp
            | DataType::TimestampTz
    )
}
