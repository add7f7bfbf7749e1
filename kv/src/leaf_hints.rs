//! Leaf hints: the last few leaves point operations landed in, each with the key range it
//! covers, so an operation on a key inside one of those ranges goes straight to the leaf
//! instead of descending from the root.
//!
//! A ledger transfer touches seven keys in five trees, and most of them sit in a leaf a recent
//! operation just visited: the hot account's leaf, the account read a moment before and now
//! written, the next id of a batch of ascending transfer ids, the end of the hot account's run
//! in an index. Each of those skips two or three internal nodes (a pool lookup, a binary
//! search and their cache misses apiece).
//!
//! A hint is exact, not a guess: its range is the one the descent proved — the nearest
//! separators on either side of the path taken — so every key in it belongs in that leaf for
//! as long as the tree's shape is unchanged. The B+tree forgets a tree's hints whenever it
//! changes that shape (a split, a merge, a root collapse, clearing or dropping the tree);
//! updates, inserts and deletes that stay inside a leaf keep them valid. A hinted operation
//! that needs the path after all (an insert that must split the leaf) descends again.
//!
//! What this must not do: hold page references (hints name pages by id and read them
//! through the pool like any descent), or survive the process (they live in memory only).

/// Leaves remembered at once, across all trees of an engine. The ledger's transfer touches
/// five trees with two hot leaves in the accounts tree; eight leaves room for the leaves
/// that are hit every transfer while the random ones pass through.
const ENTRIES: usize = 8;

#[derive(Default)]
struct Hint {
    /// The tree's root page; 0 marks an empty entry (page 0 is the superblock, never a root).
    root: u64,
    leaf: u64,
    /// The inclusive lower bound of the leaf's keys; `None` when it is the tree's first leaf.
    low: Option<Vec<u8>>,
    /// The exclusive upper bound; `None` when it is the tree's last leaf.
    high: Option<Vec<u8>>,
    /// When it was last hit or recorded (`LeafHints::clock`); the least recent is replaced.
    used: u64,
}

impl Hint {
    fn covers(&self, root: u64, key: &[u8]) -> bool {
        self.root == root
            && self.low.as_deref().is_none_or(|low| low <= key)
            && self.high.as_deref().is_none_or(|high| key < high)
    }
}

/// A bound being recorded: a separator key copied out of an internal node on the way down.
pub struct Fences {
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    /// Buffers of replaced hints, reused so recording does not allocate once warm.
    spare: Vec<Vec<u8>>,
}

impl Fences {
    fn give_back(&mut self, buffer: Option<Vec<u8>>) {
        if let Some(buffer) = buffer {
            self.spare.push(buffer);
        }
    }

    /// Forgets the bounds of the previous descent.
    pub fn start(&mut self) {
        let (low, high) = (self.low.take(), self.high.take());
        self.give_back(low);
        self.give_back(high);
    }

    /// An internal node sent the descent between `low` and `high` (either side absent at the
    /// node's edges); deeper nodes narrow what shallower ones set.
    pub fn narrow(&mut self, low: Option<&[u8]>, high: Option<&[u8]>) {
        for (bound, key) in [(&mut self.low, low), (&mut self.high, high)] {
            if let Some(key) = key {
                let mut buffer = bound
                    .take()
                    .unwrap_or_else(|| self.spare.pop().unwrap_or_default());
                buffer.clear();
                buffer.extend_from_slice(key);
                *bound = Some(buffer);
            }
        }
    }
}

pub struct LeafHints {
    entries: [Hint; ENTRIES],
    clock: u64,
    /// The bounds of the descent in progress.
    pub fences: Fences,
    hits: u64,
    misses: u64,
}

impl Default for LeafHints {
    fn default() -> LeafHints {
        LeafHints {
            entries: Default::default(),
            clock: 0,
            fences: Fences {
                low: None,
                high: None,
                spare: Vec::new(),
            },
            hits: 0,
            misses: 0,
        }
    }
}

