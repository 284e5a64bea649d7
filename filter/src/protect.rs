//! Glue between the host and [`wafer::protect`]: client address, IP lists, rate limits and
//! behaviour scores in the state Envoy's workers share, response hardening, the request log.
//!
//! Nothing here runs when the plugin configuration enables no protection: the stream then
//! holds no [`StreamProtect`] and every hook is one `Option` check.
//!
//! The shared records (rate-limit buckets, behaviour scores, persistent collections) go
//! through [`Host::shared_update`]: every worker sees one store, and each update is atomic
//! (proxy-wasm: compare-and-swap on the VM's shared data, retried a few times; the dynamic
//! module: a lock on process memory). When an update fails the request passes (fail open) and
//! `wafer.protect.errors` counts it.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use wafer::protect::audit_log::{self, Record};
use wafer::protect::rate_limit::{self, Bucket};
use wafer::protect::scoring::{self, Score};
use wafer::protect::{IpVerdict, Protect, SPOOFABLE_FORWARDING};

use crate::host::{self, Bytes, Host, Level, Property, Side, Status, StreamHost};
use crate::sync::lock;

/// Counters and the collector buffer of one plugin configuration.
pub(crate) struct ProtectShared<H: Host> {
    ip_denied: Option<H::Counter>,
    ip_allowed: Option<H::Counter>,
    rate_limited: Option<H::Counter>,
    behaviour_blocked: Option<H::Counter>,
    clients_blocked: Option<H::Counter>,
    body_too_large: Option<H::Counter>,
    errors: Option<H::Counter>,
    log_sent: Option<H::Counter>,
    log_dropped: Option<H::Counter>,
    /// Lines waiting for the collector (newline-terminated JSON), and how many.
    buffer: Mutex<(Vec<u8>, usize)>,
    /// A batch is full and waits for the tick (see [`Host::flush_later`]).
    flush_due: AtomicBool,
}

fn inc<H: Host>(host: &H, counter: &Option<H::Counter>) {
    if let Some(c) = counter {
        host.increment(c, 1);
    }
}

impl<H: Host> ProtectShared<H> {
    pub(crate) fn define(host: &H, prefix: &str) -> ProtectShared<H> {
        let counter = |name: &str| host.define_counter(&format!("{prefix}.protect.{name}"));
        ProtectShared {
            ip_denied: counter("ip_denied"),
            ip_allowed: counter("ip_allowed"),
            rate_limited: counter("rate_limited"),
            behaviour_blocked: counter("behaviour_blocked"),
            clients_blocked: counter("clients_blocked"),
            body_too_large: counter("body_too_large"),
            errors: counter("errors"),
            log_sent: counter("log_lines_sent"),
            log_dropped: counter("log_lines_dropped"),
            buffer: Mutex::new((Vec::new(), 0)),
            flush_due: AtomicBool::new(false),
        }
    }
}

/// A local reply decided by a protection.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<String>,
    pub(crate) why: &'static str,
}

/// Per-stream protection state (exists only when some protection is on).
#[derive(Default)]
pub(crate) struct StreamProtect {
    client: Option<IpAddr>,
    /// `client_ip` is configured (trusted hops or a header): `client` may differ from the peer.
    from_config: bool,
    /// On the allow list: no protection and no rules.
    pub(crate) bypass: bool,
    /// Which protection answered this stream, if one did.
    answered: Option<&'static str>,
    body_bytes: u64,
    /// `x-request-id`, for log lines before the engine's transaction exists.
    request_id: String,
    /// Filled when the request log is on.
    record: Option<Box<Record>>,
}

/// Replaces a shared record with the first part of `f(current)`; returns the second part (of
/// the call whose record was written).
fn update<H: Host, T>(host: &H, key: &str, mut f: impl FnMut(Option<&[u8]>) -> (Bytes, T)) -> Result<T, Status> {
    let mut out = None;
    host.shared_update(key, &mut |prev| {
        let (new, o) = f(prev);
        out = Some(o);
        new
    })?;
    out.ok_or(Status::InternalFailure)
}

