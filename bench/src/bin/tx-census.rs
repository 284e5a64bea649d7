//! What transactions in flight hold: the full CRS PL1 (bench/src/lib.rs's `CRS_PL1`), the
//! requests of the realistic corpus (target/realistic/requests.raw, bench/realistic.py), run
//! as an Envoy worker interleaves them: N transactions (`--inflight`, 64) each through phases
//! 1 and 2, then each through the response (200, 180 bytes of text/html, as bench/run.py's
//! upstream) and dropped. A counting allocator around the system's counts the live bytes.
//!
//! ```
//! cargo run --release -p wafer-bench --bin tx-census -- [--inflight N] [--batches B] [--warm W] [--warm-inflight M]
//! ```
//!
//! Prints, for the batches after W warm ones (the regexes compiled, the thread's spares
//! and memo filled): the live bytes when the batch starts, the growth while its N requests
//! wait for their responses (per transaction), what one transaction keeps across each phase
//! call, and how far a phase's own peak goes above what it keeps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use wafer::Transaction;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let n = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(n, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            let n = if new >= l.size() { LIVE.fetch_add(new - l.size(), Relaxed) + (new - l.size()) } else { LIVE.fetch_sub(l.size() - new, Relaxed) - (l.size() - new) };
            PEAK.fetch_max(n, Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> isize {
    LIVE.load(Relaxed) as isize
}

/// Resets the peak to now; returns now.
fn mark() -> isize {
    let n = LIVE.load(Relaxed);
    PEAK.store(n, Relaxed);
    n as isize
}

fn peak() -> isize {
    PEAK.load(Relaxed) as isize
}

struct Req {
    method: String,
    uri: String,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

/// The requests of a corpus file ("<length> <id>\n" then that many raw bytes, repeated).
fn corpus(path: &str) -> Vec<Req> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} (bench/run.py writes it)"));
    let mut out = Vec::new();
    let mut rest = &data[..];
    while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
        let head = String::from_utf8_lossy(&rest[..nl]).to_string();
        let len: usize = head.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let raw = &rest[nl + 1..(nl + 1 + len).min(rest.len())];
        rest = &rest[(nl + 1 + len).min(rest.len())..];
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
        let head = &raw[..end];
        let body = raw.get(end + 4..).unwrap_or_default().to_vec();
        let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let line = String::from_utf8_lossy(lines.next().unwrap_or_default()).to_string();
        let mut parts = line.split(' ');
        let method = parts.next().unwrap_or("GET").to_string();
        let uri = parts.next().unwrap_or("/").to_string();
        let headers = lines
            .filter_map(|l| {
                let c = l.iter().position(|&b| b == b':')?;
                Some((l[..c].to_vec(), l[c + 1..].trim_ascii().to_vec()))
            })
            .collect();
        out.push(Req { method, uri, headers, body });
    }
    out
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Default)]
struct Sums {
    n: isize,
    keep1: isize,
    keep2: isize,
    peak12: isize,
    new_tx: isize,
    resp_keep: isize,
    peak_resp: isize,
}

