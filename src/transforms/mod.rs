//! Transformations (`t:name`): pure functions from bytes to bytes.
//!
//! Each transformation lives in its own file named after its SecLang name and
//! returns `Cow::Borrowed` exactly when the output equals the input, so a
//! chain of transformations on a clean value never copies it. Outputs that
//! differ from the input are always `Cow::Owned`.
//!
//! Semantics follow libmodsecurity v3 (byte oriented, C locale): see each
//! file for the edge cases. Every function is total (never panics) and runs
//! in time linear in the input length.
//!
//! `t:none` is not a transformation: the parser handles it (it clears the
//! inherited chain).

use std::borrow::Cow;

mod base64_decode;
mod base64_decode_ext;
mod base64_encode;
mod cmd_line;
mod compress_whitespace;
mod css_decode;
mod decode_cascade;
mod escape_seq_decode;
mod hex_decode;
mod hex_encode;
mod html_entity_decode;
mod js_decode;
mod length;
mod lowercase;
mod md5;
mod normalise_path;
mod normalise_path_win;
mod parity_even_7bit;
mod parity_odd_7bit;
mod parity_zero_7bit;
mod remove_comments;
mod remove_comments_char;
mod remove_nulls;
mod remove_whitespace;
mod replace_comments;
mod replace_nulls;
mod sha1;
mod sql_hex_decode;
mod trim;
mod trim_left;
mod trim_right;
mod uppercase;
mod url_decode;
mod url_decode_uni;
mod unicode_map_20127;
pub(crate) mod unicode_map_file;
mod url_encode;
mod utf8_to_unicode;

pub use base64_decode::base64_decode;
pub use base64_decode_ext::base64_decode_ext;
pub use base64_encode::base64_encode;
pub use cmd_line::cmd_line;
pub use compress_whitespace::compress_whitespace;
pub use css_decode::css_decode;
pub use decode_cascade::decode_cascade;
pub use escape_seq_decode::escape_seq_decode;
pub use hex_decode::hex_decode;
pub use hex_encode::hex_encode;
pub use html_entity_decode::html_entity_decode;
pub use js_decode::js_decode;
pub use length::length;
pub use lowercase::lowercase;
pub use md5::md5;
pub use normalise_path::normalise_path;
pub use normalise_path_win::normalise_path_win;
pub use parity_even_7bit::parity_even_7bit;
pub use parity_odd_7bit::parity_odd_7bit;
pub use parity_zero_7bit::parity_zero_7bit;
pub use remove_comments::remove_comments;
pub use remove_comments_char::remove_comments_char;
pub use remove_nulls::remove_nulls;
pub use remove_whitespace::remove_whitespace;
pub use replace_comments::replace_comments;
pub use replace_nulls::replace_nulls;
pub use sha1::sha1;
pub use sql_hex_decode::sql_hex_decode;
pub use trim::trim;
pub use trim_left::trim_left;
pub use trim_right::trim_right;
pub use uppercase::uppercase;
pub use url_decode::url_decode;
pub use url_decode_uni::{url_decode_uni, url_decode_uni_map};
pub use url_encode::url_encode;
pub use utf8_to_unicode::utf8_to_unicode;

/// A transformation known to the engine (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    Lowercase,
    Uppercase,
    UrlDecode,
    UrlDecodeUni,
    /// `t:urlDecodeUni` when the rule set has `SecUnicodeMapFile ... 20127` (the compiler puts
    /// it in place of every `UrlDecodeUni`; no SecLang name of its own, not in [`Transform::ALL`]).
    UrlDecodeUniMap,
    UrlEncode,
    Utf8ToUnicode,
    HtmlEntityDecode,
    JsDecode,
    CssDecode,
    RemoveNulls,
    ReplaceNulls,
    CompressWhitespace,
    RemoveWhitespace,
    Trim,
    TrimLeft,
    TrimRight,
    Length,
    CmdLine,
    NormalisePath,
    NormalisePathWin,
    RemoveComments,
    RemoveCommentsChar,
    ReplaceComments,
    Base64Decode,
    Base64DecodeExt,
    Base64Encode,
    HexDecode,
    HexEncode,
    SqlHexDecode,
    EscapeSeqDecode,
    Sha1,
    Md5,
    ParityEven7bit,
    ParityOdd7bit,
    ParityZero7bit,
    /// wafer extension: see `decode_cascade`.
    DecodeCascade,
}

