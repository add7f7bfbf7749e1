//! openraft's log storage on kv's `LogStore`. A dedicated thread owns the files: appends
//! queued while a flush is running are written together and share the next fdatasync.
//! Entries are readable from memory as soon as `append` returns.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;

use kv::{LogStore, LogStoreOptions};
use ledger::ExecutorHandle;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, OptionalSend, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::apply_ahead::ApplyAhead;
use crate::early_reply::EarlyReplies;
use crate::types::{Batch, TypeConfig};

type NodeId = u64;

/// What the log keeps besides entries: the vote, and the id of the last purged entry.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    vote: Option<Vote<NodeId>>,
    purged: Option<LogId<NodeId>>,
}

/// Called once appended entries are durable (or could not be written).
pub(crate) type Flushed = Box<dyn FnOnce(std::io::Result<()>) + Send>;

/// Raw entries read back from disk, or why not.
type ReadResult = Result<Vec<(u64, Vec<u8>)>, String>;

/// Entries to hand to the executor once they are durable, on a single node.
type HandOver = Option<(Arc<ApplyAhead>, Vec<Entry<TypeConfig>>)>;

enum Io {
    Append {
        entries: Vec<(u64, Vec<u8>)>,
        hand_over: HandOver,
        flushed: Flushed,
    },
    Truncate {
        from: u64,
        done: oneshot::Sender<Result<(), String>>,
    },
    Purge {
        through: u64,
        meta: Vec<u8>,
        done: oneshot::Sender<Result<(), String>>,
    },
    SaveMeta {
        meta: Vec<u8>,
        done: oneshot::Sender<Result<(), String>>,
    },
    Read {
        from: u64,
        to: u64,
        done: oneshot::Sender<ReadResult>,
    },
    /// `kv::LogStore::first_within_bytes`.
    FirstWithinBytes {
        through: u64,
        bytes: u64,
        done: oneshot::Sender<Result<Option<u64>, String>>,
    },
}

struct Shared {
    /// The newest entries, for apply and for followers (older ones are read from disk).
    cache: Mutex<LogCache>,
    meta: Mutex<Meta>,
    last_log_id: Mutex<Option<LogId<NodeId>>>,
    io: Mutex<Sender<Io>>,
    /// Counters for benchmarks: appended entries and fdatasyncs.
    stats: Arc<LogStats>,
    /// Where an appended entry's proposer token is bound to its index.
    early: Arc<EarlyReplies>,
    /// On a single node, who hands durable entries to the executor (`apply_ahead`).
    ahead: OnceLock<Arc<ApplyAhead>>,
    /// Who hears of each entry's commands before it is written, to read the pages they
    /// will need (`ExecutorHandle::read_ahead_of`): on a single node and in a cluster alike.
    read_ahead: OnceLock<ExecutorHandle>,
}

/// How well group commit works: entries and flushes so far, the bytes they carried, and
/// whoever wants to hear of each flush and each apply (the server's latency histograms).
#[derive(Default)]
pub struct LogStats {
    pub entries: std::sync::atomic::AtomicU64,
    pub flushes: std::sync::atomic::AtomicU64,
    pub bytes: std::sync::atomic::AtomicU64,
    /// Called after each write-and-fsync of a batch with how long it took and its bytes.
    pub on_flush: std::sync::OnceLock<FlushObserver>,
    /// Called as each committed entry is applied, with how long since it was handed to the
    /// executor (its wait in the executor's queue included).
    pub on_apply: std::sync::OnceLock<FlushObserver>,
}

/// What `LogStats::on_flush` calls.
pub type FlushObserver = Box<dyn Fn(std::time::Duration, u64) + Send + Sync>;

impl std::fmt::Debug for LogStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStats")
            .field("entries", &self.entries)
            .field("flushes", &self.flushes)
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// The log storage handed to openraft (cheap to clone).
#[derive(Clone)]
pub struct RaftLog {
    shared: Arc<Shared>,
}

