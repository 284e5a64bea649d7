//! `t:escapeSeqDecode`: ANSI C escape sequences (libmodsecurity semantics):
//!
//! * `\a \b \f \n \r \t \v \\ \? \' \"` -> the character.
//! * `\xHH` / `\XHH` -> the byte.
//! * `\O`, `\OO`, `\OOO` (octal, up to three digits) -> the value truncated
//!   to a byte (`\666` -> 0xB6).
//! * Any other `\C` (including invalid `\x` forms) -> `C`.
//! * A trailing lone backslash is kept.

use super::{is_hex, x2c, LazyOut};
use std::borrow::Cow;

#[inline]
fn is_odigit(b: u8) -> bool {
    (b'0'..=b'7').contains(&b)
}

pub fn escape_seq_decode(input: &[u8]) -> Cow<'_, [u8]> {
    if !input.contains(&b'\\') {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&n) = input.get(i + 1) else {
            out.push(b);
            i += 1;
            continue;
        };
        let simple = match n {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' | b'?' | b'\'' | b'"' => Some(n),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            i += 2;
            continue;
        }
        if n == b'x' || n == b'X' {
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
            let mut v: u32 = 0;
            for &c in input.get(i + 1..i + 1 + j).unwrap_or(&[]) {
                v = v * 8 + u32::from(c - b'0');
            }
            out.push((v & 0xff) as u8);
            i += 1 + j;
            continue;
        }
        // Unrecognised: drop the backslash, keep the character.
        out.push(n);
        i += 2;
    }
    out.finish()
}
