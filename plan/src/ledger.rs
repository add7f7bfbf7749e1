//! The ledger tables as the binder sees them: which table plays which role, where each
//! ledger column sits, which columns only the engine may write, and the rules that keep
//! clients from writing them directly. The semantics of a transfer live in the executor
//! (`ledger::transfer`); this module only decides what a statement may ask for.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::catalog::{Catalog, TableDef};

/// The type of TigerBeetle's 128-bit amounts and balances: NUMERIC(39,0) holds every value
/// from 0 to 2^128 − 1 (`Numeric`).
pub const AMOUNT: DataType = DataType::Numeric {
    precision: Some(39),
    scale: 0,
};

/// Whether a column of type `ty` may hold a ledger amount or balance: NUMERIC(39,0), or
/// BIGINT — the type before migration 0010 widened them, which a log replayed across the
/// upgrade applies to, and which a table may still be declared with (amounts up to
/// 2^63 − 1).
pub fn amount_type(ty: DataType) -> bool {
    ty == AMOUNT || ty == DataType::Int8
}

/// The largest amount a column of amount type `ty` holds.
pub fn amount_max(ty: DataType) -> u128 {
    if ty == DataType::Int8 {
        i64::MAX as u128
    } else {
        u128::MAX
    }
}

/// Whether a column of type `actual` is what a ledger column of type `required` needs.
fn fits_type(required: DataType, actual: DataType) -> bool {
    actual == required || (required == AMOUNT && amount_type(actual))
}

/// The part a table plays in the ledger. Set once, by the migration that creates the table
/// (`CREATE TABLE ... WITH (ledger_role = 'accounts')`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LedgerRole {
    Accounts,
    Transfers,
    /// The state of every pending transfer: pending, posted, voided or expired.
    PendingTransfers,
    /// An account's balances after each of its transfers (accounts with `history`).
    AccountBalances,
    /// The ids of transfers that failed for a reason that can change (TigerBeetle's burned
    /// ids: `id_already_failed`).
    TransferFailures,
    /// Every change of balances with both accounts' balances after it (TigerBeetle's
    /// change events). Each account's side of a row lives in that account's partition; a
    /// read puts a row's sides together (`is_merged`).
    ChangeEvents,
}

impl LedgerRole {
    const ALL: [LedgerRole; 6] = [
        LedgerRole::Accounts,
        LedgerRole::Transfers,
        LedgerRole::PendingTransfers,
        LedgerRole::AccountBalances,
        LedgerRole::TransferFailures,
        LedgerRole::ChangeEvents,
    ];

    pub fn parse(text: &str) -> Option<LedgerRole> {
        LedgerRole::ALL.into_iter().find(|role| role.name() == text)
    }