/// Name table: (lowercased SecLang name, transform). Aliases map to the same
/// variant; the canonical spelling is given by [`Transform::name`].
const NAMES: &[(&str, Transform)] = &[
    ("lowercase", Transform::Lowercase),
    ("uppercase", Transform::Uppercase),
    ("urldecode", Transform::UrlDecode),
    ("urldecodeuni", Transform::UrlDecodeUni),
    ("urlencode", Transform::UrlEncode),
    ("utf8tounicode", Transform::Utf8ToUnicode),
    ("htmlentitydecode", Transform::HtmlEntityDecode),
    ("jsdecode", Transform::JsDecode),
    ("cssdecode", Transform::CssDecode),
    ("removenulls", Transform::RemoveNulls),
    ("replacenulls", Transform::ReplaceNulls),
    ("compresswhitespace", Transform::CompressWhitespace),
    ("removewhitespace", Transform::RemoveWhitespace),
    ("trim", Transform::Trim),
    ("trimleft", Transform::TrimLeft),
    ("trimright", Transform::TrimRight),
    ("length", Transform::Length),
    ("cmdline", Transform::CmdLine),
    ("normalisepath", Transform::NormalisePath),
    ("normalizepath", Transform::NormalisePath),
    ("normalisepathwin", Transform::NormalisePathWin),
    ("normalizepathwin", Transform::NormalisePathWin),
    ("removecomments", Transform::RemoveComments),
    ("removecommentschar", Transform::RemoveCommentsChar),
    ("replacecomments", Transform::ReplaceComments),
    ("base64decode", Transform::Base64Decode),
    ("base64decodeext", Transform::Base64DecodeExt),
    ("base64encode", Transform::Base64Encode),
    ("hexdecode", Transform::HexDecode),
    ("hexencode", Transform::HexEncode),
    ("sqlhexdecode", Transform::SqlHexDecode),
    ("escapeseqdecode", Transform::EscapeSeqDecode),
    ("sha1", Transform::Sha1),
    ("md5", Transform::Md5),
    ("parityeven7bit", Transform::ParityEven7bit),
    ("parityodd7bit", Transform::ParityOdd7bit),
    ("parityzero7bit", Transform::ParityZero7bit),
    ("decodecascade", Transform::DecodeCascade),
];

