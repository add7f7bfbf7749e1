//! Logging in as an attacker or a careless client would: a wrong password and an unknown user
//! are answered alike (28P01) and logged with the address; failures slow the address down;
//! connections past `max_connections` get 53300 with the last slots kept for the superuser;
//! `--tls-required` refuses plaintext; channel binding (SCRAM-SHA-256-PLUS) on TLS.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{code, scalar, stderr, stdout, TestServer, PASSWORD};

fn psql(conninfo: &str, password: &str) -> Output {
    Command::new("psql")
        .args(["-X", "-At", conninfo, "-c", "select 42"])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "30")
        .output()
        .expect("run psql")
}

fn conninfo(port: u16, user: &str, extra: &str) -> String {
    format!("host=127.0.0.1 port={port} user={user} dbname=ledger sslmode=disable {extra}")
}

#[test]
fn failed_logins_look_alike_are_logged_and_slow_the_address_down() {
    let server = TestServer::start();
    let wrong = psql(&conninfo(server.port, "ledger", ""), "wrong password");
    let unknown = psql(&conninfo(server.port, "mallory", ""), PASSWORD);
    assert!(!wrong.status.success() && !unknown.status.success());
    let wrong_says = stderr(&wrong);
    let unknown_says = stderr(&unknown);
    assert!(
        wrong_says.contains("password authentication failed for user \"ledger\""),
        "{wrong_says}"
    );
    assert_eq!(
        wrong_says.replace("\"ledger\"", "\"USER\""),
        unknown_says.replace("\"mallory\"", "\"USER\""),
        "an unknown user must not be told apart from a wrong password"
    );
    // A database that does not exist is said so, for any user.
    let no_db = psql(
        &format!(
            "host=127.0.0.1 port={} user=mallory dbname=nope sslmode=disable",
            server.port
        ),
        PASSWORD,
    );
    assert!(stderr(&no_db).contains("database \"nope\" does not exist"));
    let log = server.log();
    assert!(
        log.contains("login failed for user \"mallory\" from 127.0.0.1:"),
        "{log}"
    );
    assert!(log.contains("login failed for user \"ledger\" from 127.0.0.1:"));

    // Failures past the first five push this address's next attempt out.
    for _ in 0..10 {
        assert!(!psql(&conninfo(server.port, "ledger", ""), "guess")
            .status
            .success());
    }
    let started = Instant::now();
    let out = psql(&conninfo(server.port, "ledger", ""), PASSWORD);
    let waited = started.elapsed();
    assert_eq!(stdout(&out).trim(), "42", "{}", stderr(&out));
    // Failures 6..13 added 50 ms more each: 50 + 100 + ... + 400 ms beyond the wall time the
    // attempts themselves took, of which at least the last penalty remains.
    assert!(waited >= Duration::from_millis(350), "waited {waited:?}");
    // A success clears the address.
    let out = psql(&conninfo(server.port, "ledger", ""), PASSWORD);
    assert_eq!(stdout(&out).trim(), "42", "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_refused_with_slots_kept_for_the_superuser() {
    let server = TestServer::start_with(&["--max-connections", "6"]);
    let c = server.client().await;
    assert_eq!(
        scalar(&c, "show max_connections").await.as_deref(),
        Some("6")
    );
    let mut held = vec![c];
    for _ in 0..2 {
        held.push(server.client().await);
    }
    // Three open: the other three are the superuser's. Anyone else is refused before login.
    let other = psql(&conninfo(server.port, "mallory", ""), PASSWORD);
    assert!(
        stderr(&other).contains("remaining connection slots are reserved"),
        "{}",
        stderr(&other)
    );
    for _ in 0..3 {
        held.push(server.client().await);
    }
    let url = server.url();
    let refused = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .err()
        .expect("a seventh connection is refused");
    assert_eq!(code(&refused), "53300", "{refused:?}");
    // A closed connection gives its slot back.
    held.pop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = server.client().await;
    let one = again.simple_query("select 1").await.unwrap();
    assert!(!one.is_empty());
    drop(again);
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Connections that never log in hold slots too, until they go.
    let idle: Vec<std::net::TcpStream> = (0..6)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .err()
        .expect("no slot is left beside six idle connections");
    assert_eq!(code(&refused), "53300", "{refused:?}");
    drop(idle);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = server.client().await;
    assert_eq!(scalar(&c, "select 1").await.as_deref(), Some("1"));

    // A full server still serves a cancel request (it never logs in).
    let _idle: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    let cancel = c.cancel_token();
    let sleeping = tokio::spawn(async move {
        c.simple_query("select count(*) from generate_series(1, 100000000) a where a % 7 = 3")
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    cancel.cancel_query(tokio_postgres::NoTls).await.unwrap();
    let e = sleeping
        .await
        .unwrap()
        .expect_err("the sleep was cancelled");
    assert_eq!(code(&e), "57014", "{e:?}");
}

#[test]
fn tls_required_refuses_plaintext_and_binds_scram_to_the_certificate() {
    let (server, _certificate) = TestServer::start_with_tls(&["--tls-required"]);
    let plain = psql(&conninfo(server.port, "ledger", ""), PASSWORD);
    assert!(!plain.status.success());
    assert!(
        stderr(&plain).contains("no encryption: this server requires TLS"),
        "{}",
        stderr(&plain)
    );
    // libpq's channel_binding=require accepts only SCRAM-SHA-256-PLUS.
    let bound = format!(
        "host=127.0.0.1 port={} user=ledger dbname=ledger sslmode=require channel_binding=require",
        server.port
    );
    let out = psql(&bound, PASSWORD);
    assert_eq!(stdout(&out).trim(), "42", "{}", stderr(&out));
    let wrong = psql(&bound, "wrong");
    assert!(stderr(&wrong).contains("password authentication failed"));
    assert!(server
        .log()
        .contains("refused a plaintext connection from 127.0.0.1"));
}
