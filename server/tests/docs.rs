//! The SQL examples of the documentation run as written: every ```sql block of README.md and
//! docs/ledger.md, in order, against a fresh server. A statement whose text says it "fails
//! with" must fail; every other must succeed.

mod common;

use common::TestServer;
use tokio_postgres::NoTls;

fn sql_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sql") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

async fn run_examples(file: &str) {
    let path = common::repo_root().join(file);
    let text = std::fs::read_to_string(&path).expect("documentation file");
    let blocks = sql_blocks(&text);
    assert!(!blocks.is_empty(), "{file} has no sql examples");
    let server = TestServer::start();
    let (client, connection) = tokio_postgres::connect(&server.url(), NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    for block in blocks {
        for (_, statement) in sql::split_statements(&block) {
            let expected_to_fail = statement.contains("fails with");
            let result = client.simple_query(statement).await;
            match (result, expected_to_fail) {
                (Ok(_), false) | (Err(_), true) => {}
                (Ok(_), true) => panic!("{file}: this example should fail:\n{statement}"),
                (Err(e), false) => panic!("{file}: this example failed: {e:?}\n{statement}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_examples_run() {
    run_examples("README.md").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_examples_run() {
    run_examples("docs/ledger.md").await;
}