    pub fn name(self) -> &'static str {
        match self {
            LedgerRole::Accounts => "accounts",
            LedgerRole::Transfers => "transfers",
            LedgerRole::PendingTransfers => "pending_transfers",
            LedgerRole::AccountBalances => "account_balances",
            LedgerRole::TransferFailures => "transfer_failures",
            LedgerRole::ChangeEvents => "change_events",
        }
    }

    /// Whether a row of this role may be stored in parts, each in a different partition
    /// under the same key, which a read combines (a change event's two accounts' sides).
    pub fn is_merged(self) -> bool {
        self == LedgerRole::ChangeEvents
    }

    /// The columns a table in this role must have, and their types.
    fn required_columns(self) -> &'static [(&'static str, DataType)] {
        use DataType::*;
        match self {
            LedgerRole::Accounts => &[
                ("id", Int8),
                ("ledger", Int4),
                ("code", Int4),
                ("debits_pending", AMOUNT),
                ("debits_posted", AMOUNT),
                ("credits_pending", AMOUNT),
                ("credits_posted", AMOUNT),
                ("debits_must_not_exceed_credits", Bool),
                ("credits_must_not_exceed_debits", Bool),
                ("history", Bool),
                ("user_data", Int8),
                ("created_at", TimestampTz),
            ],
            LedgerRole::Transfers => &[
                ("id", Int8),
                ("debit_account_id", Int8),
                ("credit_account_id", Int8),
                ("amount", AMOUNT),
                ("ledger", Int4),
                ("code", Int4),
                ("pending", Bool),
                ("pending_id", Int8),
                ("post_pending", Bool),
                ("void_pending", Bool),
                ("timeout", Int4),
                ("user_data", Int8),
                ("created_at", TimestampTz),
            ],
            LedgerRole::PendingTransfers => &[
                ("id", Int8),
                ("status", Text),
                ("expires_at", TimestampTz),
                ("resolved_by", Int8),
            ],
            LedgerRole::TransferFailures => {
                &[("id", Int8), ("result", Text), ("failed_at", TimestampTz)]
            }
            LedgerRole::AccountBalances => &[
                ("account_id", Int8),
                ("created_at", TimestampTz),
                ("transfer_id", Int8),
                ("debits_pending", AMOUNT),
                ("debits_posted", AMOUNT),
                ("credits_pending", AMOUNT),
                ("credits_posted", AMOUNT),
            ],
            LedgerRole::ChangeEvents => &[
                ("timestamp", Int8),
                ("type", Text),
                ("transfer_id", Int8),
                ("transfer_amount", AMOUNT),
                ("transfer_pending_id", Int8),
                ("ledger", Int4),
                ("debit_account_id", Int8),
                ("debit_account_debits_pending", AMOUNT),
                ("debit_account_debits_posted", AMOUNT),
                ("debit_account_credits_pending", AMOUNT),
                ("debit_account_credits_posted", AMOUNT),
                ("credit_account_id", Int8),
                ("credit_account_debits_pending", AMOUNT),
                ("credit_account_debits_posted", AMOUNT),
                ("credit_account_credits_pending", AMOUNT),
                ("credit_account_credits_posted", AMOUNT),
            ],
        }
    }

    /// The fields migrations added after the tables were created, with their types: the
    /// engine reads them where a table has them.
    fn added_fields(self) -> &'static [(&'static str, DataType)] {
        use DataType::*;
        match self {
            LedgerRole::Accounts => &[
                ("closed", Bool),
                ("user_data_64", Int8),
                ("user_data_32", Int4),
                ("timestamp", Int8),
                ("imported", Bool),
            ],
            LedgerRole::Transfers => &[
                ("balancing_debit", Bool),
                ("balancing_credit", Bool),
                ("closing_debit", Bool),
                ("closing_credit", Bool),
                ("user_data_64", Int8),
                ("user_data_32", Int4),
                ("timestamp", Int8),
                ("imported", Bool),
            ],
            _ => &[],
        }
    }

    /// The type of the added field `name` (of either table: the names share types).
    fn added_field(name: &str) -> Option<DataType> {
        [LedgerRole::Accounts, LedgerRole::Transfers]
            .iter()
            .flat_map(|role| role.added_fields())
            .find(|(n, _)| *n == name)
            .map(|(_, ty)| *ty)
    }

    /// The primary key a table in this role must have.
    fn required_key(self) -> &'static [&'static str] {
        match self {
            LedgerRole::AccountBalances => &["account_id", "created_at", "transfer_id"],
            LedgerRole::ChangeEvents => &["timestamp"],
            _ => &["id"],
        }
    }

    /// Columns whose values the engine sets, whatever a client sends.
    fn engine_columns(self) -> &'static [&'static str] {
        match self {
            LedgerRole::Accounts => &[
                "debits_pending",
                "debits_posted",
                "credits_pending",
                "credits_posted",
                "created_at",
            ],
            LedgerRole::Transfers => &["created_at"],
            _ => &[],
        }
    }

    /// Whether clients may insert rows at all (the other roles are written by the engine).
    fn client_inserts(self) -> bool {
        matches!(self, LedgerRole::Accounts | LedgerRole::Transfers)
    }
}

/// Checks that a table about to be created in `role` has the shape the executor relies on.
pub fn validate_table(catalog: &Catalog, role: LedgerRole, table: &TableDef) -> SqlResult<()> {
    if let Some(existing) = catalog.ledger_table(role) {
        return Err(SqlError::new(
            ErrorKind::DuplicateObject,
            format!(
                "table \"{}\" already has the ledger role {}",
                existing.name,
                role.name()
            ),
        ));
    }
    for (name, ty) in role.required_columns() {
        let Some(i) = table.column_index(name) else {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "a table with the ledger role {} needs a column \"{name}\"",
                    role.name()
                ),
            ));
        };
        if !fits_type(*ty, table.columns[i].ty) {
            return Err(wrong_type(role, name, *ty));
        }
    }
    let key: Vec<&str> = table
        .primary_key
        .iter()
        .map(|&c| table.columns[c].name.as_str())
        .collect();
    if key != role.required_key() {
        return Err(SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "a {} table must have the primary key ({})",
                role.name(),
                role.required_key().join(", ")
            ),
        ));
    }
    Ok(())
}

