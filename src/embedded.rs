//! Files embedded at build time (see build.rs): wafer's own `rules/` and,
//! when built with `CRS_DIR`, the OWASP Core Rule Set and the CRS plugins of
//! `CRS_PLUGINS_DIR` (`@crs-plugins/<name>-config.conf`, `-before.conf`, `-after.conf`). Stored deflated (the CRS's ~0.9 MB
//! of text in ~0.2 MB): every VM's memory holds the module's data, and Envoy and V8 keep
//! copies of the module; a file is inflated when a configuration includes it.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// Resolves `Include @name`. Each `*` in the name matches any run of characters
/// (`@owasp_crs/*.conf`, `@crs-plugins/wordpress-*-before.conf`); matches come in file-name order, each inflated when reached (one
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

/// The embedded CRS plugin a configuration names: its full name
/// (`wordpress-rule-exclusions`) or the one plugin whose name starts with `<short>-`
/// (`wordpress`). The error lists the embedded plugins.
pub fn crs_plugin(name: &str) -> Result<&'static str, String> {
    if let Some(p) = CRS_PLUGINS.iter().find(|p| **p == name) {
        return Ok(p);
    }
    let prefix = format!("{name}-");
    let found: Vec<&'static str> = CRS_PLUGINS.iter().copied().filter(|p| p.starts_with(&prefix)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] if CRS_PLUGINS.is_empty() => Err(format!("CRS plugin \"{name}\": this build embeds no CRS plugins (build with CRS_PLUGINS_DIR set)")),
        [] => Err(format!("CRS plugin \"{name}\" is not embedded (embedded: {})", CRS_PLUGINS.join(", "))),
        many => Err(format!("CRS plugin \"{name}\" names several: {}", many.join(", "))),
    }
}

/// The embedded file of plugin `plugin` for one slot (`config`, `before`, `after`), if the
/// plugin has one.
pub fn crs_plugin_file(plugin: &str, slot: &str) -> Option<&'static str> {
    let name = format!("@crs-plugins/{plugin}-{slot}.conf");
    names().find(|n| *n == name)
}

/// `pattern` against `name`, each `*` matching any run of characters (none included).
fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = rest.get(i + p.len()..).unwrap_or(""),
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
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

    /// The CRS plugins of `CRS_PLUGINS_DIR` (the official ones in ../shared/crs-plugins when
    /// this is built there): each has its files, a short name finds it, others are refused.
    #[test]
    fn crs_plugins_are_embedded_by_slot() {
        for p in CRS_PLUGINS {
            assert!(crs_plugin_file(p, "config").or(crs_plugin_file(p, "before")).or(crs_plugin_file(p, "after")).is_some(), "{p}");
            assert_eq!(crs_plugin(p), Ok(*p));
        }
        if CRS_PLUGINS.contains(&"wordpress-rule-exclusions") {
            assert_eq!(crs_plugin("wordpress"), Ok("wordpress-rule-exclusions"));
            assert!(lookup("@crs-plugins/wordpress-*-before.conf").all(|(n, t)| n == "@crs-plugins/wordpress-rule-exclusions-before.conf" && t.contains("id:9507100")));
            assert!(crs_plugin("joomla").unwrap_err().contains("wordpress-rule-exclusions"));
        }
        assert!(crs_plugin("").is_err());
    }

    #[test]
    fn own_tiers_are_embedded() {
        assert_eq!(lookup("@targeted").count(), 1);
        assert_eq!(lookup("@headers-only").count(), 1);
        assert_eq!(lookup("@recommended-conf").count(), 1);
        assert!(lookup("@nope").next().is_none());
        assert!(glob_match("@owasp_crs/*.conf", "@owasp_crs/REQUEST-901-INITIALIZATION.conf"));
        assert!(!glob_match("@owasp_crs/*.conf", "@owasp_crs/x.data"));
        assert!(glob_match("@crs-plugins/wordpress-*-before.conf", "@crs-plugins/wordpress-rule-exclusions-before.conf"));
        assert!(!glob_match("@crs-plugins/wordpress-*-before.conf", "@crs-plugins/wordpress-rule-exclusions-after.conf"));
        assert!(glob_match("@crs-plugins/*-*.conf", "@crs-plugins/a-b.conf"));
        assert!(!glob_match("@crs-plugins/*-*.conf", "@crs-plugins/ab.conf"));
        assert!(!glob_match("@a*a", "@a"));
        assert!(glob_match("@a*a", "@aa"));
        assert!(glob_match("@x", "@x") && !glob_match("@x", "@xy"));
    }
}
