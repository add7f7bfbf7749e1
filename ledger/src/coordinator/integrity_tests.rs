//! The whole-state check (`integrity.rs`) passes a state the executor built and finds an
//! index entry removed behind its table's back.

use super::tests::{answers, command, open};
use std::ops::Bound;

const NOW: i64 = 1_790_000_000_000_000;

#[test]
fn the_check_passes_a_built_state_and_finds_a_missing_index_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(2, dir.path());
    let mut index = 0;
    let ledger = include_str!("../../../migrations/0002_ledger.sql");
    let statements = sql::split_statements(ledger)
        .into_iter()
        .map(|(_, text)| text.to_string())
        .chain([
            "CREATE TABLE notes (id int PRIMARY KEY, body text)".to_string(),
            "CREATE INDEX notes_body ON notes (body)".to_string(),
            "INSERT INTO notes SELECT g, 'note ' || g FROM generate_series(1, 500) g".to_string(),
            "INSERT INTO accounts (id, ledger, code) VALUES (1, 1, 1), (2, 1, 1), (3, 1, 1)"
                .to_string(),
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) \
             VALUES (1, 1, 2, 10, 1, 1), (2, 2, 3, 4, 1, 1)"
                .to_string(),
        ]);
    for text in statements {
        index += 1;
        let write = command(&c, &text, NOW);
        let answer = answers(&mut c, index, vec![write]);
        assert!(!answer[0].contains(':'), "{text}: {answer:?}");
    }
    let report = c.executor.check_integrity().unwrap();
    assert_eq!(report.partitions, 2);
    assert_eq!(report.accounts, 3);
    assert_eq!(report.posted.to_string(), "14");
    assert!(report.rows >= 505, "{report}");
    assert!(report.index_entries >= 500, "{report}");
    assert!(report.pages > 0 && report.trees > 4, "{report}");

    // One entry of the notes index removed behind the table's back.
    let notes = c.executor.catalog.tables["notes"].clone();
    let index_id = notes.indexes[0].id;
    let removed = c.executor.shards.iter_mut().flatten().any(|shard| {
        let Some(&tree) = shard.storage.get(&index_id) else {
            return false;
        };
        let first = shard
            .engine
            .range(
                tree,
                Bound::Unbounded,
                Bound::Unbounded,
                kv::Direction::Forward,
            )
            .unwrap()
            .next();
        match first {
            Some(Ok((key, _))) => shard.engine.delete(tree, &key).unwrap(),
            _ => false,
        }
    });
    assert!(removed);
    let e = c.executor.check_integrity().unwrap_err();
    assert!(
        e.message.contains("index \"notes_body\"") && e.message.contains("1 entries missing"),
        "{}",
        e.message
    );
}
