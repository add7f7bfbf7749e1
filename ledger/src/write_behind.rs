//! Write-behind: the kv writes of one bulk command (a multi-row INSERT, `create_transfers`,
//! a COPY chunk) held in memory per partition until the command ends, then applied to each
//! partition's engine in the order they were first made — the partitions other than the
//! coordinator's on their own threads, at the same time (see `coordinator`).
//!
//! While a command runs, its point reads look here first, so it sees its own writes; a read
//! that scans (a query) has everything held applied first. A key written many times (a hot
//! account, once per transfer of a batch) is applied once, with its last value. A failed
//! command's writes are dropped, unless some were applied already — then the undo log
//! writes the old values back through here like any other write.
//!
//! It must not decide what is written: the executor's undo log and rules are unchanged; this
//! only moves when the engine sees the writes.

use indexmap::IndexMap;
use kv::Engine;
use rustc_hash::FxBuildHasher;

use crate::error::kv_error;
use sql::SqlResult;

/// One partition's held writes: per kv table, each key's last written value, in the order
/// the keys were first written. Values live in one buffer (a write of a key written before
/// appends its new value there), so holding a write costs one allocation, for its key.
#[derive(Default)]
pub(crate) struct HeldWrites {
    tables: Vec<(kv::Table, Values)>,
    bytes: Vec<u8>,
}

/// Key → where its value is in `HeldWrites::bytes` (None: deleted).
type Values = IndexMap<Vec<u8>, Option<(usize, usize)>, FxBuildHasher>;

impl HeldWrites {
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(|(_, values)| values.is_empty())
    }

    /// The held value of `key`: None when nothing is held for it, Some(None) when it was
    /// deleted.
    pub fn get(&self, table: kv::Table, key: &[u8]) -> Option<Option<&[u8]>> {
        let (_, values) = self.tables.iter().find(|(t, _)| t.id == table.id)?;
        let at = *values.get(key)?;
        Some(at.map(|(start, len)| &self.bytes[start..start + len]))
    }

    pub fn put(&mut self, table: kv::Table, key: &[u8], value: Option<&[u8]>) {
        let at = value.map(|value| {
            self.bytes.extend_from_slice(value);
            (self.bytes.len() - value.len(), value.len())
        });
        let values = match self.tables.iter().position(|(t, _)| t.id == table.id) {
            Some(i) => &mut self.tables[i].1,
            None => {
                self.tables.push((table, Values::default()));
                &mut self.tables.last_mut().expect("just pushed").1
            }
        };
        match values.get_mut(key) {
            Some(held) => *held = at,
            None => {
                values.insert(key.to_vec(), at);
            }
        }
    }

    /// Applies every held write to `engine`: table by table, each in the order its keys
    /// were first written (distinct keys, so any order gives the same state).
    pub fn apply(self, engine: &mut Engine) -> SqlResult<()> {
        for (table, values) in &self.tables {
            for (key, at) in values {
                match at {
                    Some((start, len)) => engine.put(*table, key, &self.bytes[*start..start + len]),
                    None => engine.delete(*table, key),
                }
                .map_err(kv_error)?;
            }
        }
        Ok(())
    }
}

/// The writes held for a command in progress, one set per partition.
pub(crate) struct WriteBehind {
    pub held: Vec<HeldWrites>,
    /// Some writes of this command reached the engines before it ended (a read needed
    /// them): a failure must then write the old values back, not just drop what is held.
    pub applied_early: bool,
}

impl WriteBehind {
    pub fn new(partitions: usize) -> WriteBehind {
        WriteBehind {
            held: (0..partitions).map(|_| HeldWrites::default()).collect(),
            applied_early: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv::EngineOptions;

    #[test]
    fn held_writes_are_read_back_and_applied_with_their_last_values() {
        let dir = tempfile::tempdir().unwrap();
        let (mut engine, _) =
            Engine::open(&dir.path().join("db"), EngineOptions::default()).unwrap();
        let (a, b) = (
            engine.create_table("a").unwrap(),
            engine.create_table("b").unwrap(),
        );
        engine.put(a, b"kept", b"old").unwrap();
        engine.put(a, b"gone", b"old").unwrap();

        let mut held = HeldWrites::default();
        assert!(held.is_empty());
        assert_eq!(
            held.get(a, b"kept"),
            None,
            "nothing held: the engine's value counts"
        );
        held.put(a, b"new", Some(b"1"));
        held.put(a, b"new", Some(b"22"));
        held.put(a, b"gone", None);
        held.put(b, b"new", Some(b"other table"));
        held.put(b, b"back", Some(b"x"));
        held.put(b, b"back", None);
        assert_eq!(held.get(a, b"new"), Some(Some(&b"22"[..])));
        assert_eq!(held.get(a, b"gone"), Some(None));
        assert_eq!(held.get(b, b"new"), Some(Some(&b"other table"[..])));
        assert_eq!(held.get(a, b"kept"), None);
        assert_eq!(
            engine.get(a, b"new").unwrap(),
            None,
            "held, not yet applied"
        );

        held.apply(&mut engine).unwrap();
        assert_eq!(engine.get(a, b"new").unwrap().as_deref(), Some(&b"22"[..]));
        assert_eq!(engine.get(a, b"gone").unwrap(), None);
        assert_eq!(
            engine.get(a, b"kept").unwrap().as_deref(),
            Some(&b"old"[..])
        );
        assert_eq!(
            engine.get(b, b"new").unwrap().as_deref(),
            Some(&b"other table"[..])
        );
        assert_eq!(engine.get(b, b"back").unwrap(), None);
    }
}
