//! The OWASP CRS regression suite through a real Envoy: the verdict of record.
//!
//! One Envoy loads wafer (either build: `target/wafer.wasm` or `target/libwafer.so`) with the
//! official CRS test setup
//! ([`wafer_cli::crs::TEST_SETUP`]: DetectionOnly, blocking paranoia level 4, the `X-CRS-Test`
//! marker rule 999999) in front of an albedo-like upstream ([`Upstream::albedo`]). Each stage's
//! request goes over TCP as the raw bytes go-ftw would write ([`ftw::raw_request`]). As go-ftw
//! does, a marker request `GET /status/200` with `X-CRS-Test: <test>-<n>-s` goes before the stage
//! and one with `...-e` after it; wafer logs each marker through rule 999999, and the log lines
//! between the two markers belong to the stage. [`check::check`] then applies `expect_ids`,
//! `no_expect_ids`, `match_regex` / `no_match_regex` and `status` in go-ftw's order.
//!
//! Envoy's stderr is read live through a pipe ([`LiveLog`]) with `--log-format-escaped`, so
//! every log record is one line (a rule's logged data can hold newlines).
//!
//! Envoy is tuned to let through what a permissive front end would (see [`bootstrap`]); what
//! it still answers itself, before any filter runs, is listed with reasons in
//! `tests/crs-overrides.yaml` ([`load_overrides`]).

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use wafer_cli::crs::check::Observed;
use wafer_cli::crs::ftw::{self, Output, Test};

use crate::envoy::{json_string, wafer_http_filters, Build, Envoy, LiveLog, Module, Options, Setup};
use crate::upstream::Upstream;

/// go-ftw's marker header (`logmarkerheadername`).
pub const MARKER_HEADER: &str = "X-CRS-Test";
/// Read timeout of one request (Coraza's harness uses 3 s with go-ftw).
pub const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// How long to wait for a marker's log line before sending the marker again.
pub const MARKER_WAIT: Duration = Duration::from_millis(1500);
/// Marker sends before the stage fails ("can't find log marker"); go-ftw allows 20.
pub const MARKER_TRIES: usize = 4;
/// The stage error when Envoy is no longer running (the run cannot go on).
pub const ENVOY_GONE: &str = "envoy exited";
/// Envoy's log line format: level, component, message (one line each, escaped).
const LOG_FORMAT: &str = "[%l][%n] %v";

/// The SecLang of the blocking-mode proof: CRS at its defaults (paranoia level 1, inbound
/// threshold 5, outbound 4) with `SecRuleEngine On`.
pub const BLOCKING_SETUP: &[&str] = &[
    "Include @recommended-conf",
    "SecRuleEngine On",
    "Include @crs-setup-conf",
    "Include @owasp_crs/*.conf",
];

/// The plugin configuration for [`BLOCKING_SETUP`].
pub fn blocking_config() -> String {
    let list: Vec<String> = BLOCKING_SETUP.iter().map(|d| json_string(d)).collect();
    format!(r#"{{"directives_map":{{"x":[{}]}},"default_directives":"x"}}"#, list.join(","))
}

/// The bootstrap of the CRS runs: one listener, wafer then the router, to `upstream`.
///
/// The HTTP connection manager is tuned so that Envoy passes on, unchanged, what the CRS tests
/// send (they were written for Apache/nginx in front of ModSecurity):
/// - no path normalization (`normalize_path`, `merge_slashes` off, escaped slashes kept):
///   the rules must see the path as sent;
/// - HTTP/1.0 and 0.9 accepted (with `localhost` as the default Host), absolute URLs, custom
///   methods, `Content-Length` together with `Transfer-Encoding: chunked` (Envoy then drops
///   the length and dechunks), trailers;
/// - headers with underscores kept, up to 500 headers of up to 96 KiB in all;
/// - CONNECT routed to the upstream (a tunnel; Envoy answers 200 once it is connected);
/// - header names keep their case on the way to the upstream.
///
/// Envoy still decides some requests before any filter: raw non-ASCII bytes in the request
/// target (400), a `#` fragment or an invalid version string (400), `OPTIONS *` (404); and it
/// removes `Connection`, `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding` and a `Referer`
/// that is not a valid URL, maps every version other than 1.1 to HTTP/1.0, and rewrites
/// absolute-form targets, all before the filter chain.
pub fn bootstrap(module: Module, plugin_config: &str, upstream: SocketAddr) -> String {
    format!(
        r#"admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    per_connection_buffer_limit_bytes: 4194304
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: crs
          codec_type: HTTP1
          normalize_path: false
          merge_slashes: false
          path_with_escaped_slashes_action: KEEP_UNCHANGED
          max_request_headers_kb: 96
          upgrade_configs: [{{ upgrade_type: CONNECT }}]
          common_http_protocol_options:
            headers_with_underscores_action: ALLOW
            max_headers_count: 500
          http_protocol_options:
            accept_http_10: true
            default_host_for_http_10: localhost
            allow_absolute_url: true
            allow_chunked_length: true
            allow_custom_methods: true
            enable_trailers: true
            header_key_format: {{ stateful_formatter: {{ name: preserve_case, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig }} }} }}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ connect_matcher: {{}} }}
                route: {{ cluster: upstream, timeout: 20s, upgrade_configs: [{{ upgrade_type: CONNECT, connect_config: {{}} }}] }}
              - match: {{ prefix: "" }}
                route: {{ cluster: upstream, timeout: 20s }}
{filters}
  clusters:
  - name: upstream
    connect_timeout: 2s
    type: STATIC
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http_protocol_options:
            header_key_format: {{ stateful_formatter: {{ name: preserve_case, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig }} }} }}
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint:
            address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }}
