//! Runs every `tests/sqllogictest/*.slt` file with sqllogictest-rs over the wire (simple
//! protocol, values as PostgreSQL text) against a fresh server per file. Errors are matched
//! by SQLSTATE (`statement error (42601)`) or by message regex; both are in the error text.

mod common;

use std::fmt;
use std::path::PathBuf;

use async_trait::async_trait;
use common::TestServer;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};
use tokio_postgres::{NoTls, SimpleQueryMessage};

struct Hotledger {
    client: tokio_postgres::Client,
}

#[derive(Debug)]
struct DbError {
    code: Option<String>,
    message: String,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.code.as_deref().unwrap_or("-----"),
            self.message
        )
    }
}

impl std::error::Error for DbError {}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> DbError {
        match e.as_db_error() {
            Some(db) => DbError {
                code: Some(db.code().code().to_string()),
                message: db.message().to_string(),
            },
            None => DbError {
                code: None,
                message: e.to_string(),
            },
        }
    }
}

#[async_trait]
impl AsyncDB for Hotledger {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, DbError> {
        let messages = self.client.simple_query(sql).await?;
        let mut rows = Vec::new();
        let mut columns = None;
        let mut count = 0;
        for m in messages {
            match m {
                SimpleQueryMessage::RowDescription(cols) => columns = Some(cols.len()),
                SimpleQueryMessage::Row(row) => {
                    let values = (0..row.len())
                        .map(|i| match row.get(i) {
                            None => "NULL".to_string(),
                            Some("") => "(empty)".to_string(),
                            Some(v) => v.to_string(),
                        })
                        .collect();
                    rows.push(values);
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        Ok(match columns {
            Some(n) => DBOutput::Rows {
                types: vec![DefaultColumnType::Any; n],
                rows,
            },
            None => DBOutput::StatementComplete(count),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "hotledger"
    }

    fn error_sql_state(err: &DbError) -> Option<String> {
        err.code.clone()
    }
}

/// Every `.slt` file, or with `SLT=text` set, those whose name contains `text`.
fn slt_files() -> Vec<PathBuf> {
    let only = std::env::var("SLT").unwrap_or_default();
    let dir = common::repo_root().join("tests/sqllogictest");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/sqllogictest exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(&only))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    let mut failures = Vec::new();
    for file in files {
        let server = TestServer::start();
        let url = server.url();
        let mut runner = Runner::new(move || {
            let url = url.clone();
            async move {
                let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
                tokio::spawn(connection);
                Ok(Hotledger { client })
            }
        });
        if let Err(e) = runner.run_file_async(&file).await {
            failures.push(format!(
                "{}:\n{e}\nserver log:\n{}",
                file.display(),
                server.log()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
