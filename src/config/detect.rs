//! The `detect` key of the plugin configuration: wafer's detection tier (`@wafer-detect`,
//! docs/detection.md) without writing SecLang.
//!
//! ```json
//! {"crs": {"paranoia_level": 1}, "detect": {}}
//! {"detect": {"classes": ["rce", "lfi", "nosqli"]}}
//! ```
//!
//! Every rule set gets `Include @wafer-detect`: right after its last CRS rule file when it
//! includes the CRS (before the `crs` key's exclusions, so that they apply to these rules
//! too), at its end otherwise. Alone, `detect` selects `@recommended-conf` with the engine on
//! and `@wafer-detect`. `classes` keeps only the rules tagged `attack-<class>` of the list.

use super::json::{Json, Obj};
use crate::error::Error;

/// The classes of `@wafer-detect` (its `attack-<class>` tags).
pub const CLASSES: &[&str] = &["rce", "lfi", "ssti", "ssi", "ldapi", "nosqli", "xxe", "crlf", "sqli", "xss"];

#[derive(Debug, Clone, Default)]
pub struct DetectConfig {
    /// Only these classes (default: all).
    pub classes: Option<Vec<String>>,
}

impl DetectConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<DetectConfig, String> {
        let o = Obj::new(v, path, &["classes"])?;
        let classes = o.strings("classes")?;
        if let Some(c) = classes.iter().flatten().find(|c| !CLASSES.contains(&c.as_str())) {
            return Err(format!("{path}.classes: unknown class \"{c}\" (known: {})", CLASSES.join(", ")));
        }
        Ok(DetectConfig { classes })
    }

    fn lines(&self) -> Vec<String> {
        let mut l = vec!["Include @wafer-detect".to_string()];
        if let Some(keep) = &self.classes {
            for c in CLASSES.iter().filter(|c| !keep.iter().any(|k| k == *c)) {
                l.push(format!("SecRuleRemoveByTag \"attack-{c}\""));
            }
        }
        l
    }

    /// Adds the include to one rule set's lines (after the CRS, or at the end).
    pub fn apply(&self, lines: &mut Vec<String>) -> Result<(), Error> {
        let is_crs = |l: &String| {
            let t = l.trim();
            t.get(..8).is_some_and(|p| p.eq_ignore_ascii_case("include ")) && t.get(8..).is_some_and(|r| r.trim().starts_with("@owasp_crs/"))
        };
        let at = lines.iter().rposition(is_crs).map_or(lines.len(), |p| p + 1);
        for (i, l) in self.lines().into_iter().enumerate() {
            lines.insert(at + i, l);
        }
        Ok(())
    }
}

/// The rule set used when only `detect` is configured.
pub fn default_directives() -> Vec<String> {
    ["Include @recommended-conf", "SecRuleEngine On"].iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: &str) -> Result<DetectConfig, String> {
        DetectConfig::from_json(&super::super::json::parse(json.as_bytes())?, "detect")
    }

    #[test]
    fn include_lands_after_the_crs_and_classes_filter() {
        let mut lines = vec!["Include @crs-setup-conf".to_string(), "Include @owasp_crs/*.conf".to_string(), "SecRuleRemoveById 1".to_string()];
        cfg(r#"{"classes":["rce","lfi","ssti","ssi","ldapi","nosqli","xxe","crlf","sqli"]}"#).unwrap().apply(&mut lines).unwrap();
        assert_eq!(lines[2], "Include @wafer-detect");
        assert_eq!(lines[3], "SecRuleRemoveByTag \"attack-xss\"");
        assert_eq!(lines[4], "SecRuleRemoveById 1");
        assert!(cfg(r#"{"classes":["bogus"]}"#).unwrap_err().contains("bogus"));
        assert!(cfg(r#"{"level":1}"#).is_err());
    }
}
