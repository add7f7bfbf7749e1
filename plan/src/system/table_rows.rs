//! The rows of each virtual catalog table, one function per table, computed from a
//! `Catalog` (`SystemTable::rows` picks the function).

use super::*;

fn b(v: bool) -> Value {
    Value::Bool(v)
}

fn null() -> Value {
    Value::Null
}

/// The rows of `pg_class`.
pub(super) fn pg_class(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        rows.push(vec![
            int(t.oid()),
            text(&t.name),
            int(PUBLIC_NAMESPACE),
            int(0),
            int(0),
            int(OWNER_OID),
            int(HEAP_AM),
            int(0),
            int(0),
            Value::Float(-1.0),
            text("r"),
            text("p"),
            b(t.has_primary_key() || !t.indexes.is_empty()),
            b(false),
            b(false),
            // PostgreSQL's foreign keys are triggers; psql looks for them here.
            b(catalog
                .foreign_keys
                .iter()
                .any(|f| f.table == t.id || f.parent == t.id)),
            b(false),
            b(false),
            int(t.checks.len() as i64),
            int(t.columns.len() as i64),
            null(),
            null(),
            text("d"),
            null(),
            int(0),
        ]);
        if t.has_primary_key() {
            rows.push(class_row(
                index_oid(t.oid()),
                &t.key_name(),
                "i",
                t.primary_key.len(),
            ));
        }
        for index in &t.indexes {
            rows.push(class_row(
                index.oid(),
                &index.name,
                "i",
                index.columns.len(),
            ));
        }
    }
    for v in catalog.views.values() {
        rows.push(class_row(v.oid(), &v.name, "v", v.columns.len()));
    }
    for q in catalog.sequences.values() {
        rows.push(class_row(q.oid(), &q.name, "S", 3));
    }
    rows
}

/// The rows of `pg_namespace`.
pub(super) fn pg_namespace(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for (oid, name) in [
        (PG_CATALOG_NAMESPACE, "pg_catalog"),
        (PUBLIC_NAMESPACE, "public"),
        (INFORMATION_SCHEMA_NAMESPACE, "information_schema"),
    ] {
        let acl = match name {
            "public" => super::role_rows::acl(catalog, &crate::ObjectId::Schema(name.into())),
            _ => null(),
        };
        rows.push(vec![int(oid), text(name), int(OWNER_OID), acl]);
    }
    rows
}

/// The rows of `pg_attribute`.
pub(super) fn pg_attribute(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        for (i, c) in t.columns.iter().enumerate() {
            let identity = catalog.identity_of(t.id, &c.name);
            let mut row = attribute_row(
                t.oid(),
                &c.name,
                c.ty,
                i,
                !c.nullable,
                c.default.is_some() && identity.is_none(),
            );
            row[ATTIDENTITY] = text(identity_code(identity));
            rows.push(row);
        }
    }
    for v in catalog.views.values() {
        for (i, (name, ty)) in v.columns.iter().enumerate() {
            rows.push(attribute_row(v.oid(), name, *ty, i, false, false));
        }
    }
    rows
}

/// The rows of `pg_type`.
pub(super) fn pg_type(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for ty in DataType::ALL {
        let elem = ty.element().map_or(0, |e| e.oid());
        let collation = if ty.is_text_family() {
            DEFAULT_COLLATION
        } else {
            0
        };
        let category = match ty {
            DataType::Bool => "B",
            t if t.is_numeric_family() => "N",
            t if t.is_text_family() => "S",
            DataType::Timestamp | DataType::TimestampTz | DataType::Date | DataType::Time => "D",
            DataType::Interval => "T",
            t if t.element().is_some() => "A",
            _ => "U",
        };
        rows.push(vec![
            int(ty.oid()),
            text(ty.typname()),
            int(PG_CATALOG_NAMESPACE),
            int(ty.wire_size()),
            text("b"),
            text(category),
            int(elem),
            int(ty.array_of().map_or(0, |a| a.oid())),
            int(0),
            int(0),
            b(false),
            int(-1),
            int(collation),
            text(","),
            null(),
            int(OWNER_OID),
            b(true),
            b(ty.wire_size() > 0 && ty.wire_size() <= 8),
            int(if ty.element().is_some() {
                ARRAY_IN_OID
            } else {
                0
            }),
        ]);
    }
    for e in catalog.enums.values() {
        rows.push(vec![
            int(e.oid()),
            text(&e.name),
            int(PUBLIC_NAMESPACE),
            int(4),
            text("e"),
            text("E"),
            int(0),
            int(0),
            int(0),
            int(0),
            b(false),
            int(-1),
            int(0),
            text(","),
            null(),
            int(OWNER_OID),
            b(true),
            b(true),
            int(0),
        ]);
    }
    rows
}

