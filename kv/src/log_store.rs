//! `LogStore`: the durable home of the replicated log. Entries are opaque bytes with a
//! contiguous `u64` index.
//!
//! Files in the log directory:
//! - `seg-<seq>.wal`: segments, zero-filled to their full size when created and reused after a
//!   purge (renamed, never compacted), so an append writes into already-allocated blocks and
//!   `fdatasync` has no file-size metadata to flush;
//! - `spare-<n>.wal`: purged segments waiting for reuse, and zero-filled ones prepared ahead
//!   of need by a background thread (`log_spares.rs`; `prep-<n>.tmp` while being written);
//! - `meta`: two alternating slots holding the purge point and a small caller blob (Raft's
//!   vote), each with its own checksum, so a torn write leaves the other slot readable.
//!
//! ```text
//! segment header (64 bytes): magic "HLWALSG1" | seq u64 | first index u64 | crc32c u32
//! record:                    crc32c u32 | len u32 | index u64 | generation u64 | payload
//! ```
//! The record checksum covers len, index, generation and payload.
//!
//! Recovery reads segments in order and accepts a record only if its checksum holds, its index
//! is the next one expected and its generation is not lower than the previous record's. The
//! generation is one more than the highest seen at every open and grows at every truncation,
//! so stale records left behind a truncation or a crash (which carry an older generation) are
//! never taken as a continuation of newer ones. A truncation also zeroes the record header at
//! the cut before it returns.
//!
//! A purge may go past the last entry (Raft does when it installs a snapshot). The next
//! append then starts a new segment at its index instead of continuing the old one after a
//! gap, and recovery takes a segment that starts past a gap when the purge point covers the
//! gap.
//!
//! An append of a batch is one write and one `fdatasync` (a batch crossing into a new segment
//! costs one of each per segment).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{IoOp, KvError, KvResult};
use crate::io::{self, BlockFile, FaultPlan, IoMode};
use crate::log_spares::SpareMaker;
use crate::page::{read_u32, read_u64, write_u32, write_u64};

const SEGMENT_MAGIC: &[u8; 8] = b"HLWALSG1";
const META_MAGIC: &[u8; 8] = b"HLWALMT1";
const SEGMENT_HEADER: u64 = 64;
const RECORD_HEADER: usize = 24;
const META_SLOT: usize = 4096;
/// Bytes of caller data a meta slot can hold.
pub const META_USER_MAX: usize = META_SLOT - 64;
const SPARES_MAX: usize = 4;

#[derive(Clone, Debug)]
pub struct LogStoreOptions {
    pub segment_bytes: u64,
    pub io_mode: IoMode,
    pub faults: FaultPlan,
}

impl Default for LogStoreOptions {
    fn default() -> LogStoreOptions {
        LogStoreOptions {
            segment_bytes: 64 << 20,
            io_mode: IoMode::from_env(),
            faults: FaultPlan::none(),
        }
    }
}

struct Segment {
    seq: u64,
    first_index: u64,
    file: BlockFile,
    /// Byte offset where the next record goes.
    end: u64,
}

#[derive(Clone, Copy)]
struct Location {
    segment_seq: u64,
    offset: u64,
    len: u32,
    /// The payload bytes of every entry held since the store opened, through this one: the
    /// bytes of a range of entries are the difference of two of these.
    bytes_through: u64,
}

pub struct LogStore {
    dir: PathBuf,
    options: LogStoreOptions,
    segments: VecDeque<Segment>,
    /// Locations of entries `first_index..first_index + locations.len()`.
    locations: VecDeque<Location>,
    first_index: u64,
    generation: u64,
    purged_through: Option<u64>,
    meta_file: BlockFile,
    meta_seq: u64,
    user_meta: Vec<u8>,
    /// Number for the next `spare-` name (recycled segments and prepared ones alike).
    next_spare: Arc<AtomicU64>,
    spares: SpareMaker,
}

fn segment_name(seq: u64) -> String {
    format!("seg-{seq:016x}.wal")
}

fn record_crc(header_tail: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(header_tail), payload)
}

