//! `application/x-www-form-urlencoded` parsing, shared by QUERY_STRING
//! (ARGS_GET) and form bodies (ARGS_POST).
//!
//! Semantics follow ModSecurity v3 `Transaction::extractArguments`
//! (src/transaction.cc) with `utils::string::ssplit` / `ssplit_pair`
//! (src/utils/string.h) and `utils::urldecode_nonstrict_inplace`
//! (src/utils/decode.cc):
//!
//! * The input is split on a single separator byte, `&` unless
//!   `SecArgumentSeparator` says otherwise.  `;` is **not** a separator.
//!   The split uses `std::getline`, so empty pieces in the middle (`a&&b`)
//!   and at the start (`&a`) are kept and become an argument with an empty
//!   name and an empty value, while one trailing empty piece (`a&`, and the
//!   empty input) produces nothing.
//! * Each piece is split at its first `=`; without `=` the whole piece is the
//!   name and the value is empty.
//! * Name and value are URL-decoded: `+` becomes a space, `%XX` with two hex
//!   digits becomes that byte, any other `%` is kept literally and counts as
//!   invalid encoding (URLENCODED_ERROR=1).

/// What a parse observed besides the arguments themselves.
use super::pairs::PairSink;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UrlencodedReport {
    /// A `%` not followed by two hex digits was seen in some name or value
    /// (ModSecurity sets URLENCODED_ERROR to 1).
    pub invalid_encoding: bool,
    /// Pairs dropped because `max_args` was reached (ModSecurity skips
    /// arguments over SecArgumentsLimit but keeps parsing; invalid encoding
    /// in dropped pairs still counts).
    pub dropped: usize,
}

/// Options for [`parse_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlencodedOptions {
    /// Pair separator (`SecArgumentSeparator`, default `&`).
    pub separator: u8,
    /// Largest number of pairs pushed to the output; further pairs are
    /// counted in [`UrlencodedReport::dropped`].
    pub max_args: usize,
}

impl Default for UrlencodedOptions {
    fn default() -> Self {
        UrlencodedOptions {
            separator: b'&',
            max_args: usize::MAX,
        }
    }
}

/// Parse `input` with the default separator `&` and no argument limit,
/// appending `(name, value)` pairs to `out` in input order.
pub fn parse(input: &[u8], out: &mut impl PairSink) -> UrlencodedReport {
    parse_with(input, &UrlencodedOptions::default(), out)
}

/// Parse `input` with explicit options, appending `(name, value)` pairs to
/// `out` in input order.
pub fn parse_with(
    input: &[u8],
    opts: &UrlencodedOptions,
    out: &mut impl PairSink,
) -> UrlencodedReport {
    let mut report = UrlencodedReport::default();
    let mut added = 0usize;
    let mut pieces = input.split(|&b| b == opts.separator).peekable();
    while let Some(piece) = pieces.next() {
        // std::getline yields no final empty piece ("a&" -> ["a"], "" -> []).
        if piece.is_empty() && pieces.peek().is_none() {
            break;
        }
        let mut halves = piece.splitn(2, |&b| b == b'=');
        let name = halves.next().unwrap_or(&[]);
        let value = halves.next().unwrap_or(&[]);
        if added < opts.max_args {
            let decode = crate::transforms::Transform::UrlDecode;
            out.push_pair(&decode.apply(name), &decode.apply(value));
            report.invalid_encoding |= has_invalid_escape(name) | has_invalid_escape(value);
            added += 1;
        } else {
            report.invalid_encoding |= has_invalid_escape(name) | has_invalid_escape(value);
            report.dropped += 1;
        }
    }
    report
}

/// URL-decode `input` (non-strict, `+` is a space) appending to `out`.
/// Returns `true` when an invalid `%` escape was seen (kept literally).
pub fn url_decode_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    // The decoding itself is `t:urlDecode` (ModSecurity uses the same routine).
    out.extend_from_slice(&crate::transforms::Transform::UrlDecode.apply(input));
    has_invalid_escape(input)
}

/// Convenience wrapper around [`url_decode_into`].
pub fn url_decode(input: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(input.len());
    let invalid = url_decode_into(input, &mut out);
    (out, invalid)
}

