//! Where each page lives in the data file: the page → slot map and the free slots.
//!
//! A checkpoint never overwrites a slot the last durable checkpoint uses: it writes each of
//! its pages to a free slot (the lowest first, then past the end of the file), and its page
//! map record (`page_map`) names the new slots. Once that record is durable (and, for a gated
//! checkpoint, committed) the slots the pages had before are free. So every page is written
//! once per checkpoint, and a crash at any moment leaves the last committed checkpoint whole.
//!
//! Slot 0 holds the file header and is never free; page 0 (the superblock) has no slot, it
//! lives in the page map record. A slot number is 32 bits: 16 TiB of 4 KiB pages.

use std::path::Path;

use crate::error::{KvError, KvResult};

/// The page → slot map with its free slots. Owned by the checkpoint writer; the buffer pool
/// keeps its own copy of the map for reading pages (updated as checkpoints finish).
pub struct SlotMap {
    /// Slot of each page id; 0 for page 0 and for pages no checkpoint has written yet.
    slots: Vec<u32>,
    /// One bit per slot below `slot_count`, set when the slot is free.
    free: Vec<u64>,
    slot_count: u32,
    /// Where the search for a free slot goes on from (slots below it are taken).
    cursor: u32,
}

impl SlotMap {
    /// The map of a file written before page maps existed (format 3 and older): page `p` is
    /// in slot `p`; slots past the page count are free.
    pub fn identity(page_count: u64, slot_count: u64, path: &Path) -> KvResult<SlotMap> {
        let slots = (0..page_count as u32).collect();
        SlotMap::from_record(slots, slot_count.max(page_count), path)
    }

    /// The map a page map record states, checked: every page but page 0 in its own slot
    /// below `slot_count`; every other slot is free.
    pub fn from_record(slots: Vec<u32>, slot_count: u64, path: &Path) -> KvResult<SlotMap> {
        let corrupt = |what: String| KvError::corrupt(path, 0, what);
        if slot_count > u64::from(u32::MAX) {
            return Err(corrupt(format!("page map states {slot_count} slots")));
        }
        let mut map = SlotMap::empty(slot_count);
        for slot in 1..map.slot_count {
            map.set_free(slot, true);
        }
        for (page_id, &slot) in slots.iter().enumerate() {
            if page_id == 0 {
                if slot != 0 {
                    return Err(corrupt("page map gives the superblock a slot".into()));
                }
                continue;
            }
            if slot == 0 || slot >= map.slot_count {
                return Err(corrupt(format!(
                    "page map puts page {page_id} in slot {slot} of {slot_count}"
                )));
            }
            if !map.is_free(slot) {
                return Err(corrupt(format!("page map puts two pages in slot {slot}")));
            }
            map.set_free(slot, false);
        }
        map.slots = slots;
        Ok(map)
    }

    fn empty(slot_count: u64) -> SlotMap {
        let slot_count = slot_count.max(1) as u32;
        SlotMap {
            slots: Vec::new(),
            free: vec![0; (slot_count as usize).div_ceil(64)],
            slot_count,
            cursor: 1,
        }
    }

    fn is_free(&self, slot: u32) -> bool {
        self.free[slot as usize / 64] & (1u64 << (slot % 64)) != 0
    }

    fn set_free(&mut self, slot: u32, free: bool) {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        if free {
            self.free[word] |= bit;
        } else {
            self.free[word] &= !bit;
        }
    }

    /// The slot of every page id (0: none).
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    pub fn slot_count(&self) -> u64 {
        u64::from(self.slot_count)
    }

    /// One past the highest slot a page is in (1 when none is): how long the data file
    /// must be.
    pub fn used_end(&self) -> u64 {
        self.slots
            .iter()
            .max()
            .map_or(1, |&slot| u64::from(slot) + 1)
    }

    #[cfg(test)]
    pub fn free_slots(&self) -> usize {
        self.free
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// Starts the search for free slots from the front again (at each checkpoint, so the
    /// file's holes are filled before it grows).
    pub fn rewind(&mut self) {
        self.cursor = 1;
    }

    /// Takes the lowest free slot at or past the cursor, or a new one past the end.
    pub fn allocate(&mut self) -> KvResult<u32> {
        let mut word = self.cursor as usize / 64;
        let mut bits = self
            .free
            .get(word)
            .map_or(0, |w| w & (!0u64 << (self.cursor % 64)));
        while bits == 0 && word + 1 < self.free.len() {
            word += 1;
            bits = self.free[word];
        }
        let slot = if bits != 0 {
            (word * 64) as u32 + bits.trailing_zeros()
        } else {
            if self.slot_count == u32::MAX {
                return Err(KvError::Poisoned(
                    "the data file has no slot numbers left (16 TiB of 4 KiB pages)".into(),
                ));
            }
            let slot = self.slot_count;
            self.slot_count += 1;
            if self.free.len() * 64 < self.slot_count as usize {
                self.free.push(0);
            }
            slot
        };
        self.set_free(slot, false);
        self.cursor = slot + 1;
        Ok(slot)
    }

    /// Makes `slot` free again.
    pub fn release(&mut self, slot: u32) {
        debug_assert!(slot != 0 && slot < self.slot_count, "slot {slot}");
        self.set_free(slot, true);
        self.cursor = self.cursor.min(slot);
    }

    /// Puts `page_id` in `slot`; returns the slot it was in (0: none).
    pub fn assign(&mut self, page_id: u64, slot: u32) -> u32 {
        let index = page_id as usize;
        if self.slots.len() <= index {
            self.slots.resize(index + 1, 0);
        }
        std::mem::replace(&mut self.slots[index], slot)
    }

    /// Sizes the map to `page_count` pages (a checkpoint's record covers exactly those).
    pub fn cover(&mut self, page_count: u64) {
        self.slots.resize(page_count as usize, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_lowest_first_then_past_the_end_and_released_slots_come_back() {
        let mut map = SlotMap::identity(4, 6, Path::new("data")).unwrap();
        assert_eq!(map.slots(), &[0, 1, 2, 3]);
        assert_eq!(map.free_slots(), 2);
        assert_eq!(map.allocate().unwrap(), 4);
        assert_eq!(map.allocate().unwrap(), 5);
        assert_eq!(map.allocate().unwrap(), 6);
        assert_eq!(map.slot_count(), 7);
        assert_eq!(map.assign(2, 6), 2);
        map.release(2);
        map.rewind();
        assert_eq!(map.allocate().unwrap(), 2);
        for expected in 7..200 {
            assert_eq!(map.allocate().unwrap(), expected);
        }
        map.release(130);
        map.release(70);
        map.rewind();
        assert_eq!(map.allocate().unwrap(), 70);
        assert_eq!(map.allocate().unwrap(), 130);
        assert_eq!(map.allocate().unwrap(), 200);
    }

    #[test]
    fn a_record_with_a_shared_or_missing_slot_is_refused() {
        let path = Path::new("data");
        let map = SlotMap::from_record(vec![0, 3, 1], 5, path).unwrap();
        assert_eq!(map.free_slots(), 2, "slots 2 and 4");
        for (slots, count, what) in [
            (vec![0, 3, 3], 5, "two pages"),
            (vec![0, 3, 0], 5, "slot 0"),
            (vec![0, 3, 5], 5, "slot 5 of 5"),
            (vec![1, 3, 2], 5, "superblock"),
        ] {
            let err = SlotMap::from_record(slots, count, path)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(what), "{err}");
        }
    }
}
