//! Glue between the host and [`wafer::protect`]: client address, IP lists, rate limits and
//! behaviour scores in shared data, response hardening, the request log.
//!
//! Nothing here runs when the plugin configuration enables no protection: the HTTP context
//! then holds no [`StreamProtect`] and every hook is one `Option` check.
//!
//! Shared data (`proxy_get_shared_data` / `proxy_set_shared_data`) is one store per Envoy
//! process and VM id, seen by every worker. Each record is updated with compare-and-swap:
//! read the value and its CAS token, compute, write with the token; when another worker
//! wrote in between the host answers `CasMismatch` and we start over (a few times, then
//! fail open: the request passes and `wafer.protect.errors` counts it).

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::time::Duration;

use crate::abi::hostcalls;
use crate::abi::types::{Bytes, LogLevel, MapType, MetricType, Status};
use wafer::protect::audit_log::{self, Record};
use wafer::protect::rate_limit::{self, Bucket};
use wafer::protect::scoring::{self, Score};
use wafer::protect::{IpVerdict, Protect, SPOOFABLE_FORWARDING};

use crate::host;

/// CAS attempts before giving up on one update.
const CAS_ATTEMPTS: usize = 8;

/// Counters and the collector buffer, per VM (one per worker).
pub(crate) struct ProtectShared {
    ip_denied: Option<u32>,
    ip_allowed: Option<u32>,
    rate_limited: Option<u32>,
    behaviour_blocked: Option<u32>,
    clients_blocked: Option<u32>,
    body_too_large: Option<u32>,
    errors: Option<u32>,
    log_sent: Option<u32>,
    log_dropped: Option<u32>,
    /// Lines waiting for the collector (newline-terminated JSON).
    buffer: RefCell<Vec<u8>>,
    buffered_lines: Cell<usize>,
}

fn counter(prefix: &str, name: &str) -> Option<u32> {
    hostcalls::define_metric(
        MetricType::Counter,
        &format!("{prefix}.protect.{name}"),
    )
    .ok()
}

fn inc(id: Option<u32>) {
    if let Some(id) = id {
        let _ = hostcalls::increment_metric(id, 1);
    }
}

