//! One HTTP stream: owns the engine's [`Transaction`] and drives its five phases.
//!
//! State per stream, in callback order:
//!
//! 1. request headers: pick the rule set by `:authority` (none: the stream passes untouched),
//!    feed connection, URI and headers, run phase 1. Without a body to inspect (end of stream,
//!    or body access off) phase 2 runs right away.
//!    A request the same as one of the VM's last quiet ones but for its `x-request-id` gets no
//!    transaction; with a body to inspect, that waits for the body's end (see [`crate::quiet`]).
//! 2. request body: the body callbacks answer `Action::Pause` (Envoy buffers and holds the
//!    data) and feed only the bytes not fed before; phase 2 runs at end of stream, at the
//!    trailers, or as soon as the engine says its body limit is reached ([`BodyAppend::Full`]);
//!    then everything buffered moves on.
//! 3. and 4. the same for the response.
//! 5. the stream's end (`proxy_on_delete`): logging phase.
//!
//! Headers always continue, even when the body is still to be inspected: Envoy's proxy-wasm
//! host turns a paused header callback into "stop all iteration", which also stops the body
//! callbacks of this filter, so the stream would hang. Consequences:
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
use std::rc::Rc;
use std::sync::Arc;

use crate::abi::hostcalls;
use crate::abi::types::{Action, BufferType, LogLevel, MapType};
use wafer::{BodyAppend, InterruptAction, Interruption, Transaction};

use crate::host::{self, HeaderMap};
use crate::quiet::{Candidate, Record, Verdict};
use crate::Shared;

/// The most of a held body read from the host at once (Envoy's reads are 16 KiB to 1 MiB;
/// a stream whose body came before its transaction, see [`crate::quiet`], has all of it).
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Request,
    Response,
}

pub(crate) struct WaferHttp {
    context_id: u32,
    shared: Option<Rc<Shared>>,
    /// `None` when there is no rule set for this stream: every callback continues.
    tx: Option<Transaction>,
    /// `HTTP/1.1` unless the host said otherwise (no allocation for the default).
    protocol: Cow<'static, str>,
    request_body: Body,
    response_body: Body,
    interrupted: Option<Side>,
    /// Protections of this stream; `None` (no cost) when the configuration enables none.
    protect: Option<Box<crate::protect::StreamProtect>>,
    /// A copy of the request when its transaction, if quiet, becomes the VM's quiet request
    /// (see [`crate::quiet`]).
    quiet: Candidate,
    /// The request held without a transaction until its body shows whether it is the quiet
    /// request's.
    deferred: Option<Deferred>,
}

impl WaferHttp {
    pub(crate) fn new(context_id: u32, shared: Option<Rc<Shared>>) -> WaferHttp {
        WaferHttp {
            context_id,
            shared,
            tx: None,
            protocol: Cow::Borrowed(""),
            request_body: Body::Idle,
            response_body: Body::Idle,
            interrupted: None,
            protect: None,
            quiet: Candidate::default(),
            deferred: None,
        }
    }

    /// Makes an ended stream's context (see [`WaferHttp::release`]) stream `context_id`'s.
    pub(crate) fn reuse(&mut self, context_id: u32, shared: Option<Rc<Shared>>) {
        self.context_id = context_id;
        self.shared = shared;
    }

    /// Ends the stream: its transaction (whose parts go to the next one), protections and
    /// configuration are dropped; what is left is the state of a new stream.
    /// (Every field is named, so a new one cannot be forgotten here.)
    pub(crate) fn release(&mut self) {
        let WaferHttp { context_id: _, shared, tx, protocol, request_body, response_body, interrupted, protect, quiet, deferred } = self;
        *tx = None;
        quiet.disarm();
        *deferred = None;
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
        host::log(
            LogLevel::Error,
            &format!("wafer: [{}] {what}", self.id()),
        );
        if let Some(shared) = &self.shared {
            shared.metrics.error();
        }
    }

