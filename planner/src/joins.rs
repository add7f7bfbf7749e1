//! Join planning. Joins run over materialized rows, so a filter left above `FROM a, b, c`
//! would first build every combination (a catalog query of pgJDBC's joining nine catalogs
//! ran the server out of memory): `push_filter` moves each AND-ed part of a WHERE to the
//! lowest join that has every column it reads — into a scan's filter when it reads one
//! table (where the scan may then use a key or an index), into an inner join's ON when it
//! reads both sides. The rows that come out are the same; fewer are built on the way.
//! (`plan::equi_keys` finds the equalities of a join's ON between its sides, which let the
//! executor match rows by key instead of trying every pair.)

use std::collections::BTreeMap;
use std::sync::Arc;

use plan::{
    choose_access, conjuncts, side, Access, BinaryOp, Expr, IndexDerivation, JoinKind, Rel, Side,
    TableSource,
};
use sql::DataType;

/// `rel` (the FROM list's relation, columns of `types` after `outer_len` outer ones)
/// filtered by `predicate`, the predicate's parts pushed as far down as they go. Inner joins
/// whose FROM order would join a table related to none before it (a cross product) are
/// joined in an order that follows the predicate's relations instead (`connected_order`).
pub(crate) fn push_filter(
    rel: Rel,
    types: &[DataType],
    predicate: Expr,
    outer_len: usize,
    derivations: &BTreeMap<u32, Arc<IndexDerivation>>,
) -> Rel {
    let mut parts = Vec::new();
    conjuncts(predicate, &mut parts);
    let pushdown = Pushdown {
        outer_len,
        derivations,
    };
    match reorder(rel, types, &mut parts, outer_len) {
        Joins::Reordered { rel, back } => Rel::Project {
            input: Box::new(pushdown.push(rel, types.len(), parts)),
            exprs: back,
        },
        Joins::AsWritten(rel) => pushdown.push(rel, types.len(), parts),
    }
}

/// What `reorder` made of a FROM list's joins.
enum Joins {
    /// In another order, with the expressions that put the columns back in FROM order.
    Reordered { rel: Rel, back: Vec<Expr> },
    /// In FROM order.
    AsWritten(Rel),
}

/// A FROM list's relation: inner joins taken apart, or anything else as it was.
// Built a few times per statement while joins are planned, never in bulk.
#[allow(clippy::large_enum_variant)]
enum Chain {
    Inner(Leaves),
    Other(Rel),
}

/// A chain of inner joins taken apart: its relations in FROM order, each as wide as it is
/// (the first's width is what the others leave of the whole).
struct Leaves {
    rels: Vec<Rel>,
    widths: Vec<usize>,
}

/// `rel`'s inner joins as a list of relations, their ONs added to `parts` (pushed down
/// again, they land where they were); as written, untouched, when it holds an outer or a
/// lateral join, which keeps its place.
fn leaves(rel: Rel, parts: &mut Vec<Expr>) -> Chain {
    // Top down: each join's right side, its width and its ON.
    let mut taken: Vec<(Rel, usize, Option<Expr>)> = Vec::new();
    let mut at = rel;
    loop {
        match at {
            Rel::Join {
                left,
                right,
                kind: JoinKind::Inner,
                on,
                lateral: false,
                right_width,
            } => {
                taken.push((*right, right_width, on));
                at = *left;
            }
            Rel::Join { .. } => {
                taken.reverse();
                return Chain::Other(chain(at, taken));
            }
            leaf => {
                taken.reverse();
                let mut rels = vec![leaf];
                let mut widths = vec![usize::MAX];
                for (rel, width, on) in taken {
                    rels.push(rel);
                    widths.push(width);
                    if let Some(on) = on {
                        conjuncts(on, parts);
                    }
                }
                return Chain::Inner(Leaves { rels, widths });
            }
        }
    }
}

/// Inner joins of `first` with each of `rest` in turn (a relation, its width, its ON).
fn chain(first: Rel, rest: Vec<(Rel, usize, Option<Expr>)>) -> Rel {
    rest.into_iter()
        .fold(first, |left, (right, right_width, on)| Rel::Join {
            left: Box::new(left),
            right: Box::new(right),
            kind: JoinKind::Inner,
            on,
            lateral: false,
            right_width,
        })
}

