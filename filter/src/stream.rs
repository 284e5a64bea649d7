//! One HTTP stream: owns the engine's [`Transaction`] and drives its five phases.
//!
//! State per stream, in callback order:
//!
//! 1. request headers: pick the rule set by `:authority` (none: the stream passes untouched),
//!    feed connection, URI and headers, run phase 1. Without a body to inspect (end of stream,
//!    or body access off) phase 2 runs right away.
//! 2. request body: the body callbacks answer `Action::Pause` (Envoy buffers and holds the
//!    data) and feed only the bytes not fed before; phase 2 runs at end of stream, at the
//!    trailers, or as soon as the engine says its body limit is reached ([`BodyAppend::Full`]);
//!    then everything buffered moves on.
//! 3. and 4. the same for the response.
//! 5. the stream's end: logging phase.
//!
//! Headers always continue, even when the body is still to be inspected: Envoy's proxy-wasm
//! host turns a paused header callback into "stop all iteration", which also stops the body
//! callbacks of this filter, so the stream would hang (the dynamic module does the same, so
//! that both builds answer alike). Consequences:
//!
//! - the upstream receives the request headers before phase 2 has run; when phase 2 blocks,
//!   Envoy resets that upstream request (the upstream never gets the body);
//! - the client receives the response headers before phase 4 has run; when phase 4 blocks,
//!   Envoy can no longer send a local reply and resets the stream instead (the client sees the
//!   connection close before the body: nothing of the body leaks).
//!
//! An interruption sends a local reply and marks the side it happened on. A request-side
//! local reply travels back through this filter's response callbacks, which then let it pass;
//! after a response-side one the upstream response stays held.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use wafer::{BodyAppend, InterruptAction, Interruption, Transaction};

use crate::host::{self, Action, HeaderMap, Host, Level, Property, Side, StreamHost};
use crate::root::Shared;

/// The most of a held body read from the host at once (Envoy's reads are 16 KiB to 1 MiB).
const BODY_SLICE: usize = 64 * 1024;

/// Where a body stands for the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// Not collected (no body, body access off, or not reached yet).
    Idle,
    /// Being collected (the host holds it); `fed` bytes already given to the engine.
    Collecting { fed: usize },
    /// Its phase has run.
    Done,
}

/// One HTTP stream of a plugin configuration (`None`: no configuration, every callback
/// continues). Each callback takes the host's services for the stream (`io`).
pub struct Stream<H: Host> {
    /// The host's id of the stream, part of the ids made for requests without one.
    context_id: u64,
    shared: Option<Arc<Shared<H>>>,
    /// `None` when there is no rule set for this stream: every callback continues.
    tx: Option<Transaction>,
    /// `HTTP/1.1` unless the host said otherwise (no allocation for the default).
    protocol: Cow<'static, str>,
    request_body: Body,
    response_body: Body,
    interrupted: Option<Side>,
    /// Protections of this stream; `None` (no cost) when the configuration enables none.
    protect: Option<Box<crate::protect::StreamProtect>>,
}

impl<H: Host> Stream<H> {
    pub fn new(context_id: u64, shared: Option<Arc<Shared<H>>>) -> Stream<H> {
        Stream {
            context_id,
            shared,
            tx: None,
            protocol: Cow::Borrowed(""),
            request_body: Body::Idle,
            response_body: Body::Idle,
            interrupted: None,
            protect: None,
        }
    }

    /// Makes an ended stream's state (see [`Stream::release`]) stream `context_id`'s.
    pub fn reuse(&mut self, context_id: u64, shared: Option<Arc<Shared<H>>>) {
        self.context_id = context_id;
        self.shared = shared;
    }

    /// Ends the stream: its transaction (whose parts go to the next one), protections and
    /// configuration are dropped; what is left is the state of a new stream.
    /// (Every field is named, so a new one cannot be forgotten here.)
    pub fn release(&mut self) {
        let Stream { context_id: _, shared, tx, protocol, request_body, response_body, interrupted, protect } = self;
        *tx = None;
        *shared = None;
        *protocol = Cow::Borrowed("");
        *request_body = Body::Idle;
        *response_body = Body::Idle;
        *interrupted = None;
        *protect = None;
    }