/// The log's newest entries in memory: at most `CACHE_TAIL` entries and `CACHE_BYTES` of
/// encoded entries (a few large COPY entries must not pin hundreds of MiB), always including
/// the last appended batch. The cached indexes are one contiguous range ending at the newest
/// entry; reads before it go to disk.
#[derive(Default)]
struct LogCache {
    entries: BTreeMap<u64, (Entry<TypeConfig>, usize)>,
    bytes: usize,
}

const CACHE_TAIL: usize = 4096;
/// Apply reads entries within milliseconds of their append, so a few MiB serve it; at 32 MiB
/// the cache's share of the heap grew whenever group commit packed more commands per entry.
const CACHE_BYTES: usize = 8 << 20;

impl LogCache {
    fn insert(&mut self, entry: Entry<TypeConfig>, encoded_len: usize) {
        self.bytes += encoded_len;
        if let Some((_, old)) = self
            .entries
            .insert(entry.log_id.index, (entry, encoded_len))
        {
            self.bytes -= old;
        }
    }

    /// Evicts the oldest entries over the limits, keeping every index from `keep_from`.
    fn trim(&mut self, keep_from: u64) {
        while self.entries.len() > CACHE_TAIL || self.bytes > CACHE_BYTES {
            match self.entries.first_key_value() {
                Some((&index, _)) if index < keep_from => self.pop_first(),
                _ => break,
            }
        }
    }

    fn pop_first(&mut self) {
        if let Some((_, (_, len))) = self.entries.pop_first() {
            self.bytes -= len;
        }
    }

    /// Drops every entry from `index` on (a Raft conflict).
    fn truncate(&mut self, index: u64) {
        for (_, (_, len)) in self.entries.split_off(&index) {
            self.bytes -= len;
        }
    }

    /// Drops every entry up to and including `index` (purged from the log).
    fn purge(&mut self, index: u64) {
        while self.first().is_some_and(|first| first <= index) {
            self.pop_first();
        }
    }

    fn first(&self) -> Option<u64> {
        self.entries.keys().next().copied()
    }

    fn range(&self, start: u64, end: u64) -> Vec<Entry<TypeConfig>> {
        self.entries
            .range(start..end)
            .map(|(_, (e, _))| e.clone())
            .collect()
    }
}

fn io_error(message: impl ToString) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::error(message)).into()
}

fn read_error(message: impl ToString) -> StorageError<NodeId> {
    StorageIOError::read_logs(AnyError::error(message)).into()
}

impl RaftLog {
    /// Opens the log in `dir`; its files' writes fail as `faults` says (tests; otherwise
    /// `FaultPlan::none()`).
    pub fn open(
        dir: &Path,
        io_mode: kv::IoMode,
        faults: kv::FaultPlan,
    ) -> Result<RaftLog, kv::KvError> {
        let store = LogStore::open(
            dir,
            LogStoreOptions {
                io_mode,
                faults,
                ..LogStoreOptions::default()
            },
        )?;
        let meta: Meta = bincode::deserialize(store.user_meta()).unwrap_or_default();
        let last_log_id = match store.last_index() {
            Some(last) => {
                let entries = store.read(last, last + 1)?;
                match entries.first() {
                    Some((_, bytes)) => {
                        let e: Entry<TypeConfig> =
                            bincode::deserialize(bytes).map_err(|_| kv::KvError::Corrupt {
                                path: dir.to_path_buf(),
                                offset: 0,
                                reason: "raft log entry does not decode".into(),
                            })?;
                        Some(e.log_id)
                    }
                    None => meta.purged,
                }
            }
            None => meta.purged,
        };
        let stats = Arc::new(LogStats::default());
        let (tx, rx) = mpsc::channel();
        let thread_stats = stats.clone();
        thread::Builder::new()
            .name("raft-log".into())
            .spawn(move || run_io(store, rx, thread_stats))
            .map_err(|e| kv::KvError::Io {
                path: dir.to_path_buf(),
                op: kv::IoOp::Open,
                offset: 0,
                source: e,
            })?;
        Ok(RaftLog {
            shared: Arc::new(Shared {
                cache: Mutex::new(LogCache::default()),
                meta: Mutex::new(meta),
                last_log_id: Mutex::new(last_log_id),
                io: Mutex::new(tx),
                stats,
                early: Arc::default(),
                ahead: OnceLock::new(),
                read_ahead: OnceLock::new(),
            }),
        })
    }

