//! In-process runner: parses go-ftw's raw request and feeds it straight to a
//! Transaction (no proxy). Fast feedback on engine semantics; the verdict of
//! record comes from the Envoy mode.

use std::sync::Arc;

use wafer::{BodyAppend, Ruleset, Transaction};

use super::check::Observed;

/// The full CRS at paranoia level 4, blocking, with the recommended base configuration (the
/// rule set of the fuzz targets that run whole transactions), compiled once per process.
/// Panics when it does not compile: the embedded CRS is checked by the build.
pub fn crs_pl4() -> &'static Arc<Ruleset> {
    static RS: std::sync::OnceLock<Arc<Ruleset>> = std::sync::OnceLock::new();
    RS.get_or_init(|| {
        let json = br#"{"crs":{"paranoia_level":4,"tx":{"allowed_methods":"GET HEAD POST PUT DELETE"}}}"#;
        let waf = wafer::Waf::from_json(json).unwrap_or_else(|e| panic!("CRS config: {e}"));
        waf.ruleset_for("localhost").unwrap_or_else(|| panic!("no default rule set"))
    })
}

/// [`crs_pl4`] in [`wafer::compile::Speed::Reference`]: what the fuzz targets compare the fast
/// engine with.
pub fn crs_pl4_reference() -> &'static Arc<Ruleset> {
    static RS: std::sync::OnceLock<Arc<Ruleset>> = std::sync::OnceLock::new();
    RS.get_or_init(|| {
        let json = br#"{"crs":{"paranoia_level":4,"tx":{"allowed_methods":"GET HEAD POST PUT DELETE"}},"speed":"reference"}"#;
        let waf = wafer::Waf::from_json(json).unwrap_or_else(|e| panic!("CRS config: {e}"));
        waf.ruleset_for("localhost").unwrap_or_else(|| panic!("no default rule set"))
    })
}

/// A parsed HTTP/1.x request (lenient, like a proxy that let it through).
#[derive(Clone)]
pub struct RawRequest {
    pub method: String,
    pub uri: String,
    pub version: String,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
}

pub fn parse(raw: &[u8]) -> Option<RawRequest> {
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").map(|p| (p, p + 4)).or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| (p, p + 2)))?;
    let head = &raw[..head_end.0];
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = String::from_utf8_lossy(lines.next()?).into_owned();
    let mut parts = line.splitn(3, ' ');
    let method = parts.next()?.to_string();
    let uri = parts.next().unwrap_or("/").to_string();
    let version = parts.next().unwrap_or("HTTP/1.1").to_string();
    let headers = lines.filter_map(|l| {
        let p = l.iter().position(|&b| b == b':')?;
        let v = &l[p + 1..];
        let v = &v[v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len())..];
        Some((l[..p].to_vec(), v.to_vec()))
    });
    let headers: Vec<_> = headers.collect();
    let mut body = raw[head_end.1..].to_vec();
    let chunked = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case(b"transfer-encoding") && v.eq_ignore_ascii_case(b"chunked"));
    if chunked {
        body = dechunk(&body);
    } else {
        // Without Content-Length an HTTP/1.1 request has no body.
        let n = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(b"content-length"))
            .and_then(|(_, v)| String::from_utf8_lossy(v).trim().parse::<usize>().ok())
            .unwrap_or(0);
        body.truncate(n);
    }
    Some(RawRequest { method, uri, version, headers, body })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(p) = b.windows(2).position(|w| w == b"\r\n") else { break };
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..p]).split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        b = &b[p + 2..];
        if size == 0 || size > b.len() {
            break;
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size + 2..).unwrap_or_default();
    }
    out
}

/// Runs one raw request through phases 1-5 and returns what go-ftw would see.
pub fn run(rs: &Arc<Ruleset>, raw: &[u8]) -> Observed {
    let Some(req) = parse(raw) else { return Observed::default() };
    run_request(rs, &req, true).0
}

/// Runs a parsed request through phases 1-5; `replay`: the transaction may follow the last
/// one's trace (see `wafer::Transaction::without_replay`). Also returns the TX collection at
/// the end and how many rules the replay passed.
pub fn run_request(rs: &Arc<Ruleset>, req: &RawRequest, replay: bool) -> (Observed, Vec<(String, Vec<u8>)>, u64) {
    run_request_with(rs, req, replay, None)
}

/// A response: status, headers, body.
pub type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// [`run_request`] with `upstream` as the upstream's response instead of albedo's answer.
pub fn run_request_with(rs: &Arc<Ruleset>, req: &RawRequest, replay: bool, upstream: Option<&Response>) -> (Observed, Vec<(String, Vec<u8>)>, u64) {
    execute(rs, req, replay, upstream, false)
}

/// [`run_request_with`], the request's and the response's headers each given in one
/// serialized block with pseudo-headers first, as Envoy hands them over
/// ([`Transaction::add_request_header_block`]): the transaction must see what it sees when
/// they are added one by one.
pub fn run_request_as_blocks(rs: &Arc<Ruleset>, req: &RawRequest, replay: bool, upstream: Option<&Response>) -> (Observed, Vec<(String, Vec<u8>)>, u64) {
    execute(rs, req, replay, upstream, true)
}

