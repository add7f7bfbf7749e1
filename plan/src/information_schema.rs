//! `information_schema`'s constraint views (`table_constraints`, `key_column_usage`,
//! `referential_constraints`, `constraint_column_usage`, `check_constraints`) and
//! `schemata`: what ORMs' schema readers query (TypeORM, Sequelize, GORM), derived from the
//! catalog as `pg_constraint` is. `tables`, `columns` and `sequences` live in `system.rs`.

use sql::{DataType, Value};

use crate::catalog::{Catalog, TableDef};
use crate::foreign_key::{unique_key_on, ForeignKeyDef, UniqueKey};
use crate::system::{parenthesized, SystemTable};

/// The one database's name, as `information_schema` calls its catalog.
const DATABASE: &str = "ledger";
const SCHEMA: &str = "public";

/// The columns of one of this module's views (none for another table).
pub(crate) fn columns(table: SystemTable) -> Vec<(&'static str, DataType)> {
    use DataType::{Int4, Name, Text};
    let constraint = [
        ("constraint_catalog", Name),
        ("constraint_schema", Name),
        ("constraint_name", Name),
    ];
    let table_name = [
        ("table_catalog", Name),
        ("table_schema", Name),
        ("table_name", Name),
    ];
    match table {
        SystemTable::InfoTableConstraints => [
            &constraint[..],
            &table_name[..],
            &[
                ("constraint_type", Text),
                ("is_deferrable", Text),
                ("initially_deferred", Text),
                ("enforced", Text),
            ],
        ]
        .concat(),
        SystemTable::InfoKeyColumnUsage => [
            &constraint[..],
            &table_name[..],
            &[
                ("column_name", Name),
                ("ordinal_position", Int4),
                ("position_in_unique_constraint", Int4),
            ],
        ]
        .concat(),
        SystemTable::InfoReferentialConstraints => [
            &constraint[..],
            &[
                ("unique_constraint_catalog", Name),
                ("unique_constraint_schema", Name),
                ("unique_constraint_name", Name),
                ("match_option", Text),
                ("update_rule", Text),
                ("delete_rule", Text),
            ],
        ]
        .concat(),
        SystemTable::InfoConstraintColumnUsage => {
            [&table_name[..], &[("column_name", Name)], &constraint[..]].concat()
        }
        SystemTable::InfoCheckConstraints => [&constraint[..], &[("check_clause", Text)]].concat(),
        SystemTable::InfoSchemata => vec![
            ("catalog_name", Name),
            ("schema_name", Name),
            ("schema_owner", Name),
        ],
        _ => Vec::new(),
    }
}

/// One constraint as these views show it.
struct Constraint<'c> {
    table: &'c TableDef,
    name: String,
    kind: &'static str,
    /// The constrained columns, by position.
    columns: Vec<usize>,
    foreign_key: Option<&'c ForeignKeyDef>,
    /// A CHECK's clause, as `check_constraints` shows it.
    check: Option<String>,
}

/// Every table's constraints: primary key, UNIQUE constraints, CHECKs, foreign keys.
fn constraints(catalog: &Catalog) -> Vec<Constraint<'_>> {
    let mut out = Vec::new();
    for t in catalog.tables.values() {
        let plain = |name: String, kind, columns: Vec<usize>| Constraint {
            table: t,
            name,
            kind,
            columns,
            foreign_key: None,
            check: None,
        };
        if t.has_primary_key() {
            out.push(plain(t.key_name(), "PRIMARY KEY", t.primary_key.clone()));
        }
        for index in t
            .indexes
            .iter()
            .filter(|i| catalog.unique_constraints.contains(&i.id))
        {
            out.push(plain(index.name.clone(), "UNIQUE", index.columns.clone()));
        }
        for check in &t.checks {
            let mut columns = Vec::new();
            check.expr.visit(&mut |e| {
                if let crate::expr::Expr::Column(c, _) = e {
                    columns.push(*c);
                }
            });
            columns.sort_unstable();
            columns.dedup();
            out.push(Constraint {
                check: Some(format!("({})", parenthesized(&check.sql, &check.expr, 1))),
                ..plain(check.name.clone(), "CHECK", columns)
            });
        }
    }
    for fk in &catalog.foreign_keys {
        let Some(child) = catalog.table_by_id(fk.table) else {
            continue;
        };
        out.push(Constraint {
            table: child,
            name: fk.name.clone(),
            kind: "FOREIGN KEY",
            columns: positions(child, &fk.columns),
            foreign_key: Some(fk),
            check: None,
        });
    }
    out
}

