//! B+tree operations on pages of the pager: point get, insert/update/upsert, delete with
//! merging of underfull nodes, and descent helpers for cursors.
//!
//! Invariant: a tree's root page id never changes. A root split moves the root's content into
//! two new children; a root left with a single child absorbs that child. The catalog can thus
//! record a table's root once, at creation.
//!
//! Invariant: every cell is smaller than half a page (keys are limited to page_size/8, inline
//! values to page_size/4, larger values go to overflow pages), so splitting a full node at the
//! byte midpoint always yields two nodes that fit.
//!
//! Deletion merges a node that falls below a quarter page with a sibling when both fit in one
//! page, up to the root; it does not redistribute between siblings that do not fit together.

use crate::error::{KvError, KvResult};
use crate::page::{self, LeafValue, Node, NodeMut, PageKind, WholeCells, SLOT_SIZE};
use crate::pager::Pager;

/// Internal nodes visited on the way down: (page id, child slot taken).
pub type Path = Vec<(u64, usize)>;

/// The largest key accepted for a page size.
pub fn max_key_len(page_size: usize) -> usize {
    page_size / 8
}

/// Values longer than this are stored in overflow pages.
pub fn max_inline_value_len(page_size: usize) -> usize {
    page_size / 4
}

/// What `put` does when the key exists or is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutMode {
    /// Insert or replace.
    Upsert,
    /// Only if the key is missing.
    InsertOnly,
    /// Only if the key exists.
    UpdateOnly,
}

/// Creates an empty tree and returns its root page id.
pub fn create(pager: &mut Pager) -> KvResult<u64> {
    pager.allocate(PageKind::Leaf)
}

/// Walks from `root` to the leaf that holds (or would hold) `key`, recording the path, and
/// hints that leaf with the key range the path proves (the nearest separators on either side).
pub fn descend(pager: &mut Pager, root: u64, key: &[u8], path: &mut Path) -> KvResult<u64> {
    path.clear();
    pager.leaf_hints.fences.start();
    let mut page_id = root;
    loop {
        let (bytes, hints) = pager.read_with_hints(page_id)?;
        page::prefetch_search_head(bytes);
        let node = Node::new(bytes);
        if node.is_leaf() {
            hints.record(root, page_id);
            return Ok(page_id);
        }
        let slot = node.child_slot(key);
        // (An internal node stores whole keys.)
        hints.fences.narrow(
            (slot > 0).then(|| node.stored_key(slot - 1)),
            (slot < node.len()).then(|| node.stored_key(slot)),
        );
        path.push((page_id, slot));
        page_id = node.child(slot);
        assert!(
            path.len() < 64,
            "B+tree deeper than 64 levels: a cycle in page links"
        );
    }
}

/// How many pages the tree at `root` holds — its inner nodes and leaves, not the overflow
/// pages of values larger than a page — reading only the inner nodes: the lowest of them
/// count their children instead of visiting them. A B+tree's leaves are all at one depth,
/// so the leftmost path tells which level that is.
pub fn count_pages(pager: &mut Pager, root: u64) -> KvResult<u64> {
    let mut depth = 0;
    let mut page = root;
    loop {
        let node = Node::new(pager.read(page)?);
        if node.is_leaf() {
            break;
        }
        page = node.child(0);
        depth += 1;
        if depth >= 64 {
            return Err(KvError::Poisoned(format!(
                "tree {root} is deeper than 64 levels: a cycle in page links"
            )));
        }
    }
    count_below(pager, root, depth)
}

/// Pages of the subtree at `page`, whose leaves are `depth` levels down.
fn count_below(pager: &mut Pager, page: u64, depth: u32) -> KvResult<u64> {
    if depth == 0 {
        return Ok(1);
    }
    let node = Node::new(pager.read(page)?);
    if node.is_leaf() {
        return Err(KvError::Poisoned(format!(
            "page {page} is a leaf {depth} levels above its tree's leaves"
        )));
    }
    let children = node.len() as u64 + 1;
    if depth == 1 {
        return Ok(1 + children);
    }
    let ids: Vec<u64> = (0..=node.len()).map(|slot| node.child(slot)).collect();
    let mut pages = 1;
    for child in ids {
        pages += count_below(pager, child, depth - 1)?;
    }
    Ok(pages)
}

