//! The engine's one error type. Every variant that comes from a file names the file and the
//! byte offset (or page) involved, so an operator can find what broke.

use std::path::{Path, PathBuf};

pub type KvResult<T> = Result<T, KvError>;

/// The kind of IO that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Open,
    Read,
    Write,
    Sync,
    Allocate,
    Stat,
    Rename,
    Remove,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvError {
    #[error("{op:?} failed on {path} at offset {offset}: {source}")]
    Io {
        path: PathBuf,
        op: IoOp,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is truncated: wanted {wanted} bytes at offset {offset}, the file has {got}")]
    Truncated {
        path: PathBuf,
        offset: u64,
        wanted: u64,
        got: u64,
    },
    #[error("{path} is corrupt at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("{path} has format version {found}; this build reads versions up to {expected}")]
    FormatVersion {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error("{path} is not a hotledger {what} file (bad magic)")]
    NotOurFile { path: PathBuf, what: &'static str },
    #[error("key of {len} bytes exceeds the limit of {max} bytes for this page size")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("table {0:?} does not exist")]
    NoSuchTable(String),
    #[error("table {0:?} already exists")]
    TableExists(String),
    #[error("a checkpoint is already in progress")]
    CheckpointInProgress,
    #[error("unsupported page size {0}: use a power of two from 512 to 65536")]
    BadPageSize(u32),
    #[error("log entry {index} is not available: the log holds {first}..={last}")]
    LogGap { index: u64, first: u64, last: u64 },
    #[error("log append must continue at index {expected}, got {got}")]
    LogOutOfOrder { expected: u64, got: u64 },
    #[error("log entry of {len} bytes exceeds the limit of {max} bytes")]
    LogEntryTooLarge { len: usize, max: usize },
    #[error("the engine stopped after an earlier failure: {0}")]
    Poisoned(String),
}

impl KvError {
    /// An IO error that says the disk (or the user's quota) is full: the operation may
    /// succeed once space returns.
    pub fn is_out_of_space(&self) -> bool {
        matches!(
            self,
            KvError::Io { source, .. }
                if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        )
    }

    pub fn io(path: &Path, op: IoOp, offset: u64, source: std::io::Error) -> KvError {
        KvError::Io {
            path: path.to_path_buf(),
            op,
            offset,
            source,
        }
    }

    pub fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> KvError {
        KvError::Corrupt {
            path: path.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }

    /// The file system refused the request as such (EINVAL): for a direct write, one it
    /// cannot do unbuffered.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, KvError::Io { source, .. } if source.raw_os_error() == Some(libc::EINVAL))
    }

    /// True for ENOSPC and EDQUOT: the disk (or quota) is full.
    pub fn is_no_space(&self) -> bool {
        match self {
            KvError::Io { source, .. } => matches!(
                source.raw_os_error(),
                Some(code) if code == libc::ENOSPC || code == libc::EDQUOT
            ),
            _ => false,
        }
    }
}
