//! An integrity check of the whole state, for `hotledger check` and the crash tests: every
//! kv tree of every partition is walked (key order within and across pages, separator bounds,
//! equal leaf depth — and every page read from disk has its checksum verified as it loads),
//! every table's rows decode and every index holds exactly the entries its rows give (no
//! entry missing, none left over), and over all accounts debits equal credits, pending and
//! posted.
//!
//! It reads everything and holds one table's entries of one partition in memory at a time;
//! it runs on the coordinator with every partition in hand, so nothing is applied meanwhile.

use std::fmt;
use std::ops::Bound;

use kv::Direction;
use plan::TableDef;
use sql::{SqlError, SqlResult};

use crate::double_entry::{AmountTotal, Totals};
use crate::executor::{row_entry_into, Executor};
use crate::partition::Shard;
use crate::row::decode_row;

/// What the check went through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntegrityReport {
    pub partitions: usize,
    /// kv trees walked (tables, indexes and the catalog's own), over all partitions.
    pub trees: usize,
    pub pages: usize,
    pub rows: u64,
    pub index_entries: u64,
    pub accounts: u64,
    /// Posted debits (= posted credits) over all accounts.
    pub posted: AmountTotal,
    /// Pending debits (= pending credits).
    pub pending: AmountTotal,
}

impl fmt::Display for IntegrityReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} partitions, {} trees, {} pages, {} rows, {} index entries, {} accounts; debits = credits: {} posted, {} pending",
            self.partitions,
            self.trees,
            self.pages,
            self.rows,
            self.index_entries,
            self.accounts,
            self.posted,
            self.pending
        )
    }
}

fn broken(what: String) -> SqlError {
    SqlError::internal(format!("integrity check failed: {what}"))
}

/// Every (key, value) of one kv tree, in key order.
fn entries(shard: &mut Shard, tree: kv::Table) -> SqlResult<Vec<(Vec<u8>, Vec<u8>)>> {
    shard
        .engine
        .range(tree, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .and_then(|range| range.collect())
        .map_err(|e| broken(e.to_string()))
}

impl Executor {
    /// Runs the check (see the module's header); the first violation found is the error.
    pub(crate) fn check_integrity(&mut self) -> SqlResult<IntegrityReport> {
        let mut report = IntegrityReport {
            partitions: self.shards.len(),
            ..IntegrityReport::default()
        };
        let catalog = self.catalog.clone();
        let ledger = plan::LedgerSchema::resolve(&catalog)?;
        let mut totals = Totals::default();
        for (index, shard) in self.shards.iter_mut().enumerate() {
            let shard = shard
                .as_mut()
                .ok_or_else(|| broken(format!("partition {index} is not in hand")))?;
            check_trees(shard, index, &mut report)?;
            for table in catalog.tables.values() {
                check_table(&catalog, shard, index, table, &mut report)?;
            }
            if let Some(ledger) = &ledger {
                sum_accounts(shard, ledger, &mut totals)?;
            }
        }
        if let Some(imbalance) = totals.imbalance() {
            return Err(broken(imbalance));
        }
        report.accounts = totals.accounts;
        report.posted = totals.debits_posted;
        report.pending = totals.debits_pending;
        Ok(report)
    }
}

/// Walks every kv tree of a partition.
fn check_trees(shard: &mut Shard, index: usize, report: &mut IntegrityReport) -> SqlResult<()> {
    let trees: Vec<(String, kv::Table)> = shard
        .engine
        .tables()
        .map(|(name, t)| (name.to_string(), t))
        .collect();
    for (name, tree) in trees {
        let shape = shard
            .engine
            .check_table(tree)
            .map_err(|e| broken(format!("partition {index}, tree \"{name}\": {e}")))?;
        report.trees += 1;
        report.pages += shape.pages;
    }
    Ok(())
}

/// A table's rows in one partition decode, and each of its indexes holds exactly the
/// entries they give.
fn check_table(
    catalog: &plan::Catalog,
    shard: &mut Shard,
    partition: usize,
    table: &TableDef,
    report: &mut IntegrityReport,
) -> SqlResult<()> {
    let Some(&tree) = shard.storage.get(&table.id) else {
        return Ok(());
    };
    let mut rows = Vec::new();
    for (key, bytes) in entries(shard, tree)? {
        let (_, row) = decode_row(&bytes).map_err(|e| {
            broken(format!(
                "a row of \"{}\" in partition {partition} does not decode: {}",
                table.name, e.message
            ))
        })?;
        rows.push((key, row));
    }
    report.rows += rows.len() as u64;
    for index in &table.indexes {
        let derivation = catalog.index_derivations.get(&index.id).map(|d| &**d);
        if index.is_derived() && derivation.is_none() {
            return Err(broken(format!(
                "index \"{}\" lost its definition",
                index.name
            )));
        }
        let mut expected = Vec::with_capacity(rows.len());
        for (key, row) in &rows {
            let mut entry = Vec::new();
            if let Some(value) = row_entry_into(index, derivation, row, key, &mut entry)? {
                expected.push((entry, value.to_vec()));
            }
        }
        expected.sort();
        let Some(&index_tree) = shard.storage.get(&index.id) else {
            return Err(broken(format!(
                "index \"{}\" has no storage in partition {partition}",
                index.name
            )));
        };
        let actual = entries(shard, index_tree)?;
        if actual != expected {
            return Err(broken(index_difference(
                &index.name,
                partition,
                &expected,
                &actual,
            )));
        }
        report.index_entries += actual.len() as u64;
    }
    Ok(())
}

/// Says how an index's entries differ from what its rows give.
fn index_difference(
    name: &str,
    partition: usize,
    expected: &[(Vec<u8>, Vec<u8>)],
    actual: &[(Vec<u8>, Vec<u8>)],
) -> String {
    let missing = expected
        .iter()
        .filter(|e| actual.binary_search(e).is_err())
        .count();
    let extra = actual
        .iter()
        .filter(|a| expected.binary_search(a).is_err())
        .count();
    format!(
        "index \"{name}\" in partition {partition} disagrees with its table: {missing} entries missing, {extra} without their row ({} expected, {} found)",
        expected.len(),
        actual.len()
    )
}

/// Adds a partition's accounts to the totals.
fn sum_accounts(
    shard: &mut Shard,
    ledger: &plan::LedgerSchema,
    totals: &mut Totals,
) -> SqlResult<()> {
    let Some(&tree) = shard.storage.get(&ledger.accounts.id) else {
        return Ok(());
    };
    for (_, bytes) in entries(shard, tree)? {
        let (_, row) = decode_row(&bytes)?;
        totals.add(&row, &ledger.account);
    }
    Ok(())
}
