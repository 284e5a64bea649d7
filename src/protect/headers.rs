//! Response hardening: the cookie rule (`Set-Cookie` attributes).

/// Which attributes the cookie rule adds when a `Set-Cookie` lacks them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieRule {
    pub secure: bool,
    pub http_only: bool,
    /// `Strict`, `Lax` or `None` (`None` also needs `Secure` in browsers).
    pub same_site: Option<String>,
}

impl CookieRule {
    /// The rewritten `Set-Cookie` value, or `None` when it already has every attribute.
    /// Attribute names compare case-insensitively; values an upstream set are kept
    /// (an existing `SameSite=None` stays).
    pub fn apply(&self, value: &[u8]) -> Option<Vec<u8>> {
        let mut has_secure = false;
        let mut has_http_only = false;
        let mut has_same_site = false;
        // The first part is name=value; attributes follow.
        for attr in value.split(|&b| b == b';').skip(1) {
            let name = attr.split(|&b| b == b'=').next().unwrap_or_default().trim_ascii();
            has_secure |= name.eq_ignore_ascii_case(b"secure");
            has_http_only |= name.eq_ignore_ascii_case(b"httponly");
            has_same_site |= name.eq_ignore_ascii_case(b"samesite");
        }
        let mut out = value.trim_ascii_end().to_vec();
        let before = out.len();
        if self.secure && !has_secure {
            out.extend_from_slice(b"; Secure");
        }
        if self.http_only && !has_http_only {
            out.extend_from_slice(b"; HttpOnly");
        }
        if let (Some(ss), false) = (&self.same_site, has_same_site) {
            out.extend_from_slice(b"; SameSite=");
            out.extend_from_slice(ss.as_bytes());
        }
        (out.len() != before).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> CookieRule {
        CookieRule { secure: true, http_only: true, same_site: Some("Lax".into()) }
    }

    #[test]
    fn adds_missing_attributes_only() {
        let r = rule();
        assert_eq!(r.apply(b"sid=abc; Path=/").unwrap(), b"sid=abc; Path=/; Secure; HttpOnly; SameSite=Lax");
        assert_eq!(r.apply(b"sid=abc;path=/;secure;HTTPONLY").unwrap(), b"sid=abc;path=/;secure;HTTPONLY; SameSite=Lax");
        assert_eq!(r.apply(b"a=b; Secure; HttpOnly; SameSite=None"), None);
        // A value that merely contains the word is not the attribute.
        assert_eq!(r.apply(b"secure=1").unwrap(), b"secure=1; Secure; HttpOnly; SameSite=Lax");
        assert_eq!(CookieRule::default().apply(b"a=b"), None);
        assert_eq!(r.apply(b"").unwrap(), b"; Secure; HttpOnly; SameSite=Lax");
    }
}
