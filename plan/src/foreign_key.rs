//! Foreign keys: which columns of a table must match a row of another (the parent) by its
//! primary key or a unique index, and what happens to referencing rows when the parent row
//! is deleted or its key changes. The executor checks them as rows are written (so inside a
//! transaction block, at COMMIT, in the order the writes were made); the definitions live
//! in the catalog under a key of their own, as views and sequences do.

use serde::{Deserialize, Serialize};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::catalog::{Catalog, TableDef, FIRST_USER_OID};

/// What a referencing row undergoes when its parent row goes or changes key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReferentialAction {
    NoAction,
    Restrict,
    Cascade,
    SetNull,
}

impl ReferentialAction {
    /// `pg_constraint.confdeltype` / `confupdtype`.
    pub fn code(self) -> &'static str {
        match self {
            ReferentialAction::NoAction => "a",
            ReferentialAction::Restrict => "r",
            ReferentialAction::Cascade => "c",
            ReferentialAction::SetNull => "n",
        }
    }

    /// As SQL writes it (`information_schema.referential_constraints` too).
    pub fn sql(self) -> &'static str {
        match self {
            ReferentialAction::NoAction => "NO ACTION",
            ReferentialAction::Restrict => "RESTRICT",
            ReferentialAction::Cascade => "CASCADE",
            ReferentialAction::SetNull => "SET NULL",
        }
    }
}

/// A foreign key of table `table` (columns by name, so that other columns may come and
/// go) referencing table `parent`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ForeignKeyDef {
    /// Shares the id space with tables (its OID is `FIRST_USER_OID + id`).
    pub id: u32,
    pub name: String,
    pub table: u32,
    pub columns: Vec<String>,
    /// The referenced table; while planned inside the CREATE TABLE of a table referencing
    /// itself, `SELF_REFERENCE` (the table has no id yet).
    pub parent: u32,
    pub parent_columns: Vec<String>,
    pub on_delete: ReferentialAction,
    pub on_update: ReferentialAction,
    /// Shown as declared; checks run when the writes apply (inside a transaction block:
    /// at COMMIT), whatever was declared.
    pub deferrable: bool,
    pub initially_deferred: bool,
}

/// The parent of a foreign key declared in the CREATE TABLE of its own table.
pub const SELF_REFERENCE: u32 = u32::MAX;

impl ForeignKeyDef {
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }

    /// As `pg_get_constraintdef` shows it.
    pub fn definition(&self, catalog: &Catalog) -> String {
        let parent = catalog
            .table_by_id(self.parent)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        let mut text = format!(
            "FOREIGN KEY ({}) REFERENCES {parent}({})",
            self.columns.join(", "),
            self.parent_columns.join(", ")
        );
        if self.on_update != ReferentialAction::NoAction {
            text.push_str(&format!(" ON UPDATE {}", self.on_update.sql()));
        }
        if self.on_delete != ReferentialAction::NoAction {
            text.push_str(&format!(" ON DELETE {}", self.on_delete.sql()));
        }
        if self.deferrable {
            text.push_str(" DEFERRABLE");
        }
        if self.initially_deferred {
            text.push_str(" INITIALLY DEFERRED");
        }
        text
    }

    /// Positions of `names` in `table`.
    pub fn positions(table: &TableDef, names: &[String]) -> SqlResult<Vec<usize>> {
        names
            .iter()
            .map(|n| {
                table.column_index(n).ok_or_else(|| {
                    SqlError::internal(format!(
                        "foreign key column \"{n}\" is missing from \"{}\"",
                        table.name
                    ))
                })
            })
            .collect()
    }

    /// Checks that `parent` still has a primary key or unique index on exactly the
    /// referenced columns (as when the key was planned).
    pub fn check_parent_key(&self, parent: &TableDef) -> SqlResult<()> {
        let positions = ForeignKeyDef::positions(parent, &self.parent_columns)
            .map_err(|_| no_unique_key(&parent.name))?;
        if unique_on(parent, &positions) {
            Ok(())
        } else {
            Err(no_unique_key(&parent.name))
        }
    }
}

/// Whether `table`'s primary key or one of its unique indexes covers exactly `columns`.
pub fn unique_on(table: &TableDef, columns: &[usize]) -> bool {
    unique_key_on(table, columns).is_some()
}

/// A key that holds each combination of values once.
pub enum UniqueKey<'t> {
    PrimaryKey,
    /// A unique index on plain columns (not partial, no expressions).
    Index(&'t crate::catalog::IndexDef),
}

/// Whether `key` is made of exactly `columns`, in any order (neither repeats one).
pub fn same_columns(key: &[usize], columns: &[usize]) -> bool {
    key.len() == columns.len() && columns.iter().all(|c| key.contains(c))
}

/// `table`'s primary key or unique index on exactly `columns` (in any order).
pub fn unique_key_on<'t>(table: &'t TableDef, columns: &[usize]) -> Option<UniqueKey<'t>> {
    let same = |key: &[usize]| same_columns(key, columns);
    if table.has_primary_key() && same(&table.primary_key) {
        return Some(UniqueKey::PrimaryKey);
    }
    table
        .indexes
        .iter()
        .find(|i| i.unique && !i.is_derived() && same(&i.columns))
        .map(UniqueKey::Index)
}

pub fn no_unique_key(parent: &str) -> SqlError {
    SqlError::new(
        ErrorKind::InvalidForeignKey,
        format!(
            "there is no unique constraint matching given keys for referenced table \"{parent}\""
        ),
    )
}

impl Catalog {
    /// Adds `fk` under a new id (from the relations' id space, so its OID is its own).
    pub fn add_foreign_key(&mut self, mut fk: ForeignKeyDef) {
        self.next_table_id += 1;
        fk.id = self.next_table_id;
        self.foreign_keys.push(std::sync::Arc::new(fk));
    }

    /// The foreign keys of table `id` (it references their parents).
    pub fn foreign_keys_of(&self, id: u32) -> impl Iterator<Item = &ForeignKeyDef> {
        self.foreign_keys
            .iter()
            .map(|f| f.as_ref())
            .filter(move |f| f.table == id)
    }

    /// The foreign keys referencing table `id`.
    pub fn references_to(&self, id: u32) -> impl Iterator<Item = &ForeignKeyDef> {
        self.foreign_keys
            .iter()
            .map(|f| f.as_ref())
            .filter(move |f| f.parent == id)
    }

    /// A foreign key naming column `column` of table `table`, on either side.
    pub fn foreign_key_using(&self, table: &TableDef, column: &str) -> Option<&ForeignKeyDef> {
        self.foreign_keys.iter().map(|f| f.as_ref()).find(|f| {
            (f.table == table.id && f.columns.iter().any(|c| c == column))
                || (f.parent == table.id && f.parent_columns.iter().any(|c| c == column))
        })
    }
}