/// Where `locate` found a key's leaf.
struct Located {
    leaf: u64,
    /// Whether `path` leads to the leaf (it does after a descent, not from a hint).
    path_known: bool,
    /// The key's place in the leaf (`Node::search`), when finding the leaf told it already.
    position: Option<Result<usize, usize>>,
}

impl Located {
    /// The key's place in `node`, the located leaf.
    fn position(&self, node: &Node<'_>, key: &[u8]) -> Result<usize, usize> {
        self.position.unwrap_or_else(|| node.search(key))
    }
}

/// The leaf that holds (or would hold) `key`: a leaf hint that covers `key` or a leaf found
/// ahead that provably holds it gives the leaf with an empty path; otherwise `descend`.
/// Read it with `read_leaf`.
fn locate(pager: &mut Pager, root: u64, key: &[u8], path: &mut Path) -> KvResult<Located> {
    if let Some((leaf, index)) = last_found(pager, root, key)? {
        path.clear();
        return Ok(Located {
            leaf,
            path_known: false,
            position: Some(Ok(index)),
        });
    }
    let found = match pager.leaf_hints.find(root, key) {
        Some(leaf) => Some((leaf, None)),
        None => looked_ahead(pager, root, key)?.map(|(leaf, position)| (leaf, Some(position))),
    };
    let Some((leaf, position)) = found else {
        let leaf = descend(pager, root, key, path)?;
        return Ok(Located {
            leaf,
            path_known: true,
            position: None,
        });
    };
    path.clear();
    Ok(Located {
        leaf,
        path_known: false,
        position,
    })
}

/// The cell a get just read, when `key` is its key still: a write after a read of the same
/// key (an account's balance, a counter's row) goes straight to it. The cell is checked, not
/// trusted: no page freed since, a leaf of tree `root`, and the very key at that index.
fn last_found(pager: &mut Pager, root: u64, key: &[u8]) -> KvResult<Option<(u64, usize)>> {
    let Some(found) = pager.last_found else {
        return Ok(None);
    };
    if found.root != root || found.frees != pager.frees {
        return Ok(None);
    }
    let Some(node) = leaf_still(pager, found.leaf)? else {
        return Ok(None);
    };
    let holds = found.index < node.len() && node.key_eq(found.index, key);
    Ok(holds.then_some((found.leaf, found.index)))
}

/// Page `leaf` as a node when it is a leaf still (a page remembered from an earlier
/// operation is checked, not trusted).
fn leaf_still(pager: &mut Pager, leaf: u64) -> KvResult<Option<Node<'_>>> {
    Ok(Node::new_checked(pager.read(leaf)?).filter(Node::is_leaf))
}

/// The leaf `look_ahead` found for `key` and the key's place in it, if that leaf provably
/// still holds the key (see `lookahead`).
fn looked_ahead(
    pager: &mut Pager,
    root: u64,
    key: &[u8],
) -> KvResult<Option<(u64, Result<usize, usize>)>> {
    let Some(leaf) = pager.lookahead.leaf(root, key, pager.frees) else {
        return Ok(None);
    };
    let Some(node) = leaf_still(pager, leaf)? else {
        return Ok(None);
    };
    let position = node.search(key);
    let holds = holds_key(&node, position);
    if holds {
        pager.lookahead.count_use(root, key);
    }
    Ok(holds.then_some((leaf, position)))
}

/// Whether a leaf that `search` placed a key at `position` in provably holds the key: it is
/// there, or strictly between two of its keys (at either edge it may belong to a
/// neighbour; see `lookahead`).
fn holds_key(node: &Node<'_>, position: Result<usize, usize>) -> bool {
    match position {
        Ok(_) => true,
        Err(position) => position > 0 && position < node.len(),
    }
}

/// Page `page_id` as a node, when it is resident and well formed; reads nothing from disk.
fn peeked_node(pager: &Pager, page_id: u64) -> Option<Node<'_>> {
    let at = pager.pool.peek(page_id)?;
    // SAFETY: `peek` gave the address of a resident page's `page_size` bytes, and nothing
    // changes the pool while this shared borrow of the pager lasts.
    let bytes = unsafe { std::slice::from_raw_parts(at, pager.page_size()) };
    Node::new_checked(bytes)
}

/// The most keys one `look_ahead` walks at once.
pub const LOOK_AHEAD_KEYS: usize = 64;

