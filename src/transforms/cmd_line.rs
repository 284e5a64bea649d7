//! `t:cmdLine` (libmodsecurity semantics):
//!
//! * deletes `"`, `'`, `\` and `^`;
//! * each run of space, `,`, `;`, \t, \r, \n becomes a single space (the
//!   deleted characters above do not end a run);
//! * deletes a space immediately before `/` or `(`;
//! * lower-cases ASCII letters.

use super::LazyOut;
use std::borrow::Cow;

pub fn cmd_line(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = LazyOut::new(input);
    let mut space = false;
    for &a in input {
        match a {
            b'"' | b'\'' | b'\\' | b'^' => {}
            b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                space = false;
                out.push(a);
            }
            _ => {
                out.push(a.to_ascii_lowercase());
                space = false;
            }
        }
    }
    out.finish()
}
