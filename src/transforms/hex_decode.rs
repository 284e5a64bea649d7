//! `t:hexDecode`: decodes pairs of hex digits. As in libmodsecurity, pairs
//! are not validated (non-hex characters go through ModSecurity's `x2c`
//! arithmetic, e.g. "0z" -> '#') and an odd trailing character is dropped.

use super::{owned_or_borrowed, x2c};
use std::borrow::Cow;

pub fn hex_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let out: Vec<u8> = input
        .chunks_exact(2)
        .map(|p| match p {
            [hi, lo] => x2c(*hi, *lo),
            _ => 0,
        })
        .collect();
    owned_or_borrowed(input, out)
}