impl Transform {
    /// Every transformation, in declaration order.
    pub const ALL: &'static [Transform] = &[
        Transform::Lowercase,
        Transform::Uppercase,
        Transform::UrlDecode,
        Transform::UrlDecodeUni,
        Transform::UrlEncode,
        Transform::Utf8ToUnicode,
        Transform::HtmlEntityDecode,
        Transform::JsDecode,
        Transform::CssDecode,
        Transform::RemoveNulls,
        Transform::ReplaceNulls,
        Transform::CompressWhitespace,
        Transform::RemoveWhitespace,
        Transform::Trim,
        Transform::TrimLeft,
        Transform::TrimRight,
        Transform::Length,
        Transform::CmdLine,
        Transform::NormalisePath,
        Transform::NormalisePathWin,
        Transform::RemoveComments,
        Transform::RemoveCommentsChar,
        Transform::ReplaceComments,
        Transform::Base64Decode,
        Transform::Base64DecodeExt,
        Transform::Base64Encode,
        Transform::HexDecode,
        Transform::HexEncode,
        Transform::SqlHexDecode,
        Transform::EscapeSeqDecode,
        Transform::Sha1,
        Transform::Md5,
        Transform::ParityEven7bit,
        Transform::ParityOdd7bit,
        Transform::ParityZero7bit,
        Transform::DecodeCascade,
    ];

    /// Looks up a transformation by its SecLang name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Transform> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, t)| t)
    }

    /// The canonical SecLang name.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Lowercase => "lowercase",
            Transform::Uppercase => "uppercase",
            Transform::UrlDecode => "urlDecode",
            Transform::UrlDecodeUni | Transform::UrlDecodeUniMap => "urlDecodeUni",
            Transform::UrlEncode => "urlEncode",
            Transform::Utf8ToUnicode => "utf8toUnicode",
            Transform::HtmlEntityDecode => "htmlEntityDecode",
            Transform::JsDecode => "jsDecode",
            Transform::CssDecode => "cssDecode",
            Transform::RemoveNulls => "removeNulls",
            Transform::ReplaceNulls => "replaceNulls",
            Transform::CompressWhitespace => "compressWhitespace",
            Transform::RemoveWhitespace => "removeWhitespace",
            Transform::Trim => "trim",
            Transform::TrimLeft => "trimLeft",
            Transform::TrimRight => "trimRight",
            Transform::Length => "length",
            Transform::CmdLine => "cmdLine",
            Transform::NormalisePath => "normalisePath",
            Transform::NormalisePathWin => "normalisePathWin",
            Transform::RemoveComments => "removeComments",
            Transform::RemoveCommentsChar => "removeCommentsChar",
            Transform::ReplaceComments => "replaceComments",
            Transform::Base64Decode => "base64Decode",
            Transform::Base64DecodeExt => "base64DecodeExt",
            Transform::Base64Encode => "base64Encode",
            Transform::HexDecode => "hexDecode",
            Transform::HexEncode => "hexEncode",
            Transform::SqlHexDecode => "sqlHexDecode",
            Transform::EscapeSeqDecode => "escapeSeqDecode",
            Transform::Sha1 => "sha1",
            Transform::Md5 => "md5",
            Transform::ParityEven7bit => "parityEven7bit",
            Transform::ParityOdd7bit => "parityOdd7bit",
            Transform::ParityZero7bit => "parityZero7bit",
            Transform::DecodeCascade => "decodeCascade",
        }
    }

    /// The bytes that can make this transformation change a value: a value
    /// containing none of them comes back unchanged (`Cow::Borrowed`), so
    /// callers holding the value's byte set can skip the call. `None`: any
    /// value may change (hashes, encoders, length).
    pub fn trigger(self) -> Option<[u64; 4]> {
        const WS: &[u8] = b" \t\n\x0b\x0c\r\xa0";
        let set = |groups: &[&[u8]], upper: bool, lower: bool, high: bool| {
            let mut s = [0u64; 4];
            let mut add = |b: u8| {
                if let Some(w) = s.get_mut(usize::from(b >> 6)) {
                    *w |= 1u64 << (b & 63);
                }
            };
            for g in groups {
                for &b in *g {
                    add(b);
                }
            }
            if upper {
                (b'A'..=b'Z').for_each(&mut add);
            }
            if lower {
                (b'a'..=b'z').for_each(&mut add);
            }
            if high {
                (0x80..=0xffu8).for_each(&mut add);
            }
            Some(s)
        };
        match self {
            Transform::Lowercase => set(&[], true, false, false),
            Transform::Uppercase => set(&[], false, true, false),
            Transform::UrlDecode | Transform::UrlDecodeUni | Transform::UrlDecodeUniMap => set(&[b"%+"], false, false, false),
            Transform::Utf8ToUnicode => set(&[], false, false, true),
            Transform::HtmlEntityDecode => set(&[b"&"], false, false, false),
            Transform::JsDecode | Transform::CssDecode | Transform::EscapeSeqDecode => set(&[b"\\"], false, false, false),
            Transform::RemoveNulls | Transform::ReplaceNulls => set(&[b"\0"], false, false, false),
            Transform::CompressWhitespace | Transform::RemoveWhitespace | Transform::Trim | Transform::TrimLeft | Transform::TrimRight => set(&[WS], false, false, false),
            Transform::CmdLine => set(&[WS, b"\\\"'^,;"], true, false, false),
            Transform::NormalisePath => set(&[b"/."], false, false, false),
            Transform::NormalisePathWin => set(&[b"/.\\"], false, false, false),
            Transform::RemoveComments | Transform::RemoveCommentsChar | Transform::ReplaceComments => set(&[b"/*-#<>"], false, false, false),
            Transform::SqlHexDecode => set(&[b"0"], false, false, false),
            _ => None,
        }
    }

    /// Applies the transformation. Borrowed output means "unchanged".
    pub fn apply(self, input: &[u8]) -> Cow<'_, [u8]> {
        match self {
            Transform::Lowercase => lowercase(input),
            Transform::Uppercase => uppercase(input),
            Transform::UrlDecode => url_decode(input),
            Transform::UrlDecodeUni => url_decode_uni(input),
            Transform::UrlDecodeUniMap => url_decode_uni_map(input),
            Transform::UrlEncode => url_encode(input),
            Transform::Utf8ToUnicode => utf8_to_unicode(input),
            Transform::HtmlEntityDecode => html_entity_decode(input),
            Transform::JsDecode => js_decode(input),
            Transform::CssDecode => css_decode(input),
            Transform::RemoveNulls => remove_nulls(input),
            Transform::ReplaceNulls => replace_nulls(input),
            Transform::CompressWhitespace => compress_whitespace(input),
            Transform::RemoveWhitespace => remove_whitespace(input),
            Transform::Trim => trim(input),
            Transform::TrimLeft => trim_left(input),
            Transform::TrimRight => trim_right(input),
            Transform::Length => length(input),
            Transform::CmdLine => cmd_line(input),
            Transform::NormalisePath => normalise_path(input),
            Transform::NormalisePathWin => normalise_path_win(input),
            Transform::RemoveComments => remove_comments(input),
            Transform::RemoveCommentsChar => remove_comments_char(input),
            Transform::ReplaceComments => replace_comments(input),
            Transform::Base64Decode => base64_decode(input),
            Transform::Base64DecodeExt => base64_decode_ext(input),
            Transform::Base64Encode => base64_encode(input),
            Transform::HexDecode => hex_decode(input),
            Transform::HexEncode => hex_encode(input),
            Transform::SqlHexDecode => sql_hex_decode(input),
            Transform::EscapeSeqDecode => escape_seq_decode(input),
            Transform::Sha1 => sha1(input),
            Transform::Md5 => md5(input),
            Transform::ParityEven7bit => parity_even_7bit(input),
            Transform::ParityOdd7bit => parity_odd_7bit(input),
            Transform::ParityZero7bit => parity_zero_7bit(input),
            Transform::DecodeCascade => decode_cascade(input),
        }
    }
}

