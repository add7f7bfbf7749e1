//! Migration 0010 widens a ledger's amounts and balances from BIGINT to NUMERIC(39,0) with
//! its history in place: every stored value stays the same number (change events, stored
//! in parts per partition, included), a pending transfer made before still posts, and
//! amounts past 2^63 − 1 apply after, up to TigerBeetle's 2^128 − 1.

use super::tests::{answers, command, open};
use super::Coordinator;
use plan::Access;

const NOW: i64 = 1_790_000_000_000_000;

const BEFORE_0010: &[&str] = &[
    include_str!("../../../migrations/0002_ledger.sql"),
    include_str!("../../../migrations/0003_history_indexes.sql"),
    include_str!("../../../migrations/0004_transfer_failures.sql"),
    include_str!("../../../migrations/0005_tigerbeetle_fields.sql"),
    include_str!("../../../migrations/0006_event_timestamps.sql"),
    include_str!("../../../migrations/0007_imported_events.sql"),
    include_str!("../../../migrations/0008_history_by_timestamp.sql"),
    include_str!("../../../migrations/0009_change_events.sql"),
];

const AMOUNTS_128: &str = include_str!("../../../migrations/0010_amounts_128.sql");

/// Applies each statement of `script` as a log entry of its own; each must succeed.
fn apply(c: &mut Coordinator, index: &mut u64, script: &str) -> Vec<String> {
    let mut all = Vec::new();
    for (_, text) in sql::split_statements(script) {
        *index += 1;
        let write = command(c, text, NOW);
        let answer = answers(c, *index, vec![write]);
        all.extend(answer);
    }
    all
}

/// Every row of `table`, as PostgreSQL text.
fn rows(c: &mut Coordinator, table: &str) -> Vec<Vec<String>> {
    let def = c.executor.catalog.table(table).unwrap().clone();
    let reader = c.executor.reader(None, false);
    let env = reader.env(&[], 0);
    let scanned = reader.scan(&def, &Access::Full, None, &[], &env).unwrap();
    scanned
        .into_iter()
        .map(|(_, row)| {
            row.iter()
                .map(|v| v.to_pg_text(v.natural_type()).unwrap_or("NULL".into()))
                .collect()
        })
        .collect()
}

#[test]
fn widening_keeps_every_amount_and_lets_the_ledger_go_past_bigint() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(2, dir.path());
    let mut index = 0;
    for script in BEFORE_0010 {
        let answered = apply(&mut c, &mut index, script);
        assert!(answered.iter().all(|a| !a.contains(':')), "{answered:?}");
    }
    let history = "INSERT INTO accounts (id, ledger, code, history) VALUES \
                   (1, 1, 1, true), (2, 1, 1, false), (3, 1, 1, false); \
                   INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) \
                   VALUES (1, 1, 2, 10, 1, 1); \
                   INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code, pending) \
                   VALUES (2, 2, 3, 5, 1, 1, true)";
    assert_eq!(
        apply(&mut c, &mut index, history),
        ["3 rows", "1 rows", "1 rows"]
    );
    let tables = ["accounts", "transfers", "account_balances", "change_events"];
    let before: Vec<_> = tables.iter().map(|t| rows(&mut c, t)).collect();
    assert_eq!(before[3].len(), 2, "{:?}", before[3]);

    let widened = apply(&mut c, &mut index, AMOUNTS_128);
    assert!(widened.iter().all(|a| !a.contains(':')), "{widened:?}");
    let schema = c.executor.ledger_schema().unwrap();
    assert_eq!(schema.amount_max, u128::MAX);
    let column = &schema.accounts.columns[schema.account.debits_posted];
    assert_eq!(column.ty, plan::AMOUNT);
    let after: Vec<_> = tables.iter().map(|t| rows(&mut c, t)).collect();
    assert_eq!(before, after);
    // Run again, it changes nothing.
    let again = apply(&mut c, &mut index, AMOUNTS_128);
    assert!(again.iter().all(|a| !a.contains(':')), "{again:?}");
    assert_eq!(
        tables.iter().map(|t| rows(&mut c, t)).collect::<Vec<_>>(),
        after
    );

    // The pending transfer from before posts; account 1 reaches 2^128 - 1 and no further.
    let later = "INSERT INTO transfers (id, pending_id, post_pending) VALUES (3, 2, true); \
                 INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) \
                 VALUES (4, 1, 3, 340282366920938463463374607431768211445, 1, 1); \
                 INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) \
                 VALUES (5, 1, 3, 1, 1, 1)";
    let answered = apply(&mut c, &mut index, later);
    assert_eq!(answered[..2], ["1 rows", "1 rows"]);
    assert!(
        answered[2].starts_with("NumericOutOfRange") && answered[2].contains("would overflow"),
        "{answered:?}"
    );
    let balances: Vec<Vec<String>> = rows(&mut c, "accounts")
        .into_iter()
        .map(|row| row[..7].to_vec())
        .collect();
    let max = u128::MAX.to_string();
    let near = (u128::MAX - 10 + 5).to_string();
    assert_eq!(
        balances,
        [
            ["1", "1", "1", "0", max.as_str(), "0", "0"],
            ["2", "1", "1", "0", "5", "0", "10"],
            ["3", "1", "1", "0", "0", "0", near.as_str()],
        ]
    );
    let history = rows(&mut c, "account_balances");
    assert_eq!(history.last().unwrap()[4], max, "{history:?}");
    // Posted debits over all accounts pass 2^128: the whole-state check adds them up.
    let report = c.executor.check_integrity().unwrap();
    assert_eq!(report.posted.to_string(), "1 * 2^128 + 4");
}
