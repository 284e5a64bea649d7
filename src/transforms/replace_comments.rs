//! `t:replaceComments`: each `/* ... */` comment becomes a single space; an
//! unterminated comment also becomes a single space. A stray `*/` is kept.

use super::LazyOut;
use std::borrow::Cow;

pub fn replace_comments(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.windows(2).any(|w| w == b"/*") {
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
            } else {
                out.push(b);
                i += 1;
            }
        } else if b == b'*' && at(i + 1) == Some(b'/') {
            in_comment = false;
            out.push(b' ');
            i += 2;
        } else {
            i += 1;
        }
    }
    if in_comment {
        out.push(b' ');
    }
    out.finish()
}
