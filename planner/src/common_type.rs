//! PostgreSQL's type resolution for the constructs that make one value out of several
//! expressions — CASE, COALESCE, GREATEST, LEAST, NULLIF, VALUES, UNION/INTERSECT/EXCEPT and
//! ARRAY[...] (PostgreSQL's documentation, "UNION, CASE, and Related Constructs"): the result
//! is not the first input's type but the one every input converts to implicitly, so
//! `CASE WHEN c THEN 1 ELSE 1.5 END` is numeric 1.5, never the integer 2. Silent rounding of
//! money is the worst answer a ledger can give.
//!
//! The rule, as PostgreSQL's `select_common_type` applies it: untyped inputs (literals,
//! NULL) take no part; all unknown is text. The first typed input is the candidate; each
//! later one of another type must be of the same category (numeric, string, date/time, ...),
//! and replaces the candidate when the candidate is not its category's preferred type and
//! converts to it implicitly while it does not convert back. A type modifier (a numeric's
//! precision and scale, a varchar's length) survives only when every input has the result's
//! type with the same modifier.

use plan::Expr;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::Binder;

/// PostgreSQL's type categories (`pg_type.typcategory`) of the types hotledger has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Category {
    Numeric,
    String,
    DateTime,
    Timespan,
    Boolean,
    /// Array types, by element category.
    Array,
    /// Each of the rest is a category of one type (uuid, bytea, json, jsonb, an enum, ...).
    Own,
}

fn category(ty: DataType) -> Category {
    use DataType::*;
    match ty {
        Int2 | Int4 | Int8 | Numeric { .. } | Float4 | Float8 | Oid => Category::Numeric,
        Text | Varchar(_) | Char(_) | Name => Category::String,
        Date | Time | Timestamp | TimestampTz => Category::DateTime,
        Interval => Category::Timespan,
        Bool => Category::Boolean,
        t if t.element().is_some() => Category::Array,
        _ => Category::Own,
    }
}

/// The category's preferred type, which a candidate stays once it is.
fn preferred(ty: DataType) -> bool {
    use DataType::*;
    matches!(ty, Float8 | Oid | Text | TimestampTz | Interval | Bool)
}

/// The same type, modifiers aside (`numeric(10,2)` is `numeric`).
fn same_type(a: DataType, b: DataType) -> bool {
    use DataType::*;
    match (a, b) {
        (Numeric { .. }, Numeric { .. }) | (Varchar(_), Varchar(_)) | (Char(_), Char(_)) => true,
        (NumericArray { .. }, NumericArray { .. }) => true,
        _ => a == b,
    }
}

/// Whether PostgreSQL converts `from` to `to` implicitly (`pg_cast.castcontext = 'i'`).
fn implicit(from: DataType, to: DataType) -> bool {
    use DataType::*;
    let rank = |t: DataType| match t {
        Int2 => Some(0),
        Int4 => Some(1),
        Int8 => Some(2),
        Numeric { .. } => Some(3),
        Float4 => Some(4),
        Float8 => Some(5),
        _ => None,
    };
    if let (Some(f), Some(t)) = (rank(from), rank(to)) {
        return f < t;
    }
    matches!(
        (from, to),
        (Int2 | Int4 | Int8, Oid)
            | (
                Text | Varchar(_) | Char(_),
                Text | Varchar(_) | Char(_) | Name
            )
            | (Name, Text)
            | (Date, Timestamp | TimestampTz)
            | (Timestamp, TimestampTz)
            | (Time, Interval)
    )
}

/// The type `inputs` resolve to in `construct` (`CASE`, `COALESCE`, `UNION`, ...), or 42804
/// when they cannot be matched. `None` when every input is untyped: the caller decides (text,
/// or what its context expects).
pub fn common_type(inputs: &[DataType], construct: &str) -> SqlResult<Option<DataType>> {
    let mut typed = inputs.iter().copied().filter(|t| *t != DataType::Unknown);
    let Some(mut candidate) = typed.next() else {
        return Ok(None);
    };
    for other in typed {
        if same_type(other, candidate) {
            continue;
        }
        if category(other) != category(candidate) || category(other) == Category::Own {
            return Err(cannot_match(construct, candidate, other));
        }
        if !preferred(candidate) && implicit(candidate, other) && !implicit(other, candidate) {
            candidate = other;
        }
    }
    // Every input must convert to the one chosen.
    for other in inputs.iter().copied().filter(|t| *t != DataType::Unknown) {
        if !same_type(other, candidate) && !implicit(other, candidate) {
            return Err(cannot_match(construct, candidate, other));
        }
    }
    Ok(Some(with_common_modifier(candidate, inputs)))
}

