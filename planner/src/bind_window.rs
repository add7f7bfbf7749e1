//! Binding window functions: `f(args) OVER (PARTITION BY … ORDER BY … frame)`, also over a
//! window named in the query's `WINDOW` clause. A call in a select list or its ORDER BY
//! becomes one `WindowCall` of the query's `Rel::Window`; in the expression it is a column
//! numbered from `WINDOW_SLOT` until `select` knows how wide the window's input row is.

use plan::{AggCall, Expr, FrameBound, WindowCall, WindowFrame, WindowFunc};
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::Binder;
use crate::bind_expr::{ident, AGGREGATES};
use crate::bind_function::{aggregate_signature, filtered, CallArgs};
use crate::scope::Scope;

/// The refusal of a window function outside a select list or ORDER BY.
pub(crate) const NOT_ALLOWED_HERE: &str = "window functions are not allowed here";

/// Where window values are numbered while the select list binds.
pub(crate) const WINDOW_SLOT: usize = 1 << 40;

/// While binding a select list and its ORDER BY: the window calls found, and the windows
/// the `WINDOW` clause names.
pub(crate) struct WindowContext {
    pub calls: Vec<WindowCall>,
    named: Vec<(String, ast::WindowSpec)>,
}

impl WindowContext {
    pub fn new(definitions: &[ast::NamedWindowDefinition]) -> SqlResult<WindowContext> {
        let mut context = WindowContext {
            calls: Vec::new(),
            named: Vec::new(),
        };
        for ast::NamedWindowDefinition(name, definition) in definitions {
            let name = ident(name);
            if context.named.iter().any(|(n, _)| *n == name) {
                return Err(SqlError::new(
                    ErrorKind::WindowingError,
                    format!("window \"{name}\" is already defined"),
                ));
            }
            let spec = match definition {
                ast::NamedWindowExpr::WindowSpec(spec) => context.resolve(spec)?,
                ast::NamedWindowExpr::NamedWindow(other) => context.named(other)?.clone(),
            };
            context.named.push((name, spec));
        }
        Ok(context)
    }

    fn named(&self, name: &ast::Ident) -> SqlResult<&ast::WindowSpec> {
        let name = ident(name);
        self.named
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, spec)| spec)
            .ok_or_else(|| {
                SqlError::new(
                    ErrorKind::UndefinedObject,
                    format!("window \"{name}\" does not exist"),
                )
            })
    }

    /// A window that starts from a named one (`OVER (w ORDER BY x)`) takes its partitioning
    /// and, when it has none of its own, its ordering, as in PostgreSQL.
    fn resolve(&self, spec: &ast::WindowSpec) -> SqlResult<ast::WindowSpec> {
        let Some(base) = &spec.window_name else {
            return Ok(spec.clone());
        };
        let named = self.named(base)?;
        let refused = |what: &str| {
            Err(SqlError::new(
                ErrorKind::WindowingError,
                format!("cannot override {what} of window \"{}\"", ident(base)),
            ))
        };
        if !spec.partition_by.is_empty() {
            return refused("PARTITION BY clause");
        }
        if !spec.order_by.is_empty() && !named.order_by.is_empty() {
            return refused("ORDER BY clause");
        }
        if named.window_frame.is_some() {
            return Err(SqlError::new(
                ErrorKind::WindowingError,
                format!(
                    "cannot copy window \"{}\" because it has a frame clause",
                    ident(base)
                ),
            ));
        }
        Ok(ast::WindowSpec {
            window_name: None,
            partition_by: named.partition_by.clone(),
            order_by: if spec.order_by.is_empty() {
                named.order_by.clone()
            } else {
                spec.order_by.clone()
            },
            window_frame: spec.window_frame.clone(),
        })
    }
}

