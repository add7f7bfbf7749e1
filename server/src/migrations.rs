//! Schema migrations: versioned SQL files in `migrations/`, compiled into the binary,
//! applied in order at start through the same path as client statements (so through the
//! log), and recorded in `hotledger_migrations`.

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
];

async fn run(session: &mut Session, sql: &str) -> SqlResult<Vec<StatementResult>> {
    let mut results = Vec::new();
    for statement in sql::parse(sql)? {
        let catalog = session.shared().executor.catalog();
        let bound = planner::bind(&catalog, &statement, &[])?;
        results.push(session.execute(&bound, &[]).await?);
    }
    Ok(results)
}

pub async fn apply(shared: &Arc<Shared>) -> SqlResult<()> {
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
        run(&mut session, sql).await.map_err(|mut e| {
            e.message = format!("migration {version} ({name}): {}", e.message);
            e
        })?;
        let record = format!("INSERT INTO hotledger_migrations (version, name) VALUES ({version}, '{name}') ON CONFLICT (version) DO NOTHING");
        run(&mut session, &record).await?;
    }
    Ok(())
}
