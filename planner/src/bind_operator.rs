//! Binding operators: arithmetic, comparison, string, bitwise, array and date/time
//! operators between two bound operands — which operator a pair of types has, the
//! operands' casts, and the result type (PostgreSQL's operator resolution, for the types
//! hotledger has).

use plan::{arithmetic_type, BinaryOp, Expr};
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::Binder;
use crate::scope::Scope;

impl Binder<'_> {
    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        if op == BinaryOp::Concat {
            let l = self.expr(left, scope, None)?;
            let r = self.expr(right, scope, None)?;
            let (l, r) = match self.jsonb_concat(l, r)? {
                Ok(concat) => return Ok(concat),
                Err(sides) => sides,
            };
            if let Some(array) = [l.ty(), r.ty()].into_iter().find(|t| t.element().is_some()) {
                return self.array_concat(l, r, array);
            }
            // Untyped literals next to || are text, whatever the other side is.
            let l = self.coerce(l, DataType::Text)?;
            let r = self.coerce(r, DataType::Text)?;
            return Ok(crate::null_folding::null_if_strict_operand_null(
                Expr::Binary {
                    op,
                    left: Box::new(l),
                    right: Box::new(r),
                    ty: DataType::Text,
                },
            ));
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let l = self.expr(left, scope, Some(DataType::Bool))?;
            let r = self.expr(right, scope, Some(DataType::Bool))?;
            // FALSE AND x is false and TRUE OR x true, whatever x would give (PostgreSQL
            // folds them so; x is never evaluated).
            let decides = op == BinaryOp::Or;
            for side in [&l, &r] {
                if matches!(side, Expr::Literal(Value::Bool(b), _) if *b == decides) {
                    return Ok(Expr::Literal(Value::Bool(decides), DataType::Bool));
                }
            }
            return Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
                ty: DataType::Bool,
            });
        }
        let l = self.expr(left, scope, None)?;
        let r = self.expr(right, scope, None)?;
        if op == BinaryOp::Sub && l.ty() == DataType::Jsonb {
            return self.jsonb_delete(l, r);
        }
        if matches!(
            op,
            BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRight
        ) {
            return self.bitwise(op, l, r);
        }
        self.bound_binary(op, l, r, expected)
    }

    /// Integer bitwise operators: both sides integers (an untyped side is one), the result
    /// the wider type (a shift's, its left side's).
    fn bitwise(&mut self, op: BinaryOp, l: Expr, r: Expr) -> SqlResult<Expr> {
        let integer = |binder: &mut Self, e: Expr, other: DataType| {
            if e.ty() == DataType::Unknown {
                let ty = if other.is_integer() && other != DataType::Oid {
                    other
                } else {
                    DataType::Int4
                };
                binder.coerce(e, ty)
            } else {
                Ok(e)
            }
        };
        let l_ty = l.ty();
        let l = integer(self, l, r.ty())?;
        let r = integer(self, r, l_ty)?;
        let (lt, rt) = (l.ty(), r.ty());
        let ok = |t: DataType| t.is_integer() && t != DataType::Oid;
        if !ok(lt) || !ok(rt) {
            return Err(no_operator(lt, op, rt));
        }
        let ty = if matches!(op, BinaryOp::ShiftLeft | BinaryOp::ShiftRight) {
            lt
        } else {
            arithmetic_type(lt, rt)
        };
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// `||` with an array on either side, as PostgreSQL resolves it: two arrays concatenate
    /// (an untyped literal or NULL next to an array is an array), an element beside an array
    /// is appended or prepended. The result has the type of the (first) array.
    fn array_concat(&mut self, l: Expr, r: Expr, array: DataType) -> SqlResult<Expr> {
        let element = array.element().expect("an array type");
        let no_operator = SqlError::new(
            ErrorKind::UndefinedFunction,
            format!(
                "operator does not exist: {} || {}",
                l.ty().pg_name(),
                r.ty().pg_name()
            ),
        );
        let side = |binder: &mut Self, e: Expr| {
            let ty = e.ty();
            let width = |t: DataType| match t {
                DataType::Int2 => 2,
                DataType::Int4 => 4,
                DataType::Int8 => 8,
                _ => 0,
            };
            let want = match ty {
                t if t == array || t == element => return Ok(e),
                // Integers are one kind of value: a narrower one fits as it is.
                t if width(t) > 0 && width(t) <= width(element) => return Ok(e),
                DataType::Unknown => array,
                t if t.element().is_some() => return Err(no_operator.clone()),
                _ => element,
            };
            let coerced = binder.coerce(e, want)?;
            match coerced.ty() == want {
                true => Ok(coerced),
                false => Err(no_operator.clone()),
            }
        };
        let l = side(self, l)?;
        let r = side(self, r)?;
        Ok(Expr::Binary {
            op: BinaryOp::Concat,
            left: Box::new(l),
            right: Box::new(r),
            ty: array,
        })
    }

    /// A comparison or arithmetic operator over its bound operands (an untyped side takes
    /// the other side's type, see `unify`). These operators are strict, so one with a NULL
    /// constant operand is NULL, folded here without the other operand ever being
    /// evaluated, as PostgreSQL's planner folds it: `a / 0 = NULL` is NULL, not an error.
    pub(crate) fn bound_binary(
        &mut self,
        op: BinaryOp,
        l: Expr,
        r: Expr,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let bound = self.bound_binary_unfolded(op, l, r, expected)?;
        Ok(crate::null_folding::null_if_strict_operand_null(bound))
    }

    fn bound_binary_unfolded(
        &mut self,
        op: BinaryOp,
        l: Expr,
        r: Expr,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        // Date and time arithmetic decides an untyped side's type by the operator, not by
        // the other side's type alone.
        if !op.is_comparison() && [l.ty(), r.ty()].iter().any(|t| is_temporal(*t)) {
            return self.temporal_binary(op, l, r);
        }
        let (l, r) = self.unify(l, r)?;
        if op.is_comparison() {
            check_comparable(&l, &r, op)?;
            let (l, r) = if matches!(op, BinaryOp::Eq | BinaryOp::NotEq) {
                (l, r)
            } else {
                (self.ordered(l), self.ordered(r))
            };
            return Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
                ty: DataType::Bool,
            });
        }
        let (l, r) = match (l.ty(), r.ty()) {
            (DataType::Unknown, DataType::Unknown) => {
                let t = expected
                    .filter(|t| t.is_numeric_family())
                    .unwrap_or(DataType::UNCONSTRAINED_NUMERIC);
                (self.coerce(l, t)?, self.coerce(r, t)?)
            }
            _ => (l, r),
        };
        for side in [&l, &r] {
            if !side.ty().is_numeric_family() && side.ty() != DataType::Unknown {
                return Err(no_operator(l.ty(), op, r.ty()));
            }
        }
        let ty = arithmetic_type(l.ty(), r.ty());
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// Arithmetic with a date, timestamp or interval side: an untyped side takes the type
    /// PostgreSQL's operators suggest (an interval where its text reads as one), then the
    /// operand types decide the result's.
    fn temporal_binary(&mut self, op: BinaryOp, l: Expr, r: Expr) -> SqlResult<Expr> {
        use DataType::*;
        let untyped_type = |unknown: &Expr, other: DataType| -> DataType {
            let text = match unknown {
                Expr::Literal(Value::Text(s), _) => Some(s.as_str()),
                _ => None,
            };
            let reads_as_interval = text.is_some_and(|s| sql::Interval::parse(s).is_ok());
            let reads_as_int = text.is_some_and(|s| s.trim().parse::<i32>().is_ok());
            match (op, other) {
                (BinaryOp::Mul | BinaryOp::Div, Interval) => Float8,
                (_, Interval) if reads_as_interval || text.is_none() => Interval,
                (_, Interval) => Timestamp,
                (_, Date) if reads_as_int || (text.is_none() && op == BinaryOp::Add) => Int4,
                _ if reads_as_interval || (text.is_none() && op == BinaryOp::Add) => Interval,
                (_, t) => t,
            }
        };
        let (l, r) = match (l.ty(), r.ty()) {
            (Unknown, t) => {
                let ty = untyped_type(&l, t);
                (self.coerce(l, ty)?, r)
            }
            (t, Unknown) => {
                let ty = untyped_type(&r, t);
                let r = self.coerce(r, ty)?;
                (l, r)
            }
            _ => (l, r),
        };
        let timestamp = |t: DataType| matches!(t, Timestamp | TimestampTz);
        let ty = match (l.ty(), op, r.ty()) {
            (t, BinaryOp::Add | BinaryOp::Sub, Interval) if timestamp(t) => t,
            (Interval, BinaryOp::Add, t) if timestamp(t) => t,
            (Date, BinaryOp::Add | BinaryOp::Sub, Interval) | (Interval, BinaryOp::Add, Date) => {
                Timestamp
            }
            (Date, BinaryOp::Add | BinaryOp::Sub, t) if t.is_integer() => Date,
            (t, BinaryOp::Add, Date) if t.is_integer() => Date,
            (Date, BinaryOp::Sub, Date) => Int4,
            (a, BinaryOp::Sub, b) if (timestamp(a) || a == Date) && (timestamp(b) || b == Date) => {
                Interval
            }
            (Time, BinaryOp::Add | BinaryOp::Sub, Interval) | (Interval, BinaryOp::Add, Time) => {
                Time
            }
            (Time, BinaryOp::Sub, Time) => Interval,
            (Date, BinaryOp::Add, Time) | (Time, BinaryOp::Add, Date) => Timestamp,
            (Interval, BinaryOp::Add | BinaryOp::Sub, Interval) => Interval,
            (Interval, BinaryOp::Mul | BinaryOp::Div, t) if t.is_numeric_family() => Interval,
            (t, BinaryOp::Mul, Interval) if t.is_numeric_family() => Interval,
            (a, _, b) => return Err(no_operator(a, op, b)),
        };
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// The date, timestamp or interval argument of `extract`, `date_part` or `date_trunc`
    /// (an untyped one is a timestamp with time zone, as in PostgreSQL).
    pub(crate) fn datetime_argument(
        &mut self,
        e: &ast::Expr,
        scope: &Scope,
        function: &str,
    ) -> SqlResult<Expr> {
        let value = self.expr(e, scope, None)?;
        let value = if value.ty() == DataType::Unknown {
            self.coerce(value, DataType::TimestampTz)?
        } else {
            value
        };
        if !is_temporal(value.ty()) {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "function {function}(text, {}) does not exist",
                    value.ty().pg_name()
                ),
            ));
        }
        Ok(value)
    }
}

