//! File IO for the engine: one `BlockFile` per open file, driven either through io_uring or
//! through plain `pread`/`pwrite`/`fdatasync`.
//!
//! Which path is used is decided once per process-wide `IoMode`: `Auto` tries to build a ring
//! and falls back to the portable path when the kernel refuses (ENOSYS, EPERM under seccomp or
//! `kernel.io_uring_disabled`). Both paths expose the same operations and run the same tests.
//!
//! Each `BlockFile` owns its own small ring behind a mutex. The engine has at most two threads
//! touching a file (the executor reading missed pages, the checkpoint writer writing), so the
//! mutex is uncontended in practice; batching is what matters: `write_batch` submits every
//! write of a batch in one `io_uring_enter`, and `write_batch_sync` links an `fdatasync` behind
//! them so a log append costs one system call.
//!
//! Fault model for tests: a `FaultPlan` can make the n-th write (counted per file) fail with an
//! errno, e.g. ENOSPC, before anything of that write reaches the file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{IoOp, KvError, KvResult};

/// How file IO is performed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoMode {
    /// io_uring when the kernel allows it, otherwise portable.
    #[default]
    Auto,
    /// Require io_uring; opening a file fails if a ring cannot be created.
    Uring,
    /// pread/pwrite/fdatasync only.
    Portable,
}

impl IoMode {
    /// Parses `auto`, `uring` or `portable` (used by flags and the `HOTLEDGER_IO` variable).
    pub fn parse(text: &str) -> Option<IoMode> {
        match text {
            "auto" => Some(IoMode::Auto),
            "uring" | "io_uring" => Some(IoMode::Uring),
            "portable" => Some(IoMode::Portable),
            _ => None,
        }
    }

    /// The mode named by `HOTLEDGER_IO`, or `Auto`. Tests use this to run both paths.
    pub fn from_env() -> IoMode {
        std::env::var("HOTLEDGER_IO")
            .ok()
            .and_then(|value| IoMode::parse(&value))
            .unwrap_or_default()
    }
}

/// Injected failures, shared by the files opened with it.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Writes left before one fails; negative means never.
    writes_until_failure: Arc<AtomicI64>,
    errno: Arc<AtomicI64>,
}

impl FaultPlan {
    pub fn none() -> FaultPlan {
        let plan = FaultPlan::default();
        plan.writes_until_failure.store(-1, Ordering::SeqCst);
        plan
    }

