//! Join planning. Joins run over materialized rows, so a filter left above `FROM a, b, c`
//! would first build every combination (a catalog query of pgJDBC's joining nine catalogs
//! ran the server out of memory): `push_filter` moves each AND-ed part of a WHERE to the
//! lowest join that has every column it reads — into a scan's filter when it reads one
//! table (where the scan may then use a key or an index), into an inner join's ON when it
//! reads both sides. The rows that come out are the same; fewer are built on the way.
//! `equi_keys` finds the equalities of a join's ON between its sides, which let the
//! executor match rows by key instead of trying every pair.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::access::{choose_access, conjuncts};
use crate::catalog::IndexDerivation;
use crate::expr::{BinaryOp, Expr};
use crate::plan::{Access, JoinKind, Rel, TableSource};
use sql::DataType;

/// `rel` (the FROM list's relation, `width` columns after `outer_len` outer ones) filtered
/// by `predicate`, the predicate's parts pushed as far down as they go.
pub(crate) fn push_filter(
    rel: Rel,
    width: usize,
    predicate: Expr,
    outer_len: usize,
    derivations: &BTreeMap<u32, Arc<IndexDerivation>>,
) -> Rel {
    let mut parts = Vec::new();
    conjuncts(predicate, &mut parts);
    Pushdown {
        outer_len,
        derivations,
    }
    .push(rel, width, parts)
}

struct Pushdown<'a> {
    outer_len: usize,
    derivations: &'a BTreeMap<u32, Arc<IndexDerivation>>,
}

/// Which side of a join a part of a filter reads.
enum Side {
    /// The left side only (or no column of either side).
    Left,
    Right,
    /// Both sides, or a subquery (whose column references are not followed).
    Both,
}

impl Pushdown<'_> {
    fn push(&self, rel: Rel, width: usize, parts: Vec<Expr>) -> Rel {
        if parts.is_empty() {
            return rel;
        }
        match rel {
            Rel::Join {
                left,
                right,
                kind,
                on,
                lateral,
                right_width,
            } => {
                let left_width = width - right_width;
                let split = self.outer_len + left_width;
                let mut parts = parts;
                let mut on = on;
                // An inner join's ON is a filter like the WHERE: its parts move too. A left
                // join's stays, and only what reads its left side alone goes below it.
                if kind == JoinKind::Inner {
                    if let Some(on) = on.take() {
                        conjuncts(on, &mut parts);
                    }
                }
                let (mut to_left, mut to_right, mut here, mut above) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for mut part in parts {
                    match (side(&part, self.outer_len, split), kind) {
                        (Side::Left, _) => to_left.push(part),
                        // A lateral right side sees the left row; its parts stay in the ON.
                        (Side::Right, JoinKind::Inner) if !lateral => {
                            part.renumber_columns(&|c| if c >= split { c - left_width } else { c });
                            to_right.push(part)
                        }
                        (_, JoinKind::Inner) => here.push(part),
                        (_, JoinKind::Left) => above.push(part),
                    }
                }
                if let Some(on) = on {
                    here.insert(0, on);
                }
                let join = Rel::Join {
                    left: Box::new(self.push(*left, left_width, to_left)),
                    right: Box::new(self.push(*right, right_width, to_right)),
                    kind,
                    on: all_of(here),
                    lateral,
                    right_width,
                };
                match all_of(above) {
                    Some(predicate) => Rel::Filter {
                        input: Box::new(join),
                        predicate,
                    },
                    None => join,
                }
            }
            Rel::Scan {
                source,
                access,
                filter,
            } => {
                let filter =
                    all_of(filter.into_iter().chain(parts).collect()).expect("parts were given");
                let access = match (&source, access) {
                    (TableSource::User(table), Access::Full) => {
                        choose_access(table, self.derivations, Some(&filter), self.outer_len)
                    }
                    (_, access) => access,
                };
                Rel::Scan {
                    source,
                    access,
                    filter: Some(filter),
                }
            }
            other => Rel::Filter {
                input: Box::new(other),
                predicate: all_of(parts).expect("parts were given"),
            },
        }
    }
}

/// The side of a join (its left side's columns before `split`, after the outer row's
/// `outer_len`) that `part` reads.
fn side(part: &Expr, outer_len: usize, split: usize) -> Side {
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

/// The parts AND-ed together; None for none.
fn all_of(parts: Vec<Expr>) -> Option<Expr> {
    parts.into_iter().reduce(|a, b| Expr::Binary {
        op: BinaryOp::And,
        left: Box::new(a),
        right: Box::new(b),
        ty: DataType::Bool,
    })
}
