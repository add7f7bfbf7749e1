//! Range scans over one B+tree, or over a table's tree and its insert buffer merged, forward
//! or backward, between two bounds.
//!
//! A cursor keeps the path from the root (page, child slot) and steps to the neighbouring leaf
//! by climbing to the nearest ancestor with a next (or previous) child and descending its
//! edge. Leaves therefore need no sibling links, which keeps splits and merges simple. The
//! cursor is handed its `PageSource` at every step, so the two cursors of a merged scan
//! share one: the engine's pager, borrowed for the scan's lifetime so the trees cannot
//! change under it, or a `Snapshot`, whose pages never change.

use std::ops::Bound;

use crate::btree::Path;
use crate::error::{KvError, KvResult};
use crate::page::{self, LeafValue, Node, PageKind, HEADER_SIZE};
use crate::pager::Pager;

/// Where a scan reads its pages.
pub(crate) trait PageSource {
    fn page(&mut self, page_id: u64) -> KvResult<&[u8]>;

    /// Reads a whole overflow chain of `len` bytes into `out`.
    fn overflow(&mut self, first_page: u64, len: usize, out: &mut Vec<u8>) -> KvResult<()> {
        out.clear();
        out.reserve(len);
        let mut page_id = first_page;
        while out.len() < len {
            let buffer = self.page(page_id)?;
            let chunk_len = page::read_u32(buffer, 12) as usize;
            if page::kind(buffer) != PageKind::Overflow as u8
                || chunk_len > buffer.len() - HEADER_SIZE
            {
                return Err(KvError::Poisoned(format!(
                    "overflow page {page_id} is malformed"
                )));
            }
            out.extend_from_slice(&buffer[HEADER_SIZE..HEADER_SIZE + chunk_len]);
            page_id = page::link(buffer);
        }
        Ok(())
    }
}

impl PageSource for &mut Pager {
    fn page(&mut self, page_id: u64) -> KvResult<&[u8]> {
        self.read(page_id)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Backward,
}

/// An iterator over `(key, value)` pairs in a key range of the engine's table: one tree,
/// or a table's tree and its insert buffer merged in key order (`insert_buffer.rs`).
pub struct Range<'a> {
    pager: &'a mut Pager,
    scan: TableScan,
}

impl<'a> Range<'a> {
    pub(crate) fn new(
        pager: &'a mut Pager,
        roots: (u64, Option<u64>),
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> KvResult<Range<'a>> {
        let scan = TableScan::new(&mut &mut *pager, roots, lower, upper, direction)?;
        Ok(Range { pager, scan })
    }
}

impl Iterator for Range<'_> {
    type Item = KvResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.scan.next(&mut &mut *self.pager)
    }
}

/// A scan of one table: its tree alone, or its tree and its insert buffer's tree merged.
/// The two hold disjoint keys (a key lives in at most one of them), so the merge only
/// interleaves; it asserts that they are disjoint.
pub(crate) struct TableScan {
    main: Cursor,
    buffer: Option<Cursor>,
    heads: [Option<(Vec<u8>, Vec<u8>)>; 2],
    direction: Direction,
    failed: bool,
}

impl TableScan {
    pub(crate) fn new<S: PageSource>(
        source: &mut S,
        (main, buffer): (u64, Option<u64>),
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> KvResult<TableScan> {
        let main = Cursor::new(source, main, lower, upper, direction)?;
        let buffer = match buffer {
            Some(root) => Some(Cursor::new(source, root, lower, upper, direction)?),
            None => None,
        };
        Ok(TableScan {
            main,
            buffer,
            heads: [None, None],
            direction,
            failed: false,
        })
    }

    pub(crate) fn next<S: PageSource>(
        &mut self,
        source: &mut S,
    ) -> Option<KvResult<(Vec<u8>, Vec<u8>)>> {
        if self.failed {
            return None;
        }
        let Some(buffer) = self.buffer.as_mut() else {
            return self.main.next(source);
        };
        for (head, cursor) in self.heads.iter_mut().zip([&mut self.main, buffer]) {
            if head.is_none() {
                match cursor.next(source) {
                    Some(Ok(entry)) => *head = Some(entry),
                    Some(Err(err)) => {
                        self.failed = true;
                        return Some(Err(err));
                    }
                    None => {}
                }
            }
        }
        let take = match (&self.heads[0], &self.heads[1]) {
            (None, None) => return None,
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some((main, _)), Some((buffered, _))) => {
                assert_ne!(
                    main, buffered,
                    "a key is in both a table's tree and its insert buffer"
                );
                let main_first = (main < buffered) == (self.direction == Direction::Forward);
                usize::from(!main_first)
            }
        };
        self.heads[take].take().map(Ok)
    }
}

/// The scan of one tree, over any page source handed to each step.
pub(crate) struct Cursor {
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    direction: Direction,
    path: Path,
    leaf: u64,
    /// Next cell to yield in `leaf`; for backward scans one past it (0 = step to the left).
    index: usize,
    done: bool,
}

