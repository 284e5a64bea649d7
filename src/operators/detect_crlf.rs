//! `@detectCRLF` (wafer extension): CRLF, HTTP header and mail header injection.
//!
//! The value is split into lines at CR and LF (raw, or `%0d`/`%0a` and `\r`/`\n` left
//! encoded once more). The first line is the value as the application meant it; every
//! following line is an injection when it starts like a header the HTTP or mail layer acts
//! on: `Name:` with a name of [`HEADERS`] or any `X-` name, an HTTP status line
//! (`HTTP/1.1 200`), or when the lines contain an empty line followed by markup (response
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
            if valid && (HEADERS.contains(&name) || name.starts_with("x-")) && (!rest.is_empty() || name.starts_with("x-")) {
                return Some(if matches!(name, "bcc" | "cc" | "to" | "from" | "subject" | "reply-to" | "sender" | "return-path") { "mail-header" } else { "http-header" });
            }
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

#[cfg(test)]
mod tests {
    use super::detect_crlf as d;

    #[test]
    fn injected_headers() {
        for s in ["x\r\nSet-Cookie: a=b", "%0d%0aLocation: http://evil", "me@x.com\nBcc: all@x.com", "hi%0ACc:victim@x.com", "a\r\n\r\n<html>owned</html>", "a\\r\\nX-Injected: 1", "x%0d%0aHTTP/1.1 200 OK", "subject\nContent-Type: text/html"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn text_with_lines_passes() {
        for s in ["Dear John,\nNote: see below\nThanks", "line1\r\nline2", "100%0 sure", "C:\\new\\dir", "Set-Cookie: a", "a\n\nb", "Time: 10:00\nPlace: here"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
