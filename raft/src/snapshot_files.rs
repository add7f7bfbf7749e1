//! The snapshot directory: the snapshots this node built or received, as files, so one is
//! streamed to a follower in chunks straight from disk and never held whole in memory.
//!
//! A snapshot is written under a temporary name (`building-…`, or `receiving-…` while a
//! leader streams one in), fsynced, and renamed to `snapshot-<index>-<term>.hls`; the
//! newest such file is the node's current snapshot, and older ones are removed once a newer
//! one is in place. Temporary files left by a stop are removed at start. Each file opens
//! with its header (`ledger::SnapshotHeader`): the file alone says what it covers.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ledger::SnapshotHeader;

const PREFIX: &str = "snapshot-";
/// The temporary files: a snapshot being written here, and one being streamed in.
pub(crate) const BUILDING: &str = "building";
pub(crate) const RECEIVING: &str = "receiving";
const SUFFIX: &str = ".hls";

pub(crate) struct SnapshotFiles {
    dir: PathBuf,
    temporary: AtomicU64,
}

impl SnapshotFiles {
    /// Opens (creating) the directory and removes what a stop left half-written.
    pub fn open(dir: &Path) -> io::Result<SnapshotFiles> {
        fs::create_dir_all(dir)?;
        let files = SnapshotFiles {
            dir: dir.to_path_buf(),
            temporary: AtomicU64::new(0),
        };
        files.remove_temporary(BUILDING)?;
        files.remove_temporary(RECEIVING)?;
        Ok(files)
    }

    /// A fresh temporary path, `kind` being `building` or `receiving`.
    pub fn temporary(&self, kind: &str) -> PathBuf {
        let n = self.temporary.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{kind}-{}-{n}", std::process::id()))
    }

    /// Removes every temporary file of `kind` (an abandoned stream's).
    pub fn remove_temporary(&self, kind: &str) -> io::Result<()> {
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            if name.to_string_lossy().starts_with(kind) {
                fs::remove_file(self.dir.join(name))?;
            }
        }
        Ok(())
    }

    fn final_path(&self, header: &SnapshotHeader) -> PathBuf {
        self.dir.join(format!(
            "{PREFIX}{:020}-{:020}{SUFFIX}",
            header.index, header.term
        ))
    }

    /// Makes the complete, fsynced file at `temporary` the current snapshot, and removes
    /// the older ones. Returns its path.
    pub fn keep(&self, temporary: &Path, header: &SnapshotHeader) -> io::Result<PathBuf> {
        let path = self.final_path(header);
        fs::rename(temporary, &path)?;
        File::open(&self.dir)?.sync_all()?;
        for (older, _) in self.listed()? {
            if older != path {
                fs::remove_file(older)?;
            }
        }
        Ok(path)
    }

    /// The current snapshot's file and header, if there is one.
    pub fn current(&self) -> io::Result<Option<(PathBuf, SnapshotHeader)>> {
        let Some((path, _)) = self.listed()?.into_iter().max_by_key(|(_, index)| *index) else {
            return Ok(None);
        };
        let header = ledger::read_snapshot_header(File::open(&path)?)
            .map_err(|e| io::Error::other(format!("{}: {}", path.display(), e.message)))?;
        Ok(Some((path, header)))
    }

    /// Every kept snapshot file and the index its name gives.
    fn listed(&self) -> io::Result<Vec<(PathBuf, u64)>> {
        let mut kept = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            let index = name
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.strip_suffix(SUFFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|index| index.parse::<u64>().ok());
            if let Some(index) = index {
                kept.push((self.dir.join(&*name), index));
            }
        }
        Ok(kept)
    }
}
