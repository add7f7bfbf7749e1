//! The undo log of the command being applied: every kv write it made, with what the key held
//! before, so that a failing command (or a failing chain inside one) can be taken back in
//! reverse order. A command writes several keys per row; they and the values they replace
//! are kept end to end in one buffer rather than each in an allocation of its own, and the
//! log keeps its capacity from one command to the next (a split run's logs go back to their
//! partitions with the next run, see `coordinator`).

/// Bytes of keys and values, and of entries, a cleared log keeps for the next command.
const RETAINED_BYTES: usize = 4 << 20;

/// One write to take back: the key's partition and table (`S`: a kv table handle), and its
/// prior value (None: the key did not exist).
pub(crate) struct UndoEntry<S> {
    pub shard: usize,
    pub storage: S,
    pub key: Vec<u8>,
    pub old: Option<Vec<u8>>,
}

struct Entry<S> {
    shard: usize,
    storage: S,
    /// Where the key starts in `bytes`; the prior value, if any, follows it there and ends
    /// where the next entry's key starts.
    key_start: usize,
    key_end: usize,
    had_value: bool,
}

pub(crate) struct UndoLog<S> {
    entries: Vec<Entry<S>>,
    bytes: Vec<u8>,
}

impl<S> Default for UndoLog<S> {
    fn default() -> Self {
        UndoLog {
            entries: Vec::new(),
            bytes: Vec::new(),
        }
    }
}

impl<S> UndoLog<S> {
    /// Records a write of `key`, which held `old` before (None: it did not exist). Both are
    /// copied in: the log allocates nothing per write once warm.
    pub fn push(&mut self, shard: usize, storage: S, key: &[u8], old: Option<&[u8]>) {
        let key_start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        if let Some(old) = old {
            self.bytes.extend_from_slice(old);
        }
        self.entries.push(Entry {
            shard,
            storage,
            key_start,
            key_end,
            had_value: old.is_some(),
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The latest write, removed from the log.
    pub fn pop(&mut self) -> Option<UndoEntry<S>> {
        let entry = self.entries.pop()?;
        let old = entry
            .had_value
            .then(|| self.bytes[entry.key_end..].to_vec());
        let key = self.bytes[entry.key_start..entry.key_end].to_vec();
        self.bytes.truncate(entry.key_start);
        Some(UndoEntry {
            shard: entry.shard,
            storage: entry.storage,
            key,
            old,
        })
    }

    /// Forgets every write, keeping the capacity for the next command's — up to a bound: a
    /// huge statement's log is not held on to for good.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
        if self.bytes.capacity() > RETAINED_BYTES {
            self.bytes = Vec::new();
        }
        if self.entries.capacity() * std::mem::size_of::<Entry<S>>() > RETAINED_BYTES {
            self.entries = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_writes_latest_first_with_their_keys() {
        let mut log = UndoLog::default();
        let table = "t";
        log.push(0, table, b"first", None);
        log.push(1, table, b"", Some(&b"was"[..]));
        log.push(2, table, b"third key", None);
        assert_eq!(log.len(), 3);
        let third = log.pop().unwrap();
        assert_eq!(
            (third.shard, third.key.as_slice(), third.old),
            (2, &b"third key"[..], None)
        );
        let second = log.pop().unwrap();
        assert_eq!((second.shard, second.key.as_slice()), (1, &b""[..]));
        assert_eq!(second.old.as_deref(), Some(&b"was"[..]));
        log.push(3, table, b"again", None);
        log.push(4, table, b"empty before", Some(&b""[..]));
        let empty = log.pop().unwrap();
        assert_eq!(
            (empty.key.as_slice(), empty.old),
            (&b"empty before"[..], Some(Vec::new()))
        );
        assert_eq!(log.pop().unwrap().key, b"again");
        assert_eq!(log.pop().unwrap().key, b"first");
        assert!(log.pop().is_none());
        log.push(7, table, b"again", None);
        log.clear();
        assert_eq!(log.len(), 0);
        assert!(log.pop().is_none());
    }
}