fn wrong_type(role: LedgerRole, name: &str, ty: DataType) -> SqlError {
    let also = if ty == AMOUNT { " (or bigint)" } else { "" };
    SqlError::new(
        ErrorKind::InvalidParameterValue,
        format!(
            "column \"{name}\" of a {} table must be of type {}{also}",
            role.name(),
            ty.pg_name()
        ),
    )
}

fn immutable(table: &TableDef, role: LedgerRole) -> SqlError {
    let what = match role {
        LedgerRole::Accounts => "accounts cannot be deleted",
        LedgerRole::Transfers => "transfers are immutable",
        LedgerRole::PendingTransfers
        | LedgerRole::AccountBalances
        | LedgerRole::TransferFailures
        | LedgerRole::ChangeEvents => "its rows are maintained by the ledger",
    };
    SqlError::new(
        ErrorKind::InsufficientPrivilege,
        format!("cannot change table \"{}\": {what}", table.name),
    )
}

/// An INSERT (or COPY) into `table` naming `columns`: engine-maintained columns are refused.
pub fn check_insert(table: &TableDef, columns: &[usize], do_update: bool) -> SqlResult<()> {
    let Some(role) = table.ledger else {
        return Ok(());
    };
    if !role.client_inserts() {
        return Err(immutable(table, role));
    }
    if do_update {
        return Err(SqlError::new(
            ErrorKind::InsufficientPrivilege,
            format!(
                "ON CONFLICT DO UPDATE is not allowed on \"{}\": {} are changed only by transfers",
                table.name,
                role.name()
            ),
        ));
    }
    for &c in columns {
        let name = &table.columns[c].name;
        if role.engine_columns().contains(&name.as_str()) {
            return Err(generated(table, name));
        }
    }
    Ok(())
}

fn generated(table: &TableDef, column: &str) -> SqlError {
    let why = if column == "created_at" {
        "it is the time the ledger applied the row"
    } else {
        "balances are maintained by the ledger and change only through transfers"
    };
    SqlError::new(
        ErrorKind::GeneratedAlways,
        format!(
            "cannot set column \"{column}\" of \"{}\": {why}",
            table.name
        ),
    )
}

/// An account's application data, the columns an UPDATE may change.
const USER_DATA: &[&str] = &["user_data", "user_data_64", "user_data_32"];

/// An UPDATE of `columns` of `table`: only an account's user data may change.
pub fn check_update(table: &TableDef, columns: &[usize]) -> SqlResult<()> {
    let Some(role) = table.ledger else {
        return Ok(());
    };
    if role != LedgerRole::Accounts {
        return Err(immutable(table, role));
    }
    for &c in columns {
        let name = &table.columns[c].name;
        if role.engine_columns().contains(&name.as_str()) {
            return Err(generated(table, name));
        }
        if !USER_DATA.contains(&name.as_str()) {
            return Err(SqlError::new(
                ErrorKind::InsufficientPrivilege,
                format!(
                    "cannot change column \"{name}\" of \"{}\": only user_data, user_data_64 and user_data_32 of an account may be updated",
                    table.name
                ),
            ));
        }
    }
    Ok(())
}

/// ALTER TABLE of a ledger table: only new columns of accounts and transfers (an
/// application's own, or a migration's new ledger fields); anything else would change a
/// column the engine relies on.
pub fn check_ledger_alter(table: &TableDef, role: LedgerRole, alter: LedgerAlter) -> SqlResult<()> {
    match alter {
        LedgerAlter::AddsColumns if role.client_inserts() => return Ok(()),
        LedgerAlter::WidensAmounts => return Ok(()),
        _ => {}
    }
    Err(SqlError::feature_not_supported(format!(
        "ALTER TABLE on the ledger's table \"{}\" other than ADD COLUMN{}",
        table.name,
        if role.client_inserts() {
            " or ALTER COLUMN ... TYPE numeric(39,0) of an amount"
        } else {
            " (and not that: its rows are written by the ledger) or ALTER COLUMN ... TYPE numeric(39,0) of an amount"
        }
    )))
}