    /// Writes the engine's log lines (rules with `log` that matched) to Envoy's log.
    fn flush_logs(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            let lines = tx.take_log_lines();
            for line in &lines {
                host::log(LogLevel::Warn, line);
            }
            if let Some(p) = self.protect.as_mut() {
                p.keep_rule_lines(&lines);
            }
        }
    }

    /// Logs, then turns the result of a phase into the callback's answer.
    fn after_phase(&mut self, side: Side, interruption: Option<Interruption>) -> Action {
        self.flush_logs();
        match interruption {
            Some(interruption) => self.interrupt(side, &interruption),
            None => Action::Continue,
        }
    }

    fn interrupt(&mut self, side: Side, interruption: &Interruption) -> Action {
        self.interrupted = Some(side);
        if let Some(shared) = &self.shared {
            shared.metrics.interruption(interruption.rule_id, interruption.phase);
        }
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
            // proxy-wasm cannot close the client connection from an HTTP filter: a drop is
            // answered like a deny.
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
        host::log(
            LogLevel::Info,
            &format!(
                "wafer: [{}] interrupted in {side:?} with status {status} (rule {rule})",
                self.id()
            ),
        );
        if !host::send_local_reply(u32::from(status), &headers, body.as_bytes()) {
            self.count_error("could not send the local reply");
        }
        // Hold the stream either way: fail closed.
        Action::Pause
    }

    /// A unique id for a request without `x-request-id`: VM-local counter plus the time, so
    /// ids from different workers (VMs) do not collide.
    fn fallback_id(&self) -> String {
        let n = match &self.shared {
            Some(shared) => {
                let n = shared.next_id.get().wrapping_add(1);
                shared.next_id.set(n);
                n
            }
            None => 0,
        };
        let nanos = hostcalls::current_time_nanos().unwrap_or(0);
        format!("wafer-{nanos:x}-{n:x}-{:x}", self.context_id)
    }

    fn finish_request_body(&mut self) -> Action {
        self.request_body = Body::Done;
        let Some(tx) = self.tx.as_mut() else {
            return Action::Continue;
        };
        let interruption = tx.process_request_body();
        self.after_phase(Side::Request, interruption)
    }

    fn finish_response_body(&mut self) -> Action {
        self.response_body = Body::Done;
        let Some(tx) = self.tx.as_mut() else {
            return Action::Continue;
        };
        let interruption = tx.process_response_body();
        self.after_phase(Side::Response, interruption)
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
    fn feed_body(&mut self, side: Side, body_size: usize) -> Option<Action> {
        let buffer = match side {
            Side::Request => BufferType::HttpRequestBody,
            Side::Response => BufferType::HttpResponseBody,
        };
        loop {
            let Body::Collecting { fed } = *self.body(side) else {
                return Some(Action::Continue);
            };
            let end = body_size.min(fed.saturating_add(BODY_SLICE));
            match host::read_new_body(buffer, fed, end) {
                Ok(Some(chunk)) if !chunk.is_empty() => {
                    if let Some(action) = self.feed_chunk(side, &chunk) {
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
                    return Some(self.interrupt(side, &refusal));
                }
            }
        }
    }

    /// Gives the engine the next `chunk` of a held body; `Some(action)` ends the collection.
    fn feed_chunk(&mut self, side: Side, chunk: &[u8]) -> Option<Action> {
        let Body::Collecting { fed } = *self.body(side) else {
            return Some(Action::Continue);
        };
        *self.body(side) = Body::Collecting { fed: fed.saturating_add(chunk.len()) };
        let tx = self.tx.as_mut()?;
        let appended = match side {
            Side::Request => {
                self.quiet.keep_body(chunk);
                tx.append_request_body(chunk)
            }
            Side::Response => tx.append_response_body(chunk),
        };
        match appended {
            BodyAppend::Continue => None,
            BodyAppend::Full => {
                // The engine saw part of the body: no record of it.
                self.quiet.disarm();
                Some(self.finish_body(side))
            }
            BodyAppend::Interrupt(interruption) => {
                *self.body(side) = Body::Done;
                self.flush_logs();
                Some(self.interrupt(side, &interruption))
            }
        }
    }

    fn finish_body(&mut self, side: Side) -> Action {
        match side {
            Side::Request => self.finish_request_body(),
            Side::Response => self.finish_response_body(),
        }
    }

    /// Body callback of either side.
    fn on_body(&mut self, side: Side, body_size: usize, end_of_stream: bool) -> Action {
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
        if let Some(action) = self.feed_body(side, body_size) {
            return action;
        }
        if end_of_stream {
            self.finish_body(side)
        } else {
            Action::Pause
        }
    }

    /// Trailers end a body: run its phase if it was being collected.
    fn on_trailers(&mut self, side: Side) -> Action {
        if self.interrupted.is_some() {
            return self.after_interruption(side);
        }
        let state = match side {
            Side::Request => self.request_body,
            Side::Response => self.response_body,
        };
        match state {
            Body::Collecting { .. } => self.finish_body(side),
            Body::Idle | Body::Done => Action::Continue,
        }
    }

    /// Body size limit of the protections (`hardening.max_request_body_bytes`).
    fn protect_request_body(&mut self, body_size: usize) -> Option<Action> {
        let shared = self.shared.clone()?;
        let (p, ps) = (shared.waf.protect()?, shared.protect.as_ref()?);
        // While the engine collects, the host buffers and reports the total so far.
        let cumulative = matches!(self.request_body, Body::Collecting { .. });
        let state = self.protect.as_mut()?;
        let reply = state.request_body(ps, p, body_size, cumulative)?;
        self.interrupted = Some(Side::Request);
        let sent = self.protect.as_ref().is_some_and(|s| s.send(&reply, self.id()));
        if !sent {
            self.count_error("could not send the local reply");
        }
        Some(Action::Pause)
    }

    /// Response hardening, behaviour scoring and the log's response part.
    fn protect_response_headers(&mut self) {
        let Some(shared) = self.shared.clone() else { return };
        let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) else { return };
        let waf = self.tx.as_ref().is_some_and(|tx| tx.interruption().is_some());
        if let Some(state) = self.protect.as_mut() {
            state.response_headers(ps, p, waf, stream_id(&self.tx));
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

/// A request whose headers are a quiet record's, held (no transaction yet) until its body
/// ends (see [`crate::quiet`]).
struct Deferred {
    record: Rc<Record>,
    headers: HeaderMap,
    /// Where `headers` has what the transaction needs, as found when they came.
    scan: RequestScan,
    /// The body size the host reported last (all of it is held).
    size: usize,
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

/// The stream callbacks (see [`crate::abi`]).
impl WaferHttp {
    pub(crate) fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let Some(shared) = self.shared.clone() else {
            return Action::Continue;
        };
        let Some(headers) = host::header_map(MapType::HttpRequestHeaders) else {
            self.count_error("cannot read the request headers");
            return Action::Continue;
        };
        let scan = RequestScan::of(headers.bytes());
        // Test-only switch (`test_trap_header`, unset in any real configuration): abort the
        // VM, so the e2e tests can watch Envoy's failure_policy at work.
        if let Some(trap) = shared.waf.test_trap_header() {
            if headers.get(trap.as_bytes()).is_some() {
                std::process::abort();
            }
        }
        if let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) {
            let id = host::text(scan.request_id(&headers));
            let (state, reply) = crate::protect::request_headers(ps, p, &headers.to_owned_pairs(), &id);
            let state = self.protect.insert(Box::new(state));
            if let Some(reply) = reply {
                self.interrupted = Some(Side::Request);
                if !state.send(&reply, &id) {
                    self.count_error("could not send the local reply");
                }
                return Action::Pause;
            }
            if state.bypass {
                return Action::Continue;
            }
        }
        let Some(ruleset) = shared.waf.ruleset_for(&host::text(scan.authority(&headers).unwrap_or_default())) else {
            return Action::Continue;
        };
        shared.metrics.transaction();
        // The same request as one of the last quiet ones but for its id: no transaction (see
        // `crate::quiet`). Not with a body of unknown length (the engine would be given a
        // Transfer-Encoding header the block does not have).
        if ruleset.quiet_again && self.protect.is_none() && !scan.chunked_guess(end_of_stream) {
            let reads_body = !end_of_stream && ruleset.reads_request_body();
            match shared.quiet.borrow().verdict(&ruleset, headers.bytes(), reads_body) {
                Verdict::Pass => return Action::Continue,
                Verdict::Defer(record) => {
                    self.deferred = Some(Deferred { record, headers, scan, size: 0 });
                    self.request_body = Body::Collecting { fed: 0 };
                    return Action::Continue;
                }
                Verdict::Run => self.quiet.arm(headers.bytes(), reads_body),
            }
        }
        self.begin(&shared, ruleset, headers, &scan, end_of_stream)
    }

    /// The request's transaction: connection, URI and headers, phase 1, and phase 2 when no
    /// body is to be inspected.
    fn begin(&mut self, shared: &Shared, ruleset: Arc<wafer::Ruleset>, headers: HeaderMap, scan: &RequestScan, end_of_stream: bool) -> Action {
        let request_id = scan.request_id(&headers);
        let unique_id = if request_id.is_empty() { Cow::Owned(self.fallback_id()) } else { host::text(request_id) };
        let persistent = ruleset.uses_persistent_collections();
        let (connection, server) = (ruleset.mentions.connection, ruleset.mentions.server);
        let wants_protocol = ruleset.mentions.protocol;
        // Made in place in the stream's context (a transaction is ~1 KB: not moved there after).
        let tx = self.tx.insert(Transaction::with_id(ruleset, &unique_id));
        if persistent {
            tx.set_collection_store(shared.collections.clone());
        }

        // Host calls saved per request when no rule reads the addresses (or the server's).
        if connection {
            let source = host::property(host::SOURCE_ADDRESS).unwrap_or_default();
            let destination = if server { host::property(host::DESTINATION_ADDRESS).unwrap_or_default() } else { Vec::new() };
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
            .then(|| host::property(host::REQUEST_PROTOCOL))
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
        if let Action::Pause = self.after_phase(Side::Request, interruption) {
            return Action::Pause;
        }
        if end_of_stream || !body_access {
            return self.finish_request_body();
        }
        // Continue, not Pause: paused headers would also hold the body back from us (see the
        // module docs). The body callbacks hold the body instead.
        self.request_body = Body::Collecting { fed: 0 };
        Action::Continue
    }

    /// A body callback of a deferred request (see [`crate::quiet`]): held until its end; the
    /// record's body passes without a transaction, anything else gets one.
    fn on_deferred_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let Some(deferred) = self.deferred.as_mut() else {
            return Action::Continue;
        };
        deferred.size = body_size;
        let want = deferred.record.body();
        let mut read = None;
        if body_size <= want.len() {
            if !end_of_stream {
                return Action::Pause;
            }
            if body_size == want.len() {
                match host::read_new_body(BufferType::HttpRequestBody, 0, body_size) {
                    Ok(body) if body.as_deref().unwrap_or_default() == want => {
                        self.deferred = None;
                        self.request_body = Body::Done;
                        return Action::Continue;
                    }
                    Ok(body) => read = body,
                    Err(_) => {}
                }
            }
        }
        if let Some(action) = self.undefer(read) {
            return action;
        }
        if end_of_stream {
            self.finish_request_body()
        } else {
            Action::Pause
        }
    }

    /// Ends a deferral: the request's transaction, phase 1, and the body held so far (`read`,
    /// or read now) given to it. `Some(action)` when the stream's answer is decided.
    fn undefer(&mut self, read: Option<Vec<u8>>) -> Option<Action> {
        let deferred = self.deferred.take()?;
        let shared = self.shared.clone()?;
        let ruleset = deferred.record.ruleset.clone();
        self.quiet.arm(deferred.headers.bytes(), true);
        let action = self.begin(&shared, ruleset, deferred.headers, &deferred.scan, false);
        if self.interrupted.is_some() || !matches!(self.request_body, Body::Collecting { .. }) {
            return Some(action);
        }
        match read {
            Some(chunk) => self.feed_chunk(Side::Request, &chunk),
            None => self.feed_body(Side::Request, deferred.size),
        }
    }

    pub(crate) fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.deferred.is_some() {
            return self.on_deferred_body(body_size, end_of_stream);
        }
        if self.protect.is_some() && self.interrupted.is_none() {
            if let Some(action) = self.protect_request_body(body_size) {
                return action;
            }
        }
        self.on_body(Side::Request, body_size, end_of_stream)
    }

    pub(crate) fn on_http_request_trailers(&mut self) -> Action {
        if let Some(action) = self.undefer(None) {
            return action;
        }
        self.on_trailers(Side::Request)
    }

    pub(crate) fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        if self.protect.is_some() {
            self.protect_response_headers();
        }
        if self.interrupted.is_some() {
            return self.after_interruption(Side::Response);
        }
        // A response before a deferred request's body ended: it gets its transaction now.
        if let Some(action) = self.undefer(None) {
            return action;
        }
        if self.tx.is_none() {
            return Action::Continue;
        }
        // Phase 2 has not run when a response comes before the request body ended (an early
        // upstream answer or one of Envoy's own local replies): run it on what we have.
        if self.request_body != Body::Done {
            self.request_body = Body::Done;
            let interruption = self.tx.as_mut().and_then(|tx| tx.process_request_body());
            if let Action::Pause = self.after_phase(Side::Response, interruption) {
                return Action::Pause;
            }
        }
        if !self.tx.as_ref().is_some_and(Transaction::inspects_response) {
            // No rule reads the response: don't fetch its headers from the host.
            self.response_body = Body::Done;
            return Action::Continue;
        }
        let Some(headers) = host::header_map(MapType::HttpResponseHeaders) else {
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
        if let Action::Pause = self.after_phase(Side::Response, interruption) {
            return Action::Pause;
        }
        if end_of_stream || !body_access {
            return self.finish_response_body();
        }
        self.response_body = Body::Collecting { fed: 0 };
        Action::Continue
    }

    pub(crate) fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.on_body(Side::Response, body_size, end_of_stream)
    }

    pub(crate) fn on_http_response_trailers(&mut self) -> Action {
        self.on_trailers(Side::Response)
    }

    /// The stream's end (`proxy_on_delete`): phase 5, its log lines, the request log.
    pub(crate) fn on_end(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            tx.process_logging();
            if let (true, Some(shared)) = (tx.over_budget(), self.shared.as_ref()) {
                shared.metrics.over_budget();
            }
            match self.shared.as_ref().filter(|_| tx.quiet()) {
                Some(shared) => self.quiet.become_record(&mut shared.quiet.borrow_mut(), tx.ruleset()),
                None => self.quiet.disarm(),
            }
        }
        self.flush_logs();
        if let (Some(state), Some(shared)) = (self.protect.as_mut(), self.shared.as_ref()) {
            if let (Some(p), Some(ps)) = (shared.waf.protect(), shared.protect.as_ref()) {
                let waf = self.tx.as_ref().is_some_and(|tx| tx.interruption().is_some());
                state.log(ps, p, stream_id(&self.tx), waf, self.tx.is_some());
            }
        }
    }
}
