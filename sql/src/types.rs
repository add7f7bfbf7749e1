//! `DataType`: the SQL types hotledger stores and sends, with their PostgreSQL OIDs and names.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, SqlError, SqlResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// NUMERIC(precision, scale); no precision means unconstrained.
    Numeric {
        precision: Option<u32>,
        scale: u32,
    },
    Text,
    Varchar(Option<u32>),
    /// CHAR(n): blank-padded to n.
    Char(u32),
    Bytea,
    Timestamp,
    TimestampTz,
    Date,
    /// PostgreSQL's `name` (catalog identifiers).
    Name,
    Oid,
    /// The single-byte `"char"` of catalog columns such as `relkind`.
    CatalogChar,
    TextArray,
    Int2Array,
    Int4Array,
    Int8Array,
    BoolArray,
    /// An untyped literal or NULL whose type is decided by its context.
    Unknown,
    /// A span of months, days and time (values and parameters; not yet a column type).
    Interval,
    /// JSON text (what `json_build_object` gives; not yet a column type).
    Json,
    /// The catalogs' `int2vector` (`pg_index.indkey`): an array of smallints written as
    /// `1 2`.
    Int2Vector,
    /// `jsonb`: a parsed JSON document ([`crate::Jsonb`]).
    Jsonb,
    /// `jsonb[]` (what a jsonb set-returning function unnests).
    JsonbArray,
    /// `json[]`.
    JsonArray,
    /// `uuid`: 16 bytes ([`crate::uuid`]).
    Uuid,
    /// `uuid[]`.
    UuidArray,
    /// `real[]`.
    Float4Array,
    /// `double precision[]`.
    Float8Array,
    /// `numeric[]`, its elements' precision and scale as NUMERIC's.
    NumericArray {
        precision: Option<u32>,
        scale: u32,
    },
    /// `date[]`.
    DateArray,
    /// `timestamp without time zone[]`.
    TimestampArray,
    /// `timestamp with time zone[]`.
    TimestampTzArray,
    /// `interval[]`.
    IntervalArray,
    /// `bytea[]`.
    ByteaArray,
    /// A user-defined enum (`CREATE TYPE ... AS ENUM`): values are their labels, as text.
    Enum(EnumType),
    /// `time without time zone` ([`crate::time_of_day`]).
    Time,
    /// `time[]`.
    TimeArray,
}

/// A user-defined enum type: its OID and name. The labels (which values are valid, and their
/// order) are the planner catalog's; the binder checks values against them and orders
/// comparisons and sorts by their position, so evaluation needs only the text.
///
/// The name is held as `&'static str` so that `DataType` stays `Copy`: one leaked copy per
/// distinct name for the life of the process (a schema has few types, and a name once
/// interned is reused by every catalog that mentions it). Two are the same type when their
/// OIDs are: a renamed type is still the type its columns and constants have.
#[derive(Clone, Copy, Debug)]
pub struct EnumType {
    pub oid: u32,
    pub name: &'static str,
}

impl PartialEq for EnumType {
    fn eq(&self, other: &EnumType) -> bool {
        self.oid == other.oid
    }
}

impl Eq for EnumType {}

impl std::hash::Hash for EnumType {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.oid.hash(state);
    }
}

impl EnumType {
    pub fn new(oid: u32, name: &str) -> EnumType {
        static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
        let mut names = NAMES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let name = match names.get(name) {
            Some(known) => known,
            None => {
                let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
                names.insert(leaked);
                leaked
            }
        };
        EnumType { oid, name }
    }
}

impl Serialize for EnumType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.oid, self.name).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EnumType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (oid, name) = <(u32, String)>::deserialize(deserializer)?;
        Ok(EnumType::new(oid, &name))
    }
}

impl DataType {
    pub const UNCONSTRAINED_NUMERIC: DataType = DataType::Numeric {
        precision: None,
        scale: 0,
    };

