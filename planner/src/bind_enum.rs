//! Binding of the enum type statements (CREATE TYPE ... AS ENUM, ALTER TYPE, DROP TYPE)
//! and of enum-typed names: what `plan::EnumDef` is, and how its values are checked and
//! ordered, is said in `plan/src/enum_type.rs`.

use plan::*;
use sql::{ast, DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::*;
use crate::bind_expr::data_type_of;
use crate::scope::Scope;

fn label_of(ident: &ast::Ident) -> SqlResult<String> {
    let label = ident.value.clone();
    if label.is_empty() || label.len() > MAX_LABEL_BYTES {
        return Err(SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!("invalid enum label \"{label}\""),
        )
        .with_detail("Labels must be 63 bytes or less."));
    }
    Ok(label)
}

impl Binder<'_> {
    /// A column's or cast's type: a built-in type, or an enum type of the catalog.
    pub(crate) fn resolve_type(&self, t: &ast::DataType) -> SqlResult<DataType> {
        let builtin = data_type_of(t);
        if builtin.is_ok() {
            return builtin;
        }
        match t {
            ast::DataType::Custom(name, modifiers) if modifiers.is_empty() => {
                let (_, name) = object_name(name)?;
                match self.catalog.enums.get(&name) {
                    Some(def) => Ok(def.data_type()),
                    None => builtin,
                }
            }
            ast::DataType::Array(
                ast::ArrayElemTypeDef::SquareBracket(element, _)
                | ast::ArrayElemTypeDef::Qualified(element, _),
            ) if self
                .resolve_type(element)
                .is_ok_and(|t| self.catalog.enum_of(t).is_some()) =>
            {
                Err(SqlError::feature_not_supported("arrays of enum types"))
            }
            _ => builtin,
        }
    }

    /// A constant becoming a value of `ty`: checked now when `ty` is an enum type.
    pub(crate) fn enum_constant(&self, value: Value, ty: DataType) -> SqlResult<Value> {
        match (self.catalog.enum_of(ty), value) {
            (Some(def), Value::Text(label)) => def.value(label),
            (_, value) => Ok(value),
        }
    }

    /// An expression of text becoming a value of enum type `ty`, checked when evaluated.
    pub(crate) fn enum_checked(&self, e: Expr, ty: DataType) -> Expr {
        match self.catalog.enum_of(ty) {
            Some(def) => Expr::Function {
                func: Func::EnumIn,
                args: vec![e, def.labels_literal()],
                ty,
            },
            None => e,
        }
    }

    /// `inner::ty` where either is an enum type: text (a constant checked now) to an enum,
    /// an enum to text; 42846 otherwise.
    pub(crate) fn enum_cast(&mut self, inner: Expr, ty: DataType) -> SqlResult<Expr> {
        let from = inner.ty();
        if from == ty {
            return Ok(inner);
        }
        if matches!(ty, DataType::Enum(_)) && from.is_text_family() {
            return Ok(match inner {
                Expr::Literal(v, _) => Expr::Literal(self.enum_constant(v.cast(ty)?, ty)?, ty),
                unknown @ Expr::Param(_, DataType::Unknown) => self.coerce(unknown, ty)?,
                text => self.enum_checked(text, ty),
            });
        }
        if matches!(from, DataType::Enum(_)) && ty.is_text_family() {
            return Ok(Expr::Cast {
                expr: Box::new(inner),
                ty,
            });
        }
        Err(SqlError::new(
            ErrorKind::CannotCoerce,
            format!("cannot cast type {} to {}", from.pg_name(), ty.pg_name()),
        ))
    }

    /// The catalog's enum types for `format_type`, which names types by OID when evaluated:
    /// their OIDs and names, as two arrays (none when there are no enum types).
    pub(crate) fn enum_names(&self) -> Vec<Expr> {
        if self.catalog.enums.is_empty() {
            return Vec::new();
        }
        let (oids, names) = self
            .catalog
            .enums
            .values()
            .map(|e| {
                (
                    Value::Int(e.oid() as i64),
                    Value::Text(e.data_type().pg_name()),
                )
            })
            .unzip();
        vec![
            Expr::Literal(Value::Array(oids), DataType::Int8Array),
            Expr::Literal(Value::Array(names), DataType::TextArray),
        ]
    }

    /// What orders `e`: itself, or for an enum its label's position in its type.
    pub(crate) fn ordered(&self, e: Expr) -> Expr {
        match self.catalog.enum_of(e.ty()) {
            Some(def) => {
                let labels = def.labels_literal();
                Expr::Function {
                    func: Func::EnumPosition,
                    args: vec![e, labels],
                    ty: DataType::Int4,
                }
            }
            None => e,
        }
    }

    /// The label of enum type `ty` at `position` (what `ordered` made of a value).
    pub(crate) fn enum_at(&self, position: Expr, ty: DataType) -> Expr {
        let Some(def) = self.catalog.enum_of(ty) else {
            return position;
        };
        let one = Expr::Literal(Value::Int(1), DataType::Int4);
        Expr::Function {
            func: Func::ArraySubscript,
            args: vec![
                def.labels_literal(),
                Expr::Binary {
                    op: plan::BinaryOp::Add,
                    left: Box::new(position),
                    right: Box::new(one),
                    ty: DataType::Int4,
                },
            ],
            ty,
        }
    }

    /// `enum_first`, `enum_last`, `enum_range` of an enum-typed argument (its value is
    /// not read, only its type), as constants.
    pub(crate) fn enum_call(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope,
    ) -> Option<SqlResult<Expr>> {
        if !matches!(name, "enum_first" | "enum_last" | "enum_range") {
            return None;
        }
        let ty = match args {
            [arg] => match self.expr(arg, scope, None) {
                Ok(e) => e.ty(),
                Err(e) => return Some(Err(e)),
            },
            _ => DataType::Unknown,
        };
        let Some(def) = self.catalog.enum_of(ty) else {
            return Some(Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!("function {name}({}) does not exist", ty.pg_name()),
            )));
        };
        let label = |l: Option<&String>| match l {
            Some(l) => Expr::Literal(Value::text(l), ty),
            None => Expr::Literal(Value::Null, ty),
        };
        Some(Ok(match name {
            "enum_first" => label(def.labels.first()),
            "enum_last" => label(def.labels.last()),
            _ => def.labels_literal(),
        }))
    }

    pub(crate) fn create_type(
        &self,
        name: &ast::ObjectName,
        representation: Option<&ast::UserDefinedTypeRepresentation>,
    ) -> SqlResult<Plan> {
        let Some(ast::UserDefinedTypeRepresentation::Enum { labels }) = representation else {
            return Err(SqlError::feature_not_supported(
                "CREATE TYPE other than AS ENUM",
            ));
        };
        let name = public_name(name)?;
        let mut def = EnumDef {
            id: 0,
            name,
            labels: Vec::with_capacity(labels.len()),
        };
        for label in labels {
            let label = label_of(label)?;
            if def.has_label(&label) {
                return Err(SqlError::new(
                    ErrorKind::UniqueViolation,
                    "duplicate key value violates unique constraint \"pg_enum_typid_label_index\"",
                )
                .with_detail(format!(
                    "Key (enumtypid, enumlabel)=({}, {label}) already exists.",
                    def.name
                )));
            }
            def.labels.push(label);
        }
        Ok(Plan::Ddl(DdlPlan::CreateEnum { def }))
    }

    pub(crate) fn alter_type(&self, alter: &ast::AlterType) -> SqlResult<Plan> {
        let name = public_name(&alter.name)?;
        let old = self
            .catalog
            .enums
            .get(&name)
            .ok_or_else(|| undefined_type(&name))?;
        let mut new = EnumDef::clone(old);
        match &alter.operation {
            ast::AlterTypeOperation::AddValue(add) => {
                let label = label_of(&add.value)?;
                if new.has_label(&label) {
                    if add.if_not_exists {
                        return Ok(Plan::NoOp("ALTER TYPE"));
                    }
                    return Err(SqlError::new(
                        ErrorKind::DuplicateObject,
                        format!("enum label \"{label}\" already exists"),
                    ));
                }
                let at = match &add.position {
                    None => new.labels.len(),
                    Some(
                        ast::AlterTypeAddValuePosition::Before(neighbor)
                        | ast::AlterTypeAddValuePosition::After(neighbor),
                    ) => {
                        let at = new
                            .labels
                            .iter()
                            .position(|l| *l == neighbor.value)
                            .ok_or_else(|| {
                                SqlError::new(
                                    ErrorKind::InvalidParameterValue,
                                    format!("\"{}\" is not an existing enum label", neighbor.value),
                                )
                            })?;
                        match add.position {
                            Some(ast::AlterTypeAddValuePosition::After(_)) => at + 1,
                            _ => at,
                        }
                    }
                };
                new.labels.insert(at, label);
            }
            ast::AlterTypeOperation::Rename(rename) => {
                new.name = ident(&rename.new_name);
            }
            ast::AlterTypeOperation::RenameValue(_) => {
                return Err(SqlError::feature_not_supported(
                    "ALTER TYPE ... RENAME VALUE (stored rows hold the labels)",
                ))
            }
        }
        Ok(Plan::Ddl(DdlPlan::AlterEnum {
            old: EnumDef::clone(old),
            new,
        }))
    }

    pub(crate) fn drop_types(
        &self,
        names: &[ast::ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> SqlResult<Plan> {
        if cascade {
            return Err(SqlError::feature_not_supported("DROP TYPE ... CASCADE"));
        }
        Ok(Plan::Ddl(DdlPlan::DropEnums {
            names: object_names(names)?,
            if_exists,
        }))
    }
}
