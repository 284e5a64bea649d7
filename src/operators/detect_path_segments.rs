//! `@detectSQLiPath` and `@detectXSSPath` (wafer extensions): libinjection's SQLi and XSS
//! detectors on a URL path, the whole path and then each of its segments.
//!
//! A payload placed in the path sits between the path's other segments
//! (`/files/-8709" or 8571=8571--/view`): libinjection reads the segments before it as
//! SQL (`/files/` is an operator and a word) and finds no injection in the whole, although
//! the segment alone is one. A segment is the text between two `/` (or `\`, which Windows
//! servers read as one); segments that are one word or number (`v1`, `42`, `index.html`
//! has a `.`, so it is tokenized) cannot be an injection and are skipped, the way
//! `@detectSQLi` skips a value of one word. The contexts of `@detectSQLiContext` and
//! `@detectXSSContext` (token sequences, wherever they sit) are then read in the whole path.

use super::{detect_sqli_context, detect_xss_context, libinjection};

/// The segments of `path` that can hold an injection: not empty, and not one run of
/// letters, digits and `_`.
fn segments(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/' || b == b'\\').filter(|s| s.len() >= 2 && !s.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// Whether the path has more than one segment (otherwise the whole is its only segment).
fn has_separator(path: &[u8]) -> bool {
    path.iter().any(|&b| b == b'/' || b == b'\\')
}

/// `@detectSQLiPath`: the fingerprint of the whole path's SQLi, or of the first segment's.
pub fn detect_sqli_path(path: &[u8]) -> Option<String> {
    if let Some(fp) = libinjection::detect_sqli(path) {
        return Some(fp);
    }
    if has_separator(path) {
        if let Some(fp) = segments(path).find_map(libinjection::detect_sqli) {
            return Some(fp);
        }
    }
    detect_sqli_context::sql_context(path).map(String::from)
}

/// `@detectXSSPath`: whether the whole path or one of its segments is XSS.
pub fn detect_xss_path(path: &[u8]) -> bool {
    libinjection::detect_xss(path) || (has_separator(path) && segments(path).any(libinjection::detect_xss)) || detect_xss_context::xss_context(path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_injection_in_one_segment_is_found() {
        assert!(libinjection::detect_sqli(b"/files/-8709\" or 8571=8571--/view").is_none(), "the whole path alone is not SQLi to libinjection");
        assert!(detect_sqli_path(b"/files/-8709\" or 8571=8571--/view").is_some());
        assert!(detect_sqli_path(b"/api/items/1' union select password from users--/detail").is_some());
        assert!(detect_sqli_path(b"\\share\\1 or 1=1--\\x").is_some());
        assert!(detect_xss_path(b"/p/<img src=x onerror=alert(1)>/view"));
        // Contexts libinjection misses, across the segments.
        assert!(detect_sqli_path(b"/files/;DROP/*test*/TABLE test;/view").is_some());
        assert!(detect_xss_path(b"/files/</math>//[\"<script>alert(1)</script>/view"));
        assert!(detect_xss_path(b"/files/x\";setTimeout(name, 1)//view"));
    }

    #[test]
    fn the_whole_path_is_still_read() {
        // A payload with its own `/` is split by the segments: the whole path holds it.
        assert!(detect_xss_path(b"/files/<script>alert(1)</script>/view"));
    }

    #[test]
    fn ordinary_paths_pass() {
        for p in ["/", "/api/v1/users/42/orders", "/static/css/site.min.css", "/blog/2024/05/hello-world", "/products/blue-mug-350ml", "/search/shoes+size+42", "/files/report%20Q3.pdf/view", "/user/jane.doe@example.com/profile", "/wiki/C%2B%2B_(programming_language)", "/de/kategorie/herren-schuhe?x=1", "/a/b/c.php", "/img/1-2-3.png", "/order/ab12-cd34-ef56"] {
            assert!(detect_sqli_path(p.as_bytes()).is_none(), "{p}");
            assert!(!detect_xss_path(p.as_bytes()), "{p}");
        }
    }
}
