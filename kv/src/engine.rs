//! `Engine`: one database file with its catalog of tables, driven by one thread.
//!
//! Opening runs recovery: the newest valid page map record (within the owner's commit limit)
//! names the checkpoint, where each of its pages is, and the log position the caller must
//! replay from; nothing is written. (A file of format 3 or older has no record: its journal
//! is replayed as those versions did, and its first checkpoint turns it into format 4.)
//! Writes change pages in the buffer pool only; `begin_checkpoint` hands the changed pages to
//! the writer thread and returns at once.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::btree::{self, PutMode};
use crate::checkpoint::{
    CheckpointOutcome, CheckpointWriter, Finished, WriterMessage, WriterState,
};
use crate::cursor::{Direction, Range};
use crate::error::{IoOp, KvError, KvResult};
use crate::io::{self, BlockFile, FaultPlan, IoMode};
use crate::journal;
use crate::page::{self, PageKind};
use crate::page_map::{self, MapRecord};
use crate::pager::{AllocState, Pager};
use crate::pool::{BufferPool, PoolStats};
use crate::slot_holds::SlotHolds;
use crate::slots::SlotMap;
use crate::snapshot::Snapshot;
use crate::superblock::{self, LogPosition, Superblock, FIRST_WITH_PAGE_MAP};

mod insert_buffer;

use insert_buffer::InsertBuffers;

/// Pages captured per `poll_checkpoint` call: at least this many, so a call after a short
/// operation pauses the executor for microseconds only ...
const CAPTURE_STEP_PAGES: usize = 256;
/// ... and this many per millisecond since the previous call, so the capture keeps pace with
/// the writer (tens of thousands of pages a second) however rarely the owner can call: an
/// executor applying 1,000-row statements polls a few dozen times a second, and 256 pages a
/// call held checkpoints to ~8k pages/s while the batch load dirtied pages faster (the pool
/// grew to seven times its size; docs/benchmarks.md, "What was tried").
const CAPTURE_PAGES_PER_MS: usize = 100;
/// Pages marked clean per `poll_checkpoint` call after a checkpoint is durable, at least and
/// per millisecond since the previous call (marking is cheaper than capturing).
const FINISH_STEP_PAGES: usize = 1024;
const FINISH_PAGES_PER_MS: usize = 400;

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Page size for a new file (an existing file keeps its own).
    pub page_size: u32,
    /// Buffer pool size in bytes.
    pub pool_bytes: usize,
    /// Fault the pool's whole size in from the start, in the background at idle priority,
    /// instead of as pages are first used (`arena::PageArena::pre_paged`).
    pub prefault_pool: bool,
    pub io_mode: IoMode,
    pub faults: FaultPlan,
    /// Create the file when it does not exist.
    pub create: bool,
    /// Spread each checkpoint's writes over about this long instead of writing at full speed
    /// (like PostgreSQL's `checkpoint_completion_target`). `None`: full speed.
    pub checkpoint_spread: Option<Duration>,
    /// Checkpoints stop once their pages and page map record are durable and let the slots
    /// they replace be reused only when the owner calls `release_checkpoint` (or unmake the
    /// record on `abandon_checkpoint`): for an owner that commits several engines'
    /// checkpoints as one.
    pub gated_checkpoints: bool,
    /// Recovery takes a page map record (or, for a format-3 file, a journal) only if the log
    /// index it covers is at most this: the last checkpoint such an owner committed (`None`:
    /// any).
    pub commit_limit: Option<u64>,
    /// Bytes the insert buffers of buffered tables may hold before writes drain them into
    /// their trees (`insert_buffer.rs`). `None`: an eighth of the pool.
    pub insert_buffer_bytes: Option<usize>,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            page_size: 4096,
            pool_bytes: 256 << 20,
            prefault_pool: false,
            io_mode: IoMode::from_env(),
            faults: FaultPlan::none(),
            create: true,
            checkpoint_spread: None,
            gated_checkpoints: false,
            commit_limit: None,
            insert_buffer_bytes: None,
        }
    }
}

/// A table handle: cheap to copy, valid until the table is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    pub id: u64,
    root: u64,
    /// The root of the table's insert buffer (`insert_buffer.rs`); 0: it has none.
    buffer: u64,
}

impl Table {
    /// The roots of the table's tree and of its insert buffer, if any (neither ever
    /// changes).
    pub(crate) fn roots(self) -> (u64, Option<u64>) {
        (self.root, (self.buffer != 0).then_some(self.buffer))
    }

    /// Whether the table has an insert buffer (`Engine::create_buffered_table`).
    pub fn is_buffered(self) -> bool {
        self.buffer != 0
    }

    /// The table's value in the catalog: id and root (16 bytes), and for a table with an
    /// insert buffer its root and the bytes the buffer held when the value was written
    /// (32 bytes; `insert_buffer.rs` rewrites it at each checkpoint that finds it changed).
    fn catalog_value(self, buffered_bytes: u64) -> Vec<u8> {
        let mut value = vec![0u8; if self.is_buffered() { 32 } else { 16 }];
        page::write_u64(&mut value, 0, self.id);
        page::write_u64(&mut value, 8, self.root);
        if self.is_buffered() {
            page::write_u64(&mut value, 16, self.buffer);
            page::write_u64(&mut value, 24, buffered_bytes);
        }
        value
    }

