//! `memcmp`, `memcpy`, `memmove` and `memset` for the wasm build. wasi-libc's `memcmp`
//! compares byte by byte (musl's loop), and every
//! byte-slice comparison of the engine ends there (`==` on slices and strings, map keys, the
//! replay's comparison of the request with the last one: a few KB per request); this one
//! compares 8 bytes at a time. Defined here, they are linked instead of libc's.

/// `memcmp`: the sign of the first differing byte (unsigned) of `a` and `b` over `n` bytes, 0
/// when none differs.
///
/// # Safety
/// `a` and `b` must be readable for `n` bytes.
#[inline(always)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, both readable for n bytes.
        let (x, y) = unsafe { (a.add(i).cast::<u64>().read_unaligned(), b.add(i).cast::<u64>().read_unaligned()) };
        if x != y {
            // Little-endian (wasm, x86): the lowest differing byte of the words comes first.
            let k = ((u64::from_le(x) ^ u64::from_le(y)).trailing_zeros() / 8) as usize;
            // SAFETY: i + k < n.
            return unsafe { i32::from(*a.add(i + k)) - i32::from(*b.add(i + k)) };
        }
        i += 8;
    }
    while i < n {
        // SAFETY: i < n.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// # Safety
/// `a` and `b` must be readable for `n` bytes (the C contract).
#[cfg(target_arch = "wasm32")]
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { compare(a, b, n) }
}

/// Copies `n` bytes (at most 32) from `src` to `dst` with every load before any store, so
/// the ranges may overlap: straight-line code, no loop (a copy loop would be turned back into
/// a call).
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, `n <= 32`.
#[inline(always)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) unsafe fn copy_small(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY (every access below): the offsets stay within the n bytes.
    unsafe {
        if n >= 16 {
            let (a, b) = (src.cast::<u64>().read_unaligned(), src.add(8).cast::<u64>().read_unaligned());
            let (c, d) = (src.add(n - 16).cast::<u64>().read_unaligned(), src.add(n - 8).cast::<u64>().read_unaligned());
            dst.cast::<u64>().write_unaligned(a);
            dst.add(8).cast::<u64>().write_unaligned(b);
            dst.add(n - 16).cast::<u64>().write_unaligned(c);
            dst.add(n - 8).cast::<u64>().write_unaligned(d);
        } else if n >= 8 {
            let (a, b) = (src.cast::<u64>().read_unaligned(), src.add(n - 8).cast::<u64>().read_unaligned());
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let (a, b) = (src.cast::<u32>().read_unaligned(), src.add(n - 4).cast::<u32>().read_unaligned());
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else if n > 0 {
            let (a, b, c) = (*src, *src.add(n / 2), *src.add(n - 1));
            *dst = a;
            *dst.add(n / 2) = b;
            *dst.add(n - 1) = c;
        }
    }
}

/// Largest copy or fill done in wasm code; longer ones are `memory.copy` / `memory.fill`,
/// which V8 runs as a call out of the module (~60 instructions before the first byte).
#[cfg(target_arch = "wasm32")]
const SMALL: usize = 32;

// The engine is built without the bulk-memory feature (.cargo/config.toml), so that its
// copies and fills of unknown length are calls to these instead of `memory.copy` and
// `memory.fill` (measured: ~320 per CRS GET, ~60 instructions each in V8's call out); these
// three have the feature, for the long ones.

/// # Safety
/// The C contract of `memcpy`.
#[cfg(target_arch = "wasm32")]
#[no_mangle]
#[target_feature(enable = "bulk-memory")]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe {
        if n <= SMALL {
            copy_small(dst, src, n);
        } else if n <= 2 * SMALL {
            // Not overlapping: two parts.
            copy_small(dst, src, SMALL);
            copy_small(dst.add(SMALL), src.add(SMALL), n - SMALL);
        } else {
            core::ptr::copy_nonoverlapping(src, dst, n);
        }
    }
    dst
}

