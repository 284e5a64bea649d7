//! `t:parityEven7bit`: sets the high bit so that the byte has even parity.
//! As in libmodsecurity the parity is computed over all eight bits of the
//! input byte: odd popcount -> bit 7 set, even popcount -> bit 7 cleared.

use std::borrow::Cow;

#[inline]
fn even(b: u8) -> u8 {
    if b.count_ones() % 2 == 1 {
        b | 0x80
    } else {
        b & 0x7f
    }
}

pub fn parity_even_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().all(|&b| even(b) == b) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().map(|&b| even(b)).collect())
}
