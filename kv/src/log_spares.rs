//! `SpareMaker`: zero-fills log segments ahead of need, on a thread of its own, so that the
//! append that fills a segment finds a spare to rename instead of writing and syncing a whole
//! segment of zeros on the log's thread (64 MiB: a stall of every commit for tens of ms).
//!
//! The zeros go out a megabyte at a time with a sync and a short pause after each, so that the
//! device never holds the log's own `fdatasync` behind a 64 MiB flush; when the log store needs
//! the spare before it is ready it waits, and the pauses stop.
//!
//! A spare is written as `prep-<n>.tmp`, synced, and only then renamed `spare-<n>.wal`, so the
//! log store never sees a half-filled spare; a `prep-` file left by a crash is deleted at open.
//! A failure here (a full disk) only loses the head start: the log store falls back to filling
//! the segment itself and reports the error where it belongs, on the append.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::io;

const PREP_PREFIX: &str = "prep-";
const CHUNK_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

pub(crate) struct SpareMaker {
    dir: PathBuf,
    segment_bytes: u64,
    /// Number of the next spare's name, shared with the log store's recycling of segments.
    next_spare: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Set while the log store waits for the spare: the pauses are skipped.
    hurry: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl SpareMaker {
    pub(crate) fn new(dir: &Path, segment_bytes: u64, next_spare: Arc<AtomicU64>) -> SpareMaker {
        SpareMaker {
            dir: dir.to_path_buf(),
            segment_bytes,
            next_spare,
            stop: Arc::new(AtomicBool::new(false)),
            hurry: Arc::new(AtomicBool::new(false)),
            worker: None,
        }
    }

    /// Deletes half-prepared spares a crash left behind.
    pub(crate) fn remove_leftovers(dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(PREP_PREFIX) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Starts preparing one spare unless one is being prepared already, or the disk would
    /// keep less than two segments free beside it: when space runs short the room goes to
    /// the data files' checkpoints, which let the log purge, not to a head start.
    pub(crate) fn request(&mut self) {
        if self.worker.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        if free_bytes(&self.dir).is_some_and(|free| free < 3 * self.segment_bytes) {
            return;
        }
        self.finish();
        self.hurry.store(false, Ordering::Relaxed);
        let number = self.next_spare.fetch_add(1, Ordering::SeqCst);
        let dir = self.dir.clone();
        let bytes = self.segment_bytes;
        let stop = self.stop.clone();
        let hurry = self.hurry.clone();
        let spawned = std::thread::Builder::new()
            .name("log-spare".into())
            .spawn(move || {
                let prep = dir.join(format!("{PREP_PREFIX}{number:016x}.tmp"));
                if prepare(&prep, bytes, &stop, &hurry).is_ok() && !stop.load(Ordering::Relaxed) {
                    let spare = dir.join(format!("spare-{number:016x}.wal"));
                    if std::fs::rename(&prep, &spare).is_ok() {
                        let _ = io::sync_directory(&dir);
                        return;
                    }
                }
                let _ = std::fs::remove_file(&prep);
            });
        // Without a thread the log store fills its segments itself, as it would anyway.
        self.worker = spawned.ok();
    }

    /// Waits for a preparation in progress, if any (cheaper than filling a segment anew),
    /// letting it run unpaced.
    pub(crate) fn finish(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.hurry.store(true, Ordering::Relaxed);
            let _ = worker.join();
        }
    }
}

impl Drop for SpareMaker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.finish();
    }
}

/// The bytes an unprivileged writer may still use on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we own from a NUL-terminated path; nothing else is
    // touched.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut stats) };
    (rc == 0).then(|| stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// Writes `bytes` zeros to a new file at `path`, syncing as it goes; stops early when asked.
fn prepare(path: &Path, bytes: u64, stop: &AtomicBool, hurry: &AtomicBool) -> std::io::Result<()> {
    let mut file: File = OpenOptions::new().write(true).create_new(true).open(path)?;
    let zeros = vec![0u8; 1 << 20];
    let mut written = 0;
    while written < bytes {
        if stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("stopped"));
        }
        let chunk = (bytes - written).min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..chunk])?;
        written += chunk as u64;
        // A megabyte at a time to the device, with a pause between: 64 MiB flushed at once
        // held the log's own fdatasync behind it (commits stalled 35-55 ms at each segment).
        if !hurry.load(Ordering::Relaxed) {
            file.sync_data()?;
            std::thread::sleep(CHUNK_PAUSE);
        }
    }
    file.sync_all()
}
