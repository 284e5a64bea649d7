//! Protections beyond rules: IP lists, rate limiting, behaviour scoring, response hardening,
//! the request log. Each is off unless its key is in the plugin configuration.
//!
//! This module is host-independent: it parses the configuration, answers lookups (is this
//! address denied? which limit applies? what does this `Set-Cookie` become?) and encodes
//! the small records that the adapter keeps in proxy-wasm shared data (one store for all of
//! Envoy's workers, updated with compare-and-swap). The adapter (`envoy-wasm/src/protect.rs`)
//! only moves data between the host and these functions.
//!
//! Order on a request: client address -> allow list (bypass everything) -> deny list (403)
//! -> behaviour block (403) -> rate limit (429) -> body size (413) -> rules.

pub mod audit_log;
pub mod headers;
pub mod ip;
pub mod rate_limit;
pub mod scoring;

use std::net::IpAddr;

use crate::config::json::{Json, Obj};
use crate::error::Error;
use headers::CookieRule;
use ip::IpSet;
use rate_limit::Limit;
use scoring::Policy;

/// `client_ip`: where the client address comes from.
#[derive(Debug, Default, Clone)]
pub struct ClientIpConfig {
    /// Proxies in front of Envoy that append to `X-Forwarded-For`; the client is the entry
    /// this many from the right. 0 (default): the connection's peer (`source.address`).
    pub trusted_hops: u32,
    /// A request header holding the client address, set by a trusted hop (for instance
    /// `x-envoy-external-address` when Envoy runs with `use_remote_address`). Wins over
    /// `trusted_hops` when present and valid.
    pub header: Option<String>,
}

/// `ip_lists`.
#[derive(Debug, Default, Clone)]
pub struct IpListsConfig {
    /// Addresses or CIDR blocks that bypass every protection and the rules.
    pub allow: Vec<String>,
    /// Addresses or CIDR blocks answered `deny_status` before any rule runs.
    pub deny: Vec<String>,
    pub deny_status: Option<u16>,
}

/// One limit of `rate_limit`.
#[derive(Debug, Clone)]
pub struct RateRuleConfig {
    /// `Host` this limit applies to (case-insensitive, port ignored); any when absent.
    pub authority: Option<String>,
    /// Path prefix this limit applies to; any when absent.
    pub path_prefix: Option<String>,
    pub requests_per_second: f64,
    pub burst: Option<u32>,
    /// `ip` (default), `header:<name>` or `cookie:<name>` (the client address when absent).
    pub key: Option<String>,
}

/// `rate_limit`: `{"requests_per_second":10,"burst":20}` limits each client address.
#[derive(Debug, Default, Clone)]
pub struct RateLimitConfig {
    /// The limit for requests that match no entry of `rules`; none when absent.
    pub requests_per_second: Option<f64>,
    pub burst: Option<u32>,
    pub key: Option<String>,
    /// Per-authority / per-route limits; the first that matches applies.
    pub rules: Vec<RateRuleConfig>,
    /// Buckets kept (shared-data slots), default 65536.
    pub max_clients: Option<u32>,
    /// Status of the refusal, default 429.
    pub status: Option<u16>,
}

/// `behaviour_scoring`.
#[derive(Debug, Default, Clone)]
pub struct ScoringConfig {
    /// Sliding window, default 60 s.
    pub window_seconds: Option<u64>,
    /// 4xx answers + interruptions in the window that block the client, default 20.
    pub threshold: Option<u32>,
    /// Cool-down, default 300 s.
    pub block_seconds: Option<u64>,
    pub max_clients: Option<u32>,
    /// Status while blocked, default 403.
    pub status: Option<u16>,
}

/// `hardening.cookies`.
#[derive(Debug, Clone)]
pub struct CookieConfig {
    pub secure: bool,
    pub http_only: bool,
    /// `Strict`, `Lax` (default) or `None`; `""` adds none.
    pub same_site: Option<String>,
}

