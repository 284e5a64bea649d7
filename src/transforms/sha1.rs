//! `t:sha1`: the raw 20-byte SHA-1 digest of the input (binary, as
//! libmodsecurity; chain with `t:hexEncode` for text).

use super::owned_or_borrowed;
use std::borrow::Cow;

pub fn sha1(input: &[u8]) -> Cow<'_, [u8]> {
    owned_or_borrowed(input, digest(input).to_vec())
}

/// SHA-1 (FIPS 180-4).
pub(crate) fn digest(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    let bit_len = (data.len() as u64).wrapping_mul(8);

    let mut process = |block: &[u8]| {
        let mut w = [0u32; 80];
        for (t, word) in block.chunks_exact(4).enumerate().take(16) {
            if let (Some(slot), [a, b, c, d]) = (w.get_mut(t), word) {
                *slot = u32::from_be_bytes([*a, *b, *c, *d]);
            }
        }
        for t in 16..80 {
            let wv = |k: usize| w.get(k).copied().unwrap_or(0);
            let v = (wv(t - 3) ^ wv(t - 8) ^ wv(t - 14) ^ wv(t - 16)).rotate_left(1);
            if let Some(slot) = w.get_mut(t) {
                *slot = v;
            }
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, &wt) in w.iter().enumerate() {
            let (f, k) = match t {
                0..=19 => ((b & c) | (!b & d), 0x5a82_7999),
                20..=39 => (b ^ c ^ d, 0x6ed9_eba1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
                _ => (b ^ c ^ d, 0xca62_c1d6),
            };
            let tmp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = tmp;
        }
        for (hv, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hv = hv.wrapping_add(v);
        }
    };

    let mut blocks = data.chunks_exact(64);
    for block in &mut blocks {
        process(block);
    }
    let rem = blocks.remainder();
    let mut tail = [0u8; 128];
    let tail_len = if rem.len() < 56 { 64 } else { 128 };
    if let Some(dst) = tail.get_mut(..rem.len()) {
        dst.copy_from_slice(rem);
    }
    if let Some(slot) = tail.get_mut(rem.len()) {
        *slot = 0x80;
    }
    if let Some(dst) = tail.get_mut(tail_len - 8..tail_len) {
        dst.copy_from_slice(&bit_len.to_be_bytes());
    }
    for block in tail.get(..tail_len).unwrap_or(&[]).chunks_exact(64) {
        process(block);
    }

    let mut out = [0u8; 20];
    for (dst, word) in out.chunks_exact_mut(4).zip(h) {
        dst.copy_from_slice(&word.to_be_bytes());
    }
    out
}
