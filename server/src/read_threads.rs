//! The threads long reads run on: queries on a snapshot (`Session::select_off_executor`) and
//! long queries that read no table (`Session::evaluate_here`).
//!
//! They run in the idle scheduling class (`SCHED_IDLE`, `kv::io::run_thread_when_idle`): on
//! a machine with few cores a report takes whole cores, and at the same priority the
//! scheduler shares them evenly with the executor and the session threads, so every
//! transfer's latency grows by the report's share. In the idle class a report gets what the
//! ledger leaves idle — all of it when the ledger is quiet, what its fsync waits leave when
//! it is busy — and a ledger thread that wakes takes the core back at once (at nice 10 the
//! report kept about a tenth of a busy core and woken threads waited for it more often:
//! docs/benchmarks.md, "Report during load"). A thread is started for each read that finds
//! none idle (tokio's blocking pool on a runtime of its own), so a short read never queues
//! behind a long one; `statement_timeout` bounds a read the ledger leaves no room for.
//!
//! The idle class is not the whole answer on a virtual machine of two vCPUs: a busy thread
//! on the other vCPU slows the ledger's by itself, so while the ledger is busy a read also
//! runs in slices with pauses between them (`read_pacing`).
//!
//! What the reads let go of when they end (a snapshot's page buffers, which go back to the
//! buffer pool's arena under its lock) is dropped by the caller, on a session thread at
//! normal priority, so the executor never waits on a lock a lowered thread holds.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinError;

use crate::read_pacing;

fn runtime() -> &'static Runtime {
    static READS: OnceLock<Runtime> = OnceLock::new();
    READS.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("read")
            .thread_stack_size(sql::STATEMENT_STACK_BYTES)
            .on_thread_start(kv::io::run_thread_when_idle)
            .build()
            .expect("the read threads' runtime starts")
    })
}

/// Runs `read` on a read thread, paced while the ledger is busy (`read_pacing`) through
/// `interrupt`, the read's own; a panic in it is the error.
pub fn run<T: Send + 'static>(
    interrupt: &plan::Interrupt,
    read: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, JoinError>> {
    let interrupt = interrupt.clone();
    runtime().spawn_blocking(move || {
        let _paced = read_pacing::pace_while(&interrupt);
        read()
    })
}