fn main() {
    let inflight = arg("--inflight", 64);
    let batches = arg("--batches", 40);
    let warm = arg("--warm", 40);
    let path = format!("{}/../target/realistic/requests.raw", env!("CARGO_MANIFEST_DIR"));
    let reqs = corpus(&path);
    let waf = wafer_bench::crs_pl1();
    let Some(rs) = waf.ruleset_for("") else { panic!("no rule set") };
    let body = vec![b'x'; 180];
    let mut next = 0usize;
    let mut s = Sums::default();
    let (mut start_sum, mut inflight_sum, mut end_sum, mut counted) = (0isize, 0isize, 0isize, 0isize);
    let warm_inflight = arg("--warm-inflight", inflight);
    for batch in 0..warm + batches {
        let measured = batch >= warm;
        let n_here = if measured { inflight } else { warm_inflight };
        let b0 = (s.new_tx, s.keep1, s.keep2, s.resp_keep);
        let l0 = live();
        let mut txs: Vec<Transaction> = Vec::with_capacity(n_here);
        let base = live();
        for _ in 0..n_here {
            let r = &reqs[next % reqs.len()];
            next += 1;
            let a = mark();
            let mut tx = Transaction::with_id(rs.clone(), "census");
            tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
            tx.process_uri(&r.uri, &r.method, "HTTP/1.1");
            // As the filter gives them (proxy-wasm's serialization of a header map).
            let mut block = (r.headers.len() as u32).to_le_bytes().to_vec();
            for (k, v) in &r.headers {
                block.extend_from_slice(&(k.len() as u32).to_le_bytes());
                block.extend_from_slice(&(v.len() as u32).to_le_bytes());
            }
            for (k, v) in &r.headers {
                block.extend_from_slice(k);
                block.push(0);
                block.extend_from_slice(v);
                block.push(0);
            }
            tx.add_request_header_block(block);
            let b = mark();
            let i1 = tx.process_request_headers();
            let c = live();
            let p1 = peak();
            let mut p2 = c;
            if i1.is_none() {
                if tx.request_body_access() && !r.body.is_empty() {
                    let _ = tx.append_request_body(&r.body);
                }
                mark();
                let _ = tx.process_request_body();
                p2 = peak();
            }
            let d = live();
            if measured {
                s.n += 1;
                s.new_tx += b - a;
                s.keep1 += c - b;
                s.keep2 += d - c;
                s.peak12 += p1.max(p2) - d;
            }
            txs.push(tx);
        }
        let held = live() - base;
        if batch + 1 == warm + batches && std::env::var_os("CENSUS_PARTS").is_some() {
            for part in ["req.headers", "req.cookies", "req.args", "req.body", "req.buffers", "req", "tx", "tx_kept", "tx_free", "tx_undo", "removals", "matched", "logs", "cache", "values", "hits", "setvar", "replay", "collections"] {
                let a = live();
                for tx in txs.iter_mut() {
                    tx.census_drop(part);
                }
                println!("in flight after phase 2, per transaction: {part} {:.2} KiB", (a - live()) as f64 / txs.len() as f64 / 1024.0);
            }
            println!("left per transaction: {:.2} KiB", (live() - base) as f64 / txs.len() as f64 / 1024.0);
        }
        let l1 = live();
        for mut tx in txs.drain(..) {
            let a = mark();
            tx.add_response_header(b"content-type", b"text/html");
            tx.add_response_header(b"content-length", b"180");
            let _ = tx.process_response_headers(200, "HTTP/1.1");
            if tx.response_body_access() {
                let _ = tx.append_response_body(&body);
                let _ = tx.process_response_body();
            }
            tx.process_logging();
            let _ = tx.take_log_lines();
            let b = live();
            if measured {
                s.resp_keep += b - a;
                s.peak_resp += peak() - b;
            }
            drop(tx);
        }
        drop(txs);
        let l2 = live();
        if measured && batch < warm + 3 {
            let d = |v: isize| v as f64 / n_here as f64 / 1024.0;
            println!("batch {}: per transaction: creation and request data {:.2} KiB, kept across phase 1 {:.2}, across phase 2 {:.2}, response phases and drop {:.2} KiB", batch - warm, d(s.new_tx - b0.0), d(s.keep1 - b0.1), d(s.keep2 - b0.2), d(s.resp_keep - b0.3));
            println!("batch {}: live at start {:.1} KiB, growth while waiting {:.1} KiB, kept after {:.1} KiB", batch - warm, l0 as f64 / 1024.0, held as f64 / 1024.0, (l2 - l0) as f64 / 1024.0);
        }
        if measured {
            counted += 1;
            start_sum += l0;
            inflight_sum += held;
            end_sum += l2 - l0;
        }
        let _ = l1;
    }
    let k = |v: isize, n: isize| v as f64 / n.max(1) as f64 / 1024.0;
    println!("rule set {} rules; {} in flight; {} batches measured after {} warm", rs.rule_count(), inflight, counted, warm);
    println!("live bytes at a batch's start: {:.1} KiB (mean)", k(start_sum, counted));
    println!("growth while the batch waits for responses: {:.1} KiB, {:.2} KiB per transaction", k(inflight_sum, counted), k(inflight_sum, counted * inflight as isize));
    println!("growth over the whole batch (kept after): {:.1} KiB", k(end_sum, counted));
    println!("per transaction: creation and request data {:.2} KiB, kept across phase 1 {:.2} KiB, across phase 2 {:.2} KiB, phase peak above that {:.2} KiB", k(s.new_tx, s.n), k(s.keep1, s.n), k(s.keep2, s.n), k(s.peak12, s.n));
    println!("per transaction: response phases and drop {:.2} KiB, their peak above that {:.2} KiB", k(s.resp_keep, s.n), k(s.peak_resp, s.n));
}
