//! go-ftw test files: loading, and building the raw request of a stage
//! exactly as go-ftw does (form encoding, multipart CRLF, standard headers).
//!
//! Two formats are read. The current one (CRS 4's own tests, most plugins): `rule_id` at the
//! top (or under `meta`), tests with `test_id`, stages as `- input: / output:`, log checks
//! under `output.log` (`expect_ids`, `no_expect_ids`, `match_regex`, `no_match_regex`). The
//! old one (go-ftw before 1.0, e.g. the Drupal plugin's tests): no `rule_id`, tests named by
//! `test_title` (`9506122-1`), stages as `- stage: { input:, output: }`, `status` as a list of
//! accepted codes, and `log_contains` / `no_log_contains`, regular expressions over the log
//! (read as `match_regex` / `no_match_regex`, as go-ftw 1.x converts them). A file without a
//! rule id takes the number its first `test_title` or its file name starts with.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct File {
    #[serde(default)]
    pub rule_id: Option<u64>,
    #[serde(default)]
    pub meta: Meta,
    #[serde(default)]
    pub tests: Vec<TestDef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub rule_id: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TestDef {
    #[serde(default)]
    pub test_id: Option<u64>,
    /// The old format's test name (`9506122-1`), used as the test's id.
    #[serde(default)]
    pub test_title: Option<String>,
    #[serde(default)]
    pub stages: Vec<StageDef>,
}

/// A stage as written: `- stage: { input:, output: }` (old format) or `- input: / output:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StageDef {
    Old { stage: Stage },
    Current(Stage),
}