fn now_ms<H: Host>(host: &H) -> u64 {
    host.now_nanos() / 1_000_000
}

fn peer_address(io: &mut impl StreamHost) -> (Option<IpAddr>, String, u16) {
    let source = io.property(Property::SourceAddress).unwrap_or_default();
    let source = String::from_utf8_lossy(&source);
    let (ip, port) = host::split_address(&source);
    (wafer::protect::ip::parse_ip(ip), ip.to_string(), port)
}

fn ip_text(ip: Option<IpAddr>) -> String {
    ip.map(|i| i.to_string()).unwrap_or_else(|| "-".into())
}

/// Request headers: decides bypass / refusal before the rules run, and rewrites forwarding
/// headers. `headers` are the request's header pairs (pseudo-headers included).
pub(crate) fn request_headers<H: Host>(
    host: &H,
    io: &mut impl StreamHost,
    ps: &ProtectShared<H>,
    p: &Protect,
    headers: &[(String, Bytes)],
    unique_id: &str,
) -> (StreamProtect, Option<Reply>) {
    let mut st = StreamProtect { request_id: unique_id.to_string(), ..StreamProtect::default() };
    let (peer, peer_text, peer_port) = peer_address(io);
    let header_ip = p
        .client_ip_header
        .as_deref()
        .and_then(|name| headers.iter().find(|(n, _)| n == name))
        .map(|(_, v)| v.as_slice());
    let xff: Vec<&[u8]> = if p.trusted_hops > 0 || p.hardening.as_ref().is_some_and(|h| h.sanitize_forwarded) {
        headers.iter().filter(|(n, _)| n == "x-forwarded-for").map(|(_, v)| v.as_slice()).collect()
    } else {
        Vec::new()
    };
    st.client = p.client_address(peer, header_ip, &xff);
    st.from_config = p.trusted_hops > 0 || p.client_ip_header.is_some();
    let client = st.client;

    if p.request_log.is_some() {
        let get = |name: &str| {
            headers.iter().find(|(n, _)| n == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
        };
        let protocol = io.property(Property::RequestProtocol).map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
        let destination = io.property(Property::DestinationAddress).unwrap_or_default();
        let destination = String::from_utf8_lossy(&destination);
        let (host_ip, host_port) = host::split_address(&destination);
        st.record = Some(Box::new(Record {
            unix_secs: now_ms(host) / 1000,
            unique_id: unique_id.to_string(),
            client_ip: client.map(|c| c.to_string()).unwrap_or(peer_text),
            client_port: peer_port,
            host_ip: host_ip.to_string(),
            host_port,
            method: get(":method"),
            uri: get(":path"),
            http_version: protocol,
            request_headers: headers.to_vec(),
            action: "none",
            ..Record::default()
        }));
    }

    if let Some(lists) = &p.ip_lists {
        match lists.check(client) {
            IpVerdict::Allow => {
                inc(host, &ps.ip_allowed);
                st.bypass = true;
                return (st, None);
            }
            IpVerdict::Deny => {
                inc(host, &ps.ip_denied);
                return refuse(st, lists.deny_status, None, "ip_deny");
            }
            IpVerdict::Neither => {}
        }
    }

    if let Some(sc) = &p.scoring {
        let owner = wafer::protect::score_owner(client);
        let key = format!("wafer.sc.{}", rate_limit::slot(owner, sc.slots));
        let now = now_ms(host);
        if let Ok(Some(v)) = host.shared_get(&key) {
            if Score::decode(&v).is_some_and(|s| s.blocks(owner, now)) {
                inc(host, &ps.behaviour_blocked);
                return refuse(st, sc.status, None, "behaviour_block");
            }
        }
    }

    if let Some(rl) = &p.rate_limit {
        let find = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice()).unwrap_or_default();
        if let Some((index, rule)) = rl.rule_for(find(":authority"), find(":path")) {
            let owner = rule.owner(index, client, headers);
            let key = format!("wafer.rl.{}", rate_limit::slot(owner, rl.slots));
            let now = now_ms(host);
            let decision = update(host, &key, |prev| {
                let d = rate_limit::take(prev.and_then(Bucket::decode), owner, now, rule.limit);
                (d.state.encode().to_vec(), d)
            });
            match decision {
                Ok(d) if !d.allowed => {
                    inc(host, &ps.rate_limited);
                    return refuse(st, rl.status, Some(d.retry_after.to_string()), "rate_limit");
                }
                Ok(_) => {}
                Err(status) => {
                    inc(host, &ps.errors);
                    host.log(Level::Error, &format!("wafer: [{unique_id}] rate limit state not updated ({status:?}); request passes"));
                }
            }
        }
    }

    if let Some(h) = &p.hardening {
        if let Some(max) = h.max_request_body {
            let length = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            if length.is_some_and(|l| l > max) {
                inc(host, &ps.body_too_large);
                return refuse(st, 413, None, "body_limit");
            }
        }
        if h.sanitize_forwarded {
            sanitize_forwarding(io, p, headers, &xff, client);
        }
    }
    (st, None)
}

