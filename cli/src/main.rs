//! The `wafer` command.
//!
//! - `wafer check CONFIG.json`       compile a plugin configuration, print a summary or the error
//! - `wafer check-rules FILE.conf`   compile a SecLang file (Include @... resolves embedded files)
//! - `wafer eval CONFIG.json METHOD URI [HEADER: VALUE]... [--body FILE]`
//!                                   run one request through phases 1-2 and print verdict + log lines
//!                                   (with `--response FILE`, phases 3-5 too, for a 200 text/html)

use std::process::ExitCode;
use std::sync::Arc;

use wafer::{BodyAppend, Ruleset, Transaction, Waf};

fn usage() -> ExitCode {
    eprintln!(
        "usage:
  wafer check CONFIG.json
  wafer check-rules FILE.conf
  wafer eval CONFIG.json METHOD URI [Header: value]... [--body FILE] [--response FILE]
                                    (--response: also phases 3-5 for a 200 text/html with that body)
  wafer time CONFIG.json N METHOD URI [Header: value]... [--body FILE] [--response FILE] [--evict] [--vary] [--request-id] [--inflight K] [--latencies]
                                    mean time per request (--evict: other code run between requests, as in a busy proxy;
                                    --vary: every request's query and cookie values new, as make bench's GET with new values,
                                    and with --body a new first JSON string value in each body;
                                    --request-id: a new x-request-id header in each request, as Envoy adds;
                                    --inflight K: each response phase runs after K later requests, as with K in flight;
                                    --latencies: with --vary or --request-id, percentiles of the requests' times and the slow ones)
  wafer time CONFIG.json N --corpus FILE.raw [--response FILE]
                                    mean time per request over N requests of a corpus of bench/realistic.py, in turn
  wafer profile CONFIG.json N METHOD URI [Header: value]... [--body FILE] [--response FILE] [--top K] [--request-id] [--vary]  per-rule time, memoization, rewrite candidates
  wafer crs-test --native [--tests DIR] [--filter REGEX] [-v]
  wafer crs-requests [--tests DIR]      JSON lines {{id, raw (base64)}} of every CRS test stage
  wafer ids CONFIG.json < REQUESTS.jsonl  JSON lines {{id, status, ids}} (raw requests run natively)
  wafer replay-check [--tests DIR]      every CRS test stage run after itself, after the last stage, with a
                                    header value changed and with its response changed, and with its headers
                                    in one block each (as Envoy gives them): the same status, log lines and TX
                                    as without the replay, headers added one by one
  --reference (with any subcommand reading CONFIG.json): its rule sets in the reference speed (\"speed\": \"reference\":
                                    nothing kept across requests, every rule evaluated; for tests and measurements)
  wafer differential [--config CONFIG.json] [--tests DIR] [--jsonl FILE]...
                                    the CRS test stages (without --jsonl, or with --tests) and the JSON lines
                                    {{id, raw (base64)}} of each FILE through a long-lived fast engine in 6 orders
                                    (file order, reversed, each twice, shuffled, 2 and 3 in flight) and the
                                    reference engine (\"speed\": \"reference\"): the same status and matched rule ids
                                    (without --config: the CRS test setup; with it, its default rule set)
  wafer candidates [--config CONFIG.json] [--tests DIR] [--jsonl FILE]...
                                    the candidate rules of phases 1 and 2 from each request's distinct values
                                    (wafer::tx::candidates), checked against the reference engine: every rule
                                    that matched must be a candidate or always run; per request: rules, candidates,
                                    values, distinct (value, chain) pairs, steps skipped by byte class, scans"
    );
    ExitCode::from(2)
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{path}: {e}"))
}


/// `--reference` (any subcommand that reads a CONFIG.json): its rule sets in
/// `Speed::Reference`, as `"speed": "reference"` in the configuration.
static REFERENCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The plugin configuration `json`, compiled (in the reference speed with `--reference`).
fn waf_of(json: &[u8]) -> Result<Waf, String> {
    if !REFERENCE.load(std::sync::atomic::Ordering::Relaxed) {
        return Waf::from_json(json).map_err(|e| e.to_string());
    }
    let mut v: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("invalid JSON: {e}"))?;
    v.as_object_mut().ok_or("the configuration is not a JSON object")?.insert("speed".into(), "reference".into());
    Waf::from_json(v.to_string().as_bytes()).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--reference") {
        args.remove(i);
        REFERENCE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let result = match args.first().map(String::as_str) {
        Some("check") if args.len() == 2 => check(&args[1]),
        Some("check-rules") if args.len() == 2 => check_rules(&args[1]),
        Some("eval") if args.len() >= 4 => eval(&args[1..]),
        Some("time") if args.len() >= 5 => time_eval(&args[1..]),
        Some("profile") if args.len() >= 5 => profile(&args[1..]),
        Some("crs-test") => crs_test(&args[1..]),
        Some("crs-requests") => crs_requests(&args[1..]),
        Some("ids") if args.len() == 2 => ids(&args[1]),
        Some("replay-check") => replay_check(&args[1..]),
        Some("differential") => differential(&args[1..]),
        Some("candidates") => candidates(&args[1..]),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(path: &str) -> Result<(), String> {
    let json = read(path)?;
    let waf = waf_of(&json)?;
    println!("{}", waf.summary());
    Ok(())
}

fn check_rules(path: &str) -> Result<(), String> {
    let text = String::from_utf8(read(path)?).map_err(|_| format!("{path}: not UTF-8"))?;
    let rs = Ruleset::compile(path, &text).map_err(|e| e.to_string())?;
    let regexes = rs.build_all_regexes()?;
    println!("{path}: {} rules ({regexes} regexes built), engine {:?}", rs.rule_count(), rs.settings.engine);
    for w in &rs.warnings {
        println!("warning: {w}");
    }
    Ok(())
}

/// `wafer time CONFIG N METHOD URI ... [--evict]`: N evaluations, mean time each (native, or
/// under a wasm runtime for the wasm32-wasip1 build). `--evict`: between two requests, run
/// other code (see [`evict`]) and report each request's time without that code's own.
fn time_eval(args: &[String]) -> Result<(), String> {
    let n: u32 = args[1].parse().map_err(|_| "N must be a number")?;
    if args.get(2).map(String::as_str) == Some("--corpus") {
        return time_corpus(args);
    }
    let evicting = args.iter().any(|a| a == "--evict");
    let varying = args.iter().any(|a| a == "--vary");
    let request_ids = args.iter().any(|a| a == "--request-id");
    let latencies = args.iter().any(|a| a == "--latencies");
    let inflight = match args.iter().position(|a| a == "--inflight") {
        Some(p) => args.get(p + 1).and_then(|k| k.parse::<usize>().ok()).ok_or("--inflight needs a number")?,
        None => 0,
    };
    let mut rest = vec![args[0].clone()];
    let mut it = args[2..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--evict" | "--vary" | "--request-id" | "--latencies" => {}
            "--inflight" => {
                it.next();
            }
            _ => rest.push(a.clone()),
        }
    }
    // The requests are parsed (and their bodies read) before the clock starts: the loops time
    // the transactions only.
    let req = Req::parse(&rest)?;
    run_req(&req, false, None)?; // compile and warm up outside the timed loop
    INFLIGHT.with(|c| c.set(inflight));
    let per = |el: std::time::Duration| el.as_secs_f64() * 1e6 / f64::from(n);
    if varying || request_ids {
        let mut all: Vec<(std::rc::Rc<Req>, Option<(String, String)>)> = Vec::with_capacity(n as usize);
        let shared = std::rc::Rc::new(req.clone());
        for i in 1..=n {
            let r = if varying {
                let mut r = Req::parse(&vary(&rest, i))?;
                vary_body(std::rc::Rc::make_mut(&mut r.body), i);
                std::rc::Rc::new(r)
            } else {
                shared.clone()
            };
            all.push((r, request_ids.then(|| request_id(i as usize))));
        }
        let start = std::time::Instant::now();
        let mut each = Vec::with_capacity(all.len());
        for (r, id) in &all {
            let t0 = std::time::Instant::now();
            run_req_with(r, id.as_ref(), false, None)?;
            each.push(t0.elapsed());
        }
        let el = start.elapsed();
        if latencies {
            let mut sorted = each.clone();
            sorted.sort();
            let at = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q) as usize).map_or(0.0, |d| d.as_secs_f64() * 1e6);
            println!("p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} us", at(0.5), at(0.9), at(0.99), at(0.999), at(1.0));
            let slow: Vec<usize> = each.iter().enumerate().filter(|(_, d)| d.as_secs_f64() * 1e6 > 3.0 * at(0.5)).map(|(i, _)| i).collect();
            println!("slow (> 3x p50): {} requests, first (index, us): {:?}", slow.len(), slow.iter().take(40).map(|&i| (i, each.get(i).map_or(0, |d| d.as_micros()))).collect::<Vec<_>>());
        }
        let what = if varying { "with new values" } else { "with a new x-request-id each" };
        println!("{n} requests {what}, {:.1} us each", per(el));
        return Ok(());
    }
    if !evicting {
        let start = std::time::Instant::now();
        for _ in 0..n {
            run_req(&req, false, None)?;
        }
        println!("{n} requests, {:.1} us each", per(start.elapsed()));
        return Ok(());
    }
    let start = std::time::Instant::now();
    for i in 0..n {
        std::hint::black_box(evict(i));
    }
    let alone = start.elapsed();
    let start = std::time::Instant::now();
    for i in 0..n {
        run_req(&req, false, None)?;
        std::hint::black_box(evict(i));
    }
    let both = start.elapsed();
    println!(
        "{n} requests, {:.1} us each with other code run between them (that code alone: {:.1} us)",
        per(both.saturating_sub(alone)),
        per(alone)
    );
    Ok(())
}

