//! `t:compressWhitespace`: every run of C-locale whitespace (space, \t, \n,
//! \v, \f, \r) becomes a single space. As in libmodsecurity v3 (which uses
//! `isspace` only), NBSP (0xA0) is not whitespace here.

use super::{is_c_space, LazyOut};
use std::borrow::Cow;

pub fn compress_whitespace(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = LazyOut::new(input);
    let mut in_space = false;
    for &b in input {
        if is_c_space(b) {
            if !in_space {
                in_space = true;
                out.push(b' ');
            }
        } else {
            in_space = false;
            out.push(b);
        }
    }
    out.finish()
}
