//! Engine micro-benchmarks (issue 4): the requests of `make bench`, run natively against the
//! full CRS at PL1 with the verdict of each checked. See `benches/engine.rs`; run them with
//! `make bench-engine` (criterion, `cargo bench -p wafer-bench`).

use std::path::PathBuf;
use std::sync::Arc;

use wafer::{BodyAppend, Transaction, Waf};

/// The plugin configuration of `make bench`'s "wafer CRS PL1" target (bench/run.py).
pub const CRS_PL1: &str = r#"{"directives_map": {"default": ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]}, "default_directives": "default"}"#;

pub fn crs_pl1() -> Waf {
    match Waf::from_json(CRS_PL1.as_bytes()) {
        Ok(w) => w,
        Err(e) => panic!("CRS PL1 configuration: {e}"),
    }
}

/// One request as the benchmark sends it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// `../shared/peers` beside the repository (the benchmark's GET and 1 KB body), or `PEERS_DIR`.
fn peers_dir() -> PathBuf {
    std::env::var_os("PEERS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers"))
}

fn read(path: PathBuf) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn browser_headers() -> Vec<(String, String)> {
    String::from_utf8_lossy(&read(peers_dir().join("headers.txt")))
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect()
}

/// The browser-like GET of `make bench` (query string, 8 headers with a cookie).
pub fn get() -> Request {
    let uri = String::from_utf8_lossy(&read(peers_dir().join("get-path.txt"))).trim().to_string();
    Request { method: "GET".into(), uri, headers: browser_headers(), body: Vec::new() }
}

/// The benign JSON POST of `make bench`: `kb` is 1, 10 or 50.
pub fn post_json(kb: usize) -> Request {
    let body = match kb {
        1 => read(peers_dir().join("body-1k.json")),
        n => read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("data/body-{n}k.json"))),
    };
    let mut headers = browser_headers();
    headers.push(("Content-Type".into(), "application/json".into()));
    headers.push(("Content-Length".into(), body.len().to_string()));
    Request { method: "POST".into(), uri: "/api/v1/orders".into(), headers, body }
}

/// A SQL injection in the query string (CRS PL1 blocks it).
pub fn attack_get() -> Request {
    let mut r = get();
    r.uri = "/products/search?q=1%27%20or%201%3D1--&category=sports".into();
    r
}

/// Runs phases 1 and 2 as the Envoy adapter does; the status of the interruption, if any.
pub fn run(waf: &Waf, req: &Request) -> Option<u16> {
    let host = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("host")).map(|(_, v)| v.as_str()).unwrap_or("");
    let rs: Arc<_> = waf.ruleset_for(host)?;
    let mut tx = Transaction::with_id(rs, "bench");
    tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
    tx.process_uri(&req.uri, &req.method, "HTTP/1.1");
    for (k, v) in &req.headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    if let Some(i) = tx.process_request_headers() {
        return Some(i.status);
    }
    if tx.request_body_access() && !req.body.is_empty() {
        if let BodyAppend::Interrupt(i) = tx.append_request_body(&req.body) {
            return Some(i.status);
        }
    }
    tx.process_request_body().map(|i| i.status)
}