/// `hardening`.
#[derive(Debug, Default, Clone)]
pub struct HardeningConfig {
    /// `Strict-Transport-Security` value, e.g. `max-age=31536000; includeSubDomains`.
    pub hsts: Option<String>,
    /// `X-Content-Type-Options` value, normally `nosniff`.
    pub content_type_options: Option<String>,
    /// `X-Frame-Options` value: `DENY` or `SAMEORIGIN`.
    pub frame_options: Option<String>,
    /// Any other response headers to set: name -> value.
    pub response_headers: std::collections::BTreeMap<String, String>,
    pub cookies: Option<CookieConfig>,
    /// Requests with a larger body are answered 413.
    pub max_request_body_bytes: Option<u64>,
    /// Rewrite `X-Forwarded-For` to the trusted part and drop client-written forwarding
    /// headers (`Forwarded`, `X-Real-IP`, `X-Forwarded-Host`, ...) when no hop is trusted.
    pub sanitize_forwarded_headers: bool,
}

/// `request_log.collector`.
#[derive(Debug, Clone)]
pub struct CollectorConfig {
    /// Envoy cluster to POST batches to.
    pub cluster: String,
    pub path: Option<String>,
    pub authority: Option<String>,
    /// Send when this many lines are waiting (default 100) or at each flush interval.
    pub batch_size: Option<usize>,
    pub flush_interval_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// Lines waiting beyond this many bytes are dropped (and counted), default 4 MiB.
    pub max_buffer_bytes: Option<usize>,
}

/// `request_log`.
#[derive(Debug, Default, Clone)]
pub struct RequestLogConfig {
    /// `all` (default) or `interrupted`.
    pub mode: Option<String>,
    /// Also (or instead: with `"proxy_log": false`) send lines to an HTTP collector.
    pub collector: Option<CollectorConfig>,
    pub proxy_log: bool,
}

impl ClientIpConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["trusted_hops", "header"])?;
        Ok(Self { trusted_hops: o.int("trusted_hops")?.unwrap_or(0), header: o.str("header")? })
    }
}

impl IpListsConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["allow", "deny", "deny_status"])?;
        Ok(Self { allow: o.strings("allow")?.unwrap_or_default(), deny: o.strings("deny")?.unwrap_or_default(), deny_status: o.int("deny_status")? })
    }
}

impl RateRuleConfig {
    fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["authority", "path_prefix", "requests_per_second", "burst", "key"])?;
        Ok(Self {
            authority: o.str("authority")?,
            path_prefix: o.str("path_prefix")?,
            requests_per_second: o.float("requests_per_second")?.ok_or_else(|| format!("{path}: missing field `requests_per_second`"))?,
            burst: o.int("burst")?,
            key: o.str("key")?,
        })
    }
}

impl RateLimitConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["requests_per_second", "burst", "key", "rules", "max_clients", "status"])?;
        Ok(Self {
            requests_per_second: o.float("requests_per_second")?,
            burst: o.int("burst")?,
            key: o.str("key")?,
            rules: o.each("rules", RateRuleConfig::from_json)?,
            max_clients: o.int("max_clients")?,
            status: o.int("status")?,
        })
    }
}

impl ScoringConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["window_seconds", "threshold", "block_seconds", "max_clients", "status"])?;
        Ok(Self {
            window_seconds: o.int("window_seconds")?,
            threshold: o.int("threshold")?,
            block_seconds: o.int("block_seconds")?,
            max_clients: o.int("max_clients")?,
            status: o.int("status")?,
        })
    }
}

impl CookieConfig {
    fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["secure", "http_only", "same_site"])?;
        Ok(Self { secure: o.boolean("secure")?.unwrap_or(true), http_only: o.boolean("http_only")?.unwrap_or(true), same_site: o.str("same_site")? })
    }
}

