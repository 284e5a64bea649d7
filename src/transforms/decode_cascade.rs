//! `t:decodeCascade` (wafer extension): peels the encodings an attacker wraps a payload in,
//! up to [`MAX_DEPTH`] layers, keeping a layer only when its result is at least as text-like
//! as what it decoded.
//!
//! Each layer tries, in order, and takes the first decoder that changes the value:
//! 1. URL encoding (`%41`, `%u0041`, `+` left alone);
//! 2. JavaScript / JSON escapes (`\u0041`, `\x41`, `\u{41}`, `\/`);
//! 3. HTML / XML character references (`&lt;`, `&#60;`, `&#x3c;`);
//! 4. base64 or base64url: the whole value (at least 8 characters, not a word of one case),
//!    or each run of at least 16 base64 characters inside it, when it decodes to text
//!    (printable UTF-8);
//! 5. hex: the whole value (an even number of at least 8 hex digits, optionally `0x`-prefixed)
//!    when it decodes to text.
//!
//! "Text-like" is the share of printable bytes (ASCII graphic, space, tab, CR, LF, and
//! valid UTF-8 above ASCII): a layer whose result has a lower share than its input is
//! dropped and the cascade stops. Random tokens (ids, hashes) therefore come back unchanged:
//! they decode to binary. The work is linear in the value per layer, the output never longer
//! than the input, and the depth bounded, so hostile input costs at most
//! `MAX_DEPTH` passes.
//!
//! Use it with `multiMatch` so the operator also sees the value before decoding:
//! `SecRule ARGS "@detectCmdi" "t:none,t:decodeCascade,multiMatch,..."`.

use std::borrow::Cow;

/// Layers peeled at most.
pub const MAX_DEPTH: usize = 4;

pub fn decode_cascade(input: &[u8]) -> Cow<'_, [u8]> {
    let mut cur: Cow<'_, [u8]> = Cow::Borrowed(input);
    // The score of `cur`, computed when a layer first needs it.
    let mut cur_score = None;
    for _ in 0..MAX_DEPTH {
        let Some(next) = layer(&cur) else { break };
        if next == cur.as_ref() {
            break;
        }
        let next_score = text_score(&next);
        if next_score + 1e-9 < *cur_score.get_or_insert_with(|| text_score(&cur)) {
            break;
        }
        cur = Cow::Owned(next);
        cur_score = Some(next_score);
    }
    match cur {
        Cow::Owned(v) if v.as_slice() != input => Cow::Owned(v),
        _ => Cow::Borrowed(input),
    }
}

/// One layer: the first decoder that changes the value.
fn layer(v: &[u8]) -> Option<Vec<u8>> {
    url(v).or_else(|| js(v)).or_else(|| entities(v)).or_else(|| base64(v)).or_else(|| hex(v))
}

/// The share of printable bytes, 0.0..=1.0 (1.0 for the empty value).
pub fn text_score(v: &[u8]) -> f64 {
    if v.is_empty() {
        return 1.0;
    }
    let mut good = 0usize;
    // Valid UTF-8 pieces in turn (what is invalid counts as not printable), without a copy.
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            let ok = match c {
                '\u{fffd}' => false,
                ' ' | '\t' | '\r' | '\n' => true,
                c if c.is_ascii() => c.is_ascii_graphic(),
                c => !c.is_control(),
            };
            if ok {
                good += c.len_utf8();
            }
        }
    }
    good as f64 / v.len() as f64
}