    pub fn stats(&self) -> Arc<LogStats> {
        self.shared.stats.clone()
    }

    /// From now on, durable entries go straight to the executor through `ahead` (a single
    /// node only: there durable is committed).
    pub(crate) fn hand_durable_entries_to(&self, ahead: Arc<ApplyAhead>) {
        let _ = self.shared.ahead.set(ahead);
    }

    /// From now on, each appended entry's commands are offered to `executor` before they are
    /// written, so that it can start reading their pages (a hint: on a follower an entry
    /// may yet be truncated, and then its reads were only wasted).
    pub(crate) fn offer_reads_ahead_to(&self, executor: ExecutorHandle) {
        let _ = self.shared.read_ahead.set(executor);
    }

    pub(crate) fn early_replies(&self) -> Arc<EarlyReplies> {
        self.shared.early.clone()
    }

    /// The lowest index from which the entries through `through` take at most `bytes` of
    /// the log's files (`kv::LogStore::first_within_bytes`): how far back a log bounded in
    /// bytes behind `through` reaches. Asked of the log's thread between its appends (a
    /// search of its index of entries, not a read of the files).
    pub(crate) async fn first_within_bytes(
        &self,
        through: u64,
        bytes: u64,
    ) -> Result<Option<u64>, StorageError<NodeId>> {
        let (done, rx) = oneshot::channel();
        self.send(Io::FirstWithinBytes {
            through,
            bytes,
            done,
        })?;
        self.wait(rx).await
    }

    fn send(&self, io: Io) -> Result<(), StorageError<NodeId>> {
        self.shared
            .io
            .lock()
            .map_err(|_| io_error("log lock poisoned"))?
            .send(io)
            .map_err(|_| io_error("the log thread stopped"))
    }

    async fn wait<T>(
        &self,
        rx: oneshot::Receiver<Result<T, String>>,
    ) -> Result<T, StorageError<NodeId>> {
        rx.await
            .map_err(|_| io_error("the log thread stopped"))?
            .map_err(io_error)
    }

    /// Appends `entries` (readable at once) and calls `flushed` when they are durable.
    pub(crate) fn append_then(
        &self,
        entries: impl IntoIterator<Item = Entry<TypeConfig>>,
        flushed: Flushed,
    ) -> Result<(), StorageError<NodeId>> {
        let mut encoded = Vec::new();
        let mut last = None;
        let ahead = self.shared.ahead.get().cloned();
        let read_ahead = self.shared.read_ahead.get();
        let mut handed = Vec::new();
        {
            let mut cache = self.shared.cache.lock().map_err(|_| io_error("poisoned"))?;
            for e in entries {
                if let EntryPayload::Normal(Batch(commands, token)) = &e.payload {
                    if *token != 0 {
                        self.shared.early.bind(e.log_id.index, *token);
                    }
                    // Before the write: the executor's reads overlap it (`ledger`'s
                    // `read_ahead`; nothing is sent unless it wants).
                    if let Some(executor) = read_ahead {
                        executor.read_ahead_of(e.log_id.index, commands);
                    }
                }
                if ahead.is_some() {
                    handed.push(e.clone());
                }
                let bytes = bincode::serialize(&e).map_err(|err| io_error(err.to_string()))?;
                last = Some(e.log_id);
                let len = bytes.len();
                encoded.push((e.log_id.index, bytes));
                cache.insert(e, len);
            }
            if let Some(&(first_appended, _)) = encoded.first() {
                cache.trim(first_appended);
            }
        }
        if let Some(l) = last {
            *self
                .shared
                .last_log_id
                .lock()
                .map_err(|_| io_error("poisoned"))? = Some(l);
        }
        self.send(Io::Append {
            entries: encoded,
            hand_over: ahead.map(|ahead| (ahead, handed)),
            flushed,
        })
    }

