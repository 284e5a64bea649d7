//! `t:length`: the decimal byte length of the input.

use super::owned_or_borrowed;
use std::borrow::Cow;

pub fn length(input: &[u8]) -> Cow<'_, [u8]> {
    owned_or_borrowed(input, input.len().to_string().into_bytes())
}
