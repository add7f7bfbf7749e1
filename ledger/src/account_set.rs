//! A statement's account working set. A multi-row transfer statement (one linked chain)
//! that moves funds between one hot account and many others would read, decode, encode and
//! write the hot account once per row. While the set is open, an account is read from
//! storage and written back the first time a transfer of the statement touches it (its leaf
//! is still warm then) and stays decoded in the set; later transfers of the statement change
//! it there, and it is written once more, when the whole statement has succeeded.
//!
//! Only the transfer code reads and writes accounts while a set is open, and only for the
//! one statement (or chain) that opened it; an error discards the set (the statement's undo
//! removes what it wrote).

use plan::{LedgerRole, LedgerSchema, TableDef};
use rustc_hash::FxHashMap;
use sql::{SqlError, SqlResult};

use crate::amount::Balances;
use crate::executor::Executor;
use crate::row::{discard, Row};

/// An account row as a transfer reads it: its storage key, its stored bytes (for undo) when
/// it was just read from storage — None when it comes from the working set, whose first
/// write of it is what storage holds — its values and its balances. The transfer code
/// computes with `balances`, read from the row once when the account is read from
/// storage; the row's balance columns are brought up to them (`write_balances_to_row`) only when
/// the row is written, so a hot account changed by many transfers of a statement is
/// converted to and from its columns' type once.
pub(crate) struct Account {
    pub id: i64,
    pub key: Vec<u8>,
    pub old: Option<Vec<u8>>,
    pub row: Row,
    pub balances: Balances,
}

impl Account {
    /// Brings the row's balance columns up to `balances`, before the row is stored.
    pub fn write_balances_to_row(&mut self, schema: &LedgerSchema) -> SqlResult<()> {
        self.balances.write_into(schema, &mut self.row)
    }
}

/// The accounts a statement has touched, in the order it first touched them (the order they
/// are written back in, so every replica writes the same way).
#[derive(Default)]
pub(crate) struct AccountSet {
    slots: Vec<Slot>,
    /// Looked up for every transfer of the statement: a fast hash of the account id.
    by_id: FxHashMap<i64, usize>,
}

struct Slot {
    /// None while a transfer has the account out (between `take` and `give_back`).
    account: Option<Account>,
    /// Changed since storage last got it.
    dirty: bool,
}

impl AccountSet {
    /// The account, taken out of the set until it is given back; None when the statement
    /// has not touched it yet (read it from storage, write it, then give it back).
    pub fn take(&mut self, id: i64) -> SqlResult<Option<Account>> {
        let Some(&slot) = self.by_id.get(&id) else {
            return Ok(None);
        };
        match self.slots[slot].account.take() {
            Some(account) => Ok(Some(account)),
            None => Err(SqlError::internal(format!(
                "account {id} taken from the statement's working set twice"
            ))),
        }
    }

    /// Whether the statement has touched account `id` already.
    pub fn contains(&self, id: i64) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Puts an account back; `dirty` when storage does not have its values yet.
    pub fn give_back(&mut self, account: Account, dirty: bool) {
        match self.by_id.get(&account.id) {
            Some(&slot) => {
                let slot = &mut self.slots[slot];
                slot.account = Some(account);
                slot.dirty |= dirty;
            }
            None => {
                self.by_id.insert(account.id, self.slots.len());
                self.slots.push(Slot {
                    account: Some(account),
                    dirty,
                });
            }
        }
    }

    /// Empties the set and returns the accounts storage does not have the values of yet, in
    /// first-touched order; an error if one was never given back. The set keeps its memory
    /// for the next statement (up to `KEPT_SLOTS` accounts' worth): allocating it afresh
    /// for each 1,000-row statement had the kernel zeroing new pages for it.
    fn drain_dirty(&mut self) -> SqlResult<Vec<Account>> {
        self.by_id.clear();
        let mut dirty = Vec::with_capacity(self.slots.len());
        let mut missing = false;
        for slot in self.slots.drain(..) {
            match slot.account {
                Some(account) if slot.dirty => dirty.push(account),
                Some(account) => discard(account.row),
                None => missing = true,
            }
        }
        self.slots.shrink_to(KEPT_SLOTS);
        self.by_id.shrink_to(KEPT_SLOTS);
        if missing {
            return Err(SqlError::internal("an account was not given back"));
        }
        Ok(dirty)
    }
}

/// The most accounts' room a set keeps between statements.
const KEPT_SLOTS: usize = 4096;

impl Executor {
    /// Runs one statement (or chain) writing `rows` rows into `table`. When those are many
    /// transfers and no set is open yet, it runs with an account working set, whose
    /// accounts are written back if it succeeds (a failed write-back is `write_failed`) and
    /// dropped if it fails. `version` is the statement's, as for any row it writes.
    pub(crate) fn with_account_set<T, E>(
        &mut self,
        table: &TableDef,
        rows: usize,
        version: u64,
        statement: impl FnOnce(&mut Executor) -> Result<T, E>,
        write_failed: impl FnOnce(SqlError) -> E,
    ) -> Result<T, E> {
        let many_transfers = rows > 1 && table.ledger == Some(LedgerRole::Transfers);
        if !many_transfers || self.transfers.account_set.is_some() {
            return statement(self);
        }
        self.transfers.account_set = Some(std::mem::take(&mut self.transfers.spare_account_set));
        let outcome = statement(self);
        self.forget_look_ahead();
        let mut set = self.transfers.account_set.take().unwrap_or_default();
        let dirty = set.drain_dirty();
        self.transfers.spare_account_set = set;
        let value = outcome?;
        dirty
            .and_then(|accounts| self.write_back(accounts, version))
            .map_err(write_failed)?;
        Ok(value)
    }

    fn write_back(&mut self, accounts: Vec<Account>, version: u64) -> SqlResult<()> {
        if accounts.is_empty() {
            return Ok(());
        }
        let schema = self.ledger_schema()?;
        let store = self.storage_of(&schema.accounts)?;
        for mut account in accounts {
            let Some(stored) = self.get_raw(store, &account.key)? else {
                return Err(SqlError::internal(format!(
                    "account {} vanished while a statement changed it",
                    account.id
                )));
            };
            account.write_balances_to_row(&schema)?;
            self.put_row(
                &schema.accounts,
                &account.key,
                Some(stored),
                &account.row,
                version,
            )?;
        }
        Ok(())
    }
}
