//! Storage errors as SQL errors: a key or value beyond the page format's limits is the
//! client's problem (54000); a full disk is 53100; anything else is an IO failure of this
//! server (58030), reported with the file and offset kv names.

use kv::KvError;
use sql::{ErrorKind, SqlError};

pub fn kv_error(e: KvError) -> SqlError {
    let kind = match &e {
        KvError::KeyTooLarge { .. } | KvError::ValueTooLarge { .. } => {
            ErrorKind::ProgramLimitExceeded
        }
        e if e.is_no_space() => ErrorKind::DiskFull,
        _ => ErrorKind::Io,
    };
    SqlError::new(kind, e.to_string())
}

/// A failure of the storage itself (IO, full disk), as opposed to a property of the command:
/// the executor stops on one, since replaying the log later may well succeed.
pub fn is_storage_failure(e: &SqlError) -> bool {
    matches!(e.kind, ErrorKind::Io | ErrorKind::DiskFull)
}