/// (negated, case-insensitive) when the operator is a regular-expression match.
pub(crate) fn regex_operator(op: &ast::BinaryOperator) -> Option<(bool, bool)> {
    use ast::BinaryOperator as B;
    match op {
        B::PGRegexMatch => Some((false, false)),
        B::PGRegexIMatch => Some((false, true)),
        B::PGRegexNotMatch => Some((true, false)),
        B::PGRegexNotIMatch => Some((true, true)),
        B::PGCustomBinaryOperator(parts) => match parts.last().map(String::as_str) {
            Some("~") => Some((false, false)),
            Some("~*") => Some((false, true)),
            Some("!~") => Some((true, false)),
            Some("!~*") => Some((true, true)),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn map_binary(op: &ast::BinaryOperator) -> SqlResult<BinaryOp> {
    use ast::BinaryOperator as B;
    Ok(match op {
        B::Plus => BinaryOp::Add,
        B::Minus => BinaryOp::Sub,
        B::Multiply => BinaryOp::Mul,
        B::Divide => BinaryOp::Div,
        B::Modulo => BinaryOp::Mod,
        B::Eq => BinaryOp::Eq,
        B::NotEq => BinaryOp::NotEq,
        B::Lt => BinaryOp::Lt,
        B::LtEq => BinaryOp::LtEq,
        B::Gt => BinaryOp::Gt,
        B::GtEq => BinaryOp::GtEq,
        B::And => BinaryOp::And,
        B::Or => BinaryOp::Or,
        B::StringConcat => BinaryOp::Concat,
        B::BitwiseAnd => BinaryOp::BitAnd,
        B::BitwiseOr => BinaryOp::BitOr,
        B::PGBitwiseXor => BinaryOp::BitXor,
        B::PGBitwiseShiftLeft => BinaryOp::ShiftLeft,
        B::PGBitwiseShiftRight => BinaryOp::ShiftRight,
        other => return Err(SqlError::feature_not_supported(format!("operator {other}"))),
    })
}

fn check_comparable(l: &Expr, r: &Expr, op: BinaryOp) -> SqlResult<()> {
    let (a, b) = (l.ty(), r.ty());
    let family = |t: DataType| -> u8 {
        if t.is_numeric_family() {
            1
        } else if t.is_text_family() || t == DataType::CatalogChar {
            2
        } else {
            match t {
                DataType::Bool => 3,
                DataType::Timestamp | DataType::TimestampTz | DataType::Date => 4,
                DataType::Bytea => 5,
                t if t.element().is_some() => 6,
                DataType::Interval => 7,
                DataType::Jsonb => 8,
                DataType::Uuid => 9,
                DataType::Time => 10,
                _ => 0,
            }
        }
    };
    // `json` has no comparison operators (jsonb has).
    if a == DataType::Json || b == DataType::Json {
        return Err(no_operator(a, op, b));
    }
    // An enum compares with its own type only.
    if matches!(a, DataType::Enum(_)) || matches!(b, DataType::Enum(_)) {
        return match a == b || a == DataType::Unknown || b == DataType::Unknown {
            true => Ok(()),
            false => Err(no_operator(a, op, b)),
        };
    }
    if a == DataType::Unknown || b == DataType::Unknown || family(a) == family(b) {
        return Ok(());
    }
    Err(no_operator(a, op, b))
}

/// 42883 for an operator no operand types of this kind have.
fn no_operator(a: DataType, op: BinaryOp, b: DataType) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!(
            "operator does not exist: {} {} {}",
            a.pg_name(),
            op.symbol(),
            b.pg_name()
        ),
    )
}

fn is_temporal(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::Timestamp
            | DataType::TimestampTz
            | DataType::Date
            | DataType::Interval
            | DataType::Time
    )
}
