//! `t:lowercase`: ASCII upper-case letters to lower case (C locale; bytes
//! >= 0x80 are left untouched).

use std::borrow::Cow;

pub fn lowercase(input: &[u8]) -> Cow<'_, [u8]> {
    if input.iter().any(u8::is_ascii_uppercase) {
        Cow::Owned(input.to_ascii_lowercase())
    } else {
        Cow::Borrowed(input)
    }
}
