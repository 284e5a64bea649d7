//! The request log: one JSON object per transaction in the shape of ModSecurity v3's JSON
//! audit log (`SecAuditLogFormat JSON`), so tools that read that log read ours:
//!
//! ```json
//! {"transaction":{"client_ip":"…","time_stamp":"Mon Nov 30 01:02:03 2026","server_id":"wafer",
//!   "client_port":0,"host_ip":"…","host_port":0,"unique_id":"…",
//!   "request":{"method":"GET","http_version":1.1,"uri":"/…","headers":{"host":"…"}},
//!   "response":{"http_code":403,"headers":{}},
//!   "producer":{"modsecurity":"wafer 0.1.0","connector":"wafer-envoy","secrules_engine":"Enabled","components":[]},
//!   "messages":[{"message":"…","details":{"match":"…","reference":"","ruleId":"942100","file":"…",
//!     "lineNumber":"…","data":"…","severity":"2","ver":"…","rev":"","tags":["…"],"maturity":"0","accuracy":"0"}}],
//!   "wafer":{"action":"waf","status":403}}}
//! ```
//!
//! `messages` come from the engine's log lines (one per matched rule with `log`); the extra
//! `wafer` object says which protection decided (`waf`, `ip_deny`, `rate_limit`,
//! `behaviour_block`, `body_limit`, or `none`).

use crate::config::json::quote;

/// What one transaction looked like, collected by the adapter.
#[derive(Debug, Default, Clone)]
pub struct Record {
    pub unix_secs: u64,
    pub unique_id: String,
    pub client_ip: String,
    pub client_port: u16,
    pub host_ip: String,
    pub host_port: u16,
    pub method: String,
    pub uri: String,
    pub http_version: String,
    pub request_headers: Vec<(String, Vec<u8>)>,
    pub status: u16,
    pub response_headers: Vec<(String, Vec<u8>)>,
    /// ModSecurity-format log lines of matched rules.
    pub rule_lines: Vec<String>,
    /// Which protection answered (`none` when the request passed).
    pub action: &'static str,
}

/// `Mon Nov 30 01:02:03 2026`, as ModSecurity writes `time_stamp` (UTC).
pub fn ctime(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = i64::try_from(unix_secs).unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::tx::time::civil(days);
    let wday = DAYS.get(days.rem_euclid(7) as usize).copied().unwrap_or("Thu");
    let mon = MONTHS.get((m as usize).saturating_sub(1)).copied().unwrap_or("Jan");
    format!("{wday} {mon} {d:02} {:02}:{:02}:{:02} {y}", sod / 3600, (sod / 60) % 60, sod % 60)
}

/// The `[name "value"]` fields of one engine log line, unescaped.
fn fields(line: &str) -> Vec<(&str, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find(" [") {
        let after = rest.get(start + 2..).unwrap_or_default();
        let Some((name, tail)) = after.split_once(" \"") else { break };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            rest = after;
            continue;
        }
        // Value up to the unescaped `"]`.
        let mut value = String::new();
        let mut chars = tail.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                '"' if tail.get(i + 1..).is_some_and(|t| t.starts_with(']')) => {
                    end = Some(i + 2);
                    break;
                }
                c => value.push(c),
            }
        }
        let Some(end) = end else { break };
        out.push((name, value));
        rest = tail.get(end..).unwrap_or_default();
    }
    out
}

/// Appends `"name":` and, if given, a string value.
fn key(out: &mut String, name: &str, value: Option<&str>) {
    if !out.ends_with('{') && !out.ends_with('[') {
        out.push(',');
    }
    quote(out, name);
    out.push(':');
    if let Some(v) = value {
        quote(out, v);
    }
}

