//! `t:hexEncode`: every byte as two lower-case hex digits.

use super::{hex_lower, owned_or_borrowed};
use std::borrow::Cow;

pub fn hex_encode(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Vec::with_capacity(input.len().saturating_mul(2));
    for &b in input {
        out.push(hex_lower(b >> 4));
        out.push(hex_lower(b));
    }
    owned_or_borrowed(input, out)
}