"#,
        filters = wafer_http_filters(module, plugin_config),
        ip = upstream.ip(),
        port = upstream.port(),
    )
}

/// What one request got back.
#[derive(Debug, Default)]
pub struct Exchange {
    /// None: no usable response (connection error, timeout before a status line).
    pub status: Option<u16>,
    /// The raw response as received (status line, headers, body).
    pub raw: Vec<u8>,
    pub error: Option<String>,
}

/// Sends `request` as is on a new connection and reads one response (bounded by `timeout`).
pub fn exchange(addr: SocketAddr, request: &[u8], timeout: Duration) -> Exchange {
    let mut stream = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) => return Exchange { error: Some(format!("connect: {e}")), ..Exchange::default() },
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(timeout));
    // The server may answer (and close) before it read everything: still read its answer.
    let _ = stream.write_all(request);
    let head_only = request.starts_with(b"HEAD ");
    let connect = request.starts_with(b"CONNECT ");
    let deadline = Instant::now() + timeout;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut error = None;
    loop {
        if let Some(status) = complete(&raw, head_only, connect) {
            let _ = stream.shutdown(Shutdown::Both);
            return Exchange { status: Some(status), raw, error: None };
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            error = Some("read timeout".to_string());
            break;
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    // End of stream or error: a status line received so far still counts (go-ftw parses what
    // it read).
    let status = final_head(&raw).map(|(status, _, _)| status);
    Exchange { status, error: if status.is_none() { error.or(Some("no response".into())) } else { None }, raw }
}

/// The first non-1xx response head in `raw`: (status, head length, headers as text).
fn final_head(raw: &[u8]) -> Option<(u16, usize, String)> {
    let mut at = 0;
    loop {
        let rest = &raw[at..];
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let status: u16 = head.split(' ').nth(1)?.trim().parse().ok()?;
        if (100..200).contains(&status) {
            at += end;
            continue;
        }
        return Some((status, at + end, head));
    }
}

/// Some(status) when `raw` holds a whole response.
/// A 2xx answer to CONNECT opens a tunnel: it has no body.
fn complete(raw: &[u8], head_only: bool, connect: bool) -> Option<u16> {
    let (status, head_len, head) = final_head(raw)?;
    let body = &raw[head_len..];
    if head_only || status == 204 || status == 304 || (connect && (200..300).contains(&status)) {
        return Some(status);
    }
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return chunked_done(body).then_some(status);
    }
    if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        return (body.len() >= len).then_some(status);
    }
    None // delimited by the end of the connection
}

fn chunked_done(mut b: &[u8]) -> bool {
    loop {
        let Some(p) = b.windows(2).position(|w| w == b"\r\n") else { return false };
        let size_text = String::from_utf8_lossy(&b[..p]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16) else {
            return true; // broken framing: nothing more will make sense of it
        };
        b = &b[p + 2..];
        if size == 0 {
            // Trailers end with an empty line.
            return b.starts_with(b"\r\n") || b.windows(4).any(|w| w == b"\r\n\r\n");
        }
        if b.len() < size + 2 {
            return false;
        }
        b = &b[size + 2..];
    }
}

