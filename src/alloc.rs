//! A size-class allocator for the wasm VM (registered as the global allocator by the
//! proxy-wasm module and the CLI's wasm build; native builds keep the system allocator).
//!
//! A CRS transaction makes about a thousand small allocations (memo entries, value lists,
//! transformed values) and frees them all at its end; with the default allocator of
//! wasm32-wasip1 (wasi-libc's dlmalloc) each pair costs a few hundred instructions. Here a
//! block of at most [`MAX_SMALL`] bytes comes from a free list per 16-byte size class (or
//! is cut from a 64 KiB slab) and goes back to that list: a few instructions each way.
//! Larger blocks, and alignments over 16, go to the system allocator.
//!
//! Memory: freed small blocks stay in their class's list for the next transaction (wasm
//! memory never shrinks anyway), so the small-block memory of a VM is bounded by the peak
//! live memory of each class summed over the 64 classes; a slab's tail that is too short for
//! a request (< 1 KiB of 64 KiB) is left unused.
//!
//! Not thread-safe: [`SizeClasses`] is `Sync` only on wasm32 without the atomics feature,
//! where a module has exactly one thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;

/// Size-class granularity and the alignment every small block has.
const GRAIN: usize = 16;
/// Largest size served from the size classes.
pub const MAX_SMALL: usize = 1024;
const CLASSES: usize = MAX_SMALL / GRAIN;
/// Bytes taken from the system allocator at once for small blocks.
const SLAB: usize = 64 * 1024;

struct State {
    /// Head of each class's free list; a free block's first word points to the next one.
    free: [*mut u8; CLASSES],
    /// The unused part of the current slab.
    bump: *mut u8,
    end: *mut u8,
}

/// See the module documentation.
pub struct SizeClasses {
    state: UnsafeCell<State>,
}

// SAFETY: a wasm32 module without the atomics feature runs on one thread: the state is
// never accessed concurrently.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for SizeClasses {}

impl Default for SizeClasses {
    fn default() -> Self {
        Self::new()
    }
}

impl SizeClasses {
    pub const fn new() -> SizeClasses {
        SizeClasses {
            state: UnsafeCell::new(State { free: [ptr::null_mut(); CLASSES], bump: ptr::null_mut(), end: ptr::null_mut() }),
        }
    }
}

/// The class of a layout (0 for 1..=16 bytes, 1 for 17..=32, ...), `None` for the system
/// allocator.
#[inline(always)]
fn class(size: usize, align: usize) -> Option<usize> {
    if size <= MAX_SMALL && align <= GRAIN {
        Some(size.max(1).div_ceil(GRAIN) - 1)
    } else {
        None
    }
}