    /// The write after `successful_writes` more writes fails with `errno`, and so does every
    /// write after it until `heal` is called.
    pub fn fail_writes_after(&self, successful_writes: i64, errno: i32) {
        self.errno.store(i64::from(errno), Ordering::SeqCst);
        self.writes_until_failure
            .store(successful_writes, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.writes_until_failure.store(-1, Ordering::SeqCst);
    }

    fn check_write(&self) -> Result<(), std::io::Error> {
        let left = self.writes_until_failure.load(Ordering::SeqCst);
        if left < 0 {
            return Ok(());
        }
        if left == 0 {
            let errno = self.errno.load(Ordering::SeqCst) as i32;
            return Err(std::io::Error::from_raw_os_error(errno));
        }
        self.writes_until_failure.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An open file with positioned IO.
pub struct BlockFile {
    file: File,
    path: PathBuf,
    ring: Option<Mutex<io_uring::IoUring>>,
    faults: FaultPlan,
}

const RING_ENTRIES: u32 = 64;

impl BlockFile {
    /// Opens (or creates) `path` for reading and writing.
    pub fn open(path: &Path, create: bool, mode: IoMode, faults: FaultPlan) -> KvResult<BlockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|source| KvError::io(path, IoOp::Open, 0, source))?;
        BlockFile::with_file(file, path, mode, faults)
    }

    /// Opens an existing `path` a second time for direct IO (`O_DIRECT`: writes go from the
    /// caller's buffer to the device, not through the page cache). Buffers, offsets and
    /// lengths must then be aligned to the device's block size. `None` when the file system
    /// does not do direct IO.
    pub fn open_direct(
        path: &Path,
        mode: IoMode,
        faults: FaultPlan,
    ) -> KvResult<Option<BlockFile>> {
        BlockFile::open_direct_with_ring(path, mode, faults, RING_ENTRIES)
    }

    /// `open_direct` with a ring of `ring_entries`, for a file that keeps that many reads
    /// in flight at once (`submit_reads`).
    pub fn open_direct_with_ring(
        path: &Path,
        mode: IoMode,
        faults: FaultPlan,
        ring_entries: u32,
    ) -> KvResult<Option<BlockFile>> {
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match opened {
            Ok(file) => BlockFile::with_ring(file, path, mode, faults, ring_entries).map(Some),
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(source) => Err(KvError::io(path, IoOp::Open, 0, source)),
        }
    }

    fn with_file(file: File, path: &Path, mode: IoMode, faults: FaultPlan) -> KvResult<BlockFile> {
        BlockFile::with_ring(file, path, mode, faults, RING_ENTRIES)
    }

    fn with_ring(
        file: File,
        path: &Path,
        mode: IoMode,
        faults: FaultPlan,
        entries: u32,
    ) -> KvResult<BlockFile> {
        let ring = match mode {
            IoMode::Portable => None,
            IoMode::Auto => io_uring::IoUring::new(entries).ok().map(Mutex::new),
            IoMode::Uring => Some(Mutex::new(
                io_uring::IoUring::new(entries)
                    .map_err(|source| KvError::io(path, IoOp::Open, 0, source))?,
            )),
        };
        Ok(BlockFile {
            file,
            path: path.to_path_buf(),
            ring,
            faults,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when this file's IO goes through io_uring.
    pub fn uses_uring(&self) -> bool {
        self.ring.is_some()
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> KvResult<u64> {
        self.file
            .metadata()
            .map(|meta| meta.len())
            .map_err(|source| KvError::io(&self.path, IoOp::Stat, 0, source))
    }

    /// Reads exactly `buf.len()` bytes at `offset`; a short file is `KvError::Truncated`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> KvResult<()> {
        let result = match &self.ring {
            Some(ring) => uring_read(ring, &self.file, buf, offset),
            None => read_portable(&self.file, buf, offset),
        };
        self.whole_read(result, buf.len(), offset)
    }

    fn whole_read(&self, read: std::io::Result<usize>, wanted: usize, offset: u64) -> KvResult<()> {
        match read {
            Ok(n) if n == wanted => Ok(()),
            Ok(n) => Err(KvError::Truncated {
                path: self.path.clone(),
                offset,
                wanted: wanted as u64,
                got: n as u64,
            }),
            Err(source) => Err(KvError::io(&self.path, IoOp::Read, offset, source)),
        }
    }

    /// `read_exact_at` with a plain `pread`, never through the ring: for readers on other
    /// threads (snapshots), which must not wait on the ring's lock or hold it while they read.
    pub fn pread_exact_at(&self, buf: &mut [u8], offset: u64) -> KvResult<()> {
        let result = read_portable(&self.file, buf, offset);
        self.whole_read(result, buf.len(), offset)
    }

    /// Reads each `(offset, buffer)` of the batch whole. On io_uring every read of a chunk of
    /// `RING_ENTRIES` is in flight at once (one submission), so a batch of random pages costs
    /// about one device latency instead of one each; the portable path reads them in turn.
    /// Each read has its own result, in the batch's order.
    pub fn read_batch(&self, reads: &mut [(u64, &mut [u8])]) -> Vec<KvResult<()>> {
        let results: Vec<std::io::Result<usize>> = match &self.ring {
            Some(ring) => reads
                .chunks_mut(RING_ENTRIES as usize)
                .flat_map(|chunk| uring_read_chunk(ring, &self.file, chunk))
                .collect(),
            None => reads
                .iter_mut()
                .map(|(offset, buf)| read_portable(&self.file, buf, *offset))
                .collect(),
        };
        results
            .into_iter()
            .zip(reads.iter())
            .map(|(result, (offset, buf))| self.whole_read(result, buf.len(), *offset))
            .collect()
    }

    /// Submits a read of `len` bytes at `offset` into `buffer` for each entry, tagged with
    /// its `u64`, and returns without waiting; `reap_reads` collects them. False (nothing
    /// submitted) without a ring or when the ring refuses. Only for a file no other call
    /// uses meanwhile, so that the completions reaped are these.
    ///
    /// # Safety
    /// Each buffer must stay valid, and untouched by anything else, until its read has been
    /// reaped.
    pub unsafe fn submit_reads(&self, reads: &[(u64, *mut u8, usize, u64)]) -> bool {
        let Some(ring) = &self.ring else {
            return false;
        };
        let mut ring = lock_ring(ring);
        let room = {
            let queue = ring.submission();
            queue.capacity() - queue.len()
        };
        if reads.len() > room {
            return false;
        }
        for &(offset, buffer, len, tag) in reads {
            let entry = read_entry(&self.file, buffer, len, offset).user_data(tag);
            // SAFETY: the caller keeps each buffer valid until its completion is reaped, and
            // the queue has room for every entry (checked above).
            if unsafe { ring.submission().push(&entry) }.is_err() {
                return false;
            }
        }
        loop {
            match ring.submit() {
                Ok(_) => return true,
                Err(err) if err.raw_os_error() == Some(libc::EINTR) => continue,
                // The entries stay queued; the next submit or `reap_reads` sends them.
                Err(_) => return true,
            }
        }
    }

    /// Waits for `count` reads `submit_reads` sent and returns each one's tag and result
    /// (bytes read, or a negative errno). An error means the ring itself failed: the
    /// reads not reaped may still land in their buffers.
    pub fn reap_reads(&self, count: usize) -> std::io::Result<Vec<(u64, i32)>> {
        match &self.ring {
            Some(ring) => submit_and_reap(&mut lock_ring(ring), count),
            None => Ok(Vec::new()),
        }
    }

    /// Writes every `(offset, bytes)` of the batch; one submission on io_uring.
    pub fn write_batch(&self, writes: &[(u64, &[u8])]) -> KvResult<()> {
        self.write_batch_inner(writes, false)
    }

    /// Writes the batch and then makes it durable with `fdatasync`; on io_uring the sync is
    /// linked behind the writes in the same submission.
    pub fn write_batch_sync(&self, writes: &[(u64, &[u8])]) -> KvResult<()> {
        self.write_batch_inner(writes, true)
    }

    fn write_batch_inner(&self, writes: &[(u64, &[u8])], sync: bool) -> KvResult<()> {
        for (offset, _) in writes {
            self.faults
                .check_write()
                .map_err(|source| KvError::io(&self.path, IoOp::Write, *offset, source))?;
        }
        match &self.ring {
            Some(ring) => {
                for chunk in writes.chunks(RING_ENTRIES as usize - 1) {
                    uring_write_chunk(ring, &self.file, chunk, &self.path)?;
                }
                if sync {
                    self.sync()?;
                }
                Ok(())
            }
            None => {
                for (offset, bytes) in writes {
                    self.file
                        .write_all_at(bytes, *offset)
                        .map_err(|source| KvError::io(&self.path, IoOp::Write, *offset, source))?;
                }
                if sync {
                    self.sync()?;
                }
                Ok(())
            }
        }
    }

    /// `fdatasync`.
    pub fn sync(&self) -> KvResult<()> {
        let result = match &self.ring {
            Some(ring) => uring_fsync(ring, &self.file),
            None => self.file.sync_data(),
        };
        result.map_err(|source| KvError::io(&self.path, IoOp::Sync, 0, source))
    }

    /// Reserves disk space up to `len` bytes so that later writes cannot fail with ENOSPC.
    pub fn allocate(&self, len: u64) -> KvResult<()> {
        self.faults
            .check_write()
            .map_err(|source| KvError::io(&self.path, IoOp::Allocate, len, source))?;
        // SAFETY: plain syscall on an fd we own; no memory is shared with the kernel.
        let rc = unsafe { libc::posix_fallocate(self.file.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 {
            let source = std::io::Error::from_raw_os_error(rc);
            return Err(KvError::io(&self.path, IoOp::Allocate, len, source));
        }
        Ok(())
    }

    /// Asks the kernel to start writing dirty pages of the file back now, without waiting,
    /// so a later `fdatasync` finds less to do. A hint: errors are ignored.
    pub fn start_writeback(&self) {
        // SAFETY: a plain syscall on an fd we own; no memory is shared with the kernel.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    /// Sets the file length (used to shrink a journal or grow a log segment).
    pub fn set_len(&self, len: u64) -> KvResult<()> {
        self.file
            .set_len(len)
            .map_err(|source| KvError::io(&self.path, IoOp::Allocate, len, source))
    }
}

fn read_portable(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(done)
}

fn lock_ring(ring: &Mutex<io_uring::IoUring>) -> std::sync::MutexGuard<'_, io_uring::IoUring> {
    // A panic while holding the ring cannot leave it inconsistent for us: every operation
    // drains its own completions before returning.
    ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn submit_and_reap(ring: &mut io_uring::IoUring, count: usize) -> std::io::Result<Vec<(u64, i32)>> {
    let mut reaped = Vec::with_capacity(count);
    while reaped.len() < count {
        match ring.submit_and_wait(count - reaped.len()) {
            Ok(_) => {}
            Err(err) if err.raw_os_error() == Some(libc::EINTR) => continue,
            Err(err) => return Err(err),
        }
        for cqe in ring.completion() {
            reaped.push((cqe.user_data(), cqe.result()));
        }
    }
    Ok(reaped)
}

fn uring_read(
    ring: &Mutex<io_uring::IoUring>,
    file: &File,
    buf: &mut [u8],
    offset: u64,
) -> std::io::Result<usize> {
    let mut done = 0usize;
    let mut ring = lock_ring(ring);
    while done < buf.len() {
        let remaining = &mut buf[done..];
        let entry = read_entry(
            file,
            remaining.as_mut_ptr(),
            remaining.len(),
            offset + done as u64,
        );
        // SAFETY: the buffer outlives the submission: we wait for its completion below before
        // touching or releasing it.
        unsafe { push_entry(&mut ring, &entry)? };
        let reaped = submit_and_reap(&mut ring, 1)?;
        let result = reaped[0].1;
        if result < 0 {
            if -result == libc::EINTR || -result == libc::EAGAIN {
                continue;
            }
            return Err(std::io::Error::from_raw_os_error(-result));
        }
        if result == 0 {
            break;
        }
        done += result as usize;
    }
    Ok(done)
}

/// The io_uring read of `len` bytes at `offset` of `file` into `buffer`.
fn read_entry(file: &File, buffer: *mut u8, len: usize, offset: u64) -> io_uring::squeue::Entry {
    io_uring::opcode::Read::new(io_uring::types::Fd(file.as_raw_fd()), buffer, len as u32)
        .offset(offset)
        .build()
}

/// The results of `count` reads that all failed with the ring's `err`.
fn every_read_failed(count: usize, err: &std::io::Error) -> Vec<std::io::Result<usize>> {
    (0..count)
        .map(|_| Err(std::io::Error::new(err.kind(), err.to_string())))
        .collect()
}

/// The reads of one chunk (at most `RING_ENTRIES`), submitted together; a short or
/// interrupted read is finished with `pread`.
fn uring_read_chunk(
    ring: &Mutex<io_uring::IoUring>,
    file: &File,
    reads: &mut [(u64, &mut [u8])],
) -> Vec<std::io::Result<usize>> {
    let mut guard = lock_ring(ring);
    for (index, (offset, buf)) in reads.iter_mut().enumerate() {
        let entry = read_entry(file, buf.as_mut_ptr(), buf.len(), *offset).user_data(index as u64);
        // SAFETY: the buffers are borrowed for the whole call and every completion is reaped
        // before it returns (the chunk fits the ring, so no push fails after a submit).
        if let Err(err) = unsafe { push_entry(&mut guard, &entry) } {
            return every_read_failed(reads.len(), &err);
        }
    }
    let reaped = match submit_and_reap(&mut guard, reads.len()) {
        Ok(reaped) => reaped,
        // The ring itself failed (not one read): the whole chunk fails, as a single read
        // does in `uring_read`.
        Err(err) => return every_read_failed(reads.len(), &err),
    };
    drop(guard);
    let mut results: Vec<std::io::Result<usize>> = reads.iter().map(|_| Ok(0)).collect();
    for (index, result) in reaped {
        let index = index as usize;
        let (offset, buf) = &mut reads[index];
        results[index] = if result < 0 && -result != libc::EINTR && -result != libc::EAGAIN {
            Err(std::io::Error::from_raw_os_error(-result))
        } else {
            let done = result.max(0) as usize;
            if done < buf.len() {
                read_portable(file, &mut buf[done..], *offset + done as u64).map(|n| done + n)
            } else {
                Ok(done)
            }
        };
    }
    results
}

/// # Safety
/// Every buffer the entry points to must stay valid until its completion is reaped.
unsafe fn push_entry(
    ring: &mut io_uring::IoUring,
    entry: &io_uring::squeue::Entry,
) -> std::io::Result<()> {
    // SAFETY: forwarded to the caller's contract.
    if unsafe { ring.submission().push(entry) }.is_err() {
        ring.submit()?;
        // SAFETY: as above; the queue has room after the submit.
        unsafe { ring.submission().push(entry) }
            .map_err(|_| std::io::Error::other("io_uring submission queue full"))?;
    }
    Ok(())
}

fn uring_write_chunk(
    ring: &Mutex<io_uring::IoUring>,
    file: &File,
    writes: &[(u64, &[u8])],
    path: &Path,
) -> KvResult<()> {
    let mut ring = lock_ring(ring);
    for (index, (offset, bytes)) in writes.iter().enumerate() {
        let entry = io_uring::opcode::Write::new(
            io_uring::types::Fd(file.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .offset(*offset)
        .build()
        .user_data(index as u64);
        // SAFETY: the byte slices are borrowed for the whole call and every completion is
        // reaped before it returns.
        unsafe { push_entry(&mut ring, &entry) }
            .map_err(|source| KvError::io(path, IoOp::Write, *offset, source))?;
    }
    let reaped = submit_and_reap(&mut ring, writes.len())
        .map_err(|source| KvError::io(path, IoOp::Write, writes[0].0, source))?;
    drop(ring);
    // Short or interrupted writes are finished on the portable path; errors are reported with
    // the offset of the write that failed.
    for (index, result) in reaped {
        let (offset, bytes) = writes[index as usize];
        if result < 0 && -result != libc::EINTR && -result != libc::EAGAIN {
            let source = std::io::Error::from_raw_os_error(-result);
            return Err(KvError::io(path, IoOp::Write, offset, source));
        }
        let written = result.max(0) as usize;
        if written < bytes.len() {
            file.write_all_at(&bytes[written..], offset + written as u64)
                .map_err(|source| KvError::io(path, IoOp::Write, offset, source))?;
        }
    }
    Ok(())
}

fn uring_fsync(ring: &Mutex<io_uring::IoUring>, file: &File) -> std::io::Result<()> {
    let mut ring = lock_ring(ring);
    let entry = io_uring::opcode::Fsync::new(io_uring::types::Fd(file.as_raw_fd()))
        .flags(io_uring::types::FsyncFlags::DATASYNC)
        .build();
    loop {
        // SAFETY: fsync references no user memory.
        unsafe { push_entry(&mut ring, &entry)? };
        let reaped = submit_and_reap(&mut ring, 1)?;
        let result = reaped[0].1;
        if result == -libc::EINTR || result == -libc::EAGAIN {
            continue;
        }
        if result < 0 {
            return Err(std::io::Error::from_raw_os_error(-result));
        }
        return Ok(());
    }
}

/// The nice value background threads run at (0 is everyone else's; 19 the lowest).
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority to `BACKGROUND_NICE`, for background work that
/// must leave the cores to the executor and the sessions when they are busy. Best effort:
/// failure leaves the thread at normal priority.
pub fn lower_thread_priority() {
    // SAFETY: plain syscalls on the calling thread; no memory is shared.
    unsafe {
        let thread_id = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread_id, BACKGROUND_NICE);
    }
}

/// Puts the calling thread in the idle scheduling class (`SCHED_IDLE`): it runs only on a
/// core nothing else wants, and any other thread that wakes takes the core from it at once.
/// For reads that must never add to the ledger's latency. Best effort: failure leaves the
/// thread at `BACKGROUND_NICE`.
pub fn run_thread_when_idle() {
    lower_thread_priority();
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain syscall on the calling thread (0); `param` outlives it.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}

/// Makes a directory entry change (create, rename, unlink) durable.
pub fn sync_directory(path: &Path) -> KvResult<()> {
    let dir = File::open(path).map_err(|source| KvError::io(path, IoOp::Open, 0, source))?;
    dir.sync_all()
        .map_err(|source| KvError::io(path, IoOp::Sync, 0, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes() -> Vec<IoMode> {
        vec![IoMode::Portable, IoMode::Auto]
    }

    #[test]
    fn batch_write_then_read_back_on_every_path() {
        for mode in modes() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            let file = BlockFile::open(&path, true, mode, FaultPlan::none()).unwrap();
            let a = vec![1u8; 4096];
            let b = vec![2u8; 100];
            file.write_batch_sync(&[(0, &a), (8192, &b)]).unwrap();
            let mut out = vec![0u8; 100];
            file.read_exact_at(&mut out, 8192).unwrap();
            assert_eq!(out, b);
            file.read_exact_at(&mut out, 4000).unwrap();
            assert_eq!(&out[..96], &a[4000..]);
            assert!(out[96..].iter().all(|&x| x == 0));
            let err = file.read_exact_at(&mut out, 8250).unwrap_err();
            assert!(matches!(err, KvError::Truncated { got: 42, .. }), "{err}");
        }
    }

    #[test]
    fn a_batch_of_reads_fills_each_buffer_and_reports_each_short_one() {
        for mode in modes() {
            let dir = tempfile::tempdir().unwrap();
            let file =
                BlockFile::open(&dir.path().join("f"), true, mode, FaultPlan::none()).unwrap();
            // More reads than the ring holds, so the batch goes in several chunks.
            let pages: Vec<Vec<u8>> = (0..150u8).map(|i| vec![i; 512]).collect();
            let writes: Vec<(u64, &[u8])> = pages
                .iter()
                .enumerate()
                .map(|(i, page)| (i as u64 * 512, page.as_slice()))
                .collect();
            file.write_batch_sync(&writes).unwrap();
            let mut buffers: Vec<Vec<u8>> = (0..151).map(|_| vec![0xFF; 512]).collect();
            // Backwards, so no read's offset follows from its place in the batch.
            let mut reads: Vec<(u64, &mut [u8])> = buffers
                .iter_mut()
                .enumerate()
                .map(|(i, buf)| ((150 - i as u64) * 512, buf.as_mut_slice()))
                .collect();
            let results = file.read_batch(&mut reads);
            assert!(
                matches!(results[0], Err(KvError::Truncated { got: 0, .. })),
                "{mode:?}"
            );
            for (i, result) in results.iter().enumerate().skip(1) {
                assert!(result.is_ok(), "{mode:?} read {i}: {result:?}");
                assert!(
                    buffers[i].iter().all(|&b| b == 150 - i as u8),
                    "{mode:?} read {i}"
                );
            }
        }
    }

    #[test]
    fn injected_enospc_names_the_file_and_offset() {
        for mode in modes() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("data");
            let faults = FaultPlan::none();
            let file = BlockFile::open(&path, true, mode, faults.clone()).unwrap();
            faults.fail_writes_after(1, libc::ENOSPC);
            let bytes = [7u8; 10];
            let err = file
                .write_batch(&[(0, &bytes), (4096, &bytes)])
                .unwrap_err();
            let text = err.to_string();
            assert!(err.is_no_space(), "{text}");
            assert!(text.contains("data") && text.contains("4096"), "{text}");
        }
    }
}