/// One `messages` entry from an engine log line, appended to `out` as a JSON object.
pub fn message(out: &mut String, line: &str) {
    let f = fields(line);
    let get = |n: &str| f.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str()).unwrap_or_default();
    // `Matched "…"` text, the part before the first field.
    let matched = line
        .find(" [file \"")
        .and_then(|i| line.get(..i))
        .and_then(|head| head.split_once("Matched ").map(|(_, m)| m.trim_matches('"')))
        .unwrap_or_default();
    out.push('{');
    key(out, "message", Some(get("msg")));
    key(out, "details", None);
    out.push('{');
    key(out, "match", Some(matched));
    key(out, "reference", Some(""));
    for (name, field) in [("ruleId", "id"), ("file", "file"), ("lineNumber", "line"), ("data", "data"), ("severity", "severity"), ("ver", "ver"), ("rev", "rev")] {
        key(out, name, Some(get(field)));
    }
    key(out, "tags", None);
    out.push('[');
    for (n, (_, tag)) in f.iter().filter(|(k, _)| *k == "tag").enumerate() {
        if n > 0 {
            out.push(',');
        }
        quote(out, tag);
    }
    out.push(']');
    key(out, "maturity", Some(get("maturity")));
    key(out, "accuracy", Some(get("accuracy")));
    out.push_str("}}");
}

/// Headers as a JSON object (pseudo-headers left out, repeated ones joined as a proxy would).
fn header_map(out: &mut String, headers: &[(String, Vec<u8>)]) {
    let mut joined: Vec<(&str, String)> = Vec::new();
    for (k, v) in headers {
        if k.starts_with(':') {
            continue;
        }
        let v = String::from_utf8_lossy(v);
        match joined.iter_mut().find(|(name, _)| name == k) {
            Some((_, prev)) => {
                prev.push_str(", ");
                prev.push_str(&v);
            }
            None => joined.push((k, v.into_owned())),
        }
    }
    out.push('{');
    for (k, v) in &joined {
        key(out, k, Some(v));
    }
    out.push('}');
}

/// `HTTP/1.1` -> `1.1`, `HTTP/2` -> `2.0` (a JSON number, as ModSecurity writes it); 1.1 when
/// the protocol is not `HTTP/<digits>[.<digits>]`.
fn http_version(protocol: &str) -> String {
    let v = protocol.trim_start_matches("HTTP/");
    let (major, minor) = v.split_once('.').unwrap_or((v, "0"));
    let digits = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    if digits(major) && digits(minor) {
        // As a number: no leading zeros.
        format!("{}.{}", major.trim_start_matches('0').parse::<u32>().unwrap_or(0), minor)
    } else {
        "1.1".to_string()
    }
}