/// The rows of `pg_database`.
pub(super) fn pg_database(catalog: &Catalog) -> Vec<Vec<Value>> {
    vec![vec![
        int(DATABASE_OID),
        text("ledger"),
        int(OWNER_OID),
        int(6),
        text("C.UTF-8"),
        text("C.UTF-8"),
        b(true),
        b(false),
        text("c"),
        null(),
        super::role_rows::acl(catalog, &crate::ObjectId::Database),
    ]]
}

/// The rows of `pg_index`.
pub(super) fn pg_index(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values().filter(|t| t.has_primary_key()) {
        rows.push(vec![
            int(index_oid(t.oid())),
            int(t.oid()),
            int(t.primary_key.len() as i64),
            b(true),
            b(true),
            b(false),
            b(true),
            b(false),
            Value::Array(t.primary_key.iter().map(|c| int(*c as i64 + 1)).collect()),
            int(t.primary_key.len() as i64),
            Value::Array(t.primary_key.iter().map(|_| int(0)).collect()),
            b(false),
            null(),
            null(),
            b(false),
            b(true),
        ]);
    }
    for t in catalog.tables.values() {
        for index in &t.indexes {
            let derivation = catalog.index_derivations.get(&index.id);
            rows.push(vec![
                int(index.oid()),
                int(t.oid()),
                int(index.columns.len() as i64),
                b(index.unique),
                b(false),
                b(false),
                b(true),
                b(false),
                Value::Array(index.columns.iter().map(|c| int(*c as i64 + 1)).collect()),
                int(index.columns.len() as i64),
                Value::Array(index.columns.iter().map(|_| int(0)).collect()),
                b(false),
                // PostgreSQL stores the predicate's and the expressions' trees;
                // their text stands in.
                derivation
                    .and_then(|d| d.predicate.as_ref())
                    .map_or(Value::Null, |p| text(&p.sql)),
                derivation
                    .filter(|d| !d.keys.is_empty())
                    .map_or(Value::Null, |d| {
                        let keys: Vec<&str> = d.keys.iter().map(|k| k.sql.as_str()).collect();
                        Value::Text(keys.join(", "))
                    }),
                b(false),
                b(true),
            ]);
        }
    }
    rows
}

/// The rows of `pg_extension`: what every PostgreSQL database starts with.
pub(super) fn pg_extension() -> Vec<Vec<Value>> {
    vec![vec![
        int(PLPGSQL_EXTENSION_OID),
        text("plpgsql"),
        int(OWNER_OID),
        int(PG_CATALOG_NAMESPACE),
        text("1.0"),
    ]]
}

/// The rows of `pg_proc`: the stored procedures (`CREATE PROCEDURE`); built-in functions
/// are not listed.
pub(super) fn pg_proc(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for procedure in catalog.procedures.values() {
        let names = procedure.params.iter().map(|(n, _)| text(n)).collect();
        rows.push(vec![
            int(procedure_oid(&procedure.name)),
            text(&procedure.name),
            int(PUBLIC_NAMESPACE),
            super::role_rows::owner(catalog, &crate::ObjectId::Procedure(procedure.name.clone())),
            text("p"),
            int(0),
            int(procedure.params.len() as i64),
            Value::Array(names),
            text(&procedure.body),
        ]);
    }
    rows
}

