//! `SqlError`: the one error type every SQL-facing layer returns, and the one place where an
//! error kind becomes a SQLSTATE. The server turns it into an ErrorResponse unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What went wrong, as a client would classify it. Each kind maps to one SQLSTATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    Syntax,
    FeatureNotSupported,
    UndefinedTable,
    UndefinedColumn,
    UndefinedFunction,
    /// An operator or function call that fits more than one candidate (`- 'text'`).
    AmbiguousFunction,
    UndefinedObject,
    UndefinedParameter,
    DuplicateTable,
    DuplicateObject,
    DuplicateFunction,
    DuplicateColumn,
    AmbiguousColumn,
    DatatypeMismatch,
    InvalidText,
    InvalidBinary,
    InvalidParameterValue,
    NumericOutOfRange,
    StringTooLong,
    DivisionByZero,
    UniqueViolation,
    ForeignKeyViolation,
    NotNullViolation,
    CheckViolation,
    InvalidPrimaryKey,
    InvalidColumnReference,
    GroupingError,
    CardinalityViolation,
    SerializationFailure,
    /// 40003: the statement may or may not have taken effect (a replica lost its way to
    /// the leader after sending it).
    StatementCompletionUnknown,
    ActiveTransaction,
    NoActiveTransaction,
    InFailedTransaction,
    ReadOnlyTransaction,
    ProgramLimitExceeded,
    StatementTooComplex,
    QueryCanceled,
    InvalidName,
    InvalidPreparedStatement,
    /// PREPARE or Parse of a name already in use.
    DuplicatePreparedStatement,
    InvalidCursor,
    ProtocolViolation,
    OutOfMemory,
    DiskFull,
    Io,
    Internal,
    AdminShutdown,
    CannotConnectNow,
    InsufficientPrivilege,
    GeneratedAlways,
    /// Stored or logged bytes this build cannot read.
    DataCorrupted,
    /// A name given twice where names must be distinct (`WITH` queries).
    DuplicateAlias,
    /// A window function where none may be, or a window clause that does not fit.
    WindowingError,
    /// A clause on an object of the wrong kind (FILTER on a plain function).
    WrongObjectType,
    /// `ntile` with a bucket count below one.
    InvalidNtileArgument,
    /// `nth_value` with a position below one.
    InvalidNthValueArgument,
    /// Text that does not read as a date, timestamp or interval.
    InvalidDatetimeFormat,
    InvalidRegularExpression,
    InvalidArgumentForLogarithm,
    InvalidArgumentForPowerFunction,
    DatetimeFieldOverflow,
    /// A savepoint name no savepoint has.
    InvalidSavepoint,
    /// A view whose stored query no longer binds as it did.
    InvalidObjectDefinition,
    InvalidTableDefinition,
    /// A table a view reads, dropped or altered.
    DependentObjectsStillExist,
    SequenceGeneratorLimitExceeded,
    ObjectNotInPrerequisiteState,
    /// A foreign key's referenced columns are not a primary key or unique index.
    InvalidForeignKey,
    /// A Unicode escape jsonb cannot hold (`\u0000`).
    UntranslatableCharacter,
    /// A NULL where a value is required (a NULL element of a JSON path).
    NullValueNotAllowed,
    /// No cast exists between the two types (`1::uuid`).
    CannotCoerce,
    /// A lock not taken within `lock_timeout`.
    LockNotAvailable,
    /// A session idle inside a transaction block past `idle_in_transaction_session_timeout`.
    IdleInTransactionSessionTimeout,
    /// A session idle past `idle_session_timeout`.
    IdleSessionTimeout,
    /// The client's connection closed while its statement ran.
    ConnectionFailure,
    /// A warning's class (sent as a notice, never as an error).
    Warning,
    /// A name the system keeps for itself (`public`, `pg_...` roles).
    ReservedName,
    /// A GRANT that cannot be (a role made a member of itself, a grant option not held).
    InvalidGrantOperation,
    /// A role that may not log in, or a login otherwise refused after its password.
    InvalidAuthorizationSpecification,
    /// DROP ROLE of the role the session runs as.
    ObjectInUse,
    /// Too many connections for a role (`CONNECTION LIMIT`) or the server.
    TooManyConnections,
    /// A notice's class (00000: sent with severity NOTICE, never as an error).
    Notice,
    /// A database that does not exist (there is one, `ledger`).
    UndefinedDatabase,
    /// A schema that does not exist (there is one, `public`).
    InvalidSchemaName,
}

