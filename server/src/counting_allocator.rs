//! The global allocator: mimalloc, with every allocation and free counted per thread for
//! `plan::memory` — what a statement holds, what the server holds, against its budget.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;

pub struct CountingAllocator;

// SAFETY: every call is passed to mimalloc unchanged; counting touches only const-initialized
// thread-locals without destructors and one atomic, and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            plan::memory::record_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as alloc.
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            plan::memory::record_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by this allocator with layout.
        unsafe { MiMalloc.dealloc(ptr, layout) };
        plan::memory::record_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: ptr was allocated by this allocator with layout; new_size per the caller.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            plan::memory::record_free(layout.size());
            plan::memory::record_alloc(new_size);
        }
        p
    }
}