/// `wafer time CONFIG N --corpus FILE [--response FILE]`: N requests of a corpus file of
/// bench/realistic.py (records `<length> <id>\n` + raw HTTP/1.1), in turn from the first, each
/// as the Envoy filter feeds it; with `--response`, phases 3-5 too. The requests are parsed
/// before the clock starts.
fn time_corpus(args: &[String]) -> Result<(), String> {
    let n: u32 = args[1].parse().map_err(|_| "N must be a number")?;
    let file = args.get(3).ok_or("--corpus needs a file")?;
    let response = match args.get(4).map(String::as_str) {
        Some("--response") => Some(read(args.get(5).ok_or("--response needs a file")?)?),
        Some(other) => return Err(format!("unexpected argument {other:?} after --corpus FILE")),
        None => None,
    };
    let reqs = corpus(&args[0], &read(file)?, response)?;
    run_req(&reqs[0], false, None)?; // compile outside the timed loop
    let start = std::time::Instant::now();
    for r in reqs.iter().cycle().take(n as usize) {
        run_req(r, false, None)?;
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1));
    println!("{n} requests of {file} ({} in the corpus, in turn), {us:.1} us each", reqs.len());
    Ok(())
}

/// The requests of a corpus file of bench/realistic.py, for the rule set of `config`.
fn corpus(config: &str, data: &[u8], response: Option<Vec<u8>>) -> Result<Vec<Req>, String> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let nl = rest.iter().position(|&b| b == b'\n').ok_or("corpus: a record without its header line")?;
        let head = String::from_utf8_lossy(&rest[..nl]).into_owned();
        let len: usize = head.split(' ').next().and_then(|l| l.parse().ok()).ok_or_else(|| format!("corpus: bad record header {head:?}"))?;
        let raw = rest.get(nl + 1..nl + 1 + len).ok_or_else(|| format!("corpus: record {head:?} is cut short"))?;
        let r = wafer_cli::crs::native::parse(raw).ok_or_else(|| format!("corpus: record {head:?} is not an HTTP request"))?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        out.push(Req {
            config: config.to_string(),
            method: r.method,
            uri: r.uri,
            headers: r.headers.iter().map(|(k, v)| (text(k), text(v))).collect(),
            body: std::rc::Rc::new(r.body),
            response: response.clone(),
        });
        rest = &rest[nl + 1 + len..];
    }
    if out.is_empty() {
        return Err("corpus: no request".into());
    }
    Ok(out)
}

