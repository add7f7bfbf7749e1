//! `hotledger`: the server binary. It owns the command line, the data directory, the pgwire
//! listener and sessions, and wiring the executor and the Raft node together. It contains no
//! business rules: statements are planned by `planner` and applied by `ledger`.
//!
//! Key types: `Session` (one connection's state and statement execution), `Connection` (the
//! pgwire handlers of one connection), `ServerContext` (what every connection shares).
//!
//! Reading order: `main.rs` (startup), `frontend.rs` (the connection loop), `handlers.rs`
//! (pgwire messages), `session.rs` and `session/` (`transaction.rs` first, then `write.rs`,
//! `read.rs`), `statements.rs`, `wire.rs`; then the per-node services (`activity.rs`,
//! `advisory_locks.rs`, `notifications.rs`), `bulk_insert.rs`, `copy_format.rs`,
//! `migrations.rs`, `session_threads.rs`, `tls.rs`.

mod activity;
mod advisory_locks;
mod bulk_insert;
mod check_data;
mod cluster_settings;
mod connection_slots;
mod copy_format;
mod counting_allocator;
mod frontend;
mod handlers;
mod http;
mod local_cluster;
mod log_limit;
mod login;
mod login_throttle;
mod metrics;
mod migrations;
mod notifications;
mod pulse;
mod read_pacing;
mod read_threads;
mod session;
mod session_threads;
mod statements;
mod tls;
mod watchdog;
mod wire;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kv::IoMode;
use ledger::{ExecutorOptions, Request};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use crate::handlers::{Connection, ServerContext};
use crate::login::{LoginConfig, Logins};
use crate::session::Shared;
use crate::session_threads::SessionThreads;

// The session path allocates small objects on every message; glibc's malloc showed up at
// about 17% of CPU under pgbench, mimalloc's thread-local free lists cut that down. Counted
// per thread for the memory budget (`plan::memory`).
#[global_allocator]
static ALLOCATOR: counting_allocator::CountingAllocator = counting_allocator::CountingAllocator;

const DEFAULT_PASSWORD: &str = "ledger";

