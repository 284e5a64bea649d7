//! `t:trim`: removes leading and trailing C-locale whitespace.

use super::{is_c_space, sub_slice};
use std::borrow::Cow;

pub fn trim(input: &[u8]) -> Cow<'_, [u8]> {
    let start = input
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(input.len());
    let end = input
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(start, |p| p + 1);
    sub_slice(input, start, end.max(start))
}
