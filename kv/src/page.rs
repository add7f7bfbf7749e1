//! The page format shared by every page kind, and slotted-node operations on B+tree pages.
//!
//! ```text
//! offset size  field
//!  0     4     crc32c of (page id as u64 LE ++ bytes 4..page_size); set only on disk images
//!  4     1     kind: 0 free, 1 superblock, 2 leaf, 3 internal, 4 overflow
//!  5     1     P: length of a prefix shared by every key of the node (leaf, internal)
//!  6     2     cell count                      (leaf, internal)
//!  8     2     start of the cell content area  (leaf, internal; grows down from the end)
//! 10     2     fragmented bytes in the content area (leaf, internal)
//! 12     1     flags: bit 0 = the prefix is cut (leaf)
//! 12     4     payload length                  (overflow)
//! 16     8     link: leftmost child (internal), next page (overflow, free)
//! 24     C     the cut prefix: the P shared key bytes (a cut leaf; C = P, else 0)
//! 24+C   4*n   slot array, in key order: cell offset u16 | key hint u16 (big-endian)
//! ...          free space
//! ...          cell content
//! ```
//!
//! Leaf cell: `klen u16 | vlen u32 | key | value`. When bit 31 of `vlen` is set the value lives
//! in a chain of overflow pages: the cell holds the first page id (u64) and `vlen` without the
//! bit is the value's full length.
//!
//! Internal cell: `klen u16 | child u64 | key`. Keys `>= key` of cell i live under its child;
//! keys below the first cell's key live under the leftmost child.
//!
//! The key hint is the two key bytes after the node's shared prefix P (zero-padded). A strict
//! hint order implies the same key order, so a search binary-searches the hints in the slot
//! array (one or two cache lines) and compares whole keys only among equal hints: about two
//! cells touched instead of one per probe. P only ever shrinks on insert (recomputing the
//! hints) and is recomputed from the first and last keys when a node is rebuilt.
//!
//! A leaf rebuilt by this version cuts its prefix: the P shared bytes are stored once, after
//! the header, and every cell holds only the rest of its key (`klen` counts the rest). A
//! history index's entries in one leaf mostly share their account and the high bytes of
//! their time, so about half of every key is stored once instead of in every cell. An insert
//! whose key does not share the whole prefix rebuilds the leaf with a shorter one (such a key
//! can only go before the first cell or after the last). Leaves written before (flag clear)
//! keep whole keys until they are next rebuilt; internal nodes always keep whole keys.
//! Callers hand whole cells in and take whole keys out (`WholeCells`, `key_to_vec`,
//! `key_eq`); `stored_key` and `stored_cell` are the bytes as they lie in the page.
//!
//! Including the page id in the checksum catches a page written to the wrong place.

pub const HEADER_SIZE: usize = 24;
pub const SLOT_SIZE: usize = 4;
/// Runs of equal hints at least this long are searched from their end (`search_keys`).
const LONG_RUN: usize = 4;
/// The longest shared prefix a node records.
const PREFIX_MAX: usize = 255;
/// Byte 12 of a leaf or internal node: its flags.
const FLAGS_AT: usize = 12;
/// The node's shared prefix is stored once, after the header, and cut from its keys.
const PREFIX_CUT: u8 = 1;
pub const OVERFLOW_BIT: u32 = 1 << 31;
pub const LEAF_CELL_HEADER: usize = 6;
pub const INTERNAL_CELL_HEADER: usize = 10;

/// Page kinds as stored in byte 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    Free = 0,
    Superblock = 1,
    Leaf = 2,
    Internal = 3,
    Overflow = 4,
}

impl PageKind {
    pub fn from_byte(byte: u8) -> Option<PageKind> {
        match byte {
            0 => Some(PageKind::Free),
            1 => Some(PageKind::Superblock),
            2 => Some(PageKind::Leaf),
            3 => Some(PageKind::Internal),
            4 => Some(PageKind::Overflow),
            _ => None,
        }
    }
}

pub fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}

pub fn write_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

pub fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

pub fn write_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub fn read_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

pub fn write_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Checksum of a page image as it is stored on disk.
pub fn page_checksum(page_id: u64, page: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&page_id.to_le_bytes());
    crc32c::crc32c_append(seed, &page[4..])
}

/// Stamps the checksum into a disk image of a page.
pub fn seal(page_id: u64, page: &mut [u8]) {
    let crc = page_checksum(page_id, page);
    write_u32(page, 0, crc);
}

/// True when the stored checksum matches the page id and content.
pub fn verify(page_id: u64, page: &[u8]) -> bool {
    read_u32(page, 0) == page_checksum(page_id, page)
}

pub fn kind(page: &[u8]) -> u8 {
    page[4]
}

pub fn link(page: &[u8]) -> u64 {
    read_u64(page, 16)
}

pub fn set_link(page: &mut [u8], value: u64) {
    write_u64(page, 16, value);
}

/// Resets a page to an empty node of the given kind.
pub fn init_node(page: &mut [u8], kind: PageKind) {
    page.fill(0);
    page[4] = kind as u8;
    write_u16(page, 8, content_end(page));
}

