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

pub mod crs;
pub mod detect;
pub mod json;

use crate::compile::Ruleset;
use crate::error::Error;
use crate::protect;

/// The plugin configuration as written.
#[derive(Debug, Default)]
pub struct PluginConfig {
    /// Named rule sets: name -> SecLang lines.
    pub directives_map: BTreeMap<String, Vec<String>>,
    /// The rule set for authorities not listed in `per_authority_directives`.
    pub default_directives: Option<String>,
    /// Authority (Host, port stripped for matching too) -> rule set name.
    pub per_authority_directives: BTreeMap<String, String>,
    /// Extra labels for wafer's Envoy metrics.
    pub metric_labels: BTreeMap<String, String>,
    /// Older coraza-proxy-wasm form: one rule set given inline.
    pub rules: Option<Vec<String>>,
    /// OWASP CRS settings (paranoia level, thresholds, mode, exclusions),
    /// applied to every rule set that includes the CRS. Alone, it selects the
    /// full CRS in blocking mode.
    pub crs: Option<crs::CrsConfig>,
    /// wafer's detection tier (`Include @wafer-detect`, docs/detection.md) in every rule set.
    pub detect: Option<detect::DetectConfig>,
    /// Protections beyond rules (src/protect), each off unless given.
    pub client_ip: Option<protect::ClientIpConfig>,
    pub ip_lists: Option<protect::IpListsConfig>,
    pub rate_limit: Option<protect::RateLimitConfig>,
    pub behaviour_scoring: Option<protect::ScoringConfig>,
    pub hardening: Option<protect::HardeningConfig>,
    pub request_log: Option<protect::RequestLogConfig>,
    /// What the transactions in flight on one VM (worker thread) may hold, in bytes (see
    /// `tx::budget`; docs/limits.md): bodies, parsed bodies, transformation results. A
    /// request that would pass it gets 413 (or its body inspected in part, with
    /// `SecRequestBodyLimitAction ProcessPartial`). Default [`crate::tx::budget::DEFAULT`].
    pub memory_budget_bytes: Option<usize>,
    /// `"fast"` (the default) or `"reference"`: transactions that keep nothing across
    /// requests (see [`crate::compile::Speed`]; for tests, it is several times slower).
    pub speed: Option<crate::compile::Speed>,
    /// For tests of Envoy's `failure_policy` only: a request carrying a header of this name
    /// makes the filter abort its VM (a wasm trap). Unset (the default), no request can.
    pub test_trap_header: Option<String>,
}

impl PluginConfig {
    pub fn parse(json: &[u8]) -> Result<PluginConfig, Error> {
        if json.iter().all(u8::is_ascii_whitespace) {
            return Ok(PluginConfig::default());
        }
        let bad = |msg: String| Error::new("plugin configuration", msg);
        let v = json::parse(json).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        PluginConfig::from_json(&v).map_err(bad)
    }

    fn from_json(v: &json::Json) -> Result<PluginConfig, String> {
        const FIELDS: &[&str] = &[
            "directives_map", "default_directives", "per_authority_directives", "metric_labels", "rules", "crs", "detect", "client_ip",
            "ip_lists", "rate_limit", "behaviour_scoring", "hardening", "request_log", "memory_budget_bytes", "speed", "test_trap_header",
        ];
        let o = json::Obj::new(v, "", FIELDS)?;
        Ok(PluginConfig {
            directives_map: o.map("directives_map", json::strings)?,
            default_directives: o.str("default_directives")?,
            per_authority_directives: o.string_map("per_authority_directives")?,
            metric_labels: o.string_map("metric_labels")?,
            rules: o.strings("rules")?,
            crs: o.get("crs").map(|v| crs::CrsConfig::from_json(v, "crs")).transpose()?,
            detect: o.get("detect").map(|v| detect::DetectConfig::from_json(v, "detect")).transpose()?,
            client_ip: o.get("client_ip").map(|v| protect::ClientIpConfig::from_json(v, "client_ip")).transpose()?,
            ip_lists: o.get("ip_lists").map(|v| protect::IpListsConfig::from_json(v, "ip_lists")).transpose()?,
            rate_limit: o.get("rate_limit").map(|v| protect::RateLimitConfig::from_json(v, "rate_limit")).transpose()?,
            behaviour_scoring: o.get("behaviour_scoring").map(|v| protect::ScoringConfig::from_json(v, "behaviour_scoring")).transpose()?,
            hardening: o.get("hardening").map(|v| protect::HardeningConfig::from_json(v, "hardening")).transpose()?,
            request_log: o.get("request_log").map(|v| protect::RequestLogConfig::from_json(v, "request_log")).transpose()?,
            memory_budget_bytes: o.int::<usize>("memory_budget_bytes")?.map(memory_budget).transpose()?,
            speed: o.str("speed")?.map(|s| speed(&s)).transpose()?,
            test_trap_header: o.str("test_trap_header")?,
        })
    }

