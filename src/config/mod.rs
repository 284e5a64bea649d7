//! The plugin configuration (JSON) and the [`Waf`] it builds.
//!
//! A superset of coraza-proxy-wasm's configuration, so its users switch by
//! changing the module URL:
//!
//! ```json
//! {
//!   "directives_map": { "default": ["Include @recommended-conf", "SecRuleEngine On"] },
//!   "default_directives": "default",
//!   "per_authority_directives": { "api.example.com": "default" },
//!   "metric_labels": { "owner": "team-a" }
//! }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::compile::Ruleset;
use crate::error::Error;

/// The plugin configuration as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Named rule sets: name -> SecLang lines.
    #[serde(default)]
    pub directives_map: BTreeMap<String, Vec<String>>,
    /// The rule set for authorities not listed in `per_authority_directives`.
    #[serde(default)]
    pub default_directives: Option<String>,
    /// Authority (Host, port stripped for matching too) -> rule set name.
    #[serde(default)]
    pub per_authority_directives: BTreeMap<String, String>,
    /// Extra labels for wafer's Envoy metrics.
    #[serde(default)]
    pub metric_labels: BTreeMap<String, String>,
    /// Older coraza-proxy-wasm form: one rule set given inline.
    #[serde(default)]
    pub rules: Option<Vec<String>>,
}

impl PluginConfig {
    pub fn parse(json: &[u8]) -> Result<PluginConfig, Error> {
        if json.iter().all(u8::is_ascii_whitespace) {
            return Ok(PluginConfig::default());
        }
        serde_json::from_slice(json).map_err(|e| Error::new("plugin configuration", format!("invalid JSON: {e}")))
    }
}

/// Compiled rule sets and the routing between them, built once per VM.
pub struct Waf {
    sets: BTreeMap<String, Arc<Ruleset>>,
    default: Option<Arc<Ruleset>>,
    per_authority: Vec<(String, Arc<Ruleset>)>,
    labels: Vec<(String, String)>,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Waf>();
};

impl Waf {
    /// Parses the plugin configuration and compiles every rule set in it.
    pub fn from_json(json: &[u8]) -> Result<Waf, Error> {
        Waf::from_config(&PluginConfig::parse(json)?)
    }

    pub fn from_config(cfg: &PluginConfig) -> Result<Waf, Error> {
        let mut map = cfg.directives_map.clone();
        let mut default_name = cfg.default_directives.clone();
        if let Some(rules) = &cfg.rules {
            map.entry("rules".to_string()).or_insert_with(|| rules.clone());
            default_name.get_or_insert_with(|| "rules".to_string());
        }
        let mut sets = BTreeMap::new();
        for (name, lines) in &map {
            let rs = Ruleset::compile(&format!("directives_map[{name}]"), &lines.join("\n"))?;
            sets.insert(name.clone(), Arc::new(rs));
        }
        let get = |name: &str, what: &str| -> Result<Arc<Ruleset>, Error> {
            sets.get(name).cloned().ok_or_else(|| {
                let known: Vec<&str> = sets.keys().map(String::as_str).collect();
                Error::new("plugin configuration", format!("{what} names \"{name}\", which is not in directives_map (known: {})", known.join(", ")))
            })
        };
        let default = match &default_name {
            Some(n) => Some(get(n, "default_directives")?),
            None => None,
        };
        let mut per_authority = Vec::new();
        for (auth, name) in &cfg.per_authority_directives {
            per_authority.push((auth.to_ascii_lowercase(), get(name, &format!("per_authority_directives[{auth}]"))?));
        }
        let labels = cfg.metric_labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Ok(Waf { sets, default, per_authority, labels })
    }

    /// The rule set for a request's authority (`Host`): an exact entry of
    /// `per_authority_directives` (with or without port), else the default.
    /// `None`: no rules apply, pass the request through.
    pub fn ruleset_for(&self, authority: &str) -> Option<Arc<Ruleset>> {
        let a = authority.to_ascii_lowercase();
        let host = a.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map(|(h, _)| h).unwrap_or(&a);
        self.per_authority
            .iter()
            .find(|(k, _)| *k == a)
            .or_else(|| self.per_authority.iter().find(|(k, _)| k == host))
            .map(|(_, rs)| rs.clone())
            .or_else(|| self.default.clone())
    }

    pub fn metric_labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// One line for the start log: version, rule sets and their rule counts.
    pub fn summary(&self) -> String {
        let sets: Vec<String> = self.sets.iter().map(|(n, rs)| format!("{n}={} rules", rs.rule_count())).collect();
        let crs = if crate::embedded::CRS_VERSION.is_empty() { "not embedded".to_string() } else { crate::embedded::CRS_VERSION.to_string() };
        let mut s = format!("wafer {} ready: rule sets [{}]; OWASP CRS {crs}", env!("CARGO_PKG_VERSION"), sets.join(", "));
        for rs in self.sets.values() {
            for w in &rs.warnings {
                s.push_str("; warning: ");
                s.push_str(w);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coraza_shaped_config_compiles() {
        let waf = Waf::from_json(br#"{"directives_map":{"default":["Include @targeted"]},"default_directives":"default"}"#).unwrap();
        assert!(waf.ruleset_for("example.com").is_some());
        assert!(waf.summary().contains("default=5 rules"));
    }

    #[test]
    fn per_authority_routing() {
        let waf = Waf::from_json(br#"{"directives_map":{"a":["Include @targeted"],"b":["Include @headers-only"]},"default_directives":"a","per_authority_directives":{"api.example.com":"b"}}"#).unwrap();
        assert_eq!(waf.ruleset_for("API.example.com:8080").map(|r| r.rule_count()), Some(2));
        assert_eq!(waf.ruleset_for("other").map(|r| r.rule_count()), Some(5));
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let e = Waf::from_json(b"{not json").err().unwrap();
        assert!(e.to_string().starts_with("plugin configuration: invalid JSON"), "{e}");
        let e = Waf::from_json(br#"{"directives_map":{"default":["SecRuleEngine On","SecRul ARGS x"]}}"#).err().unwrap();
        assert_eq!(e.to_string().lines().next().unwrap(), "directives_map[default]:2:1: unknown directive \"SecRul\"");
        let e = Waf::from_json(br#"{"default_directives":"nope"}"#).err().unwrap();
        assert!(e.msg.contains("not in directives_map"));
        let e = Waf::from_json(br#"{"directive_map":{}}"#).err().unwrap();
        assert!(e.msg.contains("unknown field"), "{e}");
    }
}
