//! Binding JSON: the operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, `?|`, `?&`,
//! `#-`, and `||`/`-` on jsonb), the functions (`to_jsonb`, `jsonb_build_object`,
//! `jsonb_set`, ...), the aggregates (`jsonb_agg`, `json_object_agg`, ... as `array_agg`
//! of their elements and a finishing step) and the set-returning functions in FROM
//! (`jsonb_array_elements`, `jsonb_each`, ... as an unnest of the element list).
//! Evaluation is `json_functions`'.

use plan::{json_functions::JsonFunc, Expr, Func, Rel};
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::bind::Binder;
use crate::bind_from::function_column;
use crate::bind_query::FromItem;
use crate::scope::{Scope, ScopeColumn};

fn json(func: JsonFunc, args: Vec<Expr>, ty: DataType) -> Expr {
    Expr::Function {
        func: Func::Json(func),
        args,
        ty,
    }
}

pub(crate) fn undefined_function(name: &str, args: &[&Expr]) -> SqlError {
    let types: Vec<String> = args.iter().map(|a| a.ty().pg_name()).collect();
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("function {name}({}) does not exist", types.join(", ")),
    )
}

pub(crate) fn undefined_operator(l: DataType, op: &str, r: DataType) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!(
            "operator does not exist: {} {op} {}",
            l.pg_name(),
            r.pg_name()
        ),
    )
}

/// The aggregates built on `array_agg`.
#[derive(Clone, Copy)]
pub(crate) enum JsonAggregate {
    JsonbArray,
    JsonArray,
    JsonbObject,
    JsonObject,
}

impl JsonAggregate {
    pub(crate) const NAMES: [&'static str; 4] = [
        "jsonb_agg",
        "json_agg",
        "jsonb_object_agg",
        "json_object_agg",
    ];

    pub(crate) fn of(name: &str) -> Option<JsonAggregate> {
        Some(match name {
            "jsonb_agg" => JsonAggregate::JsonbArray,
            "json_agg" => JsonAggregate::JsonArray,
            "jsonb_object_agg" => JsonAggregate::JsonbObject,
            "json_object_agg" => JsonAggregate::JsonObject,
            _ => return None,
        })
    }

    pub(crate) fn result(self) -> DataType {
        match self {
            JsonAggregate::JsonbArray | JsonAggregate::JsonbObject => DataType::Jsonb,
            _ => DataType::Json,
        }
    }

    /// What `array_agg` collects: each row's value (or key and value) as JSON.
    pub(crate) fn element(self, binder: &mut Binder, mut args: Vec<Expr>) -> SqlResult<Expr> {
        let name = Self::NAMES[self as usize];
        let wanted = match self {
            JsonAggregate::JsonbArray | JsonAggregate::JsonArray => 1,
            _ => 2,
        };
        if args.len() != wanted {
            return Err(undefined_function(name, &args.iter().collect::<Vec<_>>()));
        }
        let value = binder.embedded(args.pop().expect("an argument"))?;
        Ok(match self {
            JsonAggregate::JsonbArray => json(JsonFunc::Element, vec![value], DataType::Jsonb),
            JsonAggregate::JsonArray => json(JsonFunc::Element, vec![value], DataType::Json),
            JsonAggregate::JsonbObject | JsonAggregate::JsonObject => {
                let key = binder.as_text(args.pop().expect("a key"))?;
                match self {
                    JsonAggregate::JsonbObject => {
                        json(JsonFunc::BuildArray, vec![key, value], DataType::Jsonb)
                    }
                    _ => json(JsonFunc::JsonPair, vec![key, value], DataType::Json),
                }
            }
        })
    }

    /// Whether `element` (what `element` made) holds a row or an array: `json_agg` puts a
    /// line break before each such element after the first, as PostgreSQL does.
    pub(crate) fn structured(element: &Expr) -> bool {
        match element {
            Expr::Function { args, .. } => args.first().is_some_and(|value| {
                value.ty().element().is_some()
                    || matches!(
                        value,
                        Expr::Function {
                            func: Func::Json(JsonFunc::RowObject),
                            ..
                        }
                    )
            }),
            _ => false,
        }
    }