/// A new UUID in `x-request-id` (number `i`), as Envoy adds to every request. Envoy puts it
/// after the client's headers.
fn request_id(i: usize) -> (String, String) {
    let id = format!("6f1c2a44-{:04x}-4a1e-9b7d-{:012x}", i % 0xffff, (i as u64).wrapping_mul(2_654_435_761) % (1 << 48));
    ("x-request-id".to_string(), id)
}

/// `rest` (CONFIG METHOD URI headers...) with request number `i` appended to every query value
/// and cookie value (as bench/conf/wrk.lua's WRK_VARY).
fn vary(rest: &[String], i: u32) -> Vec<String> {
    let tag = i.to_string();
    let append = |text: &str, sep: char| -> String {
        text.split(sep)
            .map(|part| if part.contains('=') { format!("{part}{tag}") } else { part.to_string() })
            .collect::<Vec<_>>()
            .join(&sep.to_string())
    };
    let mut out = rest.to_vec();
    if let Some(uri) = out.get_mut(2) {
        if let Some((path, query)) = uri.split_once('?') {
            *uri = format!("{path}?{}", append(query, '&'));
        }
    }
    for h in out.iter_mut().skip(3) {
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("cookie") {
                *h = format!("{k}: {}", append(v.trim(), ';'));
            }
        }
    }
    out
}

/// For `--vary` with `--body FILE`: the body with request number `i` inserted at the start of
/// the first JSON string value (`"order_id": "N..."`: one new value per request, the rest as
/// before).
fn vary_body(body: &mut Vec<u8>, i: u32) {
    if let Some(p) = body.windows(4).position(|w| w == b"\": \"") {
        body.splice(p + 4..p + 4, i.to_string().into_bytes());
    }
}

