//! `t:trimLeft`: removes leading C-locale whitespace.

use super::{is_c_space, sub_slice};
use std::borrow::Cow;

pub fn trim_left(input: &[u8]) -> Cow<'_, [u8]> {
    let start = input
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(input.len());
    sub_slice(input, start, input.len())
}