    /// The PostgreSQL type OID sent in RowDescription and ParameterDescription.
    pub fn oid(self) -> u32 {
        match self {
            DataType::Bool => 16,
            DataType::Int2 => 21,
            DataType::Int4 => 23,
            DataType::Int8 => 20,
            DataType::Float4 => 700,
            DataType::Float8 => 701,
            DataType::Numeric { .. } => 1700,
            DataType::Text => 25,
            DataType::Varchar(_) => 1043,
            DataType::Char(_) => 1042,
            DataType::Bytea => 17,
            DataType::Timestamp => 1114,
            DataType::TimestampTz => 1184,
            DataType::Date => 1082,
            DataType::Name => 19,
            DataType::Oid => 26,
            DataType::CatalogChar => 18,
            DataType::TextArray => 1009,
            DataType::Int2Array => 1005,
            DataType::Int4Array => 1007,
            DataType::Int8Array => 1016,
            DataType::BoolArray => 1000,
            DataType::Unknown => 25,
            DataType::Interval => 1186,
            DataType::Json => 114,
            DataType::Int2Vector => 22,
            DataType::Jsonb => 3802,
            DataType::JsonbArray => 3807,
            DataType::JsonArray => 199,
            DataType::Uuid => 2950,
            DataType::UuidArray => 2951,
            DataType::Float4Array => 1021,
            DataType::Float8Array => 1022,
            DataType::NumericArray { .. } => 1231,
            DataType::DateArray => 1182,
            DataType::TimestampArray => 1115,
            DataType::TimestampTzArray => 1185,
            DataType::IntervalArray => 1187,
            DataType::ByteaArray => 1001,
            DataType::Enum(e) => e.oid,
            DataType::Time => 1083,
            DataType::TimeArray => 1183,
        }
    }

    pub fn from_oid(oid: u32) -> Option<DataType> {
        Some(match oid {
            16 => DataType::Bool,
            21 => DataType::Int2,
            23 => DataType::Int4,
            20 => DataType::Int8,
            700 => DataType::Float4,
            701 => DataType::Float8,
            1700 => DataType::UNCONSTRAINED_NUMERIC,
            25 => DataType::Text,
            1043 => DataType::Varchar(None),
            1042 => DataType::Char(1),
            17 => DataType::Bytea,
            1114 => DataType::Timestamp,
            1184 => DataType::TimestampTz,
            1082 => DataType::Date,
            19 => DataType::Name,
            26 => DataType::Oid,
            18 => DataType::CatalogChar,
            1009 => DataType::TextArray,
            1005 => DataType::Int2Array,
            1007 => DataType::Int4Array,
            1016 => DataType::Int8Array,
            1000 => DataType::BoolArray,
            0 | 705 => DataType::Unknown,
            1186 => DataType::Interval,
            114 => DataType::Json,
            22 => DataType::Int2Vector,
            3802 => DataType::Jsonb,
            3807 => DataType::JsonbArray,
            199 => DataType::JsonArray,
            2950 => DataType::Uuid,
            2951 => DataType::UuidArray,
            1021 => DataType::Float4Array,
            1022 => DataType::Float8Array,
            1231 => DataType::NumericArray {
                precision: None,
                scale: 0,
            },
            1182 => DataType::DateArray,
            1115 => DataType::TimestampArray,
            1185 => DataType::TimestampTzArray,
            1187 => DataType::IntervalArray,
            1001 => DataType::ByteaArray,
            1083 => DataType::Time,
            1183 => DataType::TimeArray,
            _ => return None,
        })
    }

    /// The size PostgreSQL reports in RowDescription (-1 for variable length).
    pub fn wire_size(self) -> i16 {
        match self {
            DataType::Bool | DataType::CatalogChar => 1,
            DataType::Int2 => 2,
            DataType::Int4 | DataType::Float4 | DataType::Oid | DataType::Date => 4,
            DataType::Int8
            | DataType::Float8
            | DataType::Timestamp
            | DataType::TimestampTz
            | DataType::Time => 8,
            DataType::Name => 64,
            DataType::Interval | DataType::Uuid => 16,
            // An enum's value is stored by PostgreSQL as a 4-byte OID.
            DataType::Enum(_) => 4,
            _ => -1,
        }
    }

    /// The type modifier PostgreSQL reports (`atttypmod`): -1 when there is none.
    pub fn typmod(self) -> i32 {
        match self {
            DataType::Varchar(Some(n)) | DataType::Char(n @ 1..) if n > 0 => n as i32 + 4,
            DataType::Numeric {
                precision: Some(p),
                scale,
            }
            | DataType::NumericArray {
                precision: Some(p),
                scale,
            } => (((p << 16) | scale) + 4) as i32,
            _ => -1,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Oid
        )
    }

    pub fn is_numeric_family(self) -> bool {
        self.is_integer()
            || matches!(
                self,
                DataType::Float4 | DataType::Float8 | DataType::Numeric { .. }
            )
    }

    pub fn is_text_family(self) -> bool {
        matches!(
            self,
            DataType::Text
                | DataType::Varchar(_)
                | DataType::Char(_)
                | DataType::Name
                | DataType::Unknown
        )
    }

