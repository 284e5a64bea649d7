//! The `crs` key of the plugin configuration: OWASP CRS settings without
//! writing SecLang, mapped onto the CRS `tx` variables the way
//! `crs-setup.conf` does (rules 900000, 900110, ...).
//!
//! ```json
//! {"crs": {"paranoia_level": 2, "inbound_threshold": 5, "mode": "block",
//!          "exclusions": [{"rule_ids": [942100], "path_prefix": "/search"},
//!                         {"rule_ids": [932236], "target": "ARGS:command"}]},
//!          "plugins": ["wordpress"]}
//! ```
//!
//! `plugins` names embedded CRS plugins (see `crate::embedded::crs_plugin`); each plugin's
//! files go where CRS 4 puts them: `<name>-config.conf` and `<name>-before.conf` after
//! `crs-setup` (and the settings above), `<name>-after.conf` after the last rule file.

use std::collections::BTreeMap;

use super::json::{Json, Obj};
use crate::error::Error;

/// Ids of the rules wafer generates (in CRS's reserved local range 9,000,000+).
const SETUP_ID: u64 = 9_000_000;

#[derive(Debug, Clone, Default)]
pub struct CrsConfig {
    /// Blocking paranoia level, 1-4 (`tx.blocking_paranoia_level`).
    pub paranoia_level: Option<u8>,
    /// Detection paranoia level (>= paranoia_level): rules above the blocking
    /// level log but add no blocking score (`tx.detection_paranoia_level`).
    pub detection_paranoia_level: Option<u8>,
    /// `tx.inbound_anomaly_score_threshold` (CRS default 5).
    pub inbound_threshold: Option<u32>,
    /// `tx.outbound_anomaly_score_threshold` (CRS default 4).
    pub outbound_threshold: Option<u32>,
    /// "block" (SecRuleEngine On) or "detect" (DetectionOnly).
    pub mode: Option<String>,
    /// Any other CRS setting, e.g. `{"allowed_methods": "GET HEAD POST"}`.
    pub tx: BTreeMap<String, String>,
    pub exclusions: Vec<Exclusion>,
    /// Embedded CRS plugins to load, by name (`wordpress` or `wordpress-rule-exclusions`).
    pub plugins: Vec<String>,
}

/// A rule exclusion: remove rules (or one target of them), everywhere or
/// for paths starting with `path_prefix`.
#[derive(Debug, Clone, Default)]
pub struct Exclusion {
    pub rule_ids: Vec<u64>,
    pub tags: Vec<String>,
    /// `ARGS:password`, `REQUEST_COOKIES:session`...: remove only this target.
    pub target: Option<String>,
    pub path_prefix: Option<String>,
}

impl CrsConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<CrsConfig, String> {
        const FIELDS: &[&str] = &["paranoia_level", "detection_paranoia_level", "inbound_threshold", "outbound_threshold", "mode", "tx", "exclusions", "plugins"];
        let o = Obj::new(v, path, FIELDS)?;
        Ok(CrsConfig {
            paranoia_level: o.int("paranoia_level")?,
            detection_paranoia_level: o.int("detection_paranoia_level")?,
            inbound_threshold: o.int("inbound_threshold")?,
            outbound_threshold: o.int("outbound_threshold")?,
            mode: o.str("mode")?,
            tx: o.string_map("tx")?,
            exclusions: o.each("exclusions", Exclusion::from_json)?,
            plugins: o.strings("plugins")?.unwrap_or_default(),
        })
    }
}

impl Exclusion {
    fn from_json(v: &Json, path: &str) -> Result<Exclusion, String> {
        let o = Obj::new(v, path, &["rule_ids", "tags", "target", "path_prefix"])?;
        Ok(Exclusion { rule_ids: o.ints("rule_ids")?, tags: o.strings("tags")?.unwrap_or_default(), target: o.str("target")?, path_prefix: o.str("path_prefix")? })
    }
}