/// Walks the descents of `keys` in tree `root` side by side, a level at a time — every
/// key's page asked of the CPU, then every key's node searched — so that their cache misses
/// overlap, and remembers the leaf each reaches for the operation on it that follows
/// (`lookahead`). Keys a leaf hint already covers are skipped, and a key whose path leaves
/// the buffer pool is dropped: this reads nothing from disk. Keys beyond
/// `LOOK_AHEAD_KEYS` are ignored.
pub fn look_ahead(pager: &mut Pager, root: u64, keys: &[&[u8]]) {
    pager.lookahead.start(pager.frees);
    let page_size = pager.page_size();
    let head_bytes = page::LOOK_AHEAD_HEAD_BYTES.min(page_size);
    let mut pages = [root; LOOK_AHEAD_KEYS];
    let mut bytes = [std::ptr::null::<u8>(); LOOK_AHEAD_KEYS];
    // SAFETY (every use): `peek` gave the address of a resident page's `page_size` bytes, and
    // nothing changes the pool meanwhile: this function only reads.
    let page_at = |at: *const u8| unsafe { std::slice::from_raw_parts(at, page_size) };
    let mut live = [0usize; LOOK_AHEAD_KEYS];
    let mut live_len = 0;
    let mut leaves = [0usize; LOOK_AHEAD_KEYS];
    let mut leaves_len = 0;
    for (i, key) in keys.iter().enumerate().take(LOOK_AHEAD_KEYS) {
        if !pager.leaf_hints.covers(root, key) {
            live[live_len] = i;
            live_len += 1;
        }
    }
    // A tree is far shallower than this; a deeper walk means a cycle in page links, which
    // the operations' own descents report.
    let mut depth = 0;
    while live_len > 0 && depth < 64 {
        depth += 1;
        let mut kept = 0;
        for j in 0..live_len {
            let i = live[j];
            if let Some(page) = pager.pool.peek(pages[i]) {
                page::prefetch_bytes(page, head_bytes);
                bytes[i] = page;
                live[kept] = i;
                kept += 1;
            }
        }
        live_len = kept;
        kept = 0;
        for j in 0..live_len {
            let i = live[j];
            let Some(node) = Node::new_checked(page_at(bytes[i])) else {
                continue;
            };
            if node.is_leaf() {
                pager.lookahead.remember(root, keys[i], pages[i]);
                // Slots past the head, of a leaf with many cells.
                node.prefetch_slots_from(head_bytes);
                leaves[leaves_len] = i;
                leaves_len += 1;
                continue;
            }
            pages[i] = node.child(node.child_slot(keys[i]));
            live[kept] = i;
            kept += 1;
        }
        live_len = kept;
    }
    // The cells each leaf's search will compare, now that its head has had the other keys'
    // descents to arrive in.
    for &i in &leaves[..leaves_len] {
        Node::new(page_at(bytes[i])).prefetch_search_cells(keys[i]);
    }
}

/// Brings the pages on the descents of `keys` in tree `root` into the buffer pool, a level
/// at a time: every key's page at one level that is not resident is read in one batch of
/// IO (`BufferPool::load_batch`), then each key moves down a level. Operations on keys of a
/// large tree that outgrew the pool would otherwise each wait for their own reads, one after
/// another; here the reads of all of them overlap. A hint: it changes no page, and a page it
/// cannot read is left for the operation that needs it.
///
/// With `submit`, the reads of each level are started and not waited for
/// (`BufferPool::submit_batch`): a key whose page is still being read goes no further.
pub fn page_in(pager: &mut Pager, root: u64, keys: &[&[u8]], submit: bool) {
    let page_size = pager.page_size();
    let mut pages = vec![root; keys.len()];
    let mut live: Vec<usize> = (0..keys.len()).collect();
    let mut missing = Vec::with_capacity(keys.len());
    // A tree is far shallower than this; a deeper walk means a cycle in page links, which
    // the operations' own descents report.
    let mut depth = 0;
    while !live.is_empty() && depth < 64 {
        depth += 1;
        missing.clear();
        missing.extend(
            live.iter()
                .map(|&i| pages[i])
                .filter(|&page| pager.pool.peek(page).is_none()),
        );
        missing.sort_unstable();
        missing.dedup();
        if submit {
            pager.pool.submit_batch(&missing);
        } else {
            pager.pool.load_batch(&missing);
        }
        live.retain_mut(|i| {
            let Some(at) = pager.pool.peek(pages[*i]) else {
                return false;
            };
            // SAFETY: `peek` gave the address of a resident page's `page_size` bytes, and
            // nothing changes the pool until the next level's `load_batch`.
            let bytes = unsafe { std::slice::from_raw_parts(at, page_size) };
            match Node::new_checked(bytes) {
                Some(node) if !node.is_leaf() => {
                    pages[*i] = node.child(node.child_slot(keys[*i]));
                    true
                }
                _ => false,
            }
        });
    }
}