/// The content area ends at the page end, which must fit a u16 offset.
fn content_end(page: &[u8]) -> u16 {
    assert!(
        page.len() <= 32768,
        "page sizes above 32 KiB do not fit u16 offsets"
    );
    page.len() as u16
}

/// Whether node `page` cuts its shared prefix from its keys.
fn cuts_prefix(page: &[u8]) -> bool {
    page[FLAGS_AT] & PREFIX_CUT != 0
}

/// Bytes cut from the front of every key of node `page`: its shared prefix when the node
/// cuts it, else none.
fn cut_len(page: &[u8]) -> usize {
    if cuts_prefix(page) {
        page[5] as usize
    } else {
        0
    }
}

/// Where node `page`'s slot array starts: after the header and the cut prefix.
fn slots_start(page: &[u8]) -> usize {
    HEADER_SIZE + cut_len(page)
}

/// Where node `page`'s slot array ends (clipped to the page).
fn slots_end(page: &[u8]) -> usize {
    (slots_start(page) + read_u16(page, 6) as usize * SLOT_SIZE).min(page.len())
}

/// The hint of `key` in a node whose keys share `prefix` bytes.
pub fn hint_of(key: &[u8], prefix: usize) -> u16 {
    let first = key.get(prefix).copied().unwrap_or(0);
    let second = key.get(prefix + 1).copied().unwrap_or(0);
    u16::from_be_bytes([first, second])
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x == y)
        .count()
        .min(PREFIX_MAX)
}

/// Bytes from the start of a node that a search reads first whatever its length: the header
/// and the first slots (a leaf of 16-byte keys and 100-byte values has ~35 slots: bytes
/// 24..164).
const SEARCH_HEAD_BYTES: usize = 256;

/// Asks the CPU to start loading a node page's header and whole slot array at once. A binary
/// search otherwise reads those cache lines one after another, each probe waiting for the
/// last; for a page not in cache that is a chain of memory round trips. The head is asked
/// for before the slot count is known (it is in the header's line); the rest of the array
/// once it is.
pub fn prefetch_search_head(page: &[u8]) {
    let head = SEARCH_HEAD_BYTES.min(page.len());
    let first = 64.min(head);
    prefetch_bytes(page[first..].as_ptr(), head - first);
    prefetch_bytes(page[head..].as_ptr(), slots_end(page).saturating_sub(head));
}

/// Bytes a look-ahead asks for at the start of a node: the header and the slots of a node of
/// ~120 cells.
pub const LOOK_AHEAD_HEAD_BYTES: usize = 512;

/// Asks the CPU to start loading the `bytes` bytes at `start` (a cache line at a time) without
/// reading them, so nothing waits for them to arrive. Callers pass a range inside one page.
pub fn prefetch_bytes(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..bytes).step_by(64) {
        // SAFETY: a prefetch is a hint with no architectural effect.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(offset).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

/// Prefetches the cache lines holding `buf[start..start + len]`, clipped to `buf`.
fn prefetch_lines(buf: &[u8], start: usize, len: usize) {
    let end = (start + len).min(buf.len());
    if start >= end {
        return;
    }
    let first = buf[start..].as_ptr();
    let into_line = first as usize & 63;
    prefetch_bytes(first.wrapping_sub(into_line), end - start + into_line);
}

/// Read access to a leaf or internal node.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    pub buf: &'a [u8],
}