/// The rows of `pg_attrdef`.
pub(super) fn pg_attrdef(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        for (i, c) in t.columns.iter().enumerate() {
            if let Some(sql) = &c.default_sql {
                rows.push(vec![int(0), int(t.oid()), int(i as i64 + 1), text(sql)]);
            }
        }
    }
    rows
}

/// The rows of `pg_constraint`.
pub(super) fn pg_constraint(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    // Columns after `conbin`, for a constraint other than a foreign key.
    let plain = || {
        vec![
            null(),
            text(" "),
            text(" "),
            text(" "),
            int(0),
            int(0),
            b(true),
            int(0),
            b(false),
        ]
    };
    for t in catalog.tables.values() {
        if t.has_primary_key() {
            let mut row = vec![
                int(index_oid(t.oid())),
                Value::Text(t.key_name()),
                int(PUBLIC_NAMESPACE),
                text("p"),
                b(false),
                b(false),
                b(true),
                int(t.oid()),
                int(index_oid(t.oid())),
                int(0),
                Value::Array(t.primary_key.iter().map(|c| int(*c as i64 + 1)).collect()),
                null(),
            ];
            row.extend(plain());
            rows.push(row);
        }
        let constraints = t
            .indexes
            .iter()
            .filter(|i| catalog.unique_constraints.contains(&i.id));
        for index in constraints {
            let mut row = vec![
                int(unique_constraint_oid(index)),
                text(&index.name),
                int(PUBLIC_NAMESPACE),
                text("u"),
                b(false),
                b(false),
                b(true),
                int(t.oid()),
                int(index.oid()),
                int(0),
                Value::Array(index.columns.iter().map(|c| int(*c as i64 + 1)).collect()),
                null(),
            ];
            row.extend(plain());
            rows.push(row);
        }
        for (n, c) in t.checks.iter().enumerate() {
            let mut row = vec![
                int(check_oid(t.oid(), n)),
                text(&c.name),
                int(PUBLIC_NAMESPACE),
                text("c"),
                b(false),
                b(false),
                b(true),
                int(t.oid()),
                int(0),
                int(0),
                null(),
                text(&c.sql),
            ];
            row.extend(plain());
            rows.push(row);
        }
    }
    for fk in &catalog.foreign_keys {
        let (Some(child), Some(parent)) = (
            catalog.table_by_id(fk.table),
            catalog.table_by_id(fk.parent),
        ) else {
            continue;
        };
        let numbers = |table: &TableDef, names: &[String]| {
            Value::Array(
                names
                    .iter()
                    .filter_map(|n| table.column_index(n))
                    .map(|c| int(c as i64 + 1))
                    .collect(),
            )
        };
        rows.push(vec![
            int(fk.oid()),
            text(&fk.name),
            int(PUBLIC_NAMESPACE),
            text("f"),
            b(fk.deferrable),
            b(fk.initially_deferred),
            b(true),
            int(child.oid()),
            int(referenced_index_oid(parent, &fk.parent_columns)),
            int(parent.oid()),
            numbers(child, &fk.columns),
            null(),
            numbers(parent, &fk.parent_columns),
            text(fk.on_update.code()),
            text(fk.on_delete.code()),
            text("s"),
            int(0),
            int(0),
            b(true),
            int(0),
            b(true),
        ]);
    }
    rows
}

/// The rows of `pg_am`.
pub(super) fn pg_am() -> Vec<Vec<Value>> {
    vec![
        vec![int(HEAP_AM), text("heap"), text("t")],
        vec![int(BTREE_AM), text("btree"), text("i")],
    ]
}

/// The rows of `pg_collation`.
pub(super) fn pg_collation() -> Vec<Vec<Value>> {
    vec![vec![
        int(DEFAULT_COLLATION),
        text("default"),
        int(PG_CATALOG_NAMESPACE),
    ]]
}