impl HardeningConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        const FIELDS: &[&str] = &["hsts", "content_type_options", "frame_options", "response_headers", "cookies", "max_request_body_bytes", "sanitize_forwarded_headers"];
        let o = Obj::new(v, path, FIELDS)?;
        Ok(Self {
            hsts: o.str("hsts")?,
            content_type_options: o.str("content_type_options")?,
            frame_options: o.str("frame_options")?,
            response_headers: o.string_map("response_headers")?,
            cookies: o.get("cookies").map(|v| CookieConfig::from_json(v, &o.path("cookies"))).transpose()?,
            max_request_body_bytes: o.int("max_request_body_bytes")?,
            sanitize_forwarded_headers: o.boolean("sanitize_forwarded_headers")?.unwrap_or(false),
        })
    }
}

impl CollectorConfig {
    fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        const FIELDS: &[&str] = &["cluster", "path", "authority", "batch_size", "flush_interval_ms", "timeout_ms", "max_buffer_bytes"];
        let o = Obj::new(v, path, FIELDS)?;
        Ok(Self {
            cluster: o.str("cluster")?.ok_or_else(|| format!("{path}: missing field `cluster`"))?,
            path: o.str("path")?,
            authority: o.str("authority")?,
            batch_size: o.int("batch_size")?,
            flush_interval_ms: o.int("flush_interval_ms")?,
            timeout_ms: o.int("timeout_ms")?,
            max_buffer_bytes: o.int("max_buffer_bytes")?,
        })
    }
}

impl RequestLogConfig {
    pub fn from_json(v: &Json, path: &str) -> Result<Self, String> {
        let o = Obj::new(v, path, &["mode", "collector", "proxy_log"])?;
        Ok(Self {
            mode: o.str("mode")?,
            collector: o.get("collector").map(|v| CollectorConfig::from_json(v, &o.path("collector"))).transpose()?,
            proxy_log: o.boolean("proxy_log")?.unwrap_or(true),
        })
    }
}

/// The protection keys of the plugin configuration, as written.
#[derive(Debug, Default, Clone)]
pub struct ProtectConfig<'a> {
    pub client_ip: Option<&'a ClientIpConfig>,
    pub ip_lists: Option<&'a IpListsConfig>,
    pub rate_limit: Option<&'a RateLimitConfig>,
    pub behaviour_scoring: Option<&'a ScoringConfig>,
    pub hardening: Option<&'a HardeningConfig>,
    pub request_log: Option<&'a RequestLogConfig>,
}

/// Whose bucket a request counts against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Ip,
    Header(String),
    Cookie(String),
}

#[derive(Debug, Clone)]
pub struct RateRule {
    authority: Option<String>,
    path_prefix: Option<String>,
    pub limit: Limit,
    pub key: KeySource,
}

#[derive(Debug, Clone)]
pub struct RateLimiter {
    /// Per-route rules, then the default (authority and path `None`) last.
    pub rules: Vec<RateRule>,
    pub slots: u32,
    pub status: u16,
}

#[derive(Debug, Clone)]
pub struct IpLists {
    pub allow: IpSet,
    pub deny: IpSet,
    pub deny_status: u16,
}

#[derive(Debug, Clone)]
pub struct Scoring {
    pub policy: Policy,
    pub slots: u32,
    pub status: u16,
}

#[derive(Debug, Clone)]
pub struct Hardening {
    /// Set on every response (lowercase names).
    pub response_headers: Vec<(String, String)>,
    pub cookie: Option<CookieRule>,
    pub max_request_body: Option<u64>,
    pub sanitize_forwarded: bool,
}