impl<'a> Node<'a> {
    pub fn new(buf: &'a [u8]) -> Node<'a> {
        debug_assert!(matches!(buf[4], 2 | 3), "not a node page: kind {}", buf[4]);
        Node { buf }
    }

    /// A node view of `buf` when it is a leaf or internal page.
    pub fn new_checked(buf: &'a [u8]) -> Option<Node<'a>> {
        let kind = PageKind::from_byte(buf[4]);
        matches!(kind, Some(PageKind::Leaf | PageKind::Internal)).then_some(Node { buf })
    }

    pub fn is_leaf(&self) -> bool {
        self.buf[4] == PageKind::Leaf as u8
    }

    pub fn len(&self) -> usize {
        read_u16(self.buf, 6) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn cell_start(&self) -> usize {
        read_u16(self.buf, 8) as usize
    }

    fn frag(&self) -> usize {
        read_u16(self.buf, 10) as usize
    }

    /// Length of the prefix every key of the node shares.
    pub fn prefix_len(&self) -> usize {
        self.buf[5] as usize
    }

    /// The prefix cut from every stored key (empty unless the node cuts it).
    pub fn cut_prefix(&self) -> &'a [u8] {
        &self.buf[HEADER_SIZE..slots_start(self.buf)]
    }

    /// The key hint stored in slot `index`.
    pub fn hint(&self, index: usize) -> u16 {
        let at = slots_start(self.buf) + index * SLOT_SIZE + 2;
        u16::from_be_bytes([self.buf[at], self.buf[at + 1]])
    }

    pub fn cell_offset(&self, index: usize) -> usize {
        debug_assert!(index < self.len());
        read_u16(self.buf, slots_start(self.buf) + index * SLOT_SIZE) as usize
    }

    /// The bytes of cell `index` as stored: without the cut prefix in a cut leaf.
    pub fn stored_cell(&self, index: usize) -> &'a [u8] {
        let offset = self.cell_offset(index);
        let len = cell_len(self.is_leaf(), &self.buf[offset..]);
        &self.buf[offset..offset + len]
    }

    /// Appends cell `index` with its whole key, as `encode_leaf_cell`/`encode_internal_cell`
    /// make it, to `out`.
    fn push_whole_cell(&self, index: usize, out: &mut Vec<u8>) {
        let stored = self.stored_cell(index);
        let cut = self.cut_prefix();
        if cut.is_empty() {
            out.extend_from_slice(stored);
            return;
        }
        // Only leaves cut their prefix.
        let klen = read_u16(stored, 0) as usize + cut.len();
        out.extend_from_slice(&(klen as u16).to_le_bytes());
        out.extend_from_slice(&stored[2..LEAF_CELL_HEADER]);
        out.extend_from_slice(cut);
        out.extend_from_slice(&stored[LEAF_CELL_HEADER..]);
    }

    /// The whole key of cell `index`.
    pub fn key_to_vec(&self, index: usize) -> Vec<u8> {
        [self.cut_prefix(), self.stored_key(index)].concat()
    }

    /// Whether cell `index` holds `key`.
    pub fn key_eq(&self, index: usize, key: &[u8]) -> bool {
        let cut = self.cut_prefix();
        key.len() >= cut.len()
            && key[..cut.len()] == *cut
            && key[cut.len()..] == *self.stored_key(index)
    }

    /// The key of cell `index` as stored: without the cut prefix in a cut leaf.
    pub fn stored_key(&self, index: usize) -> &'a [u8] {
        let offset = self.cell_offset(index);
        let klen = read_u16(self.buf, offset) as usize;
        let header = if self.is_leaf() {
            LEAF_CELL_HEADER
        } else {
            INTERNAL_CELL_HEADER
        };
        &self.buf[offset + header..offset + header + klen]
    }

