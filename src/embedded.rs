//! Files embedded at build time (see build.rs): wafer's own `rules/` and,
//! when built with `CRS_DIR`, the OWASP Core Rule Set. Stored deflated (the CRS's ~0.9 MB
//! of text in ~0.2 MB): every VM's memory holds the module's data, and Envoy and V8 keep
//! copies of the module; a file is inflated when a configuration includes it.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// Resolves `Include @name`. A `*` in the name matches any run of characters
/// (`@owasp_crs/*.conf`); matches come in file-name order, each inflated when reached (one
/// file's text at a time in memory while a VM compiles them: the memory it grows to stays).
pub fn lookup(name: &str) -> impl Iterator<Item = (&'static str, String)> + '_ {
    CONF_FILES.iter().filter(move |(n, _, _)| glob_match(name, n)).map(|&(n, z, len)| (n, inflate(z, len)))
}

/// A data file (`@pmFromFile scanners-user-agents.data`).
pub fn data_file(name: &str) -> Option<String> {
    let base = name.rsplit('/').next().unwrap_or(name);
    DATA_FILES.iter().find(|(n, _, _)| *n == base).map(|&(_, z, len)| inflate(z, len))
}

/// The build-time analysis of `pattern` (see `operators::rx_literals`), when it is the pattern of
/// an `@rx` in an embedded rule file.
pub fn rx_analysis(pattern: &str) -> Option<crate::operators::rx_literals::Analysis> {
    let key = crate::operators::rx_literals::pattern_key(pattern);
    let i = RX_ANALYSES.binary_search_by(|e| (e.0, e.1, e.2).cmp(&key)).ok()?;
    let &(_, _, _, flags, lits) = RX_ANALYSES.get(i)?;
    Some(crate::operators::rx_literals::Analysis {
        unicode: flags & 1 != 0,
        whole: flags & 2 != 0,
        literals: lits.map(|l| l.iter().map(|x| x.to_vec()).collect()),
    })
}

/// Names of the embedded SecLang files.
pub fn names() -> impl Iterator<Item = &'static str> {
    CONF_FILES.iter().map(|(n, _, _)| *n)
}

/// The text of an embedded file (deflated and checked as UTF-8 by the build; the tests
/// inflate every one).
fn inflate(z: &[u8], len: usize) -> String {
    miniz_oxide::inflate::decompress_to_vec_with_limit(z, len).ok().and_then(|v| String::from_utf8(v).ok()).unwrap_or_default()
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post) && !post.contains('*'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_files_inflate_to_their_text() {
        for &(name, z, len) in CONF_FILES.iter().chain(DATA_FILES) {
            assert_eq!(inflate(z, len).len(), len, "{name}");
        }
        assert_eq!(lookup("@targeted").collect::<Vec<_>>(), vec![("@targeted", include_str!("../rules/targeted.conf").to_string())]);
        if !CRS_VERSION.is_empty() {
            assert!(lookup("@owasp_crs/*.conf").any(|(_, t)| t.contains("id:942100")));
            assert!(data_file("scanners-user-agents.data").is_some_and(|t| t.lines().count() > 10));
        }
    }

    /// Every `@rx` of every embedded file takes its analysis from the build-time table, and it
    /// is the analysis a VM would make; another pattern does not.
    #[test]
    fn embedded_patterns_are_analyzed_at_build_time() {
        let mut n = 0;
        for (name, text) in lookup("@*") {
            for d in crate::seclang::lexer::lex(name, &text).unwrap() {
                let Some(op) = d.args.get(1).filter(|_| d.name.eq_ignore_ascii_case("SecRule")) else { continue };
                let o = crate::seclang::parser::parse_operator(&op.text);
                if o.name.eq_ignore_ascii_case("rx") {
                    let want = crate::operators::rx_literals::analyze_pattern(&o.param).unwrap();
                    assert_eq!(rx_analysis(&o.param), Some(want), "{name}: {}", o.param);
                    n += 1;
                }
            }
        }
        assert!(n >= 2, "{n} patterns");
        if !CRS_VERSION.is_empty() {
            assert!(n > 300, "{n} patterns");
        }
        assert_eq!(rx_analysis("(?i)not an embedded pattern at all"), None);
        assert_eq!(rx_analysis(""), None);
    }

    #[test]
    fn own_tiers_are_embedded() {
        assert_eq!(lookup("@targeted").count(), 1);
        assert_eq!(lookup("@headers-only").count(), 1);
        assert_eq!(lookup("@recommended-conf").count(), 1);
        assert!(lookup("@nope").next().is_none());
        assert!(glob_match("@owasp_crs/*.conf", "@owasp_crs/REQUEST-901-INITIALIZATION.conf"));
        assert!(!glob_match("@owasp_crs/*.conf", "@owasp_crs/x.data"));
    }
}
