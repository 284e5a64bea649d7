//! FxHash's mixing step as a `Hasher`: for keys an attacker does not choose (addresses,
//! rule numbers, keyword tables); request values are hashed with keyed SipHash instead.

use std::hash::Hasher;

/// A small, fast hasher for address keys (FxHash's mixing step).
#[derive(Default)]
pub(crate) struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        // The last 1-7 bytes as one word (the length is hashed before the bytes of a
        // slice or after a string's, so equal words from unequal tails do not collide),
        // read as two overlapping halves: a copy of a variable length is a call to
        // `memcpy` (in V8, out of the module to C's `memmove`) for every key hashed.
        let rest = chunks.remainder();
        if !rest.is_empty() {
            self.write_u64(tail_word(rest));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
}

/// 1-7 bytes as a word, the same for the same bytes and different for different bytes of
/// one length: the first and the last half-word of the bytes (overlapping when shorter than
/// a word), or the first and last byte of two or three.
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    let at = |i: usize| u64::from(rest.get(i).copied().unwrap_or(0));
    if n >= 4 {
        let half = |i: usize| at(i) | at(i + 1) << 8 | at(i + 2) << 16 | at(i + 3) << 24;
        half(0) | half(n - 4) << 32
    } else {
        at(0) | at(n / 2) << 8 | at(n.saturating_sub(1)) << 16
    }
}

#[cfg(test)]
mod fx_tests {
    use super::*;
    use std::hash::Hash;

    #[test]
    fn tail_words_tell_apart_every_tail_of_one_length() {
        let mut seen = std::collections::HashSet::new();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert!(seen.insert(tail_word(&[a, b])));
            }
        }
        // Lengths 1 and 3-7: each byte position changed alone changes the word.
        for n in [1usize, 3, 4, 5, 6, 7] {
            let base: Vec<u8> = (1..=n as u8).collect();
            let w = tail_word(&base);
            assert_eq!(w, tail_word(&base.clone()));
            for i in 0..n {
                let mut v = base.clone();
                v[i] ^= 0x80;
                assert_ne!(tail_word(&v), w, "length {n}, byte {i}");
            }
        }
    }

    #[test]
    fn keys_that_differ_in_their_tail_hash_apart() {
        let h = |s: &str| {
            let mut f = Fx::default();
            s.hash(&mut f);
            f.finish()
        };
        assert_eq!(h("header_name_920450_host"), h("header_name_920450_host"));
        assert_ne!(h("header_name_920450_host"), h("header_name_920450_hosu"));
        assert_ne!(h("anomaly_score_pl1"), h("anomaly_score_pl2"));
    }
}