    /// `Ok(i)` if cell i holds `key`, else `Err(i)` where it would be inserted.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let len = self.len();
        if len == 0 {
            return Err(0);
        }
        let prefix = self.prefix_len();
        let cut = self.cut_prefix();
        if !cut.is_empty() {
            // Every key here starts with the cut prefix: a key that does not sorts before or
            // after all of them.
            match key[..cut.len().min(key.len())].cmp(cut) {
                std::cmp::Ordering::Less => return Err(0),
                std::cmp::Ordering::Greater => return Err(len),
                std::cmp::Ordering::Equal if key.len() < cut.len() => return Err(0),
                std::cmp::Ordering::Equal => {}
            }
        }
        // Hints narrow the search to the slots whose hint equals the key's. They order keys
        // only among keys with the node's prefix; a key found by whole-key comparison is
        // found wherever the hints led, so the prefix is checked only for a key not found
        // (sparing the cache line of the first cell on a hit).
        let (low, end) = self.hint_run(key);
        let position = self.search_keys(&key[cut.len()..], low, end);
        if position.is_err() && prefix > 0 && cut.is_empty() {
            let shared = &self.stored_key(0)[..prefix];
            match key[..prefix.min(key.len())].cmp(shared) {
                std::cmp::Ordering::Less => return Err(0),
                std::cmp::Ordering::Greater => return Err(len),
                std::cmp::Ordering::Equal if key.len() < prefix => return Err(0),
                std::cmp::Ordering::Equal => {}
            }
        }
        position
    }

    /// The slots `low..end` whose hint equals `key`'s: the cells a search compares whole keys
    /// of (hints order keys only among keys with the node's prefix; `search` checks that).
    fn hint_run(&self, key: &[u8]) -> (usize, usize) {
        // The slot array once, not its start worked out again for every probe.
        let start = slots_start(self.buf);
        let len = (slots_end(self.buf).max(start) - start) / SLOT_SIZE;
        let slots = &self.buf[start..start + len * SLOT_SIZE];
        let hint_at = |index: usize| {
            let at = index * SLOT_SIZE + 2;
            u16::from_be_bytes([slots[at], slots[at + 1]])
        };
        let hint = hint_of(key, self.prefix_len());
        let (mut low, mut high) = (0usize, len);
        while low < high {
            let mid = (low + high) / 2;
            if hint_at(mid) < hint {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let mut end = low;
        let mut step = len - low;
        while step > 0 {
            // Galloping upper bound of the equal-hint run, cheap when the run is short.
            let probe = end + step / 2;
            if probe < len && hint_at(probe) == hint {
                end = probe + 1;
                step -= step / 2 + 1;
            } else {
                step /= 2;
            }
        }
        (low, end)
    }

    /// Asks the CPU for the cells a `search` for `key` reads first — the last cell of its
    /// hint run and the first midpoints of the binary search in it — and for the free space
    /// an insert writes its cell into, without waiting for any of them. It reads the header
    /// and slots, which the caller asked for a while before (`btree::look_ahead`). A handful
    /// of cache lines instead of the whole page: prefetching all 64 of a leaf's lines kept
    /// the memory system busy with lines no search reads.
    pub fn prefetch_search_cells(&self, key: &[u8]) {
        let len = self.len();
        let cut = self.cut_prefix();
        if len == 0 || key.len() < cut.len() || key[..cut.len()] != *cut {
            return;
        }
        let (low, mut high) = self.hint_run(key);
        if high - low >= LONG_RUN {
            self.prefetch_cell_key(high - 1);
            high -= 1;
        }
        if low < high {
            let mid = (low + high) / 2;
            self.prefetch_cell_key(mid);
            if mid > low {
                self.prefetch_cell_key((low + mid) / 2);
            }
            if mid + 1 < high {
                self.prefetch_cell_key((mid + 1 + high) / 2);
            }
        }
        let free_end = self.cell_start();
        if free_end >= 64 {
            prefetch_lines(self.buf, free_end - 64, 64);
        }
    }

    /// Prefetches the node's slot array from byte `from` of the page on (the bytes before
    /// are asked for already).
    pub fn prefetch_slots_from(&self, from: usize) {
        let end = slots_end(self.buf);
        if end > from {
            prefetch_lines(self.buf, from, end - from);
        }
    }

    /// Prefetches the cache lines of cell `index`'s header and first key bytes.
    fn prefetch_cell_key(&self, index: usize) {
        prefetch_lines(self.buf, self.cell_offset(index), 48);
    }

    /// Binary search by stored keys (`key` is without the cut prefix) among cells
    /// `low..high`. A long run of equal hints is most often keys sharing a leading column (an
    /// index's entries for one account, say), and a new key most often goes after the last of
    /// them (the account's newest entry): the run's last key is compared first, which makes
    /// that case one comparison.
    fn search_keys(&self, key: &[u8], mut low: usize, mut high: usize) -> Result<usize, usize> {
        if high - low >= LONG_RUN {
            match self.stored_key(high - 1).cmp(key) {
                std::cmp::Ordering::Less => return Err(high),
                std::cmp::Ordering::Equal => return Ok(high - 1),
                std::cmp::Ordering::Greater => high -= 1,
            }
        }
        while low < high {
            let mid = (low + high) / 2;
            match self.stored_key(mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// Internal nodes: the child slot to descend into for `key`: 0 is the leftmost child,
    /// i + 1 is the child of cell i.
    pub fn child_slot(&self, key: &[u8]) -> usize {
        match self.search(key) {
            Ok(index) => index + 1,
            Err(index) => index,
        }
    }

    /// Internal nodes: the page id in child slot `slot` (see `child_slot`).
    pub fn child(&self, slot: usize) -> u64 {
        debug_assert!(!self.is_leaf());
        if slot == 0 {
            link(self.buf)
        } else {
            read_u64(self.buf, self.cell_offset(slot - 1) + 2)
        }
    }

    /// Leaf cells: the value as stored (inline bytes, or an overflow reference).
    pub fn value(&self, index: usize) -> LeafValue<'a> {
        let offset = self.cell_offset(index);
        leaf_value(&self.buf[offset..])
    }

    pub fn free_space(&self) -> usize {
        self.cell_start() - (slots_start(self.buf) + self.len() * SLOT_SIZE)
    }

    /// Bytes a rebuilt node would use (header, slots and live cells).
    pub fn used_bytes(&self) -> usize {
        self.buf.len() - self.free_space() - self.frag()
    }
}

/// A node's cells with their whole keys, copied end to end into one buffer: what a split,
/// a merge or a rebuild takes them from (one allocation, not one per cell, and nothing
/// borrowed from the page they rewrite).
pub struct WholeCells {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl WholeCells {
    pub fn of(node: &Node<'_>) -> WholeCells {
        let mut cells = WholeCells {
            bytes: Vec::with_capacity(node.buf.len() * 2),
            ends: Vec::with_capacity(node.len()),
        };
        for index in 0..node.len() {
            node.push_whole_cell(index, &mut cells.bytes);
            cells.ends.push(cells.bytes.len());
        }
        cells
    }

    /// The cells, in order.
    pub fn cells(&self) -> Vec<&[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.bytes[start..end])
            .collect()
    }
}

/// A leaf value as stored in its cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow { first_page: u64, len: u32 },
}

fn leaf_value(cell: &[u8]) -> LeafValue<'_> {
    let klen = read_u16(cell, 0) as usize;
    let vlen = read_u32(cell, 2);
    let start = LEAF_CELL_HEADER + klen;
    if vlen & OVERFLOW_BIT != 0 {
        LeafValue::Overflow {
            first_page: read_u64(cell, start),
            len: vlen & !OVERFLOW_BIT,
        }
    } else {
        LeafValue::Inline(&cell[start..start + vlen as usize])
    }
}

/// Length of the cell starting at `cell[0]`.
pub fn cell_len(leaf: bool, cell: &[u8]) -> usize {
    let klen = read_u16(cell, 0) as usize;
    if leaf {
        let vlen = read_u32(cell, 2);
        let payload = if vlen & OVERFLOW_BIT != 0 {
            8
        } else {
            vlen as usize
        };
        LEAF_CELL_HEADER + klen + payload
    } else {
        INTERNAL_CELL_HEADER + klen
    }
}

/// The bytes a node rebuilt from `cells` (whole cells, in order) uses: header, cut prefix,
/// slots and stored cells. It fits a page when this is at most the page size.
pub fn stored_size<C: AsRef<[u8]>>(leaf: bool, cells: &[C]) -> usize {
    let cut = if leaf { shared_prefix(true, cells) } else { 0 };
    let whole_bytes = cells.iter().map(|cell| cell.as_ref().len()).sum();
    rebuilt_size(cut, whole_bytes, cells.len())
}

/// The prefix that whole `cells` (in order) all share: that of the first and last keys.
fn shared_prefix<C: AsRef<[u8]>>(leaf: bool, cells: &[C]) -> usize {
    match (cells.first(), cells.last()) {
        (Some(first), Some(last)) => common_prefix(
            cell_key(leaf, first.as_ref()),
            cell_key(leaf, last.as_ref()),
        ),
        _ => 0,
    }
}

/// The bytes a node of `count` cells, `whole_bytes` long with their whole keys, uses when it
/// cuts `cut` bytes from every key.
fn rebuilt_size(cut: usize, whole_bytes: usize, count: usize) -> usize {
    HEADER_SIZE + cut + whole_bytes + count * SLOT_SIZE - count * cut
}

/// Writes whole cell `cell` into `stored` as a node cutting `cut` prefix bytes stores it:
/// `klen` counts the key's rest; a leaf's `vlen`, the key's rest and the value follow as
/// they are (only leaves cut, so `cut` is 0 for an internal cell).
fn store_cell(stored: &mut [u8], cell: &[u8], cut: usize) {
    if cut == 0 {
        stored.copy_from_slice(cell);
        return;
    }
    let klen = read_u16(cell, 0) as usize - cut;
    stored[..2].copy_from_slice(&(klen as u16).to_le_bytes());
    stored[2..LEAF_CELL_HEADER].copy_from_slice(&cell[2..LEAF_CELL_HEADER]);
    stored[LEAF_CELL_HEADER..].copy_from_slice(&cell[LEAF_CELL_HEADER + cut..]);
}

/// Encodes a leaf cell into `out`.
pub fn encode_leaf_cell(out: &mut Vec<u8>, key: &[u8], value: LeafValue<'_>) {
    out.clear();
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    match value {
        LeafValue::Inline(bytes) => {
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(bytes);
        }
        LeafValue::Overflow { first_page, len } => {
            out.extend_from_slice(&(len | OVERFLOW_BIT).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(&first_page.to_le_bytes());
        }
    }
}

/// Encodes an internal cell into `out`.
pub fn encode_internal_cell(out: &mut Vec<u8>, key: &[u8], child: u64) {
    out.clear();
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&child.to_le_bytes());
    out.extend_from_slice(key);
}

/// The key inside an encoded cell.
pub fn cell_key(leaf: bool, cell: &[u8]) -> &[u8] {
    let klen = read_u16(cell, 0) as usize;
    let header = if leaf {
        LEAF_CELL_HEADER
    } else {
        INTERNAL_CELL_HEADER
    };
    &cell[header..header + klen]
}

/// The child pointer inside an encoded internal cell.
pub fn cell_child(cell: &[u8]) -> u64 {
    read_u64(cell, 2)
}

/// Write access to a leaf or internal node.
pub struct NodeMut<'a> {
    pub buf: &'a mut [u8],
}

