//! `t:removeNulls`: deletes every NUL (0x00) byte.

use std::borrow::Cow;

pub fn remove_nulls(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.contains(&0) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().copied().filter(|&b| b != 0).collect())
}