    /// The table a catalog value names, with its buffer's bytes when the value records them
    /// (a 24-byte value, of a build before the count was kept, does not); `None` when it is
    /// malformed.
    fn from_catalog(value: &[u8]) -> Option<(Table, Option<u64>)> {
        if ![16, 24, 32].contains(&value.len()) {
            return None;
        }
        let table = Table {
            id: page::read_u64(value, 0),
            root: page::read_u64(value, 8),
            buffer: match value.len() {
                16 => 0,
                _ => page::read_u64(value, 16),
            },
        };
        let bytes = (value.len() == 32).then(|| page::read_u64(value, 24));
        Some((table, bytes))
    }
}

/// What recovery found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryInfo {
    /// The file did not exist and was created.
    pub created: bool,
    /// A format-3 file's complete journal was written over it.
    pub journal_replayed: bool,
    pub checkpoint_seq: u64,
    /// The caller must replay its log from the entry after this position.
    pub log_position: LogPosition,
}

#[derive(Clone, Copy, Debug)]
pub struct CheckpointReport {
    pub seq: u64,
    pub log_position: LogPosition,
    pub pages: usize,
    pub elapsed: Duration,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    pub pool: PoolStats,
    pub page_size: usize,
    pub page_count: u64,
    pub resident_pages: usize,
    pub pool_capacity_pages: usize,
    pub dirty_pages: usize,
    /// Page buffers the pool holds in memory: its frames, images a checkpoint still needs,
    /// and free buffers kept for reuse.
    pub mapped_pages: usize,
    /// The most page buffers alive at once since open, snapshots' included: how far dirty
    /// pages and snapshots ever pushed memory past the pool's capacity.
    pub peak_buffer_pages: usize,
    /// Page buffers only live snapshots hold (pages the pool evicted or changed since they
    /// were taken): memory beside the pool's capacity.
    pub snapshot_pages: usize,
    /// Sequence number of the last durable checkpoint (checkpoints since the file was made).
    pub checkpoint_seq: u64,
    /// Pages written by the last checkpoint this process finished, and how long it took.
    pub last_checkpoint_pages: usize,
    pub last_checkpoint_elapsed: Duration,
    pub uses_uring: bool,
    /// Point operations that found their leaf from a leaf hint, and those that descended
    /// from the root (since open).
    pub leaf_hint_hits: u64,
    pub leaf_hint_misses: u64,
    /// Keys `look_ahead` walked to their leaves, and operations that then started at the
    /// leaf it found (counted among the hint misses).
    pub lookahead_keys: u64,
    pub lookahead_used: u64,
    /// Bytes of entries the insert buffers hold now, and entries moved from them into their
    /// tables' trees since open (`insert_buffer.rs`).
    pub insert_buffer_bytes: u64,
    pub insert_buffer_drained: u64,
}

struct Inflight {
    seq: u64,
    /// The buffer pool's capture epoch for this checkpoint.
    epoch: u64,
    position: LogPosition,
    page_ids: Vec<u64>,
    /// Pages are still being captured (the writer has not been sent `End`).
    capturing: bool,
    /// A gated checkpoint's pages and record are durable.
    prepared: bool,
    /// A gated checkpoint was released (committed by its owner).
    released: bool,
}

impl Inflight {
    /// A gated checkpoint whose record is durable, waiting for its owner's decision.
    fn awaiting_release(&self) -> bool {
        self.prepared && !self.released
    }
}

/// A durable checkpoint whose pages the pool marks clean in steps.
struct Finishing {
    epoch: u64,
    page_ids: Vec<u64>,
    cursor: usize,
}

pub struct Engine {
    path: PathBuf,
    uses_uring: bool,
    pager: Pager,
    catalog_root: u64,
    tables: BTreeMap<String, Table>,
    next_table_id: u64,
    checkpoint_seq: u64,
    durable_position: LogPosition,
    inflight: Option<Inflight>,
    /// A durable checkpoint whose pages are still being marked clean, in steps.
    finishing: Option<Finishing>,
    writer: CheckpointWriter,
    /// Live snapshots, which keep the slots they may read from reuse.
    holds: Arc<SlotHolds>,
    poisoned: Option<String>,
    path_scratch: btree::Path,
    checkpoint_spread: Option<Duration>,
    /// Pages and duration of the last checkpoint finished by this process.
    last_checkpoint: (usize, Duration),
    gated: bool,
    /// When `poll_checkpoint` was last called: its steps grow with the time since.
    last_poll: Instant,
    buffers: InsertBuffers,
}

/// The journal file that belongs to a data file.
pub fn journal_path(data_path: &Path) -> PathBuf {
    let mut name = data_path.as_os_str().to_owned();
    name.push(".ckpt");
    PathBuf::from(name)
}

fn validate_page_size(page_size: u32) -> KvResult<()> {
    if page_size.is_power_of_two() && (512..=32768).contains(&page_size) {
        Ok(())
    } else {
        Err(KvError::BadPageSize(page_size))
    }
}

/// Writes a fresh database: its first page map record (removing any record or journal left
/// by an earlier file of that name), then the data file (header and empty catalog) through a
/// temporary file renamed into place, so a crash leaves either no data file or a whole one.
fn format(path: &Path, options: &EngineOptions) -> KvResult<()> {
    let page_size = options.page_size as usize;
    let superblock = Superblock {
        page_size: options.page_size,
        alloc: AllocState {
            page_count: 2,
            freelist_head: 0,
        },
        catalog_root: 1,
        checkpoint_seq: 0,
        log_position: LogPosition::default(),
        next_table_id: 1,
    };
    let [first, second] = page_map::record_paths(path);
    remove_stale(&second)?;
    remove_stale(&journal_path(path))?;
    let record = BlockFile::open(&first, true, options.io_mode, options.faults.clone())?;
    record.set_len(0)?;
    page_map::write(&record, &superblock, &[0, 1], 2)?;
    let temporary = path.with_extension("formatting");
    let file = BlockFile::open(&temporary, true, options.io_mode, options.faults.clone())?;
    file.set_len(0)?;
    let mut catalog = vec![0u8; page_size];
    page::init_node(&mut catalog, PageKind::Leaf);
    page::seal(1, &mut catalog);
    let header = Superblock::file_header(options.page_size).encode();
    file.write_batch_sync(&[(0, &header), (page_size as u64, &catalog)])?;
    drop(file);
    std::fs::rename(&temporary, path)
        .map_err(|source| KvError::io(path, IoOp::Rename, 0, source))?;
    io::sync_directory(path.parent().unwrap_or(Path::new(".")))
}

