//! `@validateByteRange`, `@validateUrlEncoding`, `@validateUtf8Encoding`:
//! they "match" when the value is INVALID, as in ModSecurity.
//!
//! Example: `SecRule ARGS "@validateByteRange 32-126" "id:1,deny"`.

#[derive(Debug)]
pub struct ByteRange {
    allowed: [bool; 256],
}

impl ByteRange {
    pub fn parse(param: &str) -> Result<ByteRange, String> {
        let mut allowed = [false; 256];
        for part in param.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let lo: usize = lo.parse().map_err(|_| format!("@validateByteRange: bad range \"{part}\""))?;
            let hi: usize = hi.parse().map_err(|_| format!("@validateByteRange: bad range \"{part}\""))?;
            if lo > 255 || hi > 255 || lo > hi {
                return Err(format!("@validateByteRange: bad range \"{part}\""));
            }
            for slot in allowed.iter_mut().take(hi + 1).skip(lo) {
                *slot = true;
            }
        }
        Ok(ByteRange { allowed })
    }

    /// True when some byte is outside the allowed ranges.
    pub fn invalid(&self, value: &[u8]) -> bool {
        value.iter().any(|&b| !self.allowed.get(usize::from(b)).copied().unwrap_or(false))
    }
}

/// True when a `%` is not followed by two hex digits.
pub fn url_encoding_invalid(value: &[u8]) -> bool {
    let mut i = 0;
    while i < value.len() {
        if value.get(i) == Some(&b'%') {
            let ok = value.get(i + 1).is_some_and(u8::is_ascii_hexdigit) && value.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                return true;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    false
}

/// True when the value is not well-formed UTF-8 (overlong forms and
/// surrogates included, as Rust's decoder rejects them).
pub fn utf8_invalid(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_encodings() {
        let r = ByteRange::parse("1-255").unwrap();
        assert!(r.invalid(b"a\0b") && !r.invalid(b"abc"));
        assert!(ByteRange::parse("9,10,13,32-126").is_ok_and(|r| r.invalid(&[0x7f])));
        assert!(url_encoding_invalid(b"a%zz") && url_encoding_invalid(b"a%4") && !url_encoding_invalid(b"a%41"));
        assert!(utf8_invalid(&[0xc0, 0xaf]) && !utf8_invalid("é".as_bytes()));
    }
}