    /// The aggregate's value from the array `array_agg` gave (`structured`: see above).
    pub(crate) fn finish(self, array: Expr, structured: bool) -> Expr {
        match self {
            JsonAggregate::JsonbArray | JsonAggregate::JsonArray => {
                let structured = Expr::literal(sql::Value::Bool(structured));
                json(JsonFunc::ArrayOf, vec![array, structured], self.result())
            }
            _ => json(JsonFunc::ObjectOf, vec![array], self.result()),
        }
    }
}

impl Binder<'_> {
    /// `t` naming a relation in FROM (a whole-row reference, as in `row_to_json(t)` or
    /// `json_agg(t)`) as an object of its columns, `json` (written compactly, as
    /// PostgreSQL writes a row) or `jsonb`; None when `e` is not one (a column of that name
    /// wins).
    pub(crate) fn whole_row(&self, e: &ast::Expr, scope: &Scope, ty: DataType) -> Option<Expr> {
        let ast::Expr::Identifier(i) = e else {
            return None;
        };
        let name = sql::ident(i);
        if scope.resolve(None, &name).is_ok() {
            return None;
        }
        let of = |range: std::ops::Range<usize>| -> Vec<usize> {
            range
                .filter(|&n| {
                    let c = &scope.columns[n];
                    c.qualifier.as_deref() == Some(name.as_str()) && !c.name.starts_with('\0')
                })
                .collect()
        };
        let mut columns = of(scope.outer_len..scope.columns.len());
        if columns.is_empty() {
            columns = of(0..scope.outer_len);
        }
        if columns.is_empty() {
            return None;
        }
        let mut args = Vec::with_capacity(columns.len() * 2);
        for n in columns {
            let c = &scope.columns[n];
            args.push(Expr::literal(sql::Value::Text(c.name.clone())));
            args.push(Expr::Column(n, c.ty));
        }
        Some(json(JsonFunc::RowObject, args, ty))
    }

    /// A value put into JSON: an untyped literal is text (a `json` one goes in as JSON,
    /// by its type).
    fn embedded(&mut self, e: Expr) -> SqlResult<Expr> {
        self.coerce(e, DataType::Text)
    }

    fn as_text(&mut self, e: Expr) -> SqlResult<Expr> {
        Ok(match e.ty() {
            t if t.is_text_family() => self.coerce(e, DataType::Text)?,
            _ => Expr::Cast {
                expr: Box::new(e),
                ty: DataType::Text,
            },
        })
    }

    /// An operand that must be `json` or `jsonb`: `jsonb` only when `jsonb_only`; an
    /// untyped one is `untyped`.
    fn document(&mut self, e: Expr, jsonb_only: bool, untyped: DataType) -> Option<Expr> {
        let e = self.coerce(e, untyped).ok()?;
        match e.ty() {
            DataType::Jsonb => Some(e),
            DataType::Json if !jsonb_only => Some(e),
            _ => None,
        }
    }

    /// The argument of a `json_*` (`own`: json) or `jsonb_*` function: of exactly that
    /// type, or untyped.
    fn own_document(&mut self, e: Expr, own: DataType) -> Option<Expr> {
        self.document(e, own == DataType::Jsonb, own)
            .filter(|d| d.ty() == own)
    }

    /// A JSON operator over `left` and `right`; None when `op` is not one.
    pub(crate) fn json_operator(
        &mut self,
        op: &ast::BinaryOperator,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope,
    ) -> SqlResult<Option<Expr>> {
        use ast::BinaryOperator as B;
        let symbol = op.to_string();
        let (func, jsonb_only, right_type) = match op {
            B::Arrow => (JsonFunc::Get, false, None),
            B::LongArrow => (JsonFunc::GetText, false, None),
            B::HashArrow => (JsonFunc::GetPath, false, Some(DataType::TextArray)),
            B::HashLongArrow => (JsonFunc::GetPathText, false, Some(DataType::TextArray)),
            B::AtArrow | B::ArrowAt => (JsonFunc::Contains, true, Some(DataType::Jsonb)),
            B::Question => (JsonFunc::HasKey, true, Some(DataType::Text)),
            B::QuestionPipe => (JsonFunc::HasAnyKey, true, Some(DataType::TextArray)),
            B::QuestionAnd => (JsonFunc::HasAllKeys, true, Some(DataType::TextArray)),
            B::HashMinus => (JsonFunc::DeletePath, true, Some(DataType::TextArray)),
            _ => return Ok(None),
        };
        let l = self.expr(left, scope, None)?;
        let r = self.expr(right, scope, None)?;
        let (l, r) = match func {
            JsonFunc::Contains => match self.array_containment(l, r, matches!(op, B::ArrowAt))? {
                Ok(arrays) => return Ok(Some(arrays)),
                Err(sides) => sides,
            },
            _ => (l, r),
        };
        let (lt, rt) = (l.ty(), r.ty());
        let Some(l) = self.document(l, jsonb_only, DataType::Jsonb) else {
            return Err(undefined_operator(lt, &symbol, rt));
        };
        let r = match right_type {
            Some(want) => Some(self.coerce(r, want)?)
                .filter(|r| r.ty() == want || (want == DataType::Text && r.ty().is_text_family())),
            None => self.key_or_index(r)?,
        };
        let Some(r) = r else {
            return Err(undefined_operator(lt, &symbol, rt));
        };
        let ty = match func {
            JsonFunc::Get | JsonFunc::GetPath => l.ty(),
            JsonFunc::GetText | JsonFunc::GetPathText => DataType::Text,
            JsonFunc::DeletePath => DataType::Jsonb,
            _ => DataType::Bool,
        };
        let args = if matches!(op, B::ArrowAt) {
            vec![r, l]
        } else {
            vec![l, r]
        };
        Ok(Some(json(func, args, ty)))
    }

    /// `doc[index]` of a jsonb value: `doc -> index` (a key, or an integer index).
    pub(crate) fn jsonb_subscript(
        &mut self,
        doc: Expr,
        index: &ast::Expr,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let index = self.expr(index, scope, None)?;
        let ty = index.ty();
        let Some(index) = self.key_or_index(index)? else {
            return Err(SqlError::new(
                ErrorKind::DatatypeMismatch,
                format!("subscript type {} is not supported", ty.pg_name()),
            ));
        };
        Ok(json(JsonFunc::Get, vec![doc, index], DataType::Jsonb))
    }

    /// What `->` and a subscript take: an integer (an index) or text (a key; an untyped
    /// literal is one); None for anything else.
    fn key_or_index(&mut self, e: Expr) -> SqlResult<Option<Expr>> {
        if e.ty().is_integer() {
            return Ok(Some(e));
        }
        let e = self.coerce(e, DataType::Text)?;
        Ok(e.ty().is_text_family().then_some(e))
    }

    /// `jsonb || jsonb`; None when neither side is jsonb (or the other side is text, which
    /// PostgreSQL concatenates as text).
    pub(crate) fn jsonb_concat(
        &mut self,
        l: Expr,
        r: Expr,
    ) -> SqlResult<Result<Expr, (Expr, Expr)>> {
        if l.ty() != DataType::Jsonb && r.ty() != DataType::Jsonb {
            return Ok(Err((l, r)));
        }
        let l = self.coerce(l, DataType::Jsonb)?;
        let r = self.coerce(r, DataType::Jsonb)?;
        if l.ty() != DataType::Jsonb || r.ty() != DataType::Jsonb {
            return Ok(Err((l, r)));
        }
        Ok(Ok(json(JsonFunc::Concat, vec![l, r], DataType::Jsonb)))
    }

    /// `jsonb - text | integer | text[]`.
    pub(crate) fn jsonb_delete(&mut self, l: Expr, r: Expr) -> SqlResult<Expr> {
        let r = self.coerce(r, DataType::Text)?;
        let rt = r.ty();
        if !(rt.is_integer() || rt.is_text_family() || rt == DataType::TextArray) {
            return Err(undefined_operator(l.ty(), "-", rt));
        }
        Ok(json(JsonFunc::Delete, vec![l, r], DataType::Jsonb))
    }

    /// A JSON function call; None when `name` is not one.
    pub(crate) fn json_call(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope,
    ) -> Option<SqlResult<Expr>> {
        let known = [
            "to_jsonb",
            "to_json",
            "jsonb_build_object",
            "json_build_object",
            "jsonb_build_array",
            "json_build_array",
            "jsonb_typeof",
            "json_typeof",
            "jsonb_array_length",
            "json_array_length",
            "jsonb_extract_path",
            "json_extract_path",
            "jsonb_extract_path_text",
            "json_extract_path_text",
            "jsonb_set",
            "jsonb_strip_nulls",
            "json_strip_nulls",
            "jsonb_pretty",
            "row_to_json",
        ];
        if !known.contains(&name) {
            return None;
        }
        Some(self.json_call_inner(name, args, scope))
    }

    fn json_call_inner(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let is_jsonb = name.starts_with("jsonb") || name == "to_jsonb";
        let own = if is_jsonb {
            DataType::Jsonb
        } else {
            DataType::Json
        };
        if let ("to_json" | "to_jsonb" | "row_to_json", [arg]) = (name, args) {
            if let Some(row) = self.whole_row(arg, scope, own) {
                return Ok(row);
            }
        }
        let mut bound = Vec::with_capacity(args.len());
        for a in args {
            bound.push(self.expr(a, scope, None)?);
        }
        let wrong = |bound: &[Expr]| undefined_function(name, &bound.iter().collect::<Vec<_>>());
        match name {
            "to_jsonb" | "to_json" => {
                let [e] = <[Expr; 1]>::try_from(bound).map_err(|b| wrong(&b))?;
                let e = self.embedded(e)?;
                Ok(match (e.ty(), own) {
                    (t, _) if t == own => e,
                    (_, DataType::Jsonb) => json(JsonFunc::ToJsonb, vec![e], own),
                    _ => json(JsonFunc::ToJson, vec![e], own),
                })
            }
            "jsonb_build_object" | "json_build_object" => {
                if bound.len() % 2 != 0 {
                    return Err(SqlError::new(
                        ErrorKind::InvalidParameterValue,
                        "argument list must have even number of elements",
                    ));
                }
                let mut args = Vec::with_capacity(bound.len());
                for (n, e) in bound.into_iter().enumerate() {
                    args.push(if n % 2 == 0 {
                        self.as_text(e)?
                    } else {
                        self.embedded(e)?
                    });
                }
                Ok(json(JsonFunc::BuildObject, args, own))
            }
            "jsonb_build_array" | "json_build_array" => {
                let mut args = Vec::with_capacity(bound.len());
                for e in bound {
                    args.push(self.embedded(e)?);
                }
                Ok(json(JsonFunc::BuildArray, args, own))
            }
            _ => {
                let Some(first) = bound.first().cloned() else {
                    return Err(wrong(&bound));
                };
                let Some(doc) = self.own_document(first, own) else {
                    return Err(wrong(&bound));
                };
                let rest = bound.split_off(1);
                let (func, ty, rest) = match (name, rest.len()) {
                    ("jsonb_typeof" | "json_typeof", 0) => (JsonFunc::TypeOf, DataType::Text, rest),
                    ("jsonb_array_length" | "json_array_length", 0) => {
                        (JsonFunc::ArrayLength, DataType::Int4, rest)
                    }
                    ("jsonb_strip_nulls" | "json_strip_nulls", 0) => {
                        (JsonFunc::StripNulls, own, rest)
                    }
                    ("jsonb_pretty", 0) => (JsonFunc::Pretty, DataType::Text, rest),
                    ("jsonb_extract_path" | "json_extract_path", _) => {
                        (JsonFunc::GetPath, own, vec![self.text_array(rest)?])
                    }
                    ("jsonb_extract_path_text" | "json_extract_path_text", _) => (
                        JsonFunc::GetPathText,
                        DataType::Text,
                        vec![self.text_array(rest)?],
                    ),
                    ("jsonb_set", 2 | 3) => {
                        let mut it = rest.into_iter();
                        let path = self.coerce(it.next().expect("a path"), DataType::TextArray)?;
                        let value = self.coerce(it.next().expect("a value"), DataType::Jsonb)?;
                        let mut args = vec![path, value];
                        if let Some(create) = it.next() {
                            args.push(self.coerce(create, DataType::Bool)?);
                        }
                        if args[0].ty() != DataType::TextArray
                            || args[1].ty() != DataType::Jsonb
                            || args.get(2).is_some_and(|c| c.ty() != DataType::Bool)
                        {
                            let mut all = vec![doc];
                            all.extend(args);
                            return Err(wrong(&all));
                        }
                        (JsonFunc::Set, own, args)
                    }
                    _ => {
                        let mut all = vec![doc];
                        all.extend(rest);
                        return Err(wrong(&all));
                    }
                };
                let mut args = vec![doc];
                args.extend(rest);
                Ok(json(func, args, ty))
            }
        }
    }

    /// Variadic text arguments as one `text[]`.
    fn text_array(&mut self, items: Vec<Expr>) -> SqlResult<Expr> {
        let mut args = Vec::with_capacity(items.len());
        for e in items {
            args.push(self.as_text(e)?);
        }
        Ok(Expr::Function {
            func: Func::MakeArray,
            args,
            ty: DataType::TextArray,
        })
    }

    /// The one-column JSON set-returning functions (`jsonb_array_elements[_text]`,
    /// `jsonb_object_keys`, the json ones) as the array of the rows they give, for the
    /// select list; None when `function` is not one.
    pub(crate) fn json_set_array(
        &mut self,
        function: &str,
        arg: &ast::Expr,
        scope: &Scope,
    ) -> Option<SqlResult<Expr>> {
        let (is_jsonb, rest) = json_set_function(function)?;
        if !single_column(rest) {
            return None;
        }
        Some((|| {
            let (doc, own) = self.json_set_argument(function, is_jsonb, arg, scope)?;
            let (func, ty) = match rest {
                "array_elements" => (JsonFunc::Elements, own.array_of().expect("an array type")),
                "array_elements_text" => (JsonFunc::ElementsText, DataType::TextArray),
                _ => (JsonFunc::Keys, DataType::TextArray),
            };
            Ok(json(func, vec![doc], ty))
        })())
    }

    /// The document a JSON set-returning function reads, and its type.
    fn json_set_argument(
        &mut self,
        function: &str,
        is_jsonb: bool,
        arg: &ast::Expr,
        scope: &Scope,
    ) -> SqlResult<(Expr, DataType)> {
        let own = if is_jsonb {
            DataType::Jsonb
        } else {
            DataType::Json
        };
        let bound = self.expr(arg, scope, None)?;
        match self.own_document(bound.clone(), own) {
            Some(doc) => Ok((doc, own)),
            None => Err(undefined_function(function, &[&bound])),
        }
    }

    /// A JSON set-returning function in FROM; None when `function` is not one.
    pub(crate) fn json_table_function(
        &mut self,
        function: &str,
        args: &[ast::FunctionArg],
        alias: &Option<ast::TableAlias>,
        scope: &Scope,
    ) -> Option<SqlResult<FromItem>> {
        let (is_jsonb, rest) = json_set_function(function)?;
        Some((|| {
            let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] = args else {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!("function {function} takes one argument"),
                ));
            };
            if let Some(array) = self.json_set_array(function, e, scope) {
                let array = array?;
                let element = array.ty().element().expect("an array type");
                let cols = if rest == "object_keys" {
                    function_column(alias, function, element)
                } else {
                    named_columns(alias, function, &[("value", element)])
                };
                return Ok((Rel::Unnest { array }, cols, false, false));
            }
            let (doc, own) = self.json_set_argument(function, is_jsonb, e, scope)?;
            if rest.starts_with("to_record") {
                return json_records(rest == "to_recordset", doc, own, alias, scope);
            }
            // jsonb_each[_text]: the members unnested as [key, value] pairs, once.
            let members = json(
                JsonFunc::Members,
                vec![doc],
                own.array_of().expect("json types have arrays"),
            );
            let pair = Expr::Column(scope.outer_len, own);
            let at = |i: i64| Expr::literal(sql::Value::Int(i));
            let key = json(JsonFunc::GetText, vec![pair.clone(), at(0)], DataType::Text);
            let value = if rest == "each" {
                json(JsonFunc::Get, vec![pair, at(1)], own)
            } else {
                json(JsonFunc::GetText, vec![pair, at(1)], DataType::Text)
            };
            let value_type = value.ty();
            let rel = Rel::Project {
                input: Box::new(Rel::Unnest { array: members }),
                exprs: vec![key, value],
            };
            let cols = named_columns(
                alias,
                function,
                &[("key", DataType::Text), ("value", value_type)],
            );
            Ok((rel, cols, false, false))
        })())
    }
}