/// Removes a file an earlier format or an earlier database of that name left, if any.
fn remove_stale(path: &Path) -> KvResult<()> {
    if path.exists() {
        std::fs::remove_file(path).map_err(|source| KvError::io(path, IoOp::Remove, 0, source))?;
    }
    Ok(())
}

/// What recovery found: the checkpoint, where its pages are, and which record file the next
/// checkpoint writes.
struct Recovered {
    superblock: Superblock,
    map: SlotMap,
    next_record: usize,
    journal_replayed: bool,
}

/// A data file shorter than `needed` bytes lost pages a checkpoint wrote.
fn check_len(data: &BlockFile, needed: u64) -> KvResult<()> {
    let len = data.file_len()?;
    if len < needed {
        return Err(KvError::Truncated {
            path: data.path().to_path_buf(),
            offset: 0,
            wanted: needed,
            got: len,
        });
    }
    Ok(())
}

fn read_superblock(data: &BlockFile, page_size: usize) -> KvResult<Superblock> {
    let mut image = vec![0u8; page_size];
    data.read_exact_at(&mut image, 0)?;
    Superblock::decode(data.path(), &image)
}

impl Engine {
    /// Opens (creating if allowed) the database at `path` and recovers it.
    pub fn open(path: &Path, options: EngineOptions) -> KvResult<(Engine, RecoveryInfo)> {
        validate_page_size(options.page_size)?;
        let mut created = false;
        if !path.exists() {
            if !options.create {
                let source = std::io::Error::from(std::io::ErrorKind::NotFound);
                return Err(KvError::io(path, IoOp::Open, 0, source));
            }
            format(path, &options)?;
            created = true;
        }
        let data = BlockFile::open(path, false, options.io_mode, options.faults.clone())?;
        let mut head = [0u8; 512];
        data.read_exact_at(&mut head, 0)?;
        let (page_size, version) = match Superblock::peek(&head) {
            Some((size, version)) if validate_page_size(size).is_ok() => (size as usize, version),
            Some(_) => {
                return Err(KvError::corrupt(
                    path,
                    20,
                    "superblock states an invalid page size",
                ))
            }
            None => {
                return Err(KvError::NotOurFile {
                    path: path.to_path_buf(),
                    what: "data",
                })
            }
        };
        superblock::check_version(path, version)?;
        let record_paths = page_map::record_paths(path);
        let records_existed = record_paths.iter().all(|p| p.exists());
        let [first, second] = &record_paths;
        let records = [
            BlockFile::open(first, true, options.io_mode, options.faults.clone())?,
            BlockFile::open(second, true, options.io_mode, options.faults.clone())?,
        ];
        if !records_existed {
            io::sync_directory(path.parent().unwrap_or(Path::new(".")))?;
        }
        let recovered = match Self::newest_record(&records, page_size, options.commit_limit)? {
            Some((index, record)) => Self::from_record(path, &data, record, index)?,
            None if version >= FIRST_WITH_PAGE_MAP => {
                return Err(KvError::corrupt(
                    &record_paths[0],
                    0,
                    "no valid page map record (in this file or the other of the pair) within the commit limit",
                ))
            }
            None => Self::from_legacy_file(path, &data, page_size, &options)?,
        };
        let Recovered {
            superblock,
            map,
            next_record,
            journal_replayed,
        } = recovered;
        let uses_uring = data.uses_uring();
        let data = Arc::new(data);
        let pool = BufferPool::new(
            Arc::clone(&data),
            map.slots().to_vec(),
            page_size,
            options.pool_bytes,
            options.prefault_pool,
        );
        let mut pool = pool;
        // Its ring carries the reads ahead, which are a hint: an engine that requires
        // io_uring still opens when this ring is refused, and reads ahead at once instead.
        let mode = match options.io_mode {
            IoMode::Portable => IoMode::Portable,
            IoMode::Auto | IoMode::Uring => IoMode::Auto,
        };
        let ring = crate::pool::READ_AHEAD_MAX as u32;
        if let Some(reads) =
            BlockFile::open_direct_with_ring(path, mode, options.faults.clone(), ring)?
        {
            pool.set_direct_file(reads);
        }
        let pager = Pager::new(pool, superblock.alloc, page_size);
        let direct = BlockFile::open_direct(path, options.io_mode, options.faults.clone())?;
        let holds = Arc::new(SlotHolds::default());
        let writer = CheckpointWriter::start(WriterState {
            data,
            direct,
            records,
            next_record,
            map,
            holds: Arc::clone(&holds),
            legacy_header: version < FIRST_WITH_PAGE_MAP,
        })?;
        let mut engine = Engine {
            path: path.to_path_buf(),
            uses_uring,
            pager,
            catalog_root: superblock.catalog_root,
            tables: BTreeMap::new(),
            next_table_id: superblock.next_table_id,
            checkpoint_seq: superblock.checkpoint_seq,
            durable_position: superblock.log_position,
            inflight: None,
            finishing: None,
            writer,
            holds,
            poisoned: None,
            path_scratch: btree::Path::new(),
            checkpoint_spread: options.checkpoint_spread,
            last_checkpoint: (0, Duration::ZERO),
            last_poll: Instant::now(),
            gated: options.gated_checkpoints,
            buffers: InsertBuffers::new(
                options
                    .insert_buffer_bytes
                    .unwrap_or(options.pool_bytes / 8) as u64,
            ),
        };
        let recorded = engine.load_catalog()?;
        engine.count_buffers(&recorded)?;
        let info = RecoveryInfo {
            created,
            journal_replayed,
            checkpoint_seq: superblock.checkpoint_seq,
            log_position: superblock.log_position,
        };
        Ok((engine, info))
    }