fn refuse(mut st: StreamProtect, status: u16, retry_after: Option<String>, why: &'static str) -> (StreamProtect, Option<Reply>) {
    st.answered = Some(why);
    (st, Some(Reply { status, retry_after, why }))
}

fn sanitize_forwarding(io: &mut impl StreamHost, p: &Protect, headers: &[(String, Bytes)], xff: &[&[u8]], client: Option<IpAddr>) {
    if let Some(client) = client {
        let want = wafer::protect::ip::sanitized_xff(client, xff, p.trusted_hops);
        let same = xff.len() == 1 && xff.first().is_some_and(|v| *v == want.as_bytes());
        if !same {
            io.set_header(Side::Request, "x-forwarded-for", Some(want.as_bytes()));
        }
    }
    if p.trusted_hops == 0 && p.client_ip_header.is_none() {
        for name in SPOOFABLE_FORWARDING {
            if headers.iter().any(|(n, _)| n == name) {
                io.set_header(Side::Request, name, None);
            }
        }
    }
}

impl StreamProtect {
    /// Logs the local reply of a protection; its body.
    pub(crate) fn announce<H: Host>(&self, host: &H, reply: &Reply, unique_id: &str) -> String {
        let unique_id = if unique_id.is_empty() { self.request_id.as_str() } else { unique_id };
        host.log(
            Level::Info,
            &format!("wafer: [{unique_id}] {} answered {} for client {}", reply.why, reply.status, ip_text(self.client)),
        );
        format!("Request refused by wafer ({}, id {unique_id}).\n", reply.why)
    }

    /// A request body chunk: `Some(reply)` once the body is over the size limit.
    /// `size` is the size of everything received so far when the host buffers the body,
    /// else this chunk's size (`cumulative` says which).
    pub(crate) fn request_body<H: Host>(&mut self, host: &H, ps: &ProtectShared<H>, p: &Protect, size: usize, cumulative: bool) -> Option<Reply> {
        let max = p.hardening.as_ref()?.max_request_body?;
        if self.answered.is_some() {
            return None;
        }
        self.body_bytes = if cumulative { size as u64 } else { self.body_bytes.saturating_add(size as u64) };
        if self.body_bytes > max {
            inc(host, &ps.body_too_large);
            self.answered = Some("body_limit");
            return Some(Reply { status: 413, retry_after: None, why: "body_limit" });
        }
        None
    }

    /// The client address when `client_ip` designates one other than the peer (trusted
    /// hops or a header): the rules' `REMOTE_ADDR` then.
    pub(crate) fn configured_client(&self) -> Option<String> {
        if self.from_config {
            self.client.map(|c| c.to_string())
        } else {
            None
        }
    }