/// Whether an operation on `key` in tree `root` reaches its leaf without reading from disk:
/// a leaf hint or a leaf found ahead names a resident leaf that holds it (where the
/// operation starts), or every page on the descent is in the buffer pool. Reads no page and
/// changes nothing.
pub fn path_resident(pager: &Pager, root: u64, key: &[u8]) -> bool {
    if known_leaf_resident(pager, root, key) {
        return true;
    }
    let mut page_id = root;
    // A tree is far shallower than this; a deeper walk means a cycle in page links, which
    // the operations' own descents report.
    for _ in 0..64 {
        match peeked_node(pager, page_id) {
            Some(node) if node.is_leaf() => return true,
            Some(node) => page_id = node.child(node.child_slot(key)),
            None => return false,
        }
    }
    false
}

/// Whether a leaf hint or a leaf found ahead names a resident leaf for `key` that `locate`
/// would start at (a found-ahead leaf is checked to hold the key, as `looked_ahead` does).
fn known_leaf_resident(pager: &Pager, root: u64, key: &[u8]) -> bool {
    let resident_leaf = |leaf| peeked_node(pager, leaf).filter(Node::is_leaf);
    if let Some(leaf) = pager.leaf_hints.leaf_covering(root, key) {
        return resident_leaf(leaf).is_some();
    }
    let Some(leaf) = pager.lookahead.leaf(root, key, pager.frees) else {
        return false;
    };
    resident_leaf(leaf).is_some_and(|node| holds_key(&node, node.search(key)))
}

/// The leaf `locate` found, checked to be one (a hint naming anything else is a bug).
fn read_leaf(pager: &mut Pager, root: u64, leaf: u64) -> KvResult<Node<'_>> {
    let node = Node::new(pager.read(leaf)?);
    if !node.is_leaf() {
        return Err(KvError::Poisoned(format!(
            "tree {root} located page {leaf}, which is not a leaf"
        )));
    }
    Ok(node)
}

/// Looks `key` up; copies its value into `out` and returns true when found.
pub fn get(
    pager: &mut Pager,
    root: u64,
    key: &[u8],
    path: &mut Path,
    out: &mut Vec<u8>,
) -> KvResult<bool> {
    let located = locate(pager, root, key, path)?;
    let node = read_leaf(pager, root, located.leaf)?;
    let Ok(index) = located.position(&node, key) else {
        return Ok(false);
    };
    match node.value(index) {
        LeafValue::Inline(bytes) => {
            out.clear();
            out.extend_from_slice(bytes);
        }
        LeafValue::Overflow { first_page, len } => {
            pager.read_overflow(first_page, len as usize, out)?;
        }
    }
    pager.last_found = Some(crate::pager::Found {
        root,
        leaf: located.leaf,
        index,
        frees: pager.frees,
    });
    Ok(true)
}

/// The stored value about to be replaced or removed: an inline one is copied into `old` (when
/// given) here, while the page is borrowed; an overflow one comes back as (first page,
/// length) for `release_overflow`.
fn save_inline(stored: LeafValue<'_>, old: Option<&mut Vec<u8>>) -> Option<(u64, u32)> {
    match stored {
        LeafValue::Inline(bytes) => {
            if let Some(out) = old {
                out.clear();
                out.extend_from_slice(bytes);
            }
            None
        }
        LeafValue::Overflow { first_page, len } => Some((first_page, len)),
    }
}

/// Frees the overflow pages (first page, length) of a value being replaced or removed, after
/// reading the value into `old` when that is given.
fn release_overflow(
    pager: &mut Pager,
    overflow: Option<(u64, u32)>,
    old: Option<&mut Vec<u8>>,
) -> KvResult<()> {
    if let Some((first_page, len)) = overflow {
        if let Some(out) = old {
            pager.read_overflow(first_page, len as usize, out)?;
        }
        pager.free_overflow(first_page)?;
    }
    Ok(())
}

