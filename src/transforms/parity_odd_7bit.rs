//! `t:parityOdd7bit`: sets the high bit so that the byte has odd parity.
//! As in libmodsecurity the parity is computed over all eight bits of the
//! input byte: odd popcount -> bit 7 cleared, even popcount -> bit 7 set.

use std::borrow::Cow;

#[inline]
fn odd(b: u8) -> u8 {
    if b.count_ones() % 2 == 1 {
        b & 0x7f
    } else {
        b | 0x80
    }
}

pub fn parity_odd_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().all(|&b| odd(b) == b) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().map(|&b| odd(b)).collect())
}