// ---------------------------------------------------------------------------
// Shared helpers (byte-level, C-locale semantics as in libmodsecurity).
// ---------------------------------------------------------------------------

/// Output builder that stays allocation-free while the produced bytes equal
/// the input prefix, and copies that prefix into a `Vec` on the first
/// divergence. `finish` returns `Borrowed` iff the output equals the input.
pub(crate) struct LazyOut<'a> {
    src: &'a [u8],
    /// Length of the output while it is still a prefix of `src`.
    len: usize,
    buf: Option<Vec<u8>>,
}

impl<'a> LazyOut<'a> {
    #[inline]
    pub(crate) fn new(src: &'a [u8]) -> Self {
        LazyOut {
            src,
            len: 0,
            buf: None,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, b: u8) {
        match &mut self.buf {
            Some(v) => v.push(b),
            None => {
                if self.src.get(self.len) == Some(&b) {
                    self.len += 1;
                } else {
                    self.diverge().push(b);
                }
            }
        }
    }

    /// Copies `input[from..]` up to the first byte for which `special` holds and returns that
    /// byte's index (`input.len()` if none): the bulk form of pushing each ordinary byte.
    /// While the output is still the input's prefix and ends at `from`, nothing is copied.
    #[inline]
    pub(crate) fn copy_run(&mut self, input: &[u8], from: usize, special: impl Fn(u8) -> bool) -> usize {
        let rest = input.get(from..).unwrap_or_default();
        let n = rest.iter().position(|&b| special(b)).unwrap_or(rest.len());
        let run = rest.get(..n).unwrap_or_default();
        match &mut self.buf {
            Some(v) => v.extend_from_slice(run),
            None => {
                let same = self.src.get(self.len..self.len + n).is_some_and(|s| std::ptr::eq(s.as_ptr(), run.as_ptr()) || s == run);
                if same {
                    self.len += n;
                } else {
                    self.diverge().extend_from_slice(run);
                }
            }
        }
        from + n
    }

    /// Removes the last output byte (no-op on empty output).
    #[inline]
    pub(crate) fn pop(&mut self) {
        match &mut self.buf {
            Some(v) => {
                v.pop();
            }
            None => {
                if self.len > 0 {
                    // The output is now a strict prefix: materialise it so
                    // `finish` cannot mistake it for "unchanged".
                    self.len -= 1;
                    self.diverge();
                }
            }
        }
    }

    fn diverge(&mut self) -> &mut Vec<u8> {
        let src = self.src;
        let len = self.len;
        self.buf.get_or_insert_with(|| {
            let mut v = Vec::with_capacity(src.len().max(len + 16));
            v.extend_from_slice(src.get(..len).unwrap_or(&[]));
            v
        })
    }

    pub(crate) fn finish(self) -> Cow<'a, [u8]> {
        match self.buf {
            Some(v) => Cow::Owned(v),
            None if self.len == self.src.len() => Cow::Borrowed(self.src),
            None => Cow::Owned(self.src.get(..self.len).unwrap_or(&[]).to_vec()),
        }
    }
}