fn check_sizes(pager: &Pager, key: &[u8], value: &[u8]) -> KvResult<()> {
    let max_key = max_key_len(pager.page_size());
    if key.len() > max_key {
        return Err(KvError::KeyTooLarge {
            len: key.len(),
            max: max_key,
        });
    }
    let max_value = (u32::MAX >> 1) as usize;
    if value.len() > max_value {
        return Err(KvError::ValueTooLarge {
            len: value.len(),
            max: max_value,
        });
    }
    Ok(())
}

/// Encodes a leaf cell for `key`/`value`, spilling the value to overflow pages if needed, in
/// the pager's cell buffer (an insert gives it back: a fresh allocation per put was ~2% of
/// a bulk insert's executor time, a cache miss on a cold block each).
fn make_leaf_cell(pager: &mut Pager, key: &[u8], value: &[u8]) -> KvResult<Vec<u8>> {
    let mut cell = std::mem::take(&mut pager.cell_buffer);
    cell.clear();
    if value.len() > max_inline_value_len(pager.page_size()) {
        let first_page = pager.write_overflow(value)?;
        let len = value.len() as u32;
        page::encode_leaf_cell(&mut cell, key, LeafValue::Overflow { first_page, len });
    } else {
        page::encode_leaf_cell(&mut cell, key, LeafValue::Inline(value));
    }
    Ok(cell)
}

/// Writes `key` = `value` according to `mode`; returns whether the key existed before.
///
/// `old`, when given, receives the replaced value (left alone when the key was absent or
/// `InsertOnly` found it), so an undo log needs no lookup of its own.
pub fn put(
    pager: &mut Pager,
    root: u64,
    key: &[u8],
    value: &[u8],
    mode: PutMode,
    path: &mut Path,
    mut old: Option<&mut Vec<u8>>,
) -> KvResult<bool> {
    check_sizes(pager, key, value)?;
    let fits_inline = value.len() <= max_inline_value_len(pager.page_size());
    let located = locate(pager, root, key, path)?;
    let (leaf, path_known) = (located.leaf, located.path_known);
    let node = read_leaf(pager, root, leaf)?;
    let position = located.position(&node, key);
    match (position, mode) {
        (Ok(_), PutMode::InsertOnly) => return Ok(true),
        (Err(_), PutMode::UpdateOnly) => return Ok(false),
        _ => {}
    }
    match position {
        Ok(index) => {
            let stored = node.value(index);
            let in_place = fits_inline
                && matches!(stored, LeafValue::Inline(bytes) if bytes.len() == value.len());
            let overflow = save_inline(stored, old.as_deref_mut());
            if in_place {
                let mut node = NodeMut::new(pager.write(leaf)?);
                let done = node.overwrite_value_in_place(index, value);
                assert!(done, "same-length inline value must overwrite in place");
                return Ok(true);
            }
            release_overflow(pager, overflow, old)?;
            let cell = make_leaf_cell(pager, key, value)?;
            NodeMut::new(pager.write(leaf)?).remove_cell(index);
            insert_leaf_cell(pager, root, key, (leaf, path_known), path, index, cell)?;
            Ok(true)
        }
        Err(index) => {
            let cell = make_leaf_cell(pager, key, value)?;
            insert_leaf_cell(pager, root, key, (leaf, path_known), path, index, cell)?;
            Ok(false)
        }
    }
}

/// Inserts the cell of `key` at `position` of the leaf `locate` found. A leaf found from a
/// hint came without its path, which only a split needs: the cell goes in directly when it
/// fits, and the path is walked only when it does not.
fn insert_leaf_cell(
    pager: &mut Pager,
    root: u64,
    key: &[u8],
    (leaf, path_known): (u64, bool),
    path: &mut Path,
    position: usize,
    cell: Vec<u8>,
) -> KvResult<()> {
    if !path_known {
        if NodeMut::new(pager.write(leaf)?).insert_cell(position, &cell) {
            pager.leaf_inserts.record(leaf, position);
            pager.cell_buffer = cell;
            return Ok(());
        }
        let walked = descend(pager, root, key, path)?;
        debug_assert_eq!(walked, leaf, "a hinted leaf is the leaf a descent finds");
    }
    insert_cell(pager, root, leaf, path, position, cell)
}