/// Other work to run between two timed requests: a small rule set compiled with its regexes
/// (the SecLang parser, regex parser and compilers, prefilter analysis: much code, little
/// data). In Envoy, the proxy's own work between two requests evicts the engine's code and
/// data from the CPU's caches; under Node, a CRS GET interleaved with this costs what it costs
/// in Envoy under load (docs/performance.md), so code-size changes can be judged here.
fn evict(i: u32) -> usize {
    let text = format!(
        "SecRule ARGS \"@rx (?i)foo{i}[a-z]+bar\\d{{2,5}}|baz(qux|quux)\" \"id:1,phase:2,deny,t:lowercase,t:urlDecodeUni\"\n\
         SecRule REQUEST_HEADERS:User-Agent \"@pm alpha beta gamma{i}\" \"id:2,phase:1,pass\""
    );
    Ruleset::compile("evict", &text).map(|rs| rs.build_all_regexes().unwrap_or(0)).unwrap_or(0)
}

/// `wafer profile CONFIG N METHOD URI [headers] [--body FILE] [--request-id] [--vary]`: per-rule time, memoization,
/// hot (targets, chain) groups and rewrite candidates over N runs of one request.
fn profile(args: &[String]) -> Result<(), String> {
    let n: u32 = args[1].parse().map_err(|_| "N must be a number")?;
    let mut rest = vec![args[0].clone()];
    rest.extend_from_slice(&args[2..]);
    // `--top K`: rows per table (default 25).
    let mut top = 25;
    if let Some(i) = rest.iter().position(|a| a == "--top") {
        top = rest.get(i + 1).and_then(|k| k.parse().ok()).ok_or("--top needs a number")?;
        rest.drain(i..i + 2);
    }
    // `--request-id`: a new x-request-id in every request, as Envoy adds.
    let request_ids = rest.iter().any(|a| a == "--request-id");
    // `--vary`: new query and cookie values in every request (as `wafer time --vary`).
    let varying = rest.iter().any(|a| a == "--vary");
    rest.retain(|a| a != "--request-id" && a != "--vary");
    let req = Req::parse(&rest)?;
    run_req(&req, false, None)?; // compile, build the regexes this request needs
    let mut total = Profile::default();
    for i in 0..n {
        if varying {
            let mut r = Req::parse(&vary(&rest, i + 1))?;
            vary_body(std::rc::Rc::make_mut(&mut r.body), i + 1);
            run_req(&r, false, Some(&mut total))?;
        } else if request_ids {
            run_req_with(&req, Some(&request_id(i as usize)), false, Some(&mut total))?;
        } else {
            run_req(&req, false, Some(&mut total))?;
        }
    }
    match total.ruleset.clone() {
        Some(rs) => print!("{}", total.profile.report(&rs, top)),
        None => println!("no rule set applies to this request"),
    }
    Ok(())
}

/// The profile of all runs and the rule set they ran against.
#[derive(Default)]
struct Profile {
    profile: wafer::tx::profile::Profile,
    ruleset: Option<Arc<Ruleset>>,
}

impl Profile {
    fn merge(&mut self, p: &wafer::tx::profile::Profile) {
        self.profile.merge(p);
    }
}

fn eval(args: &[String]) -> Result<(), String> {
    run_req(&Req::parse(args)?, true, None)
}

/// One request of the command line: CONFIG METHOD URI [Header: value]... [--body FILE]
/// [--response FILE], files read.
#[derive(Clone)]
struct Req {
    config: String,
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
    body: std::rc::Rc<Vec<u8>>,
    response: Option<Vec<u8>>,
}

