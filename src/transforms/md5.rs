//! `t:md5`: the raw 16-byte MD5 digest of the input (binary, as
//! libmodsecurity; chain with `t:hexEncode` for text).

use super::owned_or_borrowed;
use std::borrow::Cow;

pub fn md5(input: &[u8]) -> Cow<'_, [u8]> {
    owned_or_borrowed(input, digest(input).to_vec())
}

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// MD5 (RFC 1321).
pub(crate) fn digest(data: &[u8]) -> [u8; 16] {
    let mut st: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    let bit_len = (data.len() as u64).wrapping_mul(8);

    let mut process = |block: &[u8]| {
        let mut m = [0u32; 16];
        for (slot, word) in m.iter_mut().zip(block.chunks_exact(4)) {
            if let [a, b, c, d] = word {
                *slot = u32::from_le_bytes([*a, *b, *c, *d]);
            }
        }
        let [mut a, mut b, mut c, mut d] = st;
        for (i, (&shift, &k)) in S.iter().zip(K.iter()).enumerate() {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f
                .wrapping_add(a)
                .wrapping_add(k)
                .wrapping_add(m.get(g).copied().unwrap_or(0));
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(shift));
        }
        for (sv, v) in st.iter_mut().zip([a, b, c, d]) {
            *sv = sv.wrapping_add(v);
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
        dst.copy_from_slice(&bit_len.to_le_bytes());
    }
    for block in tail.get(..tail_len).unwrap_or(&[]).chunks_exact(64) {
        process(block);
    }

    let mut out = [0u8; 16];
    for (dst, word) in out.chunks_exact_mut(4).zip(st) {
        dst.copy_from_slice(&word.to_le_bytes());
    }
    out
}