fn positions(table: &TableDef, names: &[String]) -> Vec<usize> {
    names.iter().filter_map(|n| table.column_index(n)).collect()
}

/// The name of the key a foreign key references (its parent's primary key or UNIQUE).
fn referenced_key_name(parent: &TableDef, fk: &ForeignKeyDef) -> Option<String> {
    match unique_key_on(parent, &positions(parent, &fk.parent_columns))? {
        UniqueKey::PrimaryKey => Some(parent.key_name()),
        UniqueKey::Index(index) => Some(index.name.clone()),
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn yes_no(yes: bool) -> Value {
    text(if yes { "YES" } else { "NO" })
}

/// The rows of one of this module's views (none for another table).
pub(crate) fn rows(table: SystemTable, catalog: &Catalog) -> Vec<Vec<Value>> {
    let named = |c: &Constraint| vec![text(DATABASE), text(SCHEMA), text(&c.name)];
    let located = |t: &TableDef| vec![text(DATABASE), text(SCHEMA), text(&t.name)];
    let mut rows = Vec::new();
    match table {
        SystemTable::InfoTableConstraints => {
            for c in constraints(catalog) {
                let deferrable = c.foreign_key.is_some_and(|f| f.deferrable);
                let deferred = c.foreign_key.is_some_and(|f| f.initially_deferred);
                let mut row = named(&c);
                row.extend(located(c.table));
                row.extend([
                    text(c.kind),
                    yes_no(deferrable),
                    yes_no(deferred),
                    text("YES"),
                ]);
                rows.push(row);
            }
        }
        SystemTable::InfoKeyColumnUsage => {
            for c in constraints(catalog).iter().filter(|c| c.check.is_none()) {
                for (n, &column) in c.columns.iter().enumerate() {
                    let mut row = named(c);
                    row.extend(located(c.table));
                    // A foreign key column's place in the key it references.
                    let referenced = c
                        .foreign_key
                        .map_or(Value::Null, |_| Value::Int(n as i64 + 1));
                    row.extend([
                        text(&c.table.columns[column].name),
                        Value::Int(n as i64 + 1),
                        referenced,
                    ]);
                    rows.push(row);
                }
            }
        }
        SystemTable::InfoReferentialConstraints => {
            for c in constraints(catalog) {
                let Some(fk) = c.foreign_key else { continue };
                let key = catalog
                    .table_by_id(fk.parent)
                    .and_then(|parent| referenced_key_name(parent, fk));
                let mut row = named(&c);
                row.extend([
                    text(DATABASE),
                    text(SCHEMA),
                    key.map_or(Value::Null, Value::Text),
                    text("NONE"),
                    text(fk.on_update.sql()),
                    text(fk.on_delete.sql()),
                ]);
                rows.push(row);
            }
        }
        SystemTable::InfoConstraintColumnUsage => {
            for c in constraints(catalog) {
                // A foreign key uses the columns it references; the others their own.
                let (owner, columns) = match c.foreign_key {
                    Some(fk) => match catalog.table_by_id(fk.parent) {
                        Some(parent) => (&**parent, positions(parent, &fk.parent_columns)),
                        None => continue,
                    },
                    None => (c.table, c.columns.clone()),
                };
                for column in columns {
                    let mut row = located(owner);
                    row.push(text(&owner.columns[column].name));
                    row.extend(named(&c));
                    rows.push(row);
                }
            }
        }
        SystemTable::InfoCheckConstraints => {
            for c in constraints(catalog) {
                let Some(check) = &c.check else { continue };
                let mut row = named(&c);
                row.push(text(check));
                rows.push(row);
            }
        }
        SystemTable::InfoSchemata => {
            for schema in ["pg_catalog", "information_schema", SCHEMA] {
                rows.push(vec![text(DATABASE), text(schema), text("ledger")]);
            }
        }
        _ => {}
    }
    rows
}
