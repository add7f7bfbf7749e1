//! The checkpoint journal: a double-write file beside the data file that makes a checkpoint
//! atomic.
//!
//! A checkpoint first writes every page it changes (and the new superblock) to the journal and
//! fsyncs it; only then does it overwrite those pages in the data file and fsync that. If the
//! process dies during the journal write, the journal fails its checksum and the data file
//! still holds the previous checkpoint untouched. If it dies during the in-place write, the
//! journal is complete and recovery writes it again over the data file (idempotent).
//!
//! ```text
//! block 0            header: magic "HLJRNL02" | seq u64 | page size u32 | count u64 |
//!                            crc32c of blocks 1.. u32 | crc32c of the header fields u32
//! blocks 1..=count   page images, each sealed with its own page id (streamed as captured)
//! then T blocks      page id table: count × u64, zero-padded to whole blocks
//! ```
//! A block is one page. Images come first so the journal can be written while the executor
//! is still capturing pages. The body checksum covers the images and the table, and the
//! header is written last, so a journal that mixes a new header with blocks left over from an
//! older checkpoint never validates.

use std::sync::Arc;

use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::page;
use crate::pool::PageBuf;

const MAGIC: &[u8; 8] = b"HLJRNL02";
/// Pages copied and written per IO batch.
const CHUNK_PAGES: usize = 128;

/// A page image to put in the journal: either shared from the pool or owned (the superblock).
pub enum JournalPage {
    Shared(Arc<PageBuf>),
    Owned(Vec<u8>),
}

impl JournalPage {
    fn bytes(&self) -> &[u8] {
        match self {
            JournalPage::Shared(buffer) => buffer.bytes(),
            JournalPage::Owned(bytes) => bytes,
        }
    }
}

fn table_blocks(count: usize, page_size: usize) -> usize {
    (count * 8).div_ceil(page_size)
}

/// Streams one checkpoint's pages into the journal file. Each image is copied and sealed
/// into a reused chunk buffer and written at once, so the caller may drop the images as soon
/// as `append` returns: the in-place phase reads them back from the journal.
pub struct JournalWriter<'a> {
    file: &'a BlockFile,
    page_size: usize,
    page_ids: Vec<u64>,
    body_crc: u32,
    chunk: Vec<u8>,
}

impl<'a> JournalWriter<'a> {
    pub fn new(file: &'a BlockFile, page_size: usize) -> JournalWriter<'a> {
        JournalWriter {
            file,
            page_size,
            page_ids: Vec::new(),
            body_crc: 0,
            chunk: vec![0u8; CHUNK_PAGES * page_size],
        }
    }

    /// Appends page images after those already written.
    pub fn append(&mut self, pages: &[(u64, JournalPage)]) -> KvResult<()> {
        let page_size = self.page_size;
        for group in pages.chunks(CHUNK_PAGES) {
            let first_block = 1 + self.page_ids.len() as u64;
            let bytes = seal_into(&mut self.chunk, group, page_size);
            self.body_crc = crc32c::crc32c_append(self.body_crc, bytes);
            self.file
                .write_batch(&[(first_block * page_size as u64, bytes)])?;
            self.file.start_writeback();
            self.page_ids
                .extend(group.iter().map(|(page_id, _)| *page_id));
        }
        Ok(())
    }

    /// Writes the id table and the header of checkpoint `seq`, then fsyncs the journal.
    /// Returns the journal as recovery would find it, ready to be applied in place.
    pub fn finish(mut self, seq: u64) -> KvResult<ValidJournal> {
        let page_size = self.page_size;
        let count = self.page_ids.len();
        let mut table = vec![0u8; table_blocks(count, page_size) * page_size];
        for (index, page_id) in self.page_ids.iter().enumerate() {
            page::write_u64(&mut table, index * 8, *page_id);
        }
        self.body_crc = crc32c::crc32c_append(self.body_crc, &table);
        let table_offset = ((1 + count) * page_size) as u64;
        let mut header = vec![0u8; page_size];
        header[0..8].copy_from_slice(MAGIC);
        page::write_u64(&mut header, 8, seq);
        page::write_u32(&mut header, 16, page_size as u32);
        page::write_u64(&mut header, 20, count as u64);
        page::write_u32(&mut header, 28, self.body_crc);
        let header_crc = crc32c::crc32c(&header[..32]);
        page::write_u32(&mut header, 32, header_crc);
        self.file
            .write_batch_sync(&[(table_offset, &table), (0, &header)])?;
        Ok(ValidJournal {
            seq,
            page_ids: std::mem::take(&mut self.page_ids),
            images_start: page_size as u64,
            page_size,
        })
    }
}

/// Copies a group of at most `CHUNK_PAGES` images into `chunk`, each sealed with its page id
/// and checksum as it is stored; returns the filled part.
fn seal_into<'c>(chunk: &'c mut [u8], group: &[(u64, JournalPage)], page_size: usize) -> &'c [u8] {
    let bytes = &mut chunk[..group.len() * page_size];
    for ((page_id, image), target) in group.iter().zip(bytes.chunks_mut(page_size)) {
        target.copy_from_slice(image.bytes());
        page::seal(*page_id, target);
    }
    bytes
}

/// Writes pages the last durable checkpoint does not contain (ids at or past its page
/// count) straight to their places in the data file, sealed, without journaling them: that
/// checkpoint never reads them, so a torn or abandoned write cannot harm it, and the caller
/// makes them durable (`BlockFile::sync`) before the checkpoint that contains them commits.
/// `chunk` is a reused buffer.
pub fn write_new_pages(
    data: &BlockFile,
    pages: &[(u64, JournalPage)],
    page_size: usize,
    chunk: &mut Vec<u8>,
) -> KvResult<()> {
    chunk.resize(CHUNK_PAGES * page_size, 0);
    for group in pages.chunks(CHUNK_PAGES) {
        let bytes = seal_into(chunk, group, page_size);
        let writes = in_place(group.iter().map(|(page_id, _)| *page_id), bytes, page_size);
        data.write_batch(&writes)?;
        data.start_writeback();
    }
    Ok(())
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
        self.apply_reporting(journal, data, |_| {})
    }

    /// `apply`, calling `written` with the bytes of each chunk written (for pacing).
    pub fn apply_reporting(
        &self,
        journal: &BlockFile,
        data: &BlockFile,
        mut written: impl FnMut(usize),
    ) -> KvResult<()> {
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
            data.start_writeback();
            written(bytes.len());
        }
        data.sync()
    }
}
