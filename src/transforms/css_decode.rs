//! `t:cssDecode` (CSS 2 escapes, libmodsecurity semantics):
//!
//! * `\` + 1..6 hex digits -> one byte: the last two digits (one digit: its
//!   value). For 4 digits, 5 digits starting with `0` and 6 digits starting
//!   with `00`, full-width U+FF01..U+FF5E maps to ASCII. One whitespace
//!   character after a hex escape is swallowed.
//! * `\` + newline -> removed (line continuation).
//! * `\` + any other character -> that character.
//! * A trailing lone backslash is removed.

use super::{is_c_space, is_hex, x2c, xdigit, LazyOut};
use std::borrow::Cow;

pub fn css_decode(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.contains(&b'\\') {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    loop {
        i = out.copy_run(input, i, |b| b == b'\\');
        if i >= input.len() {
            break;
        }
        i += 1; // the backslash itself is never kept
        let Some(&n) = input.get(i) else {
            break;
        };
        let mut j = 0;
        while j < 6 && input.get(i + j).copied().is_some_and(is_hex) {
            j += 1;
        }
        if j == 0 {
            if n != b'\n' {
                out.push(n);
            }
            i += 1;
            continue;
        }
        let at = |k: usize| input.get(i + k).copied().unwrap_or(0);
        let last2 = || x2c(at(j - 2), at(j - 1));
        let (mut c, fullcheck) = match j {
            1 => (xdigit(at(0)), false),
            2 | 3 => (last2(), false),
            4 => (last2(), true),
            5 => (last2(), at(0) == b'0'),
            _ => (last2(), at(0) == b'0' && at(1) == b'0'),
        };
        if fullcheck
            && c > 0x00
            && c < 0x5f
            && (at(j - 3) | 0x20) == b'f'
            && (at(j - 4) | 0x20) == b'f'
        {
            c += 0x20;
        }
        out.push(c);
        if input.get(i + j).copied().is_some_and(is_c_space) {
            j += 1;
        }
        i += j;
    }
    out.finish()
}
