//! The module's own allocator: mimalloc (the `mimalloc` crate, v3), not Envoy's tcmalloc.
//!
//! The engine allocates and frees a few thousand small blocks per request; through Envoy's
//! `malloc` (tcmalloc) they cost ~170 K instructions per realistic request, through mimalloc's
//! per-thread heaps ~57 K (`bench/instructions.py --shape realistic`, docs/native.md). Every
//! block the module allocates it also frees (Envoy only lends it buffers, and what the module
//! hands Envoy, its configurations and streams, comes back to it to be dropped), so the two
//! allocators never see each other's blocks.
//!
//! Two options keep Envoy's RSS what it is with tcmalloc: arenas are committed as they are used
//! (mimalloc's default commits a whole arena up front on Linux: +27 MiB idle), and freed pages go
//! back to the system at once rather than after a second.

use std::os::raw::{c_int, c_long};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc v3's `mi_option_e` (include/mimalloc.h of the libmimalloc-sys version in Cargo.lock;
// the test below checks them by their defaults).
const ARENA_EAGER_COMMIT: c_int = 4;
const PURGE_DELAY: c_int = 15;

extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    #[cfg(test)]
    fn mi_option_get(option: c_int) -> c_long;
}

/// Sets the options; first thing in `on_program_init`, before the module allocates.
pub fn configure() {
    // SAFETY: plain setters of mimalloc's option table, valid indices (see the test).
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_indices_are_mimallocs() {
        // SAFETY: getters of the option table.
        let (eager, delay) = unsafe { (mi_option_get(ARENA_EAGER_COMMIT), mi_option_get(PURGE_DELAY)) };
        // mimalloc v3's defaults (unless the environment sets them): 2 (commit arenas eagerly
        // where the OS overcommits) and 1000 ms.
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() && std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!((eager, delay), (2, 1000), "not mimalloc v3's option indices: update alloc.rs");
        }
        configure();
        // SAFETY: as above.
        assert_eq!(unsafe { (mi_option_get(ARENA_EAGER_COMMIT), mi_option_get(PURGE_DELAY)) }, (0, 0));
        let v: Vec<u8> = Vec::with_capacity(1 << 20);
        assert!(v.capacity() >= 1 << 20);
    }
}
