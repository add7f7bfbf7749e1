//! User-defined enum types (`CREATE TYPE ... AS ENUM`): their definitions in the catalog,
//! the DDL that makes, changes and drops them, and what binding needs of them.
//!
//! A value of an enum type is stored, compared for equality and sent as its label's text;
//! only the catalog knows the labels. So the binder checks a constant label when it binds
//! it, wraps anything else that becomes an enum (a parameter, a cast of text) in
//! `Func::EnumIn`, which checks at run time, and orders (`<`, ORDER BY) by
//! `Func::EnumPosition`, the label's place in the type's list, as PostgreSQL orders by sort
//! order.
//!
//! What this must not do: order enum values by their text anywhere (an index on an enum
//! column serves equality, never a range or an order), or change labels stored rows hold
//! (RENAME VALUE is refused).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::{ast, DataType, EnumType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::*;
use crate::bind_expr::data_type_of;
use crate::catalog::{Catalog, FIRST_USER_OID};
use crate::expr::{Expr, Func};
use crate::plan::*;
use crate::scope::Scope;

/// PostgreSQL's limit on a label (NAMEDATALEN - 1 bytes).
const MAX_LABEL_BYTES: usize = 63;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnumDef {
    /// Shares the id space with tables (its OID is `FIRST_USER_OID + id`).
    pub id: u32,
    pub name: String,
    /// In sort order.
    pub labels: Vec<String>,
}

impl EnumDef {
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    pub fn data_type(&self) -> DataType {
        DataType::Enum(EnumType::new(self.oid(), &self.name))
    }

    fn labels_literal(&self) -> Expr {
        Expr::Literal(
            Value::Array(self.labels.iter().map(Value::text).collect()),
            DataType::TextArray,
        )
    }

    fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }

    /// `label` as a value of this type: 22P02 if it is not one of its labels.
    pub fn value(&self, label: String) -> SqlResult<Value> {
        match self.has_label(&label) {
            true => Ok(Value::Text(label)),
            false => Err(invalid_label(&self.name, &label)),
        }
    }
}

/// 22P02 for a label `ty` does not have.
pub fn invalid_label(ty: &str, label: &str) -> SqlError {
    SqlError::invalid_text(format!("invalid input value for enum {ty}: \"{label}\""))
}

impl Catalog {
    pub fn enum_by_oid(&self, oid: u32) -> Option<&Arc<EnumDef>> {
        self.enums.values().find(|e| e.oid() == oid)
    }

    /// The definition of enum type `ty`, if it is one.
    pub fn enum_of(&self, ty: DataType) -> Option<&Arc<EnumDef>> {
        match ty {
            DataType::Enum(e) => self.enum_by_oid(e.oid),
            _ => None,
        }
    }

    /// A column (as "column c of table t") whose type is enum `oid`, if any.
    pub fn enum_dependent(&self, oid: u32) -> Option<String> {
        self.tables.values().find_map(|t| {
            t.columns
                .iter()
                .find(|c| c.ty.oid() == oid)
                .map(|c| format!("column {} of table {}", c.name, t.name))
        })
    }

    /// Renames enum type `oid` in every column that has it (its values are unchanged).
    pub fn retype_enum_columns(&mut self, oid: u32, ty: DataType) {
        for table in self.tables.values_mut() {
            if table.columns.iter().any(|c| c.ty.oid() == oid) {
                let table = Arc::make_mut(table);
                for column in table.columns.iter_mut().filter(|c| c.ty.oid() == oid) {
                    column.ty = ty;
                }
            }
        }
        for view in self.views.values_mut() {
            if view.columns.iter().any(|(_, t)| t.oid() == oid) {
                let view = Arc::make_mut(view);
                for (_, t) in view.columns.iter_mut().filter(|(_, t)| t.oid() == oid) {
                    *t = ty;
                }
            }
        }
    }
}

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
                    op: crate::expr::BinaryOp::Add,
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

/// 42704 for a type name no type has.
pub fn undefined_type(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedObject,
        format!("type \"{name}\" does not exist"),
    )
}

/// 42710 when a type or a relation (whose row type PostgreSQL names so) has `name`.
fn check_type_name_free(catalog: &Catalog, name: &str) -> SqlResult<()> {
    if catalog.enums.contains_key(name) || catalog.relation_exists(name) {
        return Err(SqlError::new(
            ErrorKind::DuplicateObject,
            format!("type \"{name}\" already exists"),
        ));
    }
    Ok(())
}

/// Applies CREATE TYPE ... AS ENUM to `catalog`.
pub fn create_enum(catalog: &mut Catalog, mut def: EnumDef) -> SqlResult<()> {
    check_type_name_free(catalog, &def.name)?;
    catalog.next_table_id += 1;
    def.id = catalog.next_table_id;
    catalog.enums.insert(def.name.clone(), Arc::new(def));
    Ok(())
}

/// Applies ALTER TYPE: `new` replaces `old`, which must still be the type's definition.
pub fn alter_enum(catalog: &mut Catalog, old: EnumDef, new: EnumDef) -> SqlResult<()> {
    if catalog.enums.get(&old.name).map(|d| d.as_ref()) != Some(&old) {
        return Err(SqlError::serialization_failure(
            "the type changed while ALTER TYPE was planned; retry",
        ));
    }
    if new.name != old.name {
        check_type_name_free(catalog, &new.name)?;
        catalog.retype_enum_columns(new.oid(), new.data_type());
    }
    catalog.enums.remove(&old.name);
    catalog.enums.insert(new.name.clone(), Arc::new(new));
    Ok(())
}

/// Applies DROP TYPE: 2BP01 while a column has the type.
pub fn drop_enums(catalog: &mut Catalog, names: &[String], if_exists: bool) -> SqlResult<()> {
    for name in names {
        let Some(def) = catalog.enums.get(name) else {
            if if_exists {
                continue;
            }
            return Err(undefined_type(name));
        };
        if let Some(dependent) = catalog.enum_dependent(def.oid()) {
            return Err(SqlError::new(
                ErrorKind::DependentObjectsStillExist,
                format!("cannot drop type {name} because other objects depend on it"),
            )
            .with_detail(format!("{dependent} depends on type {name}")));
        }
        catalog.enums.remove(name);
    }
    Ok(())
}