impl<'a> NodeMut<'a> {
    pub fn new(buf: &'a mut [u8]) -> NodeMut<'a> {
        debug_assert!(matches!(buf[4], 2 | 3), "not a node page: kind {}", buf[4]);
        NodeMut { buf }
    }

    pub fn view(&self) -> Node<'_> {
        Node { buf: self.buf }
    }

    fn set_len(&mut self, len: usize) {
        write_u16(self.buf, 6, len as u16);
    }

    fn set_cell_start(&mut self, start: usize) {
        write_u16(self.buf, 8, start as u16);
    }

    fn set_frag(&mut self, frag: usize) {
        write_u16(self.buf, 10, frag as u16);
    }

    fn set_prefix_len(&mut self, prefix: usize) {
        self.buf[5] = prefix as u8;
    }

    fn write_slot(&mut self, index: usize, offset: usize, hint: u16) {
        let at = slots_start(self.buf) + index * SLOT_SIZE;
        write_u16(self.buf, at, offset as u16);
        self.buf[at + 2..at + 4].copy_from_slice(&hint.to_be_bytes());
    }

    /// Shrinks the shared prefix of an internal node (which never cuts it) to `prefix` and
    /// rewrites every hint.
    fn shrink_prefix(&mut self, prefix: usize) {
        debug_assert!(self.view().cut_prefix().is_empty());
        self.set_prefix_len(prefix);
        for index in 0..self.view().len() {
            let hint = hint_of(self.view().stored_key(index), prefix);
            let offset = self.view().cell_offset(index);
            self.write_slot(index, offset, hint);
        }
    }