fn hexval(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_n(v: &[u8], at: usize, n: usize) -> Option<u32> {
    let s = v.get(at..at + n)?;
    let mut x = 0u32;
    for &b in s {
        x = x * 16 + u32::from(hexval(b)?);
    }
    Some(x)
}

fn push_char(out: &mut Vec<u8>, cp: u32) {
    let c = char::from_u32(cp).unwrap_or('\u{fffd}');
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

fn url(v: &[u8]) -> Option<Vec<u8>> {
    if !v.contains(&b'%') {
        return None;
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let mut changed = false;
    while let Some(&b) = v.get(i) {
        if b == b'%' {
            if let Some(x) = hex_n(v, i + 1, 2) {
                out.push(x as u8);
                i += 3;
                changed = true;
                continue;
            }
            if matches!(v.get(i + 1), Some(b'u' | b'U')) {
                if let Some(x) = hex_n(v, i + 2, 4) {
                    push_char(&mut out, x);
                    i += 6;
                    changed = true;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

fn js(v: &[u8]) -> Option<Vec<u8>> {
    if !v.contains(&b'\\') {
        return None;
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let mut changed = false;
    while let Some(&b) = v.get(i) {
        if b == b'\\' {
            match v.get(i + 1) {
                Some(b'u') if v.get(i + 2) == Some(&b'{') => {
                    if let Some(end) = v.get(i + 3..).and_then(|r| r.iter().take(7).position(|&c| c == b'}')) {
                        if let Some(x) = hex_n(v, i + 3, end).filter(|_| end > 0) {
                            push_char(&mut out, x);
                            i += 4 + end;
                            changed = true;
                            continue;
                        }
                    }
                }
                Some(b'u') => {
                    if let Some(mut x) = hex_n(v, i + 2, 4) {
                        let mut used = 6;
                        // A surrogate pair (`\ud83d\ude00`).
                        if (0xd800..0xdc00).contains(&x) && v.get(i + 6) == Some(&b'\\') && v.get(i + 7) == Some(&b'u') {
                            if let Some(lo) = hex_n(v, i + 8, 4).filter(|l| (0xdc00..0xe000).contains(l)) {
                                x = 0x10000 + ((x - 0xd800) << 10) + (lo - 0xdc00);
                                used = 12;
                            }
                        }
                        push_char(&mut out, x);
                        i += used;
                        changed = true;
                        continue;
                    }
                }
                Some(b'x') => {
                    if let Some(x) = hex_n(v, i + 2, 2) {
                        out.push(x as u8);
                        i += 4;
                        changed = true;
                        continue;
                    }
                }
                Some(&c @ (b'/' | b'"' | b'\'' | b'\\')) => {
                    out.push(c);
                    i += 2;
                    changed = true;
                    continue;
                }
                _ => {}
            }
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

fn entities(v: &[u8]) -> Option<Vec<u8>> {
    if !v.contains(&b'&') {
        return None;
    }
    const NAMED: &[(&[u8], u8)] = &[(b"lt", b'<'), (b"gt", b'>'), (b"amp", b'&'), (b"quot", b'"'), (b"apos", b'\''), (b"sol", b'/'), (b"bsol", b'\\'), (b"colon", b':'), (b"semi", b';'), (b"lpar", b'('), (b"rpar", b')'), (b"nbsp", b' '), (b"tab", b'\t'), (b"newline", b'\n'), (b"period", b'.'), (b"excl", b'!'), (b"num", b'#'), (b"dollar", b'$'), (b"percnt", b'%'), (b"equals", b'='), (b"lsqb", b'['), (b"rsqb", b']'), (b"lcub", b'{'), (b"rcub", b'}'), (b"verbar", b'|'), (b"grave", b'`')];
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let mut changed = false;
    while let Some(&b) = v.get(i) {
        if b == b'&' {
            let rest = v.get(i + 1..).unwrap_or_default();
            let end = rest.iter().take(10).position(|&c| c == b';');
            if let Some(end) = end {
                let name = rest.get(..end).unwrap_or_default();
                let decoded = if let Some(num) = name.strip_prefix(b"#") {
                    let (digits, radix) = match num.first() {
                        Some(b'x' | b'X') => (num.get(1..).unwrap_or_default(), 16),
                        _ => (num, 10),
                    };
                    std::str::from_utf8(digits).ok().filter(|d| !d.is_empty()).and_then(|d| u32::from_str_radix(d, radix).ok())
                } else {
                    NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| u32::from(c))
                };
                if let Some(cp) = decoded {
                    push_char(&mut out, cp);
                    i += end + 2;
                    changed = true;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

/// The value of each byte in base64 and base64url (`+`/`-` 62, `/`/`_` 63), 255 outside both
/// (built at compile time: an index out of bounds would not compile).
#[allow(clippy::indexing_slicing)]
const B64: [u8; 256] = {
    let mut t = [255u8; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'-' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'_' as usize] = 63;
    t
};

fn b64val(b: u8) -> Option<u32> {
    let x = B64.get(usize::from(b)).copied().unwrap_or(255);
    (x != 255).then_some(u32::from(x))
}

/// Decodes base64 or base64url (padding optional); `None` when a character is outside the
/// alphabet or the length cannot be base64.
fn b64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let body = s.iter().rposition(|&c| c != b'=').map_or(&[][..], |p| s.get(..=p).unwrap_or_default());
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    // Control bytes are never text: once more than 5% of the output are, `decodes_to_text`
    // cannot hold, and decoding stops (random tokens reach that early).
    let budget = body.len() * 3 / 4 / 20;
    let mut control = 0usize;
    // Nor is output that is not UTF-8: the continuation bytes still due after a lead byte
    // (random tokens break this within a few bytes).
    let mut due = 0u8;
    for &c in body {
        acc = (acc << 6) | b64val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            let b = (acc >> bits) as u8;
            if b == 0x7f || (b < 0x20 && !matches!(b, b'\t' | b'\r' | b'\n')) {
                control += 1;
                if control > budget {
                    return None;
                }
            }
            due = match (due, b) {
                (0, 0x00..=0x7f) => 0,
                (0, 0xc2..=0xdf) => 1,
                (0, 0xe0..=0xef) => 2,
                (0, 0xf0..=0xf4) => 3,
                (n, 0x80..=0xbf) if n > 0 => n - 1,
                _ => return None,
            };
            out.push(b);
        }
    }
    Some(out)
}

/// Whether base64 output reads as text: valid UTF-8, almost all printable.
fn decodes_to_text(d: &[u8]) -> bool {
    !d.is_empty() && std::str::from_utf8(d).is_ok() && text_score(d) >= 0.95
}

fn base64(v: &[u8]) -> Option<Vec<u8>> {
    let is_b64 = |c: u8| b64val(c).is_some() || c == b'=';
    // The whole value.
    // Set when the whole value was decoded and is not text: as a run it would fail again.
    let mut whole_failed = false;
    // A word of one case (`abcdefgh`, `HELLOWORLD`) is taken for a word; mixed case, digits or
    // `+/=-_` can be base64 (`JiBzeXNpbmZv` is `& sysinfo`).
    let one_case = |v: &[u8]| v.iter().all(u8::is_ascii_lowercase) || v.iter().all(u8::is_ascii_uppercase);
    if v.len() >= 8 && v.iter().all(|&c| is_b64(c)) && !one_case(v) {
        if let Some(d) = b64_decode(v).filter(|d| decodes_to_text(d)) {
            return Some(d);
        }
        whole_failed = true;
    }
    // Runs of at least 16 base64 characters inside the value. The output is built only from
    // the first run that decodes (most values have none: they are not copied).
    if v.len() < 16 {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < v.len() {
        let rest = v.get(i..).unwrap_or_default();
        let body = rest.iter().take_while(|&&c| b64val(c).is_some()).count();
        let pad = if body > 0 { rest.get(body..).unwrap_or_default().iter().take(2).take_while(|&&c| c == b'=').count() } else { 0 };
        let run = body + pad;
        if run == 0 {
            if let Some(o) = out.as_mut() {
                o.extend_from_slice(v.get(i..=i).unwrap_or_default());
            }
            i += 1;
            continue;
        }
        let s = v.get(i..i + run).unwrap_or_default();
        let mixed = |s: &[u8]| s.iter().any(u8::is_ascii_digit) || s.iter().any(|c| matches!(c, b'+' | b'/' | b'=' | b'-' | b'_')) || (s.iter().any(u8::is_ascii_uppercase) && s.iter().any(u8::is_ascii_lowercase));
        let again = whole_failed && run == v.len();
        match (run >= 16 && !again && mixed(s)).then(|| b64_decode(s)).flatten().filter(|d| decodes_to_text(d)) {
            Some(d) => {
                let o = out.get_or_insert_with(|| {
                    let mut o = Vec::with_capacity(v.len());
                    o.extend_from_slice(v.get(..i).unwrap_or_default());
                    o
                });
                o.extend_from_slice(&d);
            }
            None => {
                if let Some(o) = out.as_mut() {
                    o.extend_from_slice(s);
                }
            }
        }
        i += run;
    }
    out
}

fn hex(v: &[u8]) -> Option<Vec<u8>> {
    let s = v.strip_prefix(b"0x").or_else(|| v.strip_prefix(b"0X")).unwrap_or(v);
    if s.len() < 8 || !s.len().is_multiple_of(2) || !s.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let d: Vec<u8> = s.chunks_exact(2).filter_map(|p| hex_n(p, 0, 2)).map(|x| x as u8).collect();
    decodes_to_text(&d).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(s: &str) -> String {
        String::from_utf8_lossy(&decode_cascade(s.as_bytes())).into_owned()
    }

    #[test]
    fn peels_each_encoding() {
        assert_eq!(dc("%253Cscript%253E"), "<script>");
        assert_eq!(dc("\\u003cscript\\u003e"), "<script>");
        assert_eq!(dc("&lt;!--#exec cmd=&quot;id&quot;--&gt;"), "<!--#exec cmd=\"id\"-->");
        assert_eq!(dc("Y2F0IC9ldGMvcGFzc3dk"), "cat /etc/passwd");
        assert_eq!(dc("Y2F0IC9ldGMvcGFzc3dk".replace('/', "_").as_str()), "cat /etc/passwd");
        assert_eq!(dc("636174202f6574632f706173737764"), "cat /etc/passwd");
        assert_eq!(dc("x=Li4vLi4vLi4vZXRjL3Bhc3N3ZA=="), "x=../../../etc/passwd");
        // A run in the middle: the text before and after it is kept.
        assert_eq!(dc("a=1&t=Y2F0IC9ldGMvcGFzc3dk&z (end)"), "a=1&t=cat /etc/passwd&z (end)");
        // Nested: base64 of a URL-encoded payload.
        assert_eq!(dc("JTNCaWQlM0IlMjB1bmFtZQ=="), "%3Bid%3B%20uname".replace("%3B", ";").replace("%20", " "));
    }

    #[test]
    fn leaves_tokens_and_text_alone() {
        for s in ["d41d8cd98f00b204e9800998ecf8427e", "hello world", "Zm9vYmFy", "abcdefghijklmnopqrstuvwxyz", "550e8400-e29b-41d4-a716-446655440000", "a&b;c", "C:\\Users\\me", ""] {
            assert!(matches!(decode_cascade(s.as_bytes()), Cow::Borrowed(_)) || dc(s) != s, "{s}");
        }
        assert!(matches!(decode_cascade(b"d41d8cd98f00b204e9800998ecf8427e"), Cow::Borrowed(_)));
        assert!(matches!(decode_cascade(b"hello world"), Cow::Borrowed(_)));
        assert!(matches!(decode_cascade(b"abcdefghijklmnopqrstuvwxyz"), Cow::Borrowed(_)));
    }

    #[test]
    fn depth_and_length_are_bounded() {
        let mut s = "<".to_string();
        for _ in 0..10 {
            s = s.replace('%', "%25").replace('<', "%3C");
        }
        let out = decode_cascade(s.as_bytes());
        assert!(out.len() <= s.len());
        let junk: Vec<u8> = (0..20_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        assert!(decode_cascade(&junk).len() <= junk.len());
    }
}
