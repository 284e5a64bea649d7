//! Files embedded at build time (see build.rs): wafer's own `rules/` and,
//! when built with `CRS_DIR`, the OWASP Core Rule Set.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// Resolves `Include @name`. A `*` in the name matches any run of characters
/// (`@owasp_crs/*.conf`); matches come in file-name order.
pub fn lookup(name: &str) -> Vec<(&'static str, &'static str)> {
    CONF_FILES.iter().filter(|(n, _)| glob_match(name, n)).map(|&(n, t)| (n, t)).collect()
}

/// A data file (`@pmFromFile scanners-user-agents.data`).
pub fn data_file(name: &str) -> Option<&'static str> {
    let base = name.rsplit('/').next().unwrap_or(name);
    DATA_FILES.iter().find(|(n, _)| *n == base).map(|&(_, t)| t)
}

/// Names of the embedded SecLang files.
pub fn names() -> impl Iterator<Item = &'static str> {
    CONF_FILES.iter().map(|(n, _)| *n)
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
    fn own_tiers_are_embedded() {
        assert_eq!(lookup("@targeted").len(), 1);
        assert_eq!(lookup("@headers-only").len(), 1);
        assert_eq!(lookup("@recommended-conf").len(), 1);
        assert!(lookup("@nope").is_empty());
        assert!(glob_match("@owasp_crs/*.conf", "@owasp_crs/REQUEST-901-INITIALIZATION.conf"));
        assert!(!glob_match("@owasp_crs/*.conf", "@owasp_crs/x.data"));
    }
}