    /// The stream's unique id (see [`stream_id`]).
    fn id(&self) -> &str {
        stream_id(&self.tx)
    }

    fn count_error(&self, what: &str) {
        if let Some(shared) = &self.shared {
            shared.host.log(Level::Error, &format!("wafer: [{}] {what}", self.id()));
            shared.metrics.error(&shared.host);
        }
    }

    /// Writes the engine's log lines (rules with `log` that matched) to Envoy's log.
    fn flush_logs(&mut self) {
        if let (Some(tx), Some(shared)) = (self.tx.as_mut(), &self.shared) {
            let lines = tx.take_log_lines();
            for line in &lines {
                shared.host.log(Level::Warn, line);
            }
            if let Some(p) = self.protect.as_mut() {
                p.keep_rule_lines(&lines);
            }
        }
    }

    /// Logs, then turns the result of a phase into the callback's answer.
    fn after_phase(&mut self, io: &mut impl StreamHost, side: Side, interruption: Option<Interruption>) -> Action {
        self.flush_logs();
        match interruption {
            Some(interruption) => self.interrupt(io, side, &interruption),
            None => Action::Continue,
        }
    }

    fn interrupt(&mut self, io: &mut impl StreamHost, side: Side, interruption: &Interruption) -> Action {
        self.interrupted = Some(side);
        let Some(shared) = self.shared.clone() else { return Action::Pause };
        shared.metrics.interruption(&shared.host, interruption.rule_id, interruption.phase);
        let mut headers = vec![("content-type", "text/plain")];
        let (status, body) = match &interruption.action {
            InterruptAction::Redirect(location) => {
                headers.push(("location", location.as_str()));
                let status = match interruption.status {
                    s @ 300..=399 => s,
                    _ => 302,
                };
                (status, String::new())
            }
            // An HTTP filter cannot close the client connection (proxy-wasm has no call for
            // it): a drop is answered like a deny.
            InterruptAction::Deny | InterruptAction::Drop => {
                let status = match interruption.status {
                    s @ 200..=599 => s,
                    _ => 403,
                };
                (
                    status,
                    format!("Request blocked by wafer (id {}).\n", self.id()),
                )
            }
        };
        let rule = interruption
            .rule_id
            .map(|id| id.to_string())
            .unwrap_or_default();
        shared.host.log(Level::Info, &format!("wafer: [{}] interrupted in {side:?} with status {status} (rule {rule})", self.id()));
        self.reply(io, side, status, &headers, body.as_bytes());
        // Hold the stream either way: fail closed.
        Action::Pause
    }

    /// A protection's local reply (the request's side).
    fn protection_reply(&mut self, io: &mut impl StreamHost, reply: &crate::protect::Reply, unique_id: &str) {
        let (Some(shared), Some(state)) = (self.shared.clone(), self.protect.as_ref()) else { return };
        let body = state.announce(&shared.host, reply, unique_id);
        let mut headers = vec![("content-type", "text/plain")];
        if let Some(r) = &reply.retry_after {
            headers.push(("retry-after", r.as_str()));
        }
        self.reply(io, Side::Request, reply.status, &headers, body.as_bytes());
    }

