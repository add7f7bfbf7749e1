//! Virtual catalog tables (`pg_catalog`, `information_schema`): their columns, and their rows
//! computed from a `Catalog`. Only what clients actually query is here; each table lists
//! the columns clients read.

use serde::{Deserialize, Serialize};
use sql::{DataType, Value};

use crate::catalog::Catalog;

pub const PG_CATALOG_NAMESPACE: i64 = 11;
pub const PUBLIC_NAMESPACE: i64 = 2200;
pub const INFORMATION_SCHEMA_NAMESPACE: i64 = 13_000;
pub const DATABASE_OID: i64 = 16_383;
pub const OWNER_OID: i64 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SystemTable {
    PgClass,
    PgNamespace,
    PgAttribute,
    PgType,
    PgInherits,
    PgPartitionedTable,
    PgDatabase,
    PgIndex,
    PgRoles,
    PgAttrdef,
    PgConstraint,
    InfoTables,
    InfoColumns,
}

use DataType::{Bool, CatalogChar, Int2, Int4, Name, Oid, Text};

impl SystemTable {
    pub fn lookup(schema: Option<&str>, name: &str) -> Option<SystemTable> {
        let in_pg_catalog = matches!(schema, None | Some("pg_catalog"));
        let in_info = schema == Some("information_schema");
        Some(match name {
            "pg_class" if in_pg_catalog => SystemTable::PgClass,
            "pg_namespace" if in_pg_catalog => SystemTable::PgNamespace,
            "pg_attribute" if in_pg_catalog => SystemTable::PgAttribute,
            "pg_type" if in_pg_catalog => SystemTable::PgType,
            "pg_inherits" if in_pg_catalog => SystemTable::PgInherits,
            "pg_partitioned_table" if in_pg_catalog => SystemTable::PgPartitionedTable,
            "pg_database" if in_pg_catalog => SystemTable::PgDatabase,
            "pg_index" if in_pg_catalog => SystemTable::PgIndex,
            "pg_roles" | "pg_user" if in_pg_catalog => SystemTable::PgRoles,
            "pg_attrdef" if in_pg_catalog => SystemTable::PgAttrdef,
            "pg_constraint" if in_pg_catalog => SystemTable::PgConstraint,
            "tables" if in_info => SystemTable::InfoTables,
            "columns" if in_info => SystemTable::InfoColumns,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SystemTable::PgClass => "pg_class",
            SystemTable::PgNamespace => "pg_namespace",
            SystemTable::PgAttribute => "pg_attribute",
            SystemTable::PgType => "pg_type",
            SystemTable::PgInherits => "pg_inherits",
            SystemTable::PgPartitionedTable => "pg_partitioned_table",
            SystemTable::PgDatabase => "pg_database",
            SystemTable::PgIndex => "pg_index",
            SystemTable::PgRoles => "pg_roles",
            SystemTable::PgAttrdef => "pg_attrdef",
            SystemTable::PgConstraint => "pg_constraint",
            SystemTable::InfoTables => "tables",
            SystemTable::InfoColumns => "columns",
        }
    }

    pub fn columns(self) -> Vec<(&'static str, DataType)> {
        match self {
            SystemTable::PgClass => vec![
                ("oid", Oid),
                ("relname", Name),
                ("relnamespace", Oid),
                ("reltype", Oid),
                ("relowner", Oid),
                ("relam", Oid),
                ("reltuples", DataType::Float4),
                ("relkind", CatalogChar),
                ("relpersistence", CatalogChar),
                ("relhasindex", Bool),
                ("relispartition", Bool),
                ("relhasrules", Bool),
                ("relhastriggers", Bool),
                ("relrowsecurity", Bool),
                ("relforcerowsecurity", Bool),
                ("relhasoids", Bool),
                ("relchecks", Int2),
                ("relnatts", Int2),
                ("reloptions", DataType::TextArray),
                ("reltablespace", Oid),
                ("relpartbound", Text),
                ("reloftype", Oid),
                ("relreplident", CatalogChar),
                ("relacl", DataType::TextArray),
            ],
            SystemTable::PgNamespace => vec![
                ("oid", Oid),
                ("nspname", Name),
                ("nspowner", Oid),
                ("nspacl", DataType::TextArray),
            ],
            SystemTable::PgAttribute => vec![
                ("attrelid", Oid),
                ("attname", Name),
                ("atttypid", Oid),
                ("attlen", Int2),
                ("attnum", Int2),
                ("atttypmod", Int4),
                ("attnotnull", Bool),
                ("atthasdef", Bool),
                ("attisdropped", Bool),
                ("attidentity", CatalogChar),
                ("attgenerated", CatalogChar),
                ("attcollation", Oid),
            ],
            SystemTable::PgType => vec![
                ("oid", Oid),
                ("typname", Name),
                ("typnamespace", Oid),
                ("typlen", Int2),
                ("typtype", CatalogChar),
                ("typelem", Oid),
                ("typarray", Oid),
                ("typbasetype", Oid),
                ("typrelid", Oid),
                ("typnotnull", Bool),
                ("typtypmod", Int4),
            ],
            SystemTable::PgInherits => {
                vec![("inhrelid", Oid), ("inhparent", Oid), ("inhseqno", Int4)]
            }
            SystemTable::PgPartitionedTable => vec![("partrelid", Oid), ("partstrat", CatalogChar)],
            SystemTable::PgDatabase => vec![
                ("oid", Oid),
                ("datname", Name),
                ("datdba", Oid),
                ("encoding", Int4),
                ("datcollate", Name),
                ("datctype", Name),
                ("datallowconn", Bool),
            ],
            SystemTable::PgIndex => vec![
                ("indexrelid", Oid),
                ("indrelid", Oid),
                ("indisunique", Bool),
                ("indisprimary", Bool),
                ("indkey", DataType::Int2Array),
            ],
            SystemTable::PgRoles => vec![
                ("oid", Oid),
                ("rolname", Name),
                ("rolsuper", Bool),
                ("usename", Name),
                ("usesysid", Oid),
            ],
            SystemTable::PgAttrdef => vec![
                ("oid", Oid),
                ("adrelid", Oid),
                ("adnum", Int2),
                ("adbin", Text),
            ],
            SystemTable::PgConstraint => vec![
                ("oid", Oid),
                ("conname", Name),
                ("connamespace", Oid),
                ("contype", CatalogChar),
                ("conrelid", Oid),
                ("conindid", Oid),
                ("conkey", DataType::Int2Array),
                ("consrc", Text),
            ],
            SystemTable::InfoTables => vec![
                ("table_catalog", Name),
                ("table_schema", Name),
                ("table_name", Name),
                ("table_type", Text),
            ],
            SystemTable::InfoColumns => vec![
                ("table_catalog", Name),
                ("table_schema", Name),
                ("table_name", Name),
                ("column_name", Name),
                ("ordinal_position", Int4),
                ("column_default", Text),
                ("is_nullable", Text),
                ("data_type", Text),
                ("character_maximum_length", Int4),
                ("numeric_precision", Int4),
                ("numeric_scale", Int4),
            ],
        }
    }

    /// The table's rows for the given catalog.
    pub fn rows(self, catalog: &Catalog) -> Vec<Vec<Value>> {
        let int = |v: i64| Value::Int(v);
        let text = |s: &str| Value::Text(s.to_string());
        let b = Value::Bool;
        let mut rows = Vec::new();
        match self {
            SystemTable::PgClass => {
                for t in catalog.tables.values() {
                    rows.push(vec![
                        int(t.oid() as i64),
                        text(&t.name),
                        int(PUBLIC_NAMESPACE),
                        int(0),
                        int(OWNER_OID),
                        int(2),
                        Value::Float(-1.0),
                        text("r"),
                        text("p"),
                        b(t.has_primary_key()),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        int(t.checks.len() as i64),
                        int(t.columns.len() as i64),
                        Value::Null,
                        int(0),
                        Value::Null,
                        int(0),
                        text("d"),
                        Value::Null,
                    ]);
                }
                for t in catalog.tables.values().filter(|t| t.has_primary_key()) {
                    let name = t
                        .primary_key_name
                        .clone()
                        .unwrap_or_else(|| format!("{}_pkey", t.name));
                    rows.push(vec![
                        int(index_oid(t.oid()) as i64),
                        Value::Text(name),
                        int(PUBLIC_NAMESPACE),
                        int(0),
                        int(OWNER_OID),
                        int(403),
                        Value::Float(-1.0),
                        text("i"),
                        text("p"),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        b(false),
                        int(0),
                        int(t.primary_key.len() as i64),
                        Value::Null,
                        int(0),
                        Value::Null,
                        int(0),
                        text("n"),
                        Value::Null,
                    ]);
                }
            }
            SystemTable::PgNamespace => {
                for (oid, name) in [
                    (PG_CATALOG_NAMESPACE, "pg_catalog"),
                    (PUBLIC_NAMESPACE, "public"),
                    (INFORMATION_SCHEMA_NAMESPACE, "information_schema"),
                ] {
                    rows.push(vec![int(oid), text(name), int(OWNER_OID), Value::Null]);
                }
            }
            SystemTable::PgAttribute => {
                for t in catalog.tables.values() {
                    for (i, c) in t.columns.iter().enumerate() {
                        rows.push(vec![
                            int(t.oid() as i64),
                            text(&c.name),
                            int(c.ty.oid() as i64),
                            int(c.ty.wire_size() as i64),
                            int(i as i64 + 1),
                            int(c.ty.typmod() as i64),
                            b(!c.nullable),
                            b(c.default.is_some()),
                            b(false),
                            text(""),
                            text(""),
                            int(0),
                        ]);
                    }
                }
            }
            SystemTable::PgType => {
                for ty in DataType::ALL {
                    let elem = match ty {
                        DataType::TextArray => 25,
                        DataType::Int2Array => 21,
                        _ => 0,
                    };
                    rows.push(vec![
                        int(ty.oid() as i64),
                        text(ty.typname()),
                        int(PG_CATALOG_NAMESPACE),
                        int(ty.wire_size() as i64),
                        text("b"),
                        int(elem),
                        int(0),
                        int(0),
                        int(0),
                        b(false),
                        int(-1),
                    ]);
                }
            }
            SystemTable::PgInherits | SystemTable::PgPartitionedTable => {}
            SystemTable::PgDatabase => rows.push(vec![
                int(DATABASE_OID),
                text("ledger"),
                int(OWNER_OID),
                int(6),
                text("C.UTF-8"),
                text("C.UTF-8"),
                b(true),
            ]),
            SystemTable::PgIndex => {
                for t in catalog.tables.values().filter(|t| t.has_primary_key()) {
                    rows.push(vec![
                        int(index_oid(t.oid()) as i64),
                        int(t.oid() as i64),
                        b(true),
                        b(true),
                        Value::Array(t.primary_key.iter().map(|c| int(*c as i64 + 1)).collect()),
                    ]);
                }
            }
            SystemTable::PgRoles => rows.push(vec![
                int(OWNER_OID),
                text("ledger"),
                b(true),
                text("ledger"),
                int(OWNER_OID),
            ]),
            SystemTable::PgAttrdef => {
                for t in catalog.tables.values() {
                    for (i, c) in t.columns.iter().enumerate() {
                        if let Some(sql) = &c.default_sql {
                            rows.push(vec![
                                int(0),
                                int(t.oid() as i64),
                                int(i as i64 + 1),
                                text(sql),
                            ]);
                        }
                    }
                }
            }
            SystemTable::PgConstraint => {
                for t in catalog.tables.values() {
                    if t.has_primary_key() {
                        let name = t
                            .primary_key_name
                            .clone()
                            .unwrap_or_else(|| format!("{}_pkey", t.name));
                        rows.push(vec![
                            int(0),
                            Value::Text(name),
                            int(PUBLIC_NAMESPACE),
                            text("p"),
                            int(t.oid() as i64),
                            int(index_oid(t.oid()) as i64),
                            Value::Array(
                                t.primary_key.iter().map(|c| int(*c as i64 + 1)).collect(),
                            ),
                            Value::Null,
                        ]);
                    }
                    for c in &t.checks {
                        rows.push(vec![
                            int(0),
                            text(&c.name),
                            int(PUBLIC_NAMESPACE),
                            text("c"),
                            int(t.oid() as i64),
                            int(0),
                            Value::Null,
                            text(&c.sql),
                        ]);
                    }
                }
            }
            SystemTable::InfoTables => {
                for t in catalog.tables.values() {
                    rows.push(vec![
                        text("ledger"),
                        text("public"),
                        text(&t.name),
                        text("BASE TABLE"),
                    ]);
                }
            }
            SystemTable::InfoColumns => {
                for t in catalog.tables.values() {
                    for (i, c) in t.columns.iter().enumerate() {
                        let (length, precision, scale) = match c.ty {
                            DataType::Varchar(Some(n)) | DataType::Char(n) => {
                                (int(n as i64), Value::Null, Value::Null)
                            }
                            DataType::Numeric {
                                precision: Some(p),
                                scale,
                            } => (Value::Null, int(p as i64), int(scale as i64)),
                            DataType::Int2 => (Value::Null, int(16), int(0)),
                            DataType::Int4 => (Value::Null, int(32), int(0)),
                            DataType::Int8 => (Value::Null, int(64), int(0)),
                            _ => (Value::Null, Value::Null, Value::Null),
                        };
                        rows.push(vec![
                            text("ledger"),
                            text("public"),
                            text(&t.name),
                            text(&c.name),
                            int(i as i64 + 1),
                            c.default_sql.as_deref().map(text).unwrap_or(Value::Null),
                            text(if c.nullable { "YES" } else { "NO" }),
                            Value::Text(
                                c.ty.pg_name()
                                    .split('(')
                                    .next()
                                    .unwrap_or_default()
                                    .to_string(),
                            ),
                            length,
                            precision,
                            scale,
                        ]);
                    }
                }
            }
        }
        rows
    }
}

/// The OID a table's primary key index is reported under.
pub fn index_oid(table_oid: u32) -> u32 {
    table_oid + 1_000_000
}