    /// Inserts an encoded cell (with its whole key) at slot `index`; false if it does not fit
    /// even after compaction.
    pub fn insert_cell(&mut self, index: usize, cell: &[u8]) -> bool {
        let view = self.view();
        if view.is_leaf() {
            return self.insert_cut(index, cell);
        }
        let needed = cell.len() + SLOT_SIZE;
        if view.free_space() < needed {
            if view.free_space() + view.frag() < needed {
                return false;
            }
            self.compact();
        }
        let view = self.view();
        let len = view.len();
        assert!(index <= len, "insert position {index} past {len} cells");
        let key = cell_key(false, cell);
        let prefix = if len == 0 {
            key.len().min(PREFIX_MAX)
        } else {
            view.prefix_len()
                .min(common_prefix(key, view.stored_key(0)))
        };
        if len > 0 && prefix < view.prefix_len() {
            self.shrink_prefix(prefix);
        }
        self.set_prefix_len(prefix);
        let start = self.view().cell_start() - cell.len();
        self.buf[start..start + cell.len()].copy_from_slice(cell);
        self.open_slot(index, len);
        self.write_slot(index, start, hint_of(key, prefix));
        self.set_len(len + 1);
        self.set_cell_start(start);
        true
    }

    /// Moves slots `index..len` one place up.
    fn open_slot(&mut self, index: usize, len: usize) {
        let slots = slots_start(self.buf) + index * SLOT_SIZE;
        let slots_end = slots_start(self.buf) + len * SLOT_SIZE;
        self.buf.copy_within(slots..slots_end, slots + SLOT_SIZE);
    }

    /// Moves slots `index + 1..len` one place down, over slot `index`.
    fn close_slot(&mut self, index: usize, len: usize) {
        let slots = slots_start(self.buf) + index * SLOT_SIZE;
        let slots_end = slots_start(self.buf) + len * SLOT_SIZE;
        self.buf.copy_within(slots + SLOT_SIZE..slots_end, slots);
    }

    /// `insert_cell` for a leaf: in a leaf that cuts its prefix, a key sharing the whole
    /// prefix is stored without it; a key sharing less (it goes before the first cell or after
    /// the last), a cell that fits only after compaction, and any insert into a leaf that
    /// does not cut its prefix yet (empty, or written by format version 2) rebuild the leaf,
    /// cutting the prefix all its keys share.
    fn insert_cut(&mut self, index: usize, cell: &[u8]) -> bool {
        let view = self.view();
        let len = view.len();
        assert!(index <= len, "insert position {index} past {len} cells");
        let key = cell_key(true, cell);
        let cut = view.cut_prefix();
        let cuts = cuts_prefix(view.buf);
        let stored_len = cell.len() - cut.len().min(cell.len());
        if cuts && len > 0 && key.starts_with(cut) && view.free_space() >= stored_len + SLOT_SIZE {
            let cut = cut.len();
            let start = view.cell_start() - stored_len;
            store_cell(&mut self.buf[start..start + stored_len], cell, cut);
            self.open_slot(index, len);
            self.write_slot(index, start, hint_of(key, cut));
            self.set_len(len + 1);
            self.set_cell_start(start);
            return true;
        }
        // Rebuilt, the leaf cuts the prefix of its first and last keys: whether it fits
        // follows from the sizes, before any cell is copied.
        let first = if index == 0 {
            key.to_vec()
        } else {
            view.key_to_vec(0)
        };
        let last = if index == len {
            key.to_vec()
        } else {
            view.key_to_vec(len - 1)
        };
        let whole_now = view.buf.len() - view.cell_start() - view.frag() + len * cut.len();
        let after = rebuilt_size(
            common_prefix(&first, &last),
            whole_now + cell.len(),
            len + 1,
        );
        if after > view.buf.len() {
            return false;
        }
        let whole = WholeCells::of(&view);
        let mut cells = whole.cells();
        cells.insert(index, cell);
        self.rebuild(&cells);
        true
    }

    /// Removes cell `index`; its bytes become fragmentation until the next compaction.
    pub fn remove_cell(&mut self, index: usize) {
        let view = self.view();
        let len = view.len();
        assert!(index < len, "remove position {index} past {len} cells");
        let cell_bytes = view.stored_cell(index).len();
        let frag = view.frag() + cell_bytes;
        self.close_slot(index, len);
        self.set_len(len - 1);
        self.set_frag(frag);
    }

    /// Overwrites the inline value of leaf cell `index` when the new value has the same
    /// length: the in-place update of the hot path. Returns false when lengths differ.
    pub fn overwrite_value_in_place(&mut self, index: usize, value: &[u8]) -> bool {
        let offset = self.view().cell_offset(index);
        let klen = read_u16(self.buf, offset) as usize;
        let vlen = read_u32(self.buf, offset + 2);
        if vlen & OVERFLOW_BIT != 0 || vlen as usize != value.len() {
            return false;
        }
        let start = offset + LEAF_CELL_HEADER + klen;
        self.buf[start..start + value.len()].copy_from_slice(value);
        true
    }

