//! `t:trimRight`: removes trailing C-locale whitespace.

use super::{is_c_space, sub_slice};
use std::borrow::Cow;

pub fn trim_right(input: &[u8]) -> Cow<'_, [u8]> {
    let end = input
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(0, |p| p + 1);
    sub_slice(input, 0, end)
}