impl StageDef {
    fn into_stage(self) -> Stage {
        let mut stage = match self {
            StageDef::Old { stage } | StageDef::Current(stage) => stage,
        };
        let out = &mut stage.output;
        if out.log.match_regex.is_none() {
            out.log.match_regex = out.log_contains.take();
        }
        if out.log.no_match_regex.is_none() {
            out.log.no_match_regex = out.no_log_contains.take();
        }
        stage
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Stage {
    #[serde(default)]
    pub input: Input,
    #[serde(default)]
    pub output: Output,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Input {
    pub method: Option<String>,
    pub uri: Option<String>,
    pub version: Option<String>,
    #[serde(default)]
    pub headers: Option<serde_yaml::Mapping>,
    pub data: Option<String>,
    pub encoded_request: Option<String>,
    pub autocomplete_headers: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Output {
    /// The accepted status codes: one (`status: 403`) or, in the old format, a list
    /// (`status: [200, 404]`); empty: any.
    #[serde(default, deserialize_with = "status_codes")]
    pub status: Vec<u16>,
    #[serde(default)]
    pub log: Log,
    /// Old format: a regular expression some log line must match (read as `log.match_regex`).
    #[serde(default)]
    pub log_contains: Option<String>,
    /// Old format: a regular expression no log line may match (read as `log.no_match_regex`).
    #[serde(default)]
    pub no_log_contains: Option<String>,
    pub expect_error: Option<bool>,
    pub response_contains: Option<String>,
    pub retry_once: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Log {
    #[serde(default)]
    pub expect_ids: Vec<u64>,
    #[serde(default)]
    pub no_expect_ids: Vec<u64>,
    pub match_regex: Option<String>,
    pub no_match_regex: Option<String>,
}

fn status_codes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Codes {
        One(u16),
        Many(Vec<u16>),
    }
    Ok(match Option::<Codes>::deserialize(d)? {
        None => Vec::new(),
        Some(Codes::One(c)) => vec![c],
        Some(Codes::Many(v)) => v,
    })
}

/// One test, ready to run.
#[derive(Debug, Clone)]
pub struct Test {
    pub id: String,
    pub rule_id: u64,
    pub stages: Vec<Stage>,
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// Loads every test under `dir` (the CRS `tests/regression/tests` folder).
pub fn load(dir: &Path) -> Result<Vec<Test>, String> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    if files.is_empty() {
        return Err(format!("no go-ftw YAML files under {}", dir.display()));
    }
    let mut tests = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        if text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l.trim() == "---") {
            continue; // a file of comments only (920539.yaml)
        }
        tests.extend(parse(&text, &f)?);
    }
    Ok(tests)
}

/// The leading decimal number of `s` (`9506122-1` -> 9506122).
fn leading_number(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.get(..end).and_then(|d| d.parse().ok())
}

/// The tests of one go-ftw file (either format); `path` names it in errors and gives the
/// rule id when the file states none.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Test>, String> {
    let file: File = serde_yaml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
    let rule_id = file
        .rule_id
        .or(file.meta.rule_id)
        .or_else(|| file.tests.iter().find_map(|t| t.test_title.as_deref().and_then(leading_number)))
        .or_else(|| path.file_stem().and_then(|s| s.to_str()).and_then(leading_number))
        .ok_or_else(|| format!("{}: no rule_id, and neither a test_title nor the file name starts with one", path.display()))?;
    let mut tests = Vec::with_capacity(file.tests.len());
    for (i, t) in file.tests.into_iter().enumerate() {
        let id = match (t.test_id, t.test_title) {
            (Some(n), _) => format!("{rule_id}-{n}"),
            (None, Some(title)) if !title.trim().is_empty() => title.trim().to_string(),
            (None, _) => format!("{rule_id}-{}", i + 1),
        };
        tests.push(Test { id, rule_id, stages: t.stages.into_iter().map(StageDef::into_stage).collect() });
    }
    Ok(tests)
}

fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => serde_yaml::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

/// Go's `url.QueryEscape`.
pub fn query_escape(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Go's `url.QueryUnescape`: None on a bad escape.
pub fn query_unescape(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        match b {
            b'%' => {
                let h = s.get(i + 1..i + 3)?;
                let v = u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
                out.push(v);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// go-ftw's text/template use in CRS: `{{ "x" | repeat N }}`.
fn expand_template(data: &str) -> String {
    let re = regex::Regex::new(r#"\{\{\s*"((?:[^"\\]|\\.)*)"\s*\|\s*repeat\s+(\d+)\s*\}\}"#).expect("static regex");
    re.replace_all(data, |c: &regex::Captures| {
        let n: usize = c[2].parse().unwrap_or(0);
        c[1].repeat(n.min(10_000_000))
    })
    .into_owned()
}

/// Standard or URL-safe base64 (padding optional); invalid input gives empty.
pub fn base64(s: &str) -> Vec<u8> {
    base64_decode(s).unwrap_or_default()
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' | b'\n' | b'\r' | b' ' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The exact bytes go-ftw writes for `input` (with `X-CRS-Test`-free headers).
pub fn raw_request(input: &Input) -> Vec<u8> {
    if let Some(enc) = &input.encoded_request {
        return base64_decode(enc).unwrap_or_default();
    }
    let method = input.method.clone().unwrap_or_else(|| "GET".into());
    let uri = input.uri.clone().unwrap_or_else(|| "/".into());
    let version = input.version.clone().unwrap_or_else(|| "HTTP/1.1".into());
    let mut headers: Vec<(String, String)> = input.headers.as_ref().map(|m| m.iter().map(|(k, v)| (value_str(k), value_str(v))).collect()).unwrap_or_default();
    let mut data: Vec<u8> = input.data.as_deref().map(expand_template).unwrap_or_default().into_bytes();
    let auto = input.autocomplete_headers.unwrap_or(true);
    let has = |h: &[(String, String)], n: &str| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    if !data.is_empty() && auto {
        if !has(&headers, "Content-Type") {
            headers.push(("Content-Type".into(), "application/x-www-form-urlencoded".into()));
        }
        let form = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("Content-Type") && v == "application/x-www-form-urlencoded");
        if form && query_unescape(&data).as_deref() == Some(&data[..]) {
            let mut parts = Vec::new();
            for token in data.split(|&b| b == b'&') {
                match token.iter().position(|&b| b == b'=') {
                    None => parts.push(query_escape(token)),
                    Some(p) => parts.push(format!("{}={}", query_escape(&token[..p]), query_escape(&token[p + 1..]))),
                }
            }
            data = parts.join("&").into_bytes();
        }
    }
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("Content-Type") && v.contains("multipart/form-data;")) {
        let mut d = Vec::with_capacity(data.len() + 64);
        for &b in &data {
            if b == b'\n' {
                d.push(b'\r');
            }
            d.push(b);
        }
        data = d;
    }
    if auto {
        if !has(&headers, "Connection") {
            headers.push(("Connection".into(), "close".into()));
        }
        // go-ftw's `^POST|PUT|PATCH|DELETE$` (alternation binds loosely).
        let body_method = method.starts_with("POST") || method.contains("PUT") || method.contains("PATCH") || method.ends_with("DELETE");
        if !has(&headers, "Content-Length") && (!data.is_empty() || body_method) {
            headers.push(("Content-Length".into(), data.len().to_string()));
        }
    }
    let mut out = format!("{method} {uri} {version}\r\n").into_bytes();
    for (k, v) in &headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_bodies_are_encoded_like_go_ftw() {
        let input = Input { method: Some("POST".into()), data: Some("var=1' or 1=1".into()), ..Default::default() };
        let raw = String::from_utf8(raw_request(&input)).unwrap();
        assert!(raw.ends_with("\r\n\r\nvar=1%27+or+1%3D1"), "{raw}");
        assert!(raw.contains("Content-Type: application/x-www-form-urlencoded\r\n"));
        assert!(raw.contains("Content-Length: 17\r\n"));
        let input = Input { method: Some("POST".into()), data: Some("a=%27".into()), ..Default::default() };
        assert!(String::from_utf8(raw_request(&input)).unwrap().ends_with("\r\n\r\na=%27"));
    }

    #[test]
    fn the_current_format_is_read() {
        let text = r#"
rule_id: 942100
tests:
  - test_id: 3
    stages:
      - input:
          method: POST
          uri: /x
          data: "a=1"
        output:
          status: 403
          log:
            expect_ids: [942100]
            no_expect_ids: [942101]
  - stages:
      - input: {uri: /y}
        output: {log: {match_regex: 'id "942100"'}}
"#;
        let tests = parse(text, Path::new("942100.yaml")).unwrap();
        assert_eq!(tests.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["942100-3", "942100-2"]);
        let out = &tests[0].stages[0].output;
        assert_eq!(out.status, [403]);
        assert_eq!(out.log.expect_ids, [942100]);
        assert_eq!(out.log.no_expect_ids, [942101]);
        assert_eq!(tests[0].stages[0].input.uri.as_deref(), Some("/x"));
        assert_eq!(tests[1].stages[0].output.log.match_regex.as_deref(), Some(r#"id "942100""#));
        // meta.rule_id (the phpMyAdmin plugin's files).
        let tests = parse("meta: {rule_id: 9513900}\ntests:\n  - test_id: 1\n    stages: [{input: {uri: /}}]\n", Path::new("x.yaml")).unwrap();
        assert_eq!(tests[0].id, "9513900-1");
    }

    #[test]
    fn the_old_format_is_read() {
        // As the Drupal plugin's tests/regression/drupal-plugin/9506122.yaml writes it.
        let text = r#"
---
meta:
  author: "someone"
  enabled: true
  name: 9506122.yaml
tests:
  - test_title: 9506122-1
    desc: Check exclusion for config
    stages:
      - stage:
          input:
            dest_addr: 127.0.0.1
            headers:
              Host: localhost
            port: 80
            method: GET
            uri: /admin/config/test
          output:
            no_log_contains: id "942430"
  - test_title: 9506122-2
    stages:
      - stage:
          input: {uri: /a}
          output:
            status: [200, 404]
            log_contains: id "942100"
"#;
        let tests = parse(text, Path::new("9506122.yaml")).unwrap();
        assert_eq!(tests.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["9506122-1", "9506122-2"]);
        assert_eq!(tests[0].rule_id, 9506122);
        let st = &tests[0].stages[0];
        assert_eq!(st.input.uri.as_deref(), Some("/admin/config/test"));
        assert_eq!(st.input.method.as_deref(), Some("GET"));
        assert_eq!(st.output.log.no_match_regex.as_deref(), Some(r#"id "942430""#));
        assert!(st.output.status.is_empty());
        let st = &tests[1].stages[0];
        assert_eq!(st.output.status, [200, 404]);
        assert_eq!(st.output.log.match_regex.as_deref(), Some(r#"id "942100""#));
        // No rule id anywhere: the file name's number.
        let tests = parse("tests:\n  - stages:\n      - stage: {input: {uri: /}}\n", Path::new("dir/9506100.yaml")).unwrap();
        assert_eq!(tests[0].id, "9506100-1");
        assert!(parse("tests: []\n", Path::new("notes.yaml")).is_err());
    }

    #[test]
    fn templates_and_encoded_requests() {
        assert_eq!(expand_template(r#"x={{ "1" | repeat 3 }}"#), "x=111");
        let input = Input { encoded_request: Some("R0VUIC8gSFRUUC8xLjENCg0K".into()), ..Default::default() };
        assert_eq!(raw_request(&input), b"GET / HTTP/1.1\r\n\r\n");
    }
}