/// Inner joins over three or more relations whose FROM order has a cross product, rebuilt in
/// `connected_order` with `parts` renumbered to it; with the expressions that put the
/// columns back in FROM order; the relations in FROM order otherwise (their ONs among
/// `parts` now).
fn reorder(rel: Rel, types: &[DataType], parts: &mut Vec<Expr>, outer_len: usize) -> Joins {
    let mut leaves = match leaves(rel, parts) {
        Chain::Inner(leaves) => leaves,
        Chain::Other(rel) => return Joins::AsWritten(rel),
    };
    let known: usize = leaves.widths.iter().skip(1).sum();
    leaves.widths[0] = types.len() - known;
    let in_from_order = |leaves: Leaves| {
        let mut rels = leaves.rels.into_iter();
        let first = rels.next().expect("a chain has a first relation");
        let rest = rels.zip(leaves.widths.into_iter().skip(1));
        Joins::AsWritten(chain(first, rest.map(|(r, w)| (r, w, None)).collect()))
    };
    if leaves.rels.len() < 3 || parts.iter().any(Expr::has_subquery) {
        return in_from_order(leaves);
    }
    let mut starts = Vec::with_capacity(leaves.widths.len());
    let mut at = outer_len;
    for w in &leaves.widths {
        starts.push(at);
        at += w;
    }
    // None for an outer column (before the first relation's start).
    let leaf_of = |column: usize| starts.iter().rposition(|&s| column >= s);
    let reads: Vec<u64> = parts
        .iter()
        .map(|p| {
            let mut mask = 0u64;
            p.visit(&mut |e| {
                if let Expr::Column(c, _) = e {
                    if let Some(leaf) = leaf_of(*c) {
                        mask |= 1 << leaf.min(63);
                    }
                }
            });
            mask
        })
        .collect();
    let Some(order) = connected_order(leaves.rels.len(), &reads) else {
        return in_from_order(leaves);
    };
    // Where each leaf's columns start in the new order.
    let mut new_starts = vec![0; order.len()];
    let mut at = outer_len;
    for &leaf in &order {
        new_starts[leaf] = at;
        at += leaves.widths[leaf];
    }
    let moved = |c: usize| match leaf_of(c) {
        Some(leaf) => new_starts[leaf] + (c - starts[leaf]),
        None => c,
    };
    for part in parts.iter_mut() {
        part.renumber_columns(&moved);
    }
    let back = types
        .iter()
        .enumerate()
        .map(|(i, ty)| Expr::Column(moved(outer_len + i), *ty))
        .collect();
    let mut rels: Vec<Option<Rel>> = leaves.rels.into_iter().map(Some).collect();
    let mut take = |leaf: usize| rels[leaf].take().expect("each relation once");
    let first = take(order[0]);
    let rest = order[1..]
        .iter()
        .map(|&leaf| (take(leaf), leaves.widths[leaf], None))
        .collect();
    Joins::Reordered {
        rel: chain(first, rest),
        back,
    }
}

/// An order to join `n` relations in, given which relations each part of the filter reads
/// (`reads`, a bit per relation), when the FROM order joins a relation that no part
/// relates to those before it while another order would not: each next relation is the
/// first in FROM order that a part relates to those already joined (a relation a part
/// filters on its own — likely few rows — starts). None to keep the FROM order.
fn connected_order(n: usize, reads: &[u64]) -> Option<Vec<usize>> {
    if n > 63 {
        return None;
    }
    let relates = |joined: u64, next: usize| {
        let with = joined | 1 << next;
        reads
            .iter()
            .any(|&r| r & (1 << next) != 0 && r & joined != 0 && r & !with == 0)
    };
    let in_from_order_connected = (1..n).all(|k| relates((1u64 << k) - 1, k));
    if in_from_order_connected {
        return None;
    }
    let filtered = |leaf: usize| reads.iter().any(|&r| r == 1 << leaf);
    let first = (0..n).find(|&l| filtered(l)).unwrap_or(0);
    let mut order = vec![first];
    let mut joined = 1u64 << first;
    while order.len() < n {
        let remaining = (0..n).filter(|l| joined & (1 << l) == 0);
        let next = remaining
            .clone()
            .find(|&l| relates(joined, l))
            .or_else(|| remaining.clone().next())
            .expect("a relation remains");
        order.push(next);
        joined |= 1 << next;
    }
    let better = (1..n).all(|k| {
        let before: u64 = order[..k].iter().map(|&l| 1u64 << l).sum();
        relates(before, order[k])
    });
    (better && order.iter().enumerate().any(|(i, &l)| i != l)).then_some(order)
}

struct Pushdown<'a> {
    outer_len: usize,
    derivations: &'a BTreeMap<u32, Arc<IndexDerivation>>,
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

/// The parts AND-ed together; None for none.
fn all_of(parts: Vec<Expr>) -> Option<Expr> {
    parts.into_iter().reduce(|a, b| Expr::Binary {
        op: BinaryOp::And,
        left: Box::new(a),
        right: Box::new(b),
        ty: DataType::Bool,
    })
}

#[cfg(test)]
mod tests {
    use super::connected_order;

    #[test]
    fn follows_the_relations_where_the_from_order_has_a_cross_product() {
        // a.x = c.x AND b.x = c.x: a, b has nothing relating them; a, c, b has.
        let (a, b, c) = (1u64, 2u64, 4u64);
        assert_eq!(connected_order(3, &[a | c, b | c]), Some(vec![0, 2, 1]));
        // Already related in FROM order: kept.
        assert_eq!(connected_order(3, &[a | b, b | c]), None);
        // A relation filtered on its own starts (c.id = 7).
        assert_eq!(connected_order(3, &[a | c, b | c, c]), Some(vec![2, 0, 1]));
        // Nothing relates b to the others: no order avoids the cross product.
        assert_eq!(connected_order(3, &[a | c]), None);
    }
}
