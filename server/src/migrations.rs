//! Schema migrations: versioned SQL files in `migrations/`, compiled into the binary,
//! applied in order at start through the same path as client statements (so through the
//! log), each in one transaction with its record in `hotledger_migrations`.

use std::collections::HashMap;
use std::sync::Arc;

use sql::{SqlError, SqlResult, Value};

use crate::session::{Session, Shared, StatementResult};

/// (version, name, SQL), in version order.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "migrations_table",
        include_str!("../../migrations/0001_migrations_table.sql"),
    ),
    (
        2,
        "ledger",
        include_str!("../../migrations/0002_ledger.sql"),
    ),
    (
        3,
        "history_indexes",
        include_str!("../../migrations/0003_history_indexes.sql"),
    ),
    (
        4,
        "transfer_failures",
        include_str!("../../migrations/0004_transfer_failures.sql"),
    ),
    (
        5,
        "tigerbeetle_fields",
        include_str!("../../migrations/0005_tigerbeetle_fields.sql"),
    ),
    (
        6,
        "event_timestamps",
        include_str!("../../migrations/0006_event_timestamps.sql"),
    ),
    (
        7,
        "imported_events",
        include_str!("../../migrations/0007_imported_events.sql"),
    ),
    (
        8,
        "history_by_timestamp",
        include_str!("../../migrations/0008_history_by_timestamp.sql"),
    ),
    (
        9,
        "change_events",
        include_str!("../../migrations/0009_change_events.sql"),
    ),
    (
        10,
        "amounts_128",
        include_str!("../../migrations/0010_amounts_128.sql"),
    ),
];

/// Applies the migrations not yet recorded. In a cluster every node starts with this: the
/// first to commit a migration records it, and a node whose attempt fails (another node's
/// commit came first, or leadership was moving) reads the record again and goes on, for
/// up to `CLUSTER_ATTEMPTS` tries.
pub async fn apply(shared: &Arc<Shared>) -> SqlResult<()> {
    let attempts = if shared.read_barrier.in_cluster() {
        CLUSTER_ATTEMPTS
    } else {
        1
    };
    let mut attempt = 1;
    loop {
        match apply_once(shared).await {
            Err(_) if attempt < attempts => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            result => return result,
        }
    }
}

const CLUSTER_ATTEMPTS: u32 = 40;

async fn run(session: &mut Session, sql: &str) -> SqlResult<Vec<StatementResult>> {
    let mut results = Vec::new();
    for statement in sql::parse(sql)? {
        let catalog = session.catalog();
        let bound = planner::bind(&catalog, &statement, &[])?;
        results.push(session.execute(&bound, &[]).await?);
    }
    Ok(results)
}

async fn apply_once(shared: &Arc<Shared>) -> SqlResult<()> {
    let mut session = Session::new(shared.clone(), &HashMap::new(), 0, Default::default());
    let applied: Vec<i64> = if shared
        .executor
        .catalog()
        .table("hotledger_migrations")
        .is_some()
    {
        match run(&mut session, "SELECT version FROM hotledger_migrations")
            .await?
            .pop()
        {
            Some(StatementResult::Rows { rows, .. }) => rows
                .into_iter()
                .filter_map(|r| match r.first() {
                    Some(Value::Int(v)) => Some(*v),
                    _ => None,
                })
                .collect(),
            _ => {
                return Err(SqlError::internal(
                    "unexpected result reading hotledger_migrations",
                ))
            }
        }
    } else {
        Vec::new()
    };
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        // The migration and its record commit as one transaction (one log entry): a crash
        // between them cannot leave a migration applied but unrecorded, to be run again.
        let record = format!(
            "INSERT INTO hotledger_migrations (version, name) VALUES ({version}, '{name}')"
        );
        let script = format!("BEGIN;\n{sql}\n;{record};\nCOMMIT;");
        if let Err(mut e) = run(&mut session, &script).await {
            let _ = run(&mut session, "ROLLBACK").await;
            e.message = format!("migration {version} ({name}): {}", e.message);
            return Err(e);
        }
    }
    Ok(())
}