impl LogStore {
    pub fn open(dir: &Path, options: LogStoreOptions) -> KvResult<LogStore> {
        std::fs::create_dir_all(dir).map_err(|source| KvError::io(dir, IoOp::Open, 0, source))?;
        let meta_file = BlockFile::open(
            &dir.join("meta"),
            true,
            options.io_mode,
            options.faults.clone(),
        )?;
        let (meta_seq, purged_through, user_meta) = read_meta(&meta_file)?;
        SpareMaker::remove_leftovers(dir);
        let next_spare = Arc::new(AtomicU64::new(0));
        let segment_bytes = options.segment_bytes;
        let mut store = LogStore {
            dir: dir.to_path_buf(),
            options,
            segments: VecDeque::new(),
            locations: VecDeque::new(),
            first_index: purged_through.map_or(0, |index| index + 1),
            generation: 0,
            purged_through,
            meta_file,
            meta_seq,
            user_meta,
            next_spare: next_spare.clone(),
            spares: SpareMaker::new(dir, segment_bytes, next_spare),
        };
        store.recover()?;
        if store.list("spare-")?.is_empty() {
            store.spares.request();
        }
        Ok(store)
    }

    fn list(&self, prefix: &str) -> KvResult<Vec<(u64, PathBuf)>> {
        let mut found = Vec::new();
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|source| KvError::io(&self.dir, IoOp::Open, 0, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| KvError::io(&self.dir, IoOp::Read, 0, source))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(hex) = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(".wal"))
            {
                if let Ok(number) = u64::from_str_radix(hex, 16) {
                    found.push((number, entry.path()));
                }
            }
        }
        found.sort();
        Ok(found)
    }

    fn recover(&mut self) -> KvResult<()> {
        let next_spare = self.list("spare-")?.last().map_or(0, |(n, _)| n + 1);
        self.next_spare.store(next_spare, Ordering::SeqCst);
        let mut expected: Option<u64> = None;
        let mut last_generation = 0u64;
        let mut stale = Vec::new();
        for (seq, path) in self.list("seg-")? {
            let file = BlockFile::open(
                &path,
                false,
                self.options.io_mode,
                self.options.faults.clone(),
            )?;
            let bytes = read_whole(&file)?;
            let Some(first_index) = parse_segment_header(&bytes, seq) else {
                stale.push(path);
                continue;
            };
            if let Some(next) = expected.filter(|&next| next != first_index) {
                // A segment that starts past a gap the purge point covers began after a
                // purge past the last entry (`append`): what came before is purged anyway.
                let after_purged_gap = first_index > next
                    && self
                        .purged_through
                        .is_some_and(|purged| purged + 1 >= first_index);
                if !after_purged_gap {
                    stale.push(path);
                    continue;
                }
                self.locations.clear();
            }
            let mut offset = SEGMENT_HEADER as usize;
            let mut next = first_index;
            while let Some((index, generation, len)) = parse_record(&bytes, offset) {
                if index != next || generation < last_generation {
                    break;
                }
                self.push_location(index, seq, offset as u64, len);
                last_generation = generation;
                offset += RECORD_HEADER + len as usize;
                next += 1;
            }
            expected = Some(next);
            self.segments.push_back(Segment {
                seq,
                first_index,
                file,
                end: offset as u64,
            });
        }
        for path in stale {
            self.recycle_path(&path)?;
        }
        self.generation = last_generation + 1;
        if let Some(purged) = self.purged_through {
            self.drop_locations_through(purged);
        }
        Ok(())
    }

    fn push_location(&mut self, index: u64, segment_seq: u64, offset: u64, len: u32) {
        if self.locations.is_empty() {
            self.first_index = index;
        }
        debug_assert_eq!(index, self.first_index + self.locations.len() as u64);
        let before = self.locations.back().map_or(0, |l| l.bytes_through);
        self.locations.push_back(Location {
            segment_seq,
            offset,
            len,
            bytes_through: before + u64::from(len),
        });
    }

    /// The lowest index from which the entries through `through` (the last entry, if it is
    /// past it) carry at most `bytes` bytes of payload — `through + 1` when even that entry
    /// carries more; None when no entry at or before `through` is held. What a log that may
    /// keep only so many bytes behind a point keeps.
    pub fn first_within_bytes(&self, through: u64, bytes: u64) -> Option<u64> {
        let last = self.last_index()?;
        if through < self.first_index {
            return None;
        }
        let through = through.min(last);
        let end = self.locations[(through - self.first_index) as usize].bytes_through;
        let floor = end.saturating_sub(bytes);
        // Entries start at nondecreasing offsets of the running count: the first that
        // starts at or after `floor` begins the range.
        let starts_before = |l: &Location| l.bytes_through - u64::from(l.len) < floor;
        let first = self.first_index + self.locations.partition_point(starts_before) as u64;
        debug_assert!(first <= through + 1);
        Some(first)
    }

    fn drop_locations_through(&mut self, index: u64) {
        while !self.locations.is_empty() && self.first_index <= index {
            self.locations.pop_front();
            self.first_index += 1;
        }
        if self.locations.is_empty() {
            self.first_index = self.first_index.max(index + 1);
        }
        // The table grows with the entries between purges (a checkpoint interval's worth);
        // give the memory back once a purge has emptied most of it.
        if self.locations.capacity() > 4096 && self.locations.len() < self.locations.capacity() / 4
        {
            self.locations.shrink_to(self.locations.len() * 2);
        }
    }

    /// First index held, if any.
    pub fn first_index(&self) -> Option<u64> {
        (!self.locations.is_empty()).then_some(self.first_index)
    }

    /// Last index held, if any.
    pub fn last_index(&self) -> Option<u64> {
        (!self.locations.is_empty()).then(|| self.first_index + self.locations.len() as u64 - 1)
    }

    /// The highest index removed by `purge_through`, if any.
    pub fn purged_through(&self) -> Option<u64> {
        self.purged_through
    }

    /// Appends entries with consecutive indices, durably (write + fdatasync) before returning.
    pub fn append<B: AsRef<[u8]>>(&mut self, entries: &[(u64, B)]) -> KvResult<()> {
        let Some((first, _)) = entries.first() else {
            return Ok(());
        };
        if let Some(last) = self.last_index() {
            if *first != last + 1 {
                return Err(KvError::LogOutOfOrder {
                    expected: last + 1,
                    got: *first,
                });
            }
        } else if self.purged_through.is_some_and(|purged| *first <= purged) {
            return Err(KvError::LogOutOfOrder {
                expected: self.first_index,
                got: *first,
            });
        }
        let max = (self.options.segment_bytes - SEGMENT_HEADER) as usize - RECORD_HEADER;
        for (position, (index, payload)) in entries.iter().enumerate() {
            if *index != first + position as u64 {
                return Err(KvError::LogOutOfOrder {
                    expected: first + position as u64,
                    got: *index,
                });
            }
            if payload.as_ref().len() > max {
                return Err(KvError::LogEntryTooLarge {
                    len: payload.as_ref().len(),
                    max,
                });
            }
        }
        if self.locations.is_empty()
            && self
                .segments
                .back()
                .is_some_and(|segment| segment.end > SEGMENT_HEADER)
        {
            // Everything held was purged, perhaps past the last entry (Raft does when it
            // installs a snapshot): records must not continue the segment after a gap,
            // where recovery would stop. A new segment starts at `first`.
            self.roll_segment(*first)?;
        }
        let mut buffer = Vec::new();
        let mut pending: Vec<(u64, u64, u32)> = Vec::new();
        for (index, payload) in entries {
            let payload = payload.as_ref();
            let needed = (RECORD_HEADER + payload.len()) as u64;
            let room = self.segments.back().map_or(0, |segment| {
                self.options.segment_bytes - segment.end - buffer.len() as u64
            });
            if room < needed {
                self.flush_buffer(&mut buffer, &mut pending)?;
                self.roll_segment(*index)?;
            }
            let segment = self.segments.back().expect("a segment after rolling");
            let offset = segment.end + buffer.len() as u64;
            pending.push((*index, offset, payload.len() as u32));
            encode_record(&mut buffer, *index, self.generation, payload);
        }
        self.flush_buffer(&mut buffer, &mut pending)
    }

    fn flush_buffer(
        &mut self,
        buffer: &mut Vec<u8>,
        pending: &mut Vec<(u64, u64, u32)>,
    ) -> KvResult<()> {
        if buffer.is_empty() {
            return Ok(());
        }
        let segment = self.segments.back_mut().expect("records go to a segment");
        segment.file.write_batch_sync(&[(segment.end, buffer)])?;
        segment.end += buffer.len() as u64;
        let seq = segment.seq;
        for (index, offset, len) in pending.drain(..) {
            self.push_location(index, seq, offset, len);
        }
        buffer.clear();
        Ok(())
    }

    /// Starts a new segment whose first entry is `first_index`, reusing a spare if any.
    fn roll_segment(&mut self, first_index: u64) -> KvResult<()> {
        let seq = self.segments.back().map_or(1, |segment| segment.seq + 1);
        let path = self.dir.join(segment_name(seq));
        let mut spares = self.list("spare-")?;
        if spares.is_empty() {
            // One may be on its way: waiting for the rest of it beats filling one here.
            self.spares.finish();
            spares = self.list("spare-")?;
        }
        let reused = if let Some((_, spare)) = spares.first() {
            std::fs::rename(spare, &path)
                .map_err(|source| KvError::io(spare, IoOp::Rename, 0, source))?;
            true
        } else {
            false
        };
        let file = BlockFile::open(
            &path,
            true,
            self.options.io_mode,
            self.options.faults.clone(),
        )?;
        if !reused {
            zero_fill(&file, self.options.segment_bytes)?;
        }
        let mut header = vec![0u8; SEGMENT_HEADER as usize];
        header[..8].copy_from_slice(SEGMENT_MAGIC);
        write_u64(&mut header, 8, seq);
        write_u64(&mut header, 16, first_index);
        let crc = crc32c::crc32c(&header[..24]);
        write_u32(&mut header, 24, crc);
        // Zero the first record header too, so old records of a reused file cannot follow.
        header.resize(SEGMENT_HEADER as usize + RECORD_HEADER, 0);
        file.write_batch_sync(&[(0, &header)])?;
        io::sync_directory(&self.dir)?;
        self.segments.push_back(Segment {
            seq,
            first_index,
            file,
            end: SEGMENT_HEADER,
        });
        if spares.len() <= 1 {
            // The next segment's spare, filled while this one fills.
            self.spares.request();
        }
        Ok(())
    }

    /// Reads entries `from..to` (exclusive); every index must be held.
    pub fn read(&self, from: u64, to: u64) -> KvResult<Vec<(u64, Vec<u8>)>> {
        let mut out = Vec::with_capacity(to.saturating_sub(from) as usize);
        for index in from..to {
            out.push((index, self.read_one(index)?));
        }
        Ok(out)
    }

    fn read_one(&self, index: u64) -> KvResult<Vec<u8>> {
        let gap = || KvError::LogGap {
            index,
            first: self.first_index,
            last: self.last_index().unwrap_or(0),
        };
        if index < self.first_index {
            return Err(gap());
        }
        let location = *self
            .locations
            .get((index - self.first_index) as usize)
            .ok_or_else(gap)?;
        let segment = self
            .segments
            .iter()
            .find(|segment| segment.seq == location.segment_seq)
            .expect("every location's segment is open");
        let mut record = vec![0u8; RECORD_HEADER + location.len as usize];
        segment.file.read_exact_at(&mut record, location.offset)?;
        match parse_record(&record, 0) {
            Some((found, _, _)) if found == index => Ok(record.split_off(RECORD_HEADER)),
            _ => Err(KvError::corrupt(
                segment.file.path(),
                location.offset,
                format!("log record {index} no longer matches its checksum"),
            )),
        }
    }

    /// Removes entries `index..` (a Raft conflict). Durable before returning.
    pub fn truncate_from(&mut self, index: u64) -> KvResult<()> {
        let Some(last) = self.last_index() else {
            return Ok(());
        };
        if index > last {
            return Ok(());
        }
        let keep = index.saturating_sub(self.first_index) as usize;
        let cut = self
            .locations
            .get(keep)
            .copied()
            .expect("index within the log");
        self.locations.truncate(keep);
        if self.locations.is_empty() {
            self.first_index = index;
        }
        self.generation += 1;
        while self
            .segments
            .back()
            .is_some_and(|segment| segment.seq > cut.segment_seq)
        {
            let segment = self.segments.pop_back().expect("checked");
            let path = segment.file.path().to_path_buf();
            drop(segment);
            self.recycle_path(&path)?;
        }
        let segment = self.segments.back_mut().expect("the cut's segment is open");
        segment.end = cut.offset;
        segment
            .file
            .write_batch_sync(&[(cut.offset, &[0u8; RECORD_HEADER])])?;
        io::sync_directory(&self.dir)
    }

    /// Removes entries `..=index` (after a checkpoint covers them); whole segments are recycled.
    pub fn purge_through(&mut self, index: u64) -> KvResult<()> {
        if self.purged_through.is_some_and(|purged| purged >= index) {
            return Ok(());
        }
        self.purged_through = Some(index);
        self.write_meta()?;
        self.drop_locations_through(index);
        while self.segments.len() > 1 {
            let next_first = self.segments[1].first_index;
            if next_first > index + 1 {
                break;
            }
            let segment = self.segments.pop_front().expect("checked");
            let path = segment.file.path().to_path_buf();
            drop(segment);
            self.recycle_path(&path)?;
        }
        Ok(())
    }

    fn recycle_path(&mut self, path: &Path) -> KvResult<()> {
        let spares = self.list("spare-")?.len();
        if spares >= SPARES_MAX {
            std::fs::remove_file(path)
                .map_err(|source| KvError::io(path, IoOp::Remove, 0, source))?;
        } else {
            let number = self.next_spare.fetch_add(1, Ordering::SeqCst);
            let target = self.dir.join(format!("spare-{number:016x}.wal"));
            std::fs::rename(path, &target)
                .map_err(|source| KvError::io(path, IoOp::Rename, 0, source))?;
        }
        io::sync_directory(&self.dir)
    }

    /// The caller's durable blob (Raft's vote), empty if never saved.
    pub fn user_meta(&self) -> &[u8] {
        &self.user_meta
    }

    /// Replaces the caller's blob durably.
    pub fn save_user_meta(&mut self, bytes: &[u8]) -> KvResult<()> {
        if bytes.len() > META_USER_MAX {
            return Err(KvError::LogEntryTooLarge {
                len: bytes.len(),
                max: META_USER_MAX,
            });
        }
        self.user_meta = bytes.to_vec();
        self.write_meta()
    }

    fn write_meta(&mut self) -> KvResult<()> {
        self.meta_seq += 1;
        let mut slot = vec![0u8; META_SLOT];
        slot[..8].copy_from_slice(META_MAGIC);
        write_u64(&mut slot, 8, self.meta_seq);
        slot[16] = u8::from(self.purged_through.is_some());
        write_u64(&mut slot, 24, self.purged_through.unwrap_or(0));
        write_u32(&mut slot, 32, self.user_meta.len() as u32);
        slot[64..64 + self.user_meta.len()].copy_from_slice(&self.user_meta);
        let crc = crc32c::crc32c(&slot[..META_SLOT - 4]);
        write_u32(&mut slot, META_SLOT - 4, crc);
        let offset = (self.meta_seq % 2) * META_SLOT as u64;
        self.meta_file.write_batch_sync(&[(offset, &slot)])
    }
}

