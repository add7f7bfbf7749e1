//! Runs every `tests/sqllogictest/*.slt` file with sqllogictest-rs over the wire (simple
//! protocol, values as PostgreSQL text) against a fresh server per file. Errors are matched
//! by SQLSTATE (`statement error (42601)`) or by message regex; both are in the error text.
//!
//! The same files can run against PostgreSQL 15 (a private one the test starts, a fresh
//! database per file), so that what a file expects is checked to be what PostgreSQL answers:
//! every file whose first lines say `# compare: postgresql` runs against both in CI, and
//! `SLT_POSTGRES=1 SLT=<part of a name>` runs any selection against PostgreSQL alone
//! (`cargo test -p server --test sqllogictest postgres -- --nocapture`).

mod common;

use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use common::{Postgres, TestServer};
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

/// Whether a file asks to be checked against PostgreSQL too (a `# compare: postgresql` line
/// among its leading comments).
fn compares_with_postgres(file: &Path) -> bool {
    let text = std::fs::read_to_string(file).expect("read an .slt file");
    text.lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .any(|l| l.trim() == "# compare: postgresql")
}

/// Runs `file` with connections from `url`; the failure's text, if it fails.
async fn run_file(url: String, file: &Path) -> Option<String> {
    let mut runner = Runner::new(move || {
        let url = url.clone();
        async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
            tokio::spawn(connection);
            Ok(Hotledger { client })
        }
    });
    runner
        .run_file_async(file)
        .await
        .err()
        .map(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    let mut failures = Vec::new();
    for file in files {
        let server = TestServer::start();
        if let Some(e) = run_file(server.url(), &file).await {
            failures.push(format!(
                "{}:\n{e}\nserver log:\n{}",
                file.display(),
                server.log()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The files marked `# compare: postgresql` (with `SLT_POSTGRES` set, every file selected by
/// `SLT`) against PostgreSQL 15: what they expect must be what PostgreSQL answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marked_sqllogictest_files_agree_with_postgres() {
    let every = std::env::var_os("SLT_POSTGRES").is_some();
    let files: Vec<PathBuf> = slt_files()
        .into_iter()
        .filter(|f| every || compares_with_postgres(f))
        .collect();
    if files.is_empty() {
        return;
    }
    let postgres = Postgres::start();
    let admin = postgres.client().await;
    let mut failures = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let database = format!("slt_{i}");
        admin
            .batch_execute(&format!("create database {database}"))
            .await
            .expect("create a database for the file");
        let url = format!(
            "host=127.0.0.1 port={} user=postgres dbname={database}",
            postgres.port
        );
        if let Some(e) = run_file(url, file).await {
            failures.push(format!("{} on PostgreSQL:\n{e}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