    /// Keeps the engine's rule lines for the request log.
    pub(crate) fn keep_rule_lines(&mut self, lines: &[String]) {
        if let Some(r) = self.record.as_mut() {
            r.rule_lines.extend(lines.iter().cloned());
        }
    }

    /// Response headers (also of local replies): hardening, scoring, the log's response part.
    /// `waf_interrupted`: the rules interrupted this stream.
    pub(crate) fn response_headers<H: Host>(
        &mut self,
        host: &H,
        io: &mut impl StreamHost,
        ps: &ProtectShared<H>,
        p: &Protect,
        waf_interrupted: bool,
        unique_id: &str,
    ) {
        let need_status = p.scoring.is_some() || self.record.is_some();
        let status = if need_status { io.header(Side::Response, ":status").map(|v| host::parse_status(&v)).unwrap_or(0) } else { 0 };
        if let Some(h) = &p.hardening {
            for (name, value) in &h.response_headers {
                io.set_header(Side::Response, name, Some(value.as_bytes()));
            }
            if let Some(rule) = &h.cookie {
                harden_cookies(io, rule);
            }
        }
        if let (Some(sc), false) = (&p.scoring, self.bypass) {
            // Our own refusals of a blocked or denied client do not count again.
            let ours = matches!(self.answered, Some("behaviour_block" | "ip_deny"));
            if !ours && (waf_interrupted || (400..=499).contains(&status)) {
                let owner = wafer::protect::score_owner(self.client);
                let key = format!("wafer.sc.{}", rate_limit::slot(owner, sc.slots));
                let now = now_ms(host);
                match update(host, &key, |prev| {
                    let (s, started) = scoring::record(prev.and_then(Score::decode), owner, now, sc.policy);
                    (s.encode().to_vec(), started)
                }) {
                    Ok(true) => {
                        inc(host, &ps.clients_blocked);
                        host.log(
                            Level::Warn,
                            &format!(
                                "wafer: [{unique_id}] client {} blocked for {} s: {} 4xx answers or interruptions within {} s",
                                ip_text(self.client),
                                sc.policy.block_ms / 1000,
                                sc.policy.threshold,
                                sc.policy.window_ms / 1000
                            ),
                        );
                    }
                    Ok(false) => {}
                    Err(_) => inc(host, &ps.errors),
                }
            }
        }
        if let Some(r) = self.record.as_mut() {
            r.status = status;
            if let Some(h) = io.headers(Side::Response) {
                r.response_headers = h.to_owned_pairs();
            }
        }
    }

    /// End of stream: the request log line.
    pub(crate) fn log<H: Host>(&mut self, host: &H, ps: &ProtectShared<H>, p: &Protect, unique_id: &str, waf_interrupted: bool, engine_on: bool) {
        let (Some(cfg), Some(mut record)) = (&p.request_log, self.record.take()) else {
            return;
        };
        let interrupted = waf_interrupted || self.answered.is_some();
        if cfg.only_interrupted && !interrupted {
            return;
        }
        record.action = match (self.answered, waf_interrupted, self.bypass) {
            (Some(why), _, _) => why,
            (None, true, _) => "waf",
            (None, false, true) => "allow_list",
            _ => "none",
        };
        if record.unique_id.is_empty() {
            record.unique_id = unique_id.to_string();
        }
        let line = audit_log::to_json(&record, engine_on);
        if cfg.proxy_log {
            host.log(Level::Info, &line);
        }
        if let Some(c) = &cfg.collector {
            let full = {
                let mut buf = lock(&ps.buffer);
                if buf.0.len().saturating_add(line.len()) >= c.max_buffer_bytes {
                    inc(host, &ps.log_dropped);
                    return;
                }
                buf.0.extend_from_slice(line.as_bytes());
                buf.0.push(b'\n');
                buf.1 = buf.1.saturating_add(1);
                buf.1 >= c.batch_size
            };
            if full {
                ps.flush_due.store(true, Ordering::Relaxed);
                if !host.flush_later() {
                    flush(host, ps, p);
                }
            }
        }
    }
}

