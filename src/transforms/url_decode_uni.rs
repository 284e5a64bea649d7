//! `t:urlDecodeUni`: like `urlDecode`, plus the IIS `%uHHHH` form (`u` or
//! `U`). A `%uHHHH` escape becomes one byte: the low byte of the code unit,
//! except that full-width ASCII U+FF01..U+FF5E maps to 0x21..0x7E
//! (libmodsecurity without a `SecUnicodeMapFile`). An invalid or truncated
//! `%u` escape keeps the two bytes `%u` and continues after them.

use super::{is_hex, unicode_low_byte, x2c, LazyOut};
use std::borrow::Cow;

pub fn url_decode_uni(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.iter().any(|&b| b == b'%' || b == b'+') {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    loop {
        i = out.copy_run(input, i, |b| b == b'%' || b == b'+');
        let Some(&b) = input.get(i) else { break };
        match b {
            b'%' => {
                let next = input.get(i + 1).copied();
                if matches!(next, Some(b'u') | Some(b'U')) {
                    match input.get(i + 2..i + 6) {
                        Some(&[h1, h2, h3, h4])
                            if is_hex(h1) && is_hex(h2) && is_hex(h3) && is_hex(h4) =>
                        {
                            out.push(unicode_low_byte(h1, h2, h3, h4));
                            i += 6;
                        }
                        _ => {
                            // Invalid or not enough data: keep "%u".
                            out.push(b'%');
                            out.push(next.unwrap_or(b'u'));
                            i += 2;
                        }
                    }
                } else {
                    match (next, input.get(i + 2)) {
                        (Some(h), Some(&l)) if is_hex(h) && is_hex(l) => {
                            out.push(x2c(h, l));
                            i += 3;
                        }
                        _ => {
                            out.push(b'%');
                            i += 1;
                        }
                    }
                }
            }
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