    /// Packs live cells at the end of the page, removing fragmentation.
    pub fn compact(&mut self) {
        let whole = WholeCells::of(&self.view());
        self.rebuild(&whole.cells());
    }

    /// Replaces every cell with `cells` (whole cells, in order), keeping kind and link. A
    /// leaf cuts its prefix from then on. The cells must fit (`stored_size`).
    pub fn rebuild<C: AsRef<[u8]>>(&mut self, cells: &[C]) {
        let kind = self.buf[4];
        let link_value = link(self.buf);
        self.buf[6..].fill(0);
        set_link(self.buf, link_value);
        self.buf[4] = kind;
        let leaf = kind == PageKind::Leaf as u8;
        let prefix = shared_prefix(leaf, cells);
        self.set_prefix_len(prefix);
        let cut = if leaf { prefix } else { 0 };
        if leaf {
            self.buf[FLAGS_AT] = PREFIX_CUT;
            if let Some(first) = cells.first() {
                let shared = &cell_key(true, first.as_ref())[..cut];
                self.buf[HEADER_SIZE..HEADER_SIZE + cut].copy_from_slice(shared);
            }
        }
        let mut start = self.buf.len();
        for (index, cell) in cells.iter().enumerate() {
            let cell = cell.as_ref();
            let key = cell_key(leaf, cell);
            let stored_len = cell.len() - cut;
            start -= stored_len;
            assert!(
                start >= HEADER_SIZE + cut + (index + 1) * SLOT_SIZE,
                "cells overflow the page during rebuild"
            );
            store_cell(&mut self.buf[start..start + stored_len], cell, cut);
            self.write_slot(index, start, hint_of(key, prefix));
        }
        self.set_len(cells.len());
        self.set_cell_start(start);
        self.set_frag(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_binds_the_page_id() {
        let mut page = vec![0u8; 4096];
        init_node(&mut page, PageKind::Leaf);
        seal(7, &mut page);
        assert!(verify(7, &page));
        assert!(
            !verify(8, &page),
            "a page read at the wrong id must not verify"
        );
        page[100] ^= 1;
        assert!(!verify(7, &page), "a flipped bit must not verify");
    }

    #[test]
    fn cells_stay_sorted_through_insert_remove_and_compaction() {
        let mut page = vec![0u8; 512];
        init_node(&mut page, PageKind::Leaf);
        let mut cell = Vec::new();
        let mut node = NodeMut::new(&mut page);
        let mut inserted = 0;
        for i in (0..200u16).rev() {
            let key = i.to_be_bytes();
            encode_leaf_cell(&mut cell, &key, LeafValue::Inline(b"value"));
            let position = node.view().search(&key).unwrap_err();
            if !node.insert_cell(position, &cell) {
                break;
            }
            inserted += 1;
        }
        assert!(
            inserted > 20,
            "a 512-byte page holds more than 20 small cells"
        );
        assert_eq!(node.view().len(), inserted);
        for i in 0..node.view().len() - 1 {
            assert!(node.view().key_to_vec(i) < node.view().key_to_vec(i + 1));
        }
        let free_before = node.view().free_space();
        node.remove_cell(0);
        assert_eq!(node.view().free_space(), free_before + SLOT_SIZE);
        node.compact();
        // (The keys share their first byte, which the leaf stores once.)
        assert_eq!(node.view().cut_prefix(), [0]);
        assert_eq!(
            node.view().free_space(),
            free_before + SLOT_SIZE + cell.len() - 1
        );
        assert!(node.overwrite_value_in_place(0, b"VALUE"));
        assert_eq!(node.view().value(0), LeafValue::Inline(b"VALUE"));
        assert!(!node.overwrite_value_in_place(0, b"longer value"));
    }

    /// Keys over a small alphabet with a long common start, so nodes get long shared
    /// prefixes, many equal hints, and probes that stop inside, before and after the prefix.
    fn prefixed_key() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        (0usize..4, proptest::collection::vec(0u8..3, 0..5)).prop_map(|(shared, tail)| {
            let mut key = b"acct\0\0\0".to_vec();
            key.truncate(3 + shared);
            key.extend(tail);
            key
        })
    }

    /// Keys with long shared starts of different lengths, so leaves cut long prefixes, and
    /// inserts before the first cell or after the last cut them shorter.
    fn long_prefixed_key() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        (0usize..4, 0u8..3, proptest::collection::vec(0u8..3, 0..4)).prop_map(
            |(stem, first, tail)| {
                let mut key = vec![b'p'; stem * 40];
                key.push(first);
                key.extend(tail);
                key
            },
        )
    }

    fn leaf_cell(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut cell = Vec::new();
        encode_leaf_cell(&mut cell, key, LeafValue::Inline(value));
        cell
    }