fn encode_record(buffer: &mut Vec<u8>, index: u64, generation: u64, payload: &[u8]) {
    let start = buffer.len();
    buffer.resize(start + RECORD_HEADER, 0);
    buffer.extend_from_slice(payload);
    let record = &mut buffer[start..];
    write_u32(record, 4, payload.len() as u32);
    write_u64(record, 8, index);
    write_u64(record, 16, generation);
    let crc = record_crc(&record[4..RECORD_HEADER], payload);
    write_u32(record, 0, crc);
}

/// `(index, generation, payload length)` of a valid record at `offset`.
fn parse_record(bytes: &[u8], offset: usize) -> Option<(u64, u64, u32)> {
    let header = bytes.get(offset..offset + RECORD_HEADER)?;
    let len = read_u32(header, 4);
    let payload = bytes.get(offset + RECORD_HEADER..offset + RECORD_HEADER + len as usize)?;
    if len == 0 && read_u32(header, 0) == 0 && read_u64(header, 8) == 0 {
        return None;
    }
    (record_crc(&header[4..], payload) == read_u32(header, 0))
        .then(|| (read_u64(header, 8), read_u64(header, 16), len))
}

fn parse_segment_header(bytes: &[u8], seq: u64) -> Option<u64> {
    let header = bytes.get(..SEGMENT_HEADER as usize)?;
    let valid = &header[..8] == SEGMENT_MAGIC
        && read_u64(header, 8) == seq
        && read_u32(header, 24) == crc32c::crc32c(&header[..24]);
    valid.then(|| read_u64(header, 16))
}

