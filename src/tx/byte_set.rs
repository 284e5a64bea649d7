//! The set of bytes a value holds, 256 bits: what the memo tables (`cache`) test against
//! transformation triggers, and the replay (`replay`) computes once per changed header value.

/// The set of bytes in `v` (for transformation triggers).
pub(crate) fn byte_set(v: &[u8]) -> [u64; 4] {
    let mut s = [0u64; 4];
    if v.len() > 4096 {
        // A large value: a flag per byte value (no chain of dependent updates), folded after.
        let mut seen = [false; 256];
        for &b in v {
            if let Some(f) = seen.get_mut(usize::from(b)) {
                *f = true;
            }
        }
        for (b, _) in seen.iter().enumerate().filter(|(_, &f)| f) {
            if let Some(w) = s.get_mut(b >> 6) {
                *w |= 1u64 << (b & 63);
            }
        }
        return s;
    }
    for &b in v {
        if let Some(w) = s.get_mut(usize::from(b >> 6)) {
            *w |= 1u64 << (b & 63);
        }
    }
    s
}
