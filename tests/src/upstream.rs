//! The upstream behind Envoy in the tests: an HTTP/1.1 server on std threads that records
//! what reached it and answers `200 upstream ok len=<n> fnv=<hash>` so a test can tell that a
//! body arrived whole.
//!
//! For response-side tests, request headers change the answer: `x-upstream-reply: <text>`
//! replaces the body, `x-upstream-size: <n>` makes it `n` bytes of `r`, and
//! `x-upstream-status: <code>` sets the status, each `x-upstream-set-cookie: <v>` adds a
//! `set-cookie: <v>` response header.
//!
//! [`Upstream::albedo`] behaves like the CRS test backend (albedo) instead: any path answers
//! 200 with an empty `text/plain` body, and `POST /reflect` with a JSON body
//! `{"status","headers","body","encodedBody"(base64),"logMessage"}` answers exactly that
//! response (the shape is `wafer_cli::crs::native::reflect`, shared with the native runner).

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::client::{read_body, read_headers, read_line};

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// How the upstream answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `200 upstream ok len=<n> fnv=<hash>` and the `x-upstream-*` request headers.
    Echo,
    /// The CRS test backend (albedo).
    Albedo,
}

pub struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub fn start() -> std::io::Result<Upstream> {
        Self::start_mode(Mode::Echo)
    }

    /// An upstream that behaves like albedo (see the module docs).
    pub fn albedo() -> std::io::Result<Upstream> {
        Self::start_mode(Mode::Albedo)
    }

    pub fn start_mode(mode: Mode) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let seen = seen2.clone();
                thread::spawn(move || serve(stream, seen, mode));
            }
        });
        Ok(Upstream { addr, seen, stop })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The received request whose target is exactly `target`, if any.
    pub fn find(&self, target: &str) -> Option<Seen> {
        self.seen().into_iter().find(|s| s.target == target)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so its thread ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// 64-bit FNV-1a: a dependency-free fingerprint of a body.
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The body the upstream answers for a request body.
pub fn reply_for(body: &[u8]) -> String {
    format!("upstream ok len={} fnv={:016x}", body.len(), fnv64(body))
}

/// albedo's answer to a request: status, headers, body.
pub fn albedo_reply(method: &str, target: &str, body: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let req = wafer_cli::crs::native::RawRequest {
        method: method.to_string(),
        uri: target.to_string(),
        version: "HTTP/1.1".into(),
        headers: Vec::new(),
        body: body.to_vec(),
    };
    wafer_cli::crs::native::reflect(&req)
}

/// The response bytes for albedo's answer (framing headers of the reflected set are replaced
/// by our own `content-length`).
fn albedo_response(method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let (status, headers, body) = albedo_reply(method, target, body);
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
    for (name, value) in &headers {
        let lower = name.to_ascii_lowercase();
        if matches!(lower.as_str(), "content-length" | "transfer-encoding" | "connection") {
            continue;
        }
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    let bodiless = status == 204 || status == 304 || (100..200).contains(&status);
    if bodiless {
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        if method != "HEAD" {
            out.extend_from_slice(&body);
        }
    }
    out
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "X",
    }
}

/// One `set-cookie` response line per `x-upstream-set-cookie` request header.
fn seen_cookies(headers: &[(String, String)]) -> String {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("x-upstream-set-cookie"))
        .map(|(_, v)| format!("set-cookie: {v}\r\n"))
        .collect()
}

fn serve(stream: TcpStream, seen: Arc<Mutex<Vec<Seen>>>, mode: Mode) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    // Keep-alive: serve requests until the peer closes.
    loop {
        let Ok(line) = read_line(&mut reader) else {
            return;
        };
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let Ok(headers) = read_headers(&mut reader) else {
            return;
        };
        let Ok(body) = read_body(&mut reader, &headers, false) else {
            return;
        };
        if mode == Mode::Albedo {
            let out = albedo_response(&method, &target, &body);
            if writer.write_all(&out).is_err() {
                return;
            }
            continue;
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let reply = match (get("x-upstream-reply"), get("x-upstream-size")) {
            (Some(text), _) => text,
            (None, Some(n)) => "r".repeat(n.parse().unwrap_or(0)),
            (None, None) => reply_for(&body),
        };
        let status: u16 = get("x-upstream-status")
            .and_then(|s| s.parse().ok())
            .unwrap_or(200);
        let cookies: String = seen_cookies(&headers);
        if let Ok(mut s) = seen.lock() {
            s.push(Seen {
                method,
                target,
                headers,
                body,
            });
        }
        let out = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\n{cookies}content-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if writer.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn serves_keep_alive_and_chunked() {
        use crate::client::{Conn, Request};
        let up = Upstream::start().expect("upstream");
        let mut conn = Conn::open(up.addr()).expect("connect");
        let r1 = conn
            .send(&Request::post("/a", "text/plain", "hello"))
            .expect("r1");
        assert_eq!(r1.body_text(), reply_for(b"hello"));
        let body = vec![b'x'; 3000];
        let req = Request::post("/b", "text/plain", body.clone()).chunked(1000, Duration::ZERO);
        let r2 = conn.send(&req).expect("r2");
        assert_eq!(r2.body_text(), reply_for(&body));
        assert_eq!(up.find("/b").map(|s| s.body.len()), Some(3000));
    }

    #[test]
    fn albedo_reflects() {
        use crate::client::{Conn, Request};
        let up = Upstream::albedo().expect("upstream");
        let mut conn = Conn::open(up.addr()).expect("connect");
        let r = conn.send(&Request::get("/status/200")).expect("get");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.header("content-type"), Some("text/plain"));
        let spec = r#"{"status":418,"headers":{"X-A":"b"},"encodedBody":"aGk="}"#;
        let r = conn.send(&Request::post("/reflect", "application/json", spec)).expect("reflect");
        assert_eq!((r.status, r.body_text().as_str()), (418, "hi"));
        assert_eq!(r.header("x-a"), Some("b"));
    }
}
