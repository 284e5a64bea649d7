//! `t:utf8toUnicode`: every multi-byte UTF-8 sequence becomes `%uHHHH`
//! (lower-case hex, at least four digits, more for code points above
//! U+FFFF, e.g. `%u1f37a`). Follows libmodsecurity's decoder:
//!
//! * ASCII bytes (including NUL) are copied.
//! * A lead byte whose continuation bytes are missing or invalid is dropped
//!   (the following bytes are then examined on their own).
//! * Stray continuation bytes (0x80..0xBF) and 0xF8..0xFF are copied as is.
//! * Lead bytes 0xF5..0xF7 are copied, then decoded as usual.
//! * Overlong forms and UTF-16 surrogates are still emitted as `%uHHHH`,
//!   followed by a copy of the lead byte (once per defect).
//!
//! (libmodsecurity additionally swallows NUL bytes through a C-string
//! artefact; here NUL is kept, like any other ASCII byte.)

use super::{hex_lower, LazyOut};
use std::borrow::Cow;

#[inline]
fn is_cont(b: Option<&u8>) -> bool {
    matches!(b, Some(&c) if c & 0xc0 == 0x80)
}

#[inline]
fn cont(b: Option<&u8>) -> u32 {
    b.map_or(0, |&c| u32::from(c & 0x3f))
}

fn push_escape(out: &mut LazyOut<'_>, d: u32) {
    out.push(b'%');
    out.push(b'u');
    // Number of hex digits needed, at least 4 (d < 0x200000 so at most 6).
    let mut digits = 4;
    while digits < 8 && (d >> (4 * digits)) != 0 {
        digits += 1;
    }
    for k in (0..digits).rev() {
        let nib = (d >> (4 * k)) & 0xf;
        out.push(hex_lower(nib as u8));
    }
}

pub fn utf8_to_unicode(input: &[u8]) -> Cow<'_, [u8]> {
    // Only lead bytes 0xC0..0xF7 can change anything.
    if !input.iter().any(|&b| (0xc0..=0xf7).contains(&b)) {
        return Cow::Borrowed(input);
    }
    let mut out = LazyOut::new(input);
    let mut i = 0;
    loop {
        // ASCII is copied as is (in bulk).
        i = out.copy_run(input, i, |b| b >= 0x80);
        let Some(&c) = input.get(i) else { break };
        // (sequence length, decoded code point) for a well-formed sequence.
        let mut seq: Option<(usize, u32)> = None;
        if c < 0x80 {
            out.push(c);
        } else if c & 0xe0 == 0xc0 {
            if is_cont(input.get(i + 1)) {
                let d = (u32::from(c & 0x1f) << 6) | cont(input.get(i + 1));
                seq = Some((2, d));
            }
        } else if c & 0xf0 == 0xe0 {
            if is_cont(input.get(i + 1)) && is_cont(input.get(i + 2)) {
                let d = (u32::from(c & 0x0f) << 12)
                    | (cont(input.get(i + 1)) << 6)
                    | cont(input.get(i + 2));
                seq = Some((3, d));
            }
        } else if c & 0xf8 == 0xf0 {
            if c >= 0xf5 {
                out.push(c);
            }
            if is_cont(input.get(i + 1)) && is_cont(input.get(i + 2)) && is_cont(input.get(i + 3)) {
                let d = (u32::from(c & 0x07) << 18)
                    | (cont(input.get(i + 1)) << 12)
                    | (cont(input.get(i + 2)) << 6)
                    | cont(input.get(i + 3));
                seq = Some((4, d));
            }
        } else {
            // Continuation byte without a lead, or 0xF8..0xFF.
            out.push(c);
        }
        match seq {
            Some((n, d)) => {
                push_escape(&mut out, d);
                if (0xd800..=0xdfff).contains(&d) {
                    out.push(c);
                }
                let overlong = match n {
                    2 => d < 0x80,
                    3 => d < 0x800,
                    _ => d < 0x10000,
                };
                if overlong {
                    out.push(c);
                }
                i += n;
            }
            None => i += 1,
        }
    }
    out.finish()
}