/// Inserts `cell` at `position` of `page_id`, splitting up the path as needed.
fn insert_cell(
    pager: &mut Pager,
    root: u64,
    mut page_id: u64,
    path: &mut Path,
    mut position: usize,
    mut cell: Vec<u8>,
) -> KvResult<()> {
    let leaf = page_id;
    loop {
        if NodeMut::new(pager.write(page_id)?).insert_cell(position, &cell) {
            if page_id == leaf {
                pager.leaf_inserts.record(leaf, position);
            }
            pager.cell_buffer = cell;
            return Ok(());
        }
        let Some((separator, right)) = split(pager, root, page_id, path, position, cell)? else {
            return Ok(());
        };
        let (parent, slot) = path
            .pop()
            .expect("a non-root node has a parent on the path");
        let mut encoded = Vec::new();
        page::encode_internal_cell(&mut encoded, &separator, right);
        cell = encoded;
        position = slot;
        page_id = parent;
    }
}

/// Whether the node at the end of `path` is the last one of its level: every step down took
/// its parent's last child.
fn rightmost(pager: &mut Pager, path: &Path) -> KvResult<bool> {
    for &(parent, slot) in path {
        if slot != Node::new(pager.read(parent)?).len() {
            return Ok(false);
        }
    }
    Ok(true)
}

fn bytes_of<C: AsRef<[u8]>>(cells: &[C]) -> usize {
    cells
        .iter()
        .map(|cell| cell.as_ref().len() + SLOT_SIZE)
        .sum()
}

/// The split index that minimizes the larger half (in bytes) while leaving both sides non-empty.
fn split_index<C: AsRef<[u8]>>(cells: &[C], leaf: bool) -> usize {
    let total = bytes_of(cells);
    let (low, high) = if leaf {
        (1, cells.len() - 1)
    } else {
        (1, cells.len() - 2)
    };
    assert!(low <= high, "a full node has at least three cells");
    let mut best = low;
    let mut best_cost = usize::MAX;
    let mut left = bytes_of(&cells[..low]);
    for (index, cell) in cells.iter().enumerate().take(high + 1).skip(low) {
        // An internal split promotes the cell at the split point instead of keeping it.
        let size = cell.as_ref().len() + SLOT_SIZE;
        let promoted = if leaf { 0 } else { size };
        let cost = left.max(total - left - promoted);
        if cost < best_cost {
            best_cost = cost;
            best = index;
        }
        left += size;
    }
    best
}

/// Where to split a full leaf, `cells` holding its new cell at `position`: the first of these
/// that leaves both halves within a page as stored (`page::stored_size`, each half cutting
/// its own prefix) — after the old cells for an `append`; for a cell continuing an
/// `ascending` run, right after it when cells with higher keys follow (they go to the new
/// node, and the run goes on at the end of this one) or right before it (the new node starts
/// with it); the point that halves the bytes. Failing all (a cell whose key breaks a long
/// prefix), the point that fits with the larger half smallest: keeping the new cell apart
/// always fits, since the old cells fitted.
fn leaf_split_index<C: AsRef<[u8]>>(
    cells: &[C],
    position: usize,
    (append, ascending): (bool, bool),
    page_size: usize,
) -> usize {
    let n = cells.len();
    let larger_half = |at: usize| {
        page::stored_size(true, &cells[..at]).max(page::stored_size(true, &cells[at..]))
    };
    let fits = |at: usize| 0 < at && at < n && larger_half(at) <= page_size;
    let preferred = [
        append.then_some(n - 1),
        (ascending && !append).then_some(position + 1),
        (ascending && !append).then_some(position),
        Some(split_index(cells, true)),
    ];
    preferred
        .into_iter()
        .flatten()
        .find(|&at| fits(at))
        .or_else(|| {
            (1..n)
                .filter(|&at| fits(at))
                .min_by_key(|&at| larger_half(at))
        })
        .expect("a full leaf and one cell more split into two halves that fit")
}