/// The columns of a function with named output columns: the alias names the relation
/// and may rename the columns in order.
fn named_columns(
    alias: &Option<ast::TableAlias>,
    function: &str,
    columns: &[(&str, DataType)],
) -> Vec<ScopeColumn> {
    let qualifier = alias
        .as_ref()
        .map(|a| sql::ident(&a.name))
        .unwrap_or_else(|| function.into());
    columns
        .iter()
        .enumerate()
        .map(|(n, (name, ty))| ScopeColumn {
            qualifier: Some(qualifier.clone()),
            name: alias
                .as_ref()
                .and_then(|a| a.columns.get(n).map(|c| sql::ident(&c.name)))
                .unwrap_or_else(|| (*name).into()),
            ty: *ty,
            table_oid: 0,
            column_number: 0,
        })
        .collect()
}

/// (whether jsonb, the name after the prefix) of a JSON set-returning function.
pub(crate) fn json_set_function(function: &str) -> Option<(bool, &str)> {
    let (is_jsonb, rest) = match function.strip_prefix("jsonb_") {
        Some(rest) => (true, rest),
        None => (false, function.strip_prefix("json_")?),
    };
    matches!(
        rest,
        "array_elements"
            | "array_elements_text"
            | "object_keys"
            | "each"
            | "each_text"
            | "to_record"
            | "to_recordset"
    )
    .then_some((is_jsonb, rest))
}

