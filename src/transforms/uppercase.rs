//! `t:uppercase`: ASCII lower-case letters to upper case (C locale; bytes
//! >= 0x80 are left untouched).

use std::borrow::Cow;

pub fn uppercase(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().any(u8::is_ascii_lowercase) {
        Cow::Owned(input.to_ascii_uppercase())
    } else {
        Cow::Borrowed(input)
    }
}