    /// Parses a type name as written in SQL (`int`, `bigint`, `varchar(20)`, ...).
    pub fn from_sql_name(name: &str, args: &[u32]) -> SqlResult<DataType> {
        let lower = name.to_ascii_lowercase();
        let lower = lower.trim_start_matches("pg_catalog.");
        if matches!(
            lower,
            "varchar" | "character varying" | "char" | "character" | "bpchar"
        ) && args.first().is_some_and(|n| *n == 0 || *n > 10_485_760)
        {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!("length for type {lower} must be between 1 and 10485760"),
            ));
        }
        Ok(match lower {
            "bool" | "boolean" => DataType::Bool,
            "int2" | "smallint" => DataType::Int2,
            "int" | "int4" | "integer" => DataType::Int4,
            "int8" | "bigint" => DataType::Int8,
            "float4" | "real" => DataType::Float4,
            "float8" | "double precision" | "float" | "double" => DataType::Float8,
            "numeric" | "decimal" => {
                let (precision, scale) = match args {
                    [] => return Ok(DataType::UNCONSTRAINED_NUMERIC),
                    [p] => (*p, 0),
                    [p, s] => (*p, *s),
                    _ => return Err(SqlError::syntax("NUMERIC takes at most two arguments")),
                };
                if precision == 0 || scale > precision {
                    return Err(SqlError::new(
                        ErrorKind::InvalidParameterValue,
                        format!(
                            "NUMERIC scale {scale} must be between 0 and precision {precision}"
                        ),
                    ));
                }
                // 39 digits: values up to 2^128 - 1 (`Numeric`).
                if precision > 39 {
                    return Err(SqlError::feature_not_supported(
                        "NUMERIC precision above 39",
                    ));
                }
                DataType::Numeric {
                    precision: Some(precision),
                    scale,
                }
            }
            "text" => DataType::Text,
            "varchar" | "character varying" => DataType::Varchar(args.first().copied()),
            "char" | "character" | "bpchar" => DataType::Char(args.first().copied().unwrap_or(1)),
            "bytea" => DataType::Bytea,
            "timestamp" | "timestamp without time zone" => DataType::Timestamp,
            "timestamptz" | "timestamp with time zone" => DataType::TimestampTz,
            "date" => DataType::Date,
            "time" | "time without time zone" => DataType::Time,
            "interval" => DataType::Interval,
            "json" => DataType::Json,
            "jsonb" => DataType::Jsonb,
            "jsonb[]" | "_jsonb" => DataType::JsonbArray,
            "json[]" | "_json" => DataType::JsonArray,
            "uuid" => DataType::Uuid,
            "uuid[]" | "_uuid" => DataType::UuidArray,
            "real[]" | "float4[]" | "_float4" => DataType::Float4Array,
            "double precision[]" | "float8[]" | "float[]" | "_float8" => DataType::Float8Array,
            "numeric[]" | "decimal[]" | "_numeric" => {
                match DataType::from_sql_name("numeric", args)? {
                    DataType::Numeric { precision, scale } => {
                        DataType::NumericArray { precision, scale }
                    }
                    other => other,
                }
            }
            "date[]" | "_date" => DataType::DateArray,
            "timestamp[]" | "timestamp without time zone[]" | "_timestamp" => {
                DataType::TimestampArray
            }
            "timestamptz[]" | "timestamp with time zone[]" | "_timestamptz" => {
                DataType::TimestampTzArray
            }
            "interval[]" | "_interval" => DataType::IntervalArray,
            "time[]" | "time without time zone[]" | "_time" => DataType::TimeArray,
            "bytea[]" | "_bytea" => DataType::ByteaArray,
            "name" => DataType::Name,
            "oid" | "regclass" | "regtype" | "regproc" | "regnamespace" | "regrole" => {
                DataType::Oid
            }
            "\"char\"" => DataType::CatalogChar,
            "text[]"
            | "_text"
            | "name[]"
            | "varchar[]"
            | "_varchar"
            | "character varying[]"
            | "\"char\"[]" => DataType::TextArray,
            "int2[]" | "smallint[]" | "_int2" | "oid[]" => DataType::Int2Array,
            "int4[]" | "integer[]" | "int[]" | "_int4" => DataType::Int4Array,
            "int8[]" | "bigint[]" | "_int8" => DataType::Int8Array,
            "bool[]" | "boolean[]" | "_bool" => DataType::BoolArray,
            _ => return Err(SqlError::feature_not_supported(format!("type {name}"))),
        })
    }

    /// The type a catalog's (type OID, type modifier) pair describes, as `format_type` sees it.
    pub fn from_oid_and_typmod(oid: u32, typmod: i32) -> Option<DataType> {
        let base = DataType::from_oid(oid)?;
        Some(match base {
            DataType::Varchar(_) if typmod >= 4 => DataType::Varchar(Some((typmod - 4) as u32)),
            DataType::Char(_) if typmod >= 4 => DataType::Char((typmod - 4) as u32),
            DataType::Numeric { .. } if typmod >= 4 => {
                let t = (typmod - 4) as u32;
                DataType::Numeric {
                    precision: Some(t >> 16),
                    scale: t & 0xFFFF,
                }
            }
            // An array's modifier is its element's.
            DataType::NumericArray { .. } => {
                DataType::from_oid_and_typmod(DataType::UNCONSTRAINED_NUMERIC.oid(), typmod)?
                    .array_of()?
            }
            other => other,
        })
    }

    /// The name `format_type` and error messages use.
    pub fn pg_name(self) -> String {
        match self {
            DataType::Bool => "boolean".into(),
            DataType::Int2 => "smallint".into(),
            DataType::Int4 => "integer".into(),
            DataType::Int8 => "bigint".into(),
            DataType::Float4 => "real".into(),
            DataType::Float8 => "double precision".into(),
            DataType::Numeric {
                precision: Some(p),
                scale,
            } => format!("numeric({p},{scale})"),
            DataType::Numeric {
                precision: None, ..
            } => "numeric".into(),
            DataType::Text => "text".into(),
            DataType::Varchar(Some(n)) => format!("character varying({n})"),
            DataType::Varchar(None) => "character varying".into(),
            DataType::Char(n) => format!("character({n})"),
            DataType::Bytea => "bytea".into(),
            DataType::Timestamp => "timestamp without time zone".into(),
            DataType::TimestampTz => "timestamp with time zone".into(),
            DataType::Date => "date".into(),
            DataType::Name => "name".into(),
            DataType::Oid => "oid".into(),
            DataType::CatalogChar => "\"char\"".into(),
            DataType::TextArray => "text[]".into(),
            DataType::Int2Array => "smallint[]".into(),
            DataType::Int4Array => "integer[]".into(),
            DataType::Int8Array => "bigint[]".into(),
            DataType::BoolArray => "boolean[]".into(),
            DataType::Unknown => "unknown".into(),
            DataType::Interval => "interval".into(),
            DataType::Json => "json".into(),
            DataType::Int2Vector => "int2vector".into(),
            DataType::Jsonb => "jsonb".into(),
            DataType::JsonbArray => "jsonb[]".into(),
            DataType::JsonArray => "json[]".into(),
            DataType::Uuid => "uuid".into(),
            DataType::UuidArray => "uuid[]".into(),
            DataType::Float4Array => "real[]".into(),
            DataType::Float8Array => "double precision[]".into(),
            DataType::NumericArray {
                precision: Some(p),
                scale,
            } => format!("numeric({p},{scale})[]"),
            DataType::NumericArray {
                precision: None, ..
            } => "numeric[]".into(),
            DataType::DateArray => "date[]".into(),
            DataType::TimestampArray => "timestamp without time zone[]".into(),
            DataType::TimestampTzArray => "timestamp with time zone[]".into(),
            DataType::IntervalArray => "interval[]".into(),
            DataType::ByteaArray => "bytea[]".into(),
            DataType::Enum(e) => quote_ident(e.name),
            DataType::Time => "time without time zone".into(),
            DataType::TimeArray => "time without time zone[]".into(),
        }
    }

    /// `pg_type.typname` for the type's OID.
    pub fn typname(self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::Int2 => "int2",
            DataType::Int4 => "int4",
            DataType::Int8 => "int8",
            DataType::Float4 => "float4",
            DataType::Float8 => "float8",
            DataType::Numeric { .. } => "numeric",
            DataType::Text | DataType::Unknown => "text",
            DataType::Varchar(_) => "varchar",
            DataType::Char(_) => "bpchar",
            DataType::Bytea => "bytea",
            DataType::Timestamp => "timestamp",
            DataType::TimestampTz => "timestamptz",
            DataType::Date => "date",
            DataType::Name => "name",
            DataType::Oid => "oid",
            DataType::CatalogChar => "char",
            DataType::TextArray => "_text",
            DataType::Int2Array => "_int2",
            DataType::Int4Array => "_int4",
            DataType::Int8Array => "_int8",
            DataType::BoolArray => "_bool",
            DataType::Interval => "interval",
            DataType::Json => "json",
            DataType::Int2Vector => "int2vector",
            DataType::Jsonb => "jsonb",
            DataType::JsonbArray => "_jsonb",
            DataType::JsonArray => "_json",
            DataType::Uuid => "uuid",
            DataType::UuidArray => "_uuid",
            DataType::Float4Array => "_float4",
            DataType::Float8Array => "_float8",
            DataType::NumericArray { .. } => "_numeric",
            DataType::DateArray => "_date",
            DataType::TimestampArray => "_timestamp",
            DataType::TimestampTzArray => "_timestamptz",
            DataType::IntervalArray => "_interval",
            DataType::ByteaArray => "_bytea",
            DataType::Enum(e) => e.name,
            DataType::Time => "time",
            DataType::TimeArray => "_time",
        }
    }

    /// Every type `pg_type` lists.
    pub const ALL: [DataType; 40] = [
        DataType::Bool,
        DataType::Int2,
        DataType::Int4,
        DataType::Int8,
        DataType::Float4,
        DataType::Float8,
        DataType::UNCONSTRAINED_NUMERIC,
        DataType::Text,
        DataType::Varchar(None),
        DataType::Char(1),
        DataType::Bytea,
        DataType::Timestamp,
        DataType::TimestampTz,
        DataType::Date,
        DataType::Name,
        DataType::Oid,
        DataType::CatalogChar,
        DataType::TextArray,
        DataType::Int2Array,
        DataType::Int4Array,
        DataType::Int8Array,
        DataType::BoolArray,
        DataType::Interval,
        DataType::Json,
        DataType::Int2Vector,
        DataType::Jsonb,
        DataType::JsonbArray,
        DataType::JsonArray,
        DataType::Uuid,
        DataType::UuidArray,
        DataType::Float4Array,
        DataType::Float8Array,
        DataType::NumericArray {
            precision: None,
            scale: 0,
        },
        DataType::DateArray,
        DataType::TimestampArray,
        DataType::TimestampTzArray,
        DataType::IntervalArray,
        DataType::ByteaArray,
        DataType::Time,
        DataType::TimeArray,
    ];
}

