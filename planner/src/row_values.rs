//! Row constructors in comparisons: `(a, b) = (c, d)`, `(a, b) < (c, d)` (compared field by
//! field from the left, as PostgreSQL compares rows — keyset pagination's `WHERE (at, id) >
//! ($1, $2)`), and `(a, b) [NOT] IN ((1, 2), ...)`, rewritten before binding into
//! comparisons of their fields with the same three-valued result.

use sql::ast::{BinaryOperator as B, Expr};
use sql::{SqlError, SqlResult};

/// A row constructor's fields (`(a, b)`, or `ROW(a, b)` as sqlparser reads it in these places).
fn fields(e: &Expr) -> Option<&[Expr]> {
    match e {
        Expr::Tuple(items) => Some(items),
        Expr::Nested(inner) => fields(inner),
        _ => None,
    }
}

fn binary(left: &Expr, op: B, right: &Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left.clone()),
        op,
        right: Box::new(right.clone()),
    }
}

fn join(left: Expr, op: B, right: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left),
        op,
        right: Box::new(right),
    }
}

/// `left op right` where a side is a row constructor, as comparisons of the fields; None when
/// neither side is one.
pub fn row_comparison(left: &Expr, op: &B, right: &Expr) -> Option<SqlResult<Expr>> {
    let (l, r) = (fields(left), fields(right));
    if l.is_none() && r.is_none() {
        return None;
    }
    Some(compare_rows(l, op, r))
}

fn compare_rows(l: Option<&[Expr]>, op: &B, r: Option<&[Expr]>) -> SqlResult<Expr> {
    let (Some(l), Some(r)) = (l, r) else {
        return Err(SqlError::feature_not_supported(
            "comparing a row constructor with something other than a row constructor",
        ));
    };
    if l.len() != r.len() || l.is_empty() {
        return Err(SqlError::syntax(
            "unequal number of entries in row expressions",
        ));
    }
    let pairs = l.iter().zip(r);
    Ok(match op {
        B::Eq => pairs
            .map(|(a, b)| binary(a, B::Eq, b))
            .reduce(|x, y| join(x, B::And, y))
            .expect("a field"),
        B::NotEq => pairs
            .map(|(a, b)| binary(a, B::NotEq, b))
            .reduce(|x, y| join(x, B::Or, y))
            .expect("a field"),
        B::Lt | B::LtEq | B::Gt | B::GtEq => {
            let strict = if matches!(op, B::Lt | B::LtEq) {
                B::Lt
            } else {
                B::Gt
            };
            let n = l.len() - 1;
            // The last fields decide with the operator itself; each earlier pair decides
            // when its fields differ and hands over to the next when they are equal.
            let mut decided = binary(&l[n], op.clone(), &r[n]);
            for i in (0..n).rev() {
                let rest = join(
                    binary(&l[i], B::Eq, &r[i]),
                    B::And,
                    Expr::Nested(Box::new(decided)),
                );
                decided = join(
                    binary(&l[i], strict.clone(), &r[i]),
                    B::Or,
                    Expr::Nested(Box::new(rest)),
                );
            }
            decided
        }
        other => {
            return Err(SqlError::feature_not_supported(format!(
                "the operator {other} between row constructors"
            )))
        }
    })
}

/// `row [NOT] IN (row, ...)`: ORed row equalities (ANDed inequalities when negated); None
/// when the subject is not a row constructor.
pub fn row_in_list(subject: &Expr, list: &[Expr], negated: bool) -> Option<SqlResult<Expr>> {
    let subject = fields(subject)?;
    let (op, link) = if negated {
        (B::NotEq, B::And)
    } else {
        (B::Eq, B::Or)
    };
    let mut joined: Option<Expr> = None;
    for item in list {
        let each = match compare_rows(Some(subject), &op, fields(item)) {
            Ok(e) => Expr::Nested(Box::new(e)),
            Err(e) => return Some(Err(e)),
        };
        joined = Some(match joined {
            Some(j) => join(j, link.clone(), each),
            None => each,
        });
    }
    Some(joined.ok_or_else(|| SqlError::syntax("an empty IN list")))
}