    /// The protection keys, for [`protect::Protect::compile`].
    pub fn protect_config(&self) -> protect::ProtectConfig<'_> {
        protect::ProtectConfig {
            client_ip: self.client_ip.as_ref(),
            ip_lists: self.ip_lists.as_ref(),
            rate_limit: self.rate_limit.as_ref(),
            behaviour_scoring: self.behaviour_scoring.as_ref(),
            hardening: self.hardening.as_ref(),
            request_log: self.request_log.as_ref(),
        }
    }
}

/// `memory_budget_bytes`, checked against [`crate::tx::budget::MIN`] and
/// [`crate::tx::budget::MAX`].
fn memory_budget(n: usize) -> Result<usize, String> {
    use crate::tx::budget::{MAX, MIN};
    if (MIN..=MAX).contains(&n) {
        Ok(n)
    } else {
        Err(format!("memory_budget_bytes: {n} is outside {MIN}..={MAX} (1 MiB to 384 MiB)"))
    }
}

/// `speed`: `"fast"` or `"reference"`.
fn speed(s: &str) -> Result<crate::compile::Speed, String> {
    match s {
        "fast" => Ok(crate::compile::Speed::Fast),
        "reference" => Ok(crate::compile::Speed::Reference),
        _ => Err(format!("speed: \"{s}\" is neither \"fast\" nor \"reference\"")),
    }
}

/// Compiled rule sets and the routing between them, built once per VM.
pub struct Waf {
    sets: BTreeMap<String, Arc<Ruleset>>,
    default: Option<Arc<Ruleset>>,
    per_authority: Vec<(String, Arc<Ruleset>)>,
    labels: Vec<(String, String)>,
    protect: Option<protect::Protect>,
    trap_header: Option<String>,
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
        if let Some(c) = &cfg.crs {
            if map.is_empty() {
                map.insert("default".to_string(), crs::default_directives());
                default_name.get_or_insert_with(|| "default".to_string());
            }
            let mut applied = false;
            for lines in map.values_mut() {
                applied |= c.apply(lines)?;
            }
            if !applied {
                return Err(Error::new("plugin configuration", "crs settings given, but no rule set includes the CRS (Include @owasp_crs/...)"));
            }
            if crate::embedded::CRS_VERSION.is_empty() {
                return Err(Error::new("plugin configuration", "crs settings given, but this build has no OWASP CRS (build with CRS_DIR set)"));
            }
        }
        if let Some(d) = &cfg.detect {
            if map.is_empty() {
                map.insert("default".to_string(), detect::default_directives());
                default_name.get_or_insert_with(|| "default".to_string());
            }
            for lines in map.values_mut() {
                d.apply(lines)?;
            }
        }
        let mut sets = BTreeMap::new();
        for (name, lines) in &map {
            let mut rs = Ruleset::compile(&format!("directives_map[{name}]"), &lines.join("\n"))?;
            if let Some(n) = cfg.memory_budget_bytes {
                rs.settings.memory_budget = n;
            }
            if let Some(speed) = cfg.speed {
                rs.settings.speed = speed;
            }
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
        let protect = protect::Protect::compile(&cfg.protect_config())?;
        let trap_header = cfg.test_trap_header.as_ref().map(|h| h.to_ascii_lowercase());
        Ok(Waf { sets, default, per_authority, labels, protect, trap_header })
    }

    /// `test_trap_header` of the configuration, lowercased (see [`PluginConfig`]).
    pub fn test_trap_header(&self) -> Option<&str> {
        self.trap_header.as_deref()
    }