impl Req {
    fn parse(args: &[String]) -> Result<Req, String> {
        let mut req = Req {
            config: args[0].clone(),
            method: args[1].clone(),
            uri: args[2].clone(),
            headers: Vec::new(),
            body: std::rc::Rc::default(),
            response: None,
        };
        let mut rest = args[3..].iter();
        while let Some(a) = rest.next() {
            if a == "--body" {
                req.body = std::rc::Rc::new(read(rest.next().ok_or("--body needs a file")?)?);
            } else if a == "--response" {
                req.response = Some(read(rest.next().ok_or("--response needs a file")?)?);
            } else {
                let (k, v) = a.split_once(':').ok_or_else(|| format!("header \"{a}\" is not Name: value"))?;
                req.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        Ok(req)
    }
}

fn run_req(req: &Req, print: bool, profile: Option<&mut Profile>) -> Result<(), String> {
    run_req_with(req, None, print, profile)
}

thread_local! {
    /// `wafer time --inflight K`: how many transactions wait for their response.
    static INFLIGHT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static INFLIGHT_TX: std::cell::RefCell<std::collections::VecDeque<(Transaction, Vec<u8>)>> = Default::default();
}

/// Runs `req` with one more header after its own (`x-request-id`).
fn run_req_with(req: &Req, extra: Option<&(String, String)>, print: bool, profile: Option<&mut Profile>) -> Result<(), String> {
    static WAF: std::sync::OnceLock<Result<Waf, String>> = std::sync::OnceLock::new();
    let waf = WAF.get_or_init(|| read(&req.config).and_then(|j| waf_of(&j))).as_ref().map_err(Clone::clone)?;
    let (method, uri, headers, body, response) = (&req.method, &req.uri, &req.headers, &req.body, &req.response);
    let host = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("host")).map(|(_, v)| v.as_str()).unwrap_or("localhost");
    let Some(rs): Option<Arc<Ruleset>> = waf.ruleset_for(host) else {
        println!("no rule set applies to {host}: pass");
        return Ok(());
    };
    let mut tx = Transaction::with_id(rs.clone(), "cli-1");
    tx.set_time_ms(wafer_cli::now_ms());
    if profile.is_some() {
        tx.enable_profile_with_clock(monotonic_nanos);
    }
    tx.process_connection("127.0.0.1", 12345, "127.0.0.1", 80);
    tx.process_uri(uri, method, "HTTP/1.1");
    // One serialized block, pseudo-headers first, as Envoy hands the headers over.
    let pairs = headers.iter().chain(extra).map(|(k, v)| (k.as_bytes(), v.as_bytes()));
    tx.add_request_header_block(wafer_cli::crs::native::request_block(host.as_bytes(), uri.as_bytes(), method.as_bytes(), pairs));
    let mut verdict = tx.process_request_headers();
    if verdict.is_none() {
        if tx.request_body_access() && !body.is_empty() {
            if let BodyAppend::Interrupt(i) = tx.append_request_body(body.as_slice()) {
                verdict = Some(i);
            }
        }
        if verdict.is_none() {
            verdict = tx.process_request_body();
        }
    }
    // With `--inflight K`, the response waits while K later requests arrive, as in a proxy
    // with K requests in flight.
    if let (None, Some(resp), false, true) = (&verdict, response, print, profile.is_none()) {
        let k = INFLIGHT.with(std::cell::Cell::get);
        if k > 0 {
            let mut due = INFLIGHT_TX.with(|q| {
                let mut q = q.borrow_mut();
                q.push_back((tx, resp.clone()));
                if q.len() > k { q.pop_front() } else { None }
            });
            if let Some((tx, resp)) = &mut due {
                let _ = respond(tx, resp);
                tx.process_logging();
            }
            return Ok(());
        }
    }
    if let (None, Some(resp)) = (&verdict, response) {
        verdict = respond(&mut tx, resp);
    }
    if response.is_some() {
        tx.process_logging();
    }
    let lines = tx.take_log_lines();
    if let (Some(total), Some(p)) = (profile, tx.take_profile()) {
        total.merge(&p);
        total.ruleset = Some(rs);
    }
    if !print {
        return Ok(());
    }
    for l in lines {
        println!("{l}");
    }
    match verdict {
        Some(i) => println!("verdict: interrupted with status {} by rule {:?}", i.status, i.rule_id),
        None => println!("verdict: pass"),
    }
    Ok(())
}

/// Phases 3-4 for a `200 text/html` response with this body, the way the Envoy filter feeds them
/// (its headers in one block, `:status` first).
fn respond(tx: &mut Transaction, body: &[u8]) -> Option<wafer::Interruption> {
    let length = body.len().to_string();
    let pairs: [(&[u8], &[u8]); 2] = [(b"content-type", b"text/html"), (b"content-length", length.as_bytes())];
    tx.add_response_header_block(wafer_cli::crs::native::response_block(200, pairs.into_iter()));
    if let Some(i) = tx.process_response_headers(200, "HTTP/1.1") {
        return Some(i);
    }
    if tx.response_body_access() && !body.is_empty() {
        if let BodyAppend::Interrupt(i) = tx.append_response_body(body) {
            return Some(i);
        }
    }
    tx.process_response_body()
}

fn crs_test(args: &[String]) -> Result<(), String> {
    use wafer_cli::crs::{check, ftw, native, TEST_SETUP};
    let mut dir = std::env::var("CRS_DIR").map(|d| format!("{d}/tests/regression/tests")).unwrap_or_default();
    let mut filter: Option<regex::Regex> = None;
    let mut verbose = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--native" => {}
            "--tests" => dir = it.next().ok_or("--tests needs a folder")?.clone(),
            "--filter" => filter = Some(regex::Regex::new(it.next().ok_or("--filter needs a regex")?).map_err(|e| e.to_string())?),
            "-v" => verbose = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if dir.is_empty() {
        return Err("set CRS_DIR or pass --tests DIR".into());
    }
    let tests = ftw::load(std::path::Path::new(&dir))?;
    let rs = Arc::new(Ruleset::compile("crs-test", &TEST_SETUP.join("\n")).map_err(|e| e.to_string())?);
    let (mut passed, mut failed) = (0usize, 0usize);
    for t in &tests {
        if filter.as_ref().is_some_and(|f| !f.is_match(&t.id)) {
            continue;
        }
        let mut result = Ok(());
        for stage in &t.stages {
            let raw = ftw::raw_request(&stage.input);
            let obs = native::run(&rs, &raw);
            result = check::check(&stage.output, &obs);
            if verbose {
                for l in &obs.log_lines {
                    println!("  {} log: {}", t.id, l.chars().take(300).collect::<String>());
                }
            }
            if result.is_err() {
                break;
            }
        }
        match result {
            Ok(()) => passed += 1,
            Err(e) => {
                failed += 1;
                println!("FAIL {}: {e}", t.id);
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        Err(format!("{failed} CRS tests failed"))
    } else {
        Ok(())
    }
}

/// The transaction replay (a rule with no hits in the last transaction, on the same data, is
/// passed) against evaluating every rule: each CRS test stage (the CRS test setup, paranoia
/// level 4, response phases) runs without the replay, then with it after another request
/// (the last stage), after itself, with one header value changed after itself, and after
/// itself with its response changed (a header more, a header value, the body or the
/// status, by turns; and replaced by another test's); and with its headers given in one
/// block each, as Envoy gives them, with and without the replay. Each run
/// with the replay must give what the run without it gives: status, log lines, final TX.
fn replay_check(args: &[String]) -> Result<(), String> {
    use wafer_cli::crs::{ftw, native};
    let mut dir = std::env::var("CRS_DIR").map(|d| format!("{d}/tests/regression/tests")).unwrap_or_default();
    if let [flag, d] = args {
        if flag == "--tests" {
            dir = d.clone();
        }
    }
    let tests = ftw::load(std::path::Path::new(&dir))?;
    let rs = Arc::new(Ruleset::compile("crs-test", &wafer_cli::crs::TEST_SETUP.join("\n")).map_err(|e| e.to_string())?);
    type Run = (wafer_cli::crs::check::Observed, Vec<(String, Vec<u8>)>, u64);
    let (mut runs, mut passed, mut bad) = (0usize, 0u64, Vec::new());
    let mut compare = |what: &str, id: &str, got: Run, expect: &Run| {
        runs += 1;
        passed += got.2;
        if got.0.status != expect.0.status || got.0.log_lines != expect.0.log_lines || got.1 != expect.1 {
            bad.push(format!("{id} ({what}): status {:?} vs {:?}, {} vs {} log lines, TX {}", got.0.status, expect.0.status, got.0.log_lines.len(), expect.0.log_lines.len(), if got.1 == expect.1 { "same" } else { "differs" }));
        }
    };
    let mut last_response: Option<native::Response> = None;
    for (n, t) in tests.iter().enumerate() {
        for (i, st) in t.stages.iter().enumerate() {
            let id = format!("{}/{}", t.id, i + 1);
            let Some(req) = native::parse(&ftw::raw_request(&st.input)) else { continue };
            // With the replay after the last stage, then without it (which leaves its trace).
            let cross = native::run_request(&rs, &req, true);
            let expect = native::run_request(&rs, &req, false);
            compare("after the last stage", &id, cross, &expect);
            compare("after itself", &id, native::run_request(&rs, &req, true), &expect);
            // Twice: the second walks each phase as the first did (see `replay::Run`).
            compare("after itself twice", &id, native::run_request(&rs, &req, true), &expect);
            // The headers in one block each, as Envoy gives them: without the replay, then
            // after itself (the next runs follow a trace built from blocks).
            compare("headers as blocks", &id, native::run_request_as_blocks(&rs, &req, false, None), &expect);
            compare("headers as blocks, after itself", &id, native::run_request_as_blocks(&rs, &req, true, None), &expect);
            let k = n % req.headers.len().max(1);
            let with = |more: &[u8]| {
                let mut other = req.clone();
                if let Some((_, v)) = other.headers.get_mut(k) {
                    v.extend_from_slice(more);
                }
                other
            };
            // A benign change, then another value of the same header: by turns benign and
            // ones some rules have hits on (the replay tests the rules reading all header
            // values on the changed one alone, and the second one walks as the first did
            // while those tests have no hits).
            let first = with(b"-0");
            let other = with(match n % 3 {
                0 => b"-1",
                1 => b"/..%2f..;<script>alert(1)</script>' or 1=1--",
                _ => b"/../x",
            });
            let changed = [native::run_request(&rs, &first, true), native::run_request(&rs, &other, true)];
            for (changed, other) in changed.into_iter().zip([&first, &other]) {
                compare("one header value changed", &id, changed, &native::run_request(&rs, other, false));
            }
            // The same request after itself, its response changed (by turns: a header
            // more, a header value, the body, the status), then replaced by the last different one.
            let own = native::reflect(&req);
            let (mut before, mut after) = (own.clone(), own.clone());
            let encoding = |r: &mut native::Response, v: &str| r.1.push(("Content-Encoding".into(), v.into()));
            let what = match n % 4 {
                0 => {
                    encoding(&mut after, "gzip");
                    "a header more"
                }
                1 => {
                    encoding(&mut before, "identity");
                    encoding(&mut after, "gzip");
                    "a header value"
                }
                2 => {
                    after.2.push(b'x');
                    "the body"
                }
                _ => {
                    after.0 = if own.0 < 500 { 500 } else { 200 };
                    "the status"
                }
            };
            let swapped = last_response.clone().filter(|r| *r != own).map(|r| (own.clone(), r));
            for (what, pair) in [(what, Some((before, after))), ("the last other response", swapped)] {
                let Some((before, after)) = pair else { continue };
                let _ = native::run_request_with(&rs, &req, false, Some(&before));
                let got = native::run_request_with(&rs, &req, true, Some(&after));
                compare(&format!("response changed: {what}"), &id, got, &native::run_request_with(&rs, &req, false, Some(&after)));
            }
            if last_response.as_ref() != Some(&own) {
                last_response = Some(own);
            }
        }
    }
    for b in bad.iter().take(30) {
        println!("DIFFERS {b}");
    }
    println!("{runs} runs with the replay, {passed} rules passed by it, {} differ from the runs without it", bad.len());
    if !bad.is_empty() {
        return Err(format!("{} runs differ", bad.len()));
    }
    if passed == 0 {
        return Err("the replay passed no rule: nothing was checked".into());
    }
    Ok(())
}

fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len() * 4 / 3 + 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(T[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn crs_requests(args: &[String]) -> Result<(), String> {
    use wafer_cli::crs::ftw;
    let mut dir = std::env::var("CRS_DIR").map(|d| format!("{d}/tests/regression/tests")).unwrap_or_default();
    if let [flag, d] = args {
        if flag == "--tests" {
            dir = d.clone();
        }
    }
    for t in ftw::load(std::path::Path::new(&dir))? {
        for (i, st) in t.stages.iter().enumerate() {
            let raw = ftw::raw_request(&st.input);
            println!("{}", serde_json::json!({"id": format!("{}/{}", t.id, i + 1), "raw": b64(&raw)}));
        }
    }
    Ok(())
}

/// The rule sets (fast, reference) and request sources of `wafer differential` and `wafer
/// candidates`: `[--config CONFIG.json] [--tests DIR] [--jsonl FILE]...`.
type Sources = Vec<(String, Vec<wafer_cli::crs::native::RawRequest>)>;
fn corpus_args(cmd: &str, args: &[String]) -> Result<(Arc<wafer::Ruleset>, Arc<wafer::Ruleset>, Sources), String> {
    use wafer_cli::crs::{ftw, native};
    let (mut config, mut tests, mut files) = (None, None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--config" => config = Some(value()?),
            "--tests" => tests = Some(value()?),
            "--jsonl" => files.push(value()?),
            _ => return Err(format!("{cmd}: unknown argument {a}")),
        }
    }
    let (fast, reference) = match &config {
        None => {
            wafer_cli::differential::pair("crs-test", &wafer_cli::crs::TEST_SETUP.join("\n"))?
        }
        Some(path) => {
            let json = read(path)?;
            let mut v: serde_json::Value = serde_json::from_slice(&json).map_err(|e| format!("{path}: {e}"))?;
            let fast = Waf::from_json(&json).map_err(|e| e.to_string())?.ruleset_for("").ok_or("the configuration has no default rule set")?;
            v.as_object_mut().ok_or("the configuration is not a JSON object")?.insert("speed".into(), "reference".into());
            let reference = Waf::from_json(v.to_string().as_bytes()).map_err(|e| e.to_string())?.ruleset_for("").ok_or("the configuration has no default rule set")?;
            (fast, reference)
        }
    };
    let mut sources: Vec<(String, Vec<native::RawRequest>)> = Vec::new();
    if tests.is_some() || files.is_empty() {
        let dir = tests.unwrap_or_else(|| std::env::var("CRS_DIR").map(|d| format!("{d}/tests/regression/tests")).unwrap_or_default());
        let reqs = ftw::load(std::path::Path::new(&dir))?.iter().flat_map(|t| t.stages.iter()).filter_map(|st| native::parse(&ftw::raw_request(&st.input))).collect();
        sources.push((format!("CRS test stages ({dir})"), reqs));
    }
    for f in &files {
        let text = String::from_utf8_lossy(&read(f)?).into_owned();
        let mut reqs = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{f}: bad line: {e}"))?;
            let raw = ftw::base64(v.get("raw").and_then(|r| r.as_str()).ok_or_else(|| format!("{f}: a line without raw"))?);
            reqs.push(native::parse(&raw).ok_or_else(|| format!("{f}: a request that does not parse ({})", v.get("id").cloned().unwrap_or_default()))?);
        }
        sources.push((f.clone(), reqs));
    }
    Ok((fast, reference, sources))
}

/// Nanoseconds since the first call (the profile's clock: the engine reads none).
fn monotonic_nanos() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    u64::try_from(START.get_or_init(std::time::Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `wafer candidates`: see [`wafer_cli::candidates`].
fn candidates(args: &[String]) -> Result<(), String> {
    let (_, reference, sources) = corpus_args("candidates", args)?;
    let always = wafer_cli::candidates::always(&reference);
    println!("{} rules of phases 1-2 always run (no requirement the values decide):", always.len());
    for l in &always {
        println!("  {l}");
    }
    let mut missed = 0;
    for (name, reqs) in &sources {
        if reqs.is_empty() {
            return Err(format!("{name}: no requests"));
        }
        let started = std::time::Instant::now();
        let report = wafer_cli::candidates::check(&reference, reqs);
        for m in report.misses.iter().take(20) {
            println!("MISSED {name} request {}: rule {} (phase {}) matched but was no candidate", m.request, m.rule, m.phase);
        }
        println!("{name}: {} requests, {} matched rules outside the candidates ({:.1} s); per request:", reqs.len(), report.misses.len(), started.elapsed().as_secs_f64());
        for l in report.lines() {
            println!("  {l}");
        }
        missed += report.misses.len();
    }
    if missed > 0 {
        return Err(format!("{missed} matched rules were not candidates"));
    }
    Ok(())
}

/// `wafer differential`: see [`wafer_cli::differential`].
fn differential(args: &[String]) -> Result<(), String> {
    use wafer_cli::differential;
    let (fast, reference, sources) = corpus_args("differential", args)?;
    let mut failed = 0;
    for (name, reqs) in &sources {
        let started = std::time::Instant::now();
        let bad = differential::compare(&fast, &reference, reqs);
        for d in bad.iter().take(20) {
            println!("DIFFERS {name} request {} ({}): fast {:?}, reference {:?}", d.request, d.order, d.fast, d.reference);
        }
        println!("{name}: {} requests in {} orders, {} differ ({:.1} s)", reqs.len(), differential::orders(reqs.len()).len(), bad.len(), started.elapsed().as_secs_f64());
        failed += bad.len();
        if reqs.is_empty() {
            return Err(format!("{name}: no requests"));
        }
    }
    if failed > 0 {
        return Err(format!("{failed} outcomes differ between the fast and the reference engine"));
    }
    Ok(())
}

fn ids(config: &str) -> Result<(), String> {
    use std::io::BufRead;
    use wafer_cli::crs::{check, ftw, native};
    let waf = waf_of(&read(config)?)?;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("bad input line: {e}"))?;
        let id = v.get("id").cloned().unwrap_or_default();
        let raw = ftw::base64(v.get("raw").and_then(|r| r.as_str()).unwrap_or(""));
        let host = native::parse(&raw)
            .and_then(|r| r.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(b"host")).map(|(_, v)| String::from_utf8_lossy(v).into_owned()))
            .unwrap_or_default();
        let Some(rs) = waf.ruleset_for(&host) else { continue };
        let obs = native::run(&rs, &raw);
        let mut ids: Vec<u64> = obs.log_lines.iter().flat_map(|l| check::ids_in(l)).collect();
        ids.sort_unstable();
        ids.dedup();
        println!("{}", serde_json::json!({"id": id, "status": obs.status, "ids": ids}));
    }
    Ok(())
}

#[cfg(test)]
mod corpus_tests {
    /// `wafer time --corpus` reads bench/realistic.py's records: every request with its method,
    /// headers and body; a record cut short is an error, not a shorter corpus.
    #[test]
    fn corpus_records_become_requests() {
        let get = b"GET /p/x?q=a%20b HTTP/1.1\r\nHost: shop.example.com\r\nCookie: sid=1\r\n\r\n";
        let post = b"POST /api/v2/cart/items HTTP/1.1\r\nHost: shop.example.com\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let mut data = format!("{} page/000000\n", get.len()).into_bytes();
        data.extend_from_slice(get);
        data.extend_from_slice(format!("{} write/000001\n", post.len()).as_bytes());
        data.extend_from_slice(post);
        let reqs = super::corpus("c.json", &data, None).expect("two records");
        assert_eq!(reqs.len(), 2);
        assert_eq!((reqs[0].method.as_str(), reqs[0].uri.as_str()), ("GET", "/p/x?q=a%20b"));
        assert!(reqs[0].headers.iter().any(|(k, v)| k == "Cookie" && v == "sid=1"));
        assert_eq!((reqs[1].method.as_str(), reqs[1].body.as_slice()), ("POST", &b"{\"a\":1}"[..]));
        let cut = &data[..data.len() - 3];
        assert!(super::corpus("c.json", cut, None).is_err(), "a record cut short");
    }
}

#[cfg(test)]
mod evict_tests {
    /// The work `--evict` runs is a real compile (a rule set that failed to parse would evict
    /// nothing and the measurement would mean nothing).
    #[test]
    fn evict_compiles_its_rule_set() {
        for i in [0, 7, 123] {
            assert_eq!(super::evict(i), 1, "the eviction rule set builds its one regex");
        }
    }
}