/// The JSON line for one transaction (no trailing newline).
pub fn to_json(r: &Record, engine_enabled: bool) -> String {
    let mut out = String::with_capacity(512);
    out.push_str("{\"transaction\":{");
    key(&mut out, "client_ip", Some(&r.client_ip));
    key(&mut out, "time_stamp", Some(&ctime(r.unix_secs)));
    key(&mut out, "server_id", Some("wafer"));
    key(&mut out, "client_port", None);
    out.push_str(&r.client_port.to_string());
    key(&mut out, "host_ip", Some(&r.host_ip));
    key(&mut out, "host_port", None);
    out.push_str(&r.host_port.to_string());
    key(&mut out, "unique_id", Some(&r.unique_id));
    key(&mut out, "request", None);
    out.push('{');
    key(&mut out, "method", Some(&r.method));
    key(&mut out, "http_version", None);
    out.push_str(&http_version(&r.http_version));
    key(&mut out, "uri", Some(&r.uri));
    key(&mut out, "headers", None);
    header_map(&mut out, &r.request_headers);
    out.push('}');
    key(&mut out, "response", None);
    out.push('{');
    key(&mut out, "http_code", None);
    out.push_str(&r.status.to_string());
    key(&mut out, "headers", None);
    header_map(&mut out, &r.response_headers);
    out.push('}');
    key(&mut out, "producer", None);
    out.push('{');
    key(&mut out, "modsecurity", Some(concat!("wafer ", env!("CARGO_PKG_VERSION"))));
    key(&mut out, "connector", Some("wafer-envoy"));
    key(&mut out, "secrules_engine", Some(if engine_enabled { "Enabled" } else { "Disabled" }));
    key(&mut out, "components", None);
    out.push_str("[]}");
    key(&mut out, "messages", None);
    out.push('[');
    for (n, line) in r.rule_lines.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        message(&mut out, line);
    }
    out.push(']');
    key(&mut out, "wafer", None);
    out.push('{');
    key(&mut out, "action", Some(r.action));
    key(&mut out, "status", None);
    out.push_str(&r.status.to_string());
    out.push_str("}}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const LINE: &str = r#"ModSecurity: Access denied with code 403 (phase 2). Matched "Operator `Ge' with parameter `5' against variable `TX:score' (Value: `5' )" [file "@owasp_crs/REQUEST-949-BLOCKING-EVALUATION.conf"] [line "225"] [id "949110"] [rev ""] [msg "Inbound \"Anomaly\" Score"] [data ""] [severity "2"] [ver "OWASP_CRS/4.28.0"] [maturity "0"] [accuracy "0"] [tag "anomaly-evaluation"] [tag "OWASP_CRS"] [hostname "h"] [uri "/?a=[b \"c\"]"] [unique_id "u1"]"#;

    fn message_value(line: &str) -> Value {
        let mut out = String::new();
        message(&mut out, line);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"))
    }

    #[test]
    fn messages_from_engine_lines() {
        let m = message_value(LINE);
        assert_eq!(m["message"], "Inbound \"Anomaly\" Score");
        assert_eq!(m["details"]["ruleId"], "949110");
        assert_eq!(m["details"]["lineNumber"], "225");
        assert_eq!(m["details"]["severity"], "2");
        assert_eq!(m["details"]["tags"], json!(["anomaly-evaluation", "OWASP_CRS"]));
        assert!(m["details"]["match"].as_str().unwrap().starts_with("Operator `Ge'"));
        // Garbage lines give empty fields, never a panic.
        for junk in ["", " [", " [x \"", " [id \"1", "[id \"1\"]", " [ \"a\"]", " [id \"\\"] {
            let _ = message_value(junk);
        }
    }

    #[test]
    fn record_shape() {
        let r = Record {
            unix_secs: 1_796_000_000,
            unique_id: "u1".into(),
            client_ip: "10.0.0.1".into(),
            client_port: 5000,
            method: "GET".into(),
            uri: "/x".into(),
            http_version: "HTTP/2".into(),
            request_headers: vec![(":path".into(), b"/x".to_vec()), ("a".into(), b"1".to_vec()), ("a".into(), b"2".to_vec())],
            status: 403,
            rule_lines: vec![LINE.into()],
            action: "waf",
            ..Record::default()
        };
        let v: Value = serde_json::from_str(&to_json(&r, true)).unwrap();
        let t = &v["transaction"];
        assert_eq!(t["client_ip"], "10.0.0.1");
        assert_eq!(t["request"]["http_version"], 2.0);
        assert_eq!(t["request"]["headers"], json!({"a": "1, 2"}));
        assert_eq!(t["response"]["http_code"], 403);
        assert_eq!(t["messages"][0]["details"]["ruleId"], "949110");
        assert_eq!(t["wafer"]["action"], "waf");
        assert_eq!(t["time_stamp"], ctime(1_796_000_000));
        assert_eq!(t["producer"]["components"], json!([]));
        // Whatever the client sent, the line is JSON that reads back the same.
        let odd = Record {
            unique_id: "q\"\\\n\u{1}".into(),
            uri: "/\u{7f}é\"".into(),
            http_version: "HTTP/1.0".into(),
            request_headers: vec![("x-\"q".into(), b"\xff\r\n\"".to_vec())],
            rule_lines: vec![LINE.into(), "junk".into()],
            ..Record::default()
        };
        let v: Value = serde_json::from_str(&to_json(&odd, false)).unwrap();
        let t = &v["transaction"];
        assert_eq!(t["unique_id"], "q\"\\\n\u{1}");
        assert_eq!(t["request"]["uri"], "/\u{7f}é\"");
        assert_eq!(t["request"]["http_version"], 1.0);
        assert_eq!(t["request"]["headers"]["x-\"q"], "\u{fffd}\r\n\"");
        assert_eq!(t["messages"][1]["details"]["tags"], json!([]));
        assert_eq!(t["producer"]["secrules_engine"], "Disabled");
        for (protocol, want) in [("HTTP/2", "2.0"), ("HTTP/3", "3.0"), ("HTTP/1.1", "1.1"), ("HTTP/01.1", "1.1"), ("", "1.1"), ("HTTP/x", "1.1"), ("HTTP/1.", "1.1"), ("HTTP/1e9", "1.1")] {
            assert_eq!(http_version(protocol), want, "{protocol}");
        }
    }

    #[test]
    fn ctime_format() {
        assert_eq!(ctime(0), "Thu Jan 01 00:00:00 1970");
        assert_eq!(ctime(1_796_000_000), "Mon Nov 30 00:53:20 2026");
    }
}