impl ErrorKind {
    /// The five-character SQLSTATE a PostgreSQL server would send.
    pub fn sqlstate(self) -> &'static str {
        use ErrorKind::*;
        match self {
            Syntax => "42601",
            FeatureNotSupported => "0A000",
            UndefinedTable => "42P01",
            UndefinedColumn => "42703",
            UndefinedFunction => "42883",
            AmbiguousFunction => "42725",
            UndefinedObject => "42704",
            UndefinedParameter => "42P02",
            DuplicateTable => "42P07",
            DuplicateObject => "42710",
            DuplicateFunction => "42723",
            DuplicateColumn => "42701",
            AmbiguousColumn => "42702",
            DatatypeMismatch => "42804",
            InvalidText => "22P02",
            InvalidBinary => "22P03",
            InvalidParameterValue => "22023",
            NumericOutOfRange => "22003",
            StringTooLong => "22001",
            DivisionByZero => "22012",
            UniqueViolation => "23505",
            ForeignKeyViolation => "23503",
            NotNullViolation => "23502",
            CheckViolation => "23514",
            InvalidPrimaryKey => "42P16",
            InvalidColumnReference => "42P10",
            GroupingError => "42803",
            CardinalityViolation => "21000",
            SerializationFailure => "40001",
            StatementCompletionUnknown => "40003",
            ActiveTransaction => "25001",
            NoActiveTransaction => "25P01",
            InFailedTransaction => "25P02",
            ReadOnlyTransaction => "25006",
            ProgramLimitExceeded => "54000",
            StatementTooComplex => "54001",
            QueryCanceled => "57014",
            InvalidName => "42602",
            InvalidPreparedStatement => "26000",
            DuplicatePreparedStatement => "42P05",
            InvalidCursor => "34000",
            ProtocolViolation => "08P01",
            OutOfMemory => "53200",
            DiskFull => "53100",
            Io => "58030",
            Internal => "XX000",
            AdminShutdown => "57P01",
            CannotConnectNow => "57P03",
            InsufficientPrivilege => "42501",
            GeneratedAlways => "428C9",
            DataCorrupted => "XX001",
            DuplicateAlias => "42712",
            WindowingError => "42P20",
            WrongObjectType => "42809",
            InvalidNtileArgument => "22014",
            InvalidNthValueArgument => "22016",
            InvalidDatetimeFormat => "22007",
            InvalidRegularExpression => "2201B",
            InvalidArgumentForLogarithm => "2201E",
            InvalidArgumentForPowerFunction => "2201F",
            DatetimeFieldOverflow => "22008",
            InvalidSavepoint => "3B001",
            InvalidObjectDefinition => "42P17",
            InvalidTableDefinition => "42P16",
            DependentObjectsStillExist => "2BP01",
            SequenceGeneratorLimitExceeded => "2200H",
            ObjectNotInPrerequisiteState => "55000",
            InvalidForeignKey => "42830",
            UntranslatableCharacter => "22P05",
            NullValueNotAllowed => "22004",
            CannotCoerce => "42846",
            LockNotAvailable => "55P03",
            IdleInTransactionSessionTimeout => "25P03",
            IdleSessionTimeout => "57P05",
            ConnectionFailure => "08006",
            Warning => "01000",
            ReservedName => "42939",
            InvalidGrantOperation => "0LP01",
            InvalidAuthorizationSpecification => "28000",
            ObjectInUse => "55006",
            TooManyConnections => "53300",
            Notice => "00000",
            UndefinedDatabase => "3D000",
            InvalidSchemaName => "3F000",
        }
    }
}

/// An error with its kind, a message a person understands, and optionally a detail and the
/// 1-based character position in the statement it refers to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SqlError {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<String>,
    pub position: Option<u32>,
}

pub type SqlResult<T> = Result<T, SqlError>;

impl SqlError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SqlError {
        SqlError {
            kind,
            message: message.into(),
            detail: None,
            position: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> SqlError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_position(mut self, position: u32) -> SqlError {
        self.position = Some(position);
        self
    }

    pub fn sqlstate(&self) -> &'static str {
        self.kind.sqlstate()
    }

    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::Syntax, message)
    }

    /// `0A000`, always naming what is missing: "not supported yet: X".
    pub fn feature_not_supported(what: impl fmt::Display) -> SqlError {
        SqlError::new(
            ErrorKind::FeatureNotSupported,
            format!("not supported yet: {what}"),
        )
    }

    pub fn undefined_table(name: &str) -> SqlError {
        SqlError::new(
            ErrorKind::UndefinedTable,
            format!("relation \"{name}\" does not exist"),
        )
    }

    pub fn undefined_column(name: &str) -> SqlError {
        SqlError::new(
            ErrorKind::UndefinedColumn,
            format!("column \"{name}\" does not exist"),
        )
    }

    pub fn mismatch(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::DatatypeMismatch, message)
    }

    pub fn invalid_text(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::InvalidText, message)
    }

    pub fn invalid_binary(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::InvalidBinary, message)
    }

    pub fn numeric_out_of_range(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::NumericOutOfRange, message)
    }

    pub fn division_by_zero() -> SqlError {
        SqlError::new(ErrorKind::DivisionByZero, "division by zero")
    }

    pub fn internal(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::Internal, message)
    }

    pub fn serialization_failure(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::SerializationFailure, message)
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.sqlstate())
    }
}

impl std::error::Error for SqlError {}
