//! Differential: what `Ruleset::quiet_again` lets the Envoy filter do (no transaction for a
//! request whose header block is the last quiet request's but for its `x-request-id`) must be
//! what the engine does with that request. The input is a raw HTTP/1.x request and, after its
//! first `\0\0`, another `x-request-id` value. For each rule set that allows it (the embedded
//! `@headers-only` and `@targeted`, and rules reading a header by name, the query, cookies,
//! the path and TX), the request runs with one id, as the filter hands it over (one header
//! block, pseudo-headers first; its body in two chunks where the rule set reads bodies, as
//! the filter holds a body whose headers are the quiet request's until it ends); when quiet,
//! it runs again with the other id (with the replay, then without) and must be quiet again
//! and answered the same.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use wafer::{Ruleset, Transaction};
use wafer_cli::crs::native;

fn rule_sets() -> &'static [Arc<Ruleset>] {
    static SETS: OnceLock<Vec<Arc<Ruleset>>> = OnceLock::new();
    SETS.get_or_init(|| {
        let custom = "SecRuleEngine On\n\
            SecRule REQUEST_HEADERS:User-Agent|REQUEST_HEADERS:Referer \"@rx (?i)(?:evil|<script)\" \"id:1,phase:1,t:none,t:urlDecodeUni,deny\"\n\
            SecRule ARGS|ARGS_NAMES|REQUEST_COOKIES|REQUEST_COOKIES_NAMES \"@detectSQLi\" \"id:2,phase:2,t:none,t:urlDecodeUni,pass,setvar:tx.score=+5\"\n\
            SecRule REQUEST_FILENAME \"@pm /admin /etc/passwd\" \"id:3,phase:1,t:lowercase,t:normalizePath,deny\"\n\
            SecRule TX:score \"@ge 5\" \"id:4,phase:2,deny\"";
        let bodies = format!(
            "{custom}\nSecRequestBodyAccess On\n\
            SecRule REQUEST_BODY|ARGS_POST|FILES|XML:/* \"@rx (?i)(?:union\\s+select|<script|\\.\\./)\" \"id:5,phase:2,t:none,t:urlDecodeUni,deny\"\n\
            SecRule REQBODY_ERROR \"!@eq 0\" \"id:6,phase:2,deny,status:400\""
        );
        ["Include @headers-only", "Include @targeted", custom, bodies.as_str()]
            .iter()
            .map(|t| {
                let rs = Arc::new(Ruleset::compile("fuzz", t).expect("rule set"));
                assert!(rs.quiet_again, "{t}");
                rs
            })
            .collect()
    })
}

/// (quiet, status) of `req` with `x-request-id: id`.
fn run(rs: &Arc<Ruleset>, req: &native::RawRequest, id: &[u8], replay: bool) -> (bool, Option<u16>) {
    let mut tx = Transaction::new(rs.clone(), String::from_utf8_lossy(id).into_owned());
    if !replay {
        tx.without_replay();
    }
    tx.process_uri(&req.uri, &req.method, "HTTP/1.1");
    let authority = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(b"host")).map_or(&b""[..], |(_, v)| v);
    let headers = req
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(b"x-request-id") && !k.eq_ignore_ascii_case(b"host"))
        .map(|(k, v)| (&k[..], &v[..]))
        .chain([(&b"x-request-id"[..], id)]);
    tx.add_request_header(b"Host", authority);
    tx.add_request_header_block(native::request_block(authority, req.uri.as_bytes(), req.method.as_bytes(), headers));
    let reads_body = rs.reads_request_body() && !req.body.is_empty();
    let mut status = tx.process_request_headers().map(|i| i.status);
    if status.is_none() && reads_body {
        let (a, b) = req.body.split_at(req.body.len() / 2);
        for chunk in [a, b] {
            match tx.append_request_body(chunk) {
                wafer::BodyAppend::Continue => {}
                wafer::BodyAppend::Full => break,
                wafer::BodyAppend::Interrupt(i) => {
                    status = Some(i.status);
                    break;
                }
            }
        }
    }
    if status.is_none() {
        status = tx.process_request_body().map(|i| i.status);
    }
    if status.is_none() {
        status = tx.process_response_headers(200, "HTTP/1.1").map(|i| i.status);
    }
    if status.is_none() {
        status = tx.process_response_body().map(|i| i.status);
    }
    tx.process_logging();
    (tx.quiet(), status)
}

fuzz_target!(|data: &[u8]| {
    let Some(at) = data.windows(2).position(|w| w == b"\0\0") else { return };
    let (Some(req), Some(id)) = (data.get(..at).and_then(native::parse), data.get(at + 2..)) else { return };
    for rs in rule_sets() {
        let first = run(rs, &req, b"4f1c2d3e-0000-4000-8000-000000000001", true);
        if !first.0 {
            continue;
        }
        assert_eq!(first.1, None, "a quiet transaction decided something");
        for replay in [true, false] {
            assert_eq!(run(rs, &req, id, replay), (true, None), "not quiet with another x-request-id (replay {replay})");
        }
    }
});