impl ProtectShared {
    pub(crate) fn define(prefix: &str) -> ProtectShared {
        ProtectShared {
            ip_denied: counter(prefix, "ip_denied"),
            ip_allowed: counter(prefix, "ip_allowed"),
            rate_limited: counter(prefix, "rate_limited"),
            behaviour_blocked: counter(prefix, "behaviour_blocked"),
            clients_blocked: counter(prefix, "clients_blocked"),
            body_too_large: counter(prefix, "body_too_large"),
            errors: counter(prefix, "errors"),
            log_sent: counter(prefix, "log_lines_sent"),
            log_dropped: counter(prefix, "log_lines_dropped"),
            buffer: RefCell::new(Vec::new()),
            buffered_lines: Cell::new(0),
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

/// Reads a record, applies `f`, writes it back with compare-and-swap.
fn cas_update<T, const N: usize>(
    key: &str,
    mut f: impl FnMut(Option<&[u8]>) -> ([u8; N], T),
) -> Result<T, Status> {
    for _ in 0..CAS_ATTEMPTS {
        let (value, cas) = hostcalls::get_shared_data(key)?;
        let (new, out) = f(value.as_deref());
        match hostcalls::set_shared_data(key, Some(&new), cas) {
            Ok(()) => return Ok(out),
            Err(Status::CasMismatch) => continue,
            Err(status) => return Err(status),
        }
    }
    Err(Status::CasMismatch)
}

fn now_ms() -> u64 {
    hostcalls::current_time_nanos().map_or(0, |n| n / 1_000_000)
}

fn peer_address() -> (Option<IpAddr>, String, u16) {
    let source = host::property(host::SOURCE_ADDRESS).unwrap_or_default();
    let source = String::from_utf8_lossy(&source);
    let (ip, port) = host::split_address(&source);
    (wafer::protect::ip::parse_ip(ip), ip.to_string(), port)
}

fn ip_text(ip: Option<IpAddr>) -> String {
    ip.map(|i| i.to_string()).unwrap_or_else(|| "-".into())
}

/// Request headers: decides bypass / refusal before the rules run, and rewrites forwarding
/// headers. `headers` are the request's header pairs (pseudo-headers included).
pub(crate) fn request_headers(
    ps: &ProtectShared,
    p: &Protect,
    headers: &[(String, Bytes)],
    unique_id: &str,
) -> (StreamProtect, Option<Reply>) {
    let mut st = StreamProtect {
        request_id: unique_id.to_string(),
        ..StreamProtect::default()
    };
    let (peer, peer_text, peer_port) = peer_address();
    let header_ip = p
        .client_ip_header
        .as_deref()
        .and_then(|name| headers.iter().find(|(n, _)| n == name))
        .map(|(_, v)| v.as_slice());
    let xff: Vec<&[u8]> =
        if p.trusted_hops > 0 || p.hardening.as_ref().is_some_and(|h| h.sanitize_forwarded) {
            headers
                .iter()
                .filter(|(n, _)| n == "x-forwarded-for")
                .map(|(_, v)| v.as_slice())
                .collect()
        } else {
            Vec::new()
        };
    st.client = p.client_address(peer, header_ip, &xff);
    st.from_config = p.trusted_hops > 0 || p.client_ip_header.is_some();
    let client = st.client;

    if p.request_log.is_some() {
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        let protocol = host::property(host::REQUEST_PROTOCOL)
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default();
        let destination = host::property(host::DESTINATION_ADDRESS).unwrap_or_default();
        let destination = String::from_utf8_lossy(&destination);
        let (host_ip, host_port) = host::split_address(&destination);
        st.record = Some(Box::new(Record {
            unix_secs: now_ms() / 1000,
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
                inc(ps.ip_allowed);
                st.bypass = true;
                return (st, None);
            }
            IpVerdict::Deny => {
                inc(ps.ip_denied);
                return refuse(st, lists.deny_status, None, "ip_deny");
            }
            IpVerdict::Neither => {}
        }
    }

    if let Some(sc) = &p.scoring {
        let owner = wafer::protect::score_owner(client);
        let key = format!("wafer.sc.{}", rate_limit::slot(owner, sc.slots));
        let now = now_ms();
        if let Ok((Some(v), _)) = hostcalls::get_shared_data(&key) {
            if Score::decode(&v).is_some_and(|s| s.blocks(owner, now)) {
                inc(ps.behaviour_blocked);
                return refuse(st, sc.status, None, "behaviour_block");
            }
        }
    }

    if let Some(rl) = &p.rate_limit {
        let authority = headers
            .iter()
            .find(|(n, _)| n == ":authority")
            .map(|(_, v)| v.as_slice())
            .unwrap_or_default();
        let path = headers
            .iter()
            .find(|(n, _)| n == ":path")
            .map(|(_, v)| v.as_slice())
            .unwrap_or_default();
        if let Some((index, rule)) = rl.rule_for(authority, path) {
            let owner = rule.owner(index, client, headers);
            let key = format!("wafer.rl.{}", rate_limit::slot(owner, rl.slots));
            let now = now_ms();
            let decision = cas_update(&key, |prev| {
                let d = rate_limit::take(prev.and_then(Bucket::decode), owner, now, rule.limit);
                (d.state.encode(), d)
            });
            match decision {
                Ok(d) if !d.allowed => {
                    inc(ps.rate_limited);
                    return refuse(st, rl.status, Some(d.retry_after.to_string()), "rate_limit");
                }
                Ok(_) => {}
                Err(status) => {
                    inc(ps.errors);
                    host::log(LogLevel::Error, &format!("wafer: [{unique_id}] rate limit state not updated ({status:?}); request passes"));
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
                inc(ps.body_too_large);
                return refuse(st, 413, None, "body_limit");
            }
        }
        if h.sanitize_forwarded {
            sanitize_forwarding(p, headers, &xff, client);
        }
    }
    (st, None)
}

fn refuse(
    mut st: StreamProtect,
    status: u16,
    retry_after: Option<String>,
    why: &'static str,
) -> (StreamProtect, Option<Reply>) {
    st.answered = Some(why);
    (
        st,
        Some(Reply {
            status,
            retry_after,
            why,
        }),
    )
}

fn sanitize_forwarding(
    p: &Protect,
    headers: &[(String, Bytes)],
    xff: &[&[u8]],
    client: Option<IpAddr>,
) {
    if let Some(client) = client {
        let want = wafer::protect::ip::sanitized_xff(client, xff, p.trusted_hops);
        let same = xff.len() == 1 && xff.first().is_some_and(|v| *v == want.as_bytes());
        if !same {
            let _ = hostcalls::set_map_value(
                MapType::HttpRequestHeaders,
                "x-forwarded-for",
                Some(&want),
            );
        }
    }
    if p.trusted_hops == 0 && p.client_ip_header.is_none() {
        for name in SPOOFABLE_FORWARDING {
            if headers.iter().any(|(n, _)| n == name) {
                let _ = hostcalls::remove_map_value(MapType::HttpRequestHeaders, name);
            }
        }
    }
}

impl StreamProtect {
    /// Sends the local reply of a protection; false when the host refused it.
    pub(crate) fn send(&self, reply: &Reply, unique_id: &str) -> bool {
        let unique_id = if unique_id.is_empty() {
            self.request_id.as_str()
        } else {
            unique_id
        };
        host::log(
            LogLevel::Info,
            &format!(
                "wafer: [{unique_id}] {} answered {} for client {}",
                reply.why,
                reply.status,
                ip_text(self.client)
            ),
        );
        let mut headers = vec![("content-type", "text/plain")];
        if let Some(r) = &reply.retry_after {
            headers.push(("retry-after", r.as_str()));
        }
        let body = format!(
            "Request refused by wafer ({}, id {unique_id}).\n",
            reply.why
        );
        host::send_local_reply(u32::from(reply.status), &headers, body.as_bytes())
    }

    /// A request body chunk: `Some(reply)` once the body is over the size limit.
    /// `total` is the size of everything received so far when the host buffers the body,
    /// else this chunk's size (`cumulative` says which).
    pub(crate) fn request_body(
        &mut self,
        ps: &ProtectShared,
        p: &Protect,
        size: usize,
        cumulative: bool,
    ) -> Option<Reply> {
        let max = p.hardening.as_ref()?.max_request_body?;
        if self.answered.is_some() {
            return None;
        }
        self.body_bytes = if cumulative {
            size as u64
        } else {
            self.body_bytes.saturating_add(size as u64)
        };
        if self.body_bytes > max {
            inc(ps.body_too_large);
            self.answered = Some("body_limit");
            return Some(Reply {
                status: 413,
                retry_after: None,
                why: "body_limit",
            });
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
    pub(crate) fn response_headers(
        &mut self,
        ps: &ProtectShared,
        p: &Protect,
        waf_interrupted: bool,
        unique_id: &str,
    ) {
        let need_status = p.scoring.is_some() || self.record.is_some();
        let status = if need_status {
            hostcalls::get_map_value_bytes(MapType::HttpResponseHeaders, ":status")
                .ok()
                .flatten()
                .map(|v| host::parse_status(&v))
                .unwrap_or(0)
        } else {
            0
        };
        if let Some(h) = &p.hardening {
            for (name, value) in &h.response_headers {
                let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, Some(value));
            }
            if let Some(rule) = &h.cookie {
                harden_cookies(rule);
            }
        }
        if let (Some(sc), false) = (&p.scoring, self.bypass) {
            // Our own refusals of a blocked or denied client do not count again.
            let ours = matches!(self.answered, Some("behaviour_block" | "ip_deny"));
            if !ours && (waf_interrupted || (400..=499).contains(&status)) {
                let owner = wafer::protect::score_owner(self.client);
                let key = format!("wafer.sc.{}", rate_limit::slot(owner, sc.slots));
                let now = now_ms();
                match cas_update(&key, |prev| {
                    let (s, started) =
                        scoring::record(prev.and_then(Score::decode), owner, now, sc.policy);
                    (s.encode(), started)
                }) {
                    Ok(true) => {
                        inc(ps.clients_blocked);
                        host::log(
                            LogLevel::Warn,
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
                    Err(_) => inc(ps.errors),
                }
            }
        }
        if let Some(r) = self.record.as_mut() {
            r.status = status;
            if let Some(h) = host::header_pairs(MapType::HttpResponseHeaders) {
                r.response_headers = h;
            }
        }
    }

    /// End of stream: the request log line.
    pub(crate) fn log(
        &mut self,
        ps: &ProtectShared,
        p: &Protect,
        unique_id: &str,
        waf_interrupted: bool,
        engine_on: bool,
    ) {
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
            host::log(LogLevel::Info, &line);
        }
        if let Some(c) = &cfg.collector {
            let Ok(mut buf) = ps.buffer.try_borrow_mut() else {
                return;
            };
            if buf.len().saturating_add(line.len()) >= c.max_buffer_bytes {
                inc(ps.log_dropped);
                return;
            }
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            ps.buffered_lines
                .set(ps.buffered_lines.get().saturating_add(1));
            let full = ps.buffered_lines.get() >= c.batch_size;
            drop(buf);
            if full {
                flush(ps, p);
            }
        }
    }
}

/// Sends the waiting log lines to the collector (asynchronously: no request waits for it).
pub(crate) fn flush(ps: &ProtectShared, p: &Protect) {
    let Some(c) = p.request_log.as_ref().and_then(|l| l.collector.as_ref()) else {
        return;
    };
    let Ok(mut buf) = ps.buffer.try_borrow_mut() else {
        return;
    };
    if buf.is_empty() {
        return;
    }
    let body = std::mem::take(&mut *buf);
    let lines = ps.buffered_lines.replace(0);
    drop(buf);
    let headers = [
        (":method", "POST"),
        (":path", c.path.as_str()),
        (":authority", c.authority.as_str()),
        ("content-type", "application/x-ndjson"),
    ];
    match hostcalls::dispatch_http_call(&c.cluster, &headers, &body, Duration::from_millis(c.timeout_ms)) {
        Ok(_) => {
            if let Some(id) = ps.log_sent {
                let _ = hostcalls::increment_metric(id, lines as i64);
            }
        }
        Err(status) => {
            if let Some(id) = ps.log_dropped {
                let _ = hostcalls::increment_metric(id, lines as i64);
            }
            host::log(LogLevel::Error, &format!("wafer: request log: cannot reach collector cluster {:?} ({status:?}); {lines} lines dropped", c.cluster));
        }
    }
}

/// Adds the cookie rule's attributes to every `Set-Cookie` of the response.
fn harden_cookies(rule: &wafer::protect::headers::CookieRule) {
    let Some(pairs) = host::header_pairs(MapType::HttpResponseHeaders) else {
        return;
    };
    let cookies: Vec<&Bytes> = pairs
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v)
        .collect();
    if cookies.is_empty() {
        return;
    }
    let rewritten: Vec<Option<Vec<u8>>> = cookies.iter().map(|v| rule.apply(v)).collect();
    if rewritten.iter().all(Option::is_none) {
        return;
    }
    let _ = hostcalls::remove_map_value(MapType::HttpResponseHeaders, "set-cookie");
    for (orig, new) in cookies.iter().zip(rewritten) {
        let value = new.as_deref().unwrap_or(orig.as_slice());
        let _ = hostcalls::add_map_value_bytes(MapType::HttpResponseHeaders, "set-cookie", value);
    }
}

/// Slots per persistent collection (IP, USER, ...): bounds shared data like the rate limiter.
const COLLECTION_SLOTS: u32 = 65_536;

/// SecLang persistent collections (`initcol`) in shared data: one record per collection key,
/// in one of [`COLLECTION_SLOTS`] slots per collection (the record names its key, so a slot
/// taken over by another key reads as empty). Updates are compare-and-swap loops.
pub(crate) struct SharedCollections;

fn collection_slot_key(collection: &str, key: &str) -> String {
    let h = rate_limit::fnv1a(&[collection.as_bytes(), key.as_bytes()]);
    format!(
        "wafer.col.{collection}.{}",
        rate_limit::slot(h, COLLECTION_SLOTS)
    )
}

impl wafer::tx::persist::CollectionStore for SharedCollections {
    fn load(&self, collection: &str, key: &str) -> Option<Vec<u8>> {
        hostcalls::get_shared_data(&collection_slot_key(collection, key))
            .ok()
            .and_then(|(v, _)| v)
    }

    fn update(
        &self,
        collection: &str,
        key: &str,
        f: &mut dyn FnMut(Option<&[u8]>) -> Vec<u8>,
    ) -> bool {
        let slot = collection_slot_key(collection, key);
        for _ in 0..CAS_ATTEMPTS {
            let Ok((value, cas)) = hostcalls::get_shared_data(&slot) else {
                return false;
            };
            let new = f(value.as_deref());
            match hostcalls::set_shared_data(&slot, Some(&new), cas) {
                Ok(()) => return true,
                Err(Status::CasMismatch) => continue,
                Err(_) => return false,
            }
        }
        false
    }
}