/// Splits the full node `page_id` with `cell` added at `position`. For a root split the
/// content moves to two new children and `None` is returned; otherwise the node keeps the
/// left part and the separator key and new right page are returned for the parent.
///
/// An append — the cell goes after the last one of the level's last node (`path` leads to
/// it), as with ascending keys (sequential ids, row ids, timestamps) — keeps all the old
/// cells in the node and starts the new node with the new one, so loading in key order fills
/// pages completely instead of leaving every page half empty (PostgreSQL's rightmost-page
/// split does the same). A leaf split in an ascending run elsewhere in the tree — this insert
/// went into the slot after the leaf's last insert, as a statement inserting a block of
/// consecutive ids at a random place does — keeps the run's cells in the node and moves the
/// higher keys to the new one, so the run fills this node and then new ones completely
/// (PostgreSQL detects such localized ascending inserts too). A split at the middle would
/// leave every node of the run half empty: twice the pages to store and to checkpoint.
fn split(
    pager: &mut Pager,
    root: u64,
    page_id: u64,
    path: &Path,
    position: usize,
    cell: Vec<u8>,
) -> KvResult<Option<(Vec<u8>, u64)>> {
    pager.leaf_hints.forget_tree(root);
    let (leaf, len) = {
        let node = Node::new(pager.read(page_id)?);
        (node.is_leaf(), node.len())
    };
    let append = position == len && rightmost(pager, path)?;
    let ascending = leaf && pager.leaf_inserts.continues_run(page_id, position);
    if leaf && position == len && (append || ascending) && page_id != root {
        // Past the leaf's last key, appending to the tree (a hot account's newest index
        // entry) or continuing a run (a statement's ascending transfer ids): the split below
        // would keep the old cells here and move the new one alone (`leaf_split_index`), so
        // the full leaf stays as it is rather than being copied out and rebuilt unchanged.
        let separator = page::cell_key(true, &cell).to_vec();
        let right = pager.allocate(PageKind::Leaf)?;
        fill_node(pager, (right, true), 0, &[&cell])?;
        pager.leaf_inserts.record(right, 0);
        return Ok(Some((separator, right)));
    }
    let (leftmost, whole) = {
        let buffer = pager.read(page_id)?;
        (page::link(buffer), WholeCells::of(&Node::new(buffer)))
    };
    let mut cells = whole.cells();
    cells.insert(position, &cell);
    let at = if leaf {
        leaf_split_index(&cells, position, (append, ascending), pager.page_size())
    } else if append && cells.len() >= 3 {
        // An internal node promotes the cell at the split point: the new node keeps one.
        cells.len() - 2
    } else {
        split_index(&cells, leaf)
    };
    let kind = if leaf {
        PageKind::Leaf
    } else {
        PageKind::Internal
    };
    let (separator, right_leftmost, right_cells) = if leaf {
        let separator = page::cell_key(true, cells[at]).to_vec();
        (separator, 0, &cells[at..])
    } else {
        let promoted = cells[at];
        let separator = page::cell_key(false, promoted).to_vec();
        (separator, page::cell_child(promoted), &cells[at + 1..])
    };
    let left_cells = &cells[..at];
    let right = pager.allocate(kind)?;
    fill_node(pager, (right, leaf), right_leftmost, right_cells)?;
    let left = if page_id == root {
        pager.allocate(kind)?
    } else {
        page_id
    };
    fill_node(pager, (left, leaf), leftmost, left_cells)?;
    if leaf {
        if position < at {
            pager.leaf_inserts.record(left, position);
        } else {
            pager.leaf_inserts.record(right, position - at);
        }
    }
    if page_id != root {
        return Ok(Some((separator, right)));
    }
    let buffer = pager.write(root)?;
    page::init_node(buffer, PageKind::Internal);
    page::set_link(buffer, left);
    let mut root_cell = Vec::new();
    page::encode_internal_cell(&mut root_cell, &separator, right);
    NodeMut::new(buffer).rebuild(&[root_cell]);
    Ok(None)
}

fn fill_node<C: AsRef<[u8]>>(
    pager: &mut Pager,
    (page_id, leaf): (u64, bool),
    leftmost: u64,
    cells: &[C],
) -> KvResult<()> {
    assert!(
        page::stored_size(leaf, cells) <= pager.page_size(),
        "split half overflows a page"
    );
    let buffer = pager.write(page_id)?;
    page::set_link(buffer, leftmost);
    NodeMut::new(buffer).rebuild(cells);
    Ok(())
}

/// Deletes `key`; returns whether it existed. `old`, when given, receives the deleted value.
pub fn delete(
    pager: &mut Pager,
    root: u64,
    key: &[u8],
    path: &mut Path,
    mut old: Option<&mut Vec<u8>>,
) -> KvResult<bool> {
    let leaf = descend(pager, root, key, path)?;
    let node = Node::new(pager.read(leaf)?);
    let Ok(index) = node.search(key) else {
        return Ok(false);
    };
    let overflow = save_inline(node.value(index), old.as_deref_mut());
    release_overflow(pager, overflow, old)?;
    NodeMut::new(pager.write(leaf)?).remove_cell(index);
    rebalance(pager, root, leaf, path)?;
    Ok(true)
}