impl LeafHints {
    /// The leaf of tree `root` that holds (or would hold) `key`, when a hint covers it.
    pub fn find(&mut self, root: u64, key: &[u8]) -> Option<u64> {
        self.clock += 1;
        let clock = self.clock;
        match self.entries.iter_mut().find(|hint| hint.covers(root, key)) {
            Some(hint) => {
                hint.used = clock;
                self.hits += 1;
                Some(hint.leaf)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Whether a hint covers `key` in tree `root` (without counting a hit or a miss).
    pub fn covers(&self, root: u64, key: &[u8]) -> bool {
        self.leaf_covering(root, key).is_some()
    }

    /// The hinted leaf of tree `root` that holds (or would hold) `key`, without counting a
    /// hit or a miss.
    pub fn leaf_covering(&self, root: u64, key: &[u8]) -> Option<u64> {
        self.entries
            .iter()
            .find(|hint| hint.covers(root, key))
            .map(|hint| hint.leaf)
    }

    /// Remembers that `leaf` of tree `root` holds the keys between the fences of the descent
    /// that just reached it, replacing the least recently used hint.
    pub fn record(&mut self, root: u64, leaf: u64) {
        self.clock += 1;
        // A hint for the same leaf is refreshed rather than duplicated; otherwise an empty
        // entry or the least recently used one is replaced.
        let index = self
            .entries
            .iter()
            .position(|hint| hint.root == root && hint.leaf == leaf)
            .or_else(|| {
                (0..ENTRIES).min_by_key(|&index| match &self.entries[index] {
                    hint if hint.root == 0 => 0,
                    hint => hint.used,
                })
            })
            .expect("there is at least one entry");
        let hint = &mut self.entries[index];
        let (old_low, old_high) = (hint.low.take(), hint.high.take());
        hint.root = root;
        hint.leaf = leaf;
        hint.used = self.clock;
        hint.low = self.fences.low.take();
        hint.high = self.fences.high.take();
        self.fences.give_back(old_low);
        self.fences.give_back(old_high);
    }

    /// Drops every hint of tree `root`: its shape is about to change.
    pub fn forget_tree(&mut self, root: u64) {
        for hint in self.entries.iter_mut().filter(|hint| hint.root == root) {
            hint.root = 0;
            self.fences.give_back(hint.low.take());
            self.fences.give_back(hint.high.take());
        }
    }

    /// (operations that found their leaf from a hint, operations that descended).
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::LeafHints;

    fn record(
        hints: &mut LeafHints,
        root: u64,
        leaf: u64,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
    ) {
        hints.fences.start();
        hints.fences.narrow(low, high);
        hints.record(root, leaf);
    }

    #[test]
    fn a_hint_covers_exactly_its_half_open_range() {
        let mut hints = LeafHints::default();
        record(&mut hints, 7, 40, Some(b"b"), Some(b"d"));
        assert_eq!(hints.find(7, b"a"), None);
        assert_eq!(hints.find(7, b"b"), Some(40));
        assert_eq!(hints.find(7, b"cz"), Some(40));
        assert_eq!(hints.find(7, b"d"), None);
        assert_eq!(hints.find(8, b"c"), None, "another tree's key");
        record(&mut hints, 9, 9, None, None);
        assert_eq!(hints.find(9, b""), Some(9), "a root leaf covers everything");
        assert_eq!(hints.counts(), (3, 3));
    }

    #[test]
    fn the_least_recently_used_hint_is_replaced_and_forgetting_is_per_tree() {
        let mut hints = LeafHints::default();
        for leaf in 0..8u64 {
            let low = [leaf as u8];
            let high = [leaf as u8 + 1];
            record(&mut hints, 1, 100 + leaf, Some(&low), Some(&high));
        }
        assert_eq!(hints.find(1, &[0]), Some(100), "touching leaf 100 keeps it");
        record(&mut hints, 1, 200, Some(&[50]), Some(&[60]));
        assert_eq!(hints.find(1, &[0]), Some(100));
        assert_eq!(hints.find(1, &[1]), None, "leaf 101 was the least recent");
        assert_eq!(hints.find(1, &[55]), Some(200));
        record(&mut hints, 2, 300, None, None);
        hints.forget_tree(1);
        assert_eq!(hints.find(1, &[0]), None);
        assert_eq!(hints.find(2, b"x"), Some(300));
    }

    #[test]
    fn recording_a_leaf_again_refreshes_its_range_instead_of_duplicating_it() {
        let mut hints = LeafHints::default();
        record(&mut hints, 1, 5, Some(b"a"), Some(b"m"));
        record(&mut hints, 1, 5, Some(b"a"), Some(b"f"));
        assert_eq!(
            hints.find(1, b"g"),
            None,
            "the narrower range replaced the wider"
        );
        assert_eq!(
            hints.entries.iter().filter(|hint| hint.leaf == 5).count(),
            1
        );
    }
}