    /// A leaf as versions before cut prefixes wrote it: whole keys, flag clear.
    fn uncut_leaf(page: &mut [u8], cells: &[Vec<u8>]) {
        init_node(page, PageKind::Leaf);
        let prefix = shared_prefix(true, cells);
        page[5] = prefix as u8;
        let mut start = page.len();
        for (index, cell) in cells.iter().enumerate() {
            start -= cell.len();
            page[start..start + cell.len()].copy_from_slice(cell);
            let at = HEADER_SIZE + index * SLOT_SIZE;
            write_u16(page, at, start as u16);
            let hint = hint_of(cell_key(true, cell), prefix);
            page[at + 2..at + 4].copy_from_slice(&hint.to_be_bytes());
        }
        write_u16(page, 6, cells.len() as u16);
        write_u16(page, 8, start as u16);
    }

    #[derive(Clone, Debug)]
    enum LeafOp {
        Insert(Vec<u8>, usize),
        Remove(usize),
        Compact,
    }

    fn leaf_op() -> impl proptest::strategy::Strategy<Value = LeafOp> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (long_prefixed_key(), 0usize..40).prop_map(|(k, n)| LeafOp::Insert(k, n)),
            2 => any::<usize>().prop_map(LeafOp::Remove),
            1 => Just(LeafOp::Compact),
        ]
    }

    proptest::proptest! {
        #[test]
        fn search_agrees_with_a_sorted_list(
            keys in proptest::collection::btree_set(prefixed_key(), 1..40),
            probes in proptest::collection::vec(prefixed_key(), 1..40),
            internal: bool,
        ) {
            let kind = if internal { PageKind::Internal } else { PageKind::Leaf };
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let cells: Vec<Vec<u8>> = keys
                .iter()
                .map(|key| {
                    let mut cell = Vec::new();
                    if internal {
                        encode_internal_cell(&mut cell, key, 9);
                    } else {
                        encode_leaf_cell(&mut cell, key, LeafValue::Inline(b"v"));
                    }
                    cell
                })
                .collect();
            let mut page = vec![0u8; 4096];
            init_node(&mut page, kind);
            NodeMut::new(&mut page).rebuild(&cells);
            let node = Node::new(&page);
            for probe in probes.iter().chain(&keys) {
                let expected = keys.binary_search(probe);
                proptest::prop_assert_eq!(node.search(probe), expected, "probe {:?}", probe);
                // The look-ahead's prefetches read the same slots and cells: any node and
                // key, within the page.
                node.prefetch_search_cells(probe);
            }
            node.prefetch_slots_from(0);
        }

        /// Inserts, removes and compactions on one leaf, written whole (as before cut
        /// prefixes) or cut, against a sorted map: the same keys and values in the same
        /// order, every key found where it is, and an insert refused only when the cells
        /// would not fit however they were cut.
        #[test]
        fn a_leaf_agrees_with_a_sorted_map(
            initial in proptest::collection::btree_set(long_prefixed_key(), 0..8),
            ops in proptest::collection::vec(leaf_op(), 1..120),
            uncut: bool,
        ) {
            let mut model: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
                initial.into_iter().map(|key| (key, b"v".to_vec())).collect();
            let cells: Vec<Vec<u8>> = model.iter().map(|(k, v)| leaf_cell(k, v)).collect();
            let mut page = vec![0u8; 1024];
            if uncut {
                uncut_leaf(&mut page, &cells);
            } else {
                init_node(&mut page, PageKind::Leaf);
                NodeMut::new(&mut page).rebuild(&cells);
            }
            for op in ops {
                let mut node = NodeMut::new(&mut page);
                match op {
                    LeafOp::Insert(key, len) => {
                        let Err(position) = node.view().search(&key) else {
                            continue;
                        };
                        let value = vec![key.len() as u8; len];
                        let cell = leaf_cell(&key, &value);
                        if node.insert_cell(position, &cell) {
                            model.insert(key, value);
                        } else {
                            let mut all: Vec<Vec<u8>> =
                                model.iter().map(|(k, v)| leaf_cell(k, v)).collect();
                            all.insert(position, cell);
                            proptest::prop_assert!(stored_size(true, &all) > 1024);
                        }
                    }
                    LeafOp::Remove(index) if !model.is_empty() => {
                        let index = index % model.len();
                        node.remove_cell(index);
                        let key = model.keys().nth(index).unwrap().clone();
                        model.remove(&key);
                    }
                    LeafOp::Remove(_) => {}
                    LeafOp::Compact => node.compact(),
                }
                let node = Node::new(&page);
                proptest::prop_assert_eq!(node.len(), model.len());
                for (index, (key, value)) in model.iter().enumerate() {
                    proptest::prop_assert_eq!(&node.key_to_vec(index), key);
                    proptest::prop_assert!(node.key_eq(index, key));
                    proptest::prop_assert_eq!(node.value(index), LeafValue::Inline(value));
                    proptest::prop_assert_eq!(node.search(key), Ok(index));
                    proptest::prop_assert_eq!(node.hint(index), hint_of(key, node.prefix_len()));
                }
            }
        }
    }
}
