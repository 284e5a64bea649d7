//! `corpus-rate`: the fixed-rate load of `make bench`'s realistic cell. It sends the requests of
//! a corpus file of `bench/realistic.py` (records `<length> <id>\n` + that many bytes of raw
//! HTTP/1.1), in order and in a cycle, at a fixed rate over keep-alive connections, and prints
//! one JSON object: statuses, transport errors, and latency percentiles overall and by kind of
//! request (the id's part before `/`: page, static, api, write).
//!
//!     corpus-rate 127.0.0.1:PORT CORPUS.raw --rate 250 --duration 6 [--connections 16] [--from K]
//!
//! Request i is due at start + i / rate. A connection that is free takes the next request due
//! and sends it when it is due; its latency runs from that time, not from when it was sent
//! (a slow answer delays the requests queued behind it, and their wait is counted: no
//! coordinated omission, as oha's `--latency-correction`). oha cannot do this here: it sends
//! one request again and again, and the corpus's requests are all different.
//!
//! Requests due while every connection still waits for an answer are sent late; `late` counts
//! those sent more than 1 ms after their time. Only 127.0.0.1 is a sensible target.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One request of the corpus: its kind's index in `kinds` and its bytes.
struct Request {
    kind: usize,
    raw: Vec<u8>,
}

/// What one connection saw.
#[derive(Default)]
struct Seen {
    /// (kind, latency in microseconds from the due time, status)
    done: Vec<(usize, u64, u16)>,
    errors: BTreeMap<String, u64>,
    late: u64,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("corpus-rate: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: corpus-rate HOST:PORT CORPUS.raw --rate R --duration S [--connections C] [--from K]";
    let (addr, path) = match (args.first(), args.get(1)) {
        (Some(a), Some(p)) => (a.parse::<SocketAddr>().map_err(|e| format!("{a}: {e}"))?, p.clone()),
        _ => return Err(usage.into()),
    };
    let opt = |name: &str, default: Option<f64>| -> Result<f64, String> {
        match args.iter().position(|a| a == name) {
            Some(p) => args.get(p + 1).and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number")),
            None => default.ok_or_else(|| format!("{name} missing\n{usage}")),
        }
    };
    let rate = opt("--rate", None)?;
    let duration = opt("--duration", None)?;
    let conns = opt("--connections", Some(16.0))? as usize;
    let from = opt("--from", Some(0.0))? as usize;
    if !(rate > 0.0 && duration > 0.0 && conns > 0) {
        return Err("--rate, --duration and --connections must be positive".into());
    }
    let data = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    let (kinds, corpus) = parse_corpus(&data).map_err(|e| format!("{path}: {e}"))?;
    let total = (rate * duration).round() as usize;
    let corpus = Arc::new(corpus);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now() + Duration::from_millis(50);
    let threads: Vec<_> = (0..conns)
        .map(|_| {
            let (corpus, next) = (corpus.clone(), next.clone());
            std::thread::spawn(move || connection(addr, &corpus, &next, total, from, start, rate))
        })
        .collect();
    let mut all = Seen::default();
    for t in threads {
        let s = t.join().map_err(|_| "a connection's thread panicked")?;
        all.done.extend(s.done);
        all.late += s.late;
        for (k, n) in s.errors {
            *all.errors.entry(k).or_default() += n;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    print_report(&kinds, &all, total, elapsed, rate, conns);
    Ok(())
}

/// The kinds' names and the requests of a corpus file.
fn parse_corpus(data: &[u8]) -> Result<(Vec<String>, Vec<Request>), String> {
    let mut kinds: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let nl = rest.iter().position(|&b| b == b'\n').ok_or("a record without its header line")?;
        let head = String::from_utf8_lossy(&rest[..nl]).into_owned();
        let (len, id) = head.split_once(' ').unwrap_or((head.as_str(), ""));
        let len: usize = len.parse().map_err(|_| format!("bad record header {head:?}"))?;
        let body = rest.get(nl + 1..nl + 1 + len).ok_or_else(|| format!("record {id:?} is cut short"))?;
        let kind = id.split('/').next().unwrap_or("").to_string();
        let k = match kinds.iter().position(|x| *x == kind) {
            Some(k) => k,
            None => {
                kinds.push(kind);
                kinds.len() - 1
            }
        };
        out.push(Request { kind: k, raw: body.to_vec() });
        rest = &rest[nl + 1 + len..];
    }
    if out.is_empty() {
        return Err("no request".into());
    }
    Ok((kinds, out))
}

/// One keep-alive connection: takes the next request due until `total` were taken.
fn connection(addr: SocketAddr, corpus: &[Request], next: &AtomicUsize, total: usize, from: usize, start: Instant, rate: f64) -> Seen {
    let mut seen = Seen::default();
    let mut conn: Option<TcpStream> = None;
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            return seen;
        }
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > Duration::from_millis(1) {
            seen.late += 1;
        }
        let Some(req) = corpus.get((from + i) % corpus.len()) else { return seen };
        if conn.is_none() {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                    conn = Some(s);
                    buf.clear();
                }
                Err(e) => {
                    *seen.errors.entry(format!("connect: {}", e.kind())).or_default() += 1;
                    continue;
                }
            }
        }
        let Some(s) = conn.as_mut() else { continue };
        let answer = s.write_all(&req.raw).map_err(|e| format!("write: {}", e.kind())).and_then(|()| read_response(s, &mut buf));
        match answer {
            Ok((status, keep)) => {
                seen.done.push((req.kind, due.elapsed().as_micros() as u64, status));
                if !keep {
                    conn = None;
                }
            }
            Err(e) => {
                *seen.errors.entry(e).or_default() += 1;
                conn = None;
            }
        }
    }
}

