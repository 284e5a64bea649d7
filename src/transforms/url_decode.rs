//! `t:urlDecode`: `%HH` to the byte, `+` to space. Invalid or truncated
//! escapes (`%`, `%4`, `%zz`) are kept verbatim and scanning continues with
//! the byte after the `%` (libmodsecurity `urldecode_nonstrict_inplace`).

use super::{is_hex, x2c, LazyOut};
use std::borrow::Cow;

pub fn url_decode(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.iter().any(|&b| b == b'%' || b == b'+') {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    loop {
        i = out.copy_run(input, i, |b| b == b'%' || b == b'+');
        let Some(&b) = input.get(i) else { break };
        match b {
            b'%' => match (input.get(i + 1), input.get(i + 2)) {
                (Some(&h), Some(&l)) if is_hex(h) && is_hex(l) => {
                    out.push(x2c(h, l));
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out.finish()
}