    /// Sends a local reply (counting a refusal of the host). A request-side reply gets the
    /// response-side protections first when the host sends it past this filter's response
    /// callbacks (see [`Host::replies_skip_filter`]).
    fn reply(&mut self, io: &mut impl StreamHost, side: Side, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        let skips = self.shared.as_ref().is_some_and(|s| s.host.replies_skip_filter());
        let sent = if side == Side::Request && self.protect.is_some() && skips {
            let mut reply = LocalReply { io, status, headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect() };
            self.protect_response_headers(&mut reply);
            let LocalReply { io, headers, .. } = reply;
            let headers: Vec<(&str, Cow<'_, str>)> = headers.iter().map(|(n, v)| (n.as_str(), String::from_utf8_lossy(v))).collect();
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_ref())).collect();
            io.send_reply(status, &headers, body)
        } else {
            io.send_reply(status, headers, body)
        };
        if !sent {
            self.count_error("could not send the local reply");
        }
    }

    /// A unique id for a request without `x-request-id`: the configuration's counter plus the
    /// time, so ids from different workers (wasm VMs) do not collide.
    fn fallback_id(&self, shared: &Shared<H>) -> String {
        let n = shared.next_id.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let nanos = shared.host.now_nanos();
        format!("wafer-{nanos:x}-{n:x}-{:x}", self.context_id)
    }

    fn finish_request_body(&mut self, io: &mut impl StreamHost) -> Action {
        self.request_body = Body::Done;
        let Some(tx) = self.tx.as_mut() else {
            return Action::Continue;
        };
        let interruption = tx.process_request_body();
        self.after_phase(io, Side::Request, interruption)
    }

    fn finish_response_body(&mut self, io: &mut impl StreamHost) -> Action {
        self.response_body = Body::Done;
        let Some(tx) = self.tx.as_mut() else {
            return Action::Continue;
        };
        let interruption = tx.process_response_body();
        self.after_phase(io, Side::Response, interruption)
    }

    /// Where the body of `side` stands.
    fn body(&mut self, side: Side) -> &mut Body {
        match side {
            Side::Request => &mut self.request_body,
            Side::Response => &mut self.response_body,
        }
    }

    /// Feeds the new part of a held body, read from the host in slices of at most
    /// [`BODY_SLICE`] (what the VM holds of it besides the engine's copy); `Some(action)`
    /// ends the collection.
    fn feed_body(&mut self, io: &mut impl StreamHost, side: Side, body_size: usize) -> Option<Action> {
        loop {
            let Body::Collecting { fed } = *self.body(side) else {
                return Some(Action::Continue);
            };
            let end = body_size.min(fed.saturating_add(BODY_SLICE));
            match read_new_body(io, side, fed, end) {
                Ok(Some(chunk)) if !chunk.is_empty() => {
                    if let Some(action) = self.feed_chunk(io, side, &chunk) {
                        return Some(action);
                    }
                }
                Ok(_) => return None,
                Err(status) => {
                    // The host could not give the body (the VM's memory could not grow, or
                    // another failure): the stream is refused, not passed half inspected.
                    self.count_error(&format!("cannot read the {side:?} body: {status:?}"));
                    *self.body(side) = Body::Done;
                    let (status, phase) = match side {
                        Side::Request => (413, 2),
                        Side::Response => (500, 4),
                    };
                    let refusal = Interruption { status, rule_id: None, phase, action: InterruptAction::Deny };
                    return Some(self.interrupt(io, side, &refusal));
                }
            }
        }
    }

    /// Gives the engine the next `chunk` of a held body; `Some(action)` ends the collection.
    fn feed_chunk(&mut self, io: &mut impl StreamHost, side: Side, chunk: &[u8]) -> Option<Action> {
        let Body::Collecting { fed } = *self.body(side) else {
            return Some(Action::Continue);
        };
        *self.body(side) = Body::Collecting { fed: fed.saturating_add(chunk.len()) };
        let tx = self.tx.as_mut()?;
        let appended = match side {
            Side::Request => tx.append_request_body(chunk),
            Side::Response => tx.append_response_body(chunk),
        };
        match appended {
            BodyAppend::Continue => None,
            BodyAppend::Full => Some(self.finish_body(io, side)),
            BodyAppend::Interrupt(interruption) => {
                *self.body(side) = Body::Done;
                self.flush_logs();
                Some(self.interrupt(io, side, &interruption))
            }
        }
    }

    fn finish_body(&mut self, io: &mut impl StreamHost, side: Side) -> Action {
        match side {
            Side::Request => self.finish_request_body(io),
            Side::Response => self.finish_response_body(io),
        }
    }

    /// Body callback of either side.
    fn on_body(&mut self, io: &mut impl StreamHost, side: Side, body_size: usize, end_of_stream: bool) -> Action {
        if self.interrupted.is_some() {
            return self.after_interruption(side);
        }
        let state = match side {
            Side::Request => self.request_body,
            Side::Response => self.response_body,
        };
        if !matches!(state, Body::Collecting { .. }) {
            return Action::Continue;
        }
        if let Some(action) = self.feed_body(io, side, body_size) {
            return action;
        }
        if end_of_stream {
            self.finish_body(io, side)
        } else {
            Action::Pause
        }
    }

    /// Trailers end a body: run its phase if it was being collected.
    fn on_trailers(&mut self, io: &mut impl StreamHost, side: Side) -> Action {
        if self.interrupted.is_some() {
            return self.after_interruption(side);
        }
        let state = match side {
            Side::Request => self.request_body,
            Side::Response => self.response_body,
        };
        match state {
            Body::Collecting { .. } => self.finish_body(io, side),
            Body::Idle | Body::Done => Action::Continue,
        }
    }

    /// Body size limit of the protections (`hardening.max_request_body_bytes`).
    fn protect_request_body(&mut self, io: &mut impl StreamHost, body_size: usize) -> Option<Action> {
        let shared = self.shared.clone()?;
        let (p, ps) = (shared.waf.protect()?, shared.protect.as_ref()?);
        // While the engine collects, the host buffers and reports the total so far.
        let cumulative = matches!(self.request_body, Body::Collecting { .. });
        let state = self.protect.as_mut()?;
        let reply = state.request_body(&shared.host, ps, p, body_size, cumulative)?;
        self.interrupted = Some(Side::Request);
        let id = stream_id(&self.tx).to_string();
        self.protection_reply(io, &reply, &id);
        Some(Action::Pause)
    }

    /// Response hardening, behaviour scoring and the log's response part.
    fn protect_response_headers(&mut self, io: &mut impl StreamHost) {
        let Some(shared) = self.shared.clone() else { return };
        let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) else { return };
        let waf = self.tx.as_ref().is_some_and(|tx| tx.interruption().is_some());
        if let Some(state) = self.protect.as_mut() {
            state.response_headers(&shared.host, io, ps, p, waf, stream_id(&self.tx));
        }
    }

    /// A callback after the local reply was sent: let the local reply pass (it runs through
    /// our response callbacks when sent on the request side), hold everything else.
    fn after_interruption(&self, side: Side) -> Action {
        match (self.interrupted, side) {
            (Some(Side::Request), Side::Response) => Action::Continue,
            _ => Action::Pause,
        }
    }
}