/// A request's headers serialized as Envoy hands them to a filter: pseudo-headers first
/// (`:authority`, `:path`, `:method`, `:scheme`), then `headers` in order.
pub fn request_block<'a>(authority: &'a [u8], path: &'a [u8], method: &'a [u8], headers: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let pseudo: [(&[u8], &[u8]); 4] = [(b":authority", authority), (b":path", path), (b":method", method), (b":scheme", b"http")];
    let pairs: Vec<(&[u8], &[u8])> = pseudo.into_iter().chain(headers).collect();
    wafer::body::pairs::block_of(&pairs)
}

/// A response's headers serialized as Envoy hands them to a filter: `:status` first.
pub fn response_block<'a>(status: u16, headers: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let code = status.to_string();
    let mut pairs: Vec<(&[u8], &[u8])> = vec![(b":status", code.as_bytes())];
    for (k, v) in headers {
        pairs.push((k, v));
    }
    wafer::body::pairs::block_of(&pairs)
}

/// Phases 1 and 2 of `req` (its URI and headers already given to `tx`): the body given whole
/// when the rule set reads it; the interruption, if any.
pub fn request_phases(tx: &mut Transaction, req: &RawRequest) -> Option<wafer::Interruption> {
    if let Some(i) = tx.process_request_headers() {
        return Some(i);
    }
    if tx.request_body_access() && !req.body.is_empty() {
        if let BodyAppend::Interrupt(i) = tx.append_request_body(&req.body) {
            return Some(i);
        }
    }
    tx.process_request_body()
}

fn execute(rs: &Arc<Ruleset>, req: &RawRequest, replay: bool, upstream: Option<&Response>, blocks: bool) -> (Observed, Vec<(String, Vec<u8>)>, u64) {
    let mut tx = Transaction::new(rs.clone(), "native".into());
    tx.set_time_ms(crate::now_ms());
    if !replay {
        tx.without_replay();
    }
    tx.process_connection("127.0.0.1", 50000, "127.0.0.1", 80);
    tx.process_uri(&req.uri, &req.method, &req.version);
    if blocks {
        let authority = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(b"host")).map_or(&b""[..], |(_, v)| v);
        tx.add_request_header_block(request_block(authority, req.uri.as_bytes(), req.method.as_bytes(), req.headers.iter().map(|(k, v)| (&k[..], &v[..]))));
    } else {
        for (k, v) in &req.headers {
            tx.add_request_header(k, v);
        }
    }
    let mut status: u16;
    let interrupted = request_phases(&mut tx, req);
    let mut response = Vec::new();
    if let Some(i) = &interrupted {
        status = i.status;
    } else {
        // Albedo: /reflect answers with what the JSON body describes.
        let (st, headers, body) = upstream.cloned().unwrap_or_else(|| reflect(req));
        status = st;
        if blocks {
            tx.add_response_header_block(response_block(status, headers.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes()))));
        } else {
            for (k, v) in &headers {
                tx.add_response_header(k.as_bytes(), v.as_bytes());
            }
        }
        if let Some(i) = tx.process_response_headers(status, "HTTP/1.1") {
            status = i.status;
        } else {
            if tx.response_body_access() && !body.is_empty() {
                let _ = tx.append_response_body(&body);
            }
            if let Some(i) = tx.process_response_body() {
                status = i.status;
            }
        }
        response = body;
    }
    tx.process_logging();
    let vars = tx.tx_vars();
    let passed = tx.replay_passed();
    (Observed { status: Some(status), response, log_lines: tx.take_log_lines() }, vars, passed)
}

/// albedo's behaviour: `POST /reflect` with `{"status","headers","body","encodedBody"}`.
pub fn reflect(req: &RawRequest) -> (u16, Vec<(String, String)>, Vec<u8>) {
    if req.method != "POST" || !req.uri.starts_with("/reflect") {
        return (200, vec![("Content-Type".into(), "text/plain".into())], Vec::new());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&req.body) else {
        return (400, Vec::new(), b"bad reflect spec".to_vec());
    };
    let status = v.get("status").and_then(|s| s.as_u64()).and_then(|s| u16::try_from(s).ok()).unwrap_or(200);
    let mut headers: Vec<(String, String)> = v
        .get("headers")
        .and_then(|h| h.as_object())
        .map(|h| h.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect())
        .unwrap_or_default();
    // Go's net/http sniffs a Content-Type when the handler sets none.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        headers.push(("Content-Type".into(), "text/plain; charset=utf-8".into()));
    }
    let body = if let Some(b) = v.get("encodedBody").and_then(|b| b.as_str()) {
        super::ftw::base64(b)
    } else {
        v.get("body").and_then(|b| b.as_str()).unwrap_or("").as_bytes().to_vec()
    };
    (status, headers, body)
}