impl Binder<'_> {
    /// A window function call: bound over `scope` (the select list's, after grouping) and
    /// added to the query's window calls.
    pub(crate) fn window_call(
        &mut self,
        name: &str,
        call: &CallArgs,
        filter: Option<&ast::Expr>,
        over: &ast::WindowType,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let Some(mut context) = self.window.take() else {
            return Err(SqlError::new(ErrorKind::WindowingError, NOT_ALLOWED_HERE));
        };
        // The call's own expressions may not hold another window function: the context
        // stays out of reach while they bind.
        let bound = self.bind_window_call(&context, name, call, filter, over, scope);
        let position = WINDOW_SLOT + context.calls.len();
        let result = bound.map(|window| {
            let ty = window.ty;
            context.calls.push(window);
            Expr::Column(position, ty)
        });
        self.window = Some(context);
        result
    }

    fn bind_window_call(
        &mut self,
        context: &WindowContext,
        name: &str,
        call: &CallArgs,
        filter: Option<&ast::Expr>,
        over: &ast::WindowType,
        scope: &Scope,
    ) -> SqlResult<WindowCall> {
        let spec = match over {
            ast::WindowType::WindowSpec(spec) => context.resolve(spec)?,
            ast::WindowType::NamedWindow(n) => context.named(n)?.clone(),
        };
        if call.distinct {
            return Err(SqlError::feature_not_supported(
                "DISTINCT in a window function",
            ));
        }
        if !call.order_by.is_empty() {
            return Err(SqlError::feature_not_supported(
                "ORDER BY in the arguments of a window function",
            ));
        }
        let mut partition_by = Vec::new();
        for e in &spec.partition_by {
            partition_by.push(self.expr(e, scope, None)?);
        }
        let mut order_by = Vec::new();
        for o in &spec.order_by {
            let key = self.expr(&o.expr, scope, None)?;
            order_by.push(self.sort_key(key, o));
        }
        let frame = self.frame(spec.window_frame.as_ref())?;
        let mut args = Vec::new();
        for a in &call.exprs {
            args.push(self.expr(a, scope, None)?);
        }
        let first_ty = args.first().map(|a| a.ty()).unwrap_or(DataType::Unknown);
        let value_ty = if first_ty == DataType::Unknown {
            DataType::Text
        } else {
            first_ty
        };
        if AGGREGATES.contains(&name) {
            let (func, ty) = aggregate_signature(name, call.star, &args)?;
            let (func, args) = match filter {
                Some(f) => {
                    let condition = self.expr(f, scope, Some(DataType::Bool))?;
                    filtered(func, args, condition)?
                }
                None => (func, args),
            };
            let aggregate = AggCall {
                func,
                args,
                distinct: false,
                ty,
            };
            return Ok(WindowCall {
                func: WindowFunc::Aggregate(aggregate),
                args: Vec::new(),
                partition_by,
                order_by,
                frame,
                ty,
            });
        }
        if filter.is_some() {
            return Err(SqlError::new(
                ErrorKind::WrongObjectType,
                format!("FILTER is not implemented for non-aggregate window function {name}"),
            ));
        }
        let (func, ty) = match (name, call.star, args.len()) {
            ("row_number", false, 0) => (WindowFunc::RowNumber, DataType::Int8),
            ("rank", false, 0) => (WindowFunc::Rank, DataType::Int8),
            ("dense_rank", false, 0) => (WindowFunc::DenseRank, DataType::Int8),
            ("percent_rank", false, 0) => (WindowFunc::PercentRank, DataType::Float8),
            ("cume_dist", false, 0) => (WindowFunc::CumeDist, DataType::Float8),
            ("ntile", false, 1) => {
                let buckets = args.remove(0);
                args.push(self.coerce(buckets, DataType::Int4)?);
                (WindowFunc::Ntile, DataType::Int4)
            }
            ("lag" | "lead", false, 1..=3) => {
                if args.len() >= 2 {
                    args[1] = self.coerce(args[1].clone(), DataType::Int4)?;
                }
                if args.len() == 3 {
                    args[2] = self.coerce(args[2].clone(), value_ty)?;
                }
                let func = if name == "lag" {
                    WindowFunc::Lag
                } else {
                    WindowFunc::Lead
                };
                (func, value_ty)
            }
            ("first_value", false, 1) => (WindowFunc::FirstValue, value_ty),
            ("last_value", false, 1) => (WindowFunc::LastValue, value_ty),
            ("nth_value", false, 2) => {
                args[1] = self.coerce(args[1].clone(), DataType::Int4)?;
                (WindowFunc::NthValue, value_ty)
            }
            (
                "row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist" | "ntile"
                | "lag" | "lead" | "first_value" | "last_value" | "nth_value",
                _,
                _,
            ) => {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!("function {name} with these arguments does not exist"),
                ))
            }
            _ => {
                return Err(SqlError::new(
                    ErrorKind::WrongObjectType,
                    format!(
                    "OVER specified, but {name} is not a window function nor an aggregate function"
                ),
                ))
            }
        };
        Ok(WindowCall {
            func,
            args,
            partition_by,
            order_by,
            frame,
            ty,
        })
    }

    fn frame(&mut self, frame: Option<&ast::WindowFrame>) -> SqlResult<WindowFrame> {
        let Some(frame) = frame else {
            return Ok(WindowFrame::DEFAULT);
        };
        let rows = match frame.units {
            ast::WindowFrameUnits::Rows => true,
            ast::WindowFrameUnits::Range => false,
            ast::WindowFrameUnits::Groups => {
                return Err(SqlError::feature_not_supported("GROUPS window frames"))
            }
        };
        let start = self.frame_bound(&frame.start_bound, rows)?;
        let end = match &frame.end_bound {
            Some(b) => self.frame_bound(b, rows)?,
            None => FrameBound::CurrentRow,
        };
        let refused = |message: &str| {
            Err(SqlError::new(
                ErrorKind::WindowingError,
                message.to_string(),
            ))
        };
        if start == FrameBound::UnboundedFollowing {
            return refused("frame start cannot be UNBOUNDED FOLLOWING");
        }
        if end == FrameBound::UnboundedPreceding {
            return refused("frame end cannot be UNBOUNDED PRECEDING");
        }
        if start == FrameBound::CurrentRow && matches!(end, FrameBound::Preceding(_)) {
            return refused("frame starting from current row cannot have preceding rows");
        }
        if matches!(start, FrameBound::Following(_))
            && matches!(end, FrameBound::Preceding(_) | FrameBound::CurrentRow)
        {
            return refused("frame starting from following row cannot have preceding rows");
        }
        Ok(WindowFrame { rows, start, end })
    }

    fn frame_bound(&mut self, bound: &ast::WindowFrameBound, rows: bool) -> SqlResult<FrameBound> {
        let offset = |binder: &mut Self, e: &ast::Expr| -> SqlResult<u64> {
            if !rows {
                return Err(SqlError::feature_not_supported(
                    "RANGE frames with an offset (use ROWS)",
                ));
            }
            let bound = binder.expr(e, &Scope::default(), Some(DataType::Int8))?;
            match bound {
                Expr::Literal(Value::Int(n), _) if n >= 0 => Ok(n as u64),
                Expr::Literal(Value::Int(_), _) => Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    "frame offset must not be negative",
                )),
                _ => Err(SqlError::feature_not_supported(
                    "a window frame offset that is not an integer constant",
                )),
            }
        };
        Ok(match bound {
            ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
            ast::WindowFrameBound::Preceding(None) => FrameBound::UnboundedPreceding,
            ast::WindowFrameBound::Following(None) => FrameBound::UnboundedFollowing,
            ast::WindowFrameBound::Preceding(Some(e)) => FrameBound::Preceding(offset(self, e)?),
            ast::WindowFrameBound::Following(Some(e)) => FrameBound::Following(offset(self, e)?),
        })
    }
}
