//! `t:urlDecodeUni`: like `urlDecode`, plus the IIS `%uHHHH` form (`u` or
//! `U`). A `%uHHHH` escape becomes one byte: the low byte of the code unit,
//! except that full-width ASCII U+FF01..U+FF5E maps to 0x21..0x7E
//! (libmodsecurity without a `SecUnicodeMapFile`). With `SecUnicodeMapFile ... 20127`
//! ([`url_decode_uni_map`]) a code unit the best-fit map has becomes the map's byte
//! (`unicode_map_file.rs`). An invalid or truncated `%u` escape keeps the two bytes `%u`
//! and continues after them.

use super::{is_hex, unicode_low_byte, unicode_map_file, x2c, LazyOut};
use std::borrow::Cow;

pub fn url_decode_uni(input: &[u8]) -> Cow<'_, [u8]> {
    decode(input, false)
}

/// `t:urlDecodeUni` under `SecUnicodeMapFile ... 20127`.
pub fn url_decode_uni_map(input: &[u8]) -> Cow<'_, [u8]> {
    decode(input, true)
}

fn decode(input: &[u8], map: bool) -> Cow<'_, [u8]> {
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
                            let code = u16::from_be_bytes([x2c(h1, h2), x2c(h3, h4)]);
                            let mapped = if map { unicode_map_file::best_fit(code) } else { None };
                            out.push(mapped.unwrap_or_else(|| unicode_low_byte(h1, h2, h3, h4)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_changes_only_code_units_it_has() {
        // libmodsecurity 3.0.15, with and without `SecUnicodeMapFile unicode.mapping 20127`.
        let input = b"%u2018%U201D%u00ab%u00BB%u0131%uff0e%uFF61%u3002%u0041%u0410%uff5f%ufF1c%u12%u";
        assert_eq!(url_decode_uni_map(input).as_ref(), b"'\"<>i...A\x10\x5f<%u12%u");
        assert_eq!(url_decode_uni(input).as_ref(), b"\x18\x1d\xab\xbb\x31.a\x02A\x10\x5f<%u12%u");
        // Plain %XX and + are untouched by the map.
        assert_eq!(url_decode_uni_map(b"%ab+%2e").as_ref(), b"\xab .");
    }
}
