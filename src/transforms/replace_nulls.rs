//! `t:replaceNulls`: replaces every NUL (0x00) byte with a space.

use std::borrow::Cow;

pub fn replace_nulls(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.contains(&0) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(
        input
            .iter()
            .map(|&b| if b == 0 { b' ' } else { b })
            .collect(),
    )
}
