//! Host access that cannot panic on host data, and the pure parsing around it.
//!
//! Everything here returns `Option`/`Result` or a default; the callers decide what a missing
//! value means. The parsing functions are plain Rust and unit-tested natively.

use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, Bytes, LogLevel, MapType};

/// Writes one line to Envoy's log (component `wasm`); Envoy drops it below its log level.
pub(crate) fn log(level: LogLevel, message: &str) {
    let _ = hostcalls::log(level, message);
}

/// All pairs of a header map, values as raw bytes (header values may be non-UTF-8).
pub(crate) fn header_pairs(map: MapType) -> Option<Vec<(String, Bytes)>> {
    hostcalls::get_map_bytes(map).ok()
}

/// A property such as `["request", "protocol"]`; `None` when the host has no value.
pub(crate) fn property(path: &[&str]) -> Option<Bytes> {
    hostcalls::get_property(path.to_vec()).ok().flatten()
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
) -> Result<Option<Bytes>, proxy_wasm::types::Status> {
    if body_size <= fed {
        return Ok(None);
    }
    hostcalls::get_buffer(buffer, fed, body_size - fed)
}

/// Sends a local reply; Envoy stops the stream's filter iteration itself after this call.
pub(crate) fn send_local_reply(status: u32, headers: &[(&str, &str)], body: &[u8]) -> bool {
    hostcalls::send_http_response(status, headers.to_vec(), Some(body)).is_ok()
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
