//! What PostgreSQL's planner folds before anything is evaluated, so that the same statements
//! answer without evaluating what PostgreSQL never evaluates: a strict operator with a NULL
//! constant operand is NULL (`a / 0 = NULL` is NULL, not a division by zero), and a WHERE
//! with a NULL or FALSE conjunct rejects every row (its one-time filter). A constant operand
//! that fails is left to fail, as PostgreSQL evaluates constants first.

use plan::{BinaryOp, Expr};
use sql::{DataType, Value};

/// A WHERE condition with a conjunct that is a NULL or FALSE constant rejects every row: it
/// is FALSE, and nothing else in it is evaluated (PostgreSQL's one-time filter).
pub(crate) fn where_condition(condition: Expr) -> Expr {
    fn rejects_all(e: &Expr) -> bool {
        match e {
            Expr::Literal(Value::Null | Value::Bool(false), _) => true,
            Expr::Binary {
                op: BinaryOp::And,
                left,
                right,
                ..
            } => rejects_all(left) || rejects_all(right),
            _ => false,
        }
    }
    if !rejects_all(&condition) {
        return condition;
    }
    // Unless a constant in it fails: PostgreSQL evaluates constants first, and fails then.
    let mut failing_constant = false;
    condition.visit(&mut |e| failing_constant |= fails_when_folded(e));
    if failing_constant {
        return condition;
    }
    Expr::Literal(Value::Bool(false), DataType::Bool)
}

/// An expression of constants only whose evaluation fails (`1 / 0`).
fn fails_when_folded(e: &Expr) -> bool {
    !matches!(e, Expr::Literal(..))
        && e.is_constant_arithmetic()
        && !matches!(e.clone().folded(), Expr::Literal(..))
}

/// A NULL constant: `NULL`, or a cast of one.
fn is_null_constant(e: &Expr) -> bool {
    match e {
        Expr::Literal(Value::Null, _) => true,
        Expr::Cast { expr, .. } => is_null_constant(expr),
        _ => false,
    }
}

/// A strict operator (every binary operator but AND and OR) with a NULL constant operand,
/// as the NULL it always is. As in PostgreSQL, whose planner folds constants from the
/// inside out, an other operand of constants only is still evaluated first: `1 / 0 = NULL`
/// fails (left as it is, to fail when evaluated), `a / 0 = NULL` is NULL.
pub(crate) fn null_if_strict_operand_null(e: Expr) -> Expr {
    let Expr::Binary {
        op,
        left,
        right,
        ty,
    } = &e
    else {
        return e;
    };
    if matches!(op, BinaryOp::And | BinaryOp::Or) {
        return e;
    }
    let other = match (is_null_constant(left), is_null_constant(right)) {
        (true, _) => right,
        (_, true) => left,
        _ => return e,
    };
    if fails_when_folded(other) {
        return e;
    }
    Expr::Literal(Value::Null, *ty)
}
