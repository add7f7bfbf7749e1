//! The checkpoint journal of format 3 and older: a double-write file beside the data file
//! that made a checkpoint atomic. This build never writes one; it reads a journal left by an
//! older build when it opens such a file, since that file may need it.
//!
//! A format-3 checkpoint first wrote every page it changed (and the new superblock) to the
//! journal and fsynced it; only then did it overwrite those pages in the data file. If the
//! process died during the in-place write, the journal is complete and recovery writes it
//! again over the data file (idempotent); a partial journal fails its checksum and is ignored.
//!
//! ```text
//! block 0            header: magic "HLJRNL02" | seq u64 | page size u32 | count u64 |
//!                            crc32c of blocks 1.. u32 | crc32c of the header fields u32
//! blocks 1..=count   page images, each sealed with its own page id
//! then T blocks      page id table: count × u64, zero-padded to whole blocks
//! ```

use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::page;

const MAGIC: &[u8; 8] = b"HLJRNL02";
/// Pages read and written per IO batch.
const CHUNK_PAGES: usize = 128;

fn table_blocks(count: usize, page_size: usize) -> usize {
    (count * 8).div_ceil(page_size)
}

/// The writes that put consecutive page images (`bytes`) at the places of `page_ids` in the
/// data file.
fn in_place(
    page_ids: impl Iterator<Item = u64>,
    bytes: &[u8],
    page_size: usize,
) -> Vec<(u64, &[u8])> {
    page_ids
        .zip(bytes.chunks(page_size))
        .map(|(page_id, image)| (page_id * page_size as u64, image))
        .collect()
}

/// A journal that passed every check.
pub struct ValidJournal {
    pub seq: u64,
    pub page_ids: Vec<u64>,
    images_start: u64,
    page_size: usize,
}

/// Reads and fully verifies the journal; `None` if it is empty, partial or damaged (which
/// means the data file was not touched by the checkpoint that wrote it).
pub fn read_valid(file: &BlockFile, page_size: usize) -> KvResult<Option<ValidJournal>> {
    let len = file.file_len()?;
    if len < page_size as u64 {
        return Ok(None);
    }
    let mut header = vec![0u8; page_size];
    file.read_exact_at(&mut header, 0)?;
    if &header[0..8] != MAGIC
        || page::read_u32(&header, 32) != crc32c::crc32c(&header[..32])
        || page::read_u32(&header, 16) as usize != page_size
    {
        return Ok(None);
    }
    let seq = page::read_u64(&header, 8);
    let count = page::read_u64(&header, 20) as usize;
    let table_len = table_blocks(count, page_size);
    let total = ((1 + count + table_len) * page_size) as u64;
    if len < total {
        return Ok(None);
    }
    let images_start = page_size as u64;
    let mut body_crc = 0u32;
    let mut chunk = vec![0u8; CHUNK_PAGES * page_size];
    let mut done = 0;
    while done < count {
        let pages = (count - done).min(CHUNK_PAGES);
        let bytes = &mut chunk[..pages * page_size];
        file.read_exact_at(bytes, images_start + (done * page_size) as u64)?;
        body_crc = crc32c::crc32c_append(body_crc, bytes);
        done += pages;
    }
    let mut table = vec![0u8; table_len * page_size];
    file.read_exact_at(&mut table, ((1 + count) * page_size) as u64)?;
    body_crc = crc32c::crc32c_append(body_crc, &table);
    if body_crc != page::read_u32(&header, 28) {
        return Ok(None);
    }
    let page_ids = (0..count)
        .map(|index| page::read_u64(&table, index * 8))
        .collect();
    Ok(Some(ValidJournal {
        seq,
        page_ids,
        images_start,
        page_size,
    }))
}

impl ValidJournal {
    /// The journaled image of `page_id`, if the journal holds one.
    pub fn read_image(&self, journal: &BlockFile, page_id: u64) -> KvResult<Option<Vec<u8>>> {
        let Some(slot) = self.page_ids.iter().rposition(|&id| id == page_id) else {
            return Ok(None);
        };
        let mut image = vec![0u8; self.page_size];
        journal.read_exact_at(
            &mut image,
            self.images_start + (slot * self.page_size) as u64,
        )?;
        Ok(Some(image))
    }

    /// Writes every journaled page to its place in the data file and fsyncs it.
    pub fn apply(&self, journal: &BlockFile, data: &BlockFile) -> KvResult<()> {
        let page_size = self.page_size;
        let mut chunk = vec![0u8; CHUNK_PAGES * page_size];
        for (group_index, group) in self.page_ids.chunks(CHUNK_PAGES).enumerate() {
            let first = group_index * CHUNK_PAGES;
            let bytes = &mut chunk[..group.len() * page_size];
            journal.read_exact_at(bytes, self.images_start + (first * page_size) as u64)?;
            let writes = in_place(group.iter().copied(), bytes, page_size);
            for (offset, image) in &writes {
                let page_id = offset / page_size as u64;
                if !page::verify(page_id, image) {
                    return Err(KvError::corrupt(
                        journal.path(),
                        self.images_start,
                        format!("journal image of page {page_id} fails its checksum"),
                    ));
                }
            }
            data.write_batch(&writes)?;
        }
        data.sync()
    }
}