fn ids(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn bad(msg: String) -> Error {
    Error::new("plugin configuration", format!("crs: {msg}"))
}

fn safe(v: &str, what: &str) -> Result<(), Error> {
    if v.chars().any(|c| matches!(c, '"' | '\'' | '\\' | '\n' | '\r' | ',')) && what != "tx" {
        return Err(bad(format!("{what} \"{v}\" contains a quote, comma, backslash or newline")));
    }
    if v.chars().any(|c| matches!(c, '\'' | '\\' | '\n' | '\r')) {
        return Err(bad(format!("{what} \"{v}\" contains a quote, backslash or newline")));
    }
    Ok(())
}

impl CrsConfig {
    fn mode_line(&self) -> Result<Option<&'static str>, Error> {
        match self.mode.as_deref() {
            None => Ok(None),
            Some("block") => Ok(Some("SecRuleEngine On")),
            Some("detect") => Ok(Some("SecRuleEngine DetectionOnly")),
            Some(m) => Err(bad(format!("mode must be \"block\" or \"detect\", got \"{m}\""))),
        }
    }

    /// SecLang to place after `Include @crs-setup-conf` (before the rules).
    pub fn setup_lines(&self) -> Result<Vec<String>, Error> {
        let mut setvars = Vec::new();
        if let Some(pl) = self.paranoia_level {
            if !(1..=4).contains(&pl) {
                return Err(bad(format!("paranoia_level must be 1-4, got {pl}")));
            }
            setvars.push(format!("setvar:tx.blocking_paranoia_level={pl}"));
        }
        if let Some(dpl) = self.detection_paranoia_level {
            if !(1..=4).contains(&dpl) || dpl < self.paranoia_level.unwrap_or(1) {
                return Err(bad(format!("detection_paranoia_level must be 1-4 and >= paranoia_level, got {dpl}")));
            }
            setvars.push(format!("setvar:tx.detection_paranoia_level={dpl}"));
        }
        if let Some(t) = self.inbound_threshold {
            setvars.push(format!("setvar:tx.inbound_anomaly_score_threshold={t}"));
        }
        if let Some(t) = self.outbound_threshold {
            setvars.push(format!("setvar:tx.outbound_anomaly_score_threshold={t}"));
        }
        for (k, v) in &self.tx {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(bad(format!("tx key \"{k}\" must be letters, digits and _")));
            }
            safe(v, "tx")?;
            setvars.push(format!("setvar:'tx.{k}={v}'"));
        }
        let mut lines = Vec::new();
        if let Some(m) = self.mode_line()? {
            lines.push(m.to_string());
        }
        if !setvars.is_empty() {
            lines.push(format!("SecAction \"id:{SETUP_ID},phase:1,pass,nolog,t:none,{}\"", setvars.join(",")));
        }
        for (i, e) in self.exclusions.iter().enumerate() {
            if e.rule_ids.is_empty() && e.tags.is_empty() {
                return Err(bad(format!("exclusions[{i}] names no rule_ids or tags")));
            }
            let Some(prefix) = &e.path_prefix else { continue };
            safe(prefix, "path_prefix")?;
            let mut ctls = Vec::new();
            for tag in &e.tags {
                safe(tag, "tag")?;
                ctls.push(match &e.target {
                    Some(t) => format!("ctl:ruleRemoveTargetByTag={tag};{t}"),
                    None => format!("ctl:ruleRemoveByTag={tag}"),
                });
            }
            // One ctl per id: a ctl action takes one id (or range), as in ModSecurity.
            for id in &e.rule_ids {
                ctls.push(match &e.target {
                    Some(t) => format!("ctl:ruleRemoveTargetById={id};{t}"),
                    None => format!("ctl:ruleRemoveById={id}"),
                });
            }
            if let Some(t) = &e.target {
                safe(t, "target")?;
            }
            lines.push(format!("SecRule REQUEST_FILENAME \"@beginsWith {prefix}\" \"id:{},phase:1,pass,nolog,t:none,{}\"", SETUP_ID + 1 + i as u64, ctls.join(",")));
        }
        Ok(lines)
    }

    /// SecLang to place after the last CRS rule file (exclusions without a path).
    pub fn after_lines(&self) -> Result<Vec<String>, Error> {
        let mut lines = Vec::new();
        for e in self.exclusions.iter().filter(|e| e.path_prefix.is_none()) {
            if let Some(t) = &e.target {
                safe(t, "target")?;
                if !e.rule_ids.is_empty() {
                    lines.push(format!("SecRuleUpdateTargetById {} \"!{t}\"", ids(&e.rule_ids)));
                }
                for tag in &e.tags {
                    safe(tag, "tag")?;
                    lines.push(format!("SecRuleUpdateTargetByTag \"{tag}\" \"!{t}\""));
                }
            } else {
                if !e.rule_ids.is_empty() {
                    lines.push(format!("SecRuleRemoveById {}", e.rule_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")));
                }
                for tag in &e.tags {
                    safe(tag, "tag")?;
                    lines.push(format!("SecRuleRemoveByTag \"{tag}\""));
                }
            }
        }
        Ok(lines)
    }

    /// The `Include` lines of the configured plugins for one slot (`config`, `before`,
    /// `after`), in the order the plugins are listed.
    pub fn plugin_lines(&self, slot: &str) -> Result<Vec<String>, Error> {
        let mut lines = Vec::new();
        let mut seen = Vec::new();
        for name in &self.plugins {
            let p = crate::embedded::crs_plugin(name).map_err(bad)?;
            if seen.contains(&p) {
                continue;
            }
            seen.push(p);
            if let Some(f) = crate::embedded::crs_plugin_file(p, slot) {
                lines.push(format!("Include {f}"));
            }
        }
        Ok(lines)
    }

    /// Applies the settings to one rule set's lines. Returns false when the
    /// set does not include the CRS (nothing to apply).
    pub fn apply(&self, lines: &mut Vec<String>) -> Result<bool, Error> {
        let is_include = |l: &String, what: &str| {
            let t = l.trim();
            t.len() > 8 && t.get(..8).is_some_and(|p| p.eq_ignore_ascii_case("include ")) && t.get(8..).is_some_and(|r| r.trim().starts_with(what))
        };
        let Some(last_rules) = lines.iter().rposition(|l| is_include(l, "@owasp_crs/")) else { return Ok(false) };
        let mut after = self.after_lines()?;
        after.extend(self.plugin_lines("after")?);
        let mut setup = self.setup_lines()?;
        setup.extend(self.plugin_lines("config")?);
        setup.extend(self.plugin_lines("before")?);
        let at = match lines.iter().position(|l| is_include(l, "@crs-setup-conf")) {
            Some(p) => p + 1,
            None => lines.iter().position(|l| is_include(l, "@owasp_crs/")).unwrap_or(last_rules),
        };
        let last_rules = last_rules + setup.len();
        for (i, l) in setup.into_iter().enumerate() {
            lines.insert(at + i, l);
        }
        for (i, l) in after.into_iter().enumerate() {
            lines.insert(last_rules + 1 + i, l);
        }
        Ok(true)
    }
}

/// The rule set used when only `crs` is configured: the full CRS, blocking.
pub fn default_directives() -> Vec<String> {
    ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"].iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: &str) -> Result<CrsConfig, String> {
        CrsConfig::from_json(&super::super::json::parse(json.as_bytes())?, "crs")
    }

    #[test]
    fn several_ids_for_one_path_compile() {
        // One ctl per id (a comma list is not a ctl argument); found by istio/path-exclusion.yaml.
        let c = cfg(r#"{"exclusions":[{"rule_ids":[942100,942200],"path_prefix":"/search"}]}"#).unwrap();
        let mut lines = default_directives();
        assert!(c.apply(&mut lines).unwrap());
        assert!(lines.iter().any(|l| l.ends_with("ctl:ruleRemoveById=942100,ctl:ruleRemoveById=942200\"")), "{lines:?}");
        crate::Ruleset::compile("t", &lines.join("\n")).unwrap();
    }

    #[test]
    fn settings_land_between_setup_and_rules() {
        let c = cfg(r#"{"paranoia_level":2,"inbound_threshold":7,"mode":"detect","exclusions":[{"rule_ids":[942100],"path_prefix":"/search"},{"rule_ids":[1,2],"target":"ARGS:q"},{"tags":["attack-xss"]}]}"#).unwrap();
        let mut lines = default_directives();
        assert!(c.apply(&mut lines).unwrap());
        assert_eq!(lines[3], "SecRuleEngine DetectionOnly");
        assert!(lines[4].contains("setvar:tx.blocking_paranoia_level=2") && lines[4].contains("setvar:tx.inbound_anomaly_score_threshold=7"));
        assert!(lines[5].contains("@beginsWith /search") && lines[5].contains("ctl:ruleRemoveById=942100"));
        assert_eq!(lines[6], "Include @owasp_crs/*.conf");
        assert_eq!(lines[7], "SecRuleUpdateTargetById 1,2 \"!ARGS:q\"");
        assert_eq!(lines[8], "SecRuleRemoveByTag \"attack-xss\"");
    }

    /// `plugins` puts each plugin's files in CRS 4's slots: config and before after the setup,
    /// after behind the last rule file; the rule set compiles with the plugin's rules.
    #[test]
    fn plugins_land_in_their_slots() {
        if !crate::embedded::CRS_PLUGINS.contains(&"wordpress-rule-exclusions") || !crate::embedded::CRS_PLUGINS.contains(&"phpmyadmin-rule-exclusions") {
            return; // built without ../shared/crs-plugins: nothing to place (the e2e tests need them)
        }
        let c = cfg(r#"{"paranoia_level":1,"plugins":["phpmyadmin","wordpress"]}"#).unwrap();
        let mut lines = default_directives();
        assert!(c.apply(&mut lines).unwrap());
        let at = |l: &str| lines.iter().position(|x| x == l).unwrap_or_else(|| panic!("no {l} in {lines:?}"));
        assert!(at("Include @crs-setup-conf") < at("Include @crs-plugins/phpmyadmin-rule-exclusions-config.conf"));
        assert!(at("Include @crs-plugins/phpmyadmin-rule-exclusions-config.conf") < at("Include @crs-plugins/wordpress-rule-exclusions-config.conf"));
        assert!(at("Include @crs-plugins/wordpress-rule-exclusions-config.conf") < at("Include @crs-plugins/phpmyadmin-rule-exclusions-before.conf"));
        assert!(at("Include @crs-plugins/wordpress-rule-exclusions-before.conf") < at("Include @owasp_crs/*.conf"));
        assert!(at("Include @owasp_crs/*.conf") < at("Include @crs-plugins/phpmyadmin-rule-exclusions-after.conf"));
        assert_eq!(lines.iter().filter(|l| l.contains("wordpress")).count(), 2, "wordpress has no -after.conf: {lines:?}");
        let rs = crate::Ruleset::compile("t", &lines.join("\n")).unwrap();
        assert!(rs.rules_from("@crs-plugins/wordpress-rule-exclusions-") > 10);
        let bad = cfg(r#"{"plugins":["joomla"]}"#).unwrap();
        assert!(bad.apply(&mut default_directives()).unwrap_err().to_string().contains("not embedded"));
    }

    #[test]
    fn bad_values_are_refused() {
        let c = cfg(r#"{"paranoia_level":5}"#).unwrap();
        assert!(c.setup_lines().is_err());
        let c = cfg(r#"{"mode":"panic"}"#).unwrap();
        assert!(c.setup_lines().is_err());
        let c = cfg(r#"{"tx":{"x":"a'b"}}"#).unwrap();
        assert!(c.setup_lines().is_err());
    }
}
