//! Pathological inputs against the full OWASP CRS (paranoia level 4, the recommended base
//! configuration, blocking), in-process: every input is run at 100 KiB and at 1 MiB and must
//!
//! - finish in time linear in its size: t(1 MiB) <= 10 x max(t(100 KiB), 5 ms) x SLACK (3),
//!   unless t(1 MiB) is under FLOOR (50 ms, too small to compare);
//! - stay within a memory bound: the process's peak RSS while running the 1 MiB input grows by
//!   at most MEMORY_FACTOR (48) x the input size over the RSS before it (measured by resetting
//!   the peak through /proc/self/clear_refs);
//! - get the verdict it is documented to get (README, "Bad input").
//!
//! Run with `make bounds` (release build; part of `make test`). Exits non-zero on any failure
//! and prints one line per input: sizes, times, ratio, RSS growth, verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wafer::{BodyAppend, Ruleset, Transaction, Waf};

const SMALL: usize = 100 * 1024;
const LARGE: usize = 1024 * 1024;
const SLACK: f64 = 3.0;
const FLOOR: Duration = Duration::from_millis(50);
const MEMORY_FACTOR: usize = 48;

/// What a request is expected to get.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// Passes (no interruption).
    Pass,
    /// Interrupted with this status.
    Status(u16),
    /// Interrupted with any status (CRS anomaly scoring: 403 at most levels, but which rules
    /// add up is not the point of this test).
    Blocked,
}

