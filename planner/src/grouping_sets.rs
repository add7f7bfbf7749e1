//! `GROUP BY GROUPING SETS (...)`, `ROLLUP (...)` and `CUBE (...)`: a GROUP BY's items
//! expanded into the distinct grouping expressions and the sets of them to group by, and the
//! plan that aggregates over each set — the expressions a set leaves out are NULL in its
//! rows — and concatenates the results. The rows keep the layout of one plain aggregate
//! (every grouping expression, then every aggregate), so the select list, HAVING and ORDER
//! BY above bind as they do for a plain GROUP BY.
//!
//! `GROUPING(a, ...)` is an aggregate slot like any other: `min(0)` in a plain GROUP BY
//! (where it is 0), and in each set's rows the bit mask of its arguments the set leaves out.
//!
//! Not here: grouping sets nested inside grouping sets.

use plan::{AggCall, AggFunc, Expr, Rel};
use sql::{ast, DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind_expr::AggregateContext;
use crate::bind_function::CallArgs;
use crate::scope::Scope;

/// More sets than this (a CUBE of 13 items, say) is refused rather than aggregated.
const MAX_SETS: usize = 4096;

/// The sets to group by, each as positions among a GROUP BY's distinct expressions.
pub(crate) type GroupingSets = Vec<Vec<usize>>;

/// A GROUP BY's items as the distinct grouping expressions, and, when they include grouping
/// sets, each set (in PostgreSQL's order: a ROLLUP from all its items down to none, a CUBE
/// from all to none by subsets).
pub(crate) fn expand(items: &[ast::Expr]) -> SqlResult<(Vec<ast::Expr>, Option<GroupingSets>)> {
    let mut distinct: Vec<ast::Expr> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut position = |e: &ast::Expr| -> SqlResult<usize> {
        if matches!(
            e,
            ast::Expr::Rollup(_) | ast::Expr::Cube(_) | ast::Expr::GroupingSets(_)
        ) {
            return Err(SqlError::feature_not_supported(
                "grouping sets nested in grouping sets",
            ));
        }
        let text = e.to_string();
        Ok(match texts.iter().position(|t| *t == text) {
            Some(at) => at,
            None => {
                texts.push(text);
                distinct.push(e.clone());
                distinct.len() - 1
            }
        })
    };
    let mut sets: Vec<Vec<usize>> = vec![Vec::new()];
    let mut grouping_sets = false;
    for item in items {
        let lists = match item {
            ast::Expr::Rollup(lists) | ast::Expr::Cube(lists) | ast::Expr::GroupingSets(lists) => {
                grouping_sets = true;
                lists
                    .iter()
                    .map(|list| list.iter().map(&mut position).collect())
                    .collect::<SqlResult<Vec<Vec<usize>>>>()?
            }
            plain => vec![vec![position(plain)?]],
        };
        let item_sets: Vec<Vec<usize>> = match item {
            ast::Expr::Rollup(_) => (0..=lists.len())
                .rev()
                .map(|n| lists[..n].concat())
                .collect(),
            ast::Expr::Cube(_) => {
                if lists.len() > 12 {
                    return Err(too_many_sets());
                }
                let n = lists.len();
                (0..1usize << n)
                    .rev()
                    .map(|mask| {
                        (0..n)
                            .filter(|i| mask & (1 << (n - 1 - i)) != 0)
                            .flat_map(|i| lists[i].clone())
                            .collect()
                    })
                    .collect()
            }
            _ => lists,
        };
        if sets.len() * item_sets.len() > MAX_SETS {
            return Err(too_many_sets());
        }
        sets = sets
            .iter()
            .flat_map(|s| {
                item_sets.iter().map(move |t| {
                    let mut set = s.clone();
                    set.extend(t.iter().filter(|p| !s.contains(p)));
                    set
                })
            })
            .collect();
    }
    Ok((distinct, grouping_sets.then_some(sets)))
}

/// `GROUPING(args)`: its aggregate slot's column; its arguments must be grouping
/// expressions (by their text, as GROUP BY items are matched).
pub(crate) fn grouping_call(
    ctx: &mut AggregateContext,
    call: &CallArgs,
    scope: &Scope,
) -> SqlResult<Expr> {
    let not_grouped = || {
        SqlError::new(
            ErrorKind::GroupingError,
            "arguments to GROUPING must be grouping expressions of the associated query level",
        )
    };
    if call.exprs.is_empty() || call.exprs.len() > 31 || call.distinct || call.star {
        return Err(not_grouped());
    }
    let positions = call
        .exprs
        .iter()
        .map(|a| {
            let text = a.to_string();
            ctx.groups
                .iter()
                .position(|(t, _)| *t == text)
                .ok_or_else(not_grouped)
        })
        .collect::<SqlResult<Vec<usize>>>()?;
    let slot = ctx.aggregates.len();
    ctx.aggregates.push(AggCall {
        func: AggFunc::Min,
        args: vec![Expr::Literal(Value::Int(0), DataType::Int4)],
        distinct: false,
        ty: DataType::Int4,
    });
    ctx.grouping_calls.push((slot, positions));
    Ok(Expr::Column(
        scope.outer_len + ctx.groups.len() + slot,
        DataType::Int4,
    ))
}

fn too_many_sets() -> SqlError {
    SqlError::feature_not_supported(format!("more than {MAX_SETS} grouping sets"))
}

/// The aggregate of `input` over each of `sets` (positions in `group_by`), its rows laid out
/// as one aggregate over all of `group_by` would lay them out, with NULL for the
/// expressions a set leaves out; the sets' rows one after another.
pub(crate) fn aggregate_sets(
    input: Rel,
    group_by: Vec<Expr>,
    aggregates: Vec<AggCall>,
    grouping_calls: &[(usize, Vec<usize>)],
    sets: &[Vec<usize>],
    outer_len: usize,
) -> Rel {
    let mut parts = sets.iter().map(|set| {
        let grouped = Rel::Aggregate {
            input: Box::new(input.clone()),
            group_by: set.iter().map(|&i| group_by[i].clone()).collect(),
            aggregates: aggregates.clone(),
        };
        let groups =
            group_by
                .iter()
                .enumerate()
                .map(|(i, e)| match set.iter().position(|&p| p == i) {
                    Some(k) => Expr::Column(outer_len + k, e.ty()),
                    None => Expr::Literal(Value::Null, e.ty()),
                });
        let values = aggregates.iter().enumerate().map(|(j, a)| {
            match grouping_calls.iter().find(|(slot, _)| *slot == j) {
                // GROUPING: a bit per argument, the first the highest, set when this set
                // leaves the argument out.
                Some((_, arguments)) => {
                    let mask = arguments
                        .iter()
                        .fold(0i64, |m, p| (m << 1) | i64::from(!set.contains(p)));
                    Expr::Literal(Value::Int(mask), DataType::Int4)
                }
                None => Expr::Column(outer_len + set.len() + j, a.ty),
            }
        });
        Rel::Project {
            input: Box::new(grouped),
            exprs: groups.chain(values).collect(),
        }
    });
    let first = parts.next().expect("a GROUP BY has at least one set");
    parts.fold(first, |left, right| Rel::Union {
        left: Box::new(left),
        right: Box::new(right),
        all: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(group_by: &str) -> Vec<Vec<usize>> {
        let q = crate::bind::parse_query(&format!("SELECT 1 FROM t GROUP BY {group_by}")).unwrap();
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a select")
        };
        let ast::GroupByExpr::Expressions(items, _) = &select.group_by else {
            panic!("expressions")
        };
        expand(items).unwrap().1.unwrap()
    }

    #[test]
    fn rollup_cube_and_sets_expand_as_postgresql_orders_them() {
        assert_eq!(sets("ROLLUP (a, b)"), vec![vec![0, 1], vec![0], vec![]]);
        assert_eq!(
            sets("CUBE (a, b)"),
            vec![vec![0, 1], vec![0], vec![1], vec![]]
        );
        assert_eq!(
            sets("GROUPING SETS ((a, b), (a), ())"),
            vec![vec![0, 1], vec![0], vec![]]
        );
        assert_eq!(sets("a, ROLLUP (b)"), vec![vec![0, 1], vec![0]]);
        assert_eq!(sets("a, ROLLUP (a, b)"), vec![vec![0, 1], vec![0], vec![0]]);
    }
}