/// Undoes Envoy's `--log-format-escaped` (absl::CEscape) for quotes, backslashes and octal
/// bytes, so a line reads like ModSecurity's (`[id "942100"]`). Newlines, carriage returns and
/// tabs stay escaped (`\n`): ModSecurity's error log never holds them raw either.
pub fn unescape(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            let c = b[i + 1];
            match c {
                b'"' | b'\'' | b'\\' => {
                    out.push(c);
                    i += 2;
                    continue;
                }
                b'0'..=b'7' => {
                    let digits = b[i + 1..].iter().take(3).take_while(|d| (b'0'..=b'7').contains(d)).count();
                    let text = std::str::from_utf8(&b[i + 1..i + 1 + digits]).unwrap_or("0");
                    if let Ok(v) = u8::from_str_radix(text, 8) {
                        out.push(v);
                        i += 1 + digits;
                        continue;
                    }
                }
                _ => {}
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether an Envoy log line was written by wafer (component `wasm` or `dynamic_modules`,
/// with [`LOG_FORMAT`]).
pub fn is_wafer_line(line: &str) -> bool {
    line.contains("][wasm] ") || line.contains("][dynamic_modules] ")
}

/// Envoy with wafer in front of the albedo upstream, and its live log.
pub struct Rig {
    // Envoy first: it stops before the upstream.
    pub envoy: Envoy,
    pub upstream: Upstream,
    live: Arc<LiveLog>,
    seq: u64,
    /// Print each stage's wafer lines.
    pub verbose: bool,
}

/// What running one stage produced, for the checks and for failure reports.
pub struct StageRun {
    pub observed: Observed,
    /// A problem of the run itself (marker not found).
    pub error: Option<String>,
}

impl Rig {
    /// Starts the upstream and Envoy (`--concurrency 1`: log lines come in request order).
    pub fn start(setup: &Setup, build: Build, label: &str, plugin_config: &str) -> Rig {
        let upstream = Upstream::albedo().expect("start the albedo upstream");
        let yaml = bootstrap(setup.module(build), plugin_config, upstream.addr());
        let options = Options {
            wafer_log: "info".into(),
            concurrency: 1,
            capture: true,
            extra_args: vec!["--log-format".into(), LOG_FORMAT.into(), "--log-format-escaped".into()],
            ..Options::default()
        };
        let envoy = Envoy::start_live_opts(setup, label, &yaml, &options);
        let live = envoy.live().expect("stderr is captured").clone();
        Rig { envoy, upstream, live, seq: 0, verbose: false }
    }

    pub fn send(&self, request: &[u8]) -> Exchange {
        exchange(self.envoy.listener, request, READ_TIMEOUT)
    }

    /// Sends the marker `value` until wafer logs it; the number of its log line.
    fn marker(&mut self, value: &str, from: usize) -> Result<usize, String> {
        let request = format!(
            "GET /status/200 HTTP/1.1\r\nAccept: */*\r\nUser-Agent: go-ftw test agent\r\nHost: localhost\r\n{MARKER_HEADER}: {value}\r\nConnection: close\r\n\r\n"
        );
        let needle = format!("{MARKER_HEADER} {value}");
        for _ in 0..MARKER_TRIES {
            let _ = self.send(request.as_bytes());
            if let Some(line) = self.live.wait_for(from, MARKER_WAIT, |l| is_wafer_line(l) && l.contains(&needle)) {
                return Ok(line);
            }
            if !self.envoy.running() {
                return Err(ENVOY_GONE.to_string());
            }
        }
        Err(format!("can't find log marker {value}"))
    }

    /// Runs one stage: start marker, the raw request, end marker.
    pub fn run_stage(&mut self, test_id: &str, request: &[u8]) -> StageRun {
        self.seq += 1;
        let start_value = format!("{test_id}-{}-s", self.seq);
        let end_value = format!("{test_id}-{}-e", self.seq);
        let from = self.live.end();
        let start = match self.marker(&start_value, from) {
            Ok(line) => line,
            Err(e) => return StageRun { observed: Observed::default(), error: Some(e) },
        };
        let ex = self.send(request);
        let end = match self.marker(&end_value, start + 1) {
            Ok(line) => line,
            Err(e) => {
                let observed = Observed { status: ex.status, response: ex.raw, log_lines: Vec::new() };
                return StageRun { observed, error: Some(e) };
            }
        };
        let log_lines: Vec<String> = self.live.lines(start + 1, end).into_iter().filter(|l| is_wafer_line(l)).map(|l| unescape(&l)).collect();
        self.live.forget_before(end);
        if self.verbose {
            println!("  {test_id}: status {:?}{}", ex.status, ex.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default());
            for l in &log_lines {
                println!("  {test_id} log: {}", l.chars().take(400).collect::<String>());
            }
        }
        StageRun { observed: Observed { status: ex.status, response: ex.raw, log_lines }, error: None }
    }
}

/// How an overridden test is treated.
#[derive(Debug, Clone)]
pub enum Expect {
    /// Not run.
    Skip,
    /// Run, with this output replacing every stage's output (go-ftw's overrides semantics).
    Output(Output),
}

/// One entry of `tests/crs-overrides.yaml`.
#[derive(Debug, Clone)]
pub struct Override {
    pub test: String,
    pub reason: String,
    pub expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    test: String,
    reason: String,
    #[serde(default)]
    expect: Option<serde_yaml::Value>,
}

/// Reads the overrides file: a YAML list of `{test, reason, expect}` where `expect` is `skip`
/// (the default) or a go-ftw `output` block.
pub fn load_overrides(path: &Path) -> Result<Vec<Override>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let raw: Option<Vec<RawOverride>> = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for r in raw.unwrap_or_default() {
        if r.reason.trim().is_empty() {
            return Err(format!("{}: override of {} has no reason", path.display(), r.test));
        }
        if !seen.insert(r.test.clone()) {
            return Err(format!("{}: {} is overridden twice", path.display(), r.test));
        }
        let expect = match r.expect {
            None => Expect::Skip,
            Some(serde_yaml::Value::String(s)) if s == "skip" => Expect::Skip,
            Some(v) => Expect::Output(serde_yaml::from_value(v).map_err(|e| format!("{}: expect of {}: {e}", path.display(), r.test))?),
        };
        out.push(Override { test: r.test, reason: r.reason, expect });
    }
    Ok(out)
}

/// The outcome of one test.
#[derive(Debug)]
pub enum Outcome {
    Passed,
    Failed(String),
}

/// Runs every stage of `test` (stopping at the first failure), with `output` replacing the
/// stages' outputs when given. `retry_once` stages get a second try.
pub fn run_test(rig: &mut Rig, test: &Test, output: Option<&Output>) -> Outcome {
    for (i, stage) in test.stages.iter().enumerate() {
        let out = output.unwrap_or(&stage.output);
        let request = ftw::raw_request(&stage.input);
        let tries = if out.retry_once == Some(true) || stage.output.retry_once == Some(true) { 2 } else { 1 };
        let mut result = Ok(());
        for _ in 0..tries {
            let run = rig.run_stage(&test.id, &request);
            result = match run.error {
                Some(e) => Err(e),
                None => wafer_cli::crs::check::check(out, &run.observed),
            };
            if result.is_ok() {
                break;
            }
        }
        if let Err(e) = result {
            let stage = if test.stages.len() > 1 { format!(" (stage {})", i + 1) } else { String::new() };
            return Outcome::Failed(format!("{e}{stage}"));
        }
    }
    Outcome::Passed
}

/// Severity, paranoia level and phase of each CRS rule, read from the rule files.
#[derive(Debug, Clone, Default)]
pub struct RuleInfo {
    pub severity: Option<String>,
    pub paranoia: Option<u8>,
    pub phase: Option<u8>,
}

/// Reads `id`, `severity`, the `paranoia-level/N` tag and `phase` of every rule under
/// `rules_dir` (`*.conf`).
pub fn rule_info(rules_dir: &Path) -> Result<BTreeMap<u64, RuleInfo>, String> {
    let id_re = regex::Regex::new(r"\bid:(\d+)").expect("static regex");
    let sev_re = regex::Regex::new(r"\bseverity:'?([A-Za-z]+)").expect("static regex");
    let pl_re = regex::Regex::new(r"paranoia-level/(\d)").expect("static regex");
    let phase_re = regex::Regex::new(r"\bphase:'?(\d|request|response|logging)").expect("static regex");
    let mut files: Vec<_> = std::fs::read_dir(rules_dir)
        .map_err(|e| format!("{}: {e}", rules_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "conf"))
        .collect();
    files.sort();
    let mut out = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        // Join continuation lines, then look at each directive.
        let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
        for line in joined.lines() {
            let line = line.trim_start();
            if !(line.starts_with("SecRule") || line.starts_with("SecAction")) {
                continue;
            }
            let Some(id) = id_re.captures(line).and_then(|c| c[1].parse::<u64>().ok()) else { continue };
            let info = RuleInfo {
                severity: sev_re.captures(line).map(|c| c[1].to_ascii_uppercase()),
                paranoia: pl_re.captures(line).and_then(|c| c[1].parse().ok()),
                phase: phase_re.captures(line).map(|c| match &c[1] {
                    "request" => 2,
                    "response" => 4,
                    "logging" => 5,
                    n => n.parse().unwrap_or(0),
                }),
            };
            out.insert(id, info);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_envoy_lines() {
        assert_eq!(unescape(r#"[id \"942100\"] \'a\' \\x \n \303\251"#), "[id \"942100\"] 'a' \\x \\n é");
    }

    #[test]
    fn response_framing() {
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false, false), Some(200));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\no", false, false), None);
        assert_eq!(complete(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad\r\ncontent-length: 0\r\n\r\n", false, false), Some(400));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, false), Some(200));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", true, false), Some(200));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\n\r\n", false, true), Some(200));
        assert_eq!(complete(b"HTTP/1.1 200 OK\r\n\r\n", false, false), None);
    }
}
