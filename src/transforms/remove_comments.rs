//! `t:removeComments`: removes `/* ... */` and `<!-- ... -->` comments; `--`
//! or `#` outside a comment truncates the value there. An unterminated
//! comment is replaced by a single space.
//!
//! Follows current libmodsecurity (the fix that stopped blindly copying the
//! byte after a comment terminator, so `SELECT/**//**/UNION` ->
//! `SELECTUNION`).

use super::LazyOut;
use std::borrow::Cow;

pub fn remove_comments(input: &[u8]) -> Cow<'_, [u8]> {
    if !input
        .iter()
        .any(|&b| matches!(b, b'/' | b'<' | b'-' | b'#'))
    {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let at = |k: usize| input.get(k).copied();
    let mut in_comment = false;
    let mut i = 0;
    while let Some(b) = at(i) {
        if !in_comment {
            if b == b'/' && at(i + 1) == Some(b'*') {
                in_comment = true;
                i += 2;
            } else if b == b'<' && input.get(i + 1..i + 4) == Some(b"!--") {
                in_comment = true;
                i += 4;
            } else if (b == b'-' && at(i + 1) == Some(b'-')) || b == b'#' {
                // SQL / shell line comment: drop the rest of the value.
                break;
            } else {
                out.push(b);
                i += 1;
            }
        } else if b == b'*' && at(i + 1) == Some(b'/') {
            in_comment = false;
            i += 2;
        } else if b == b'-' && input.get(i + 1..i + 3) == Some(b"->") {
            in_comment = false;
            i += 3;
        } else {
            i += 1;
        }
    }
    if in_comment {
        out.push(b' ');
    }
    out.finish()
}
