//! The threads that run client sessions. Each is a single-threaded tokio runtime and a
//! connection stays on the thread it was given (the one with the fewest live connections), so
//! no thread steals another's work or wakes it to look for some.
//!
//! Thread 0 is the runtime the server starts on, which also runs the listener and the Raft
//! node; the others are started here. On 2 cores two such threads beat both one thread and
//! tokio's work-stealing scheduler with two workers under pgbench (docs/benchmarks.md,
//! "What was tried").

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// A single-threaded runtime for sessions: its blocking pool (where long statements are
/// parsed) gets the stack statements need.
pub fn session_runtime() -> std::io::Result<Runtime> {
    Builder::new_current_thread()
        .enable_all()
        .thread_stack_size(sql::STATEMENT_STACK_BYTES)
        .build()
}

/// The builder of session thread `index`: its name, and the stack statements need.
pub fn thread_builder(index: usize) -> std::thread::Builder {
    std::thread::Builder::new()
        .name(format!("session-{index}"))
        .stack_size(sql::STATEMENT_STACK_BYTES)
}

/// How many threads run sessions when `--session-threads` is not given: one per core.
pub fn default_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

struct SessionThread {
    handle: Handle,
    /// Connections being served on this thread.
    live: Arc<AtomicUsize>,
    /// None for thread 0, whose runtime the caller owns.
    started: Option<Started>,
}

/// A thread started here, and what ends its runtime.
struct Started {
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

pub struct SessionThreads {
    threads: Vec<SessionThread>,
}

impl SessionThreads {
    /// Thread 0 is the calling runtime; starts `count - 1` more threads.
    pub fn start(count: usize) -> Result<SessionThreads, String> {
        let mut threads = vec![SessionThread {
            handle: Handle::current(),
            live: Arc::default(),
            started: None,
        }];
        for index in 1..count.max(1) {
            let runtime = session_runtime()
                .map_err(|e| format!("cannot start session thread {index}: {e}"))?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = thread_builder(index)
                .spawn(move || {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    // Sessions still running are dropped; a statement parsing on the
                    // blocking pool gets a moment to finish.
                    runtime.shutdown_timeout(Duration::from_secs(1));
                })
                .map_err(|e| format!("cannot start session thread {index}: {e}"))?;
            threads.push(SessionThread {
                handle,
                live: Arc::default(),
                started: Some(Started { stop, thread }),
            });
        }
        Ok(SessionThreads { threads })
    }

    /// Serves `socket` with `serve` on the thread with the fewest live connections.
    pub fn serve<F, Fut>(&self, socket: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = self
            .threads
            .iter()
            .min_by_key(|t| t.live.load(Ordering::Relaxed))
        else {
            return;
        };
        // A socket belongs to the reactor of the runtime that registered it: hand it over as
        // a plain socket and register it again on the chosen thread.
        let Ok(socket) = socket.into_std() else {
            return;
        };
        let live = thread.live.clone();
        live.fetch_add(1, Ordering::Relaxed);
        thread.handle.spawn(async move {
            let _connection = LiveConnection(live);
            if let Ok(socket) = TcpStream::from_std(socket) {
                serve(socket).await;
            }
        });
    }
}

impl Drop for SessionThreads {
    fn drop(&mut self) {
        // Stop them all first, so they wind down side by side.
        let stopping: Vec<JoinHandle<()>> = self
            .threads
            .iter_mut()
            .filter_map(|t| t.started.take())
            .map(|started| {
                let _ = started.stop.send(());
                started.thread
            })
            .collect();
        for thread in stopping {
            let _ = thread.join();
        }
    }
}

/// Counts a connection as live on its thread until its task ends (or is dropped).
struct LiveConnection(Arc<AtomicUsize>);

impl Drop for LiveConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
