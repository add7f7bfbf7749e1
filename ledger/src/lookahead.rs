//! The lookahead of a multi-row transfer statement. Applying a transfer waits mostly on
//! memory: the debit account's leaf and the leaf its entry goes into in the debit index are
//! random pages of large trees, and each descent to them is a chain of cache misses that
//! nothing overlaps. Before applying each group of `LOOKAHEAD_ROWS` rows, the executor hands
//! the keys those rows will touch at random — their accounts not in the statement's working
//! set yet, their entries in the transfers' plain indexes — to `kv::Engine::look_ahead`,
//! which walks all their descents side by side so the misses are in flight together, and
//! the rows' own operations then start at the leaves it found.
//!
//! Only a hint: it writes nothing, reads nothing from disk, and a row it cannot read a key
//! from is skipped; the operations check every leaf they are handed (`kv::lookahead`).
//!
//! The same keys, with the rows' own ids, are what `page_in.rs` reads from disk ahead of a
//! log entry whose pages are not all in memory (`Executor::page_in_rows`).

use std::collections::VecDeque;

use plan::TableDef;
use sql::{SqlResult, Value};

use crate::executor::{entry_of_values, Executor};
use crate::row::{encode_key_into, Row};

/// Rows whose leaves are found at once (three or four keys each).
pub(crate) const LOOKAHEAD_ROWS: usize = 16;

/// The keys of one group, end to end in one buffer, kept between groups.
#[derive(Default)]
pub(crate) struct LookaheadKeys {
    bytes: Vec<u8>,
    keys: Vec<KeySpan>,
}

/// A key in `LookaheadKeys::bytes`: its partition, its relation (table or index) and where
/// it lies.
#[derive(Clone, Copy)]
struct KeySpan {
    shard: usize,
    relation: u32,
    start: usize,
    end: usize,
}

impl LookaheadKeys {
    fn push(&mut self, shard: usize, relation: u32, key: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.keys.push(KeySpan {
            shard,
            relation,
            start,
            end: self.bytes.len(),
        });
    }
}

/// The rows of a multi-row transfer statement, read `LOOKAHEAD_ROWS` ahead: each group's
/// leaves are looked up before its first row is handed out.
pub(crate) struct RowsAhead<I> {
    rows: I,
    ahead: VecDeque<SqlResult<Row>>,
    /// Whether to look ahead at all (only a statement with its account set open does).
    enabled: bool,
}

impl<I: Iterator<Item = SqlResult<Row>>> RowsAhead<I> {
    pub(crate) fn new(rows: I, enabled: bool) -> RowsAhead<I> {
        RowsAhead {
            rows,
            ahead: VecDeque::new(),
            enabled,
        }
    }

    /// The next row, after looking up the leaves of its group if it starts one.
    pub(crate) fn next(
        &mut self,
        executor: &mut Executor,
        table: &TableDef,
    ) -> Option<SqlResult<Row>> {
        if self.enabled && self.ahead.is_empty() {
            self.ahead.extend(self.rows.by_ref().take(LOOKAHEAD_ROWS));
            executor.look_ahead(table, self.ahead.iter().filter_map(|row| row.as_ref().ok()));
        }
        self.ahead.pop_front().or_else(|| self.rows.next())
    }
}

