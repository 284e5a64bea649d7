//! `t:removeCommentsChar`: deletes the comment markers `/*`, `*/`, `<!--`,
//! `-->`, `--` and `#` (the text between markers is kept). Matching restarts
//! right after a deleted marker, as libmodsecurity's erase loop does.

use super::LazyOut;
use std::borrow::Cow;

pub fn remove_comments_char(input: &[u8]) -> Cow<'_, [u8]> {
    if !input
        .iter()
        .any(|&b| matches!(b, b'/' | b'*' | b'<' | b'-' | b'#'))
    {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        let rest = input.get(i..).unwrap_or(&[]);
        let skip = if rest.starts_with(b"/*") || rest.starts_with(b"*/") {
            2
        } else if rest.starts_with(b"<!--") {
            4
        } else if rest.starts_with(b"-->") {
            3
        } else if rest.starts_with(b"--") {
            2
        } else if b == b'#' {
            1
        } else {
            0
        };
        if skip == 0 {
            out.push(b);
            i += 1;
        } else {
            i += skip;
        }
    }
    out.finish()
}