/// Wraps a freshly computed output: `Borrowed` when it equals the input.
#[inline]
pub(crate) fn owned_or_borrowed(input: &[u8], out: Vec<u8>) -> Cow<'_, [u8]> {
    if out == input {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(out)
    }
}

/// Returns `input[..end]` as a changed value (`Owned`) unless it is all of it.
#[inline]
pub(crate) fn sub_slice(input: &[u8], start: usize, end: usize) -> Cow<'_, [u8]> {
    if start == 0 && end >= input.len() {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(input.get(start..end).unwrap_or(&[]).to_vec())
    }
}

/// `VALID_HEX`: ASCII hexadecimal digit.
#[inline]
pub(crate) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Hex digit value as computed by ModSecurity's `x2c`/`xsingle2c`
/// (no validation: non-hex bytes produce the same garbage as the C code).
#[inline]
pub(crate) fn xdigit(c: u8) -> u8 {
    if c >= b'A' {
        (c & 0xdf).wrapping_sub(b'A').wrapping_add(10)
    } else {
        c.wrapping_sub(b'0')
    }
}

/// ModSecurity `x2c`: two hex characters to one byte.
#[inline]
pub(crate) fn x2c(hi: u8, lo: u8) -> u8 {
    xdigit(hi).wrapping_mul(16).wrapping_add(xdigit(lo))
}

/// Lower-case hex digit for the low nibble of `n`.
#[inline]
pub(crate) fn hex_lower(n: u8) -> u8 {
    let n = n & 0x0f;
    if n < 10 {
        b'0' + n
    } else {
        b'a' + (n - 10)
    }
}