#[derive(Debug, Clone)]
pub struct Collector {
    pub cluster: String,
    pub path: String,
    pub authority: String,
    pub batch_size: usize,
    pub flush_interval_ms: u64,
    pub timeout_ms: u64,
    pub max_buffer_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct RequestLog {
    pub only_interrupted: bool,
    pub proxy_log: bool,
    pub collector: Option<Collector>,
}

/// The compiled protections; [`crate::Waf::protect`] gives `None` when all are off.
#[derive(Debug, Clone, Default)]
pub struct Protect {
    pub trusted_hops: u32,
    /// Lowercase header name of `client_ip.header`.
    pub client_ip_header: Option<String>,
    pub ip_lists: Option<IpLists>,
    pub rate_limit: Option<RateLimiter>,
    pub scoring: Option<Scoring>,
    pub hardening: Option<Hardening>,
    pub request_log: Option<RequestLog>,
}

const DEFAULT_SLOTS: u32 = 65_536;
const MAX_SLOTS: u32 = 4_194_304;

fn err(what: &str, msg: impl std::fmt::Display) -> Error {
    Error::new("plugin configuration", format!("{what}: {msg}"))
}

fn status(value: Option<u16>, default: u16, what: &str) -> Result<u16, Error> {
    match value.unwrap_or(default) {
        s @ 200..=599 => Ok(s),
        s => Err(err(what, format!("status {s} is not 200-599"))),
    }
}

fn slots(value: Option<u32>, what: &str) -> Result<u32, Error> {
    match value.unwrap_or(DEFAULT_SLOTS) {
        n @ 1..=MAX_SLOTS => Ok(n),
        n => Err(err(what, format!("max_clients {n} is not 1-{MAX_SLOTS}"))),
    }
}

fn key_source(key: Option<&str>, what: &str) -> Result<KeySource, Error> {
    match key {
        None | Some("ip") => Ok(KeySource::Ip),
        Some(k) => match k.split_once(':') {
            Some(("header", name)) if !name.is_empty() => Ok(KeySource::Header(name.to_ascii_lowercase())),
            Some(("cookie", name)) if !name.is_empty() => Ok(KeySource::Cookie(name.to_string())),
            _ => Err(err(what, format!("key \"{k}\" is not ip, header:<name> or cookie:<name>"))),
        },
    }
}

fn limit(rps: f64, burst: Option<u32>, what: &str) -> Result<Limit, Error> {
    if !rps.is_finite() || rps <= 0.0 {
        return Err(err(what, "requests_per_second must be a number above 0"));
    }
    // Default burst: one second's worth, at least 1.
    let burst = burst.unwrap_or_else(|| rps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32);
    if burst == 0 {
        return Err(err(what, "burst must be at least 1"));
    }
    Ok(Limit { per_second: rps, burst })
}

fn lower_host(authority: &str) -> &str {
    authority.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map(|(h, _)| h).unwrap_or(authority)
}

impl Protect {
    /// Compiles the protection keys; `Ok(None)` when none is enabled.
    pub fn compile(c: &ProtectConfig) -> Result<Option<Protect>, Error> {
        let mut p = Protect::default();
        if let Some(ci) = c.client_ip {
            p.trusted_hops = ci.trusted_hops;
            p.client_ip_header = ci.header.as_ref().map(|h| h.to_ascii_lowercase());
        }
        if let Some(l) = c.ip_lists {
            let allow = IpSet::parse(&l.allow).map_err(|e| err("ip_lists.allow", e))?;
            let deny = IpSet::parse(&l.deny).map_err(|e| err("ip_lists.deny", e))?;
            let deny_status = status(l.deny_status, 403, "ip_lists.deny_status")?;
            if !allow.is_empty() || !deny.is_empty() {
                p.ip_lists = Some(IpLists { allow, deny, deny_status });
            }
        }
        if let Some(r) = c.rate_limit {
            let mut rules = Vec::new();
            for (i, rule) in r.rules.iter().enumerate() {
                let what = format!("rate_limit.rules[{i}]");
                rules.push(RateRule {
                    authority: rule.authority.as_ref().map(|a| lower_host(&a.to_ascii_lowercase()).to_string()),
                    path_prefix: rule.path_prefix.clone(),
                    limit: limit(rule.requests_per_second, rule.burst, &what)?,
                    key: key_source(rule.key.as_deref().or(r.key.as_deref()), &what)?,
                });
            }
            if let Some(rps) = r.requests_per_second {
                rules.push(RateRule {
                    authority: None,
                    path_prefix: None,
                    limit: limit(rps, r.burst, "rate_limit")?,
                    key: key_source(r.key.as_deref(), "rate_limit")?,
                });
            } else if r.burst.is_some() {
                return Err(err("rate_limit", "burst without requests_per_second"));
            }
            if rules.is_empty() {
                return Err(err("rate_limit", "give requests_per_second or rules"));
            }
            p.rate_limit = Some(RateLimiter {
                rules,
                slots: slots(r.max_clients, "rate_limit")?,
                status: status(r.status, 429, "rate_limit.status")?,
            });
        }
        if let Some(s) = c.behaviour_scoring {
            let window = s.window_seconds.unwrap_or(60);
            let block = s.block_seconds.unwrap_or(300);
            let threshold = s.threshold.unwrap_or(20);
            if window == 0 || block == 0 || threshold == 0 {
                return Err(err("behaviour_scoring", "window_seconds, threshold and block_seconds must be at least 1"));
            }
            p.scoring = Some(Scoring {
                policy: Policy { window_ms: window.saturating_mul(1000), threshold, block_ms: block.saturating_mul(1000) },
                slots: slots(s.max_clients, "behaviour_scoring")?,
                status: status(s.status, 403, "behaviour_scoring.status")?,
            });
        }
        if let Some(h) = c.hardening {
            let mut response_headers = Vec::new();
            let named = [("strict-transport-security", &h.hsts), ("x-content-type-options", &h.content_type_options), ("x-frame-options", &h.frame_options)];
            for (name, value) in named {
                if let Some(v) = value {
                    response_headers.push((name.to_string(), v.clone()));
                }
            }
            for (name, value) in &h.response_headers {
                let ok_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
                if !ok_name || value.bytes().any(|b| b < 0x20 && b != b'\t') {
                    return Err(err("hardening.response_headers", format!("\"{name}\" is not a valid header")));
                }
                response_headers.push((name.to_ascii_lowercase(), value.clone()));
            }
            let cookie = match &h.cookies {
                Some(cc) => {
                    let same_site = match cc.same_site.as_deref() {
                        None => Some("Lax".to_string()),
                        Some("") => None,
                        Some(v) if ["strict", "lax", "none"].contains(&v.to_ascii_lowercase().as_str()) => Some(v.to_string()),
                        Some(v) => return Err(err("hardening.cookies.same_site", format!("\"{v}\" is not Strict, Lax or None"))),
                    };
                    Some(CookieRule { secure: cc.secure, http_only: cc.http_only, same_site })
                }
                None => None,
            };
            p.hardening = Some(Hardening {
                response_headers,
                cookie,
                max_request_body: h.max_request_body_bytes,
                sanitize_forwarded: h.sanitize_forwarded_headers,
            });
        }
        if let Some(l) = c.request_log {
            let only_interrupted = match l.mode.as_deref() {
                None | Some("all") => false,
                Some("interrupted") => true,
                Some(m) => return Err(err("request_log.mode", format!("\"{m}\" is not all or interrupted"))),
            };
            let collector = l.collector.as_ref().map(|c| Collector {
                cluster: c.cluster.clone(),
                path: c.path.clone().unwrap_or_else(|| "/".into()),
                authority: c.authority.clone().unwrap_or_else(|| c.cluster.clone()),
                batch_size: c.batch_size.unwrap_or(100).max(1),
                flush_interval_ms: c.flush_interval_ms.unwrap_or(1000).max(10),
                timeout_ms: c.timeout_ms.unwrap_or(5000).max(1),
                max_buffer_bytes: c.max_buffer_bytes.unwrap_or(4 << 20),
            });
            p.request_log = Some(RequestLog { only_interrupted, proxy_log: l.proxy_log, collector });
        }
        let any = p.ip_lists.is_some() || p.rate_limit.is_some() || p.scoring.is_some() || p.hardening.is_some() || p.request_log.is_some();
        Ok(any.then_some(p))
    }

