//! What the filter asks of Envoy, whatever binds it: the two traits an adapter implements,
//! and the plain data they exchange.
//!
//! - [`Host`]: what one plugin configuration uses on every thread: logs, the clock, counters,
//!   the state shared by Envoy's workers, HTTP calls. One value per configuration, kept in
//!   [`crate::Shared`].
//! - [`StreamHost`]: what one stream's callback uses: its headers and bodies, the connection's
//!   addresses, the local reply. A value lent to each callback of [`crate::Stream`].
//!
//! Both are written so that host data never reaches a panic: a value the host does not have is
//! `None`, a call it refuses is an `Err` or `false`, and the filter decides what that means.

use std::time::Duration;

use wafer::body::pairs::block_len;

pub type Bytes = Vec<u8>;

/// Which message of the stream a call is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Request,
    Response,
}

/// Log levels (Envoy's, which both bindings pass on as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
    Critical,
}

/// A host call's result other than success (proxy-wasm's statuses; the dynamic-module binding
/// answers `NotFound` or `InternalFailure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    NotFound,
    BadArgument,
    SerializationFailure,
    ParseFailure,
    Empty,
    CasMismatch,
    InternalFailure,
    Unimplemented,
    Other(u32),
}

/// Connection facts the filter reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// The downstream peer, `ip:port` (`[v6]:port`), as Envoy writes addresses.
    SourceAddress,
    /// The local address the request came in on, the same form.
    DestinationAddress,
    /// `HTTP/1.1`, `HTTP/2`, ...
    RequestProtocol,
}

/// What a callback tells Envoy about the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Continue,
    /// Stop iteration; for a body, Envoy buffers it (and keeps it within its buffer limit).
    Pause,
}

/// Services of one plugin configuration, usable from every thread that runs its streams.
pub trait Host: Clone + Send + Sync + 'static {
    /// A counter defined by [`Host::define_counter`] or [`Host::family_counter`].
    type Counter: Clone + Send + Sync;
    /// A counter family with labels ([`Host::define_family`]).
    type Family: Send + Sync;

    /// Writes one line to Envoy's log; Envoy drops it below its level.
    fn log(&self, level: Level, message: &str);

    /// Nanoseconds since the Unix epoch.
    fn now_nanos(&self) -> u64;

    /// Defines a counter (at configuration time); `None` when the host refuses.
    fn define_counter(&self, name: &str) -> Option<Self::Counter>;

    /// Defines a family of counters named `name` with these labels (at configuration time).
    /// A member's name, where Envoy shows it, is `name.<label>.<value>...` in label order.
    fn define_family(&self, name: &str, labels: &'static [&'static str]) -> Option<Self::Family>;

    /// The member of `family` with these label values (one per label).
    fn family_counter(&self, family: &Self::Family, values: &[&str]) -> Option<Self::Counter>;

    /// Adds `by` to a counter.
    fn increment(&self, counter: &Self::Counter, by: u64);

    /// Defines a gauge and sets it (the build identity, once per configuration).
    fn set_gauge(&self, name: &str, value: u64);

    /// The value Envoy's workers share under `key`; `None` when there is none.
    fn shared_get(&self, key: &str) -> Result<Option<Bytes>, Status>;

    /// Replaces the shared value under `key` with `f(current)`, atomically for every worker
    /// (`f` may run more than once when another worker writes in between).
    fn shared_update(&self, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Bytes) -> Result<(), Status>;

    /// Sends a request to `cluster` and forgets it (its response is not read). Called only
    /// where the host allows calls: a stream's callback when [`Host::flush_later`] is false,
    /// else the configuration's tick ([`crate::Root::on_tick`]).
    fn http_call(&self, cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<(), Status>;

    /// A stream's callback has work for the tick (a full request-log batch): true when the
    /// host runs the tick soon for it (its streams cannot make HTTP calls themselves), false
    /// when the stream should do the work now.
    fn flush_later(&self) -> bool;

    /// Whether a local reply sent while the request is on its way skips the response
    /// callbacks of the filter that sent it (dynamic modules), rather than running through
    /// them like any response (proxy-wasm). When it skips them, the filter gives the reply the
    /// response-side protections (hardening headers, scoring, the request log's response part)
    /// before sending it.
    fn replies_skip_filter(&self) -> bool;
}

/// Services of one stream, within one of its callbacks.
pub trait StreamHost {
    /// The header map of `side`, serialized (see [`HeaderMap`]); `None` when the host has none.
    fn headers(&mut self, side: Side) -> Option<HeaderMap>;

    /// The first value of header `name` (lowercase) of `side`; `None` when absent.
    fn header(&mut self, side: Side, name: &str) -> Option<Bytes>;

    /// Replaces the values of header `name` with `value`, or removes the header (`None`).
    fn set_header(&mut self, side: Side, name: &str, value: Option<&[u8]>) -> bool;

    /// Adds a value to header `name`.
    fn add_header(&mut self, side: Side, name: &str, value: &[u8]) -> bool;

    /// At most `max` bytes from `start` of the body of `side` held so far (everything
    /// buffered, then what this callback received); `None` when there are none.
    fn body(&mut self, side: Side, start: usize, max: usize) -> Result<Option<Bytes>, Status>;

    /// A connection fact; `None` when the host has no value.
    fn property(&mut self, property: Property) -> Option<Bytes>;