    /// The rule set for a request's authority (`Host`): an exact entry of
    /// `per_authority_directives` (with or without port), else the default.
    /// `None`: no rules apply, pass the request through.
    pub fn ruleset_for(&self, authority: &str) -> Option<Arc<Ruleset>> {
        if self.per_authority.is_empty() {
            return self.default.clone();
        }
        let host = authority.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(authority, |(h, _)| h);
        self.per_authority
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(authority))
            .or_else(|| self.per_authority.iter().find(|(k, _)| k.eq_ignore_ascii_case(host)))
            .map(|(_, rs)| rs.clone())
            .or_else(|| self.default.clone())
    }

    /// The protections beyond rules; `None` when every one is off (the adapter then does
    /// nothing extra per request).
    pub fn protect(&self) -> Option<&protect::Protect> {
        self.protect.as_ref()
    }

    pub fn metric_labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// One line for the start log: version, rule sets and their rule counts.
    /// Gives every rule set the keys its memo hashes request values with (see
    /// [`Ruleset::set_hash_keys`]); a host calls it once, with random keys.
    pub fn set_hash_keys(&self, k0: u64, k1: u64) {
        for rs in self.sets.values().chain(self.default.iter()).chain(self.per_authority.iter().map(|(_, rs)| rs)) {
            rs.set_hash_keys(k0, k1);
        }
    }

    pub fn summary(&self) -> String {
        let sets: Vec<String> = self.sets.iter().map(|(n, rs)| format!("{n}={} rules", rs.rule_count())).collect();
        let crs = if crate::embedded::CRS_VERSION.is_empty() { "not embedded".to_string() } else { crate::embedded::CRS_VERSION.to_string() };
        let mut s = format!("wafer {} ready: rule sets [{}]; OWASP CRS {crs}", env!("CARGO_PKG_VERSION"), sets.join(", "));
        // The CRS plugins each rule set loaded (by `crs.plugins` or an Include) and their rules.
        let mut plugins = Vec::new();
        for (n, rs) in &self.sets {
            for p in crate::embedded::CRS_PLUGINS {
                let rules = rs.rules_from(&format!("@crs-plugins/{p}-"));
                if rules > 0 {
                    plugins.push(format!("{n}: {p}={rules} rules"));
                }
            }
        }
        if !plugins.is_empty() {
            s.push_str(&format!("; CRS plugins [{}]", plugins.join(", ")));
        }
        if let Some(rs) = self.sets.values().next() {
            s.push_str(&format!("; memory budget {} bytes per worker", rs.settings.memory_budget));
        }
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

    /// `"crs":{"plugins":["wordpress"]}` loads the plugin, and the start-up line says so.
    #[test]
    fn crs_plugin_shows_in_the_summary() {
        if !crate::embedded::CRS_PLUGINS.contains(&"wordpress-rule-exclusions") {
            return; // built without ../shared/crs-plugins
        }
        let waf = Waf::from_json(br#"{"crs":{"plugins":["wordpress"]}}"#).unwrap();
        let s = waf.summary();
        let n: usize = s.split("default: wordpress-rule-exclusions=").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{s}"));
        assert!(n > 10, "{s}");
        let plain = Waf::from_json(br#"{"crs":{}}"#).unwrap();
        assert!(!plain.summary().contains("CRS plugins"), "{}", plain.summary());
        // The same plugin by SecLang includes, in its slots.
        let seclang = Waf::from_json(br#"{"directives_map":{"d":["Include @recommended-conf","Include @crs-setup-conf","Include @crs-plugins/wordpress-*-config.conf","Include @crs-plugins/wordpress-*-before.conf","Include @owasp_crs/*.conf","Include @crs-plugins/wordpress-*-after.conf"]},"default_directives":"d"}"#);
        assert!(seclang.is_err(), "wordpress has no -after.conf: the include must say so");
        let seclang = Waf::from_json(br#"{"directives_map":{"d":["Include @recommended-conf","Include @crs-setup-conf","Include @crs-plugins/wordpress-*-config.conf","Include @crs-plugins/wordpress-*-before.conf","Include @owasp_crs/*.conf"]},"default_directives":"d"}"#).unwrap();
        assert!(seclang.summary().contains(&format!("d: wordpress-rule-exclusions={n} rules")), "{}", seclang.summary());
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
        for bad in ["1000", "0", "402653185", "-1", "\"128M\"", "1.5"] {
            let json = format!(r#"{{"rules":["SecRuleEngine On"],"memory_budget_bytes":{bad}}}"#);
            let e = Waf::from_json(json.as_bytes()).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.msg.contains("memory_budget_bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn speed_is_fast_unless_the_configuration_says_reference() {
        use crate::compile::Speed;
        let rs = |json: &str| Waf::from_json(json.as_bytes()).map(|w| w.ruleset_for("x").map(|r| r.settings.speed));
        assert_eq!(rs(r#"{"rules":["SecRuleEngine On"]}"#).ok().flatten(), Some(Speed::Fast));
        assert_eq!(rs(r#"{"rules":["SecRuleEngine On"],"speed":"fast"}"#).ok().flatten(), Some(Speed::Fast));
        assert_eq!(rs(r#"{"rules":["SecRuleEngine On"],"speed":"reference"}"#).ok().flatten(), Some(Speed::Reference));
        let e = rs(r#"{"rules":["SecRuleEngine On"],"speed":"turbo"}"#).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("speed") && e.contains("turbo"), "{e}");
    }

    #[test]
    fn the_memory_budget_is_the_configured_one_in_every_rule_set() {
        let waf = Waf::from_json(br#"{"directives_map":{"a":["Include @targeted"],"b":["Include @headers-only"]},"default_directives":"a","memory_budget_bytes":2097152}"#).unwrap();
        for rs in waf.sets.values() {
            assert_eq!(rs.settings.memory_budget, 2 << 20);
        }
        assert!(waf.summary().contains("memory budget 2097152 bytes per worker"), "{}", waf.summary());
        let waf = Waf::from_json(br#"{"rules":["SecRuleEngine On"]}"#).unwrap();
        assert_eq!(waf.ruleset_for("x").map(|r| r.settings.memory_budget), Some(crate::tx::budget::DEFAULT));
    }
}

/// Tests that need the OWASP CRS embedded (built with CRS_DIR; `make test` does).
#[cfg(all(test, wafer_crs))]
mod crs_tests {
    use super::*;
    use crate::{BodyAppend, Transaction};

    fn verdict(waf: &Waf, uri: &str, body: Option<&[u8]>) -> Option<(u16, Option<u64>)> {
        let rs = waf.ruleset_for("shop.example.com").expect("rule set");
        let mut tx = Transaction::new(rs, "t".into());
        tx.process_connection("10.0.0.1", 5000, "10.0.0.2", 80);
        tx.process_uri(uri, if body.is_some() { "POST" } else { "GET" }, "HTTP/1.1");
        tx.add_request_header(b"Host", b"shop.example.com");
        tx.add_request_header(b"User-Agent", b"Mozilla/5.0 (X11; Linux x86_64)");
        tx.add_request_header(b"Accept", b"text/html");
        if let Some(b) = body {
            tx.add_request_header(b"Content-Type", b"application/json");
            tx.add_request_header(b"Content-Length", b.len().to_string().as_bytes());
        }
        if let Some(i) = tx.process_request_headers() {
            return Some((i.status, i.rule_id));
        }
        if let Some(b) = body {
            if let BodyAppend::Interrupt(i) = tx.append_request_body(b) {
                return Some((i.status, i.rule_id));
            }
        }
        tx.process_request_body().map(|i| (i.status, i.rule_id))
    }

    #[test]
    fn crs_key_alone_runs_the_full_crs_blocking() {
        let waf = Waf::from_json(br#"{"crs":{"paranoia_level":1}}"#).unwrap();
        assert!(waf.summary().contains("OWASP CRS 4."), "{}", waf.summary());
        assert_eq!(verdict(&waf, "/?id=1%27%20or%201=1--", None), Some((403, Some(949110))));
        assert_eq!(verdict(&waf, "/products?q=shoes&page=2", None), None);
        assert_eq!(verdict(&waf, "/api", Some(br#"{"q":"<script>alert(1)</script>"}"#)), Some((403, Some(949110))));
    }

    #[test]
    fn crs_detect_mode_and_exclusions() {
        let waf = Waf::from_json(br#"{"crs":{"mode":"detect"}}"#).unwrap();
        assert_eq!(verdict(&waf, "/?id=1%27%20or%201=1--", None), None);
        // 942100 is libinjection; with it excluded for /search a lone libinjection hit is not enough.
        let waf = Waf::from_json(br#"{"crs":{"inbound_threshold":5,"exclusions":[{"tags":["attack-sqli"],"path_prefix":"/search"}]}}"#).unwrap();
        assert_eq!(verdict(&waf, "/search?id=1%27%20or%201=1--", None), None);
        assert_eq!(verdict(&waf, "/other?id=1%27%20or%201=1--", None), Some((403, Some(949110))));
        let waf = Waf::from_json(br#"{"crs":{"exclusions":[{"tags":["attack-sqli"],"target":"ARGS:id"}]}}"#).unwrap();
        assert_eq!(verdict(&waf, "/?id=1%27%20or%201=1--", None), None);
        assert_eq!(verdict(&waf, "/?other=1%27%20or%201=1--", None), Some((403, Some(949110))));
    }

    #[test]
    fn higher_thresholds_let_single_hits_through() {
        let waf = Waf::from_json(br#"{"crs":{"inbound_threshold":1000}}"#).unwrap();
        assert_eq!(verdict(&waf, "/?id=1%27%20or%201=1--", None), None);
    }
}
