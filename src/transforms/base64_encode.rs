//! `t:base64Encode`: standard alphabet, `=` padding, no line breaks.

use super::owned_or_borrowed;
use std::borrow::Cow;

#[inline]
fn sym(v: u32) -> u8 {
    let v = (v & 0x3f) as u8;
    match v {
        0..=25 => b'A' + v,
        26..=51 => b'a' + (v - 26),
        52..=61 => b'0' + (v - 52),
        62 => b'+',
        _ => b'/',
    }
}

pub fn base64_encode(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Vec::with_capacity(input.len().div_ceil(3).saturating_mul(4));
    for chunk in input.chunks(3) {
        let b0 = u32::from(chunk.first().copied().unwrap_or(0));
        let b1 = u32::from(chunk.get(1).copied().unwrap_or(0));
        let b2 = u32::from(chunk.get(2).copied().unwrap_or(0));
        let x = (b0 << 16) | (b1 << 8) | b2;
        out.push(sym(x >> 18));
        out.push(sym(x >> 12));
        out.push(if chunk.len() > 1 { sym(x >> 6) } else { b'=' });
        out.push(if chunk.len() > 2 { sym(x) } else { b'=' });
    }
    owned_or_borrowed(input, out)
}
