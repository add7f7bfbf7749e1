//! What the model-based kv tests share.

use std::collections::BTreeMap;
use std::ops::Bound;

use kv::{Direction, Engine, Table};

/// Asserts that `table` is a well-formed B+tree holding exactly `model`, in key order.
pub fn assert_table_holds(engine: &mut Engine, table: Table, model: BTreeMap<Vec<u8>, Vec<u8>>) {
    assert_eq!(engine.check_table(table).unwrap().keys, model.len());
    let all: Vec<_> = engine
        .range(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
}

/// A whole forward scan of `table` in a snapshot.
#[allow(dead_code)] // not every test file that shares this module takes snapshots
pub fn snapshot_scan(
    snapshot: &kv::Snapshot,
    table: Table,
) -> kv::KvResult<Vec<(Vec<u8>, Vec<u8>)>> {
    snapshot
        .range(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .and_then(|range| range.collect())
}