impl Executor {
    /// Finds the leaves `rows` (the next rows of a multi-row INSERT INTO transfers) will
    /// touch at random, ahead of applying them.
    pub(crate) fn look_ahead<'r>(&mut self, table: &TableDef, rows: impl Iterator<Item = &'r Row>) {
        if self.collect_keys(table, rows, false) {
            self.with_key_groups(|engine, handle, keys| engine.look_ahead(handle, keys));
        }
    }

    /// Reads into the buffer pool the pages `rows` (transfers about to be applied) will
    /// touch at random — their ids' leaves in the transfers table too — in overlapping
    /// batches of IO (`kv::Engine::page_in`); with `submit`, the last reads are started
    /// and left in flight (`kv::Engine::submit_page_in`).
    pub(crate) fn page_in_rows<'r>(
        &mut self,
        table: &TableDef,
        rows: impl Iterator<Item = &'r Row>,
        submit: bool,
    ) {
        if self.collect_keys(table, rows, true) {
            self.with_key_groups(|engine, handle, keys| match submit {
                true => engine.submit_page_in(handle, keys),
                false => engine.page_in(handle, keys),
            });
        }
    }

    /// Gathers into `transfers.lookahead_keys`, sorted by partition and relation, the keys
    /// `rows` of the transfers table will touch at random in partitions held here: accounts
    /// not in the statement's working set, entries of the plain indexes, and with
    /// `with_ids` the rows' own keys. False when the ledger's tables are not there.
    fn collect_keys<'r>(
        &mut self,
        table: &TableDef,
        rows: impl Iterator<Item = &'r Row>,
        with_ids: bool,
    ) -> bool {
        let Ok(schema) = self.ledger_schema() else {
            return false;
        };
        let (Ok(accounts), Ok(transfers)) =
            (self.storage_of(&schema.accounts), self.storage_of(table))
        else {
            return false;
        };
        let t = &schema.transfer;
        let created_at = Value::TimestampTz(self.clock.now);
        // The history indexes key each entry by its transfer's `timestamp`, which the row
        // takes only as it applies: the rows of a group take the command's next timestamps
        // in order, so the k-th row's entry is looked for under the k-th of them. A row that
        // takes none (one that fails, or imports its own) makes the guesses after it miss,
        // which costs only the walk.
        let next_timestamp = self.clock.timestamps.peek();
        let mut found = std::mem::take(&mut self.transfers.lookahead_keys);
        found.bytes.clear();
        found.keys.clear();
        let (mut key, mut entry) = (Vec::new(), Vec::new());
        for (k, row) in rows.enumerate() {
            let timestamp = match t.timestamp.map(|c| &row[c]) {
                Some(Value::Int(given)) if *given != 0 => Value::Int(*given),
                _ => Value::Int(next_timestamp.saturating_add(k as i64)),
            };
            for column in [t.debit_account_id, t.credit_account_id] {
                let account = &row[column];
                let Value::Int(id) = account else { continue };
                if self
                    .transfers
                    .account_set
                    .as_ref()
                    .is_some_and(|set| set.contains(*id))
                {
                    continue;
                }
                key.clear();
                if encode_key_into([account].into_iter(), &mut key).is_ok() {
                    let shard = self.shard_of(accounts, &key);
                    // (A partition not held here is another thread's share.)
                    if self.holds(shard) {
                        found.push(shard, schema.accounts.id, &key);
                    }
                }
            }
            key.clear();
            if encode_key_into([&row[t.id]].into_iter(), &mut key).is_err() {
                continue;
            }
            let shard = self.shard_of(transfers, &key);
            if !self.holds(shard) {
                continue;
            }
            if with_ids {
                found.push(shard, table.id, &key);
            }
            for index in table.indexes.iter().filter(|index| !index.is_derived()) {
                // The entry as the row will be stored: `created_at` is the ledger clock.
                let values = index.columns.iter().map(|&column| {
                    if column == t.created_at {
                        &created_at
                    } else if Some(column) == t.timestamp {
                        &timestamp
                    } else {
                        &row[column]
                    }
                });
                if entry_of_values(values, index.unique, &key, &mut entry).is_ok() {
                    found.push(shard, index.id, &entry);
                }
            }
        }
        found
            .keys
            .sort_unstable_by_key(|key| (key.shard, key.relation));
        self.transfers.lookahead_keys = found;
        true
    }

    /// Calls `each` with every (partition, relation) group of the keys `collect_keys` left.
    fn with_key_groups(&mut self, mut each: impl FnMut(&mut kv::Engine, kv::Table, &[&[u8]])) {
        let found = std::mem::take(&mut self.transfers.lookahead_keys);
        let mut slices = Vec::with_capacity(found.keys.len());
        for group in found
            .keys
            .chunk_by(|a, b| (a.shard, a.relation) == (b.shard, b.relation))
        {
            let Ok(shard) = self.shard(group[0].shard) else {
                continue;
            };
            let Ok(handle) = shard.handle(group[0].relation) else {
                continue;
            };
            slices.clear();
            slices.extend(group.iter().map(|key| &found.bytes[key.start..key.end]));
            each(&mut shard.engine, handle, &slices);
        }
        self.transfers.lookahead_keys = found;
    }

    /// Forgets the leaves found ahead (at the end of the statement that found them).
    pub(crate) fn forget_look_ahead(&mut self) {
        for shard in self.shards.iter_mut().flatten() {
            shard.engine.forget_look_ahead();
        }
    }
}
