//! Fast against reference: the same requests through a long-lived rule set in
//! [`Speed::Fast`] (each transaction may use what the ones before it on the thread left) and
//! through the same rules in [`Speed::Reference`] (the plain SecLang loop), in several orders
//! and with several transactions in flight, must end with the same status and the same matched
//! rule ids (from the log lines).

use std::sync::Arc;

use wafer::compile::Speed;
use wafer::{Ruleset, Transaction};

use crate::crs::{check, native};

/// A request's outcome: its final status and the sorted ids of the rules that logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: u16,
    pub ids: Vec<u64>,
}

/// A transaction whose request phases ran, waiting for its response.
struct InFlight {
    tx: Transaction,
    req: usize,
    status: Option<u16>,
}

/// Runs request `n` of `reqs` through phases 1-2 (the time and id fixed by `n`, so both modes
/// see the same `TIME*` and `UNIQUE_ID`).
fn start(rs: &Arc<Ruleset>, reqs: &[native::RawRequest], n: usize) -> InFlight {
    let Some(req) = reqs.get(n) else { return InFlight { tx: Transaction::new(rs.clone(), String::new()), req: n, status: Some(0) } };
    let mut tx = Transaction::new(rs.clone(), format!("d{n}"));
    tx.set_time_ms(1_700_000_000_000 + n as u64 * 1000);
    tx.process_connection("192.0.2.7", 40000 + (n % 20000) as u16, "127.0.0.1", 80);
    tx.process_uri(&req.uri, &req.method, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    let interrupted = native::request_phases(&mut tx, req);
    InFlight { tx, req: n, status: interrupted.map(|i| i.status) }
}

/// Runs phases 3-5 of `f` (the response as albedo answers the request) and its outcome.
fn finish(mut f: InFlight, reqs: &[native::RawRequest]) -> (usize, Outcome) {
    let status = match (f.status, reqs.get(f.req)) {
        (Some(s), _) => s,
        (None, None) => 0,
        (None, Some(req)) => {
            let (mut st, headers, body) = native::reflect(req);
            for (k, v) in &headers {
                f.tx.add_response_header(k.as_bytes(), v.as_bytes());
            }
            if let Some(i) = f.tx.process_response_headers(st, "HTTP/1.1") {
                st = i.status;
            } else {
                if f.tx.response_body_access() && !body.is_empty() {
                    let _ = f.tx.append_response_body(&body);
                }
                if let Some(i) = f.tx.process_response_body() {
                    st = i.status;
                }
            }
            st
        }
    };
    f.tx.process_logging();
    let mut ids: Vec<u64> = f.tx.take_log_lines().iter().flat_map(|l| check::ids_in(l)).collect();
    ids.sort_unstable();
    ids.dedup();
    (f.req, Outcome { status, ids })
}

/// The outcome of every request of `reqs`, run in `order` with up to `inflight` transactions
/// in flight (each one's response phases run when the `inflight`-th after it started).
pub fn run(rs: &Arc<Ruleset>, reqs: &[native::RawRequest], order: &[usize], inflight: usize) -> Vec<Option<Outcome>> {
    let mut out = vec![None; reqs.len()];
    let mut queue = std::collections::VecDeque::new();
    for &n in order {
        queue.push_back(start(rs, reqs, n));
        while queue.len() >= inflight.max(1) {
            let Some(f) = queue.pop_front() else { break };
            let (n, o) = finish(f, reqs);
            if let Some(slot) = out.get_mut(n) {
                *slot = Some(o);
            }
        }
    }
    while let Some(f) = queue.pop_front() {
        let (n, o) = finish(f, reqs);
        if let Some(slot) = out.get_mut(n) {
            *slot = Some(o);
        }
    }
    out
}

/// `0..n` shuffled by a xorshift generator seeded with `seed` (deterministic).
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// The orders the differential runs: (name, order, transactions in flight).
pub fn orders(n: usize) -> Vec<(String, Vec<usize>, usize)> {
    let file: Vec<usize> = (0..n).collect();
    let reversed: Vec<usize> = (0..n).rev().collect();
    // Each request twice in a row, then the next: the replay's favourite case.
    let doubled: Vec<usize> = (0..n).flat_map(|i| [i, i]).collect();
    vec![
        ("file order".into(), file.clone(), 1),
        ("reversed".into(), reversed, 1),
        ("each twice".into(), doubled, 1),
        ("shuffled (seed 1)".into(), shuffled(n, 1), 1),
        ("shuffled (seed 2), 2 in flight".into(), shuffled(n, 2), 2),
        ("file order, 3 in flight".into(), file, 3),
    ]
}

/// A request that ended differently in the fast engine than in the reference.
#[derive(Debug)]
pub struct Difference {
    pub order: String,
    pub request: usize,
    pub fast: Option<Outcome>,
    pub reference: Option<Outcome>,
}

/// The rules of `text` compiled twice: in the fast speed and in the reference speed.
pub fn pair(name: &str, text: &str) -> Result<(Arc<Ruleset>, Arc<Ruleset>), String> {
    let fast = Ruleset::compile(name, text).map_err(|e| e.to_string())?;
    let mut reference = Ruleset::compile(name, text).map_err(|e| e.to_string())?;
    reference.settings.speed = Speed::Reference;
    Ok((Arc::new(fast), Arc::new(reference)))
}

/// Runs `reqs` through `fast` in every order of [`orders`] and once through `reference`
/// (the reference keeps nothing across requests: one order is every order); the differences.
pub fn compare(fast: &Arc<Ruleset>, reference: &Arc<Ruleset>, reqs: &[native::RawRequest]) -> Vec<Difference> {
    assert_eq!(reference.settings.speed, Speed::Reference, "the reference rule set runs in Speed::Reference");
    let want = run(reference, reqs, &(0..reqs.len()).collect::<Vec<_>>(), 1);
    let mut bad = Vec::new();
    for (name, order, inflight) in orders(reqs.len()) {
        let got = run(fast, reqs, &order, inflight);
        for (i, (g, w)) in got.into_iter().zip(&want).enumerate() {
            if g != *w {
                bad.push(Difference { order: name.clone(), request: i, fast: g, reference: w.clone() });
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(text: &str) -> (Arc<Ruleset>, Arc<Ruleset>) {
        super::pair("t", text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn get(foo: &str) -> native::RawRequest {
        native::parse(format!("GET /x HTTP/1.1\r\nHost: a\r\nX-Foo: {foo}\r\n\r\n").as_bytes()).expect("a request")
    }

    /// The case: a rule whose operator expands `%{rule.msg}`, which reads a header.
    /// `GET /x` with `X-Foo: GET` is 403 alone and must stay 403 right after the same request
    /// with `X-Foo: benign` (the differential finds it in the orders that put them in turn).
    #[test]
    fn fast_and_reference_agree_on_a_rule_reading_its_msg() {
        let (fast, reference) = pair("SecRuleEngine On\nSecRule REQUEST_METHOD \"@streq %{rule.msg}\" \"id:1,phase:1,deny,status:403,log,msg:'%{REQUEST_HEADERS.x-foo}'\"");
        let reqs = vec![get("benign"), get("GET"), get("benign"), get("GET")];
        let want = run(&reference, &reqs, &[0, 1, 2, 3], 1);
        assert_eq!(want[1].as_ref().map(|o| (o.status, o.ids.clone())), Some((403, vec![1])));
        assert_eq!(want[0].as_ref().map(|o| o.status), Some(200));
        let bad = compare(&fast, &reference, &reqs);
        assert!(bad.is_empty(), "{bad:?}");
    }

    /// The differential fails when the engines differ: a reference of other rules (a
    /// header blocked only there) makes every order report the request.
    #[test]
    fn a_difference_is_reported_in_every_order() {
        let (fast, _) = pair("SecRuleEngine On\nSecRule REQUEST_HEADERS:X-Foo \"@streq evil\" \"id:1,phase:1,deny,status:403\"");
        let (_, reference) = pair("SecRuleEngine On\nSecRule REQUEST_HEADERS:X-Foo \"@streq evil\" \"id:1,phase:1,deny,status:403\"\nSecRule REQUEST_HEADERS:X-Foo \"@streq other\" \"id:2,phase:1,deny,status:406\"");
        let reqs = vec![get("evil"), get("other"), get("ok")];
        let bad = compare(&fast, &reference, &reqs);
        assert_eq!(bad.len(), orders(3).len(), "{bad:?}");
        assert!(bad.iter().all(|d| d.request == 1));
    }

    /// Every order runs every request (and "each twice" runs each twice).
    #[test]
    fn orders_are_permutations() {
        for (name, mut o, k) in orders(50) {
            o.sort_unstable();
            o.dedup();
            assert_eq!(o, (0..50).collect::<Vec<_>>(), "{name}");
            assert!((1..=3).contains(&k));
        }
        assert_ne!(shuffled(50, 1), shuffled(50, 2));
    }
}
