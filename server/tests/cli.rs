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
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "{}", stderr(&made));
    let server = TestServer::start_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
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
