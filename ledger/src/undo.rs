//! The undo log of the command being applied: every kv write it made, with what the key held
//! before, so that a failing command (or a failing chain inside one) can be taken back in
//! reverse order. A command writes several keys per row; they are kept end to end in one
//! buffer rather than each in an allocation of its own, and the log keeps its capacity from
//! one command to the next.

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
    /// Where the key starts in `keys` (it ends where the next one starts).
    key_start: usize,
    old: Option<Vec<u8>>,
}

pub(crate) struct UndoLog<S> {
    entries: Vec<Entry<S>>,
    keys: Vec<u8>,
}

impl<S> Default for UndoLog<S> {
    fn default() -> Self {
        UndoLog {
            entries: Vec::new(),
            keys: Vec::new(),
        }
    }
}

impl<S> UndoLog<S> {
    pub fn push(&mut self, shard: usize, storage: S, key: &[u8], old: Option<Vec<u8>>) {
        self.entries.push(Entry {
            shard,
            storage,
            key_start: self.keys.len(),
            old,
        });
        self.keys.extend_from_slice(key);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The latest write, removed from the log.
    pub fn pop(&mut self) -> Option<UndoEntry<S>> {
        let entry = self.entries.pop()?;
        let key = self.keys.split_off(entry.key_start);
        Some(UndoEntry {
            shard: entry.shard,
            storage: entry.storage,
            key,
            old: entry.old,
        })
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.keys.clear();
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
        log.push(1, table, b"", Some(b"was".to_vec()));
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
        assert_eq!(log.pop().unwrap().key, b"again");
        assert_eq!(log.pop().unwrap().key, b"first");
        assert!(log.pop().is_none());
        log.push(7, table, b"again", None);
        log.clear();
        assert_eq!(log.len(), 0);
        assert!(log.pop().is_none());
    }
}
