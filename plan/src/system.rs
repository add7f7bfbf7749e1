//! Virtual catalog tables (`pg_catalog`, `information_schema`): their columns, and their rows
//! computed from a `Catalog`. Only what clients actually query is here — psql's `\d`
//! family, pgbench's partition check, drivers' type lookups — and tables hotledger has no
//! use for (policies, publications, statistics) exist empty so those queries run.

use serde::{Deserialize, Serialize};
use sql::{DataType, SqlError, SqlResult, Value};

use crate::catalog::{Catalog, IndexDef, TableDef, FIRST_USER_OID};
use crate::expr::{Expr, Func};
use crate::foreign_key::UniqueKey;
use crate::sequence::Identity;

mod role_rows;
mod table_rows;

pub const PG_CATALOG_NAMESPACE: i64 = 11;
pub const PUBLIC_NAMESPACE: i64 = 2200;
pub const INFORMATION_SCHEMA_NAMESPACE: i64 = 13_000;
pub const DATABASE_OID: i64 = 16_383;
pub const OWNER_OID: i64 = 10;
const HEAP_AM: i64 = 2;
const BTREE_AM: i64 = 403;
const DEFAULT_COLLATION: i64 = 100;

/// The OID a table's primary key index (and its constraint) is reported under.
pub fn index_oid(table_oid: u32) -> u32 {
    table_oid + 1_000_000
}

/// The OID `pg_enum` gives the n-th label of enum type `type_oid` (PostgreSQL gives each
/// label an OID of its own; nothing refers to them here).
fn enum_label_oid(type_oid: u32, n: usize) -> u32 {
    4_000_000 + (type_oid - FIRST_USER_OID) * 256 + n as u32
}

/// The OID of a table's n-th CHECK constraint.
pub fn check_oid(table_oid: u32, n: usize) -> u32 {
    3_000_000 + (table_oid - FIRST_USER_OID) * 64 + n as u32
}

/// The OID `pg_constraint` gives a UNIQUE constraint (its index has its own).
pub fn unique_constraint_oid(index: &IndexDef) -> u32 {
    2_000_000 + index.oid()
}

/// The index holding a foreign key's referenced columns (its `conindid`): the parent's
/// primary key, or its unique index on exactly those columns; 0 when there is none.
fn referenced_index_oid(parent: &TableDef, columns: &[String]) -> u32 {
    let named: Vec<usize> = columns
        .iter()
        .filter_map(|n| parent.column_index(n))
        .collect();
    match crate::foreign_key::unique_key_on(parent, &named) {
        Some(UniqueKey::PrimaryKey) => index_oid(parent.oid()),
        Some(UniqueKey::Index(index)) => index.oid(),
        None => 0,
    }
}

/// `sql` (the text of `expr`) as PostgreSQL deparses it inside another clause: a column or
/// a call as it is, anything else in `times` pairs of parentheses.
pub(crate) fn parenthesized(sql: &str, expr: &Expr, times: usize) -> String {
    match expr {
        Expr::Column(..) | Expr::Function { .. } => sql.to_string(),
        _ => format!("{}{sql}{}", "(".repeat(times), ")".repeat(times)),
    }
}

/// `array_in`'s oid: the input function of every array type (`pg_type.typinput`; pgJDBC
/// tells arrays apart by it).
const ARRAY_IN_OID: u32 = 750;

/// `'name'::regproc`: the functions a catalog query names that way (only `array_in`; any
/// other name is 42883, a number is an oid).
pub fn regproc_oid(name: &str) -> SqlResult<u32> {
    if let Ok(oid) = name.trim().parse::<u32>() {
        return Ok(oid);
    }
    match name.trim().trim_start_matches("pg_catalog.") {
        "array_in" => Ok(ARRAY_IN_OID),
        other => Err(SqlError::new(
            sql::ErrorKind::UndefinedFunction,
            format!("function \"{other}\" does not exist"),
        )),
    }
}

/// The server's settings: what `pg_settings` lists and SHOW shows, and no session may SET
/// (the sessions' own settings are the server's business, not the catalog's).
pub const SERVER_SETTINGS: &[(&str, &str)] = &[
    ("server_version", "15.0"),
    ("server_version_num", "150000"),
    ("server_encoding", "UTF8"),
    ("integer_datetimes", "on"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("max_function_args", "100"),
    ("block_size", "8192"),
    ("is_superuser", "on"),
    ("lc_collate", "C.UTF-8"),
    ("lc_ctype", "C.UTF-8"),
];

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
    PgAm,
    PgCollation,
    PgPolicy,
    PgStatisticExt,
    PgPublication,
    PgPublicationNamespace,
    PgPublicationRel,
    PgSettings,
    InfoTables,
    InfoColumns,
    // Added after the others: plans name system tables by position in logged commands.
    PgAuthMembers,
    PgProc,
    PgExtension,
    PgDescription,
    PgSequence,
    PgDepend,
    InfoSequences,
    PgSequences,
    /// Empty: foreign keys are not triggers here, and there are no others.
    PgTrigger,
    /// The labels of the enum types, in order.
    PgEnum,
    /// The node's client sessions (`Catalog::activity`).
    PgStatActivity,
    /// `hotledger.cluster`: the replication group's members (`Catalog::cluster`).
    HotledgerCluster,
    /// The session's prepared statements (`Catalog::prepared_statements`).
    PgPreparedStatements,
    /// Empty: there are no range types (drivers join it when they look a type up).
    PgRange,
    /// Every index (primary keys' too) with its definition.
    PgIndexes,
    // information_schema's constraint views and schemata (`crate::information_schema`).
    InfoTableConstraints,
    InfoKeyColumnUsage,
    InfoReferentialConstraints,
    InfoConstraintColumnUsage,
    InfoCheckConstraints,
    InfoSchemata,
    /// The roles with their password verifiers (a superuser's to read).
    PgAuthid,
    /// The roles that may log in.
    PgUser,
    /// The privileges granted on tables and views.
    InfoTablePrivileges,
    // The node's own views (`crate::node_views`).
    HotledgerMetrics,
    HotledgerLatency,
    HotledgerThroughput,
    HotledgerCheckpoints,
    /// `pg_stat_activity` with the node's id.
    HotledgerSessions,
    HotledgerHotAccounts,
}