    /// Sends a local reply; Envoy stops the stream's filter iteration. False when refused.
    fn send_reply(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> bool;
}

/// A header map serialized as proxy-wasm hosts hand it over (see
/// [`wafer::body::pairs::block_spans`]), read in place: one buffer, no allocation per header.
/// The engine takes the block itself ([`wafer::Transaction::add_request_header_block`]).
pub struct HeaderMap {
    /// Checked by `block_len` when made: every pair it announces is in it.
    buf: Bytes,
}

impl HeaderMap {
    /// A map from a serialized block; `None` when the block does not hold what it announces.
    pub fn from_block(buf: Bytes) -> Option<HeaderMap> {
        block_len(&buf)?;
        Some(HeaderMap { buf })
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        wafer::body::pairs::block_spans(&self.buf).map_while(|(name, value)| Some((self.buf.get(name)?, self.buf.get(value)?)))
    }

    /// The serialized map.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The serialized map itself (for [`wafer::Transaction::add_request_header_block`]).
    pub fn into_bytes(self) -> Bytes {
        self.buf
    }

    /// The pairs as owned copies (names that are not UTF-8 converted lossily).
    pub fn to_owned_pairs(&self) -> Vec<(String, Bytes)> {
        self.pairs().map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.to_vec())).collect()
    }

    /// The first value of `name` (lowercase, as Envoy keeps names).
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.pairs().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Host bytes as text: borrowed when valid UTF-8 (checked a word at a time; the lossy
/// conversion's own check goes byte by byte), else converted lossily.
pub fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// Splits Envoy's `source.address` / `destination.address` (`1.2.3.4:80`, `[::1]:80`, or a
/// pipe path) into IP and port. A value without a port gives port 0.
pub fn split_address(addr: &str) -> (&str, u16) {
    if let Some(rest) = addr.strip_prefix('[') {
        // [v6]:port
        if let Some((ip, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse().ok()).unwrap_or(0);
            return (ip, port);
        }
        return (addr, 0);
    }
    match addr.rsplit_once(':') {
        // A bare IPv6 address has more than one ':'; it has no port then.
        Some((ip, port)) if !ip.contains(':') => (ip, port.parse().unwrap_or(0)),
        _ => (addr, 0),
    }
}

/// Parses a `:status` value; anything that is not a 3-digit number gives 0.
pub fn parse_status(value: &[u8]) -> u16 {
    std::str::from_utf8(value).ok().filter(|s| s.len() == 3).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Turns a metric label into a metric name segment: Envoy splits names at `.`, so anything
/// outside `[A-Za-z0-9_-]` becomes `_`.
pub fn metric_segment(raw: &str) -> String {
    let seg: String = raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if seg.is_empty() {
        "_".to_string()
    } else {
        seg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer::body::pairs::block_of;

    #[test]
    fn split_address_forms() {
        assert_eq!(split_address("127.0.0.1:8080"), ("127.0.0.1", 8080));
        assert_eq!(split_address("[::1]:443"), ("::1", 443));
        assert_eq!(split_address("[::1]"), ("::1", 0));
        assert_eq!(split_address("::1"), ("::1", 0));
        assert_eq!(split_address("10.0.0.1"), ("10.0.0.1", 0));
        assert_eq!(split_address("10.0.0.1:notaport"), ("10.0.0.1", 0));
        assert_eq!(split_address("10.0.0.1:99999"), ("10.0.0.1", 0));
        assert_eq!(split_address("/tmp/envoy.sock"), ("/tmp/envoy.sock", 0));
        assert_eq!(split_address("[unterminated"), ("[unterminated", 0));
        assert_eq!(split_address(""), ("", 0));
    }

    #[test]
    fn header_map_round_trip() {
        let pairs: &[(&[u8], &[u8])] =
            &[(b":path", b"/a?b=1"), (b"x-empty", b""), (b"\xff\xfe", b"\x00bin\xff"), (b"a", b"1"), (b"a", b"2")];
        let m = HeaderMap::from_block(block_of(pairs)).expect("a well-formed block");
        assert_eq!(m.pairs().collect::<Vec<_>>(), pairs.to_vec());
        assert_eq!(m.get(b"a"), Some(&b"1"[..]));
        assert_eq!(m.get(b"b"), None);
        assert!(HeaderMap::from_block(Vec::new()).is_some_and(|m| m.pairs().count() == 0));
        assert_eq!(block_len(&0u32.to_le_bytes()), Some(0));
    }

    #[test]
    fn header_map_malformed_is_refused() {
        let buf = block_of(&[(b"name", b"value"), (b"n2", b"v2")]);
        // Every truncation, and counts larger than the buffer, give None (never a panic).
        for cut in 1..buf.len() {
            assert!(HeaderMap::from_block(buf[..cut].to_vec()).is_none(), "cut at {cut}");
        }
        let mut big = buf.clone();
        big[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(HeaderMap::from_block(big).is_none());
        let mut long = buf.clone();
        long[4..8].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
        assert!(HeaderMap::from_block(long).is_none());
    }

    #[test]
    fn parse_status_values() {
        assert_eq!(parse_status(b"200"), 200);
        assert_eq!(parse_status(b"404"), 404);
        assert_eq!(parse_status(b""), 0);
        assert_eq!(parse_status(b"20"), 0);
        assert_eq!(parse_status(b"2000"), 0);
        assert_eq!(parse_status(b"abc"), 0);
        assert_eq!(parse_status(b"\xff\xfe\xfd"), 0);
    }

    #[test]
    fn metric_segments() {
        assert_eq!(metric_segment("tenant-a"), "tenant-a");
        assert_eq!(metric_segment("a.b c"), "a_b_c");
        assert_eq!(metric_segment(""), "_");
        assert_eq!(metric_segment("ü"), "_");
    }
}
