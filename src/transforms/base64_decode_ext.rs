//! `t:base64DecodeExt`: forgiving base64 decoding (libmodsecurity
//! `decode_forgiven_engine`):
//!
//! * both alphabets: `+`/`-` are 62, `/`/`_` are 63;
//! * every other non-alphabet byte (whitespace, `.`, NUL, ...) is skipped;
//! * trailing partial groups decode as far as they go (`YQ` -> `a`);
//! * a `=` that is not followed by another `=` while exactly one symbol of
//!   the current group has been read makes the result empty, as does a
//!   value ending in `=` in that state.
//!
//! (libmodsecurity's final check compares the last *decoded symbol value*
//! with '=', so a value ending in the symbol `9` in that state also comes
//! out empty; that accident is not reproduced: only a literal `=` counts.)

use super::owned_or_borrowed;
use std::borrow::Cow;

#[inline]
fn dec(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

pub fn base64_decode_ext(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Vec<u8> = Vec::with_capacity(input.len() / 4 * 3 + 3);
    let mut i: usize = 0; // symbols consumed
    let mut acc: u8 = 0; // partially assembled byte
    let mut last_was_pad = false;
    for (pos, &b) in input.iter().enumerate() {
        if b == b'=' {
            last_was_pad = true;
            if input.get(pos + 1) != Some(&b'=') && i % 4 == 1 {
                return owned_or_borrowed(input, Vec::new());
            }
            continue;
        }
        let Some(ch) = dec(b) else {
            last_was_pad = false;
            continue;
        };
        last_was_pad = false;
        match i % 4 {
            0 => acc = ch << 2,
            1 => {
                out.push(acc | (ch >> 4));
                acc = (ch & 0x0f) << 4;
            }
            2 => {
                out.push(acc | (ch >> 2));
                acc = (ch & 0x03) << 6;
            }
            _ => out.push(acc | ch),
        }
        i += 1;
    }
    if last_was_pad && i % 4 == 1 {
        return owned_or_borrowed(input, Vec::new());
    }
    owned_or_borrowed(input, out)
}
