//! Reading helpers shared by the context detectors (`detect_sqli_context.rs`,
//! `detect_xss_context.rs`): identifier bytes, whole-word search and the full-width forms of
//! ASCII.

/// A byte of an identifier (SQL or JavaScript): ASCII letters and digits, `_`, `$`, and any
/// byte of a multi-byte UTF-8 character.
pub(crate) fn ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The positions after each occurrence of `word` in `s` as a whole word (no identifier byte
/// on either side; a `.` before it is allowed: `parentWindow.alert`).
pub(crate) fn words<'a>(s: &'a [u8], word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let w = word.as_bytes();
    s.windows(w.len().max(1)).enumerate().filter_map(move |(i, win)| {
        let before_ok = i == 0 || s.get(i - 1).is_some_and(|&b| !ident(b));
        let end = i + w.len();
        let after_ok = s.get(end).is_none_or(|&b| !ident(b));
        (win == w && before_ok && after_ok).then_some(end)
    })
}

/// The ASCII byte whose full-width form (U+FF01..U+FF5E, UTF-8 `EF BC 81` .. `EF BD 9E`)
/// starts at `v[i]`, if one does (it is 3 bytes long).
pub(crate) fn full_width_at(v: &[u8], i: usize) -> Option<u8> {
    match (v.get(i), v.get(i + 1), v.get(i + 2)) {
        (Some(0xef), Some(0xbc), Some(&b2 @ 0x81..=0xbf)) => Some(0x21 + (b2 - 0x81)),
        (Some(0xef), Some(0xbd), Some(&b2 @ 0x80..=0x9e)) => Some(0x60 + (b2 - 0x80)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_width_forms_and_whole_words() {
        assert_eq!(full_width_at("ＳＥＬＥＣＴ".as_bytes(), 0), Some(b'S'));
        assert_eq!(full_width_at("ａ～".as_bytes(), 3), Some(b'~'));
        assert_eq!(full_width_at("é".as_bytes(), 0), None);
        assert_eq!(words(b"union unions xunion union", "union").collect::<Vec<_>>(), vec![5, 25]);
    }
}