/// The id of a stream: its transaction's (which owns it); empty without one.
fn stream_id(tx: &Option<Transaction>) -> &str {
    tx.as_ref().map_or("", Transaction::unique_id)
}

/// The part of a held body the engine has not been given yet: `[fed, body_size)` of what the
/// host holds (with `Action::Pause` a body callback reports the size of everything held so
/// far). `Ok(None)` when nothing is new.
fn read_new_body(io: &mut impl StreamHost, side: Side, fed: usize, body_size: usize) -> Result<Option<host::Bytes>, host::Status> {
    if body_size <= fed {
        return Ok(None);
    }
    io.body(side, fed, body_size - fed)
}

/// A local reply on its way out, as the response side of the stream (see [`Stream::reply`]):
/// its status and headers are the response's; everything else is the stream's.
struct LocalReply<'a, S: StreamHost> {
    io: &'a mut S,
    status: u16,
    headers: Vec<(String, host::Bytes)>,
}

impl<S: StreamHost> StreamHost for LocalReply<'_, S> {
    fn headers(&mut self, side: Side) -> Option<HeaderMap> {
        if side == Side::Request {
            return self.io.headers(side);
        }
        let status = self.status.to_string();
        let mut pairs: Vec<(&[u8], &[u8])> = vec![(b":status", status.as_bytes())];
        pairs.extend(self.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_slice())));
        HeaderMap::from_block(wafer::body::pairs::block_of(&pairs))
    }

    fn header(&mut self, side: Side, name: &str) -> Option<host::Bytes> {
        match (side, name) {
            (Side::Request, _) => self.io.header(side, name),
            (Side::Response, ":status") => Some(self.status.to_string().into_bytes()),
            (Side::Response, _) => self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        }
    }

    fn set_header(&mut self, side: Side, name: &str, value: Option<&[u8]>) -> bool {
        if side == Side::Request {
            return self.io.set_header(side, name, value);
        }
        self.headers.retain(|(n, _)| n != name);
        if let Some(v) = value {
            self.headers.push((name.to_string(), v.to_vec()));
        }
        true
    }

    fn add_header(&mut self, side: Side, name: &str, value: &[u8]) -> bool {
        if side == Side::Request {
            return self.io.add_header(side, name, value);
        }
        self.headers.push((name.to_string(), value.to_vec()));
        true
    }

    fn body(&mut self, side: Side, start: usize, max: usize) -> Result<Option<host::Bytes>, host::Status> {
        self.io.body(side, start, max)
    }

    fn property(&mut self, property: Property) -> Option<host::Bytes> {
        self.io.property(property)
    }

    fn send_reply(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> bool {
        self.io.send_reply(status, headers, body)
    }
}

