//! `hotledger check --data-dir DIR`: verifies a stopped data directory as of its last
//! checkpoint — every page the trees reach read from disk with its checksum verified, every
//! B+tree in key order, every index agreeing with its table, debits equal to credits — and
//! says what it went through, or the first violation (exit status 1). The log after the
//! checkpoint is not replayed (a restart replays it). It takes the directory's lock, so it
//! refuses a directory a server is using, and opens it as a restart would (finishing a
//! snapshot install a crash interrupted), writing nothing else.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ledger::{ExecutorOptions, Request};

#[derive(Args)]
pub struct CheckArgs {
    /// The data directory to check (of a stopped server).
    #[arg(long, default_value = "./hotledger-data")]
    data_dir: PathBuf,
    /// Buffer pool for the check, in MiB.
    #[arg(long, default_value_t = 256)]
    pool_mb: u64,
    /// File IO: auto (io_uring when available), uring or portable.
    #[arg(long, default_value = "auto", value_parser = ["auto", "uring", "portable"])]
    io: String,
}

/// Runs the check; what it went through, or what is wrong.
pub fn run(args: CheckArgs) -> Result<String, String> {
    let data_file = args.data_dir.join("data.hl");
    if !data_file.exists() {
        return Err(format!("no hotledger data in {}", args.data_dir.display()));
    }
    let _lock = crate::lock_data_dir(&args.data_dir)?;
    let options = ExecutorOptions {
        data_file,
        pool_bytes: (args.pool_mb.max(16) as usize) << 20,
        prefault_pool: false,
        page_size: kv::EngineOptions::default().page_size,
        checkpoint_interval: Duration::from_secs(3600),
        checkpoint_spread: None,
        io_mode: crate::parse_io(&args.io),
        partitions: None,
        dependent_views: planner::dependent_views,
        bootstrap_role: "ledger".into(),
    };
    let (executor, position) = ledger::spawn(options)
        .map_err(|e| format!("cannot open {}: {}", args.data_dir.display(), e.message))?;
    let (tx, rx) = std::sync::mpsc::channel();
    executor.send(Request::CheckIntegrity {
        reply: Box::new(move |report| {
            let _ = tx.send(report);
        }),
    });
    let report = rx
        .recv()
        .map_err(|_| "the executor stopped during the check".to_string())?;
    let (done, stopped) = std::sync::mpsc::channel();
    executor.send(Request::Shutdown {
        reply: Box::new(move |()| {
            let _ = done.send(());
        }),
    });
    let _ = stopped.recv_timeout(Duration::from_secs(60));
    match report {
        Ok(report) => Ok(format!(
            "{}: consistent as of log index {}: {report}",
            args.data_dir.display(),
            position.index
        )),
        Err(e) => Err(format!("{}: {}", args.data_dir.display(), e.message)),
    }
}
