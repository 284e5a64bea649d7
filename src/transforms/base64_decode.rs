//! `t:base64Decode`: strict RFC 4648 decoding as libmodsecurity v3 does it
//! (through mbedTLS `mbedtls_base64_decode`):
//!
//! * the value is cut at its first NUL byte (C string);
//! * spaces are allowed only at the end of the value or before a line
//!   break; `\n` and `\r\n` are ignored;
//! * only the standard alphabet; at most two `=`, and only at the end;
//! * any violation makes the whole result empty (decoding error);
//! * a final incomplete group (2 or 3 symbols without padding) produces no
//!   bytes, as in mbedTLS 3.x.

use super::owned_or_borrowed;
use std::borrow::Cow;

#[inline]
fn dec(b: u8) -> Option<u32> {
    let v = match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Validation pass (mbedTLS first loop). Returns false on invalid input.
fn valid(src: &[u8]) -> bool {
    let mut i = 0;
    let mut equals = 0;
    while i < src.len() {
        let mut spaces = false;
        while src.get(i) == Some(&b' ') {
            i += 1;
            spaces = true;
        }
        let Some(&c) = src.get(i) else {
            break; // trailing spaces are fine
        };
        if (c == b'\r' && src.get(i + 1) == Some(&b'\n')) || c == b'\n' {
            i += 1;
            continue;
        }
        if spaces {
            return false;
        }
        if c == b'=' {
            equals += 1;
            if equals > 2 {
                return false;
            }
        } else if equals != 0 || dec(c).is_none() {
            return false;
        }
        i += 1;
    }
    true
}

pub fn base64_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let src = match input.iter().position(|&b| b == 0) {
        Some(p) => input.get(..p).unwrap_or(&[]),
        None => input,
    };
    if !valid(src) {
        return owned_or_borrowed(input, Vec::new());
    }
    let mut out = Vec::with_capacity(src.len() / 4 * 3 + 3);
    let mut x: u32 = 0;
    let mut digits = 0;
    let mut equals = 0;
    for &c in src {
        if c == b'\r' || c == b'\n' || c == b' ' {
            continue;
        }
        x <<= 6;
        if c == b'=' {
            equals += 1;
        } else {
            x |= dec(c).unwrap_or(0);
        }
        digits += 1;
        if digits == 4 {
            digits = 0;
            out.push((x >> 16) as u8);
            if equals <= 1 {
                out.push((x >> 8) as u8);
            }
            if equals == 0 {
                out.push(x as u8);
            }
        }
    }
    owned_or_borrowed(input, out)
}
