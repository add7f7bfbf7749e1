//! User-defined enum types (`CREATE TYPE ... AS ENUM`): their definitions in the catalog,
//! the DDL that makes, changes and drops them (their binding is `planner`'s `bind_enum`).
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
use sql::{DataType, EnumType, ErrorKind, SqlError, SqlResult, Value};

use crate::catalog::{Catalog, FIRST_USER_OID};
use crate::expr::{undefined_type, Expr};

/// PostgreSQL's limit on a label (NAMEDATALEN - 1 bytes).
pub const MAX_LABEL_BYTES: usize = 63;

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

    pub fn labels_literal(&self) -> Expr {
        Expr::Literal(
            Value::Array(self.labels.iter().map(Value::text).collect()),
            DataType::TextArray,
        )
    }

    pub fn has_label(&self, label: &str) -> bool {
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
