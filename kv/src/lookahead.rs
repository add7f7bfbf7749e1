//! Lookahead: the leaves of keys that operations are about to touch, found before them.
//!
//! A point operation on a random key of a large tree waits for a chain of cache misses on
//! the way down: each level's page-table entry, node head and cells, one after the other.
//! Alone, nothing overlaps them. A caller that knows its next keys (a multi-row statement
//! knows its next rows) asks `btree::look_ahead` to walk their descents side by side, a level
//! at a time, so the misses of all of them are in flight at once, and the leaves it reaches
//! are remembered here; the operations that follow start at those leaves.
//!
//! A remembered leaf is a claim checked on use, not trusted: the leaf must still be a leaf,
//! no page may have been freed since it was found (so the page cannot have been reused
//! elsewhere), and the key must be in it or strictly between two of its keys. A B+tree leaf
//! holds every key of a contiguous range, so a key strictly inside a leaf's keys belongs in
//! that leaf whatever splits happened meanwhile; a key at either edge may belong to a
//! neighbour, and the operation descends as usual.
//!
//! What this must not do: hold page references (leaves are named by id and read through the
//! pool), or decide anything without that check.

/// Remembered leaves; direct-mapped by key hash, a collision replaces the older entry. A
/// ledger group looks ahead at about 32 keys at once: among 128 slots about four of them
/// lost their entry to another's; among 1,024, one in two groups loses one.
const SLOTS: usize = 1024;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// The tree's root; 0 marks an empty slot (page 0 is the superblock, never a root).
    root: u64,
    hash: u64,
    leaf: u64,
    /// The `Lookahead::epoch` it was remembered in; entries of earlier ones are forgotten.
    epoch: u64,
    /// Whether an operation has started at this leaf yet (each walked key counts once).
    used: bool,
}

pub struct Lookahead {
    slots: Box<[Slot; SLOTS]>,
    /// `Pager::frees` when the entries were found; any other value voids them all.
    frees_at: u64,
    /// Counts `clear`s: forgetting every entry is one increment, not a write of 32 KiB of
    /// slots (a two-row transfer statement clears them too).
    epoch: u64,
    /// Entries remembered since the last `clear`.
    len: usize,
    /// Walked keys an operation started at the leaf of, and walks' keys.
    used: u64,
    walked: u64,
}

impl Default for Lookahead {
    fn default() -> Lookahead {
        Lookahead {
            slots: Box::new([Slot::default(); SLOTS]),
            frees_at: 0,
            // Above the zeroed slots' epoch.
            epoch: 1,
            len: 0,
            used: 0,
            walked: 0,
        }
    }
}

impl Lookahead {
    /// Forgets every remembered leaf.
    pub fn clear(&mut self) {
        if self.len > 0 {
            self.epoch += 1;
            self.len = 0;
        }
    }

    /// Starts remembering leaves found while `frees` pages have been freed.
    pub fn start(&mut self, frees: u64) {
        if self.frees_at != frees {
            self.clear();
            self.frees_at = frees;
        }
    }

    pub fn remember(&mut self, root: u64, key: &[u8], leaf: u64) {
        let hash = key_hash(key);
        self.slots[slot_of(root, hash)] = Slot {
            root,
            hash,
            leaf,
            epoch: self.epoch,
            used: false,
        };
        self.len += 1;
        self.walked += 1;
    }

    /// The leaf remembered for `key` in tree `root`, unless a page was freed since (`frees`
    /// is `Pager::frees` now). The caller still checks that the leaf holds the key.
    pub fn leaf(&self, root: u64, key: &[u8], frees: u64) -> Option<u64> {
        if self.len == 0 || self.frees_at != frees {
            return None;
        }
        let hash = key_hash(key);
        let slot = self.slots[slot_of(root, hash)];
        (slot.epoch == self.epoch && slot.root == root && slot.hash == hash).then_some(slot.leaf)
    }

    /// An operation on `key` in tree `root` started at the leaf `leaf` gave for it; the
    /// first such operation of each walked key is counted (a blind write's own check in
    /// debug builds, or a key written twice, is not another use of the walk).
    pub fn count_use(&mut self, root: u64, key: &[u8]) {
        let slot = &mut self.slots[slot_of(root, key_hash(key))];
        if !slot.used {
            slot.used = true;
            self.used += 1;
        }
    }

    /// (walked keys an operation started at the leaf of, keys walked ahead).
    pub fn counts(&self) -> (u64, u64) {
        (self.used, self.walked)
    }
}

/// The slot of a key's hash in tree `root` (the hash's top bits, mixed with the root's).
fn slot_of(root: u64, hash: u64) -> usize {
    ((hash ^ root.wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// A 64-bit hash of a key: FxHash's multiply over its 8-byte words, each product folded down.
fn key_hash(key: &[u8]) -> u64 {
    // A word's product is folded down before the next word goes in: a multiplication
    // carries a difference only upwards, so FxHash's own step (rotate by 5, xor, multiply)
    // let a difference in a word's top byte be cancelled by one in the next word's low bits,
    // and integer keys (a tag, then eight big-endian bytes) collided by the thousand.
    let mix = |hash: u64, word: u64| {
        let product = (hash ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
        product ^ (product >> 32)
    };
    let mut hash = key.len() as u64;
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        hash = mix(
            hash,
            u64::from_le_bytes(word.try_into().expect("eight bytes")),
        );
    }
    // The tail, zero-padded, read a byte at a time (a copy into a padded word was a call
    // to `memcpy` per key).
    let tail = words.remainder();
    if !tail.is_empty() {
        let word = tail
            .iter()
            .rev()
            .fold(0u64, |word, &byte| word << 8 | u64::from(byte));
        hash = mix(hash, word);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::{key_hash, Lookahead};
    use crate::keycode::{self, KeyPart};

    #[test]
    fn integer_keys_hash_apart() {
        let key = |id: i64| keycode::encode_key(&[KeyPart::Int(id)]);
        let hashes: std::collections::HashSet<u64> =
            (0..1i64 << 18).map(|id| key_hash(&key(id))).collect();
        assert_eq!(hashes.len(), 1 << 18);
    }

    #[test]
    fn remembers_by_tree_and_key_until_a_page_is_freed() {
        let mut lookahead = Lookahead::default();
        lookahead.start(3);
        lookahead.remember(7, b"alpha", 40);
        lookahead.remember(9, b"alpha", 41);
        assert_eq!(lookahead.leaf(7, b"alpha", 3), Some(40));
        assert_eq!(lookahead.leaf(9, b"alpha", 3), Some(41));
        assert_eq!(lookahead.leaf(7, b"beta", 3), None);
        assert_eq!(
            lookahead.leaf(7, b"alpha", 4),
            None,
            "a page was freed since"
        );
        lookahead.start(4);
        assert_eq!(
            lookahead.leaf(7, b"alpha", 4),
            None,
            "voided by the new count"
        );
        lookahead.remember(7, b"alpha", 50);
        lookahead.clear();
        assert_eq!(lookahead.leaf(7, b"alpha", 4), None);
    }
}