/// # Safety
/// The C contract of `memmove`.
#[cfg(target_arch = "wasm32")]
#[no_mangle]
#[target_feature(enable = "bulk-memory")]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract (copy_small loads everything before storing).
    unsafe {
        if n <= SMALL {
            copy_small(dst, src, n);
        } else {
            core::ptr::copy(src, dst, n);
        }
    }
    dst
}

/// # Safety
/// The C contract of `memset`.
#[cfg(target_arch = "wasm32")]
#[no_mangle]
#[target_feature(enable = "bulk-memory")]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe {
        // The 32 bytes of `c` are made in each branch, not once before them: an array whose
        // address is taken lives on wasm's stack in linear memory, and made up front it cost
        // every fill that frame (measured: CRS GET module +11 K instructions in Envoy).
        if n <= SMALL {
            let w = u64::from(c as u8) * 0x0101_0101_0101_0101;
            let src = [w; 4];
            copy_small(dst, src.as_ptr().cast::<u8>(), n);
        } else if n <= 2 * SMALL {
            let src = [u64::from(c as u8) * 0x0101_0101_0101_0101; 4];
            copy_small(dst, src.as_ptr().cast::<u8>(), SMALL);
            copy_small(dst.add(SMALL), src.as_ptr().cast::<u8>(), n - SMALL);
        } else {
            core::ptr::write_bytes(dst, c as u8, n);
        }
    }
    dst
}

#[cfg(test)]
mod tests {
    use super::{compare, copy_small};

    #[test]
    fn small_copies_are_exact_at_every_length_and_overlap() {
        for n in 0..=32usize {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let mut dst = vec![0xeeu8; n + 2];
            unsafe { copy_small(dst.as_mut_ptr().add(1), src.as_ptr(), n) };
            assert_eq!(&dst[1..n + 1], &src[..], "{n} bytes");
            assert_eq!((dst[0], dst[n + 1]), (0xee, 0xee), "{n} bytes: nothing outside written");
            // Overlapping both ways (memmove): the result is the source as it was.
            for shift in 1..4usize {
                let buf: Vec<u8> = (0..n + shift).map(|i| i as u8).collect();
                let mut fwd = buf.clone();
                unsafe { copy_small(fwd.as_mut_ptr(), fwd.as_ptr().add(shift), n) };
                assert_eq!(&fwd[..n], &buf[shift..shift + n], "{n} bytes down by {shift}");
                let mut back = buf.clone();
                unsafe { copy_small(back.as_mut_ptr().add(shift), back.as_ptr(), n) };
                assert_eq!(&back[shift..shift + n], &buf[..n], "{n} bytes up by {shift}");
            }
        }
    }

    /// The sign `memcmp` must give: the first differing byte decides, unsigned.
    fn expect(a: &[u8], b: &[u8]) -> i32 {
        match a.cmp(b) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }
    }

    #[test]
    fn compares_like_memcmp_at_every_length_and_position() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(unsafe { compare(a.as_ptr(), a.clone().as_ptr(), n) }, 0, "equal, {n} bytes");
            for at in 0..n {
                for (d, big) in [(1u8, false), (0x80, true), (0xff, true)] {
                    let mut b = a.clone();
                    b[at] = b[at].wrapping_add(d);
                    let got = unsafe { compare(a.as_ptr(), b.as_ptr(), n) }.signum();
                    assert_eq!(got, expect(&a, &b), "{n} bytes, differing at {at} by {d} (high bit {big})");
                    // A later difference does not decide.
                    if at + 1 < n {
                        let mut c = b.clone();
                        c[n - 1] ^= 0x55;
                        let got = unsafe { compare(a.as_ptr(), c.as_ptr(), n) }.signum();
                        assert_eq!(got, expect(&a, &c), "{n} bytes, first difference at {at}");
                    }
                }
            }
        }
    }
}