impl Cursor {
    pub(crate) fn new<S: PageSource>(
        source: &mut S,
        root: u64,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> KvResult<Cursor> {
        let mut range = Cursor {
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            direction,
            path: Path::new(),
            leaf: root,
            index: 0,
            done: false,
        };
        range.seek(source, root)?;
        Ok(range)
    }

    fn seek<S: PageSource>(&mut self, source: &mut S, root: u64) -> KvResult<()> {
        let start = match self.direction {
            Direction::Forward => self.lower.clone(),
            Direction::Backward => self.upper.clone(),
        };
        let key = match &start {
            Bound::Included(key) | Bound::Excluded(key) => Some(key.as_slice()),
            Bound::Unbounded => None,
        };
        let mut page_id = root;
        loop {
            let node = Node::new(source.page(page_id)?);
            if node.is_leaf() {
                break;
            }
            let slot = match (key, self.direction) {
                (Some(key), _) => node.child_slot(key),
                (None, Direction::Forward) => 0,
                (None, Direction::Backward) => node.len(),
            };
            self.path.push((page_id, slot));
            page_id = node.child(slot);
        }
        self.leaf = page_id;
        let node = Node::new(source.page(page_id)?);
        self.index = match (key.map(|key| node.search(key)), &start, self.direction) {
            (None, _, Direction::Forward) => 0,
            (None, _, Direction::Backward) => node.len(),
            (Some(Ok(i)), Bound::Excluded(_), Direction::Forward) => i + 1,
            (Some(Ok(i) | Err(i)), _, Direction::Forward) => i,
            (Some(Ok(i)), Bound::Included(_), Direction::Backward) => i + 1,
            (Some(Ok(i) | Err(i)), _, Direction::Backward) => i,
        };
        Ok(())
    }

    /// Moves to the next leaf in scan direction; false at the end of the tree.
    fn step_leaf<S: PageSource>(&mut self, source: &mut S) -> KvResult<bool> {
        loop {
            let Some((page_id, slot)) = self.path.pop() else {
                return Ok(false);
            };
            let len = Node::new(source.page(page_id)?).len();
            let next = match self.direction {
                Direction::Forward if slot < len => slot + 1,
                Direction::Backward if slot > 0 => slot - 1,
                _ => continue,
            };
            self.path.push((page_id, next));
            let mut child = Node::new(source.page(page_id)?).child(next);
            loop {
                let node = Node::new(source.page(child)?);
                if node.is_leaf() {
                    self.leaf = child;
                    self.index = match self.direction {
                        Direction::Forward => 0,
                        Direction::Backward => node.len(),
                    };
                    return Ok(true);
                }
                let slot = match self.direction {
                    Direction::Forward => 0,
                    Direction::Backward => node.len(),
                };
                self.path.push((child, slot));
                child = node.child(slot);
            }
        }
    }

    fn in_bounds(&self, key: &[u8]) -> bool {
        match self.direction {
            Direction::Forward => match &self.upper {
                Bound::Included(upper) => key <= upper.as_slice(),
                Bound::Excluded(upper) => key < upper.as_slice(),
                Bound::Unbounded => true,
            },
            Direction::Backward => match &self.lower {
                Bound::Included(lower) => key >= lower.as_slice(),
                Bound::Excluded(lower) => key > lower.as_slice(),
                Bound::Unbounded => true,
            },
        }
    }

    fn next_entry<S: PageSource>(
        &mut self,
        source: &mut S,
    ) -> KvResult<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            let node = Node::new(source.page(self.leaf)?);
            let cell_index = match self.direction {
                Direction::Forward if self.index < node.len() => Some(self.index),
                Direction::Backward if self.index > 0 => Some(self.index - 1),
                _ => None,
            };
            let Some(cell_index) = cell_index else {
                if !self.step_leaf(source)? {
                    return Ok(None);
                }
                continue;
            };
            let key = node.key_to_vec(cell_index);
            let stored = match node.value(cell_index) {
                LeafValue::Inline(bytes) => Ok(bytes.to_vec()),
                LeafValue::Overflow { first_page, len } => Err((first_page, len)),
            };
            if !self.in_bounds(&key) {
                return Ok(None);
            }
            let value = match stored {
                Ok(bytes) => bytes,
                Err((first_page, len)) => {
                    let mut out = Vec::new();
                    source.overflow(first_page, len as usize, &mut out)?;
                    out
                }
            };
            match self.direction {
                Direction::Forward => self.index += 1,
                Direction::Backward => self.index -= 1,
            }
            return Ok(Some((key, value)));
        }
    }

    pub(crate) fn next<S: PageSource>(
        &mut self,
        source: &mut S,
    ) -> Option<KvResult<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        match self.next_entry(source) {
            Ok(Some(entry)) => Some(Ok(entry)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}