    /// The client address: `client_ip.header` when it holds a valid address, else the
    /// trusted-hops rule over `X-Forwarded-For` (see [`ip::client_ip`]), else the peer.
    pub fn client_address(&self, peer: Option<IpAddr>, header: Option<&[u8]>, xff: &[&[u8]]) -> Option<IpAddr> {
        if let Some(ip) = header.and_then(|h| std::str::from_utf8(h).ok()).and_then(ip::parse_ip) {
            return Some(ip);
        }
        ip::client_ip(peer, xff, self.trusted_hops)
    }
}

/// The verdict of the IP lists for one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpVerdict {
    Allow,
    Deny,
    Neither,
}

impl IpLists {
    /// An address on the allow list wins over the deny list (deny a block, allow one
    /// address in it).
    pub fn check(&self, ip: Option<IpAddr>) -> IpVerdict {
        match ip {
            Some(ip) if self.allow.contains(ip) => IpVerdict::Allow,
            Some(ip) if self.deny.contains(ip) => IpVerdict::Deny,
            _ => IpVerdict::Neither,
        }
    }
}

impl RateLimiter {
    /// The first rule for this request, with its index (the bucket namespace).
    pub fn rule_for(&self, authority: &[u8], path: &[u8]) -> Option<(usize, &RateRule)> {
        let host = std::str::from_utf8(authority).map(lower_host).unwrap_or("");
        self.rules.iter().enumerate().find(|(_, r)| {
            r.authority.as_deref().is_none_or(|a| a.eq_ignore_ascii_case(host))
                && r.path_prefix.as_deref().is_none_or(|p| path.starts_with(p.as_bytes()))
        })
    }
}