fn has_invalid_escape(input: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&c) = input.get(i) {
        if c == b'%' {
            match (input.get(i + 1), input.get(i + 2)) {
                (Some(h), Some(l)) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i += 3,
                _ => return true,
            }
        } else {
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn run(input: &str) -> (Vec<(String, String)>, UrlencodedReport) {
        let mut out: Pairs = Vec::new();
        let r = parse(input.as_bytes(), &mut out);
        let v = out
            .into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect();
        (v, r)
    }

    fn p(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    #[test]
    fn splits_on_ampersand_then_first_equals() {
        let (v, r) = run("a=1&b=2=3&c");
        assert_eq!(v, vec![p("a", "1"), p("b", "2=3"), p("c", "")]);
        assert!(!r.invalid_encoding);
    }

    #[test]
    fn semicolon_is_not_a_separator() {
        let (v, _) = run("a=1;b=2");
        assert_eq!(v, vec![p("a", "1;b=2")]);
    }

    #[test]
    fn empty_input_gives_nothing() {
        assert!(run("").0.is_empty());
    }

    #[test]
    fn trailing_separator_gives_no_extra_arg() {
        assert_eq!(run("a=1&").0, vec![p("a", "1")]);
        assert_eq!(run("a=1&&").0, vec![p("a", "1"), p("", "")]);
    }

    #[test]
    fn empty_pieces_become_empty_args_like_getline() {
        assert_eq!(run("&").0, vec![p("", "")]);
        assert_eq!(run("a&&b").0, vec![p("a", ""), p("", ""), p("b", "")]);
        assert_eq!(run("&a=1").0, vec![p("", ""), p("a", "1")]);
    }

    #[test]
    fn empty_name_with_value() {
        assert_eq!(run("=x").0, vec![p("", "x")]);
        assert_eq!(run("a=").0, vec![p("a", "")]);
    }

    #[test]
    fn decodes_plus_and_percent_in_names_and_values() {
        let (v, r) = run("a%20b=c+d%3D%26");
        assert_eq!(v, vec![p("a b", "c d=&")]);
        assert!(!r.invalid_encoding);
    }

    #[test]
    fn encoded_separators_do_not_split() {
        assert_eq!(run("a=%26b%3D1").0, vec![p("a", "&b=1")]);
    }

    #[test]
    fn invalid_escape_kept_literally_and_flagged() {
        let (v, r) = run("a=%zz&b=%4&c=%");
        assert_eq!(v, vec![p("a", "%zz"), p("b", "%4"), p("c", "%")]);
        assert!(r.invalid_encoding);
        let (_, r) = run("%g1=ok");
        assert!(r.invalid_encoding);
    }

    #[test]
    fn percent_decoding_produces_raw_bytes() {
        let mut out: Pairs = Vec::new();
        parse(b"x=%00%ff%C3%A9", &mut out);
        assert_eq!(out, vec![(b"x".to_vec(), vec![0u8, 0xff, 0xc3, 0xa9])]);
    }

    #[test]
    fn custom_separator() {
        let mut out: Pairs = Vec::new();
        let opts = UrlencodedOptions {
            separator: b';',
            ..Default::default()
        };
        parse_with(b"a=1;b=2&c=3", &opts, &mut out);
        assert_eq!(
            out,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2&c=3".to_vec())
            ]
        );
    }

    #[test]
    fn max_args_drops_extra_pairs_but_still_flags_encoding() {
        let mut out: Pairs = Vec::new();
        let opts = UrlencodedOptions {
            max_args: 2,
            ..Default::default()
        };
        let r = parse_with(b"a=1&b=2&c=3&d=%zz", &opts, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(r.dropped, 2);
        assert!(r.invalid_encoding);
    }

    #[test]
    fn hostile_many_separators_is_linear_and_bounded() {
        let input = vec![b'&'; 1_000_000];
        let mut out: Pairs = Vec::new();
        let opts = UrlencodedOptions {
            max_args: 1000,
            ..Default::default()
        };
        let r = parse_with(&input, &opts, &mut out);
        assert_eq!(out.len(), 1000);
        assert_eq!(r.dropped, 999_000);
    }

    #[test]
    fn hostile_all_percent_signs() {
        let input = vec![b'%'; 100_000];
        let (v, r) = url_decode(&input);
        assert_eq!(v.len(), 100_000);
        assert!(r);
    }

    #[test]
    fn non_utf8_bytes_pass_through() {
        let mut out: Pairs = Vec::new();
        parse(&[0xff, b'=', 0xfe, b'&', 0x80], &mut out);
        assert_eq!(out, vec![(vec![0xff], vec![0xfe]), (vec![0x80], vec![])]);
    }
}
