//! The superblock: what the file is, and which checkpoint it holds. Since format 4 it lives
//! in the page map record (`page_map`) and slot 0 of the data file holds only a header (this
//! layout with the magic, the version and the page size; every other field 0). Up to format
//! 3 it was page 0 of the data file, overwritten in place by each checkpoint.
//!
//! ```text
//! offset size field
//!  0     4    crc32c (page checksum, page id 0)
//!  4     1    kind = 1 (superblock)
//!  8     8    magic "HOTLEDGR"
//! 16     4    format version
//! 20     4    page size in bytes
//! 24     8    page count (file image length in pages)
//! 32     8    free list head (0 = empty)
//! 40     8    catalog root page
//! 48     8    checkpoint sequence number (0 = freshly formatted)
//! 56     8    log index covered by the checkpoint
//! 64     8    log term covered by the checkpoint
//! 72     8    next table id
//! ```

use std::path::Path;

use crate::error::{KvError, KvResult};
use crate::page::{self, PageKind};
use crate::pager::AllocState;

pub const MAGIC: &[u8; 8] = b"HOTLEDGR";
/// 2: slots carry key hints and byte 5 of a node holds its shared prefix length.
/// 3: leaves may cut their shared prefix (byte 12 of the node says so). A version 2 file is
/// read as it is and becomes version 3 at its next checkpoint; older servers refuse it then.
/// 4: checkpoints write pages to free slots and name them in a page map record beside the
/// data file; slot 0 is a header. A version 2 or 3 file is read as it is (page `p` in slot
/// `p`) and becomes version 4 at its first checkpoint.
/// (Catalog values of tables with an insert buffer came within version 4 — 24 bytes, then
/// 32 with the buffer's bytes, which this build writes and reads both of: a build from
/// before buffers refuses such a file as a malformed catalog, and reads any other.)
pub const FORMAT_VERSION: u32 = 4;
/// The first format whose superblock lives in the page map record.
pub const FIRST_WITH_PAGE_MAP: u32 = 4;
/// The oldest format this version reads.
const OLDEST_READABLE: u32 = 2;

/// Refuses a file of a format this build does not read.
pub fn check_version(path: &Path, version: u32) -> KvResult<()> {
    if (OLDEST_READABLE..=FORMAT_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(KvError::FormatVersion {
            path: path.to_path_buf(),
            found: version,
            expected: FORMAT_VERSION,
        })
    }
}

/// A position in the replicated log, opaque to the engine: the checkpoint covers every entry
/// up to and including it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogPosition {
    pub term: u64,
    pub index: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub page_size: u32,
    pub alloc: AllocState,
    pub catalog_root: u64,
    pub checkpoint_seq: u64,
    pub log_position: LogPosition,
    pub next_table_id: u64,
}

impl Superblock {
    /// The header in slot 0 of a format-4 data file: magic, version and page size only.
    pub fn file_header(page_size: u32) -> Superblock {
        Superblock {
            page_size,
            alloc: AllocState {
                page_count: 0,
                freelist_head: 0,
            },
            catalog_root: 0,
            checkpoint_seq: 0,
            log_position: LogPosition::default(),
            next_table_id: 0,
        }
    }

    /// A sealed page image of this superblock.
    pub fn encode(&self) -> Vec<u8> {
        let mut image = vec![0u8; self.page_size as usize];
        image[4] = PageKind::Superblock as u8;
        image[8..16].copy_from_slice(MAGIC);
        page::write_u32(&mut image, 16, FORMAT_VERSION);
        page::write_u32(&mut image, 20, self.page_size);
        page::write_u64(&mut image, 24, self.alloc.page_count);
        page::write_u64(&mut image, 32, self.alloc.freelist_head);
        page::write_u64(&mut image, 40, self.catalog_root);
        page::write_u64(&mut image, 48, self.checkpoint_seq);
        page::write_u64(&mut image, 56, self.log_position.index);
        page::write_u64(&mut image, 64, self.log_position.term);
        page::write_u64(&mut image, 72, self.next_table_id);
        page::seal(0, &mut image);
        image
    }

    /// Decodes the first bytes of a data file. `header` must hold at least 512 bytes; the
    /// checksum is verified over the stated page size, so `header` must be that long.
    pub fn decode(path: &Path, header: &[u8]) -> KvResult<Superblock> {
        if &header[8..16] != MAGIC {
            return Err(KvError::NotOurFile {
                path: path.to_path_buf(),
                what: "data",
            });
        }
        check_version(path, page::read_u32(header, 16))?;
        let page_size = page::read_u32(header, 20);
        if header.len() != page_size as usize || !page::verify(0, header) {
            return Err(KvError::corrupt(path, 0, "superblock checksum mismatch"));
        }
        Ok(Superblock {
            page_size,
            alloc: AllocState {
                page_count: page::read_u64(header, 24),
                freelist_head: page::read_u64(header, 32),
            },
            catalog_root: page::read_u64(header, 40),
            checkpoint_seq: page::read_u64(header, 48),
            log_position: LogPosition {
                index: page::read_u64(header, 56),
                term: page::read_u64(header, 64),
            },
            next_table_id: page::read_u64(header, 72),
        })
    }

    /// The page size and format version stated by a header, if it looks like ours (used
    /// before full decoding).
    pub fn peek(header: &[u8]) -> Option<(u32, u32)> {
        (&header[8..16] == MAGIC).then(|| (page::read_u32(header, 20), page::read_u32(header, 16)))
    }
}