/// Merges `page_id` into a sibling while it is underfull, walking up the path.
fn rebalance(pager: &mut Pager, root: u64, mut page_id: u64, path: &mut Path) -> KvResult<()> {
    let underfull = pager.page_size() / 4;
    loop {
        if page_id == root {
            return collapse_root(pager, root);
        }
        if Node::new(pager.read(page_id)?).used_bytes() >= underfull {
            return Ok(());
        }
        let (parent, slot) = *path
            .last()
            .expect("a non-root node has a parent on the path");
        let parent_node = Node::new(pager.read(parent)?);
        let (left, right, separator_index) = if slot > 0 {
            (parent_node.child(slot - 1), page_id, slot - 1)
        } else if !parent_node.is_empty() {
            (page_id, parent_node.child(1), 0)
        } else {
            return Ok(());
        };
        pager.leaf_hints.forget_tree(root);
        if !merge(pager, parent, left, right, separator_index)? {
            return Ok(());
        }
        path.pop();
        page_id = parent;
    }
}

/// Moves all of `right` into `left` if it fits, frees `right` and drops the separator cell.
fn merge(
    pager: &mut Pager,
    parent: u64,
    left: u64,
    right: u64,
    separator_index: usize,
) -> KvResult<bool> {
    let separator_key = page::cell_key(
        false,
        Node::new(pager.read(parent)?).stored_cell(separator_index),
    )
    .to_vec();
    let (leaf, left_whole) = {
        let node = Node::new(pager.read(left)?);
        (node.is_leaf(), WholeCells::of(&node))
    };
    let (right_whole, right_leftmost) = {
        let buffer = pager.read(right)?;
        (WholeCells::of(&Node::new(buffer)), page::link(buffer))
    };
    let mut pulled_down = Vec::new();
    let mut cells = left_whole.cells();
    if !leaf {
        page::encode_internal_cell(&mut pulled_down, &separator_key, right_leftmost);
        cells.push(&pulled_down);
    }
    cells.extend(right_whole.cells());
    if page::stored_size(leaf, &cells) > pager.page_size() {
        return Ok(false);
    }
    NodeMut::new(pager.write(left)?).rebuild(&cells);
    pager.free(right)?;
    NodeMut::new(pager.write(parent)?).remove_cell(separator_index);
    Ok(true)
}

/// A root that is an internal node without cells takes over its only child's content.
fn collapse_root(pager: &mut Pager, root: u64) -> KvResult<()> {
    loop {
        let buffer = pager.read(root)?;
        let node = Node::new(buffer);
        if node.is_leaf() || !node.is_empty() {
            return Ok(());
        }
        let child = page::link(buffer);
        pager.leaf_hints.forget_tree(root);
        let image = pager.read(child)?.to_vec();
        pager.write(root)?.copy_from_slice(&image);
        pager.free(child)?;
    }
}

/// Frees every page of the tree except the root, and resets the root to an empty leaf.
pub fn clear(pager: &mut Pager, root: u64) -> KvResult<()> {
    pager.leaf_hints.forget_tree(root);
    free_subtree(pager, root, true)?;
    page::init_node(pager.write(root)?, PageKind::Leaf);
    Ok(())
}

/// Frees every page of the tree, root included.
pub fn destroy(pager: &mut Pager, root: u64) -> KvResult<()> {
    pager.leaf_hints.forget_tree(root);
    free_subtree(pager, root, false)
}

fn free_subtree(pager: &mut Pager, page_id: u64, keep: bool) -> KvResult<()> {
    let (children, overflow) = {
        let node = Node::new(pager.read(page_id)?);
        if node.is_leaf() {
            let overflow: Vec<u64> = (0..node.len())
                .filter_map(|index| match node.value(index) {
                    LeafValue::Overflow { first_page, .. } => Some(first_page),
                    LeafValue::Inline(_) => None,
                })
                .collect();
            (Vec::new(), overflow)
        } else {
            (
                (0..=node.len()).map(|slot| node.child(slot)).collect(),
                Vec::new(),
            )
        }
    };
    for first_page in overflow {
        pager.free_overflow(first_page)?;
    }
    for child in children {
        free_subtree(pager, child, false)?;
    }
    if !keep {
        pager.free(page_id)?;
    }
    Ok(())
}
