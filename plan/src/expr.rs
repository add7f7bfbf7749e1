//! Bound expressions: column references resolved to positions, parameters to numbers,
//! functions to `Func`, every node typed. They are data (serde) because write commands carry
//! them through the log and the executor evaluates them at apply time (`x = x + $1`).

use std::cmp::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::datetime;
use sql::{check_int_range, DataType, ErrorKind, Numeric, SqlError, SqlResult, Value};

use crate::eval_env::EvalEnv;
use crate::function_eval::eval_function;
use crate::plan::Rel;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Concat,
    /// Integer bitwise operators: `&`, `|`, `#`, `<<`, `>>`.
    BitAnd,
    BitOr,
    BitXor,
    ShiftLeft,
    ShiftRight,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "<>",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Concat => "||",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "#",
            BinaryOp::ShiftLeft => "<<",
            BinaryOp::ShiftRight => ">>",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`).
    pub fn flipped(self) -> BinaryOp {
        match self {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            other => other,
        }
    }
}

/// Scalar functions the evaluator knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Func {
    Now,
    Coalesce,
    NullIf,
    Lower,
    Upper,
    Length,
    Abs,
    Round,
    Trunc,
    Floor,
    Ceil,
    Greatest,
    Least,
    Substring,
    Concat,
    ArrayPosition,
    ArrayToString,
    Random,
    /// `arr[i]` (1-based).
    ArraySubscript,
    /// `ARRAY[a, b, ...]`.
    MakeArray,
    ArrayUpper,
    /// `format_type(type_oid, typmod)`.
    FormatType,
    /// `pg_get_expr(text, relation [, pretty])`: stored expressions are kept as SQL text.
    GetExpr,
    /// `pg_get_indexdef(index_oid, ...)`.
    GetIndexDef,
    /// `pg_get_constraintdef(constraint_oid, ...)`.
    GetConstraintDef,
    /// `oid::regclass`: the relation's name.
    RegClassName,
    Repeat,
    Replace,
    Left,
    Right,
    /// `btrim`/`ltrim`/`rtrim` (and `TRIM(...)`): which ends, and the characters.
    TrimBoth,
    TrimLeading,
    TrimTrailing,
    /// `pg_get_function_arguments(oid)` of a stored procedure.
    GetFunctionArguments,
    /// `pg_relation_size`, `pg_table_size`, `pg_indexes_size`, `pg_total_relation_size`:
    /// bytes the executor's storage holds for a relation (see `SubqueryRunner::relation_bytes`).
    RelationSize,
    TableSize,
    IndexesSize,
    TotalRelationSize,
    /// `pg_size_pretty(bigint)`.
    SizePretty,
    /// `date_trunc(field, timestamp)`.
    DateTrunc,
    /// `date_part(field, value)`: a double.
    DatePart,
    /// `extract(field FROM value)`: a numeric.
    Extract,
    // The functions of `scalar_functions`.
    Lpad,
    Rpad,
    SplitPart,
    Strpos,
    Initcap,
    Reverse,
    StartsWith,
    Chr,
    Ascii,
    Translate,
    ConcatWs,
    ToHex,
    Md5,
    Sqrt,
    Cbrt,
    Exp,
    Ln,
    Log10,
    Log,
    Power,
    Pi,
    Sign,
    Mod,
    Div,
    ArrayLength,
    Cardinality,
    StringToArray,
    RegexpReplace,
    ToTimestamp,
    MakeDate,
    ToChar,
    /// `pg_get_viewdef(view_oid [, pretty])`: the view's query as written.
    GetViewDef,
    /// `nextval(seq)`: advances the sequence (`EvalEnv::sequences`).
    NextVal,
    /// `currval(seq)`: what `nextval` last gave this session.
    CurrVal,
    /// `setval(seq, value [, is_called])`.
    SetVal,
    /// `lastval()`.
    LastVal,
    /// `pg_get_serial_sequence(table, column)`.
    GetSerialSequence,
    QuoteIdent,
    /// `to_regtype(name)`: the type's oid, NULL when no such type.
    ToRegType,
    /// `x::regtype` of an oid: the type's name as `format_type` writes it.
    RegTypeName,
    /// `json_build_object(key, value, ...)`.
    JsonBuildObject,
    /// `x::regclass` of a name known only at run time: the relation's oid.
    RegClassOid,
    /// A JSON operator or function (`json_functions`).
    Json(crate::json_functions::JsonFunc),
    /// `gen_random_uuid()`: a version 4 uuid.
    GenRandomUuid,
    /// `container @> items` on arrays: every non-NULL element of `items` is in `container`.
    ArrayContains,
    /// `a && b` on arrays: an element (not NULL) in both.
    ArrayOverlap,
    /// `array_remove(array, element)`: the array without the elements equal to it (or
    /// without its NULLs).
    ArrayRemove,
    /// `percentile_cont(fraction) WITHIN GROUP (ORDER BY x)`, finished from the group's
    /// `array_agg(x)`: (fraction, values, descending).
    PercentileCont,
    /// `percentile_disc(fraction) WITHIN GROUP (ORDER BY x)`, as `PercentileCont`.
    PercentileDisc,
    /// `mode() WITHIN GROUP (ORDER BY x)`: (values, descending).
    Mode,
    /// Text becoming a value of an enum type (the call's type): (text, the type's labels);
    /// 22P02 for a label the type does not have.
    EnumIn,
    /// An enum value's position among its type's labels, what orders it: (value, labels).
    EnumPosition,
    /// `pg_cancel_backend(pid)`.
    CancelBackend,
    /// `pg_terminate_backend(pid[, timeout])`.
    TerminateBackend,
    /// `format(formatstr, args...)`: `%s`, `%I`, `%L`, `%%`, with positions and widths.
    Format,
    /// `quote_literal(text)`: a string literal, or NULL for NULL.
    QuoteLiteral,
    /// `quote_nullable(text)`: a string literal, or `NULL` for NULL.
    QuoteNullable,
    /// `regexp_match(text, pattern [, flags])`: the first match's groups (or the match).
    RegexpMatch,
    /// `regexp_split_to_array(text, pattern [, flags])`.
    RegexpSplitToArray,
    /// `age(a, b)`: the difference in years, months, days and time (`sql::datetime::age`).
    Age,
    /// `has_table_privilege` and its kin, `pg_has_role`: (kind, role, object, privileges)
    /// (`privilege_functions.rs`).
    HasPrivilege,
    /// `pg_get_userbyid(oid)`: the role's name (`unknown (OID=n)` for none).
    UserById,
}

impl Func {
    /// Whether evaluating it needs the executor's storage, not just the catalog.
    pub fn reads_storage(self) -> bool {
        matches!(
            self,
            Func::RelationSize | Func::TableSize | Func::IndexesSize | Func::TotalRelationSize
        )
    }

    /// Whether it draws random values (`random()`, `gen_random_uuid()`): each call gives
    /// another value, so it may only run where its values are recorded rather than computed
    /// again by every replica ([`EvalEnv::random`]).
    pub fn draws_random(self) -> bool {
        matches!(self, Func::Random | Func::GenRandomUuid)
    }

    /// Whether it reads or changes a sequence's state, so its value depends on when and
    /// where it runs.
    pub fn uses_sequences(self) -> bool {
        matches!(
            self,
            Func::NextVal | Func::CurrVal | Func::SetVal | Func::LastVal
        )
    }

    /// Whether it changes a sequence's state: a statement calling it is a write.
    pub fn advances_sequences(self) -> bool {
        matches!(self, Func::NextVal | Func::SetVal)
    }

    /// Whether two calls with the same arguments may answer differently (PostgreSQL's
    /// functions not marked IMMUTABLE that matter here): the time, random values,
    /// sequences, signals to sessions.
    pub fn is_volatile(self) -> bool {
        self == Func::Now
            || self.draws_random()
            || self.uses_sequences()
            || matches!(self, Func::CancelBackend | Func::TerminateBackend)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Min,
    Max,
    Avg,
    BoolAnd,
    BoolOr,
    StringAgg,
    /// `array_agg(x)`: every value, NULLs too, in input order.
    ArrayAgg,
}

impl AggFunc {
    /// The function's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::CountStar | AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::Avg => "avg",
            AggFunc::BoolAnd => "bool_and",
            AggFunc::BoolOr => "bool_or",
            AggFunc::StringAgg => "string_agg",
            AggFunc::ArrayAgg => "array_agg",
        }
    }
}

/// One aggregate call in a grouped query.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AggCall {
    pub func: AggFunc,
    pub args: Vec<Expr>,
    pub distinct: bool,
    pub ty: DataType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubqueryKind {
    Scalar,
    Exists,
    /// `ARRAY(subquery)`: the first column of every row.
    Array,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Expr {
    Literal(Value, DataType),
    /// A position in the evaluation row (outer columns first, then the current row's).
    Column(usize, DataType),
    /// `$n`, zero-based.
    Param(usize, DataType),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
        ty: DataType,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    IsDistinct {
        left: Box<Expr>,
        right: Box<Expr>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
        case_insensitive: bool,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
        ty: DataType,
    },
    Cast {
        expr: Box<Expr>,
        ty: DataType,
    },
    Function {
        func: Func,
        args: Vec<Expr>,
        ty: DataType,
    },
    /// A subquery evaluated per row with the current row as its outer row.
    /// The relation is shared, not copied, by clones of the expression (a write's
    /// assignments are cloned for each row), so a runner can tell a subquery by its
    /// allocation (`SubqueryRunner::run_shared`); serialized as the relation itself.
    Subquery {
        rel: Arc<Rel>,
        kind: SubqueryKind,
        negated: bool,
        ty: DataType,
    },
    /// `expr [NOT] IN (subquery)`.
    InSubquery {
        expr: Box<Expr>,
        rel: Arc<Rel>,
        negated: bool,
    },
    /// `expr ~ pattern` and its negated and case-insensitive forms.
    Regex {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
        case_insensitive: bool,
    },
    /// `expr op ANY (array)` or `expr op ALL (array)`.
    AnyArray {
        expr: Box<Expr>,
        op: BinaryOp,
        array: Box<Expr>,
        all: bool,
    },
}

impl Expr {
    /// The expression as type `ty`: itself if it is of that type, else cast.
    pub fn cast_to(self, ty: DataType) -> Expr {
        if self.ty() == ty {
            return self;
        }
        Expr::Cast {
            expr: Box::new(self),
            ty,
        }
    }

    pub fn literal(value: Value) -> Expr {
        let ty = value.natural_type();
        Expr::Literal(value, ty)
    }

    /// Arithmetic on literals only (negation, `+ - * / %`, casts between numeric types):
    /// its value is the same wherever and whenever it is evaluated.
    pub fn is_constant_arithmetic(&self) -> bool {
        match self {
            Expr::Literal(..) => true,
            Expr::Negate(e) => e.is_constant_arithmetic(),
            Expr::Binary {
                op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod,
                left,
                right,
                ..
            } => left.is_constant_arithmetic() && right.is_constant_arithmetic(),
            Expr::Cast { expr, ty } => {
                ty.is_numeric_family()
                    && expr.ty().is_numeric_family()
                    && expr.is_constant_arithmetic()
            }
            _ => false,
        }
    }

    /// A constant arithmetic expression replaced by its value; anything else, and an
    /// expression whose evaluation fails (so the error still comes when the statement is
    /// applied), as it is.
    pub fn folded(self) -> Expr {
        if matches!(self, Expr::Literal(..)) || !self.is_constant_arithmetic() {
            return self;
        }
        match self.eval(&[], &EvalEnv::without_subqueries(&[], 0)) {
            Ok(value) => {
                let ty = self.ty();
                Expr::Literal(value, ty)
            }
            Err(_) => self,
        }
    }

    pub fn ty(&self) -> DataType {
        match self {
            Expr::Literal(_, ty) | Expr::Column(_, ty) | Expr::Param(_, ty) => *ty,
            Expr::Negate(e) => e.ty(),
            Expr::Not(_) | Expr::IsNull { .. } | Expr::IsDistinct { .. } | Expr::InList { .. } => {
                DataType::Bool
            }
            Expr::Like { .. } | Expr::InSubquery { .. } => DataType::Bool,
            Expr::Regex { .. } | Expr::AnyArray { .. } => DataType::Bool,
            Expr::Binary { ty, .. } | Expr::Case { ty, .. } | Expr::Cast { ty, .. } => *ty,
            Expr::Function { ty, .. } | Expr::Subquery { ty, .. } => *ty,
        }
    }

    /// True when the expression reads no column at or after `first_own_column` (so its value
    /// is known before the scan: literals, parameters, outer columns).
    pub fn is_independent_of(&self, first_own_column: usize) -> bool {
        let mut independent = true;
        self.visit(&mut |e| match e {
            Expr::Column(i, _) if *i >= first_own_column => independent = false,
            Expr::Subquery { .. } | Expr::InSubquery { .. } => independent = false,
            Expr::Function { func, .. } if func.draws_random() || func.uses_sequences() => {
                independent = false
            }
            _ => {}
        });
        independent
    }

    /// The expression with each `random()` and `gen_random_uuid()` call replaced by a value
    /// drawn now: what a transaction stages for its commit to evaluate again, so every
    /// replica computes with the same values.
    pub fn with_random_drawn(&self) -> SqlResult<Expr> {
        let mut drawn = self.clone();
        drawn.draw_random()?;
        Ok(drawn)
    }

    fn draw_random(&mut self) -> SqlResult<()> {
        if let Expr::Function { func, ty, .. } = self {
            if func.draws_random() {
                let value = eval_function(*func, &[], *ty, &[], &EvalEnv::drawing())?;
                *self = Expr::Literal(value, *ty);
                return Ok(());
            }
        }
        for child in self.children_mut() {
            child.draw_random()?;
        }
        Ok(())
    }

    /// Whether a subquery appears in it.
    pub fn has_subquery(&self) -> bool {
        let mut found = false;
        self.visit(&mut |x| found |= matches!(x, Expr::Subquery { .. } | Expr::InSubquery { .. }));
        found
    }

    /// A copy with each subquery (an `IN (SELECT ...)` with its left side) replaced by its
    /// value on `row`, the row the expression is evaluated on: what a write staged in a
    /// transaction carries to the commit, which runs no subqueries.
    pub fn with_subqueries_evaluated(&self, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<Expr> {
        let mut evaluated = self.clone();
        evaluated.evaluate_subqueries(row, env)?;
        Ok(evaluated)
    }

    fn evaluate_subqueries(&mut self, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<()> {
        if matches!(self, Expr::Subquery { .. } | Expr::InSubquery { .. }) {
            *self = Expr::Literal(self.eval(row, env)?, self.ty());
            return Ok(());
        }
        for child in self.children_mut() {
            child.evaluate_subqueries(row, env)?;
        }
        Ok(())
    }

    /// Whether it calls a function `which` picks, in its subqueries too
    /// (`e.calls(Func::draws_random)`).
    pub fn calls(&self, which: fn(Func) -> bool) -> bool {
        let mut found = false;
        self.visit(&mut |x| match x {
            Expr::Function { func, .. } => found |= which(*func),
            Expr::Subquery { rel, .. } | Expr::InSubquery { rel, .. } => {
                found |= crate::sequence::rel_calls(rel, which)
            }
            _ => {}
        });
        found
    }

    /// Moves every column reference outside subqueries to `f(position)`.
    pub fn renumber_columns(&mut self, f: &dyn Fn(usize) -> usize) {
        if let Expr::Column(i, _) = self {
            *i = f(*i);
        }
        for child in self.children_mut() {
            child.renumber_columns(f);
        }
    }

    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for child in self.children() {
            child.visit(f);
        }
    }

    /// The expressions directly under this one (a subquery's own plan is not a child).
    fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Literal(..) | Expr::Column(..) | Expr::Param(..) | Expr::Subquery { .. } => {
                Vec::new()
            }
            Expr::Not(e)
            | Expr::Negate(e)
            | Expr::Cast { expr: e, .. }
            | Expr::IsNull { expr: e, .. } => vec![e],
            Expr::InSubquery { expr, .. } => vec![expr],
            Expr::Binary { left, right, .. } | Expr::IsDistinct { left, right, .. } => {
                vec![left, right]
            }
            Expr::Like { expr, pattern, .. } | Expr::Regex { expr, pattern, .. } => {
                vec![expr, pattern]
            }
            Expr::AnyArray { expr, array, .. } => vec![expr, array],
            Expr::InList { expr, list, .. } => std::iter::once(&**expr).chain(list).collect(),
            Expr::Function { args, .. } => args.iter().collect(),
            Expr::Case {
                operand,
                whens,
                otherwise,
                ..
            } => operand
                .iter()
                .map(|o| &**o)
                .chain(whens.iter().flat_map(|(w, t)| [w, t]))
                .chain(otherwise.iter().map(|o| &**o))
                .collect(),
        }
    }

    /// `children`, mutably.
    fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Literal(..) | Expr::Column(..) | Expr::Param(..) | Expr::Subquery { .. } => {
                Vec::new()
            }
            Expr::Not(e)
            | Expr::Negate(e)
            | Expr::Cast { expr: e, .. }
            | Expr::IsNull { expr: e, .. } => vec![e],
            Expr::InSubquery { expr, .. } => vec![expr],
            Expr::Binary { left, right, .. } | Expr::IsDistinct { left, right, .. } => {
                vec![left, right]
            }
            Expr::Like { expr, pattern, .. } | Expr::Regex { expr, pattern, .. } => {
                vec![expr, pattern]
            }
            Expr::AnyArray { expr, array, .. } => vec![expr, array],
            Expr::InList { expr, list, .. } => std::iter::once(&mut **expr).chain(list).collect(),
            Expr::Function { args, .. } => args.iter_mut().collect(),
            Expr::Case {
                operand,
                whens,
                otherwise,
                ..
            } => operand
                .iter_mut()
                .map(|o| &mut **o)
                .chain(whens.iter_mut().flat_map(|(w, t)| [w, t]))
                .chain(otherwise.iter_mut().map(|o| &mut **o))
                .collect(),
        }
    }

    /// Replaces parameters and `now()` with literals, so the expression can travel in a
    /// command and evaluate identically anywhere.
    pub fn bind_constants(&self, params: &[Value], now_micros: i64) -> SqlResult<Expr> {
        let mut bound = self.clone();
        bound.replace_constants(params, now_micros)?;
        Ok(bound)
    }

    fn replace_constants(&mut self, params: &[Value], now_micros: i64) -> SqlResult<()> {
        match self {
            Expr::Param(i, ty) => {
                let v = params.get(*i).cloned().ok_or_else(|| {
                    SqlError::new(
                        ErrorKind::UndefinedParameter,
                        format!("there is no parameter ${}", *i + 1),
                    )
                })?;
                *self = Expr::Literal(v, *ty);
            }
            Expr::Function {
                func: Func::Now,
                ty,
                ..
            } => *self = Expr::Literal(Value::TimestampTz(now_micros), *ty),
            Expr::Subquery { .. } | Expr::InSubquery { .. } => {
                return Err(SqlError::feature_not_supported(
                    "subqueries in UPDATE or DELETE (also UPDATE ... FROM, DELETE ... USING) inside a transaction block",
                ))
            }
            Expr::Function { func, .. } if func.uses_sequences() => {
                return Err(SqlError::feature_not_supported(
                    "sequence functions in UPDATE, DELETE or ON CONFLICT DO UPDATE inside a transaction block",
                ))
            }
            _ => {
                for child in self.children_mut() {
                    child.replace_constants(params, now_micros)?;
                }
            }
        }
        Ok(())
    }

    pub fn eval(&self, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<Value> {
        Ok(match self {
            Expr::Literal(v, _) => v.clone(),
            Expr::Column(i, _) => row
                .get(*i)
                .cloned()
                .ok_or_else(|| SqlError::internal(format!("column {i} out of range")))?,
            Expr::Param(i, ty) => {
                let v = env.params.get(*i).ok_or_else(|| {
                    SqlError::new(
                        ErrorKind::UndefinedParameter,
                        format!("there is no parameter ${}", i + 1),
                    )
                })?;
                if *ty == DataType::Unknown {
                    v.clone()
                } else {
                    v.cast(*ty)?
                }
            }
            Expr::Not(e) => match e.eval(row, env)? {
                Value::Null => Value::Null,
                Value::Bool(b) => Value::Bool(!b),
                other => return Err(bool_expected(&other)),
            },
            Expr::Negate(e) => match e.eval(row, env)? {
                Value::Null => Value::Null,
                Value::Int(i) => {
                    check_int_range(i.checked_neg().ok_or_else(int_overflow)?, e.ty())?
                }
                Value::Float(f) => Value::Float(-f),
                Value::Numeric(n) => Value::Numeric(n.neg()),
                Value::Interval(i) => Value::Interval(i.checked_neg()?),
                other => {
                    return Err(SqlError::mismatch(format!(
                        "cannot negate {}",
                        other.natural_type()
                    )))
                }
            },
            Expr::Binary {
                op,
                left,
                right,
                ty,
            } => eval_binary(*op, left, right, *ty, row, env)?,
            Expr::IsNull { expr, negated } => {
                Value::Bool(expr.eval(row, env)?.is_null() != *negated)
            }
            Expr::IsDistinct {
                left,
                right,
                negated,
            } => {
                let l = left.eval(row, env)?;
                let r = right.eval(row, env)?;
                let distinct = match (l.is_null(), r.is_null()) {
                    (true, true) => false,
                    (true, false) | (false, true) => true,
                    _ => l.compare(&r) != Some(Ordering::Equal),
                };
                Value::Bool(distinct != *negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let v = expr.eval(row, env)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for item in list {
                    let x = item.eval(row, env)?;
                    if x.is_null() {
                        saw_null = true;
                    } else if compare_values(&v, &x)? == Ordering::Equal {
                        return Ok(Value::Bool(!negated));
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Bool(*negated)
                }
            }
            Expr::Like {
                expr,
                pattern,
                negated,
                case_insensitive,
            } => {
                let (v, p) = (expr.eval(row, env)?, pattern.eval(row, env)?);
                match (v, p) {
                    (Value::Null, _) | (_, Value::Null) => Value::Null,
                    (v, p) => {
                        let text = text_of(&v);
                        let pat = text_of(&p);
                        let matched = if *case_insensitive {
                            like(&text.to_lowercase(), &pat.to_lowercase())
                        } else {
                            like(&text, &pat)
                        };
                        Value::Bool(matched != *negated)
                    }
                }
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
                ty,
            } => {
                let subject = match operand {
                    Some(o) => Some(o.eval(row, env)?),
                    None => None,
                };
                for (when, then) in whens {
                    let hit = match &subject {
                        Some(s) => {
                            let w = when.eval(row, env)?;
                            !s.is_null()
                                && !w.is_null()
                                && compare_values(s, &w)? == Ordering::Equal
                        }
                        None => when.eval(row, env)?.is_true(),
                    };
                    if hit {
                        return then.eval(row, env)?.cast_to_result(*ty);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(row, env)?.cast_to_result(*ty)?,
                    None => Value::Null,
                }
            }
            Expr::Cast { expr, ty } => expr.eval(row, env)?.cast(*ty)?,
            Expr::Function { func, args, ty } => eval_function(*func, args, *ty, row, env)?,
            Expr::Subquery {
                rel,
                kind,
                negated,
                ty,
            } => {
                let rows = env.subqueries.run_shared(rel, row, env)?;
                match kind {
                    SubqueryKind::Exists => Value::Bool(rows.is_empty() == *negated),
                    SubqueryKind::Array => Value::Array(
                        rows.iter()
                            .map(|r| r.first().cloned().unwrap_or(Value::Null))
                            .collect(),
                    ),
                    SubqueryKind::Scalar => {
                        match rows.len() {
                            0 => Value::Null,
                            1 => rows[0]
                                .first()
                                .cloned()
                                .unwrap_or(Value::Null)
                                .cast_to_result(*ty)?,
                            _ => return Err(SqlError::new(
                                ErrorKind::CardinalityViolation,
                                "more than one row returned by a subquery used as an expression",
                            )),
                        }
                    }
                }
            }
            Expr::Regex {
                expr,
                pattern,
                negated,
                case_insensitive,
            } => {
                let (v, p) = (expr.eval(row, env)?, pattern.eval(row, env)?);
                if v.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                let re = compile_regex(&text_of(&p), *case_insensitive)?;
                Value::Bool(re.is_match(&text_of(&v)) != *negated)
            }
            Expr::AnyArray {
                expr,
                op,
                array,
                all,
            } => {
                let v = expr.eval(row, env)?;
                let items = match array.eval(row, env)? {
                    Value::Null => return Ok(Value::Null),
                    Value::Array(items) => items,
                    other => {
                        return Err(SqlError::mismatch(format!(
                            "op ANY/ALL (array) requires an array, not {}",
                            other.natural_type()
                        )))
                    }
                };
                // Over no elements ANY is false and ALL true, whatever the left side is.
                if items.is_empty() {
                    return Ok(Value::Bool(*all));
                }
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for item in &items {
                    if item.is_null() {
                        saw_null = true;
                        continue;
                    }
                    let ord = compare_values(&v, item)?;
                    let hit = match op {
                        BinaryOp::Eq => ord == Ordering::Equal,
                        BinaryOp::NotEq => ord != Ordering::Equal,
                        BinaryOp::Lt => ord == Ordering::Less,
                        BinaryOp::LtEq => ord != Ordering::Greater,
                        BinaryOp::Gt => ord == Ordering::Greater,
                        _ => ord != Ordering::Less,
                    };
                    if hit != *all {
                        return Ok(Value::Bool(hit));
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Bool(*all)
                }
            }
            Expr::InSubquery { expr, rel, negated } => {
                let v = expr.eval(row, env)?;
                let rows = env.subqueries.run_shared(rel, row, env)?;
                // No rows: IN is false and NOT IN true, even for a NULL on the left.
                if rows.is_empty() {
                    return Ok(Value::Bool(*negated));
                }
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for r in rows.iter() {
                    match r.first() {
                        Some(Value::Null) | None => saw_null = true,
                        Some(x) if compare_values(&v, x)? == Ordering::Equal => {
                            return Ok(Value::Bool(!negated))
                        }
                        Some(_) => {}
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Bool(*negated)
                }
            }
        })
    }
}

pub(crate) trait CastToResult {
    fn cast_to_result(self, ty: DataType) -> SqlResult<Value>;
}

impl CastToResult for Value {
    fn cast_to_result(self, ty: DataType) -> SqlResult<Value> {
        if ty == DataType::Unknown || self.is_null() {
            Ok(self)
        } else {
            self.cast(ty)
        }
    }
}

fn bool_expected(v: &Value) -> SqlError {
    SqlError::mismatch(format!(
        "argument of NOT must be type boolean, not type {}",
        v.natural_type()
    ))
}

pub(crate) fn int_overflow() -> SqlError {
    SqlError::numeric_out_of_range("bigint out of range")
}

/// A regular expression from SQL (`~`, `regexp_replace`), with a bound on its size.
pub fn compile_regex(pattern: &str, case_insensitive: bool) -> SqlResult<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            SqlError::new(
                ErrorKind::InvalidRegularExpression,
                format!("invalid regular expression: {e}"),
            )
        })
}

/// A value's text, as `::text` writes it for most types.
pub fn text_of(v: &Value) -> String {
    v.to_pg_text(v.natural_type()).unwrap_or_default()
}

/// Compares two non-NULL values, or fails with a type error naming both types.
pub fn compare_values(a: &Value, b: &Value) -> SqlResult<Ordering> {
    a.compare(b).ok_or_else(|| {
        SqlError::new(
            ErrorKind::UndefinedFunction,
            format!(
                "operator does not exist: {} = {}",
                a.natural_type(),
                b.natural_type()
            ),
        )
    })
}

fn eval_binary(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    ty: DataType,
    row: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Value> {
    // AND/OR use three-valued logic and short-circuit.
    if matches!(op, BinaryOp::And | BinaryOp::Or) {
        let l = left.eval(row, env)?;
        let is_and = op == BinaryOp::And;
        if let Value::Bool(b) = l {
            if b != is_and {
                return Ok(Value::Bool(b));
            }
        }
        let r = right.eval(row, env)?;
        return Ok(match (l, r) {
            (Value::Bool(a), Value::Bool(b)) => Value::Bool(if is_and { a && b } else { a || b }),
            (Value::Null, Value::Bool(b)) | (Value::Bool(b), Value::Null) if b != is_and => {
                Value::Bool(b)
            }
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (other, _) => {
                return Err(SqlError::mismatch(format!(
                    "argument of {} must be type boolean, not type {}",
                    op.symbol(),
                    other.natural_type()
                )))
            }
        });
    }
    let l = left.eval(row, env)?;
    let r = right.eval(row, env)?;
    if op == BinaryOp::Concat && ty.element().is_some() {
        return Ok(concat_arrays(l, left.ty() == ty, r, right.ty() == ty));
    }
    if l.is_null() || r.is_null() {
        return Ok(Value::Null);
    }
    if op.is_comparison() {
        let ord = compare_values(&l, &r)?;
        return Ok(Value::Bool(match op {
            BinaryOp::Eq => ord == Ordering::Equal,
            BinaryOp::NotEq => ord != Ordering::Equal,
            BinaryOp::Lt => ord == Ordering::Less,
            BinaryOp::LtEq => ord != Ordering::Greater,
            BinaryOp::Gt => ord == Ordering::Greater,
            _ => ord != Ordering::Less,
        }));
    }
    if op == BinaryOp::Concat {
        // `||` casts a non-text side to text, where a boolean spells itself out (`concat`
        // and the other functions use the output form, `t`).
        let side = |v: &Value| match v {
            Value::Bool(b) => b.to_string(),
            other => text_of(other),
        };
        return Ok(Value::Text(side(&l) + &side(&r)));
    }
    if let (Value::Int(a), Value::Int(b)) = (&l, &r) {
        let (a, b) = (*a, *b);
        let bits = match op {
            BinaryOp::BitAnd => Some(a & b),
            BinaryOp::BitOr => Some(a | b),
            BinaryOp::BitXor => Some(a ^ b),
            // As PostgreSQL: the shift counts modulo the type's width.
            BinaryOp::ShiftLeft | BinaryOp::ShiftRight => {
                let width = match ty {
                    DataType::Int2 => 16,
                    DataType::Int4 => 32,
                    _ => 64,
                };
                let by = (b.rem_euclid(width)) as u32;
                Some(if op == BinaryOp::ShiftLeft {
                    match ty {
                        DataType::Int2 => ((a as i16).wrapping_shl(by)) as i64,
                        DataType::Int4 => ((a as i32).wrapping_shl(by)) as i64,
                        _ => a.wrapping_shl(by),
                    }
                } else {
                    a >> by
                })
            }
            _ => None,
        };
        if let Some(v) = bits {
            return Ok(Value::Int(v));
        }
    }
    let symbol = match op {
        BinaryOp::Add => Some('+'),
        BinaryOp::Sub => Some('-'),
        BinaryOp::Mul => Some('*'),
        BinaryOp::Div => Some('/'),
        _ => None,
    };
    if let Some(symbol) = symbol {
        if let Some(v) = datetime::temporal_arithmetic(symbol, &l, &r)? {
            return Ok(v);
        }
    }
    arithmetic(op, l, r, ty)
}

/// `l || r` where at least one side is an array (`*_is_array`; the other is an element):
/// PostgreSQL's array_cat, array_append and array_prepend. A NULL array adds nothing; a
/// NULL element is still an element.
fn concat_arrays(l: Value, l_is_array: bool, r: Value, r_is_array: bool) -> Value {
    let items = |v: Value, is_array: bool| match (v, is_array) {
        (Value::Array(items), true) => Some(items),
        (Value::Null, true) => None,
        (element, _) => Some(vec![element]),
    };
    match (items(l, l_is_array), items(r, r_is_array)) {
        (Some(mut l), Some(r)) => {
            l.extend(r);
            Value::Array(l)
        }
        (Some(one), None) | (None, Some(one)) => Value::Array(one),
        (None, None) => Value::Null,
    }
}

/// Arithmetic with PostgreSQL's promotion: integers stay integers (checked against the
/// result type's width), anything with NUMERIC is NUMERIC, anything with a float is a float.
pub fn arithmetic(op: BinaryOp, l: Value, r: Value, ty: DataType) -> SqlResult<Value> {
    let l = coerce_numeric_operand(l)?;
    let r = coerce_numeric_operand(r)?;
    Ok(match (l, r) {
        (Value::Int(a), Value::Int(b)) => {
            let v = match op {
                BinaryOp::Add => a.checked_add(b),
                BinaryOp::Sub => a.checked_sub(b),
                BinaryOp::Mul => a.checked_mul(b),
                BinaryOp::Div => {
                    if b == 0 {
                        return Err(SqlError::division_by_zero());
                    }
                    a.checked_div(b)
                }
                BinaryOp::Mod => {
                    if b == 0 {
                        return Err(SqlError::division_by_zero());
                    }
                    a.checked_rem(b)
                }
                _ => None,
            };
            let v = v.ok_or_else(|| {
                SqlError::numeric_out_of_range(format!("{} out of range", ty_or_bigint(ty)))
            })?;
            if ty.is_integer() {
                check_int_range(v, ty).map_err(|_| {
                    SqlError::numeric_out_of_range(format!("{} out of range", ty.pg_name()))
                })?
            } else {
                Value::Int(v)
            }
        }
        (a @ Value::Float(_), b) | (a, b @ Value::Float(_)) => {
            let (x, y) = (float_of(&a), float_of(&b));
            let v = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => {
                    if y == 0.0 {
                        return Err(SqlError::division_by_zero());
                    }
                    x / y
                }
                BinaryOp::Mod => x % y,
                _ => return Err(SqlError::internal("not an arithmetic operator")),
            };
            if v.is_infinite() && x.is_finite() && y.is_finite() {
                return Err(SqlError::numeric_out_of_range(
                    "value out of range: overflow",
                ));
            }
            Value::Float(v)
        }
        (a, b) => {
            let x = numeric_of(&a)?;
            let y = numeric_of(&b)?;
            Value::Numeric(match op {
                BinaryOp::Add => x.add(&y)?,
                BinaryOp::Sub => x.sub(&y)?,
                BinaryOp::Mul => x.mul(&y)?,
                BinaryOp::Div => x.div(&y)?,
                BinaryOp::Mod => x.rem(&y)?,
                _ => return Err(SqlError::internal("not an arithmetic operator")),
            })
        }
    })
}

fn ty_or_bigint(ty: DataType) -> String {
    if ty.is_integer() {
        ty.pg_name()
    } else {
        "bigint".into()
    }
}

fn coerce_numeric_operand(v: Value) -> SqlResult<Value> {
    match v {
        Value::Text(s) => {
            if let Ok(i) = s.trim().parse::<i64>() {
                Ok(Value::Int(i))
            } else {
                Ok(Value::Numeric(Numeric::parse(&s)?))
            }
        }
        Value::Int(_) | Value::Float(_) | Value::Numeric(_) => Ok(v),
        other => Err(SqlError::new(
            ErrorKind::UndefinedFunction,
            format!("operator does not exist for type {}", other.natural_type()),
        )),
    }
}

pub(crate) fn float_of(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Numeric(n) => n.to_f64(),
        _ => f64::NAN,
    }
}

fn numeric_of(v: &Value) -> SqlResult<Numeric> {
    match v {
        Value::Int(i) => Ok(Numeric::from_i64(*i)),
        Value::Numeric(n) => Ok(*n),
        Value::Float(f) => Numeric::from_f64(*f),
        other => Err(SqlError::mismatch(format!(
            "{} is not a number",
            other.natural_type()
        ))),
    }
}

/// SQL LIKE with `%` and `_` and backslash escapes.
pub fn like(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    fn go(t: &[char], p: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('%') => (0..=t.len()).any(|i| go(&t[i..], &p[1..])),
            Some('_') => !t.is_empty() && go(&t[1..], &p[1..]),
            Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&t[1..], &p[2..]),
            Some(c) => t.first() == Some(c) && go(&t[1..], &p[1..]),
        }
    }
    go(&t, &p)
}

/// The type a name written in SQL denotes (`int4`, `character varying(20)`, `text[]`), if any.
pub fn type_of_name(name: &str) -> Option<DataType> {
    let name = name.trim();
    let (base, args) = match name.split_once('(') {
        Some((base, rest)) => {
            let (args, tail) = rest.split_once(')')?;
            let args = args
                .split(',')
                .map(|a| a.trim().parse::<u32>().ok())
                .collect::<Option<Vec<u32>>>()?;
            (format!("{}{}", base.trim_end(), tail.trim()), args)
        }
        None => (name.to_string(), Vec::new()),
    };
    let base = base.trim_start_matches("pg_catalog.").trim_matches('"');
    DataType::from_sql_name(base, &args)
        .ok()
        .filter(|t| *t != DataType::Unknown)
}

pub fn undefined_type(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedObject,
        format!("type \"{name}\" does not exist"),
    )
}

/// The result type of arithmetic between two types.
pub fn arithmetic_type(l: DataType, r: DataType) -> DataType {
    use DataType::*;
    let rank = |t: DataType| match t {
        Int2 => 1,
        Int4 | Oid => 2,
        Int8 => 3,
        Numeric { .. } => 4,
        Float4 | Float8 => 5,
        _ => 0,
    };
    match rank(l).max(rank(r)) {
        1 => Int2,
        2 => Int4,
        3 => Int8,
        4 => DataType::UNCONSTRAINED_NUMERIC,
        5 => Float8,
        _ => DataType::UNCONSTRAINED_NUMERIC,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> EvalEnv<'static> {
        EvalEnv::without_subqueries(&[], 0)
    }

    #[test]
    fn three_valued_logic() {
        let t = Expr::literal(Value::Bool(true));
        let f = Expr::literal(Value::Bool(false));
        let n = Expr::Literal(Value::Null, DataType::Bool);
        let and = |a: &Expr, b: &Expr| Expr::Binary {
            op: BinaryOp::And,
            left: Box::new(a.clone()),
            right: Box::new(b.clone()),
            ty: DataType::Bool,
        };
        assert!(matches!(
            and(&n, &f).eval(&[], &env()).unwrap(),
            Value::Bool(false)
        ));
        assert!(matches!(
            and(&n, &t).eval(&[], &env()).unwrap(),
            Value::Null
        ));
    }

    #[test]
    fn integer_overflow_is_an_error() {
        let e = Expr::Binary {
            op: BinaryOp::Add,
            left: Box::new(Expr::Literal(Value::Int(i32::MAX as i64), DataType::Int4)),
            right: Box::new(Expr::Literal(Value::Int(1), DataType::Int4)),
            ty: DataType::Int4,
        };
        assert_eq!(e.eval(&[], &env()).unwrap_err().sqlstate(), "22003");
    }

    #[test]
    fn constant_arithmetic_folds_unless_it_fails() {
        let int = |i| Expr::Literal(Value::Int(i), DataType::Int8);
        let binary = |op, l: Expr, r: Expr| Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty: DataType::Int8,
        };
        let sum = binary(BinaryOp::Add, int(2), Expr::Negate(Box::new(int(5))));
        assert!(matches!(
            sum.folded(),
            Expr::Literal(Value::Int(-3), DataType::Int8)
        ));
        let failing = binary(BinaryOp::Div, int(1), int(0));
        assert!(
            matches!(failing.folded(), Expr::Binary { .. }),
            "1/0 fails when applied"
        );
        let with_param = binary(BinaryOp::Add, int(1), Expr::Param(0, DataType::Int8));
        assert!(matches!(with_param.folded(), Expr::Binary { .. }));
    }

    #[test]
    fn like_patterns() {
        assert!(like("pgbench_accounts", "pgbench%"));
        assert!(like("abc", "a_c"));
        assert!(!like("abc", "a_"));
        assert!(like("a%c", "a\\%c"));
    }
}
