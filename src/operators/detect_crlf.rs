//! `@detectCRLF` (wafer extension): CRLF, HTTP header and mail header injection.
//!
//! The value is split into lines at CR and LF (raw, or `%0d`/`%0a` and `\r`/`\n` left
//! encoded once more). The first line is the value as the application meant it; every
//! following line is an injection when it starts like a header the HTTP or mail layer acts
//! on: `Name:` with a name of [`HEADERS`] or any `X-` name, an HTTP status line
//! (`HTTP/1.1 200`), a name of hyphenated words (`Remote-Addr:`), a `name=value` parameter
//! after a lone CR (`test\rnext=more`: browsers send line breaks as CRLF), or when the lines contain an empty line followed by markup (response
//! splitting: `\r\n\r\n<html>`). Free text with line breaks passes: "Note:" or "Dear John,"
//! are no header.

const HEADERS: &[&str] = &["set-cookie", "location", "content-type", "content-length", "content-disposition", "content-transfer-encoding", "transfer-encoding", "refresh", "host", "cookie", "access-control-allow-origin", "x-xss-protection", "cache-control", "bcc", "cc", "to", "from", "subject", "reply-to", "sender", "return-path", "mime-version", "authorization", "connection", "upgrade", "link", "content-security-policy", "strict-transport-security", "server", "expires", "pragma", "vary", "etag", "last-modified", "x-forwarded-for", "user-agent", "referer", "date"];

fn decode_breaks(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while let Some(&b) = v.get(i) {
        let next2 = v.get(i + 1..i + 3).map(|x| x.to_ascii_lowercase());
        match (b, next2.as_deref()) {
            (b'%', Some(b"0d")) => {
                out.push(b'\r');
                i += 3;
            }
            (b'%', Some(b"0a")) => {
                out.push(b'\n');
                i += 3;
            }
            _ if b == b'\\' && matches!(v.get(i + 1), Some(b'r' | b'n')) => {
                out.push(if v.get(i + 1) == Some(&b'r') { b'\r' } else { b'\n' });
                i += 2;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Whether the value can hold a line break [`detect_crlf`] reads: CR or LF, raw or as
/// `%0d`/`%0a` or `\\r`/`\\n` (what `decode_breaks` turns into one).
pub fn may_match(value: &[u8]) -> bool {
    value.iter().any(|&b| b == b'\r' || b == b'\n')
        || value.windows(3).any(|w| w.first() == Some(&b'%') && w.get(1) == Some(&b'0') && matches!(w.get(2), Some(b'a' | b'A' | b'd' | b'D')))
        || value.windows(2).any(|w| w.first() == Some(&b'\\') && matches!(w.get(1), Some(b'r' | b'n')))
}

pub fn detect_crlf(value: &[u8]) -> Option<&'static str> {
    if !value.iter().any(|&b| matches!(b, b'\r' | b'\n' | b'%' | b'\\')) {
        return None;
    }
    let v = decode_breaks(value);
    if !v.iter().any(|&b| b == b'\r' || b == b'\n') {
        return None;
    }
    let s = String::from_utf8_lossy(&v);
    let mut lines = s.split(['\r', '\n']);
    lines.next();
    let mut empty_seen = false;
    for line in lines {
        let l = line.trim_start_matches([' ', '\t']);
        if l.is_empty() {
            empty_seen = true;
            continue;
        }
        let lower = l.to_ascii_lowercase();
        if let Some((name, rest)) = lower.split_once(':') {
            let name = name.trim_end();
            let valid = !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
            // A name of hyphenated words of 3 letters or more is written the way HTTP names
            // its headers (`Remote-Addr`, `Accept-Language`); prose has few (`E-mail:`,
            // `Check-in:` have a shorter word).
            let hyphenated = name.contains('-') && name.split('-').all(|w| w.len() >= 3 && w.bytes().all(|c| c.is_ascii_alphabetic()));
            if valid && (HEADERS.contains(&name) || name.starts_with("x-") || (hyphenated && !rest.trim().is_empty())) && (!rest.is_empty() || name.starts_with("x-")) {
                return Some(if matches!(name, "bcc" | "cc" | "to" | "from" | "subject" | "reply-to" | "sender" | "return-path") { "mail-header" } else { "http-header" });
            }
        }
        // After a CR alone (browsers send a text's line breaks as CRLF), a parameter
        // `name=value`: a query or form body split in two (`test\rnext=more`).
        if bare_cr_before(&s, line) && param_line(l) {
            return Some("parameter-splitting");
        }
        if lower.starts_with("http/1.") || lower.starts_with("http/2") {
            return Some("status-line");
        }
        if empty_seen && lower.starts_with('<') {
            return Some("response-splitting");
        }
    }
    None
}

/// Whether `line` (a slice of `s`) follows a CR that is not part of a CRLF.
fn bare_cr_before(s: &str, line: &str) -> bool {
    let start = line.as_ptr() as usize - s.as_ptr() as usize;
    start >= 1 && s.as_bytes().get(start - 1) == Some(&b'\r')
}

/// `name=value` with no blank: an identifier, `=`, then anything without whitespace.
fn param_line(l: &str) -> bool {
    l.split_once('=').is_some_and(|(n, v)| !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'[' || c == b']') && !v.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::detect_crlf as d;

    #[test]
    fn injected_headers() {
        for s in ["x\r\nSet-Cookie: a=b", "%0d%0aLocation: http://evil", "me@x.com\nBcc: all@x.com", "hi%0ACc:victim@x.com", "a\r\n\r\n<html>owned</html>", "a\\r\\nX-Injected: 1", "x%0d%0aHTTP/1.1 200 OK", "subject\nContent-Type: text/html", "\r\nRemote-addr: foo.bar.com", "test\rnext=more", "a%0dadmin=1"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn text_with_lines_passes() {
        for s in ["Dear John,\nNote: see below\nThanks", "line1\r\nline2", "100%0 sure", "C:\\new\\dir", "Set-Cookie: a", "a\n\nb", "Time: 10:00\nPlace: here", "Hi\r\nE-mail: jane@example.com", "Hi\nCheck-in: 15:00", "a=1\r\nb=2", "x\nkey=value", "x\rnote = hello world", "Hi\r\nFollow-up:"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
