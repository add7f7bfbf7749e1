//! The command line and startup: one-line errors for bad flags, a busy port, a locked data
//! directory and the default password on a public address; TLS when a certificate is given.

mod common;

use std::process::Command;

use common::{binary, stderr, stdout, TestServer, PASSWORD};

fn serve(args: &[&str]) -> std::process::Output {
    Command::new(binary())
        .arg("serve")
        .args(args)
        .env_remove("HOTLEDGER_PASSWORD")
        .output()
        .expect("run hotledger")
}

/// Asserts that `output` is of a refused start whose error says `expected`.
fn assert_refused(output: &std::process::Output, expected: &str) {
    assert!(!output.status.success());
    assert!(stderr(output).contains(expected), "{}", stderr(output));
}

#[test]
fn bad_flags_and_unsafe_setups_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();

    let unknown = serve(&["--no-such-flag"]);
    assert_refused(&unknown, "--no-such-flag");

    for count in ["0", "65", "two"] {
        let bad = serve(&["--data-dir", data, "--partitions", count]);
        assert_refused(&bad, "--partitions");
    }
    for count in ["0", "257", "many"] {
        let bad = serve(&["--data-dir", data, "--session-threads", count]);
        assert_refused(&bad, "--session-threads");
    }

    for size in ["2048", "5000", "65536", "big"] {
        let bad = serve(&["--data-dir", data, "--page-size", size]);
        assert_refused(&bad, "--page-size");
    }

    let huge = serve(&[
        "--data-dir",
        data,
        "--prefault-pool",
        "--pool-mb",
        "1048576",
    ]);
    assert_refused(&huge, "--prefault-pool with a pool of 1048576 MiB");

    let public = serve(&["--data-dir", data, "--listen", "0.0.0.0:0"]);
    assert_refused(
        &public,
        "refusing to listen on 0.0.0.0:0 with the default password",
    );

    let help = Command::new(binary())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    for flag in [
        "--data-dir",
        "--listen",
        "--password",
        "--node-id",
        "--tls-cert",
        "--max-message-mb",
        "--partitions",
        "--session-threads",
        "--page-size",
        "--prefault-pool",
    ] {
        assert!(
            stdout(&help).contains(flag),
            "--help does not mention {flag}"
        );
    }

    // A second server on the same data directory, or on a busy port, is refused.
    let running = TestServer::start();
    let data_dir = running.data_dir().join("data");
    let locked = serve(&[
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_refused(&locked, "is in use by another hotledger process");
    let port = format!("127.0.0.1:{}", running.port);
    let busy = serve(&["--data-dir", data, "--listen", &port]);
    assert_refused(&busy, &format!("cannot listen on {port}"));
    assert_eq!(stderr(&busy).trim().lines().count(), 1, "{}", stderr(&busy));
}

#[test]
fn tls_when_a_certificate_is_given() {
    let (server, _certificate) = TestServer::start_with_tls(&[]);
    let conninfo = format!(
        "host=127.0.0.1 port={} user=ledger dbname=ledger sslmode=require",
        server.port
    );
    let out = Command::new("psql")
        .args(["-X", &conninfo, "-c", "select 40 + 2", "-c", "\\conninfo"])
        .env("PGPASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("42"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("SSL connection (protocol: TLSv1.3"),
        "{}",
        stdout(&out)
    );
    // Plain text still works for clients that do not ask for TLS.
    let plain = format!(
        "host=127.0.0.1 port={} user=ledger dbname=ledger sslmode=disable",
        server.port
    );
    let out = Command::new("psql")
        .args(["-X", "-At", &plain, "-c", "select 1"])
        .env("PGPASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "1", "{}", stderr(&out));
}

/// `hotledger check` refuses a directory a server holds, finds a stopped one consistent, and
/// refuses damaged pages with exit status 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_damage_and_refuses_a_running_server() {
    let mut server = TestServer::start();
    let c = server.client().await;
    c.batch_execute(
        "create table notes (id int primary key, body text);
         create index notes_body on notes (body);
         insert into notes select g, repeat('x', g % 50) from generate_series(1, 2000) g;
         insert into accounts (id, ledger, code) values (1, 700, 10), (2, 700, 10);
         call transfer(1, 1, 2, 25, 700, 1);",
    )
    .await
    .unwrap();
    drop(c);
    let data = server.data_dir().join("data");
    let check = || {
        Command::new(binary())
            .args(["check", "--data-dir"])
            .arg(&data)
            .output()
            .unwrap()
    };
    assert_refused(&check(), "is in use by another hotledger process");
    assert!(server.stop().success());
    let out = check();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("consistent as of log index")
            && stdout(&out).contains("2 accounts; debits = credits: 25 posted"),
        "{}",
        stdout(&out)
    );
    // Every page past the file's header overwritten.
    let file = data.join("data.hl");
    let mut bytes = std::fs::read(&file).unwrap();
    for b in &mut bytes[16384..] {
        *b = 0xa5;
    }
    std::fs::write(&file, bytes).unwrap();
    let out = check();
    assert_refused(&out, "checksum mismatch");
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
}