/// Reads one HTTP/1.1 response from `s` (with `buf` holding bytes read before): its status and
/// whether the connection stays open. Bodies: Content-Length or chunked.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(u16, bool), String> {
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        fill(s, buf)?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).ok_or("bad status line")?;
    let (mut length, mut chunked, mut keep) = (0usize, false, true);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
        match k.as_str() {
            "content-length" => length = v.parse().map_err(|_| "bad content-length")?,
            "transfer-encoding" => chunked = v.contains("chunked"),
            "connection" => keep = !v.contains("close"),
            _ => {}
        }
    }
    buf.drain(..head_end);
    if chunked {
        loop {
            let line_end = loop {
                if let Some(p) = find(buf, b"\r\n") {
                    break p;
                }
                fill(s, buf)?;
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16).map_err(|_| "bad chunk size")?;
            // The chunk, its CRLF; after the last (empty) chunk, the final CRLF (no trailers).
            let need = line_end + 2 + size + 2;
            while buf.len() < need {
                fill(s, buf)?;
            }
            buf.drain(..need);
            if size == 0 {
                break;
            }
        }
    } else {
        while buf.len() < length {
            fill(s, buf)?;
        }
        buf.drain(..length);
    }
    Ok((status, keep))
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 16 * 1024];
    match s.read(&mut chunk) {
        Ok(0) => Err("read: connection closed".into()),
        Ok(n) => {
            buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
            Ok(())
        }
        Err(e) => Err(format!("read: {}", e.kind())),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Percentiles (ms) of latencies in microseconds: p50, p99, p99.9, max.
fn percentiles(mut v: Vec<u64>) -> [f64; 4] {
    if v.is_empty() {
        return [0.0; 4];
    }
    v.sort_unstable();
    let at = |q: f64| {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v.get(i).copied().unwrap_or(0) as f64 / 1000.0
    };
    [at(0.5), at(0.99), at(0.999), at(1.0)]
}

fn print_report(kinds: &[String], all: &Seen, total: usize, elapsed: f64, rate: f64, conns: usize) {
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    for &(_, _, st) in &all.done {
        *statuses.entry(st).or_default() += 1;
    }
    let p = percentiles(all.done.iter().map(|d| d.1).collect());
    let json_map = |m: Vec<(String, String)>| m.into_iter().map(|(k, v)| format!("{k:?}:{v}")).collect::<Vec<_>>().join(",");
    let by_kind = kinds
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let lat: Vec<u64> = all.done.iter().filter(|d| d.0 == k).map(|d| d.1).collect();
            let n = lat.len();
            let q = percentiles(lat);
            (name.clone(), format!("{{\"requests\":{n},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"p999_ms\":{:.3},\"max_ms\":{:.3}}}", q[0], q[1], q[2], q[3]))
        })
        .collect();
    println!(
        "{{\"planned\":{total},\"rate\":{rate},\"connections\":{conns},\"elapsed_s\":{elapsed:.3},\"responses\":{},\"rps\":{:.1},\"late\":{},\
         \"statuses\":{{{}}},\"errors\":{{{}}},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"p999_ms\":{:.3},\"max_ms\":{:.3},\"by_kind\":{{{}}}}}",
        all.done.len(),
        all.done.len() as f64 / elapsed.max(1e-9),
        all.late,
        json_map(statuses.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        json_map(all.errors.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()),
        p[0],
        p[1],
        p[2],
        p[3],
        json_map(by_kind)
    );
}