/// The rows of `pg_settings`.
pub(super) fn pg_settings() -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for (name, setting) in SERVER_SETTINGS {
        rows.push(vec![text(name), text(setting)]);
    }
    rows
}

/// The rows of `pg_indexes`.
pub(super) fn pg_indexes(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        let keys = t
            .has_primary_key()
            .then(|| (index_oid(t.oid()), t.key_name()));
        let indexes = t.indexes.iter().map(|i| (i.oid(), i.name.clone()));
        for (oid, name) in keys.into_iter().chain(indexes) {
            rows.push(vec![
                text("public"),
                text(&t.name),
                text(&name),
                null(),
                describe_oid(catalog, Func::GetIndexDef, oid).map_or(Value::Null, Value::Text),
            ]);
        }
    }
    rows
}

/// The rows of `pg_enum`.
pub(super) fn pg_enum(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for e in catalog.enums.values() {
        for (i, label) in e.labels.iter().enumerate() {
            rows.push(vec![
                int(enum_label_oid(e.oid(), i)),
                int(e.oid()),
                Value::Float(i as f64 + 1.0),
                text(label),
            ]);
        }
    }
    rows
}

/// The rows of `pg_prepared_statements`.
pub(super) fn pg_prepared_statements(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for p in catalog.prepared_statements.iter() {
        let types = p
            .parameter_types
            .iter()
            .map(|t| Value::Text(t.pg_name()))
            .collect();
        rows.push(vec![
            text(&p.name),
            text(&p.statement),
            Value::TimestampTz(p.prepare_time),
            Value::Array(types),
            Value::Bool(p.from_sql),
            Value::Int(0),
            Value::Int(p.executions),
        ]);
    }
    rows
}

/// The rows of `pg_stat_activity`.
pub(super) fn pg_stat_activity(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    let time = |t: Option<i64>| t.map_or(Value::Null, Value::TimestampTz);
    for a in catalog.activity.iter() {
        rows.push(vec![
            int(DATABASE_OID),
            text(&a.database),
            int(a.pid),
            Value::Null,
            catalog
                .authorization
                .role(&a.user)
                .map_or(Value::Null, |r| int(r.oid)),
            text(&a.user),
            text(&a.application_name),
            a.client_addr.as_deref().map_or(Value::Null, text),
            Value::Null,
            a.client_port.map_or(Value::Null, int),
            Value::TimestampTz(a.backend_start),
            time(a.xact_start),
            time(a.query_start),
            Value::TimestampTz(a.state_change),
            Value::Null,
            Value::Null,
            // Another role's session's state is hidden (NULL), as its query is.
            if a.state.is_empty() {
                Value::Null
            } else {
                text(&a.state)
            },
            Value::Null,
            Value::Null,
            Value::Null,
            text(&a.query),
            text("client backend"),
        ]);
    }
    rows
}

/// The rows of `hotledger.cluster`.
pub(super) fn hotledger_cluster(catalog: &Catalog) -> Vec<Vec<Value>> {
    let number = |n: Option<i64>| n.map_or(Value::Null, Value::Int);
    catalog
        .cluster
        .iter()
        .map(|m| {
            vec![
                Value::Int(m.node_id),
                text(&m.role),
                Value::Bool(m.voter),
                m.pg_addr.as_deref().map_or(Value::Null, text),
                text(&m.raft_addr),
                number(m.term),
                number(m.last_log_index),
                number(m.committed_index),
                number(m.applied_index),
                number(m.lag_entries),
                Value::Bool(m.reachable),
                Value::Bool(m.is_self),
            ]
        })
        .collect()
}

/// The rows of `info_tables`.
pub(super) fn info_tables(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        rows.push(vec![
            text("ledger"),
            text("public"),
            text(&t.name),
            text("BASE TABLE"),
        ]);
    }
    for v in catalog.views.values() {
        rows.push(vec![
            text("ledger"),
            text("public"),
            text(&v.name),
            text("VIEW"),
        ]);
    }
    rows
}