/// Whether a full batch waits for the tick.
pub(crate) fn flush_due<H: Host>(ps: &ProtectShared<H>) -> bool {
    ps.flush_due.load(Ordering::Relaxed)
}

/// Sends the waiting log lines to the collector (asynchronously: no request waits for it).
pub(crate) fn flush<H: Host>(host: &H, ps: &ProtectShared<H>, p: &Protect) {
    let Some(c) = p.request_log.as_ref().and_then(|l| l.collector.as_ref()) else {
        return;
    };
    ps.flush_due.store(false, Ordering::Relaxed);
    let (body, lines) = {
        let mut buf = lock(&ps.buffer);
        if buf.0.is_empty() {
            return;
        }
        (std::mem::take(&mut buf.0), std::mem::replace(&mut buf.1, 0))
    };
    let headers = [(":method", "POST"), (":path", c.path.as_str()), (":authority", c.authority.as_str()), ("content-type", "application/x-ndjson")];
    let (counter, result) = match host.http_call(&c.cluster, &headers, &body, Duration::from_millis(c.timeout_ms)) {
        Ok(()) => (&ps.log_sent, Ok(())),
        Err(status) => (&ps.log_dropped, Err(status)),
    };
    if let Some(id) = counter {
        host.increment(id, lines as u64);
    }
    if let Err(status) = result {
        host.log(
            Level::Error,
            &format!("wafer: request log: cannot reach collector cluster {:?} ({status:?}); {lines} lines dropped", c.cluster),
        );
    }
}

/// Adds the cookie rule's attributes to every `Set-Cookie` of the response.
fn harden_cookies(io: &mut impl StreamHost, rule: &wafer::protect::headers::CookieRule) {
    let Some(pairs) = io.headers(Side::Response).map(|h| h.to_owned_pairs()) else {
        return;
    };
    let cookies: Vec<&Bytes> = pairs.iter().filter(|(n, _)| n == "set-cookie").map(|(_, v)| v).collect();
    if cookies.is_empty() {
        return;
    }
    let rewritten: Vec<Option<Vec<u8>>> = cookies.iter().map(|v| rule.apply(v)).collect();
    if rewritten.iter().all(Option::is_none) {
        return;
    }
    io.set_header(Side::Response, "set-cookie", None);
    for (orig, new) in cookies.iter().zip(rewritten) {
        let value = new.as_deref().unwrap_or(orig.as_slice());
        io.add_header(Side::Response, "set-cookie", value);
    }
}

/// Slots per persistent collection (IP, USER, ...): bounds shared state like the rate limiter.
const COLLECTION_SLOTS: u32 = 65_536;

/// SecLang persistent collections (`initcol`) in the state the workers share: one record per
/// collection key, in one of [`COLLECTION_SLOTS`] slots per collection (the record names its
/// key, so a slot taken over by another key reads as empty).
pub(crate) struct SharedCollections<H: Host>(pub(crate) H);

fn collection_slot_key(collection: &str, key: &str) -> String {
    let h = rate_limit::fnv1a(&[collection.as_bytes(), key.as_bytes()]);
    format!("wafer.col.{collection}.{}", rate_limit::slot(h, COLLECTION_SLOTS))
}

impl<H: Host> wafer::tx::persist::CollectionStore for SharedCollections<H> {
    fn load(&self, collection: &str, key: &str) -> Option<Vec<u8>> {
        self.0.shared_get(&collection_slot_key(collection, key)).ok().flatten()
    }

    fn update(&self, collection: &str, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Vec<u8>) -> bool {
        self.0.shared_update(&collection_slot_key(collection, key), f).is_ok()
    }
}