#[derive(Parser)]
#[command(
    name = "hotledger",
    version,
    about = "A PostgreSQL-compatible ledger database for hot accounts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one node: PostgreSQL protocol on --listen, data in --data-dir.
    Serve(Box<ServeArgs>),
    /// Start a local cluster of separate server processes, for trying it out; Ctrl-C stops
    /// them all.
    Cluster(local_cluster::ClusterArgs),
    /// Check a stopped server's data directory: page checksums, B+tree order, indexes
    /// against their tables, debits equal to credits.
    Check(check_data::CheckArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Directory holding the data file and the log (created on first start).
    #[arg(long, default_value = "./hotledger-data")]
    data_dir: PathBuf,
    /// Address for PostgreSQL clients.
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: SocketAddr,
    /// The user clients log in as.
    #[arg(long, default_value = "ledger")]
    user: String,
    /// The password (or set HOTLEDGER_PASSWORD). With the default, only loopback addresses
    /// are allowed.
    #[arg(long, env = "HOTLEDGER_PASSWORD", default_value = DEFAULT_PASSWORD, hide_env_values = true)]
    password: String,
    /// This node's id in the cluster.
    #[arg(long, default_value_t = 1)]
    node_id: u64,
    /// Where this node listens for its peers (Raft and forwarded statements); with --peers
    /// or --join.
    #[arg(long)]
    raft_listen: Option<SocketAddr>,
    /// Join a running cluster rather than form one: the node waits until a member runs
    /// `CALL hotledger.add_node(ID, 'RAFT_LISTEN')`, then catches up and votes. Start it with
    /// --join on every restart too (its membership comes from the log).
    #[arg(long, requires = "raft_listen", conflicts_with = "peers")]
    join: bool,
    /// The cluster's voters, `ID=HOST:PORT` (their --raft-listen addresses) separated by
    /// commas, this node included; every node is given the same list. Without it the
    /// server is a single node.
    #[arg(long, requires = "raft_listen", value_parser = local_cluster::peer_list)]
    peers: Option<local_cluster::Peers>,
    /// In a cluster: log entries applied between snapshots. A snapshot writes the whole
    /// state to a file (sent to a follower too far behind the log) and lets the log before
    /// it be purged.
    #[arg(long, default_value_t = raft::NodeOptions::SNAPSHOT_ENTRIES, value_parser = clap::value_parser!(u64).range(1..))]
    raft_snapshot_entries: u64,
    /// In a cluster: log entries kept behind the last snapshot; a follower further behind
    /// catches up from the snapshot instead of the log.
    #[arg(long, default_value_t = raft::NodeOptions::LOG_KEEP_ENTRIES)]
    raft_log_keep_entries: u64,
    /// In a cluster: the most MiB of log entries kept behind the last snapshot, whatever
    /// --raft-log-keep-entries allows (a batch path's entries are large).
    #[arg(long, default_value_t = raft::NodeOptions::LOG_KEEP_BYTES >> 20)]
    raft_log_keep_mb: u64,
    /// Buffer pool size in MiB; default: a quarter of the machine's memory, at least 256 and
    /// at most 16384 (taken as pages are used, not at start). Dirty pages stay in the pool
    /// until a checkpoint writes them, so a small pool means frequent checkpoints that write
    /// the same index leaves over and over.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pool_mb: Option<u64>,
    /// The server's heap budget in MiB, beside the buffer pool: a statement holding 64 MiB
    /// or more fails with 53200 (out of memory) once the server's heap passes it (or the
    /// statement alone would); default: half of what the machine's memory leaves beside the
    /// pool, at least 256.
    #[arg(long, value_parser = clap::value_parser!(u64).range(16..=1 << 24))]
    memory_budget_mb: Option<u64>,
    /// Fault the whole buffer pool's memory in from the start, in the background at idle
    /// priority, rather than as pages are first used. On a virtual machine the first touch
    /// of memory costs the host ~2 s of CPU per GiB, which otherwise falls on a loaded
    /// server while its pool grows. Memory use is then the pool's size from the start
    /// (refused for a pool of more than three quarters of the machine's memory).
    #[arg(long)]
    prefault_pool: bool,
    /// Page size in bytes of a new data directory's files: 4096, 8192, 16384 or 32768. An
    /// existing directory keeps its own.
    #[arg(long, default_value_t = 8192, value_parser = page_size)]
    page_size: u32,
    /// Executor partitions for a new data directory (ledger rows spread by account and
    /// transfer id); default: one per core. An existing directory keeps its count.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    partitions: Option<u16>,
    /// Threads running client sessions (the protocol, parsing and planning); default: one per
    /// core. The executor partitions and the log writer have threads of their own.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    session_threads: Option<u16>,
    /// Checkpoint at least this often while data changes, in seconds: a restart after a
    /// crash replays the log written since the last checkpoint.
    #[arg(long, default_value_t = 10)]
    checkpoint_interval_s: u64,
    /// Spread each checkpoint's writes over about this many milliseconds (0: write at full
    /// speed), leaving disk and CPU to the log and the executor. Should the pool fill with
    /// dirty pages faster than checkpoints write them, applying slows down (SHOW
    /// storage_stats: pool_waits).
    #[arg(long, default_value_t = 0)]
    checkpoint_spread_ms: u64,
    /// PEM certificate chain for TLS (with --tls-key); without it the server speaks plain
    /// text only.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for TLS (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse plaintext connections: every client must negotiate TLS (needs --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_required: bool,
    /// The most client connections at once (FATAL 53300 past it); the last 3 are kept for
    /// the superuser.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(4..=100_000))]
    max_connections: u32,
    /// The largest message a client may send, in MiB (larger ones are refused unread).
    #[arg(long, default_value_t = 64)]
    max_message_mb: usize,
    /// The web console, `/metrics` and `/health` over HTTP: HOST:PORT, or `off`. Without
    /// it, 127.0.0.1:8080 — and a node that finds that port taken says so and goes on
    /// without a console; an address given that cannot be bound stops the start.
    #[arg(long, value_parser = http_address)]
    http: Option<HttpAddress>,
    /// File IO for the data file: auto (io_uring when available), uring or portable.
    #[arg(long, default_value = "auto", value_parser = ["auto", "uring", "portable"])]
    io: String,
    /// File IO for the replicated log (portable measured faster: see docs/paths.md).
    #[arg(long, default_value = "portable", value_parser = ["auto", "uring", "portable"])]
    log_io: String,
    /// The share of one core, in percent, a long read (a query on a snapshot, or a long
    /// evaluation) takes while other statements run: it runs in 1-ms slices with pauses
    /// between them, so the ledger's latency stays near its level without the read. 100:
    /// no pauses. A quiet server gives a read all the CPU it can use either way.
    #[arg(long, default_value_t = read_pacing::DEFAULT_SHARE_PERCENT, value_parser = clap::value_parser!(u32).range(1..=100))]
    long_read_share: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => match serve(*args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("hotledger: {message}");
                ExitCode::FAILURE
            }
        },
        Command::Check(args) => match check_data::run(args) {
            Ok(report) => {
                println!("{report}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("hotledger check: {message}");
                ExitCode::FAILURE
            }
        },
        Command::Cluster(args) => match local_cluster::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("hotledger cluster: {message}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `HOTLEDGER_TEST_FAULTS=log-write:EIO:N` (or `ENOSPC`): the log's write after N more
/// writes fails with that error, and so does every one after it — for the tests that prove
/// nothing unwritten is ever acknowledged. Unset, nothing fails.
fn log_faults_from_env() -> Result<kv::FaultPlan, String> {
    let plan = kv::FaultPlan::none();
    let Ok(spec) = std::env::var("HOTLEDGER_TEST_FAULTS") else {
        return Ok(plan);
    };
    let bad = || format!("HOTLEDGER_TEST_FAULTS={spec}: expected log-write:EIO|ENOSPC:N");
    let mut parts = spec.split(':');
    let (Some("log-write"), Some(errno), Some(n), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let errno = match errno {
        "EIO" => libc::EIO,
        "ENOSPC" => libc::ENOSPC,
        _ => return Err(bad()),
    };
    plan.fail_writes_after(n.parse().map_err(|_| bad())?, errno);
    eprintln!("hotledger: test faults: the log's writes fail with {spec} ");
    Ok(plan)
}

pub(crate) fn parse_io(mode: &str) -> IoMode {
    match mode {
        "uring" => IoMode::Uring,
        "portable" => IoMode::Portable,
        _ => IoMode::Auto,
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// Takes an exclusive lock on the data directory so two servers never share it.
pub(crate) fn lock_data_dir(dir: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(format!(
            "data directory {} is in use by another hotledger process",
            dir.display()
        ));
    }
    Ok(file)
}

/// `--http`: an address, or `off`.
#[derive(Clone, Copy, Debug)]
enum HttpAddress {
    Off,
    At(SocketAddr),
}

/// Starts the HTTP server where `--http` says (see `ServeArgs::http`).
fn start_console(
    http: Option<HttpAddress>,
    shared: &Arc<Shared>,
    logins: &Arc<Logins>,
) -> Result<(), String> {
    let (addr, asked) = match http {
        Some(HttpAddress::Off) => return Ok(()),
        Some(HttpAddress::At(addr)) => (addr, true),
        None => (DEFAULT_HTTP.parse().expect("a valid address"), false),
    };
    match http::start(addr, shared.clone(), logins.clone()) {
        Ok(()) => {
            eprintln!("hotledger: console on http://{addr}/");
            Ok(())
        }
        Err(e) if !asked => {
            eprintln!("hotledger: no console: {e} (give --http HOST:PORT, or --http off)");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn http_address(text: &str) -> Result<HttpAddress, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(HttpAddress::Off);
    }
    text.parse()
        .map(HttpAddress::At)
        .map_err(|_| format!("expected HOST:PORT or off, got {text:?}"))
}

/// Where the console listens when `--http` is not given.
const DEFAULT_HTTP: &str = "127.0.0.1:8080";

fn serve(args: ServeArgs) -> Result<(), String> {
    if args.password == DEFAULT_PASSWORD && !is_loopback(args.listen.ip()) {
        return Err(format!(
            "refusing to listen on {} with the default password; set --password or HOTLEDGER_PASSWORD",
            args.listen
        ));
    }
    if let (Some(HttpAddress::At(addr)), true) = (args.http, args.password == DEFAULT_PASSWORD) {
        if !is_loopback(addr.ip()) {
            return Err(format!(
                "refusing to serve the console on {addr} with the default password; set --password or HOTLEDGER_PASSWORD"
            ));
        }
    }
    if args.password.is_empty() {
        return Err("the password must not be empty".into());
    }
    std::fs::create_dir_all(&args.data_dir).map_err(|e| {
        format!(
            "cannot create data directory {}: {e}",
            args.data_dir.display()
        )
    })?;
    let _lock = lock_data_dir(&args.data_dir)?;
    let io_mode = parse_io(&args.io);
    // The first session thread also runs the listener and the Raft node; `run` starts the
    // others. A thread of its own, for the stack statements need.
    let first = session_threads::thread_builder(0)
        .spawn(move || {
            let runtime = session_threads::session_runtime()
                .map_err(|e| format!("cannot start the async runtime: {e}"))?;
            runtime.block_on(run(args, io_mode))
        })
        .map_err(|e| format!("cannot start the first session thread: {e}"))?;
    first
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `--page-size`: a power of two from 4096 to 32768.
fn page_size(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(size) if size.is_power_of_two() && (4096..=32768).contains(&size) => Ok(size),
        _ => Err("must be 4096, 8192, 16384 or 32768".to_string()),
    }
}

/// The machine's memory in MiB, if it can be read.
fn memory_mb() -> Option<u64> {
    // SAFETY: sysconf reads system constants; no memory is shared.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page_size > 0).then(|| (pages as u64 * page_size as u64) >> 20)
}

/// A quarter of the machine's memory in MiB, within [256, 16384] (256 if it cannot be read).
fn default_pool_mb() -> u64 {
    memory_mb().map_or(256, |mb| (mb / 4).clamp(256, 16_384))
}

/// The pool size, refused when `--prefault-pool` would take more than three quarters of the
/// machine's memory at start (the process would be killed for it, not told).
fn pool_mb(args: &ServeArgs) -> Result<u64, String> {
    let pool_mb = args.pool_mb.unwrap_or_else(default_pool_mb);
    match memory_mb() {
        Some(memory) if args.prefault_pool && pool_mb > memory / 4 * 3 => Err(format!(
            "--prefault-pool with a pool of {pool_mb} MiB: more than three quarters of this machine's {memory} MiB"
        )),
        _ => Ok(pool_mb),
    }
}

/// Half of what the machine's memory leaves beside the pool, in MiB, at least 256.
fn default_memory_budget_mb(pool_mb: u64) -> u64 {
    memory_mb().map_or(1024, |mb| (mb.saturating_sub(pool_mb) / 2).max(256))
}

/// Starts this node's Raft. A single node runs it on this runtime (session thread 0): its
/// proposer then shares a thread with the sessions there, with no extra hop. A cluster's
/// runs on a thread of its own, so heartbeats, replication and the peers' requests are
/// never queued behind client sessions (a late heartbeat costs an election).
async fn start_node(
    options: raft::NodeOptions,
    executor: ledger::ExecutorHandle,
) -> Result<raft::Node, String> {
    if options.peers.is_empty() && !options.join {
        return raft::start(options, executor)
            .await
            .map_err(|e| e.to_string());
    }
    let (started, node) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = started.send(Err(format!("cannot start the Raft thread: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let node = raft::start(options, executor).await;
                let _ = started.send(node.map_err(|e| e.to_string()));
                // The node's tasks run here until the process exits.
                std::future::pending::<()>().await
            })
        })
        .map_err(|e| format!("cannot start the Raft thread: {e}"))?;
    node.await
        .map_err(|_| "the Raft thread stopped while starting".to_string())?
}

fn cannot_apply(why: &str) -> String {
    format!("stopping: this replica can no longer apply the log: {why}")
}

/// Brings the schema up to date and, in a cluster, records this node's settings.
async fn prepare(shared: &Arc<Shared>) -> Result<(), String> {
    migrations::apply(shared)
        .await
        .map_err(|e| format!("migration failed: {e}"))?;
    if shared.read_barrier.in_cluster() {
        cluster_settings::record(shared)
            .await
            .map_err(|e| format!("cannot join the cluster: {}", e.message))?;
    }
    Ok(())
}

async fn run(args: ServeArgs, io_mode: IoMode) -> Result<(), String> {
    if args.raft_listen.is_some() && args.peers.is_none() && !args.join {
        return Err(
            "--raft-listen needs --peers (to form a cluster) or --join (to join one)".into(),
        );
    }
    let pool_mb = pool_mb(&args)?;
    read_pacing::set_share_percent(args.long_read_share);
    let budget_mb = args
        .memory_budget_mb
        .unwrap_or_else(|| default_memory_budget_mb(pool_mb));
    plan::memory::set_budget((budget_mb << 20) as usize);
    let (tls, tls_certificate) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let loaded = tls::load(cert, key)?;
            (Some(loaded.acceptor), Some(loaded.certificate_pem))
        }
        _ => (None, None),
    };
    // Bind first, so a busy port fails fast before any recovery work.
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let options = ExecutorOptions {
        data_file: args.data_dir.join("data.hl"),
        pool_bytes: (pool_mb as usize) << 20,
        prefault_pool: args.prefault_pool,
        page_size: args.page_size,
        checkpoint_interval: Duration::from_secs(args.checkpoint_interval_s.max(1)),
        checkpoint_spread: Some(Duration::from_millis(args.checkpoint_spread_ms))
            .filter(|spread| !spread.is_zero()),
        io_mode,
        partitions: args.partitions.map(usize::from),
        dependent_views: planner::dependent_views,
        bootstrap_role: args.user.clone(),
    };
    let (executor, recovered) = ledger::spawn(options)
        .map_err(|e| format!("cannot open {}: {}", args.data_dir.display(), e.message))?;
    let node = start_node(
        raft::NodeOptions {
            node_id: args.node_id,
            log_dir: args.data_dir.join("log"),
            address: args.listen.to_string(),
            peers: args.peers.clone().map(|p| p.0).unwrap_or_default(),
            raft_listen: args.raft_listen,
            join: args.join,
            log_io: parse_io(&args.log_io),
            snapshot_dir: args.data_dir.join("snapshots"),
            snapshot_entries: args.raft_snapshot_entries,
            log_keep_entries: args.raft_log_keep_entries,
            log_keep_bytes: args.raft_log_keep_mb.saturating_mul(1 << 20),
            log_faults: log_faults_from_env()?,
        },
        executor.clone(),
    )
    .await?;
    let metrics = Arc::new(metrics::NodeMetrics::default());
    {
        let metrics = metrics.clone();
        let _ = node
            .log_stats
            .on_flush
            .set(Box::new(move |took, bytes| metrics.flush(took, bytes)));
    }
    {
        let metrics = metrics.clone();
        let _ = node
            .log_stats
            .on_apply
            .set(Box::new(move |took, _| metrics.apply(took)));
    }
    let shared = Arc::new(Shared {
        executor: executor.clone(),
        proposer: node.proposer.clone(),
        read_barrier: node.read_barrier.clone(),
        cluster_status: node.status.clone(),
        log_stats: node.log_stats.clone(),
        advisory_locks: Default::default(),
        notifications: Default::default(),
        activity: Default::default(),
        membership: node.membership.clone(),
        max_connections: args.max_connections as usize,
        metrics: metrics.clone(),
    });
    // Raft may stop while these run (a node whose settings differ from the cluster's
    // stops as it applies the record): then say why at once instead of retrying.
    let stopped = node.stopped();
    tokio::pin!(stopped);
    tokio::select! {
        prepared = prepare(&shared) => prepared?,
        why = &mut stopped => return Err(cannot_apply(&why)),
    }
    watchdog::spawn(Arc::downgrade(&shared)).map_err(|e| format!("watchdog: {e}"))?;
    pulse::spawn(Arc::downgrade(&shared));
    let logins = Logins::new(LoginConfig {
        user: args.user.clone(),
        password: args.password.clone(),
        tls_certificate,
        tls_required: args.tls_required,
        max_connections: args.max_connections as usize,
        shared: Some(shared.clone()),
    });
    start_console(args.http, &shared, &logins)?;
    let context = Arc::new(ServerContext::new(shared, logins.clone()));
    eprintln!(
        "hotledger: listening on {} (data {}, recovered from log index {}); connect with: psql -h {} -p {} -U {}",
        args.listen,
        args.data_dir.display(),
        recovered.index,
        args.listen.ip(),
        args.listen.port(),
        args.user
    );
    let max_message = args.max_message_mb.max(1) << 20;

    let sessions = SessionThreads::start(
        args.session_threads
            .map(usize::from)
            .unwrap_or_else(session_threads::default_count),
    )?;
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let _ = socket.set_nodelay(true);
                let handlers = Arc::new(Connection::new(context.clone()));
                let inbox = handlers.inbox();
                let control = handlers.control();
                let lookahead = handlers.lookahead();
                let secure = handlers.secure();
                let slot = logins.accept();
                let logins = logins.clone();
                let tls = tls.clone();
                sessions.serve(socket, move |socket| async move {
                    let connection = frontend::ConnectionContext {
                        inbox,
                        control,
                        limit: max_message,
                        lookahead,
                        secure,
                        logins,
                        slot,
                    };
                    let _ = frontend::serve_connection(socket, tls, handlers, connection).await;
                });
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            // Nothing more can be applied: the state this node would serve no longer
            // follows the log. Stop at once; a restart replays the log from the last
            // checkpoint.
            why = &mut stopped => {
                drop(listener);
                return Err(cannot_apply(&why));
            }
        }
    }
    eprintln!("hotledger: shutting down");
    drop(listener);
    let _ = node.raft.shutdown().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    if executor.send(Request::Shutdown {
        reply: Box::new(move |()| {
            let _ = tx.send(());
        }),
    }) {
        let _ = tokio::time::timeout(Duration::from_secs(60), rx).await;
    }
    Ok(())
}