/// The rows of `pg_sequence`.
pub(super) fn pg_sequence(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for q in catalog.sequences.values() {
        rows.push(vec![
            int(q.oid()),
            int(q.ty.oid()),
            int(q.start),
            int(q.increment),
            int(q.max),
            int(q.min),
            int(q.cache),
            b(q.cycle),
        ]);
    }
    rows
}

/// The rows of `pg_depend`.
pub(super) fn pg_depend(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for q in catalog.sequences.values() {
        let Some(owner) = &q.owner else { continue };
        let Some(table) = catalog.table_by_id(owner.table) else {
            continue;
        };
        let Some(column) = table.column_index(&owner.column) else {
            continue;
        };
        let kind = if owner.identity.is_some() { "i" } else { "a" };
        let class = int(SystemTable::PgClass.oid());
        rows.push(vec![
            class.clone(),
            int(q.oid()),
            int(0),
            class,
            int(table.oid()),
            int(column as i64 + 1),
            text(kind),
        ]);
    }
    rows
}

/// The rows of `pg_sequences`.
pub(super) fn pg_sequences(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for q in catalog.sequences.values() {
        rows.push(vec![
            text("public"),
            text(&q.name),
            text("ledger"),
            Value::Text(q.ty.pg_name()),
            int(q.start),
            int(q.min),
            int(q.max),
            int(q.increment),
            b(q.cycle),
            int(q.cache),
        ]);
    }
    rows
}

/// The rows of `info_sequences`.
pub(super) fn info_sequences(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for q in catalog.sequences.values() {
        let bits = match q.ty {
            DataType::Int2 => 16,
            DataType::Int4 => 32,
            _ => 64,
        };
        rows.push(vec![
            text("ledger"),
            text("public"),
            text(&q.name),
            Value::Text(q.ty.pg_name()),
            int(bits),
            int(2),
            int(0),
            Value::Text(q.start.to_string()),
            Value::Text(q.min.to_string()),
            Value::Text(q.max.to_string()),
            Value::Text(q.increment.to_string()),
            text(if q.cycle { "YES" } else { "NO" }),
        ]);
    }
    rows
}

/// The rows of `info_columns`.
pub(super) fn info_columns(catalog: &Catalog) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for t in catalog.tables.values() {
        for (i, c) in t.columns.iter().enumerate() {
            let identity = catalog.identity_of(t.id, &c.name);
            let (length, precision, scale) = match c.ty {
                DataType::Varchar(Some(n)) | DataType::Char(n) => (int(n), null(), null()),
                DataType::Numeric {
                    precision: Some(p),
                    scale,
                } => (null(), int(p), int(scale)),
                DataType::Int2 => (null(), int(16), int(0)),
                DataType::Int4 => (null(), int(32), int(0)),
                DataType::Int8 => (null(), int(64), int(0)),
                _ => (null(), null(), null()),
            };
            rows.push(vec![
                text("ledger"),
                text("public"),
                text(&t.name),
                text(&c.name),
                int(i as i64 + 1),
                c.default_sql.as_deref().map(text).unwrap_or(Value::Null),
                text(if c.nullable { "YES" } else { "NO" }),
                match c.ty.element() {
                    Some(_) => text("ARRAY"),
                    None if matches!(c.ty, DataType::Enum(_)) => text("USER-DEFINED"),
                    None => Value::Text(
                        c.ty.pg_name()
                            .split('(')
                            .next()
                            .unwrap_or_default()
                            .to_string(),
                    ),
                },
                length,
                precision,
                scale,
                text(if identity.is_some() { "YES" } else { "NO" }),
                match identity {
                    Some(Identity::Always) => text("ALWAYS"),
                    Some(Identity::ByDefault) => text("BY DEFAULT"),
                    None => null(),
                },
                text(c.ty.typname()),
            ]);
        }
    }
    rows
}