/// Where a request's header block has what the filter reads itself.
#[derive(Default)]
struct RequestScan {
    authority: Option<Range<usize>>,
    path: Option<Range<usize>>,
    method: Option<Range<usize>>,
    request_id: Option<Range<usize>>,
    has_host: bool,
    has_length: bool,
    has_te: bool,
}

impl RequestScan {
    fn of(block: &[u8]) -> RequestScan {
        let mut scan = RequestScan::default();
        for (name, value) in wafer::body::pairs::block_spans(block) {
            match block.get(name).unwrap_or_default() {
                b":authority" => scan.authority = Some(value),
                b":path" => scan.path = Some(value),
                b":method" => scan.method = Some(value),
                b"x-request-id" => scan.request_id = Some(value),
                b"host" => scan.has_host = true,
                b"content-length" => scan.has_length = true,
                b"transfer-encoding" => scan.has_te = true,
                _ => {}
            }
        }
        scan
    }

    fn authority<'a>(&self, h: &'a HeaderMap) -> Option<&'a [u8]> {
        h.bytes().get(self.authority.clone()?)
    }

    fn path<'a>(&self, h: &'a HeaderMap) -> Option<&'a [u8]> {
        h.bytes().get(self.path.clone()?)
    }

    fn method<'a>(&self, h: &'a HeaderMap) -> &'a [u8] {
        self.method.clone().and_then(|r| h.bytes().get(r)).unwrap_or_default()
    }

    fn request_id<'a>(&self, h: &'a HeaderMap) -> &'a [u8] {
        self.request_id.clone().and_then(|r| h.bytes().get(r)).unwrap_or_default()
    }

    /// A body follows whose length no header gives: Envoy de-chunked it.
    fn chunked_guess(&self, end_of_stream: bool) -> bool {
        !end_of_stream && !self.has_length && !self.has_te
    }
}

