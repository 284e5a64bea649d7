//! `t:sqlHexDecode`: decodes SQL hex literals `0xHHHH...` (`x` or `X`, at
//! least one full pair) into bytes, consuming as many complete pairs as
//! follow; an odd trailing digit is kept. Other text is unchanged.

use super::{is_hex, x2c, LazyOut};
use std::borrow::Cow;

pub fn sql_hex_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = LazyOut::new(input);
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        let starts_literal = b == b'0'
            && matches!(input.get(i + 1), Some(b'x') | Some(b'X'))
            && matches!(input.get(i + 2..i + 4), Some(&[h, l]) if is_hex(h) && is_hex(l));
        if !starts_literal {
            out.push(b);
            i += 1;
            continue;
        }
        i += 2;
        while let Some(&[h, l]) = input.get(i..i + 2) {
            if !(is_hex(h) && is_hex(l)) {
                break;
            }
            out.push(x2c(h, l));
            i += 2;
        }
    }
    out.finish()
}