/// A name as `quote_ident` and `format_type` write it: double-quoted unless it reads back as
/// itself unquoted (a plain lowercase identifier).
pub fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pg_name())
    }
}

impl DataType {
    /// An array type's element type.
    pub fn element(self) -> Option<DataType> {
        Some(match self {
            DataType::TextArray => DataType::Text,
            DataType::Int2Array | DataType::Int2Vector => DataType::Int2,
            DataType::Int4Array => DataType::Int4,
            DataType::Int8Array => DataType::Int8,
            DataType::BoolArray => DataType::Bool,
            DataType::JsonbArray => DataType::Jsonb,
            DataType::JsonArray => DataType::Json,
            DataType::UuidArray => DataType::Uuid,
            DataType::Float4Array => DataType::Float4,
            DataType::Float8Array => DataType::Float8,
            DataType::NumericArray { precision, scale } => DataType::Numeric { precision, scale },
            DataType::DateArray => DataType::Date,
            DataType::TimestampArray => DataType::Timestamp,
            DataType::TimestampTzArray => DataType::TimestampTz,
            DataType::IntervalArray => DataType::Interval,
            DataType::TimeArray => DataType::Time,
            DataType::ByteaArray => DataType::Bytea,
            _ => return None,
        })
    }

    /// The array type whose elements are of this type, where there is one.
    pub fn array_of(self) -> Option<DataType> {
        Some(match self {
            DataType::Int2 => DataType::Int2Array,
            DataType::Int4 => DataType::Int4Array,
            DataType::Int8 => DataType::Int8Array,
            DataType::Bool => DataType::BoolArray,
            DataType::Jsonb => DataType::JsonbArray,
            DataType::Json => DataType::JsonArray,
            DataType::Uuid => DataType::UuidArray,
            DataType::Float4 => DataType::Float4Array,
            DataType::Float8 => DataType::Float8Array,
            DataType::Numeric { precision, scale } => DataType::NumericArray { precision, scale },
            DataType::Date => DataType::DateArray,
            DataType::Timestamp => DataType::TimestampArray,
            DataType::TimestampTz => DataType::TimestampTzArray,
            DataType::Interval => DataType::IntervalArray,
            DataType::Time => DataType::TimeArray,
            DataType::Bytea => DataType::ByteaArray,
            DataType::Text | DataType::Varchar(_) | DataType::Name => DataType::TextArray,
            _ => return None,
        })
    }
}
