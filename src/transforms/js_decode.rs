//! `t:jsDecode` (libmodsecurity semantics):
//!
//! * `\uHHHH` -> one byte: the low byte, full-width U+FF01..U+FF5E mapped to
//!   ASCII (`u` must be lower case).
//! * `\xHH` -> the byte (`x` must be lower case).
//! * `\O`, `\OO`, `\OOO` (octal) -> one byte; a three-digit form whose first
//!   digit is above 3 only uses two digits (`\666` -> "6" + "6").
//! * `\a \b \f \n \r \t \v` -> control characters; any other `\C` -> `C`
//!   (so invalid `\u`/`\x` forms lose only the backslash).
//! * A trailing lone backslash is kept.

use super::{is_hex, unicode_low_byte, x2c, LazyOut};
use std::borrow::Cow;

#[inline]
fn is_odigit(b: u8) -> bool {
    (b'0'..=b'7').contains(&b)
}

pub fn js_decode(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.contains(&b'\\') {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    loop {
        i = out.copy_run(input, i, |b| b == b'\\');
        let Some(&b) = input.get(i) else { break };
        let Some(&n) = input.get(i + 1) else {
            // Lone trailing backslash.
            out.push(b);
            i += 1;
            continue;
        };
        if n == b'u' {
            if let Some(&[h1, h2, h3, h4]) = input.get(i + 2..i + 6) {
                if is_hex(h1) && is_hex(h2) && is_hex(h3) && is_hex(h4) {
                    out.push(unicode_low_byte(h1, h2, h3, h4));
                    i += 6;
                    continue;
                }
            }
        } else if n == b'x' {
            if let Some(&[h, l]) = input.get(i + 2..i + 4) {
                if is_hex(h) && is_hex(l) {
                    out.push(x2c(h, l));
                    i += 4;
                    continue;
                }
            }
        } else if is_odigit(n) {
            let mut j = 1;
            while j < 3 && input.get(i + 1 + j).is_some_and(|&c| is_odigit(c)) {
                j += 1;
            }
            if j == 3 && n > b'3' {
                j = 2;
            }
            let mut v: u32 = 0;
            for &c in input.get(i + 1..i + 1 + j).unwrap_or(&[]) {
                v = v * 8 + u32::from(c - b'0');
            }
            out.push((v & 0xff) as u8);
            i += 1 + j;
            continue;
        }
        let c = match n {
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            other => other,
        };
        out.push(c);
        i += 2;
    }
    out.finish()
}