struct Case {
    name: &'static str,
    /// (uri, content type, body) for an input of about `n` bytes; a content type
    /// `header:NAME` sends the "body" as the value of request header NAME instead.
    make: fn(usize) -> (String, &'static str, Vec<u8>),
    want: Verdict,
}

fn run(rs: &Arc<Ruleset>, uri: &str, ct: &str, body: &[u8]) -> Option<u16> {
    let mut tx = Transaction::new(rs.clone(), "bounds".into());
    tx.process_connection("127.0.0.1", 50000, "127.0.0.1", 80);
    tx.process_uri(uri, if body.is_empty() { "GET" } else { "POST" }, "HTTP/1.1");
    tx.add_request_header(b"Host", b"localhost");
    tx.add_request_header(b"User-Agent", b"wafer-bounds/1.0");
    tx.add_request_header(b"Accept", b"*/*");
    let (ct, body) = match ct.strip_prefix("header:") {
        Some(name) => {
            tx.add_request_header(name.as_bytes(), body);
            ("", &b""[..])
        }
        None => (ct, body),
    };
    if !ct.is_empty() {
        tx.add_request_header(b"Content-Type", ct.as_bytes());
        tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    }
    if let Some(i) = tx.process_request_headers() {
        return Some(i.status);
    }
    if tx.request_body_access() {
        // Envoy hands the body over in slices of up to 64 KiB or so.
        for chunk in body.chunks(64 * 1024) {
            match tx.append_request_body(chunk) {
                BodyAppend::Continue => {}
                BodyAppend::Full => break,
                BodyAppend::Interrupt(i) => return Some(i.status),
            }
        }
    }
    if let Some(i) = tx.process_request_body() {
        return Some(i.status);
    }
    tx.add_response_header(b"Content-Type", b"text/html");
    if let Some(i) = tx.process_response_headers(200, "HTTP/1.1") {
        return Some(i.status);
    }
    if tx.response_body_access() {
        let _ = tx.append_response_body(b"<html><body>ok</body></html>");
    }
    let out = tx.process_response_body().map(|i| i.status);
    tx.process_logging();
    out
}

fn rep(unit: &str, n: usize) -> String {
    unit.repeat(n / unit.len().max(1))
}

fn cases() -> Vec<Case> {
    const FORM: &str = "application/x-www-form-urlencoded";
    const JSON: &str = "application/json";
    const XML: &str = "text/xml";
    vec![
        Case { name: "json nested arrays (unclosed)", make: |n| ("/".into(), JSON, rep("[", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "json nested objects", make: |n| ("/".into(), JSON, rep("{\"a\":", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "json many small args", make: |n| ("/".into(), JSON, format!("{{{}\"z\":1}}", rep("\"a\":1,", n)).into_bytes()), want: Verdict::Status(400) },
        Case { name: "json one long string", make: |n| ("/".into(), JSON, format!("{{\"a\":\"{}\"}}", rep("a", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form many small args", make: |n| ("/".into(), FORM, rep("a=1&", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "form many empty pairs", make: |n| ("/".into(), FORM, rep("&", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "form long run of 'a'", make: |n| ("/".into(), FORM, format!("q={}", rep("a", n)).into_bytes()), want: Verdict::Pass },
        Case { name: "form long run of quotes", make: |n| ("/".into(), FORM, format!("q={}", rep("'", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of %", make: |n| ("/".into(), FORM, format!("q={}", rep("%", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of %25", make: |n| ("/".into(), FORM, format!("q={}", rep("%25", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of <", make: |n| ("/".into(), FORM, format!("q={}", rep("%3C", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of (", make: |n| ("/".into(), FORM, format!("q={}", rep("(", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of backslashes", make: |n| ("/".into(), FORM, format!("q={}", rep("%5C", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of /*", make: |n| ("/".into(), FORM, format!("q={}", rep("/*", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of &#", make: |n| ("/".into(), FORM, format!("q={}", rep("%26%23", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of spaces", make: |n| ("/".into(), FORM, format!("q=a{}b", rep("+", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of digits", make: |n| ("/".into(), FORM, format!("q={}", rep("1", n)).into_bytes()), want: Verdict::Pass },
        Case { name: "form alternating a/ (path-like)", make: |n| ("/".into(), FORM, format!("q={}", rep("a/", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long run of ../", make: |n| ("/".into(), FORM, format!("q={}", rep("../", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form select-union words", make: |n| ("/".into(), FORM, format!("q={}", rep("select+union+", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "form long NUL run", make: |n| ("/".into(), FORM, format!("q={}", rep("%00", n)).into_bytes()), want: Verdict::Blocked },
        Case { name: "query string many args", make: |n| (format!("/?{}", rep("a=1&", n)), "", Vec::new()), want: Verdict::Status(400) },
        Case { name: "query string long value", make: |n| (format!("/?q={}", rep("a", n)), "", Vec::new()), want: Verdict::Pass },
        Case { name: "multipart many small parts", make: |n| {
            let part = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n";
            ("/".into(), "multipart/form-data; boundary=b", format!("{}--b--\r\n", rep(part, n)).into_bytes())
        }, want: Verdict::Status(400) },
        Case { name: "multipart many file parts", make: |n| {
            let part = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\n\r\n1\r\n";
            ("/".into(), "multipart/form-data; boundary=b", format!("{}--b--\r\n", rep(part, n)).into_bytes())
        }, want: Verdict::Status(400) },
        Case { name: "multipart one part, many header lines", make: |n| {
            ("/".into(), "multipart/form-data; boundary=b", format!("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n{}\r\n1\r\n--b--\r\n", rep("X-a: 1\r\n", n)).into_bytes())
        }, want: Verdict::Blocked },
        Case { name: "multipart one part, many distinct headers", make: |n| {
            let mut h = String::new();
            for i in 0..n / 12 {
                h.push_str(&format!("X-h{i}: 1\r\n"));
            }
            ("/".into(), "multipart/form-data; boundary=b", format!("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n{h}\r\n1\r\n--b--\r\n").into_bytes())
        }, want: Verdict::Status(400) },
        Case { name: "multipart one long line", make: |n| {
            ("/".into(), "multipart/form-data; boundary=b", format!("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n{}\r\n--b--\r\n", rep("a", n)).into_bytes())
        }, want: Verdict::Pass },
        Case { name: "xml nested elements", make: |n| ("/".into(), XML, rep("<a>", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "xml entity references (no expansion)", make: |n| {
            let dtd = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]>";
            ("/".into(), XML, format!("{dtd}<r>{}</r>", rep("&c;", n)).into_bytes())
        }, want: Verdict::Blocked },
        Case { name: "xml many attributes", make: |n| {
            let mut s = String::from("<r ");
            for i in 0..n / 8 {
                s.push_str(&format!("a{i}=\"1\" "));
            }
            s.push_str("/>");
            ("/".into(), XML, s.into_bytes())
        }, want: Verdict::Status(400) },
        // Envoy caps request headers at 60 KiB (max_request_headers_kb); the engine alone
        // must still be linear in them.
        Case { name: "cookie header many cookies", make: |n| ("/".into(), "header:Cookie", rep("a=1;", n).into_bytes()), want: Verdict::Status(400) },
        Case { name: "one long header value", make: |n| ("/".into(), "header:X-Long", rep("a", n).into_bytes()), want: Verdict::Pass },
    ]
}

/// Peak resident set size of this process (VmHWM), in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets the peak RSS to the current RSS (Linux >= 4.0).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let waf = Waf::from_json(br#"{"crs":{"paranoia_level":4}}"#).unwrap_or_else(|e| panic!("CRS config: {e}"));
    let rs = waf.ruleset_for("localhost").unwrap_or_else(|| panic!("no rule set"));
    // Warm up: regexes are built on first use.
    for case in cases() {
        let (uri, ct, body) = (case.make)(1024);
        run(&rs, &uri, ct, &body);
    }
    let can_reset = reset_peak();
    let mut failures = Vec::new();
    println!("{:<38} {:>9} {:>9} {:>6} {:>10}  verdict", "input", "100 KiB", "1 MiB", "ratio", "peak +RSS");
    for case in cases().into_iter().filter(|c| c.name.contains(&filter)) {
        let (su, sct, sbody) = (case.make)(SMALL);
        let (lu, lct, lbody) = (case.make)(LARGE);
        let lsize = lu.len() + lbody.len();
        let time = |uri: &str, ct: &str, body: &[u8]| {
            // Best of two: the machine is shared.
            let mut best = Duration::MAX;
            let mut verdict = None;
            for _ in 0..2 {
                let t = Instant::now();
                verdict = run(&rs, uri, ct, body);
                best = best.min(t.elapsed());
            }
            (best, verdict)
        };
        let (ts, vs) = time(&su, sct, &sbody);
        reset_peak();
        let before = peak_rss();
        let (tl, vl) = time(&lu, lct, &lbody);
        let grew = peak_rss().saturating_sub(before);
        let ratio = tl.as_secs_f64() / ts.as_secs_f64().max(1e-6);
        let verdict = |v: Option<u16>| match v {
            None => "pass".to_string(),
            Some(s) => s.to_string(),
        };
        println!(
            "{:<38} {:>7.1}ms {:>7.1}ms {:>6.1} {:>8}KiB  {} / {}",
            case.name,
            ts.as_secs_f64() * 1e3,
            tl.as_secs_f64() * 1e3,
            ratio,
            grew / 1024,
            verdict(vs),
            verdict(vl)
        );
        let limit = (LARGE as f64 / SMALL as f64) * SLACK;
        // Against at least 5 ms: below that the 100 KiB time is mostly noise.
        let base = ts.max(Duration::from_millis(5)).as_secs_f64();
        if tl > FLOOR && tl.as_secs_f64() / base > limit {
            failures.push(format!("{}: 1 MiB took {ratio:.1}x the time of 100 KiB (limit {limit})", case.name));
        }
        if can_reset && grew > MEMORY_FACTOR * lsize {
            failures.push(format!("{}: peak RSS grew {} KiB for a {} KiB input", case.name, grew / 1024, lsize / 1024));
        }
        for (size, v) in [("100 KiB", vs), ("1 MiB", vl)] {
            let ok = match case.want {
                Verdict::Pass => v.is_none(),
                Verdict::Status(s) => v == Some(s),
                Verdict::Blocked => v.is_some(),
            };
            if !ok {
                failures.push(format!("{} ({size}): got {}, want {:?}", case.name, verdict(v), case.want));
            }
        }
    }
    if !can_reset {
        println!("(peak RSS not measured: /proc/self/clear_refs is not writable)");
    }
    if failures.is_empty() {
        println!("all inputs linear in time, bounded in memory, with their documented verdicts");
    } else {
        for f in &failures {
            eprintln!("FAIL {f}");
        }
        std::process::exit(1);
    }
}