fn read_whole(file: &BlockFile) -> KvResult<Vec<u8>> {
    let mut bytes = vec![0u8; file.file_len()? as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

fn zero_fill(file: &BlockFile, len: u64) -> KvResult<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut offset = 0;
    while offset < len {
        let chunk = (len - offset).min(zeros.len() as u64) as usize;
        file.write_batch(&[(offset, &zeros[..chunk])])?;
        offset += chunk as u64;
    }
    file.sync()
}

/// `(slot seq, purged through, user blob)` from the newer valid slot.
fn read_meta(file: &BlockFile) -> KvResult<(u64, Option<u64>, Vec<u8>)> {
    let bytes = read_whole(file)?;
    let mut best: Option<(u64, Option<u64>, Vec<u8>)> = None;
    for slot in bytes.chunks_exact(META_SLOT) {
        if &slot[..8] != META_MAGIC
            || read_u32(slot, META_SLOT - 4) != crc32c::crc32c(&slot[..META_SLOT - 4])
        {
            continue;
        }
        let seq = read_u64(slot, 8);
        let purged = (slot[16] == 1).then(|| read_u64(slot, 24));
        let len = (read_u32(slot, 32) as usize).min(META_USER_MAX);
        if best.as_ref().is_none_or(|(best_seq, _, _)| seq > *best_seq) {
            best = Some((seq, purged, slot[64..64 + len].to_vec()));
        }
    }
    Ok(best.unwrap_or((0, None, Vec::new())))
}