/// Whether the JSON set-returning function named `rest` (after its prefix) gives one
/// column (so it may stand in a select list).
pub(crate) fn single_column(rest: &str) -> bool {
    matches!(
        rest,
        "array_elements" | "array_elements_text" | "object_keys"
    )
}

/// `json[b]_to_record[set](doc) AS x(column type, ...)`: a row per object (one object, or
/// an array of them), each column the object's member of that name (NULL when missing)
/// converted to the column's type: a json or jsonb column takes the member as JSON, other
/// types its text (a string's contents).
fn json_records(
    set: bool,
    doc: Expr,
    own: DataType,
    alias: &Option<ast::TableAlias>,
    scope: &Scope,
) -> SqlResult<FromItem> {
    let definition = alias
        .as_ref()
        .filter(|a| !a.columns.is_empty() && a.columns.iter().all(|c| c.data_type.is_some()));
    let Some(alias) = definition else {
        return Err(SqlError::syntax(
            "a column definition list is required for functions returning \"record\"",
        ));
    };
    let own_array = own.array_of().expect("json types have arrays");
    let func = if set {
        JsonFunc::Records
    } else {
        JsonFunc::Record
    };
    // The objects are unnested (computed once), then each becomes a row.
    let objects = json(func, vec![doc], own_array);
    let object = Expr::Column(scope.outer_len, own);
    let mut exprs = Vec::with_capacity(alias.columns.len());
    let mut cols = Vec::with_capacity(alias.columns.len());
    for c in &alias.columns {
        let name = sql::ident(&c.name);
        let ty = crate::bind_expr::data_type_of(c.data_type.as_ref().expect("checked above"))?;
        let key = Expr::literal(sql::Value::Text(name.clone()));
        let member = if matches!(ty, DataType::Json | DataType::Jsonb) {
            json(JsonFunc::Get, vec![object.clone(), key], own)
        } else {
            json(JsonFunc::GetText, vec![object.clone(), key], DataType::Text)
        };
        exprs.push(if member.ty() == ty {
            member
        } else {
            Expr::Cast {
                expr: Box::new(member),
                ty,
            }
        });
        cols.push(ScopeColumn {
            qualifier: Some(sql::ident(&alias.name)),
            name,
            ty,
            table_oid: 0,
            column_number: 0,
        });
    }
    let rel = Rel::Project {
        input: Box::new(Rel::Unnest { array: objects }),
        exprs,
    };
    Ok((rel, cols, false, false))
}