unsafe impl GlobalAlloc for SizeClasses {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout.size(), layout.align()) else {
            return System.alloc(layout);
        };
        let s = &mut *self.state.get();
        // SAFETY: `class` returns at most CLASSES - 1.
        let head = s.free.get_unchecked_mut(c);
        if !head.is_null() {
            let block = *head;
            *head = *(block as *mut *mut u8);
            return block;
        }
        let size = (c + 1) * GRAIN;
        if (s.end as usize) - (s.bump as usize) < size {
            let slab = System.alloc(Layout::from_size_align_unchecked(SLAB, GRAIN));
            if slab.is_null() {
                return ptr::null_mut();
            }
            s.bump = slab;
            s.end = slab.add(SLAB);
        }
        let block = s.bump;
        s.bump = block.add(size);
        block
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(c) = class(layout.size(), layout.align()) else {
            return System.dealloc(block, layout);
        };
        let s = &mut *self.state.get();
        let head = s.free.get_unchecked_mut(c);
        *(block as *mut *mut u8) = *head;
        *head = block;
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (class(layout.size(), layout.align()), class(new_size, layout.align())) {
            // The block already has room for the new size.
            (Some(a), Some(b)) if a == b => block,
            (None, None) => System.realloc(block, layout, new_size),
            _ => {
                let new = Layout::from_size_align_unchecked(new_size, layout.align());
                let moved = self.alloc(new);
                if !moved.is_null() {
                    ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                    self.dealloc(block, layout);
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn classes() {
        assert_eq!(class(1, 1), Some(0));
        assert_eq!(class(16, 8), Some(0));
        assert_eq!(class(17, 1), Some(1));
        assert_eq!(class(1024, 16), Some(CLASSES - 1));
        assert_eq!(class(1025, 1), None);
        assert_eq!(class(8, 32), None);
    }

    /// Random allocations, reallocations and frees of small and large blocks: every live
    /// block keeps its contents (so no two overlap), is aligned as asked, and freed blocks
    /// are reused (the slab count stays at the peak).
    #[test]
    fn blocks_are_disjoint_aligned_and_reused() {
        let a = SizeClasses::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let fill = |p: *mut u8, n: usize, tag: u8| unsafe { ptr::write_bytes(p, tag, n) };
        let check = |p: *mut u8, n: usize, tag: u8| unsafe { std::slice::from_raw_parts(p, n).iter().all(|&b| b == tag) };
        let mut peak_small = 0usize;
        for round in 0..20_000u32 {
            let op = rng.next() % 10;
            if op < 5 || live.is_empty() {
                let size = match rng.next() % 10 {
                    0 => 1025 + (rng.next() % 5000) as usize,
                    _ => 1 + (rng.next() % 1024) as usize,
                };
                let align = [1, 2, 4, 8, 16, 32][(rng.next() % 6) as usize];
                let layout = Layout::from_size_align(size, align).unwrap();
                let p = unsafe { a.alloc(layout) };
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "alignment {align}");
                let tag = round as u8;
                fill(p, size, tag);
                live.push((p, layout, tag));
            } else if op < 8 {
                let i = (rng.next() as usize) % live.len();
                let (p, layout, tag) = live.swap_remove(i);
                assert!(check(p, layout.size(), tag), "contents of a live block changed");
                unsafe { a.dealloc(p, layout) };
            } else {
                let i = (rng.next() as usize) % live.len();
                let (p, layout, tag) = live[i];
                assert!(check(p, layout.size(), tag));
                let new_size = 1 + (rng.next() % 2048) as usize;
                let q = unsafe { a.realloc(p, layout, new_size) };
                assert!(!q.is_null());
                let kept = layout.size().min(new_size);
                assert!(check(q, kept, tag), "realloc lost contents");
                let new_layout = Layout::from_size_align(new_size, layout.align()).unwrap();
                fill(q, new_size, tag);
                live[i] = (q, new_layout, tag);
            }
            let small: usize = live.iter().filter(|(_, l, _)| class(l.size(), l.align()).is_some()).map(|(_, l, _)| l.size()).sum();
            peak_small = peak_small.max(small);
        }
        for (p, layout, tag) in live.drain(..) {
            assert!(check(p, layout.size(), tag));
            unsafe { a.dealloc(p, layout) };
        }
        // Everything small is back in the free lists: allocating the same sizes again takes
        // no new slab.
        let (bump, end, counts) = {
            let s = unsafe { &*a.state.get() };
            let counts: Vec<usize> = s
                .free
                .iter()
                .map(|&head| {
                    let (mut n, mut p) = (0, head);
                    while !p.is_null() {
                        n += 1;
                        p = unsafe { *(p as *mut *mut u8) };
                    }
                    n
                })
                .collect();
            (s.bump, s.end, counts)
        };
        let mut again = Vec::new();
        for (c, n) in counts.into_iter().enumerate() {
            let layout = Layout::from_size_align((c + 1) * GRAIN, 1).unwrap();
            for _ in 0..n {
                again.push((unsafe { a.alloc(layout) }, layout));
            }
        }
        let s = unsafe { &*a.state.get() };
        assert_eq!((s.bump, s.end), (bump, end), "freed blocks were not reused");
        assert!(peak_small > 0);
        for (p, layout) in again {
            unsafe { a.dealloc(p, layout) };
        }
    }
}
