//! Starting the real `hotledger` binary for a test: a private data directory, a free
//! loopback port (never 5432), and helpers to connect, kill -9 and restart.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const PASSWORD: &str = "test-password";

pub struct TestServer {
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
}

/// A free port from the OS's ephemeral range (far from 5432).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// The repository's root, from the directory cargo runs the test in. Not `env!`: the value
/// compiled in names the checkout that first built the test binary, and a clone that shares
/// the target directory (CI does) reuses that binary unchanged.
pub fn repo_root() -> PathBuf {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    PathBuf::from(manifest).join("..")
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hotledger"))
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// Starts with extra `hotledger serve` flags.
    pub fn start_with(args: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let extra_args = args.iter().map(|a| a.to_string()).collect();
        let mut server = TestServer {
            port: free_port(),
            dir,
            child: None,
            extra_args,
        };
        server.launch();
        server
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .expect("server log");
        let child = Command::new(binary())
            .args(["serve", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--checkpoint-interval-s",
                "2",
            ])
            .args(if self.extra_args.iter().any(|a| a == "--pool-mb") {
                &[][..]
            } else {
                &["--pool-mb", "64"][..]
            })
            .args(&self.extra_args)
            .env("HOTLEDGER_PASSWORD", PASSWORD)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start hotledger");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits until the server accepts connections (it listens only after recovery).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("hotledger exited during start ({status}): {}", self.log());
                }
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.psql_ok("select 1") {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("hotledger did not become ready: {}", self.log());
    }

    fn psql_ok(&self, sql: &str) -> bool {
        self.psql_command(&["-c", sql])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// `kill -9`, then start again on the same data directory and port.
    pub fn kill9_and_restart(&mut self) {
        self.kill9();
        self.launch();
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().expect("wait for hotledger")
    }

    pub fn restart(&mut self) {
        self.launch();
    }

    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=ledger password={PASSWORD} dbname=ledger",
            self.port
        )
    }

    pub fn psql_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("psql");
        c.args([
            "-X",
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "ledger",
            "-d",
            "ledger",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .args(args)
        .env("PGPASSWORD", PASSWORD)
        .env("PGCONNECT_TIMEOUT", "10");
        c
    }

    pub fn psql(&self, args: &[&str]) -> Output {
        self.psql_command(args).output().expect("run psql")
    }

    pub fn pgbench(&self, args: &[&str]) -> Output {
        Command::new("pgbench")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "ledger",
            ])
            .args(args)
            .arg("ledger")
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("run pgbench")
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to hotledger");
        tokio::spawn(connection);
        client
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A query's single value as text (simple protocol).
pub async fn scalar(client: &tokio_postgres::Client, sql: &str) -> Option<String> {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    for m in messages {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = m {
            return row.get(0).map(str::to_string);
        }
    }
    None
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The `key=value` pairs of a `SHOW ..._stats` line, the values as numbers.
pub fn stat_fields(line: &str) -> std::collections::HashMap<String, u64> {
    line.split_whitespace()
        .map(|pair| {
            let (key, value) = pair.split_once('=').expect("key=value");
            (key.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
