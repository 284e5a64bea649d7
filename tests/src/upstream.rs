//! The upstream behind Envoy in the tests: an HTTP/1.1 server on std threads that records
//! what reached it and answers `200 upstream ok len=<n> fnv=<hash>` so a test can tell that a
//! body arrived whole.
//!
//! For response-side tests, request headers change the answer: `x-upstream-reply: <text>`
//! replaces the body, `x-upstream-size: <n>` makes it `n` bytes of `r`, and
//! `x-upstream-status: <code>` sets the status.

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

pub struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub fn start() -> std::io::Result<Upstream> {
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
                thread::spawn(move || serve(stream, seen));
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

fn serve(stream: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
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
        if let Ok(mut s) = seen.lock() {
            s.push(Seen {
                method,
                target,
                headers,
                body,
            });
        }
        let out = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{reply}",
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
}
