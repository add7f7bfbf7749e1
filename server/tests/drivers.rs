//! The common PostgreSQL drivers, each as its own program, against the real server:
//! psycopg 3 (Python) and SQLAlchemy's and Django's ORMs over it, node-postgres, pgx v5 (Go),
//! pgJDBC (Java).
//! tokio-postgres is covered in protocol.rs. `tools/setup.sh` installs the packages; see tests/drivers/README.md.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{stderr, stdout, TestServer, PASSWORD};

fn drivers_dir() -> PathBuf {
    common::repo_root().join("tests/drivers")
}

/// The test venv's Python running `script` of tests/drivers/python.
fn python(script: &str) -> Command {
    let python = PathBuf::from(std::env::var("HOME").expect("HOME"))
        .join(".cache/hotledger-venv/bin/python");
    let mut c = Command::new(python);
    c.arg(drivers_dir().join("python").join(script));
    c
}

fn run_driver(name: &str, mut command: Command) {
    let server = TestServer::start();
    let out = command
        .env("HOTLEDGER_PORT", server.port.to_string())
        .env("HOTLEDGER_PASSWORD", PASSWORD)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the {name} driver test (did tools/setup.sh run?): {e}")
        });
    assert!(
        out.status.success(),
        "{name} driver test failed:\n{}\n{}\nserver log:\n{}",
        stdout(&out),
        stderr(&out),
        server.log()
    );
    assert!(stdout(&out).contains(": ok"), "{name}: {}", stdout(&out));
}

#[test]
fn psycopg3() {
    run_driver("psycopg", python("driver_test.py"));
}

/// SQLAlchemy 2's ORM over psycopg 3: what an application does (tests/drivers/python).
#[test]
fn sqlalchemy_orm() {
    run_driver("sqlalchemy", python("sqlalchemy_test.py"));
}

/// Django 5's migrate and ORM over psycopg 3 (tests/drivers/python/django_project).
#[test]
fn django_orm() {
    run_driver("django", python("django_test.py"));
}

#[test]
fn node_postgres() {
    let mut c = Command::new("node");
    c.arg("driver_test.js")
        .current_dir(drivers_dir().join("node"));
    run_driver("node-postgres", c);
}

#[test]
fn pgx() {
    let mut c = Command::new("go");
    c.args(["run", "."])
        .current_dir(drivers_dir().join("go"))
        .env("GOFLAGS", "-mod=readonly");
    run_driver("pgx", c);
}

#[test]
fn pgjdbc() {
    let mut c = Command::new("java");
    c.args(["-cp", "target/deps/*", "DriverTest.java"])
        .current_dir(drivers_dir().join("java"));
    run_driver("pgJDBC", c);
}