/// `ty` with its modifier when every input has exactly it, else without one.
fn with_common_modifier(ty: DataType, inputs: &[DataType]) -> DataType {
    if inputs.iter().all(|t| *t == ty) {
        return ty;
    }
    match ty {
        DataType::Numeric { .. } => DataType::UNCONSTRAINED_NUMERIC,
        DataType::NumericArray { .. } => DataType::NumericArray {
            precision: None,
            scale: 0,
        },
        DataType::Varchar(_) => DataType::Varchar(None),
        // A blank-padded char of no particular length: its values as they are.
        DataType::Char(_) => DataType::Text,
        other => other,
    }
}

fn cannot_match(construct: &str, a: DataType, b: DataType) -> SqlError {
    SqlError::new(
        ErrorKind::DatatypeMismatch,
        format!(
            "{construct} types {} and {} cannot be matched",
            a.pg_name(),
            b.pg_name()
        ),
    )
}

impl Binder<'_> {
    /// `exprs` converted to the type they resolve to together (`common_type`); untyped ones
    /// all alone take `expected`, else text.
    pub(crate) fn resolve_common_type(
        &mut self,
        exprs: Vec<Expr>,
        construct: &str,
        expected: Option<DataType>,
    ) -> SqlResult<(Vec<Expr>, DataType)> {
        let types: Vec<DataType> = exprs.iter().map(Expr::ty).collect();
        let ty = common_type(&types, construct)?
            .or(expected.filter(|t| *t != DataType::Unknown))
            .unwrap_or(DataType::Text);
        let mut converted = Vec::with_capacity(exprs.len());
        for e in exprs {
            converted.push(self.convert(e, ty)?);
        }
        Ok((converted, ty))
    }

    /// An expression of a type its construct's common type is: coerced when untyped, cast
    /// when of another type (the common type is one it converts to implicitly).
    pub(crate) fn convert(&mut self, e: Expr, ty: DataType) -> SqlResult<Expr> {
        let e = self.coerce(e, ty)?;
        if e.ty() == ty || matches!(e, Expr::Literal(Value::Null, _)) {
            return Ok(e);
        }
        Ok(Expr::Cast {
            expr: Box::new(e),
            ty,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    fn common(types: &[DataType]) -> DataType {
        common_type(types, "CASE").unwrap().unwrap()
    }

    #[test]
    fn resolves_as_postgresql_15() {
        // Each expected type is PostgreSQL 15's (pg_typeof of the same construct).
        let money = Numeric {
            precision: Some(10),
            scale: 2,
        };
        assert_eq!(
            common(&[Int4, DataType::UNCONSTRAINED_NUMERIC]),
            DataType::UNCONSTRAINED_NUMERIC
        );
        assert_eq!(
            common(&[Unknown, Int4, money]),
            DataType::UNCONSTRAINED_NUMERIC
        );
        assert_eq!(common(&[money, money]), money);
        assert_eq!(common(&[money, Unknown]), DataType::UNCONSTRAINED_NUMERIC);
        assert_eq!(common(&[Int2, Int8]), Int8);
        assert_eq!(common(&[Int4, Float4]), Float4);
        assert_eq!(common(&[Float8, Int4]), Float8);
        assert_eq!(common(&[Text, Varchar(None)]), Text);
        assert_eq!(common(&[Varchar(None), Text]), Varchar(None));
        assert_eq!(common(&[Char(3), Varchar(None)]), Text);
        assert_eq!(common(&[Date, Timestamp]), Timestamp);
        assert_eq!(common(&[Timestamp, TimestampTz]), TimestampTz);
        assert_eq!(common_type(&[Unknown, Unknown], "CASE").unwrap(), None);
    }

    #[test]
    fn refuses_what_postgresql_refuses() {
        for (a, b) in [(Text, Int4), (Bool, Int4), (Uuid, Text), (Time, Timestamp)] {
            let e = common_type(&[a, b], "CASE").unwrap_err();
            assert_eq!(e.kind, ErrorKind::DatatypeMismatch, "{a:?} {b:?}");
        }
    }
}
