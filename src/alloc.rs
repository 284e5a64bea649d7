//! A size-class allocator for the single-threaded wasm VM.
//!
//! A CRS transaction makes thousands of small, short-lived allocations (values, transformation
//! results, table entries), all freed when the transaction ends. `dlmalloc` (Rust's default on
//! `wasm32-wasip1`) spends a large share of a request splitting, coalescing and searching bins
//! for them. Here a small block is one of 13 power-of-two classes (16 B .. 64 KiB): `alloc` pops
//! the class's free list or carves from the current chunk, `dealloc` pushes the block back.
//! Memory of a class is reused only by that class, never returned (a wasm memory never shrinks
//! anyway); what a class holds is bounded by its peak use. Larger or over-aligned requests go to
//! the system allocator.
//!
//! Only sound as the allocator of a program without threads (wasm32 without the `atomics`
//! feature): the state is not synchronized.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

const MIN_SHIFT: u32 = 4;
const MAX_SHIFT: u32 = 16;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// Bytes taken from the system allocator at a time.
const CHUNK: usize = 256 * 1024;
const ALIGN: usize = 1 << MIN_SHIFT;

struct State {
    /// Heads of the free lists; a free block stores the next pointer in its first word.
    free: [*mut u8; CLASSES],
    bump: *mut u8,
    end: *mut u8,
}

/// See the module documentation.
pub struct ClassAlloc {
    state: UnsafeCell<State>,
}

// SAFETY: used only where there is a single thread (see the module documentation).
unsafe impl Sync for ClassAlloc {}

impl ClassAlloc {
    /// # Safety
    /// The allocator must only be used from one thread.
    pub const unsafe fn new() -> ClassAlloc {
        ClassAlloc { state: UnsafeCell::new(State { free: [ptr::null_mut(); CLASSES], bump: ptr::null_mut(), end: ptr::null_mut() }) }
    }
}

impl Default for ClassAlloc {
    fn default() -> ClassAlloc {
        // SAFETY: a value (not a global) is owned by whoever created it; `&ClassAlloc` across
        // threads is the caller's responsibility, as documented.
        unsafe { ClassAlloc::new() }
    }
}

/// The class of a small, ordinarily aligned layout.
fn class_of(size: usize, align: usize) -> Option<usize> {
    if align > ALIGN || size > 1 << MAX_SHIFT {
        return None;
    }
    let rounded = size.max(ALIGN).next_power_of_two();
    Some((rounded.trailing_zeros() - MIN_SHIFT) as usize)
}

fn class_size(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

impl State {
    unsafe fn push(&mut self, class: usize, block: *mut u8) {
        if let Some(head) = self.free.get_mut(class) {
            block.cast::<*mut u8>().write(*head);
            *head = block;
        }
    }

    /// A new chunk; the rest of the old one goes to the free lists.
    unsafe fn refill(&mut self) -> bool {
        let mut rest = self.end as usize - self.bump as usize;
        while rest >= ALIGN {
            let class = ((usize::BITS - 1 - rest.leading_zeros()) - MIN_SHIFT).min(CLASSES as u32 - 1) as usize;
            let size = class_size(class);
            let block = self.bump;
            self.bump = self.bump.add(size);
            self.push(class, block);
            rest -= size;
        }
        let chunk = System.alloc(Layout::from_size_align_unchecked(CHUNK, ALIGN));
        if chunk.is_null() {
            return false;
        }
        self.bump = chunk;
        self.end = chunk.add(CHUNK);
        true
    }

    unsafe fn alloc(&mut self, class: usize) -> *mut u8 {
        if let Some(head) = self.free.get_mut(class) {
            let block = *head;
            if !block.is_null() {
                *head = block.cast::<*mut u8>().read();
                return block;
            }
        }
        let size = class_size(class);
        if (self.end as usize - self.bump as usize) < size && !self.refill() {
            return ptr::null_mut();
        }
        let block = self.bump;
        self.bump = self.bump.add(size);
        block
    }
}

unsafe impl GlobalAlloc for ClassAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout.size(), layout.align()) {
            Some(class) => (*self.state.get()).alloc(class),
            None => System.alloc(layout),
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match class_of(layout.size(), layout.align()) {
            Some(class) => (*self.state.get()).push(class, block),
            None => System.dealloc(block, layout),
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = class_of(layout.size(), layout.align());
        if old.is_some() && old == class_of(new_size, layout.align()) {
            return block;
        }
        if old.is_none() && class_of(new_size, layout.align()).is_none() {
            return System.realloc(block, layout, new_size);
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            ptr::copy_nonoverlapping(block, new, layout.size().min(new_size));
            self.dealloc(block, layout);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(class_of(0, 1), Some(0));
        assert_eq!(class_of(16, 8), Some(0));
        assert_eq!(class_of(17, 8), Some(1));
        assert_eq!(class_of(65536, 8), Some(12));
        assert_eq!(class_of(65537, 8), None);
        assert_eq!(class_of(8, 32), None);
    }

    #[test]
    fn blocks_are_distinct_aligned_reused_and_survive_realloc() {
        let a = ClassAlloc::default();
        unsafe {
            let mut live: Vec<(*mut u8, Layout)> = Vec::new();
            // Sizes across every class and the system path, interleaved with frees.
            for i in 0..5000usize {
                let size = (i * 7919) % 70000 + 1;
                let layout = Layout::from_size_align(size, if i % 3 == 0 { 16 } else { 8 }).unwrap();
                let p = a.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % layout.align(), 0);
                p.write_bytes((i % 251) as u8, size);
                live.push((p, layout));
                if i % 4 == 3 {
                    let (q, l) = live.swap_remove((i * 31) % live.len());
                    a.dealloc(q, l);
                }
            }
            // Every live block still holds its pattern: no overlap.
            for (i, &(p, l)) in live.iter().enumerate() {
                let first = *p;
                assert!((0..l.size()).all(|k| *p.add(k) == first), "block {i} overwritten");
            }
            // A freed block is handed out again for its class.
            let l = Layout::from_size_align(100, 8).unwrap();
            let p = a.alloc(l);
            a.dealloc(p, l);
            assert_eq!(a.alloc(l), p);
            // realloc keeps the contents, in place within a class.
            p.write_bytes(7, 100);
            let q = a.realloc(p, l, 120);
            assert_eq!(q, p);
            let r = a.realloc(q, Layout::from_size_align(120, 8).unwrap(), 100_000);
            assert!((0..100).all(|k| *r.add(k) == 7));
            a.dealloc(r, Layout::from_size_align(100_000, 8).unwrap());
            for (p, l) in live {
                a.dealloc(p, l);
            }
        }
    }
}
