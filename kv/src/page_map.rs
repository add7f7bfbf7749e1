//! The page map record: the superblock and the slot of every page, written at the end of
//! each checkpoint. It is what makes a checkpoint durable: the pages are already in free slots
//! (and fsynced); the record names them.
//!
//! Two files alternate (`<data>.map0`, `<data>.map1`): a checkpoint writes the one that does
//! not hold the last durable record, so a crash while writing leaves that one whole. Recovery
//! reads both and takes the newest valid record (within the owner's commit limit).
//!
//! ```text
//! block 0   header: magic "HLPGMAP1" | seq u64 | page size u32 | page count u64 |
//!           slot count u64 | crc32c of blocks 1.. u32 | crc32c of the header fields u32
//! block 1   the superblock (sealed as page 0)
//! then      the slot of each page: page count × u32, zero-padded to whole blocks
//! ```
//! The whole record goes out in one write followed by `fdatasync`; the two checksums reject a
//! torn one, and one whose header is new but whose body is an older record's.

use std::path::{Path, PathBuf};

use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::page;
use crate::superblock::Superblock;

const MAGIC: &[u8; 8] = b"HLPGMAP1";
const HEADER_FIELDS: usize = 40;

/// The two record files of a data file.
pub fn record_paths(data_path: &Path) -> [PathBuf; 2] {
    ["map0", "map1"].map(|suffix| {
        let mut name = data_path.as_os_str().to_owned();
        name.push(".");
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// A record that passed every check.
pub struct MapRecord {
    pub superblock: Superblock,
    pub slot_count: u64,
    pub slots: Vec<u32>,
}

fn table_blocks(page_count: u64, page_size: usize) -> usize {
    (page_count as usize * 4).div_ceil(page_size)
}

/// Writes the record of a checkpoint (`superblock` is its sealed image) and fsyncs it.
pub fn write(
    file: &BlockFile,
    superblock: &Superblock,
    slots: &[u32],
    slot_count: u64,
) -> KvResult<()> {
    let page_size = superblock.page_size as usize;
    let page_count = superblock.alloc.page_count;
    debug_assert_eq!(slots.len() as u64, page_count);
    let blocks = 2 + table_blocks(page_count, page_size);
    let mut record = vec![0u8; blocks * page_size];
    record[page_size..2 * page_size].copy_from_slice(&superblock.encode());
    for (slot, bytes) in slots
        .iter()
        .zip(record[2 * page_size..].chunks_exact_mut(4))
    {
        bytes.copy_from_slice(&slot.to_le_bytes());
    }
    let header = &mut record[..page_size];
    header[0..8].copy_from_slice(MAGIC);
    page::write_u64(header, 8, superblock.checkpoint_seq);
    page::write_u32(header, 16, page_size as u32);
    page::write_u64(header, 20, page_count);
    page::write_u64(header, 28, slot_count);
    let body_crc = crc32c::crc32c(&record[page_size..]);
    page::write_u32(&mut record, 36, body_crc);
    let header_crc = crc32c::crc32c(&record[..HEADER_FIELDS]);
    page::write_u32(&mut record, HEADER_FIELDS, header_crc);
    file.write_batch_sync(&[(0, &record)])
}

/// Makes a record unreadable (a checkpoint its owner abandoned after the record was durable,
/// whose slots are about to be reused).
pub fn invalidate(file: &BlockFile) -> KvResult<()> {
    file.write_batch_sync(&[(0, &[0u8; HEADER_FIELDS + 4])])
}

/// Reads and verifies the record in `file`; `None` if it is missing, torn or damaged.
pub fn read_valid(file: &BlockFile, page_size: usize) -> KvResult<Option<MapRecord>> {
    let len = file.file_len()?;
    if len < 2 * page_size as u64 {
        return Ok(None);
    }
    let mut header = vec![0u8; page_size];
    file.read_exact_at(&mut header, 0)?;
    if &header[0..8] != MAGIC
        || page::read_u32(&header, HEADER_FIELDS) != crc32c::crc32c(&header[..HEADER_FIELDS])
        || page::read_u32(&header, 16) as usize != page_size
    {
        return Ok(None);
    }
    let page_count = page::read_u64(&header, 20);
    let slot_count = page::read_u64(&header, 28);
    let body_len = (1 + table_blocks(page_count, page_size)) * page_size;
    if len < (page_size + body_len) as u64 {
        return Ok(None);
    }
    let mut body = vec![0u8; body_len];
    file.read_exact_at(&mut body, page_size as u64)?;
    if crc32c::crc32c(&body) != page::read_u32(&header, 36) {
        return Ok(None);
    }
    let superblock = Superblock::decode(file.path(), &body[..page_size])?;
    if superblock.alloc.page_count != page_count
        || superblock.checkpoint_seq != page::read_u64(&header, 8)
    {
        return Err(KvError::corrupt(
            file.path(),
            0,
            "page map header and superblock disagree",
        ));
    }
    let slots = body[page_size..]
        .chunks_exact(4)
        .take(page_count as usize)
        .map(|bytes| u32::from_le_bytes(bytes.try_into().expect("four bytes")))
        .collect();
    Ok(Some(MapRecord {
        superblock,
        slot_count,
        slots,
    }))
}
