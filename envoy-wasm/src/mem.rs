//! `memcmp` for the wasm build. wasi-libc's compares byte by byte (musl's loop), and every
//! byte-slice comparison of the engine ends there (`==` on slices and strings, map keys, the
//! replay's comparison of the request with the last one: a few KB per request); this one
//! compares 8 bytes at a time. (memcpy and memset need nothing: with bulk memory they are
//! `memory.copy` and `memory.fill`.) Defined here, it is linked instead of libc's.

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

#[cfg(test)]
mod tests {
    use super::compare;

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
