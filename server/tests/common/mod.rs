//! Starting the real `hotledger` binary for a test: a private data directory, a free
//! loopback port (never 5432), and helpers to connect, kill -9 and restart.

#![allow(dead_code)]

pub mod cluster;
pub mod proxy;
pub mod wire;

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
    /// Environment variables the server starts with (beside its password).
    pub env: Vec<(String, String)>,
}

/// Ports handed out: one is not bound until its server starts, so it must never be handed
/// out twice (tests in one binary start servers in parallel).
static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// Takes `port` for a server of this test binary if it is free and not yet taken.
pub fn claim_port(port: u16) -> bool {
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
        return false;
    }
    given.push(port);
    true
}

/// How long one psql run of a test may take: far past any statement's own limits, so a
/// statement that never ends fails its test, saying which, instead of holding up the suite.
pub const PSQL_LIMIT: Duration = Duration::from_secs(120);

/// Runs `command` to its end and returns what it printed, like `Command::output`, but
/// kills it and panics naming it if it runs past `limit`.
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    use std::io::Read;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {command:?}: {e}"));
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().expect("read stdout"),
        stderr: stderr.join().expect("read stderr"),
    }
}

/// A free port below the kernel's ephemeral range (32768 and up, where the ports of clients'
/// own connections come from, so a server there could find its port taken), far from 5432.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (seed.wrapping_add(n.wrapping_mul(7_919)) % 12_000) as u16;
        if claim_port(port) {
            return port;
        }
    }
    panic!("no free port between 20000 and 32000");
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
        TestServer::start_prepared(args, |_| {})
    }

    /// Starts with extra flags after `prepare` has been given the (not yet existing) data
    /// directory, to put it somewhere special (a small file system, say).
    pub fn start_prepared(args: &[&str], prepare: impl FnOnce(&Path)) -> TestServer {
        let mut server = TestServer::unstarted(args, &[]);
        prepare(&server.dir.path().join("data"));
        server.launch();
        server
    }

    /// Starts with extra flags and environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> TestServer {
        let mut server = TestServer::unstarted(args, env);
        server.launch();
        server
    }

    fn unstarted(args: &[&str], env: &[(&str, &str)]) -> TestServer {
        TestServer {
            port: free_port(),
            dir: tempfile::tempdir().expect("temp dir"),
            child: None,
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Starts the server process (its stderr appended to server.log).
    fn spawn(&self) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .expect("server log");
        Command::new(binary())
            .args(["serve", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(default_unless_given(
                &self.extra_args,
                "--checkpoint-interval-s",
                "2",
            ))
            .args(default_unless_given(&self.extra_args, "--pool-mb", "64"))
            // Tests run servers side by side: a console only where a test asks for one.
            .args(default_unless_given(&self.extra_args, "--http", "off"))
            .args(&self.extra_args)
            .env("HOTLEDGER_PASSWORD", PASSWORD)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start hotledger")
    }

    fn launch(&mut self) {
        self.child = Some(self.spawn());
        self.wait_ready();
    }

    /// Starts the server again and waits for it to exit by itself (within `limit`), for a
    /// start that must fail; its exit status, or None if it still ran (then it is killed).
    pub fn restart_expecting_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.spawn();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
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

    /// `kill -9`, `hotledger check` of what it left, then start again on the same data
    /// directory and port.
    pub fn kill9_and_restart(&mut self) {
        self.kill9();
        self.check_data();
        self.launch();
    }

    /// `hotledger check` of the (stopped) server's data directory must find it consistent;
    /// what it says.
    pub fn check_data(&self) -> String {
        let out = Command::new(binary())
            .args(["check", "--pool-mb", "64", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .output()
            .expect("run hotledger check");
        assert!(
            out.status.success(),
            "hotledger check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits for the server to exit by itself, within `limit`; its exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
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
        output_within(&mut self.psql_command(args), PSQL_LIMIT)
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

/// A private PostgreSQL 15 (`tools/setup.sh` installs it), to run the same script against:
/// initdb in a temporary directory, trust authentication, loopback only, no fsync (it is a
/// reference for answers, not for durability). Stopped when dropped.
pub struct Postgres {
    pub port: u16,
    dir: tempfile::TempDir,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A PostgreSQL tool as the postgres user when the test runs as root (initdb and postgres
/// refuse to run as root).
fn pg_tool(program: &str) -> Command {
    let path = format!("{PG_BIN}/{program}");
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &path]);
        c
    } else {
        Command::new(path)
    }
}

fn run_pg_tool(program: &str, args: &[String]) {
    let out = pg_tool(program)
        .args(args)
        .output()
        .expect("run a PostgreSQL tool");
    assert!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("pgdata");
        let port = free_port();
        if running_as_root() {
            // initdb refuses to run as root: PostgreSQL runs as the postgres user.
            let chown = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(chown.success(), "chown the PostgreSQL directory");
        }
        let data_arg = data.to_string_lossy().into_owned();
        run_pg_tool(
            "initdb",
            &[
                "-D".into(),
                data_arg.clone(),
                "-U".into(),
                "postgres".into(),
                "--auth=trust".into(),
                "--no-sync".into(),
            ],
        );
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        let log = data.join("log").to_string_lossy().into_owned();
        run_pg_tool(
            "pg_ctl",
            &[
                "-D".into(),
                data_arg,
                "-l".into(),
                log,
                "-w".into(),
                "-o".into(),
                options,
                "start".into(),
            ],
        );
        Postgres { port, dir }
    }

    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to PostgreSQL");
        tokio::spawn(connection);
        client
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("pgdata");
        let _ = pg_tool("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

/// Process `pid`'s resident memory now, in bytes (VmRSS; 0 once it is gone).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb << 10)
}

/// An error's SQLSTATE, or a line saying it has none.
pub fn code(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("no SQLSTATE: {e:?}"))
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
/// `flag value` unless the test gave the flag itself among `given`.
pub fn default_unless_given<'a>(given: &[String], flag: &'a str, value: &'a str) -> Vec<&'a str> {
    if given.iter().any(|a| a == flag) {
        Vec::new()
    } else {
        vec![flag, value]
    }
}

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

/// A self-signed certificate and its key (PEM files in `dir`), made with openssl.
pub fn self_signed_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
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
    (cert, key)
}

/// The ids of the ledger's stored transfers; none may be stored twice.
pub async fn stored_transfer_ids(
    client: &tokio_postgres::Client,
) -> std::collections::BTreeSet<i64> {
    let stored: Vec<i64> = client
        .query("select id from transfers", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let unique: std::collections::BTreeSet<i64> = stored.iter().copied().collect();
    assert_eq!(unique.len(), stored.len(), "a transfer is stored twice");
    unique
}

impl TestServer {
    /// Starts with TLS (a self-signed certificate, kept in the returned directory) and
    /// `extra` flags.
    pub fn start_with_tls(extra: &[&str]) -> (TestServer, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed_certificate(dir.path());
        let mut args = vec![
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        (TestServer::start_with(&args), dir)
    }
}