/// The stream callbacks, in the order Envoy calls them (see the module docs).
impl<H: Host> Stream<H> {
    pub fn on_request_headers(&mut self, io: &mut impl StreamHost, end_of_stream: bool) -> Action {
        let Some(shared) = self.shared.clone() else {
            return Action::Continue;
        };
        let Some(headers) = io.headers(Side::Request) else {
            self.count_error("cannot read the request headers");
            return Action::Continue;
        };
        let scan = RequestScan::of(headers.bytes());
        // Test-only switch (`test_trap_header`, unset in any real configuration): a panic, so
        // the e2e tests can watch what a panic does: the wasm module (panic = "abort") traps
        // and Envoy's failure_policy acts; the dynamic module catches it and fails closed.
        if let Some(trap) = shared.waf.test_trap_header() {
            if headers.get(trap.as_bytes()).is_some() {
                #[allow(clippy::panic)]
                {
                    panic!("wafer: test_trap_header {trap} present");
                }
            }
        }
        if let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) {
            let id = host::text(scan.request_id(&headers));
            let (state, reply) = crate::protect::request_headers(&shared.host, io, ps, p, &headers.to_owned_pairs(), &id);
            let bypass = self.protect.insert(Box::new(state)).bypass;
            if let Some(reply) = reply {
                self.interrupted = Some(Side::Request);
                self.protection_reply(io, &reply, &id);
                return Action::Pause;
            }
            if bypass {
                return Action::Continue;
            }
        }
        let Some(ruleset) = shared.waf.ruleset_for(&host::text(scan.authority(&headers).unwrap_or_default())) else {
            return Action::Continue;
        };
        shared.metrics.transaction();
        self.begin(io, &shared, ruleset, headers, &scan, end_of_stream)
    }

    /// The request's transaction: connection, URI and headers, phase 1, and phase 2 when no
    /// body is to be inspected.
    fn begin(&mut self, io: &mut impl StreamHost, shared: &Shared<H>, ruleset: Arc<wafer::Ruleset>, headers: HeaderMap, scan: &RequestScan, end_of_stream: bool) -> Action {
        let request_id = scan.request_id(&headers);
        let unique_id = if request_id.is_empty() { Cow::Owned(self.fallback_id(shared)) } else { host::text(request_id) };
        let persistent = ruleset.uses_persistent_collections();
        let (connection, server) = (ruleset.mentions.connection, ruleset.mentions.server);
        let wants_protocol = ruleset.mentions.protocol;
        // Made in place in the stream's context (a transaction is ~1 KB: not moved there after).
        let tx = self.tx.insert(Transaction::with_id(ruleset, &unique_id));
        tx.set_time_ms(shared.host.now_nanos() / 1_000_000);
        if persistent {
            tx.set_collection_store(shared.collections.clone());
        }

        // Host calls saved per request when no rule reads the addresses (or the server's).
        if connection {
            let source = io.property(Property::SourceAddress).unwrap_or_default();
            let destination = if server { io.property(Property::DestinationAddress).unwrap_or_default() } else { Vec::new() };
            let source = String::from_utf8_lossy(&source);
            let destination = String::from_utf8_lossy(&destination);
            let (client_ip, client_port) = host::split_address(&source);
            let (server_ip, server_port) = host::split_address(&destination);
            // With `client_ip` configured, REMOTE_ADDR is the client it designates.
            let client = self.protect.as_ref().and_then(|p| p.configured_client());
            let client_ip = client.as_deref().unwrap_or(client_ip);
            tx.process_connection(client_ip, client_port, server_ip, server_port);
        }

        // One host call saved per request when neither a rule nor the chunked-body guess
        // below reads the protocol (the default is then never observed).
        let chunked_guess = scan.chunked_guess(end_of_stream);
        self.protocol = (wants_protocol || chunked_guess)
            .then(|| io.property(Property::RequestProtocol))
            .flatten()
            .filter(|p| !p.is_empty())
            .map(|p| Cow::Owned(String::from_utf8(p).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())))
            .unwrap_or(Cow::Borrowed("HTTP/1.1"));
        // CONNECT has no `:path`: its target is the authority (`CONNECT host:port HTTP/1.1`).
        let authority = scan.authority(&headers);
        let method = scan.method(&headers);
        let path = match scan.path(&headers) {
            Some(p) => p,
            None if method == b"CONNECT" => authority.unwrap_or_default(),
            None => b"",
        };
        tx.process_uri(&host::text(path), &host::text(method), &self.protocol);
        // Envoy turns HTTP/1.1 `Host` into `:authority` (an empty Host stays an empty
        // authority); rules expect the Host header the client sent.
        if let (false, Some(a)) = (scan.has_host, authority) {
            tx.add_request_header(b"Host", a);
        }
        // The host's serialized headers become the transaction's (not copied one by one).
        tx.add_request_header_block(headers.into_bytes());
        // Envoy removes `Transfer-Encoding` after de-chunking. An HTTP/1.1 request with
        // a body and no Content-Length was chunked on the wire: say so, as the client did.
        if chunked_guess && self.protocol == "HTTP/1.1" {
            tx.add_request_header(b"Transfer-Encoding", b"chunked");
        }
        let body_access = tx.request_body_access();
        let interruption = tx.process_request_headers();
        if let Action::Pause = self.after_phase(io, Side::Request, interruption) {
            return Action::Pause;
        }
        if end_of_stream || !body_access {
            return self.finish_request_body(io);
        }
        // Continue, not Pause: paused headers would also hold the body back from us (see the
        // module docs). The body callbacks hold the body instead.
        self.request_body = Body::Collecting { fed: 0 };
        Action::Continue
    }

    /// `body_size`: the size of the request body held so far (see [`StreamHost::body`]).
    pub fn on_request_body(&mut self, io: &mut impl StreamHost, body_size: usize, end_of_stream: bool) -> Action {
        if self.protect.is_some() && self.interrupted.is_none() {
            if let Some(action) = self.protect_request_body(io, body_size) {
                return action;
            }
        }
        self.on_body(io, Side::Request, body_size, end_of_stream)
    }

    pub fn on_request_trailers(&mut self, io: &mut impl StreamHost) -> Action {
        self.on_trailers(io, Side::Request)
    }

    pub fn on_response_headers(&mut self, io: &mut impl StreamHost, end_of_stream: bool) -> Action {
        if self.protect.is_some() {
            self.protect_response_headers(io);
        }
        if self.interrupted.is_some() {
            return self.after_interruption(Side::Response);
        }
        if self.tx.is_none() {
            return Action::Continue;
        }
        // Phase 2 has not run when a response comes before the request body ended (an early
        // upstream answer or one of Envoy's own local replies): run it on what we have.
        if self.request_body != Body::Done {
            self.request_body = Body::Done;
            let interruption = self.tx.as_mut().and_then(|tx| tx.process_request_body());
            if let Action::Pause = self.after_phase(io, Side::Response, interruption) {
                return Action::Pause;
            }
        }
        if !self.tx.as_ref().is_some_and(Transaction::inspects_response) {
            // No rule reads the response: don't fetch its headers from the host.
            self.response_body = Body::Done;
            return Action::Continue;
        }
        let Some(headers) = io.headers(Side::Response) else {
            self.count_error("cannot read the response headers");
            return Action::Continue;
        };
        let Some(tx) = self.tx.as_mut() else {
            return Action::Continue;
        };
        let status = headers.get(b":status").map_or(0, host::parse_status);
        // The host's serialized headers become the transaction's (not copied one by one).
        tx.add_response_header_block(headers.into_bytes());
        let body_access = tx.response_body_access();
        let interruption = tx.process_response_headers(status, &self.protocol);
        if let Action::Pause = self.after_phase(io, Side::Response, interruption) {
            return Action::Pause;
        }
        if end_of_stream || !body_access {
            return self.finish_response_body(io);
        }
        self.response_body = Body::Collecting { fed: 0 };
        Action::Continue
    }

    /// `body_size`: the size of the response body held so far (see [`StreamHost::body`]).
    pub fn on_response_body(&mut self, io: &mut impl StreamHost, body_size: usize, end_of_stream: bool) -> Action {
        self.on_body(io, Side::Response, body_size, end_of_stream)
    }

    pub fn on_response_trailers(&mut self, io: &mut impl StreamHost) -> Action {
        self.on_trailers(io, Side::Response)
    }

    /// The stream's end (completed or reset): phase 5, its log lines, the request log.
    pub fn on_end(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            tx.process_logging();
            if let (true, Some(shared)) = (tx.over_budget(), self.shared.as_ref()) {
                shared.metrics.over_budget(&shared.host);
            }
        }
        self.flush_logs();
        if let (Some(state), Some(shared)) = (self.protect.as_mut(), self.shared.as_ref()) {
            if let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) {
                let waf = self.tx.as_ref().is_some_and(|tx| tx.interruption().is_some());
                state.log(&shared.host, ps, p, stream_id(&self.tx), waf, self.tx.is_some());
            }
        }
    }
}