use DataType::{Bool, CatalogChar, Int2, Int4, Name, Oid, Text};

const TEXT_ARRAY: DataType = DataType::TextArray;
const INT2_ARRAY: DataType = DataType::Int2Array;

fn int(v: impl Into<i64>) -> Value {
    Value::Int(v.into())
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn key_columns(t: &TableDef) -> String {
    t.primary_key
        .iter()
        .map(|&c| t.columns[c].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl SystemTable {
    pub fn lookup(schema: Option<&str>, name: &str) -> Option<SystemTable> {
        use SystemTable::*;
        if schema == Some("hotledger") {
            return match name {
                "cluster" => Some(HotledgerCluster),
                "metrics" => Some(HotledgerMetrics),
                "latency" => Some(HotledgerLatency),
                "throughput" => Some(HotledgerThroughput),
                "checkpoints" => Some(HotledgerCheckpoints),
                "sessions" => Some(HotledgerSessions),
                "hot_accounts" => Some(HotledgerHotAccounts),
                _ => None,
            };
        }
        let in_pg_catalog = matches!(schema, None | Some("pg_catalog"));
        if schema == Some("information_schema") {
            return match name {
                "tables" => Some(InfoTables),
                "columns" => Some(InfoColumns),
                "sequences" => Some(InfoSequences),
                "table_constraints" => Some(InfoTableConstraints),
                "key_column_usage" => Some(InfoKeyColumnUsage),
                "referential_constraints" => Some(InfoReferentialConstraints),
                "constraint_column_usage" => Some(InfoConstraintColumnUsage),
                "check_constraints" => Some(InfoCheckConstraints),
                "schemata" => Some(InfoSchemata),
                "table_privileges" | "role_table_grants" => Some(InfoTablePrivileges),
                _ => None,
            };
        }
        if !in_pg_catalog {
            return None;
        }
        Some(match name {
            "pg_class" => PgClass,
            "pg_namespace" => PgNamespace,
            "pg_attribute" => PgAttribute,
            "pg_type" => PgType,
            "pg_inherits" => PgInherits,
            "pg_partitioned_table" => PgPartitionedTable,
            "pg_database" => PgDatabase,
            "pg_index" => PgIndex,
            "pg_roles" => PgRoles,
            "pg_authid" => PgAuthid,
            "pg_user" => PgUser,
            "pg_auth_members" => PgAuthMembers,
            "pg_proc" => PgProc,
            "pg_extension" => PgExtension,
            "pg_description" => PgDescription,
            "pg_attrdef" => PgAttrdef,
            "pg_constraint" => PgConstraint,
            "pg_am" => PgAm,
            "pg_collation" => PgCollation,
            "pg_policy" => PgPolicy,
            "pg_statistic_ext" => PgStatisticExt,
            "pg_publication" => PgPublication,
            "pg_publication_namespace" => PgPublicationNamespace,
            "pg_publication_rel" => PgPublicationRel,
            "pg_settings" => PgSettings,
            "pg_stat_activity" => PgStatActivity,
            "pg_prepared_statements" => PgPreparedStatements,
            "pg_range" => PgRange,
            "pg_indexes" => PgIndexes,
            "pg_sequence" => PgSequence,
            "pg_depend" => PgDepend,
            "pg_sequences" => PgSequences,
            "pg_trigger" => PgTrigger,
            "pg_enum" => PgEnum,
            _ => return None,
        })
    }

    /// The oid `'pg_catalog.name'::regclass` gives: PostgreSQL's own for the catalogs clients
    /// compare against (`pg_description.classoid`), a fixed one below the user range for the
    /// rest.
    pub fn oid(self) -> u32 {
        use SystemTable::*;
        match self {
            PgClass => 1259,
            PgType => 1247,
            PgAttribute => 1249,
            PgProc => 1255,
            PgDatabase => 1262,
            PgAuthMembers => 1261,
            PgNamespace => 2615,
            PgConstraint => 2606,
            PgDescription => 2609,
            PgIndex => 2610,
            PgAttrdef => 2604,
            PgAm => 2601,
            PgExtension => 3079,
            PgCollation => 3456,
            PgSequence => 2224,
            PgDepend => 2608,
            PgTrigger => 2620,
            PgEnum => 3501,
            PgStatActivity => 12_222,
            HotledgerCluster => 16_001,
            PgPreparedStatements => 12_161,
            PgRange => 3541,
            PgIndexes => 12_045,
            PgAuthid => 1260,
            other => 12_000 + other as u32,
        }
    }

    pub fn name(self) -> &'static str {
        use SystemTable::*;
        match self {
            PgClass => "pg_class",
            PgNamespace => "pg_namespace",
            PgAttribute => "pg_attribute",
            PgType => "pg_type",
            PgInherits => "pg_inherits",
            PgPartitionedTable => "pg_partitioned_table",
            PgDatabase => "pg_database",
            PgIndex => "pg_index",
            PgRoles => "pg_roles",
            PgAuthMembers => "pg_auth_members",
            PgAuthid => "pg_authid",
            PgUser => "pg_user",
            InfoTablePrivileges => "table_privileges",
            PgProc => "pg_proc",
            PgExtension => "pg_extension",
            PgDescription => "pg_description",
            PgAttrdef => "pg_attrdef",
            PgConstraint => "pg_constraint",
            PgAm => "pg_am",
            PgCollation => "pg_collation",
            PgPolicy => "pg_policy",
            PgStatisticExt => "pg_statistic_ext",
            PgPublication => "pg_publication",
            PgPublicationNamespace => "pg_publication_namespace",
            PgPublicationRel => "pg_publication_rel",
            PgSettings => "pg_settings",
            InfoTables => "tables",
            InfoColumns => "columns",
            PgSequence => "pg_sequence",
            PgDepend => "pg_depend",
            InfoSequences => "sequences",
            PgSequences => "pg_sequences",
            PgTrigger => "pg_trigger",
            PgEnum => "pg_enum",
            PgStatActivity => "pg_stat_activity",
            HotledgerCluster => "cluster",
            HotledgerMetrics => "metrics",
            HotledgerLatency => "latency",
            HotledgerThroughput => "throughput",
            HotledgerCheckpoints => "checkpoints",
            HotledgerSessions => "sessions",
            HotledgerHotAccounts => "hot_accounts",
            PgPreparedStatements => "pg_prepared_statements",
            PgRange => "pg_range",
            PgIndexes => "pg_indexes",
            InfoTableConstraints => "table_constraints",
            InfoKeyColumnUsage => "key_column_usage",
            InfoReferentialConstraints => "referential_constraints",
            InfoConstraintColumnUsage => "constraint_column_usage",
            InfoCheckConstraints => "check_constraints",
            InfoSchemata => "schemata",
        }
    }

    pub fn columns(self) -> Vec<(&'static str, DataType)> {
        use SystemTable::*;
        match self {
            InfoTableConstraints
            | InfoKeyColumnUsage
            | InfoReferentialConstraints
            | InfoConstraintColumnUsage
            | InfoCheckConstraints
            | InfoSchemata => crate::information_schema::columns(self),
            PgClass => vec![
                ("oid", Oid),
                ("relname", Name),
                ("relnamespace", Oid),
                ("reltype", Oid),
                ("reloftype", Oid),
                ("relowner", Oid),
                ("relam", Oid),
                ("reltablespace", Oid),
                ("reltoastrelid", Oid),
                ("reltuples", DataType::Float4),
                ("relkind", CatalogChar),
                ("relpersistence", CatalogChar),
                ("relhasindex", Bool),
                ("relispartition", Bool),
                ("relhasrules", Bool),
                ("relhastriggers", Bool),
                ("relrowsecurity", Bool),
                ("relforcerowsecurity", Bool),
                ("relchecks", Int2),
                ("relnatts", Int2),
                ("reloptions", TEXT_ARRAY),
                ("relpartbound", Text),
                ("relreplident", CatalogChar),
                ("relacl", TEXT_ARRAY),
                ("relpages", Int4),
            ],
            PgNamespace => vec![
                ("oid", Oid),
                ("nspname", Name),
                ("nspowner", Oid),
                ("nspacl", TEXT_ARRAY),
            ],
            PgAttribute => vec![
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
                ("attstorage", CatalogChar),
                ("attndims", Int4),
                ("attcompression", CatalogChar),
                ("attstattarget", Int4),
                ("attacl", TEXT_ARRAY),
            ],
            PgType => vec![
                ("oid", Oid),
                ("typname", Name),
                ("typnamespace", Oid),
                ("typlen", Int2),
                ("typtype", CatalogChar),
                ("typcategory", CatalogChar),
                ("typelem", Oid),
                ("typarray", Oid),
                ("typbasetype", Oid),
                ("typrelid", Oid),
                ("typnotnull", Bool),
                ("typtypmod", Int4),
                ("typcollation", Oid),
                ("typdelim", CatalogChar),
                ("typdefault", Text),
                ("typowner", Oid),
                ("typisdefined", Bool),
                ("typbyval", Bool),
                ("typinput", Oid),
            ],
            PgInherits => vec![
                ("inhrelid", Oid),
                ("inhparent", Oid),
                ("inhseqno", Int4),
                ("inhdetachpending", Bool),
            ],
            PgPartitionedTable => vec![("partrelid", Oid), ("partstrat", CatalogChar)],
            PgDatabase => vec![
                ("oid", Oid),
                ("datname", Name),
                ("datdba", Oid),
                ("encoding", Int4),
                ("datcollate", Name),
                ("datctype", Name),
                ("datallowconn", Bool),
                ("datistemplate", Bool),
                ("datlocprovider", CatalogChar),
                ("daticulocale", Text),
                ("datacl", TEXT_ARRAY),
            ],
            PgIndex => vec![
                ("indexrelid", Oid),
                ("indrelid", Oid),
                ("indnatts", Int2),
                ("indisunique", Bool),
                ("indisprimary", Bool),
                ("indisclustered", Bool),
                ("indisvalid", Bool),
                ("indisreplident", Bool),
                ("indkey", DataType::Int2Vector),
                ("indnkeyatts", Int2),
                ("indoption", DataType::Int2Vector),
                ("indnullsnotdistinct", Bool),
                ("indpred", Text),
                ("indexprs", Text),
                ("indisexclusion", Bool),
                ("indimmediate", Bool),
            ],
            PgRoles => vec![
                ("rolname", Name),
                ("rolsuper", Bool),
                ("rolinherit", Bool),
                ("rolcreaterole", Bool),
                ("rolcreatedb", Bool),
                ("rolcanlogin", Bool),
                ("rolreplication", Bool),
                ("rolconnlimit", Int4),
                ("rolpassword", Text),
                ("rolvaliduntil", DataType::TimestampTz),
                ("rolbypassrls", Bool),
                ("rolconfig", TEXT_ARRAY),
                ("oid", Oid),
            ],
            PgAuthid => vec![
                ("oid", Oid),
                ("rolname", Name),
                ("rolsuper", Bool),
                ("rolinherit", Bool),
                ("rolcreaterole", Bool),
                ("rolcreatedb", Bool),
                ("rolcanlogin", Bool),
                ("rolreplication", Bool),
                ("rolbypassrls", Bool),
                ("rolconnlimit", Int4),
                ("rolpassword", Text),
                ("rolvaliduntil", DataType::TimestampTz),
            ],
            PgUser => vec![
                ("usename", Name),
                ("usesysid", Oid),
                ("usecreatedb", Bool),
                ("usesuper", Bool),
                ("userepl", Bool),
                ("usebypassrls", Bool),
                ("passwd", Text),
                ("valuntil", DataType::TimestampTz),
                ("useconfig", TEXT_ARRAY),
            ],
            PgAuthMembers => vec![
                ("roleid", Oid),
                ("member", Oid),
                ("grantor", Oid),
                ("admin_option", Bool),
            ],
            InfoTablePrivileges => vec![
                ("grantor", Text),
                ("grantee", Text),
                ("table_catalog", Text),
                ("table_schema", Text),
                ("table_name", Text),
                ("privilege_type", Text),
                ("is_grantable", Text),
                ("with_hierarchy", Text),
            ],
            PgExtension => vec![
                ("oid", Oid),
                ("extname", Name),
                ("extowner", Oid),
                ("extnamespace", Oid),
                ("extversion", Text),
            ],
            PgDescription => vec![
                ("objoid", Oid),
                ("classoid", Oid),
                ("objsubid", Int4),
                ("description", Text),
            ],
            PgProc => vec![
                ("oid", Oid),
                ("proname", Name),
                ("pronamespace", Oid),
                ("proowner", Oid),
                ("prokind", CatalogChar),
                ("prorettype", Oid),
                ("pronargs", Int2),
                ("proargnames", TEXT_ARRAY),
                ("prosrc", Text),
            ],
            PgAttrdef => vec![
                ("oid", Oid),
                ("adrelid", Oid),
                ("adnum", Int2),
                ("adbin", Text),
            ],
            PgConstraint => vec![
                ("oid", Oid),
                ("conname", Name),
                ("connamespace", Oid),
                ("contype", CatalogChar),
                ("condeferrable", Bool),
                ("condeferred", Bool),
                ("convalidated", Bool),
                ("conrelid", Oid),
                ("conindid", Oid),
                ("confrelid", Oid),
                ("conkey", INT2_ARRAY),
                ("conbin", Text),
                ("confkey", INT2_ARRAY),
                ("confupdtype", CatalogChar),
                ("confdeltype", CatalogChar),
                ("confmatchtype", CatalogChar),
                ("conparentid", Oid),
                ("contypid", Oid),
                ("conislocal", Bool),
                ("coninhcount", Int4),
                ("connoinherit", Bool),
            ],
            PgAm => vec![("oid", Oid), ("amname", Name), ("amtype", CatalogChar)],
            PgCollation => vec![("oid", Oid), ("collname", Name), ("collnamespace", Oid)],
            PgPolicy => vec![
                ("oid", Oid),
                ("polname", Name),
                ("polrelid", Oid),
                ("polcmd", CatalogChar),
                ("polpermissive", Bool),
                ("polroles", INT2_ARRAY),
                ("polqual", Text),
                ("polwithcheck", Text),
            ],
            PgStatisticExt => vec![
                ("oid", Oid),
                ("stxrelid", Oid),
                ("stxname", Name),
                ("stxnamespace", Oid),
                ("stxstattarget", Int4),
                ("stxkind", TEXT_ARRAY),
            ],
            PgPublication => vec![("oid", Oid), ("pubname", Name), ("puballtables", Bool)],
            PgPublicationNamespace => vec![("oid", Oid), ("pnpubid", Oid), ("pnnspid", Oid)],
            PgPublicationRel => vec![
                ("oid", Oid),
                ("prpubid", Oid),
                ("prrelid", Oid),
                ("prqual", Text),
                ("prattrs", INT2_ARRAY),
            ],
            PgSettings => vec![("name", Text), ("setting", Text)],
            InfoTables => vec![
                ("table_catalog", Name),
                ("table_schema", Name),
                ("table_name", Name),
                ("table_type", Text),
            ],
            InfoColumns => vec![
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
                ("is_identity", Text),
                ("identity_generation", Text),
                ("udt_name", Name),
            ],
            PgSequence => vec![
                ("seqrelid", Oid),
                ("seqtypid", Oid),
                ("seqstart", DataType::Int8),
                ("seqincrement", DataType::Int8),
                ("seqmax", DataType::Int8),
                ("seqmin", DataType::Int8),
                ("seqcache", DataType::Int8),
                ("seqcycle", Bool),
            ],
            // Only what sequences owned by columns depend on.
            PgDepend => vec![
                ("classid", Oid),
                ("objid", Oid),
                ("objsubid", Int4),
                ("refclassid", Oid),
                ("refobjid", Oid),
                ("refobjsubid", Int4),
                ("deptype", CatalogChar),
            ],
            // Without `last_value`: the states are the executor's, and catalog views are
            // computed from the catalog alone (`SELECT last_value FROM seq` reads one).
            PgPreparedStatements => vec![
                ("name", Text),
                ("statement", Text),
                ("prepare_time", DataType::TimestampTz),
                ("parameter_types", DataType::TextArray),
                ("from_sql", Bool),
                ("generic_plans", DataType::Int8),
                ("custom_plans", DataType::Int8),
            ],
            HotledgerCluster => vec![
                ("node_id", DataType::Int8),
                ("role", Text),
                ("voter", Bool),
                ("pg_addr", Text),
                ("raft_addr", Text),
                ("term", DataType::Int8),
                ("last_log_index", DataType::Int8),
                ("committed_index", DataType::Int8),
                ("applied_index", DataType::Int8),
                ("lag_entries", DataType::Int8),
                ("reachable", Bool),
                ("is_self", Bool),
            ],
            HotledgerMetrics => vec![
                ("name", Text),
                ("labels", Text),
                ("kind", Text),
                ("value", DataType::Float8),
            ],
            HotledgerLatency => vec![
                ("stage", Text),
                ("window_seconds", DataType::Int8),
                ("count", DataType::Int8),
                ("p50_us", DataType::Int8),
                ("p90_us", DataType::Int8),
                ("p99_us", DataType::Int8),
                ("p999_us", DataType::Int8),
                ("max_us", DataType::Int8),
            ],
            HotledgerThroughput => vec![
                ("at", DataType::TimestampTz),
                ("transfers", DataType::Int8),
                ("statements", DataType::Int8),
                ("commits", DataType::Int8),
                ("bytes_fsynced", DataType::Int8),
            ],
            HotledgerCheckpoints => vec![
                ("finished_at", DataType::TimestampTz),
                ("log_index", DataType::Int8),
                ("pages", DataType::Int8),
                ("milliseconds", DataType::Int8),
            ],
            HotledgerHotAccounts => vec![
                ("window_seconds", DataType::Int8),
                ("account_id", DataType::Int8),
                ("transfers", DataType::Int8),
                ("error", DataType::Int8),
                ("debits_pending", crate::ledger::AMOUNT),
                ("debits_posted", crate::ledger::AMOUNT),
                ("credits_pending", crate::ledger::AMOUNT),
                ("credits_posted", crate::ledger::AMOUNT),
            ],
            HotledgerSessions => {
                let mut columns = vec![("node_id", DataType::Int8)];
                columns.extend(PgStatActivity.columns());
                columns
            }
            PgStatActivity => vec![
                ("datid", Oid),
                ("datname", Name),
                ("pid", Int4),
                ("leader_pid", Int4),
                ("usesysid", Oid),
                ("usename", Name),
                ("application_name", Text),
                ("client_addr", Text),
                ("client_hostname", Text),
                ("client_port", Int4),
                ("backend_start", DataType::TimestampTz),
                ("xact_start", DataType::TimestampTz),
                ("query_start", DataType::TimestampTz),
                ("state_change", DataType::TimestampTz),
                ("wait_event_type", Text),
                ("wait_event", Text),
                ("state", Text),
                ("backend_xid", Text),
                ("backend_xmin", Text),
                ("query_id", DataType::Int8),
                ("query", Text),
                ("backend_type", Text),
            ],
            PgIndexes => vec![
                ("schemaname", Name),
                ("tablename", Name),
                ("indexname", Name),
                ("tablespace", Name),
                ("indexdef", Text),
            ],
            PgRange => vec![
                ("rngtypid", Oid),
                ("rngsubtype", Oid),
                ("rngmultitypid", Oid),
                ("rngcollation", Oid),
                ("rngsubopc", Oid),
                ("rngcanonical", Oid),
                ("rngsubdiff", Oid),
            ],
            PgEnum => vec![
                ("oid", Oid),
                ("enumtypid", Oid),
                ("enumsortorder", DataType::Float4),
                ("enumlabel", Name),
            ],
            PgTrigger => vec![
                ("oid", Oid),
                ("tgrelid", Oid),
                ("tgparentid", Oid),
                ("tgname", Name),
                ("tgfoid", Oid),
                ("tgtype", Int2),
                ("tgenabled", CatalogChar),
                ("tgisinternal", Bool),
                ("tgconstrrelid", Oid),
                ("tgconstrindid", Oid),
                ("tgconstraint", Oid),
                ("tgdeferrable", Bool),
                ("tginitdeferred", Bool),
                ("tgnargs", Int2),
            ],
            PgSequences => vec![
                ("schemaname", Name),
                ("sequencename", Name),
                ("sequenceowner", Name),
                ("data_type", Text),
                ("start_value", DataType::Int8),
                ("min_value", DataType::Int8),
                ("max_value", DataType::Int8),
                ("increment_by", DataType::Int8),
                ("cycle", Bool),
                ("cache_size", DataType::Int8),
            ],
            InfoSequences => vec![
                ("sequence_catalog", Name),
                ("sequence_schema", Name),
                ("sequence_name", Name),
                ("data_type", Text),
                ("numeric_precision", Int4),
                ("numeric_precision_radix", Int4),
                ("numeric_scale", Int4),
                ("start_value", Text),
                ("minimum_value", Text),
                ("maximum_value", Text),
                ("increment", Text),
                ("cycle_option", Text),
            ],
        }
    }

    /// The table's rows for the given catalog.
    pub fn rows(self, catalog: &Catalog) -> Vec<Vec<Value>> {
        use SystemTable::*;
        match self {
            InfoTableConstraints
            | InfoKeyColumnUsage
            | InfoReferentialConstraints
            | InfoConstraintColumnUsage
            | InfoCheckConstraints
            | InfoSchemata => crate::information_schema::rows(self, catalog),
            PgClass => role_rows::with_relation_owners(catalog, table_rows::pg_class(catalog)),
            PgNamespace => table_rows::pg_namespace(catalog),
            PgAttribute => table_rows::pg_attribute(catalog),
            PgType => table_rows::pg_type(catalog),
            PgDatabase => table_rows::pg_database(catalog),
            PgIndex => table_rows::pg_index(catalog),
            PgRoles => role_rows::pg_roles(catalog),
            PgAuthid => role_rows::pg_authid(catalog),
            PgUser => role_rows::pg_user(catalog),
            PgAuthMembers => role_rows::pg_auth_members(catalog),
            InfoTablePrivileges => role_rows::info_table_privileges(catalog),
            // No comments (COMMENT ON is not supported).
            PgDescription => Vec::new(),
            PgExtension => table_rows::pg_extension(),
            PgProc => table_rows::pg_proc(catalog),
            PgAttrdef => table_rows::pg_attrdef(catalog),
            PgConstraint => table_rows::pg_constraint(catalog),
            PgAm => table_rows::pg_am(),
            PgCollation => table_rows::pg_collation(),
            PgInherits
            | PgPartitionedTable
            | PgPolicy
            | PgStatisticExt
            | PgPublication
            | PgPublicationNamespace
            | PgPublicationRel
            | PgTrigger
            | PgRange => Vec::new(),
            PgSettings => table_rows::pg_settings(),
            PgIndexes => table_rows::pg_indexes(catalog),
            PgEnum => table_rows::pg_enum(catalog),
            PgPreparedStatements => table_rows::pg_prepared_statements(catalog),
            PgStatActivity => table_rows::pg_stat_activity(catalog),
            HotledgerCluster => table_rows::hotledger_cluster(catalog),
            HotledgerMetrics => crate::node_views::metrics_rows(catalog),
            HotledgerLatency => crate::node_views::latency_rows(catalog),
            HotledgerThroughput => crate::node_views::throughput_rows(catalog),
            HotledgerCheckpoints => crate::node_views::checkpoint_rows(catalog),
            HotledgerHotAccounts => crate::node_views::hot_account_rows(catalog),
            HotledgerSessions => table_rows::pg_stat_activity(catalog)
                .into_iter()
                .map(|row| {
                    let mut with_node = vec![Value::Int(catalog.node.node_id)];
                    with_node.extend(row);
                    with_node
                })
                .collect(),
            InfoTables => table_rows::info_tables(catalog),
            PgSequence => table_rows::pg_sequence(catalog),
            PgDepend => table_rows::pg_depend(catalog),
            PgSequences => table_rows::pg_sequences(catalog),
            InfoSequences => table_rows::info_sequences(catalog),
            InfoColumns => table_rows::info_columns(catalog),
        }
    }
}

/// `pg_extension.oid` of plpgsql, as a fresh PostgreSQL 15 database has it.
const PLPGSQL_EXTENSION_OID: u32 = 13_572;

/// `pg_attribute.attidentity`'s position and codes.
const ATTIDENTITY: usize = 9;

fn identity_code(identity: Option<Identity>) -> &'static str {
    match identity {
        Some(Identity::Always) => "a",
        Some(Identity::ByDefault) => "d",
        None => "",
    }
}

/// A `pg_class` row: a view (`kind` "v", no access method), a sequence ("S") or an index
/// ("i", the B-tree access method).
fn class_row(oid: u32, name: &str, kind: &str, columns: usize) -> Vec<Value> {
    let f = || Value::Bool(false);
    vec![
        int(oid),
        text(name),
        int(PUBLIC_NAMESPACE),
        int(0),
        int(0),
        int(OWNER_OID),
        int(if kind == "i" { BTREE_AM } else { 0 }),
        int(0),
        int(0),
        Value::Float(-1.0),
        text(kind),
        text("p"),
        f(),
        f(),
        f(),
        f(),
        f(),
        f(),
        int(0),
        int(columns as i64),
        Value::Null,
        Value::Null,
        text("n"),
        Value::Null,
        int(0),
    ]
}

/// The oid of the table or index called `name` (`'name'::regclass`), if any.
/// The oid `name::regclass` gives: a user relation's, a catalog's, or a number as written.
pub fn regclass_oid(catalog: &Catalog, name: &str) -> SqlResult<u32> {
    // A number is an oid already, as PostgreSQL reads it.
    if let Ok(oid) = name.trim().parse::<u32>() {
        return Ok(oid);
    }
    let bare = name.trim_start_matches("public.").trim_matches('"');
    if let Some(oid) = relation_oid(catalog, bare) {
        return Ok(oid);
    }
    let (schema, table) = match bare.split_once('.') {
        Some((schema, table)) => (Some(schema), table),
        None => (None, bare),
    };
    match SystemTable::lookup(schema, table) {
        Some(system) => Ok(system.oid()),
        None => Err(SqlError::undefined_table(name)),
    }
}

pub fn relation_oid(catalog: &Catalog, name: &str) -> Option<u32> {
    if let Some(t) = catalog.table(name) {
        return Some(t.oid());
    }
    if let Some(v) = catalog.views.get(name) {
        return Some(v.oid());
    }
    if let Some(s) = catalog.sequences.get(name) {
        return Some(s.oid());
    }
    catalog.tables.values().find_map(|t| {
        if t.has_primary_key() && t.key_name() == name {
            return Some(index_oid(t.oid()));
        }
        t.indexes.iter().find(|i| i.name == name).map(|i| i.oid())
    })
}

/// The storage a size function adds up for relation `oid` (`Func::reads_storage`): the
/// ids of the kv tables (a table's, an index's) whose bytes count, or None when no table or
/// index has that oid. A table's primary key is the table's own tree (rows are stored by
/// key), so its size is the table's, and `pg_indexes_size` counts the other indexes.
pub fn relation_storage(catalog: &Catalog, oid: u32, func: Func) -> Option<Vec<u32>> {
    for t in catalog.tables.values() {
        let indexes = t.indexes.iter().map(|i| i.id);
        let own = if t.oid() == oid {
            return Some(match func {
                Func::IndexesSize => indexes.collect(),
                Func::TotalRelationSize => std::iter::once(t.id).chain(indexes).collect(),
                _ => vec![t.id],
            });
        } else if t.has_primary_key() && index_oid(t.oid()) == oid {
            t.id
        } else if let Some(index) = t.indexes.iter().find(|i| i.oid() == oid) {
            index.id
        } else {
            continue;
        };
        // An index has no indexes of its own.
        return Some(match func {
            Func::IndexesSize => Vec::new(),
            _ => vec![own],
        });
    }
    None
}

/// A stored procedure's oid: a hash of its name into a range no table, index or constraint
/// oid reaches, so it stays the same while the procedure exists (procedures have no id).
pub fn procedure_oid(name: &str) -> u32 {
    // FNV-1a.
    let hash = name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    0x4000_0000 | (hash & 0x3fff_ffff)
}

/// What the catalog-describing functions return for an OID: a relation's name
/// (`::regclass`), an index's definition, a constraint's definition, a procedure's
/// arguments.
/// A `pg_attribute` row: column `position` (0-based) of relation `oid`.
fn attribute_row(
    oid: u32,
    name: &str,
    ty: DataType,
    position: usize,
    not_null: bool,
    has_default: bool,
) -> Vec<Value> {
    let collation = if ty.is_text_family() {
        DEFAULT_COLLATION
    } else {
        0
    };
    vec![
        int(oid),
        text(name),
        int(ty.oid()),
        int(ty.wire_size()),
        int(position as i64 + 1),
        int(ty.typmod()),
        Value::Bool(not_null),
        Value::Bool(has_default),
        Value::Bool(false),
        text(""),
        text(""),
        int(collation),
        text("p"),
        int(ty.element().is_some() as i64),
        text(""),
        int(-1),
        Value::Null,
    ]
}

/// `pg_get_serial_sequence(table, column)`: the qualified name of the sequence column
/// `column` of `table` takes its values from (its SERIAL or identity sequence), if any.
pub fn serial_sequence(catalog: &Catalog, table: &str, column: &str) -> SqlResult<Option<String>> {
    let bare = table.trim_start_matches("public.").trim_matches('"');
    let def = catalog
        .table(bare)
        .ok_or_else(|| SqlError::undefined_table(bare))?;
    if def.column_index(column).is_none() {
        return Err(SqlError::undefined_column(&format!(
            "{column}\" of relation \"{bare}"
        )));
    }
    Ok(catalog
        .sequence_of_column(def.id, column)
        .map(|s| format!("public.{}", s.name)))
}

/// `pg_get_indexdef(oid, n, ...)`: index `oid`'s n-th key (a column's name or a key
/// expression); empty past its last key, as PostgreSQL gives it; None for no such index.
pub fn index_key_def(catalog: &Catalog, oid: u32, n: usize) -> Option<String> {
    for t in catalog.tables.values() {
        let names = |columns: &[usize]| {
            columns
                .get(n - 1)
                .map(|&c| t.columns[c].name.clone())
                .unwrap_or_default()
        };
        if t.has_primary_key() && oid == index_oid(t.oid()) {
            return Some(names(&t.primary_key));
        }
        if let Some(index) = t.indexes.iter().find(|i| i.oid() == oid) {
            return Some(match index.key_exprs(&catalog.index_derivations) {
                Some(keys) => keys.get(n - 1).map(|k| k.sql.clone()).unwrap_or_default(),
                None => names(&index.columns),
            });
        }
    }
    None
}

pub fn describe_oid(catalog: &Catalog, func: Func, oid: u32) -> Option<String> {
    if func == Func::GetConstraintDef {
        if let Some(fk) = catalog.foreign_keys.iter().find(|f| f.oid() == oid) {
            return Some(fk.definition(catalog));
        }
    }
    if func == Func::GetFunctionArguments {
        let procedure = catalog
            .procedures
            .values()
            .find(|p| procedure_oid(&p.name) == oid)?;
        let arguments = procedure
            .params
            .iter()
            .map(|(name, ty)| format!("{name} {}", ty.pg_name()))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(arguments);
    }
    if func == Func::RegClassName {
        if let Some(q) = catalog.sequences.values().find(|q| q.oid() == oid) {
            return Some(q.name.clone());
        }
    }
    if let Some(view) = catalog.views.values().find(|v| v.oid() == oid) {
        return match func {
            Func::RegClassName => Some(view.name.clone()),
            Func::GetViewDef => Some(format!(" {};", view.sql)),
            _ => None,
        };
    }
    for t in catalog.tables.values() {
        let idx = index_oid(t.oid());
        match func {
            Func::RegClassName if oid == t.oid() => return Some(t.name.clone()),
            Func::RegClassName if oid == idx && t.has_primary_key() => return Some(t.key_name()),
            Func::GetIndexDef if oid == idx && t.has_primary_key() => {
                return Some(format!(
                    "CREATE UNIQUE INDEX {} ON public.{} USING btree ({})",
                    t.key_name(),
                    t.name,
                    key_columns(t)
                ))
            }
            Func::GetConstraintDef if oid == idx && t.has_primary_key() => {
                return Some(format!("PRIMARY KEY ({})", key_columns(t)))
            }
            Func::GetConstraintDef => {
                for (n, c) in t.checks.iter().enumerate() {
                    if check_oid(t.oid(), n) == oid {
                        return Some(format!("CHECK ({})", parenthesized(&c.sql, &c.expr, 1)));
                    }
                }
                if let Some(index) = t.indexes.iter().find(|i| unique_constraint_oid(i) == oid) {
                    let columns: Vec<&str> = index
                        .columns
                        .iter()
                        .map(|&c| t.columns[c].name.as_str())
                        .collect();
                    return Some(format!("UNIQUE ({})", columns.join(", ")));
                }
            }
            _ => {}
        }
    }
    for t in catalog.tables.values() {
        for index in t.indexes.iter().filter(|i| i.oid() == oid) {
            let derivation = catalog.index_derivations.get(&index.id);
            // PostgreSQL parenthesizes an expression unless it is a column or a call, and a
            // key expression once more.
            let shown = |k: &crate::IndexExpr, times: usize| parenthesized(&k.sql, &k.expr, times);
            let columns = match derivation.filter(|d| !d.keys.is_empty()) {
                Some(d) => d
                    .keys
                    .iter()
                    .map(|k| shown(k, 2))
                    .collect::<Vec<_>>()
                    .join(", "),
                None => index
                    .columns
                    .iter()
                    .map(|&c| t.columns[c].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            match func {
                Func::RegClassName => return Some(index.name.clone()),
                Func::GetIndexDef => {
                    let unique = if index.unique { "UNIQUE " } else { "" };
                    let predicate = derivation
                        .and_then(|d| d.predicate.as_ref())
                        .map(|p| format!(" WHERE {}", shown(p, 1)))
                        .unwrap_or_default();
                    return Some(format!(
                        "CREATE {unique}INDEX {} ON public.{} USING btree ({columns}){predicate}",
                        index.name, t.name
                    ));
                }
                _ => {}
            }
        }
    }
    match func {
        Func::RegClassName => Some(oid.to_string()),
        _ => None,
    }
}
