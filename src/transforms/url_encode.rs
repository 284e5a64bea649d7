//! `t:urlEncode`: space becomes `+`; ASCII letters, digits and `*` are kept;
//! every other byte becomes `%hh` with lower-case hex (libmodsecurity).

use super::{hex_lower, LazyOut};
use std::borrow::Cow;

#[inline]
fn keep(b: u8) -> bool {
    b == b'*' || b.is_ascii_alphanumeric()
}

pub fn url_encode(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().all(|&b| keep(b)) {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    for &b in input {
        if b == b' ' {
            out.push(b'+');
        } else if keep(b) {
            out.push(b);
        } else {
            out.push(b'%');
            out.push(hex_lower(b >> 4));
            out.push(hex_lower(b));
        }
    }
    out.finish()
}
