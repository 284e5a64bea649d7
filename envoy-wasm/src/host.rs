//! Host access that cannot panic on host data, and the pure parsing around it.
//!
//! Everything here returns `Option`/`Result` or a default; the callers decide what a missing
//! value means. The parsing functions are plain Rust and unit-tested natively.

use crate::abi::hostcalls;
use crate::abi::types::{BufferType, Bytes, LogLevel, MapType, Status};
use wafer::body::pairs::block_len;

/// Writes one line to Envoy's log (component `wasm`); Envoy drops it below its log level.
pub(crate) fn log(level: LogLevel, message: &str) {
    let _ = hostcalls::log(level, message);
}

/// All pairs of a header map, names and values as raw bytes, owned (for the protections,
/// which keep them). Names that are not UTF-8 are converted lossily.
pub(crate) fn header_pairs(map: MapType) -> Option<Vec<(String, Bytes)>> {
    Some(header_map(map)?.to_owned_pairs())
}

/// A header map as the host serialized it, read in place: one buffer, no copy per header and
/// no allocation besides the host's buffer (a map of owned names and values would allocate
/// two buffers per header).
pub(crate) struct HeaderMap {
    /// Checked by `block_len` when read: every pair it announces is in it.
    buf: Bytes,
}

impl HeaderMap {
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        wafer::body::pairs::block_spans(&self.buf).map_while(|(name, value)| Some((self.buf.get(name)?, self.buf.get(value)?)))
    }

    /// The serialized map as the host gave it.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The serialized map itself (for [`wafer::Transaction::add_request_header_block`]).
    pub(crate) fn into_bytes(self) -> Bytes {
        self.buf
    }

    /// The pairs as owned copies (names that are not UTF-8 converted lossily).
    pub(crate) fn to_owned_pairs(&self) -> Vec<(String, Bytes)> {
        self.pairs().map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.to_vec())).collect()
    }

    /// The first value of `name` (lowercase, as Envoy keeps names).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.pairs().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Reads a header map from the host; `None` when the host has none (or answers oddly).
pub(crate) fn header_map(map: MapType) -> Option<HeaderMap> {
    #[link(wasm_import_module = "env")]
    extern "C" {
        // The status is read as a plain integer: an unknown value must not become an
        // invalid enum.
        fn proxy_get_header_map_pairs(map_type: u32, return_data: *mut *mut u8, return_size: *mut usize) -> u32;
    }
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: the host writes a pointer and a size into the two out-parameters. The buffer
    // was allocated by `abi::proxy_on_memory_allocate` (a `Vec<u8>` of capacity `size`,
    // forgotten), so taking it back as such a `Vec` frees it with the same layout.
    let buf = unsafe {
        if proxy_get_header_map_pairs(map as u32, &mut data, &mut size) != 0 {
            return None;
        }
        if data.is_null() {
            return Some(HeaderMap { buf: Vec::new() });
        }
        Vec::from_raw_parts(data, size, size)
    };
    block_len(&buf)?;
    Some(HeaderMap { buf })
}

/// Host bytes as text: borrowed when valid UTF-8 (checked a word at a time; the lossy
/// conversion's own check goes byte by byte), else converted lossily.
pub(crate) fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// Property paths as the ABI serializes them (the parts joined by NUL): constants, so a
/// request's property reads allocate only the host's answer (the SDK's `get_property` takes
/// a `Vec` of the parts and serializes it into another).
pub(crate) const SOURCE_ADDRESS: &[u8] = b"source\0address";
pub(crate) const DESTINATION_ADDRESS: &[u8] = b"destination\0address";
pub(crate) const REQUEST_PROTOCOL: &[u8] = b"request\0protocol";

/// A property (one of the paths above); `None` when the host has no value (or answers oddly).
pub(crate) fn property(path: &[u8]) -> Option<Bytes> {
    #[link(wasm_import_module = "env")]
    extern "C" {
        fn proxy_get_property(path_data: *const u8, path_size: usize, return_data: *mut *mut u8, return_size: *mut usize) -> u32;
    }
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `path` is readable for its length; the host writes a pointer and a size into the
    // out-parameters, the buffer allocated by `abi::proxy_on_memory_allocate` (see
    // `header_map`), so taking it back as a `Vec` of capacity `size` frees it as allocated.
    unsafe {
        if proxy_get_property(path.as_ptr(), path.len(), &mut data, &mut size) != 0 || data.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(data, size, size))
    }
}

/// The part of a buffered body the engine has not been given yet.
///
/// With `Action::Pause` (Envoy: StopIterationAndBuffer) the body callbacks report the size of
/// everything buffered so far, so the new bytes are `[fed, body_size)`. Returns `Ok(None)` when
/// nothing is new.
pub(crate) fn read_new_body(
    buffer: BufferType,
    fed: usize,
    body_size: usize,
) -> Result<Option<Bytes>, Status> {
    if body_size <= fed {
        return Ok(None);
    }
    hostcalls::get_buffer(buffer, fed, body_size - fed)
}

/// Sends a local reply; Envoy stops the stream's filter iteration itself after this call.
pub(crate) fn send_local_reply(status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
    hostcalls::send_http_response(status, headers, body).is_ok()
}

/// Splits Envoy's `source.address` / `destination.address` (`1.2.3.4:80`, `[::1]:80`, or a
/// pipe path) into IP and port. A value without a port gives port 0.
pub(crate) fn split_address(addr: &str) -> (&str, u16) {
    if let Some(rest) = addr.strip_prefix('[') {
        // [v6]:port
        if let Some((ip, tail)) = rest.split_once(']') {
            let port = tail
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
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
pub(crate) fn parse_status(value: &[u8]) -> u16 {
    std::str::from_utf8(value)
        .ok()
        .filter(|s| s.len() == 3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Turns a metric label into a metric name segment: Envoy splits names at `.`, so anything
/// outside `[A-Za-z0-9_-]` becomes `_`.
pub(crate) fn metric_segment(raw: &str) -> String {
    let seg: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
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
        let buf = block_of(pairs);
        let m = HeaderMap { buf };
        assert!(block_len(&m.buf).is_some());
        assert_eq!(m.pairs().collect::<Vec<_>>(), pairs.to_vec());
        assert_eq!(m.get(b"a"), Some(&b"1"[..]));
        assert_eq!(m.get(b"b"), None);
        assert_eq!(block_len(b""), Some(0));
        assert_eq!(block_len(&0u32.to_le_bytes()), Some(0));
    }

    #[test]
    fn header_map_malformed_is_refused() {
        let buf = block_of(&[(b"name", b"value"), (b"n2", b"v2")]);
        // Every truncation, and counts larger than the buffer, give None (never a panic).
        for cut in 1..buf.len() {
            assert_eq!(block_len(&buf[..cut]), None, "cut at {cut}");
        }
        let mut big = buf.clone();
        big[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(block_len(&big), None);
        let mut long = buf.clone();
        long[4..8].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
        assert_eq!(block_len(&long), None);
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