/// What an ALTER TABLE of a ledger table does, as far as the ledger cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerAlter {
    /// Only ADD COLUMN: the engine finds its columns by name, and a row stays in its
    /// partition.
    AddsColumns,
    /// Only ALTER COLUMN ... TYPE numeric(39,0) of amount or balance columns (migration
    /// 0010): every value stays the same number, every row where it is.
    WidensAmounts,
    Other,
}

impl LedgerRole {
    /// Whether `name` is one of this role's amount or balance columns (type `AMOUNT`).
    pub fn amount_field(self, name: &str) -> bool {
        self.required_columns()
            .iter()
            .any(|(n, ty)| *n == name && *ty == AMOUNT)
    }
}

/// A ledger table as ALTER TABLE leaves it: a column named after one of the ledger's added
/// fields must have that field's type, or the engine could not read it.
pub fn check_ledger_fields(table: &TableDef, role: LedgerRole) -> SqlResult<()> {
    for (name, ty) in role.added_fields() {
        if let Some(c) = table.column_index(name) {
            if table.columns[c].ty != *ty {
                return Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "column \"{name}\" of a {} table must be of type {}: it is a ledger field",
                        role.name(),
                        ty.pg_name()
                    ),
                ));
            }
        }
    }
    for (name, ty) in role.required_columns() {
        if let Some(c) = table.column_index(name) {
            if !fits_type(*ty, table.columns[c].ty) {
                return Err(wrong_type(role, name, *ty));
            }
        }
    }
    Ok(())
}

/// DELETE, TRUNCATE, DROP TABLE or ALTER TABLE of a ledger table: refused.
pub fn check_remove(table: &TableDef) -> SqlResult<()> {
    match table.ledger {
        Some(role) => Err(immutable(table, role)),
        None => Ok(()),
    }
}

/// Where the executor finds each ledger column: resolved once per catalog version.
#[derive(Clone, Debug)]
pub struct LedgerSchema {
    pub accounts: Arc<TableDef>,
    pub account: AccountColumns,
    pub transfers: Arc<TableDef>,
    pub transfer: TransferColumns,
    pub pending: Arc<TableDef>,
    pub pending_col: PendingColumns,
    pub balances: Arc<TableDef>,
    pub balance: BalanceColumns,
    /// The burned transfer ids, once migration 0004 has made their table.
    pub failures: Option<(Arc<TableDef>, FailureColumns)>,
    /// The change events, once migration 0009 has made their table.
    pub changes: Option<(Arc<TableDef>, ChangeColumns)>,
    /// The largest balance an account holds: 2^128 − 1, or 2^63 − 1 while a balance column
    /// is BIGINT (before migration 0010) — TigerBeetle's overflow rules apply at it.
    pub amount_max: u128,
}

/// Where a change event's fields are.
#[derive(Clone, Debug)]
pub struct ChangeColumns {
    pub timestamp: usize,
    pub kind: usize,
    pub transfer_id: usize,
    pub transfer_amount: usize,
    pub transfer_pending_id: usize,
    pub ledger: usize,
    pub debit: SideColumns,
    pub credit: SideColumns,
}

/// One account's side of a change event: the account and its balances after it.
#[derive(Clone, Debug)]
pub struct SideColumns {
    pub account_id: usize,
    pub debits_pending: usize,
    pub debits_posted: usize,
    pub credits_pending: usize,
    pub credits_posted: usize,
}

impl ChangeColumns {
    fn resolve(table: &TableDef) -> SqlResult<ChangeColumns> {
        let side = |prefix: &str| -> SqlResult<SideColumns> {
            let at = |name: &str| column(table, &format!("{prefix}_account_{name}"));
            Ok(SideColumns {
                account_id: at("id")?,
                debits_pending: at("debits_pending")?,
                debits_posted: at("debits_posted")?,
                credits_pending: at("credits_pending")?,
                credits_posted: at("credits_posted")?,
            })
        };
        Ok(ChangeColumns {
            timestamp: column(table, "timestamp")?,
            kind: column(table, "type")?,
            transfer_id: column(table, "transfer_id")?,
            transfer_amount: column(table, "transfer_amount")?,
            transfer_pending_id: column(table, "transfer_pending_id")?,
            ledger: column(table, "ledger")?,
            debit: side("debit")?,
            credit: side("credit")?,
        })
    }
}

