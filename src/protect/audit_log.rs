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

use serde_json::{json, Map, Value};

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

/// One `messages` entry from an engine log line.
pub fn message(line: &str) -> Value {
    let f = fields(line);
    let get = |n: &str| f.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()).unwrap_or_default();
    let tags: Vec<&str> = f.iter().filter(|(k, _)| *k == "tag").map(|(_, v)| v.as_str()).collect();
    // `Matched "…"` text, the part before the first field.
    let matched = line
        .find(" [file \"")
        .and_then(|i| line.get(..i))
        .and_then(|head| head.split_once("Matched ").map(|(_, m)| m.trim_matches('"').to_string()))
        .unwrap_or_default();
    json!({
        "message": get("msg"),
        "details": {
            "match": matched,
            "reference": "",
            "ruleId": get("id"),
            "file": get("file"),
            "lineNumber": get("line"),
            "data": get("data"),
            "severity": get("severity"),
            "ver": get("ver"),
            "rev": get("rev"),
            "tags": tags,
            "maturity": get("maturity"),
            "accuracy": get("accuracy"),
        }
    })
}

fn header_map(headers: &[(String, Vec<u8>)]) -> Value {
    let mut m = Map::new();
    for (k, v) in headers {
        if k.starts_with(':') {
            continue;
        }
        let v = String::from_utf8_lossy(v).into_owned();
        match m.get_mut(k) {
            // Repeated headers joined as a proxy would.
            Some(Value::String(prev)) => {
                prev.push_str(", ");
                prev.push_str(&v);
            }
            _ => {
                m.insert(k.clone(), Value::String(v));
            }
        }
    }
    Value::Object(m)
}

/// The JSON line for one transaction (no trailing newline).
pub fn to_json(r: &Record, engine_enabled: bool) -> String {
    let version: f64 = r.http_version.trim_start_matches("HTTP/").parse().unwrap_or(1.1);
    let v = json!({
        "transaction": {
            "client_ip": r.client_ip,
            "time_stamp": ctime(r.unix_secs),
            "server_id": "wafer",
            "client_port": r.client_port,
            "host_ip": r.host_ip,
            "host_port": r.host_port,
            "unique_id": r.unique_id,
            "request": {
                "method": r.method,
                "http_version": version,
                "uri": r.uri,
                "headers": header_map(&r.request_headers),
            },
            "response": {
                "http_code": r.status,
                "headers": header_map(&r.response_headers),
            },
            "producer": {
                "modsecurity": concat!("wafer ", env!("CARGO_PKG_VERSION")),
                "connector": "wafer-envoy",
                "secrules_engine": if engine_enabled { "Enabled" } else { "Disabled" },
                "components": [],
            },
            "messages": r.rule_lines.iter().map(|l| message(l)).collect::<Vec<_>>(),
            "wafer": { "action": r.action, "status": r.status },
        }
    });
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"ModSecurity: Access denied with code 403 (phase 2). Matched "Operator `Ge' with parameter `5' against variable `TX:score' (Value: `5' )" [file "@owasp_crs/REQUEST-949-BLOCKING-EVALUATION.conf"] [line "225"] [id "949110"] [rev ""] [msg "Inbound \"Anomaly\" Score"] [data ""] [severity "2"] [ver "OWASP_CRS/4.28.0"] [maturity "0"] [accuracy "0"] [tag "anomaly-evaluation"] [tag "OWASP_CRS"] [hostname "h"] [uri "/?a=[b \"c\"]"] [unique_id "u1"]"#;

    #[test]
    fn messages_from_engine_lines() {
        let m = message(LINE);
        assert_eq!(m["message"], "Inbound \"Anomaly\" Score");
        assert_eq!(m["details"]["ruleId"], "949110");
        assert_eq!(m["details"]["lineNumber"], "225");
        assert_eq!(m["details"]["severity"], "2");
        assert_eq!(m["details"]["tags"], json!(["anomaly-evaluation", "OWASP_CRS"]));
        assert!(m["details"]["match"].as_str().unwrap().starts_with("Operator `Ge'"));
        // Garbage lines give empty fields, never a panic.
        for junk in ["", " [", " [x \"", " [id \"1", "[id \"1\"]", " [ \"a\"]", " [id \"\\"] {
            let _ = message(junk);
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
    }

    #[test]
    fn ctime_format() {
        assert_eq!(ctime(0), "Thu Jan 01 00:00:00 1970");
        assert_eq!(ctime(1_796_000_000), "Mon Nov 30 00:53:20 2026");
    }
}
