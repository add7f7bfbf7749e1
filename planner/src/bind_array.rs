//! Binding the array operators and functions that array columns need: containment (`@>`,
//! `<@`), overlap (`&&`), `array_append`, `array_prepend`, `array_cat` and `array_remove`.
//! `||`, subscripts, `ANY`/`ALL` and the other array functions are bound elsewhere;
//! evaluation is `expr`'s.

use plan::{BinaryOp, Expr, Func};
use sql::ast;
use sql::{DataType, SqlResult};

use crate::bind::Binder;
use crate::bind_json::{undefined_function, undefined_operator};
use crate::scope::Scope;

impl Binder<'_> {
    /// `l @> r` (`contained` false) or `l <@ r` (true) when a side is an array; None when
    /// neither is, so the operator is JSON's.
    pub(crate) fn array_containment(
        &mut self,
        l: Expr,
        r: Expr,
        contained: bool,
    ) -> SqlResult<Result<Expr, (Expr, Expr)>> {
        if l.ty().element().is_none() && r.ty().element().is_none() {
            return Ok(Err((l, r)));
        }
        let symbol = if contained { "<@" } else { "@>" };
        let (l, r) = self.same_arrays(l, r, symbol)?;
        let (container, items) = if contained { (r, l) } else { (l, r) };
        Ok(Ok(Expr::Function {
            func: Func::ArrayContains,
            args: vec![container, items],
            ty: DataType::Bool,
        }))
    }

    /// `l && r`: whether the arrays share an element.
    pub(crate) fn array_overlap(
        &mut self,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let l = self.expr(left, scope, None)?;
        let r = self.expr(right, scope, None)?;
        let (l, r) = self.same_arrays(l, r, "&&")?;
        Ok(Expr::Function {
            func: Func::ArrayOverlap,
            args: vec![l, r],
            ty: DataType::Bool,
        })
    }

    /// Two sides of an array operator as arrays of one type: an untyped side takes the
    /// other's, integer arrays of different widths compare as integers.
    fn same_arrays(&mut self, l: Expr, r: Expr, symbol: &str) -> SqlResult<(Expr, Expr)> {
        let (lt, rt) = (l.ty(), r.ty());
        let ty = [lt, rt].into_iter().find(|t| t.element().is_some());
        let Some(ty) = ty else {
            return Err(undefined_operator(lt, symbol, rt));
        };
        let l = self.coerce(l, ty)?;
        let r = self.coerce(r, ty)?;
        let integers = |t: DataType| t.element().is_some_and(|e| e.is_integer());
        let comparable = l.ty() == r.ty() || (integers(l.ty()) && integers(r.ty()));
        if !comparable {
            return Err(undefined_operator(lt, symbol, rt));
        }
        Ok((l, r))
    }

    /// `array_append`, `array_prepend`, `array_cat` and `array_remove`; None for another
    /// function.
    pub(crate) fn array_call(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope,
    ) -> Option<SqlResult<Expr>> {
        if !matches!(
            name,
            "array_append" | "array_prepend" | "array_cat" | "array_remove"
        ) {
            return None;
        }
        Some(self.array_function(name, args, scope))
    }

    fn array_function(&mut self, name: &str, args: &[ast::Expr], scope: &Scope) -> SqlResult<Expr> {
        let bound = args
            .iter()
            .map(|a| self.expr(a, scope, None))
            .collect::<SqlResult<Vec<Expr>>>()?;
        let [a, b]: [Expr; 2] = bound.try_into().map_err(|bound: Vec<Expr>| {
            undefined_function(name, &bound.iter().collect::<Vec<_>>())
        })?;
        let wrong = |a: &Expr, b: &Expr| undefined_function(name, &[a, b]);
        // The array's side decides the type; an untyped literal there is an array of text,
        // as in PostgreSQL.
        let (array_side, element_side) = match name {
            "array_prepend" => (b, a),
            _ => (a, b),
        };
        let array_type = match array_side.ty() {
            DataType::Unknown => DataType::TextArray,
            t => t,
        };
        let Some(element) = array_type.element() else {
            return Err(wrong(&array_side, &element_side));
        };
        let array_side = self.coerce(array_side, array_type)?;
        let element_side = if name == "array_cat" {
            self.coerce(element_side, array_type)?
        } else {
            self.coerce(element_side, element)?
        };
        let fits = match (name, element_side.ty()) {
            ("array_cat", t) => t == array_type,
            (_, t) => {
                t == element || t == DataType::Unknown || (t.is_integer() && element.is_integer())
            }
        };
        if !fits {
            return Err(wrong(&array_side, &element_side));
        }
        let (l, r) = match name {
            "array_prepend" => (element_side, array_side),
            _ => (array_side, element_side),
        };
        Ok(match name {
            "array_remove" => Expr::Function {
                func: Func::ArrayRemove,
                args: vec![l, r],
                ty: array_type,
            },
            _ => Expr::Binary {
                op: BinaryOp::Concat,
                left: Box::new(l),
                right: Box::new(r),
                ty: array_type,
            },
        })
    }
}