#[derive(Clone, Debug)]
pub struct FailureColumns {
    pub id: usize,
    pub result: usize,
    pub failed_at: usize,
}

#[derive(Clone, Debug)]
pub struct AccountColumns {
    pub id: usize,
    pub ledger: usize,
    pub code: usize,
    pub debits_pending: usize,
    pub debits_posted: usize,
    pub credits_pending: usize,
    pub credits_posted: usize,
    pub debits_must_not_exceed_credits: usize,
    pub credits_must_not_exceed_debits: usize,
    pub history: usize,
    pub user_data: usize,
    pub created_at: usize,
    /// Migration 0005's fields, None in a catalog from before it (a log replayed across
    /// the upgrade): TigerBeetle's `closed` flag and the 64- and 32-bit user data.
    pub closed: Option<usize>,
    pub user_data_64: Option<usize>,
    pub user_data_32: Option<usize>,
    /// Migration 0006's (None before it): the account's own timestamp, unique and
    /// increasing (nanoseconds; TigerBeetle's `timestamp`).
    pub timestamp: Option<usize>,
    /// Migration 0007's (None before it): an imported account, whose timestamp its
    /// creator gave.
    pub imported: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct TransferColumns {
    pub id: usize,
    pub debit_account_id: usize,
    pub credit_account_id: usize,
    pub amount: usize,
    pub ledger: usize,
    pub code: usize,
    pub pending: usize,
    pub pending_id: usize,
    pub post_pending: usize,
    pub void_pending: usize,
    pub timeout: usize,
    pub user_data: usize,
    pub created_at: usize,
    /// Migration 0005's fields (None before it): TigerBeetle's balancing and closing flags
    /// and the 64- and 32-bit user data.
    pub balancing_debit: Option<usize>,
    pub balancing_credit: Option<usize>,
    pub closing_debit: Option<usize>,
    pub closing_credit: Option<usize>,
    pub user_data_64: Option<usize>,
    pub user_data_32: Option<usize>,
    /// Migration 0006's (None before it): the transfer's own timestamp.
    pub timestamp: Option<usize>,
    /// Migration 0007's (None before it): see `AccountColumns::imported`.
    pub imported: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct PendingColumns {
    pub id: usize,
    pub status: usize,
    pub expires_at: usize,
    pub resolved_by: usize,
}

#[derive(Clone, Debug)]
pub struct BalanceColumns {
    pub account_id: usize,
    pub created_at: usize,
    pub transfer_id: usize,
    pub debits_pending: usize,
    pub debits_posted: usize,
    pub credits_pending: usize,
    pub credits_posted: usize,
}

fn column(table: &TableDef, name: &str) -> SqlResult<usize> {
    table.column_index(name).ok_or_else(|| {
        SqlError::internal(format!(
            "ledger table \"{}\" has no column \"{name}\"",
            table.name
        ))
    })
}

/// A ledger field a later migration added: where it is, if the table has it with the
/// type the engine reads (`check_ledger_fields` refuses one added with another type).
fn optional(table: &TableDef, name: &str) -> Option<usize> {
    let ty = LedgerRole::added_field(name)?;
    table
        .column_index(name)
        .filter(|&c| table.columns[c].ty == ty)
}

impl LedgerSchema {
    /// The ledger tables of `catalog`, or None before the migration created them.
    pub fn resolve(catalog: &Catalog) -> SqlResult<Option<LedgerSchema>> {
        let (Some(accounts), Some(transfers), Some(pending), Some(balances)) = (
            catalog.ledger_table(LedgerRole::Accounts),
            catalog.ledger_table(LedgerRole::Transfers),
            catalog.ledger_table(LedgerRole::PendingTransfers),
            catalog.ledger_table(LedgerRole::AccountBalances),
        ) else {
            return Ok(None);
        };
        let a = accounts.as_ref();
        let t = transfers.as_ref();
        let p = pending.as_ref();
        let b = balances.as_ref();
        let amount_max = [
            "debits_pending",
            "debits_posted",
            "credits_pending",
            "credits_posted",
        ]
        .iter()
        .try_fold(u128::MAX, |max, name| {
            Ok::<_, SqlError>(max.min(amount_max(a.columns[column(a, name)?].ty)))
        })?;
        Ok(Some(LedgerSchema {
            amount_max,
            account: AccountColumns {
                id: column(a, "id")?,
                ledger: column(a, "ledger")?,
                code: column(a, "code")?,
                debits_pending: column(a, "debits_pending")?,
                debits_posted: column(a, "debits_posted")?,
                credits_pending: column(a, "credits_pending")?,
                credits_posted: column(a, "credits_posted")?,
                debits_must_not_exceed_credits: column(a, "debits_must_not_exceed_credits")?,
                credits_must_not_exceed_debits: column(a, "credits_must_not_exceed_debits")?,
                history: column(a, "history")?,
                user_data: column(a, "user_data")?,
                created_at: column(a, "created_at")?,
                closed: optional(a, "closed"),
                user_data_64: optional(a, "user_data_64"),
                user_data_32: optional(a, "user_data_32"),
                timestamp: optional(a, "timestamp"),
                imported: optional(a, "imported"),
            },
            transfer: TransferColumns {
                id: column(t, "id")?,
                debit_account_id: column(t, "debit_account_id")?,
                credit_account_id: column(t, "credit_account_id")?,
                amount: column(t, "amount")?,
                ledger: column(t, "ledger")?,
                code: column(t, "code")?,
                pending: column(t, "pending")?,
                pending_id: column(t, "pending_id")?,
                post_pending: column(t, "post_pending")?,
                void_pending: column(t, "void_pending")?,
                timeout: column(t, "timeout")?,
                user_data: column(t, "user_data")?,
                created_at: column(t, "created_at")?,
                balancing_debit: optional(t, "balancing_debit"),
                balancing_credit: optional(t, "balancing_credit"),
                closing_debit: optional(t, "closing_debit"),
                closing_credit: optional(t, "closing_credit"),
                user_data_64: optional(t, "user_data_64"),
                user_data_32: optional(t, "user_data_32"),
                timestamp: optional(t, "timestamp"),
                imported: optional(t, "imported"),
            },
            pending_col: PendingColumns {
                id: column(p, "id")?,
                status: column(p, "status")?,
                expires_at: column(p, "expires_at")?,
                resolved_by: column(p, "resolved_by")?,
            },
            balance: BalanceColumns {
                account_id: column(b, "account_id")?,
                created_at: column(b, "created_at")?,
                transfer_id: column(b, "transfer_id")?,
                debits_pending: column(b, "debits_pending")?,
                debits_posted: column(b, "debits_posted")?,
                credits_pending: column(b, "credits_pending")?,
                credits_posted: column(b, "credits_posted")?,
            },
            accounts: accounts.clone(),
            transfers: transfers.clone(),
            pending: pending.clone(),
            balances: balances.clone(),
            failures: match catalog.ledger_table(LedgerRole::TransferFailures) {
                Some(f) => Some((
                    f.clone(),
                    FailureColumns {
                        id: column(f, "id")?,
                        result: column(f, "result")?,
                        failed_at: column(f, "failed_at")?,
                    },
                )),
                None => None,
            },
            changes: match catalog.ledger_table(LedgerRole::ChangeEvents) {
                Some(c) => Some((c.clone(), ChangeColumns::resolve(c)?)),
                None => None,
            },
        }))
    }
}

/// The arguments of `CALL create_accounts(...)` in positional order (each an array): the
/// columns of an account its creator gives.
pub const ACCOUNT_ARGUMENTS: &[&str] = &[
    "id",
    "ledger",
    "code",
    "debits_must_not_exceed_credits",
    "credits_must_not_exceed_debits",
    "history",
    "user_data",
    "closed",
    "user_data_64",
    "user_data_32",
    "imported",
    "timestamp",
];

/// The arguments of `CALL transfer(...)` in positional order; any may also be named
/// (`pending_id => 7`). Which are needed depends on the kind of transfer.
pub const TRANSFER_ARGUMENTS: &[&str] = &[
    "id",
    "debit_account_id",
    "credit_account_id",
    "amount",
    "ledger",
    "code",
    "pending",
    "pending_id",
    "post_pending",
    "void_pending",
    "timeout",
    "user_data",
    "balancing_debit",
    "balancing_credit",
    "closing_debit",
    "closing_credit",
    "user_data_64",
    "user_data_32",
    "imported",
    "timestamp",
];