    fn meta_bytes(meta: &Meta) -> Vec<u8> {
        bincode::serialize(meta).expect("log meta serializes")
    }
}

fn run_io(mut store: LogStore, rx: Receiver<Io>, stats: Arc<LogStats>) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut next = rx.recv().ok();
    while let Some(io) = next.take() {
        match io {
            Io::Append {
                entries,
                hand_over,
                flushed,
            } => {
                // Group commit at the log: take every append already queued behind this
                // one, write them all, flush once.
                let mut batch = entries;
                let mut hand_overs = vec![hand_over];
                let mut callbacks = vec![flushed];
                loop {
                    match rx.try_recv() {
                        Ok(Io::Append {
                            entries,
                            hand_over,
                            flushed,
                        }) => {
                            batch.extend(entries);
                            hand_overs.push(hand_over);
                            callbacks.push(flushed);
                        }
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let started = std::time::Instant::now();
                let result = append_waiting_for_space(&mut store, &batch);
                let bytes: u64 = batch.iter().map(|(_, e)| e.len() as u64).sum();
                stats.entries.fetch_add(batch.len() as u64, Relaxed);
                stats.flushes.fetch_add(1, Relaxed);
                stats.bytes.fetch_add(bytes, Relaxed);
                if let Some(observe) = stats.on_flush.get() {
                    observe(started.elapsed(), bytes);
                }
                // Durable, so (on a single node) committed: to the executor before openraft
                // hears of it, so that its state-machine adapter finds them handed over.
                if result.is_ok() {
                    for (ahead, entries) in hand_overs.into_iter().flatten() {
                        ahead.durable(entries);
                    }
                }
                for flushed in callbacks {
                    flushed(
                        result
                            .as_ref()
                            .map(|_| ())
                            .map_err(|e| std::io::Error::other(e.to_string())),
                    );
                }
            }
            Io::Truncate { from, done } => {
                let _ = done.send(store.truncate_from(from).map_err(|e| e.to_string()));
            }
            Io::Purge {
                through,
                meta,
                done,
            } => {
                let r = store
                    .save_user_meta(&meta)
                    .and_then(|_| store.purge_through(through));
                let _ = done.send(r.map_err(|e| e.to_string()));
            }
            Io::SaveMeta { meta, done } => {
                let _ = done.send(store.save_user_meta(&meta).map_err(|e| e.to_string()));
            }
            Io::Read { from, to, done } => {
                let _ = done.send(read_held(&store, from, to).map_err(|e| e.to_string()));
            }
            Io::FirstWithinBytes {
                through,
                bytes,
                done,
            } => {
                let _ = done.send(Ok(store.first_within_bytes(through, bytes)));
            }
        }
        if next.is_none() {
            next = rx.recv().ok();
        }
    }
}

/// Appends `batch`. While the disk is full the append waits and tries again — the entries
/// stay unacknowledged, nothing is reported failed, and writes resume by themselves once
/// space returns — saying so in the log once a minute. Entries an earlier attempt made
/// durable are not written twice (a record counts only once its write was synced). Any other
/// error is returned (and stops this replica: an fsync that failed cannot be retried safely).
fn append_waiting_for_space(store: &mut LogStore, batch: &[(u64, Vec<u8>)]) -> kv::KvResult<()> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(50);
    let mut logged_at: Option<std::time::Instant> = None;
    loop {
        let done = match store.last_index() {
            Some(last) => batch.iter().take_while(|(index, _)| *index <= last).count(),
            None => 0,
        };
        match store.append(&batch[done..]) {
            Ok(()) => {
                if logged_at.is_some() {
                    eprintln!(
                        "hotledger: the log has room again; appends resumed after {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                }
                return Ok(());
            }
            Err(e) if e.is_out_of_space() => {
                if logged_at.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(60)) {
                    logged_at = Some(std::time::Instant::now());
                    eprintln!(
                        "hotledger: the log's disk is full; writes wait until there is space ({e})"
                    );
                }
                thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The entries of `from..to` the log holds: openraft may ask for a range reaching past
/// either end (an entry not found is allowed, its contract says), and gets what exists.
fn read_held(store: &LogStore, from: u64, to: u64) -> kv::KvResult<Vec<(u64, Vec<u8>)>> {
    let (Some(first), Some(last)) = (store.first_index(), store.last_index()) else {
        return Ok(Vec::new());
    };
    let (from, to) = (from.max(first), to.min(last + 1));
    if from >= to {
        return Ok(Vec::new());
    }
    store.read(from, to)
}

impl RaftLogReader<TypeConfig> for RaftLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        use std::ops::Bound;
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(e) => e + 1,
            Bound::Excluded(e) => *e,
            Bound::Unbounded => u64::MAX,
        };
        let (cached, first_cached) = {
            let cache = self
                .shared
                .cache
                .lock()
                .map_err(|_| read_error("log cache lock poisoned"))?;
            (cache.range(start, end), cache.first())
        };
        if start >= end || first_cached.is_some_and(|f| f <= start) {
            return Ok(cached);
        }
        // Older than the cache: read from disk.
        let disk_end = first_cached.unwrap_or(end).min(end);
        let (tx, rx) = oneshot::channel();
        self.send(Io::Read {
            from: start,
            to: disk_end,
            done: tx,
        })?;
        let raw = rx
            .await
            .map_err(|_| read_error("the log thread stopped"))?
            .map_err(read_error)?;
        let mut out = Vec::with_capacity(raw.len() + cached.len());
        for (_, bytes) in raw {
            out.push(
                bincode::deserialize(&bytes)
                    .map_err(|e| read_error(format!("undecodable log entry: {e}")))?,
            );
        }
        out.extend(cached);
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for RaftLog {
    type LogReader = RaftLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let purged = self
            .shared
            .meta
            .lock()
            .map_err(|_| read_error("poisoned"))?
            .purged;
        let last = *self
            .shared
            .last_log_id
            .lock()
            .map_err(|_| read_error("poisoned"))?;
        // A purge past the last entry (a snapshot installed from the leader) leaves the
        // purge point as the newest log id.
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.max(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let bytes = {
            let mut meta = self.shared.meta.lock().map_err(|_| io_error("poisoned"))?;
            meta.vote = Some(*vote);
            RaftLog::meta_bytes(&meta)
        };
        let (tx, rx) = oneshot::channel();
        self.send(Io::SaveMeta {
            meta: bytes,
            done: tx,
        })?;
        self.wait(rx).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self
            .shared
            .meta
            .lock()
            .map_err(|_| read_error("poisoned"))?
            .vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.append_then(entries, Box::new(move |r| callback.log_io_completed(r)))
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        {
            let mut cache = self.shared.cache.lock().map_err(|_| io_error("poisoned"))?;
            cache.truncate(log_id.index);
        }
        self.shared.early.unbind_from(log_id.index);
        let (tx, rx) = oneshot::channel();
        self.send(Io::Truncate {
            from: log_id.index,
            done: tx,
        })?;
        self.wait(rx).await?;
        let purged = self
            .shared
            .meta
            .lock()
            .map_err(|_| io_error("poisoned"))?
            .purged;
        // The new last entry is the one before the cut, or the purge point when that entry
        // is purged (a purged entry reads as absent).
        let previous = if log_id.index == 0 {
            None
        } else {
            let mut reader = self.clone();
            reader
                .try_get_log_entries(log_id.index - 1..log_id.index)
                .await?
                .pop()
                .map(|e| e.log_id)
        };
        *self
            .shared
            .last_log_id
            .lock()
            .map_err(|_| io_error("poisoned"))? = previous.or(purged);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let bytes = {
            let mut meta = self.shared.meta.lock().map_err(|_| io_error("poisoned"))?;
            meta.purged = Some(log_id);
            RaftLog::meta_bytes(&meta)
        };
        {
            let mut cache = self.shared.cache.lock().map_err(|_| io_error("poisoned"))?;
            cache.purge(log_id.index);
        }
        let (tx, rx) = oneshot::channel();
        self.send(Io::Purge {
            through: log_id.index,
            meta: bytes,
            done: tx,
        })?;
        self.wait(rx).await
    }
}
