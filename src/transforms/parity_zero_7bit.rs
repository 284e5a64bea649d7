//! `t:parityZero7bit`: clears the high bit of every byte.

use std::borrow::Cow;

pub fn parity_zero_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().all(|&b| b < 0x80) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().map(|&b| b & 0x7f).collect())
}
