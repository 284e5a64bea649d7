//! `t:removeWhitespace`: deletes C-locale whitespace (space, \t, \n, \v, \f,
//! \r) and the non-breaking space byte 0xA0.

use super::is_c_space;
use std::borrow::Cow;

const NBSP: u8 = 0xa0;

#[inline]
fn is_ws(b: u8) -> bool {
    is_c_space(b) || b == NBSP
}

pub fn remove_whitespace(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.iter().any(|&b| is_ws(b)) {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().copied().filter(|&b| !is_ws(b)).collect())
}