    /// The newest valid page map record of the pair that covers no log index beyond `limit`,
    /// with the index of its file.
    fn newest_record(
        records: &[BlockFile; 2],
        page_size: usize,
        limit: Option<u64>,
    ) -> KvResult<Option<(usize, MapRecord)>> {
        let mut newest: Option<(usize, MapRecord)> = None;
        for (index, file) in records.iter().enumerate() {
            let Some(record) = page_map::read_valid(file, page_size)? else {
                continue;
            };
            // A gated checkpoint its owner never committed: the other record stands.
            if limit.is_some_and(|limit| record.superblock.log_position.index > limit) {
                continue;
            }
            let seq = record.superblock.checkpoint_seq;
            if newest
                .as_ref()
                .is_none_or(|(_, best)| seq > best.superblock.checkpoint_seq)
            {
                newest = Some((index, record));
            }
        }
        Ok(newest)
    }

    /// The state a page map record names. A format-3 journal left beside the file is
    /// obsolete once a record exists, and is removed.
    fn from_record(
        path: &Path,
        data: &BlockFile,
        record: MapRecord,
        index: usize,
    ) -> KvResult<Recovered> {
        let map = SlotMap::from_record(record.slots, record.slot_count, path)?;
        let page_size = u64::from(record.superblock.page_size);
        check_len(data, map.used_end() * page_size)?;
        remove_stale(&journal_path(path))?;
        Ok(Recovered {
            superblock: record.superblock,
            map,
            next_record: 1 - index,
            journal_replayed: false,
        })
    }

    /// The state of a file of format 3 or older (page `p` in slot `p`, superblock in slot 0),
    /// after writing its complete journal over it when that is at least as new as its
    /// superblock (or the superblock is torn) and covers no log index beyond the commit
    /// limit. Idempotent.
    fn from_legacy_file(
        path: &Path,
        data: &BlockFile,
        page_size: usize,
        options: &EngineOptions,
    ) -> KvResult<Recovered> {
        let journal_file = BlockFile::open(
            &journal_path(path),
            true,
            options.io_mode,
            options.faults.clone(),
        )?;
        let journal_replayed =
            Self::replay_journal(data, &journal_file, page_size, options.commit_limit)?;
        let superblock = read_superblock(data, page_size)?;
        let page_count = superblock.alloc.page_count;
        check_len(data, page_count * page_size as u64)?;
        let slot_count = data.file_len()?.div_ceil(page_size as u64);
        Ok(Recovered {
            superblock,
            map: SlotMap::identity(page_count, slot_count, path)?,
            next_record: 0,
            journal_replayed,
        })
    }

    /// Writes a complete format-3 journal over the data file when it is at least as new as
    /// the data file's superblock (or the superblock is torn) and covers no log index beyond
    /// `limit`. Idempotent.
    fn replay_journal(
        data: &BlockFile,
        journal_file: &BlockFile,
        page_size: usize,
        limit: Option<u64>,
    ) -> KvResult<bool> {
        let Some(valid) = journal::read_valid(journal_file, page_size)? else {
            return Ok(false);
        };
        if let Some(limit) = limit {
            // A gated checkpoint its owner never committed: its in-place step never began,
            // so the data file still holds the previous checkpoint whole.
            let image = valid.read_image(journal_file, 0)?.ok_or_else(|| {
                KvError::corrupt(journal_file.path(), 0, "journal without a superblock")
            })?;
            let superblock = Superblock::decode(journal_file.path(), &image)?;
            if superblock.log_position.index > limit {
                return Ok(false);
            }
        }
        let replay = match read_superblock(data, page_size) {
            Ok(superblock) => valid.seq >= superblock.checkpoint_seq,
            Err(KvError::Corrupt { .. } | KvError::Truncated { .. }) => true,
            Err(err) => return Err(err),
        };
        if replay {
            valid.apply(journal_file, data)?;
        }
        Ok(replay)
    }

