//! Binding `UNION`, `INTERSECT`, `EXCEPT` and `VALUES`: each column of the result takes the
//! type its inputs resolve to together (`common_type`), a side of another type projected
//! through a cast.

use plan::*;
use sql::ast;
use sql::{DataType, SqlError, SqlResult};

use crate::bind::*;
use crate::scope::Scope;

impl Binder<'_> {
    /// `UNION`, `INTERSECT` and `EXCEPT`, each `[ALL | DISTINCT]`.
    pub(crate) fn set_operation(
        &mut self,
        left: &ast::SetExpr,
        op: &ast::SetOperator,
        quantifier: &ast::SetQuantifier,
        right: &ast::SetExpr,
        outer: &Scope,
    ) -> SqlResult<SelectPlan> {
        let all = match quantifier {
            ast::SetQuantifier::All => true,
            ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
            other => return Err(SqlError::feature_not_supported(format!("{op} {other}"))),
        };
        let l = self.set_side(left, outer)?;
        let r = self.set_side(right, outer)?;
        if l.columns.len() != r.columns.len() {
            return Err(SqlError::syntax(format!(
                "each {op} query must have the same number of columns"
            )));
        }
        let (l, r) = self.resolve_common_columns(l, r, &op.to_string(), outer)?;
        let (left, right) = (Box::new(l.rel), Box::new(r.rel));
        let rel = match op {
            ast::SetOperator::Union => Rel::Union { left, right, all },
            ast::SetOperator::Intersect => Rel::SetDifference {
                left,
                right,
                except: false,
                all,
            },
            ast::SetOperator::Except => Rel::SetDifference {
                left,
                right,
                except: true,
                all,
            },
            other => return Err(SqlError::feature_not_supported(format!("{other}"))),
        };
        Ok(SelectPlan {
            rel,
            columns: l.columns,
            reads_user_tables: l.reads_user_tables || r.reads_user_tables,
        })
    }

    /// Both sides of a set operation with each column of the type the two resolve to
    /// (`common_type`): a side whose column has another type is projected through a cast.
    fn resolve_common_columns(
        &mut self,
        mut l: SelectPlan,
        mut r: SelectPlan,
        construct: &str,
        outer: &Scope,
    ) -> SqlResult<(SelectPlan, SelectPlan)> {
        let (l_types, r_types) = (resolving_types(&l), resolving_types(&r));
        let mut types = Vec::with_capacity(l.columns.len());
        for (a, b) in l_types.into_iter().zip(r_types) {
            let common = crate::common_type::common_type(&[a, b], construct)?;
            types.push(common.unwrap_or(DataType::Unknown));
        }
        for side in [&mut l, &mut r] {
            let differs = side
                .columns
                .iter()
                .zip(&types)
                .any(|(c, t)| *t != DataType::Unknown && c.ty != *t);
            if !differs {
                continue;
            }
            let mut exprs = Vec::with_capacity(types.len());
            for (i, (column, ty)) in side.columns.iter_mut().zip(&types).enumerate() {
                let e = Expr::Column(outer.columns.len() + i, column.ty);
                if *ty == DataType::Unknown {
                    exprs.push(e);
                    continue;
                }
                exprs.push(self.convert(e, *ty)?);
                column.ty = *ty;
            }
            let input = std::mem::replace(&mut side.rel, Rel::Values { rows: Vec::new() });
            side.rel = Rel::Project {
                input: Box::new(input),
                exprs,
            };
        }
        Ok((l, r))
    }

    pub(crate) fn values(&mut self, values: &ast::Values, outer: &Scope) -> SqlResult<SelectPlan> {
        let scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        let mut rows = Vec::new();
        for row in &values.rows {
            let mut bound = Vec::new();
            for e in &row.content {
                bound.push(self.expr(e, &scope, None)?);
            }
            rows.push(bound);
        }
        let width = rows.first().map(Vec::len).unwrap_or(0);
        if rows.iter().any(|r| r.len() != width) {
            return Err(SqlError::syntax("VALUES lists must all be the same length"));
        }
        // Each column takes the type its rows resolve to together (`common_type`); a column
        // of untyped literals only stays untyped.
        for i in 0..width {
            let types: Vec<DataType> = rows.iter().map(|r| r[i].ty()).collect();
            let Some(ty) = crate::common_type::common_type(&types, "VALUES")? else {
                continue;
            };
            for row in &mut rows {
                let e = std::mem::replace(&mut row[i], Expr::Literal(sql::Value::Null, ty));
                row[i] = self.convert(e, ty)?;
            }
        }
        let columns = (0..width)
            .map(|i| OutputColumn {
                name: format!("column{}", i + 1),
                ty: rows[0][i].ty(),
                table_oid: 0,
                column_number: 0,
            })
            .collect();
        Ok(SelectPlan {
            rel: Rel::Values { rows },
            columns,
            reads_user_tables: false,
        })
    }
}

/// The types a set operation's side brings to resolving its columns' types: an untyped
/// literal or parameter a SELECT outputs as it is (shown as text) counts as untyped, as in
/// PostgreSQL, so `SELECT 1 UNION SELECT '2'` is integer.
fn resolving_types(plan: &SelectPlan) -> Vec<DataType> {
    let outputs: Option<&Vec<Expr>> = match &plan.rel {
        Rel::Project { exprs, .. } => Some(exprs),
        Rel::Values { rows } if rows.len() == 1 => rows.first(),
        _ => None,
    };
    plan.columns
        .iter()
        .enumerate()
        .map(|(i, c)| match outputs.and_then(|o| o.get(i)) {
            Some(e) if e.ty() == DataType::Unknown => DataType::Unknown,
            _ => c.ty,
        })
        .collect()
}