impl RateRule {
    /// The bucket owner for a request: a hash of the rule index and the client key.
    pub fn owner(&self, index: usize, ip: Option<IpAddr>, headers: &[(String, Vec<u8>)]) -> u64 {
        let idx = (index as u64).to_le_bytes();
        let found = match &self.key {
            KeySource::Ip => None,
            KeySource::Header(name) => headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice()),
            KeySource::Cookie(name) => headers.iter().filter(|(n, _)| n == "cookie").find_map(|(_, v)| cookie_value(v, name.as_bytes())),
        };
        match found {
            Some(v) => rate_limit::fnv1a(&[&idx, b"k", v]),
            None => ip_owner(&idx, ip),
        }
    }
}

fn ip_owner(prefix: &[u8], ip: Option<IpAddr>) -> u64 {
    let n = ip.map(ip::ip_to_u128).unwrap_or(0);
    rate_limit::fnv1a(&[prefix, b"ip", &n.to_le_bytes()])
}

/// The scoring owner of a client address.
pub fn score_owner(ip: Option<IpAddr>) -> u64 {
    ip_owner(b"score", ip)
}

/// The value of cookie `name` in one `Cookie` header value.
pub fn cookie_value<'a>(header: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    header.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (n, v) = pair.split_at(eq);
        (n.trim_ascii() == name).then(|| v.get(1..).unwrap_or_default().trim_ascii())
    })
}