    /// Loads the tables the catalog names; returns the buffered bytes it records, by table.
    fn load_catalog(&mut self) -> KvResult<BTreeMap<u64, u64>> {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = Range::new(
            &mut self.pager,
            (self.catalog_root, None),
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )?
        .collect::<KvResult<_>>()?;
        let mut recorded = BTreeMap::new();
        for (name, value) in entries {
            let name = String::from_utf8(name).map_err(|_| {
                KvError::corrupt(&self.path, 0, "catalog holds a non-UTF-8 table name")
            })?;
            let (table, bytes) = Table::from_catalog(&value).ok_or_else(|| {
                KvError::corrupt(
                    &self.path,
                    0,
                    format!("catalog entry {name:?} is malformed"),
                )
            })?;
            if let Some(bytes) = bytes {
                recorded.insert(table.id, bytes);
            }
            self.tables.insert(name, table);
        }
        Ok(recorded)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_usable(&self) -> KvResult<()> {
        match &self.poisoned {
            Some(reason) => Err(KvError::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    pub fn table(&self, name: &str) -> Option<Table> {
        self.tables.get(name).copied()
    }

    pub fn tables(&self) -> impl Iterator<Item = (&str, Table)> {
        self.tables
            .iter()
            .map(|(name, table)| (name.as_str(), *table))
    }

    pub fn create_table(&mut self, name: &str) -> KvResult<Table> {
        self.create_table_with(name, false)
    }

    /// A new table, with an insert buffer when `buffered`, named in the catalog.
    fn create_table_with(&mut self, name: &str, buffered: bool) -> KvResult<Table> {
        self.check_usable()?;
        if self.tables.contains_key(name) {
            return Err(KvError::TableExists(name.to_string()));
        }
        let table = Table {
            id: self.next_table_id,
            root: btree::create(&mut self.pager)?,
            buffer: match buffered {
                true => btree::create(&mut self.pager)?,
                false => 0,
            },
        };
        btree::put(
            &mut self.pager,
            self.catalog_root,
            name.as_bytes(),
            &table.catalog_value(0),
            PutMode::InsertOnly,
            &mut self.path_scratch,
            None,
        )?;
        self.next_table_id += 1;
        self.tables.insert(name.to_string(), table);
        if buffered {
            self.buffers.register(table, 0, Some(0));
        }
        Ok(table)
    }

    pub fn drop_table(&mut self, name: &str) -> KvResult<()> {
        self.check_usable()?;
        let table = self
            .table(name)
            .ok_or_else(|| KvError::NoSuchTable(name.to_string()))?;
        btree::destroy(&mut self.pager, table.root)?;
        if table.is_buffered() {
            btree::destroy(&mut self.pager, table.buffer)?;
            self.buffers.forget(table.id);
        }
        btree::delete(
            &mut self.pager,
            self.catalog_root,
            name.as_bytes(),
            &mut self.path_scratch,
            None,
        )?;
        self.tables.remove(name);
        Ok(())
    }

    /// Removes every row of a table, returning its pages to the free list.
    pub fn truncate_table(&mut self, table: Table) -> KvResult<()> {
        self.check_usable()?;
        btree::clear(&mut self.pager, table.root)?;
        if table.is_buffered() {
            btree::clear(&mut self.pager, table.buffer)?;
            self.buffers.emptied(table.id);
        }
        Ok(())
    }

    /// Copies the value of `key` into `out`; false when the key is absent.
    pub fn get_into(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> KvResult<bool> {
        self.check_usable()?;
        if table.is_buffered()
            && btree::get(
                &mut self.pager,
                table.buffer,
                key,
                &mut self.path_scratch,
                out,
            )?
        {
            return Ok(true);
        }
        btree::get(
            &mut self.pager,
            table.root,
            key,
            &mut self.path_scratch,
            out,
        )
    }

    /// Finds the leaves of `keys` (up to `LOOK_AHEAD_KEYS`) side by side, ahead of the
    /// operations on them (`btree::look_ahead`). Only a hint: it reads no page from disk and
    /// changes nothing an operation could observe but its speed.
    pub fn look_ahead(&mut self, table: Table, keys: &[&[u8]]) {
        if self.check_usable().is_ok() {
            btree::look_ahead(&mut self.pager, table.root, keys);
        }
    }

    /// Reads into the buffer pool, in overlapping batches, the pages on the way to `keys`
    /// that are not resident (`btree::page_in`): for an owner about to apply operations on
    /// keys of a tree larger than the pool. Changes no page. Does nothing on a buffered
    /// table: its writes go to the buffer while their leaf is out of the pool, and reading
    /// the leaf in would only defeat that.
    pub fn page_in(&mut self, table: Table, keys: &[&[u8]]) {
        if self.check_usable().is_ok() && !table.is_buffered() {
            btree::page_in(&mut self.pager, table.root, keys, false);
        }
    }

    /// `page_in` that does not wait for the last reads: the pages of resident nodes are
    /// followed, and the reads of the first missing page on each key's way are started and
    /// left in flight (`BufferPool::submit_batch`) for the owner to do other work meanwhile.
    /// The next miss, or `complete_page_in`, maps them.
    pub fn submit_page_in(&mut self, table: Table, keys: &[&[u8]]) {
        if self.check_usable().is_ok() && !table.is_buffered() {
            btree::page_in(&mut self.pager, table.root, keys, true);
        }
    }

    /// Waits for the reads `submit_page_in` left in flight and maps their pages.
    pub fn complete_page_in(&mut self) {
        self.pager.pool.complete_reads();
    }

    /// Whether every page of the file is in the buffer pool (then `page_in` has nothing to
    /// do).
    pub fn all_resident(&self) -> bool {
        self.pager.pool.resident_pages() as u64 + 1 >= self.pager.alloc.page_count
    }

    /// Forgets the leaves `look_ahead` found (when the statement that asked is done).
    pub fn forget_look_ahead(&mut self) {
        self.pager.lookahead.clear();
    }

    pub fn get(&mut self, table: Table, key: &[u8]) -> KvResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(table, key, &mut out)?.then_some(out))
    }

    fn put_with(
        &mut self,
        table: Table,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
        old: Option<&mut Vec<u8>>,
    ) -> KvResult<bool> {
        self.check_usable()?;
        let (root, buffered) = self.tree_holding(table, key)?;
        let existed = btree::put(
            &mut self.pager,
            root,
            key,
            value,
            mode,
            &mut self.path_scratch,
            old,
        )?;
        if let Some(old_len) = buffered.filter(|_| mode != PutMode::InsertOnly) {
            self.note_buffer_change(table, key, old_len, Some(value.len()));
        }
        if cfg!(debug_assertions) {
            let written = match mode {
                PutMode::Upsert => true,
                PutMode::InsertOnly => !existed,
                PutMode::UpdateOnly => existed,
            };
            if written {
                self.assert_reads_back(table, key, Some(value));
            } else if mode == PutMode::UpdateOnly {
                self.assert_reads_back(table, key, None);
            }
        }
        Ok(existed)
    }

    /// Debug builds' paired assertion: what was just written (or deleted: `None`) is what a
    /// read of `key` gives back. A read that fails (a fault being injected) proves nothing
    /// either way and is not checked.
    fn assert_reads_back(&mut self, table: Table, key: &[u8], expected: Option<&[u8]>) {
        if let Ok(read) = self.get(table, key) {
            assert_eq!(
                read.as_deref(),
                expected,
                "table {} key {key:?}: a read after the write gives back something else",
                table.id
            );
        }
    }

    /// Inserts or replaces; returns whether the key existed.
    pub fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> KvResult<bool> {
        self.put_with(table, key, value, PutMode::Upsert, None)
    }

    /// `put`, and when the key existed its previous value is left in `old` (for an undo log,
    /// without a lookup of its own).
    pub fn put_saving_old(
        &mut self,
        table: Table,
        key: &[u8],
        value: &[u8],
        old: &mut Vec<u8>,
    ) -> KvResult<bool> {
        self.put_with(table, key, value, PutMode::Upsert, Some(old))
    }

    /// Inserts only when absent; returns false (and changes nothing) when the key exists.
    pub fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> KvResult<bool> {
        Ok(!self.put_with(table, key, value, PutMode::InsertOnly, None)?)
    }

    /// Replaces only when present (in place when the length is unchanged); false when absent.
    pub fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> KvResult<bool> {
        self.put_with(table, key, value, PutMode::UpdateOnly, None)
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&mut self, table: Table, key: &[u8]) -> KvResult<bool> {
        self.delete_with(table, key, None)
    }

    /// `delete`, and when the key existed its value is left in `old`.
    pub fn delete_saving_old(
        &mut self,
        table: Table,
        key: &[u8],
        old: &mut Vec<u8>,
    ) -> KvResult<bool> {
        self.delete_with(table, key, Some(old))
    }

    fn delete_with(
        &mut self,
        table: Table,
        key: &[u8],
        old: Option<&mut Vec<u8>>,
    ) -> KvResult<bool> {
        self.check_usable()?;
        let (root, buffered) = self.tree_holding(table, key)?;
        let existed = btree::delete(&mut self.pager, root, key, &mut self.path_scratch, old)?;
        if let Some(old_len) = buffered {
            self.note_buffer_change(table, key, old_len, None);
        }
        if cfg!(debug_assertions) {
            self.assert_reads_back(table, key, None);
        }
        Ok(existed)
    }

    /// Iterates the keys of `table` between the bounds, in `direction`.
    pub fn range(
        &mut self,
        table: Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> KvResult<Range<'_>> {
        self.check_usable()?;
        Range::new(&mut self.pager, table.roots(), lower, upper, direction)
    }

    /// The trees as they are now, readable from any thread while this engine goes on
    /// writing (see `snapshot.rs`): a handle per 512 pages to take; each page written while
    /// a snapshot holds it is copied once, and each chunk of 512 page addresses changed.
    pub fn snapshot(&mut self) -> KvResult<Snapshot> {
        self.check_usable()?;
        // Registered first: the slots of the pages not shared below stay unused from here.
        let hold = self.holds.hold();
        let pages = self.pager.pool.share_resident(self.pager.alloc.page_count);
        let (slots, file) = self.pager.pool.shared_slots();
        Ok(Snapshot::new(
            pages,
            slots,
            file,
            hold,
            self.pager.page_size(),
        ))
    }

    /// Freed slots the checkpoint writer keeps unused for live snapshots.
    pub fn slots_held_for_snapshots(&self) -> usize {
        self.holds.deferred_slots()
    }

    pub fn stats(&self) -> EngineStats {
        let pool = &self.pager.pool;
        EngineStats {
            pool: pool.stats(),
            page_size: self.pager.page_size(),
            page_count: self.pager.alloc.page_count,
            resident_pages: pool.resident_pages(),
            pool_capacity_pages: pool.capacity_pages(),
            dirty_pages: pool.dirty_frames(),
            mapped_pages: pool.mapped_pages(),
            peak_buffer_pages: pool.peak_buffer_pages(),
            snapshot_pages: pool.snapshot_pages(),
            checkpoint_seq: self.checkpoint_seq,
            last_checkpoint_pages: self.last_checkpoint.0,
            last_checkpoint_elapsed: self.last_checkpoint.1,
            uses_uring: self.uses_uring,
            leaf_hint_hits: self.pager.leaf_hints.counts().0,
            leaf_hint_misses: self.pager.leaf_hints.counts().1,
            lookahead_keys: self.pager.lookahead.counts().1,
            lookahead_used: self.pager.lookahead.counts().0,
            insert_buffer_bytes: self.buffers.counts().0,
            insert_buffer_drained: self.buffers.counts().1,
        }
    }

    /// True when dirty pages fill so much of the buffer pool that the owner should
    /// checkpoint (see `BufferPool::wants_checkpoint`).
    pub fn needs_checkpoint(&self) -> bool {
        self.pager.pool.wants_checkpoint()
    }

    /// How far dirty pages have pushed the buffer pool past its size: 0 within it, 1 or more
    /// when it has grown by a quarter (the limit). The owner should slow down in proportion
    /// while this is above 0 and stop changing pages at 1, polling the checkpoint (starting
    /// one if none is in flight) until it falls: memory stays bounded, and throughput falls
    /// to what checkpoints can write.
    pub fn pool_overshoot(&self) -> f64 {
        self.pager.pool.overshoot()
    }

    /// The size of this file's pages.
    pub fn page_size(&self) -> usize {
        self.pager.page_size()
    }

    /// The log position covered by the last durable checkpoint.
    pub fn durable_position(&self) -> LogPosition {
        self.durable_position
    }

    pub fn checkpoint_in_progress(&self) -> bool {
        self.inflight.is_some()
    }

    /// Starts a checkpoint of every page changed so far; returns immediately (O(1)).
    /// `position` is the last log entry whose effects are in the pages now. The image is
    /// captured incrementally by later `poll_checkpoint` calls, which the owner makes between
    /// operations; writes in between capture the pages they touch first, so the checkpoint is
    /// exactly the state at this call.
    pub fn begin_checkpoint(&mut self, position: LogPosition) -> KvResult<()> {
        self.check_usable()?;
        if self.inflight.is_some() {
            return Err(KvError::CheckpointInProgress);
        }
        assert!(
            position >= self.durable_position,
            "checkpoint positions never go back"
        );
        let seq = self.checkpoint_seq + 1;
        // Before the capture starts, so that the image holds its buffers' counts.
        self.record_buffer_counts()?;
        let expected_pages = self.pager.pool.dirty_frames();
        let epoch = self.pager.pool.begin_capture();
        // The capture's pace counts from here: nothing was waiting to be captured before.
        self.last_poll = Instant::now();
        let superblock = Superblock {
            page_size: self.pager.page_size() as u32,
            alloc: self.pager.alloc,
            catalog_root: self.catalog_root,
            checkpoint_seq: seq,
            log_position: position,
            next_table_id: self.next_table_id,
        };
        self.writer.send(WriterMessage::Begin {
            superblock,
            expected_pages,
            spread: self.checkpoint_spread,
            gated: self.gated,
        });
        self.inflight = Some(Inflight {
            seq,
            epoch,
            position,
            page_ids: Vec::new(),
            capturing: true,
            prepared: false,
            released: false,
        });
        Ok(())
    }

    /// Captures up to `max_pages` more pages of the checkpoint being started and sends them to
    /// the writer; sends `End` when the capture is complete.
    fn advance_capture(&mut self, max_pages: usize) {
        let Some(inflight) = self.inflight.as_mut().filter(|inflight| inflight.capturing) else {
            return;
        };
        let (batch, done) = self.pager.pool.capture_step(max_pages);
        if !batch.is_empty() {
            inflight
                .page_ids
                .extend(batch.iter().map(|(page_id, _)| *page_id));
            self.writer.send(WriterMessage::Pages(batch));
        }
        if done {
            inflight.capturing = false;
            self.writer.send(WriterMessage::End);
        }
    }

    /// Moves the checkpoint in flight forward: captures a bounded batch of pages, and
    /// finishes the checkpoint if the writer is done. `Ok(None)` while it runs or when none is
    /// in flight. Call it between operations.
    pub fn poll_checkpoint(&mut self) -> KvResult<Option<CheckpointReport>> {
        let now = Instant::now();
        let since_ms = now.duration_since(self.last_poll).as_millis() as usize;
        self.last_poll = now;
        self.advance_finish(FINISH_STEP_PAGES.max(since_ms.saturating_mul(FINISH_PAGES_PER_MS)));
        self.advance_capture(CAPTURE_STEP_PAGES.max(since_ms.saturating_mul(CAPTURE_PAGES_PER_MS)));
        match &self.inflight {
            None => return Ok(None),
            Some(inflight) if inflight.capturing => return Ok(None),
            Some(_) => {}
        }
        match self.writer.poll() {
            None => Ok(None),
            Some(finished) => self.finish_checkpoint(finished),
        }
    }

    /// True while a gated checkpoint's pages and record are durable and the owner has not yet
    /// released or abandoned it.
    pub fn checkpoint_prepared(&self) -> bool {
        self.inflight
            .as_ref()
            .is_some_and(Inflight::awaiting_release)
    }

    /// Blocks until the gated checkpoint in flight has its pages and record durable: true
    /// then, false when none is waiting to be released (none in flight, or not gated). A
    /// write failure is returned as the error and puts the pages back to dirty.
    pub fn wait_prepared(&mut self) -> KvResult<bool> {
        loop {
            match &self.inflight {
                Some(inflight) if self.gated && !inflight.released => {
                    if inflight.prepared {
                        return Ok(true);
                    }
                }
                _ => return Ok(false),
            }
            self.advance_capture(usize::MAX);
            let finished = self.writer.wait();
            self.finish_checkpoint(finished)?;
        }
    }

    /// Tells a prepared gated checkpoint that its owner committed it: the slots its pages
    /// replaced may be reused. It then finishes through `poll_checkpoint` or
    /// `wait_checkpoint` like any other.
    pub fn release_checkpoint(&mut self) {
        if let Some(inflight) = self.inflight.as_mut() {
            if inflight.awaiting_release() {
                inflight.released = true;
                self.writer.send(WriterMessage::Release);
            }
        }
    }

    /// Drops a gated checkpoint whose record is durable but which its owner will not
    /// commit: the record is unmade, the previous checkpoint stands and the pages are dirty
    /// again.
    pub fn abandon_checkpoint(&mut self) -> KvResult<()> {
        if !self.wait_prepared()? {
            return Ok(());
        }
        self.writer.send(WriterMessage::Abandon);
        let finished = self.writer.wait();
        self.finish_checkpoint(finished).map(|_| ())
    }

    /// Marks up to `max_pages` more pages of the last durable checkpoint clean, and evicts
    /// up to as many clean pages while the pool is over its size.
    fn advance_finish(&mut self, max_pages: usize) {
        if let Some(finishing) = self.finishing.as_mut() {
            let end = finishing
                .page_ids
                .len()
                .min(finishing.cursor.saturating_add(max_pages));
            let range = finishing.cursor..end;
            self.pager
                .pool
                .checkpoint_done(&finishing.page_ids[range], finishing.epoch);
            finishing.cursor = end;
            if end == finishing.page_ids.len() {
                self.finishing = None;
            }
        }
        // Pages just made clean let a pool that dirty pages pushed past its size shrink back.
        self.pager.pool.shrink_to_capacity(max_pages);
    }

    /// Blocks until the checkpoint in flight (if any) is durable. A gated checkpoint must be
    /// released first (`CheckpointInProgress` otherwise): only its owner can commit it.
    pub fn wait_checkpoint(&mut self) -> KvResult<Option<CheckpointReport>> {
        loop {
            match &self.inflight {
                None => {
                    self.advance_finish(usize::MAX);
                    return Ok(None);
                }
                Some(inflight) if self.gated && inflight.awaiting_release() => {
                    return Err(KvError::CheckpointInProgress)
                }
                Some(_) => {}
            }
            self.advance_capture(usize::MAX);
            let finished = self.writer.wait();
            let report = self.finish_checkpoint(finished);
            self.advance_finish(usize::MAX);
            if let Some(report) = report? {
                return Ok(Some(report));
            }
        }
    }

    /// A whole checkpoint: begin and wait.
    pub fn checkpoint(&mut self, position: LogPosition) -> KvResult<CheckpointReport> {
        self.wait_checkpoint()?;
        self.begin_checkpoint(position)?;
        Ok(self
            .wait_checkpoint()?
            .expect("a checkpoint was just started"))
    }

    /// Handles the writer's report on the checkpoint in flight: `None` while it goes on (a
    /// gated checkpoint is prepared, or it was abandoned).
    fn finish_checkpoint(&mut self, finished: Finished) -> KvResult<Option<CheckpointReport>> {
        let Finished { seq, outcome } = finished;
        if let CheckpointOutcome::Prepared = outcome {
            let inflight = self
                .inflight
                .as_mut()
                .expect("an outcome implies a checkpoint in flight");
            assert_eq!(inflight.seq, seq, "checkpoint outcomes arrive in order");
            inflight.prepared = true;
            return Ok(None);
        }
        let inflight = self
            .inflight
            .take()
            .expect("an outcome implies a checkpoint in flight");
        assert_eq!(inflight.seq, seq, "checkpoint outcomes arrive in order");
        match outcome {
            CheckpointOutcome::Prepared => unreachable!("handled above"),
            CheckpointOutcome::Abandoned => {
                self.pager
                    .pool
                    .checkpoint_failed(&inflight.page_ids, inflight.epoch);
                Ok(None)
            }
            CheckpointOutcome::Durable { slots, elapsed } => {
                let pages = slots.len();
                // Pages become evictable over the next polls; an older finish completes first.
                self.advance_finish(usize::MAX);
                self.pager.pool.checkpoint_slots(&inflight.page_ids, &slots);
                self.finishing = Some(Finishing {
                    epoch: inflight.epoch,
                    page_ids: inflight.page_ids,
                    cursor: 0,
                });
                self.checkpoint_seq = seq;
                self.durable_position = inflight.position;
                self.last_checkpoint = (pages, elapsed);
                Ok(Some(CheckpointReport {
                    seq,
                    log_position: inflight.position,
                    pages,
                    elapsed,
                }))
            }
            CheckpointOutcome::WriteFailed(err) => {
                self.pager
                    .pool
                    .checkpoint_failed(&inflight.page_ids, inflight.epoch);
                Err(err)
            }
            CheckpointOutcome::DataFailed(err) => {
                self.poisoned = Some(format!(
                    "checkpoint {seq} failed writing (or unmaking) its page map record, which recovery may take: {err}"
                ));
                Err(err)
            }
        }
    }

    /// The bytes of a table's tree: its inner and leaf pages (see `btree::count_pages`),
    /// found by reading the inner pages only.
    pub fn table_bytes(&mut self, table: Table) -> KvResult<u64> {
        self.check_usable()?;
        let mut pages = btree::count_pages(&mut self.pager, table.root)?;
        if table.is_buffered() {
            pages += btree::count_pages(&mut self.pager, table.buffer)?;
        }
        Ok(pages * self.pager.page_size() as u64)
    }

    /// Checks the structure of a table's tree, and of its insert buffer's; returns the
    /// tree's shape with the buffer's keys and pages added.
    pub fn check_table(&mut self, table: Table) -> KvResult<crate::check::TreeShape> {
        let mut shape = crate::check::check_tree(&mut self.pager, table.root)?;
        if table.is_buffered() {
            let buffer = crate::check::check_tree(&mut self.pager, table.buffer)?;
            shape.keys += buffer.keys;
            shape.pages += buffer.pages;
        }
        Ok(shape)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.holds.close();
        if self.inflight.is_some() {
            if self.gated && self.inflight.as_ref().is_some_and(|i| !i.released) {
                // Never committed by its owner: the data file must keep the old checkpoint.
                let _ = self.abandon_checkpoint();
            }
            let _ = self.wait_checkpoint();
        }
    }
}