/// C-locale `isspace`: space, \t, \n, \v, \f, \r.
#[inline]
pub(crate) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// ModSecurity's `%uHHHH`/`\uHHHH` mapping: the low byte, except that the
/// full-width ASCII block U+FF01..U+FF5E maps to U+0021..U+007E.
#[inline]
pub(crate) fn unicode_low_byte(h1: u8, h2: u8, h3: u8, h4: u8) -> u8 {
    let low = x2c(h3, h4);
    if low > 0x00 && low < 0x5f && (h1 | 0x20) == b'f' && (h2 | 0x20) == b'f' {
        low + 0x20
    } else {
        low
    }
}

#[cfg(test)]
mod trigger_tests {
    use super::*;

    /// A value without any trigger byte is never changed (the skip is sound).
    #[test]
    fn values_without_trigger_bytes_are_unchanged() {
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        for &t in Transform::ALL.iter().chain(&[Transform::UrlDecodeUniMap]) {
            let Some(trig) = t.trigger() else { continue };
            let allowed: Vec<u8> = (0..=255u8).filter(|b| trig[usize::from(b >> 6)] & (1u64 << (b & 63)) == 0).collect();
            assert!(!allowed.is_empty(), "{}", t.name());
            for _ in 0..3000 {
                let len = (next() % 40) as usize;
                let v: Vec<u8> = (0..len).map(|_| allowed[(next() as usize) % allowed.len()]).collect();
                assert!(matches!(t.apply(&v), Cow::Borrowed(_)), "{} changed {:?}", t.name(), String::from_utf8_lossy(&v));
            }
            // Every allowed byte at once, too.
            assert!(matches!(t.apply(&allowed), Cow::Borrowed(_)), "{}", t.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::path::Path;

    fn hex_to_bytes(s: &str) -> Vec<u8> {
        let clean: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        assert!(clean.len().is_multiple_of(2), "odd hex string {s:?}");
        clean
            .chunks_exact(2)
            .map(|p| {
                let hi = char::from(p[0]).to_digit(16).expect("hex digit");
                let lo = char::from(p[1]).to_digit(16).expect("hex digit");
                (hi * 16 + lo) as u8
            })
            .collect()
    }

    /// Reads `field` (UTF-8 text) or `field_hex` (hex bytes) from a case.
    fn bytes_of(case: &Value, field: &str, ctx: &str) -> Vec<u8> {
        if let Some(s) = case.get(field).and_then(Value::as_str) {
            return s.as_bytes().to_vec();
        }
        if let Some(s) = case.get(format!("{field}_hex")).and_then(Value::as_str) {
            return hex_to_bytes(s);
        }
        panic!("{ctx}: missing {field} / {field}_hex");
    }

    fn show(b: &[u8]) -> String {
        format!(
            "{:?} (hex {})",
            String::from_utf8_lossy(b),
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        )
    }

    #[test]
    fn data_driven_cases() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/transforms"));
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("testdata/transforms exists")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no JSON files in {}", dir.display());

        let mut run = 0usize;
        let mut failures = Vec::new();
        let mut covered = std::collections::HashSet::new();
        for file in &files {
            let text = std::fs::read_to_string(file).expect("readable");
            let cases: Vec<Value> =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (idx, case) in cases.iter().enumerate() {
                let name = case.get("name").and_then(Value::as_str).expect("name");
                let ctx = format!("{}#{idx} ({name})", file.display());
                let t = Transform::from_name(name)
                    .unwrap_or_else(|| panic!("{ctx}: unknown transform"));
                covered.insert(t);
                let input = bytes_of(case, "input", &ctx);
                let want = bytes_of(case, "output", &ctx);
                let got = t.apply(&input);
                run += 1;
                if got.as_ref() != want.as_slice() {
                    failures.push(format!(
                        "{ctx}\n  input: {}\n  want:  {}\n  got:   {}",
                        show(&input),
                        show(&want),
                        show(&got)
                    ));
                }
                // Borrowed exactly when unchanged.
                let borrowed = matches!(got, Cow::Borrowed(_));
                if borrowed != (input == want) {
                    failures.push(format!(
                        "{ctx}: Borrowed={borrowed} but unchanged={}",
                        input == want
                    ));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} failing case(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
        assert!(run > 0, "no cases run");
        for t in Transform::ALL {
            assert!(covered.contains(t), "no data-driven case for {}", t.name());
        }
        eprintln!("transforms: {run} data-driven cases passed");
    }

    #[test]
    fn names_round_trip_and_aliases() {
        for &t in Transform::ALL {
            assert_eq!(Transform::from_name(t.name()), Some(t));
            assert_eq!(
                Transform::from_name(&t.name().to_ascii_uppercase()),
                Some(t)
            );
            assert_eq!(
                Transform::from_name(&t.name().to_ascii_lowercase()),
                Some(t)
            );
        }
        assert_eq!(
            Transform::from_name("normalizePath"),
            Some(Transform::NormalisePath)
        );
        assert_eq!(
            Transform::from_name("normalizePathWin"),
            Some(Transform::NormalisePathWin)
        );
        assert_eq!(
            Transform::from_name("base64decode"),
            Some(Transform::Base64Decode)
        );
        assert_eq!(Transform::from_name("none"), None);
        assert_eq!(Transform::from_name(""), None);
        assert_eq!(Transform::from_name("bogus"), None);
    }

    #[test]
    fn crs_transform_names_supported() {
        // Every t:name used by CRS v4 rules.
        for n in [
            "base64Decode",
            "base64decode",
            "cmdLine",
            "compressWhitespace",
            "cssDecode",
            "escapeSeqDecode",
            "hexEncode",
            "htmlEntityDecode",
            "jsDecode",
            "length",
            "lowercase",
            "normalizePath",
            "normalizePathWin",
            "removeCommentsChar",
            "removeNulls",
            "removeWhitespace",
            "replaceComments",
            "sha1",
            "urlDecodeUni",
            "utf8toUnicode",
            "urlDecode",
            "normalisePath",
            "trim",
            "md5",
        ] {
            assert!(Transform::from_name(n).is_some(), "{n} not supported");
        }
    }

    #[test]
    fn borrowed_when_unchanged() {
        let clean: &[&[u8]] = &[b"", b"plain text 123 abc", b"select * from t"];
        let skip = [
            Transform::Uppercase,
            Transform::Length,
            Transform::Base64Decode,
            Transform::Base64DecodeExt,
            Transform::Base64Encode,
            Transform::HexDecode,
            Transform::HexEncode,
            Transform::Sha1,
            Transform::Md5,
            Transform::ParityEven7bit,
            Transform::ParityOdd7bit,
            Transform::UrlEncode,
            Transform::RemoveWhitespace,
            Transform::CompressWhitespace,
            Transform::CmdLine,
            Transform::RemoveComments,
            Transform::RemoveCommentsChar,
        ];
        for &t in Transform::ALL {
            for &v in clean {
                if skip.contains(&t) && !v.is_empty() {
                    continue;
                }
                let out = t.apply(v);
                if v.is_empty() && matches!(t, Transform::Length | Transform::Sha1 | Transform::Md5)
                {
                    assert!(matches!(out, Cow::Owned(_)), "{}", t.name());
                    continue;
                }
                assert!(
                    matches!(out, Cow::Borrowed(_)),
                    "{} copied {:?}",
                    t.name(),
                    String::from_utf8_lossy(v)
                );
            }
        }
        // Values unchanged by specific transforms (including ones that take
        // the slow path internally) must come back borrowed.
        let cases: &[(Transform, &[u8])] = &[
            (Transform::UrlDecode, b"100% sure %zz %4"),
            (Transform::UrlDecodeUni, b"%u12 %uzzzz %"),
            (Transform::HtmlEntityDecode, b"a & b &foo; &#; &#x;"),
            (Transform::JsDecode, b"no escapes"),
            (Transform::CssDecode, b"color: red"),
            (Transform::EscapeSeqDecode, b"text"),
            (Transform::CompressWhitespace, b"a b c"),
            (Transform::RemoveWhitespace, b"abc"),
            (Transform::CmdLine, b"ls -la tmp"),
            (Transform::NormalisePath, b"/a/b/c.txt"),
            (Transform::NormalisePath, b"../../x"),
            (Transform::NormalisePathWin, b"/a/b/c"),
            (Transform::RemoveComments, b"a-b/c<d"),
            (Transform::RemoveCommentsChar, b"a-b/c<d*e"),
            (Transform::ReplaceComments, b"a */ b"),
            (Transform::SqlHexDecode, b"0x 0xg1 0x4"),
            (Transform::Utf8ToUnicode, b"ascii \x80 only"),
            (Transform::ParityZero7bit, b"ascii"),
            (Transform::ParityEven7bit, b"cefijloqrtwx"),
            (Transform::Trim, b"x y"),
            (Transform::TrimLeft, b"x "),
            (Transform::TrimRight, b" x"),
            (Transform::UrlEncode, b"abcXYZ019*"),
            (Transform::Uppercase, b"ABC 123"),
            (Transform::Length, b"1"),
            (Transform::Base64DecodeExt, b""),
        ];
        for (t, v) in cases {
            let out = t.apply(v);
            assert!(
                matches!(out, Cow::Borrowed(_)),
                "{} copied {:?}",
                t.name(),
                String::from_utf8_lossy(v)
            );
            assert_eq!(out.as_ref(), *v);
        }
    }

    /// Deterministic pseudo-random inputs: no transform may panic, and
    /// Borrowed must mean "equal to the input".
    #[test]
    fn no_panics_on_arbitrary_input() {
        let alphabet: &[u8] = b"%uU+&#xX;\\/.-*<!>=0123456789abcdefABCDEFgz \t\r\n\x00\x7f\x80\xa0\xc3\xe2\xf0\xf5\xff'\"^,()";
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..4000 {
            let len = (next() % 40) as usize;
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 5 == 0 {
                        (r >> 8) as u8
                    } else {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    }
                })
                .collect();
            for &t in Transform::ALL {
                let out = t.apply(&v);
                if matches!(out, Cow::Borrowed(_)) {
                    assert_eq!(out.as_ref(), v.as_slice(), "{}", t.name());
                } else {
                    assert_ne!(
                        out.as_ref(),
                        v.as_slice(),
                        "{} Owned but unchanged",
                        t.name()
                    );
                }
            }
        }
    }

    #[test]
    fn linear_time_on_large_inputs() {
        // Pathological shapes for the scanners; must finish quickly.
        let n = 200_000;
        let inputs: Vec<Vec<u8>> = vec![
            b"%".repeat(n),
            b"%u".repeat(n),
            b"&#".repeat(n),
            b"&".repeat(n),
            b"\\".repeat(n),
            b"../".repeat(n),
            b"a/../".repeat(n),
            b"/*".repeat(n),
            b"<!--".repeat(n),
            b"0x".repeat(n),
            vec![0xe2; n],
            b"&#000000000000000000000000000000000000000000000000000".repeat(n / 50),
        ];
        let start = std::time::Instant::now();
        for v in &inputs {
            for &t in Transform::ALL {
                let _ = t.apply(v);
            }
        }
        assert!(
            start.elapsed().as_secs() < 30,
            "too slow: {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn digests_match_known_vectors() {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(&sha1::digest(b"")),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            hex(&sha1::digest(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(&sha1::digest(&b"a".repeat(1_000_000))),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        assert_eq!(hex(&md5::digest(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(
            hex(&md5::digest(b"abc")),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            hex(&md5::digest(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
        // Padding boundaries (55, 56, 63, 64 bytes).
        for len in [55usize, 56, 63, 64, 65, 119, 120] {
            let v = vec![b'x'; len];
            assert_eq!(sha1::digest(&v).len(), 20);
            assert_eq!(md5::digest(&v).len(), 16);
        }
    }
}