/// Forwarding headers a client can forge and nothing in front of Envoy overwrote: dropped
/// by `sanitize_forwarded_headers` when no hop is trusted.
pub const SPOOFABLE_FORWARDING: &[&str] = &["forwarded", "x-real-ip", "x-forwarded-host", "x-forwarded-port", "x-forwarded-server", "x-client-ip", "true-client-ip", "x-original-forwarded-for"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginConfig;

    fn protect(json: &str) -> Result<Option<Protect>, Error> {
        let cfg = PluginConfig::parse(json.as_bytes())?;
        Protect::compile(&cfg.protect_config())
    }

    #[test]
    fn all_off_by_default() {
        assert!(protect("{}").unwrap().is_none());
        assert!(protect(r#"{"client_ip":{"trusted_hops":1}}"#).unwrap().is_none());
        assert!(protect(r#"{"ip_lists":{}}"#).unwrap().is_none());
    }

    #[test]
    fn simplest_rate_limit() {
        let p = protect(r#"{"rate_limit":{"requests_per_second":10,"burst":20}}"#).unwrap().unwrap();
        let rl = p.rate_limit.unwrap();
        assert_eq!(rl.status, 429);
        let (i, r) = rl.rule_for(b"any", b"/x").unwrap();
        assert_eq!((i, r.limit), (0, Limit { per_second: 10.0, burst: 20 }));
        assert_eq!(r.key, KeySource::Ip);
    }

    #[test]
    fn routes_and_keys() {
        let p = protect(
            r#"{"rate_limit":{"requests_per_second":100,"key":"header:X-Api-Key","rules":[
                {"authority":"API.example.com","path_prefix":"/login","requests_per_second":1,"burst":3,"key":"cookie:sid"},
                {"authority":"api.example.com","requests_per_second":50}]}}"#,
        )
        .unwrap()
        .unwrap();
        let rl = p.rate_limit.unwrap();
        assert_eq!(rl.rule_for(b"api.example.com:8443", b"/login/x").unwrap().0, 0);
        assert_eq!(rl.rule_for(b"api.example.com", b"/other").unwrap().0, 1);
        assert_eq!(rl.rule_for(b"www.example.com", b"/login").unwrap().0, 2);
        let (i, r) = rl.rule_for(b"api.example.com", b"/login").unwrap();
        assert_eq!(r.key, KeySource::Cookie("sid".into()));
        let ip: Option<IpAddr> = "1.2.3.4".parse().ok();
        let h = |c: &str| vec![("cookie".to_string(), c.as_bytes().to_vec())];
        assert_eq!(r.owner(i, ip, &h("a=1; sid=abc")), r.owner(i, None, &h("sid=abc")));
        assert_ne!(r.owner(i, ip, &h("sid=abc")), r.owner(i, ip, &h("sid=abd")));
        // No cookie: the address.
        assert_eq!(r.owner(i, ip, &[]), r.owner(i, ip, &h("other=1")));
        let (i2, r2) = rl.rule_for(b"x", b"/").unwrap();
        assert_eq!(r2.key, KeySource::Header("x-api-key".into()));
        assert_ne!(r2.owner(i2, ip, &[]), r.owner(i, ip, &[]));
        // Without a default limit, unmatched requests are not limited.
        let p = protect(r#"{"rate_limit":{"rules":[{"path_prefix":"/a","requests_per_second":1}]}}"#).unwrap().unwrap();
        assert!(p.rate_limit.unwrap().rule_for(b"h", b"/b").is_none());
    }

    #[test]
    fn bad_protection_configs() {
        for (json, want) in [
            (r#"{"rate_limit":{"requests_per_second":0}}"#, "requests_per_second"),
            (r#"{"rate_limit":{"requests_per_second":1,"burst":0}}"#, "burst"),
            (r#"{"rate_limit":{}}"#, "give requests_per_second"),
            (r#"{"rate_limit":{"requests_per_second":1,"key":"query:x"}}"#, "key"),
            (r#"{"rate_limit":{"requests_per_second":1,"rps":2}}"#, "unknown field"),
            (r#"{"rate_limit":{"requests_per_second":1,"max_clients":0}}"#, "max_clients"),
            (r#"{"ip_lists":{"deny":["10.0.0.0/40"]}}"#, "ip_lists.deny"),
            (r#"{"ip_lists":{"deny":["1.1.1.1"],"deny_status":99}}"#, "status"),
            (r#"{"behaviour_scoring":{"threshold":0}}"#, "at least 1"),
            (r#"{"hardening":{"cookies":{"same_site":"sometimes"}}}"#, "same_site"),
            (r#"{"hardening":{"response_headers":{"bad name":"x"}}}"#, "valid header"),
            (r#"{"request_log":{"mode":"some"}}"#, "mode"),
        ] {
            let e = protect(json).err().unwrap_or_else(|| panic!("{json} accepted"));
            assert!(e.to_string().contains(want), "{json}: {e}");
        }
    }

    #[test]
    fn ip_lists_allow_wins() {
        let p = protect(r#"{"ip_lists":{"deny":["10.0.0.0/8","2001:db8::/32"],"allow":["10.0.0.7"]}}"#).unwrap().unwrap();
        let l = p.ip_lists.unwrap();
        let ip = |s: &str| s.parse().ok();
        assert_eq!(l.check(ip("10.1.1.1")), IpVerdict::Deny);
        assert_eq!(l.check(ip("10.0.0.7")), IpVerdict::Allow);
        assert_eq!(l.check(ip("2001:db8::1")), IpVerdict::Deny);
        assert_eq!(l.check(ip("11.0.0.1")), IpVerdict::Neither);
        assert_eq!(l.check(None), IpVerdict::Neither);
    }

    #[test]
    fn client_address_sources() {
        let p = protect(r#"{"client_ip":{"trusted_hops":1,"header":"X-Envoy-External-Address"},"hardening":{}}"#).unwrap().unwrap();
        assert_eq!(p.client_ip_header.as_deref(), Some("x-envoy-external-address"));
        let peer = "10.0.0.1".parse().ok();
        let want: Option<IpAddr> = "9.9.9.9".parse().ok();
        assert_eq!(p.client_address(peer, Some(b"9.9.9.9"), &[b"1.1.1.1"]), want);
        assert_eq!(p.client_address(peer, Some(b"junk"), &[b"1.1.1.1, 9.9.9.9"]), want);
        assert_eq!(p.client_address(peer, None, &[]), peer);
    }

    #[test]
    fn hardening_compiles() {
        let p = protect(r#"{"hardening":{"hsts":"max-age=1","content_type_options":"nosniff","frame_options":"DENY","response_headers":{"Referrer-Policy":"no-referrer"},"cookies":{},"max_request_body_bytes":10}}"#)
            .unwrap()
            .unwrap();
        let h = p.hardening.unwrap();
        assert_eq!(h.response_headers.len(), 4);
        assert_eq!(h.response_headers[3], ("referrer-policy".into(), "no-referrer".into()));
        assert_eq!(h.cookie, Some(CookieRule { secure: true, http_only: true, same_site: Some("Lax".into()) }));
        assert_eq!(h.max_request_body, Some(10));
    }

    /// The example at the top of docs/protections.md compiles (the page stays true).
    #[test]
    fn readme_example_compiles() {
        let readme = include_str!("../../docs/protections.md");
        let start = readme.find("# Protections beyond rules").unwrap();
        let block = &readme[start..];
        let json = &block[block.find("```json\n").unwrap() + 8..];
        let json = &json[..json.find("```").unwrap()];
        let cfg = PluginConfig::parse(json.as_bytes()).unwrap();
        let p = Protect::compile(&cfg.protect_config()).unwrap().unwrap();
        assert!(p.ip_lists.is_some() && p.rate_limit.is_some() && p.scoring.is_some() && p.hardening.is_some() && p.request_log.is_some());
        assert_eq!(p.trusted_hops, 1);
    }

    #[test]
    fn cookie_values() {
        assert_eq!(cookie_value(b"a=1; sid=x y ; b=2", b"sid"), Some(&b"x y"[..]));
        assert_eq!(cookie_value(b"sid", b"sid"), None);
        assert_eq!(cookie_value(b"sid=", b"sid"), Some(&b""[..]));
        assert_eq!(cookie_value(b"", b"sid"), None);
    }
}
