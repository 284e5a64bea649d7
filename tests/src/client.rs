//! A minimal HTTP/1.1 client over raw TCP: enough to send exactly the bytes a test wants
//! (including malformed ones) and to read one response.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How a request body is framed on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` (omitted for an empty body on GET/HEAD).
    Length,
    /// `Transfer-Encoding: chunked`, the body cut into chunks of this size; with `pause` the
    /// client waits between chunks so the proxy sees several body callbacks.
    Chunked { chunk: usize, pause: Duration },
    /// `Content-Length`, the body sent in parts of this size with a pause after each, so the
    /// proxy sees several body callbacks.
    Paced { chunk: usize, pause: Duration },
}

#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Request target as sent (already percent-encoded as the test wants).
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub framing: Framing,
}

impl Request {
    pub fn get(target: &str) -> Request {
        Request {
            method: "GET".into(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
            framing: Framing::Length,
        }
    }

    pub fn post(target: &str, content_type: &str, body: impl Into<Vec<u8>>) -> Request {
        Request {
            method: "POST".into(),
            target: target.into(),
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
            framing: Framing::Length,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn chunked(mut self, chunk: usize, pause: Duration) -> Request {
        self.framing = Framing::Chunked {
            chunk: chunk.max(1),
            pause,
        };
        self
    }

    pub fn paced(mut self, chunk: usize, pause: Duration) -> Request {
        self.framing = Framing::Paced {
            chunk: chunk.max(1),
            pause,
        };
        self
    }

    /// The request head (request line and headers).
    fn head(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.target);
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        if !has("host") {
            out.push_str("Host: localhost\r\n");
        }
        if !has("user-agent") {
            out.push_str("User-Agent: wafer-e2e/1.0\r\n");
        }
        if !has("accept") {
            out.push_str("Accept: */*\r\n");
        }
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        match self.framing {
            Framing::Length | Framing::Paced { .. } => {
                if !self.body.is_empty() || !matches!(self.method.as_str(), "GET" | "HEAD") {
                    out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
                }
            }
            Framing::Chunked { .. } => out.push_str("Transfer-Encoding: chunked\r\n"),
        }
        out.push_str("\r\n");
        out.into_bytes()
    }
}

#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One client connection; several requests may use it in turn (keep-alive).
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.set_write_timeout(Some(Duration::from_secs(20)))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(stream),
        })
    }

    pub fn send(&mut self, req: &Request) -> io::Result<Response> {
        let stream = self.reader.get_mut();
        match &req.framing {
            Framing::Length => {
                let mut bytes = req.head();
                bytes.extend_from_slice(&req.body);
                stream.write_all(&bytes)?;
            }
            Framing::Chunked { chunk, pause } => {
                stream.write_all(&req.head())?;
                for part in req.body.chunks(*chunk) {
                    let mut bytes = format!("{:x}\r\n", part.len()).into_bytes();
                    bytes.extend_from_slice(part);
                    bytes.extend_from_slice(b"\r\n");
                    // The proxy may answer (block) before the body is complete and close.
                    if stream.write_all(&bytes).is_err() {
                        break;
                    }
                    if !pause.is_zero() {
                        std::thread::sleep(*pause);
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n");
            }
            Framing::Paced { chunk, pause } => {
                stream.write_all(&req.head())?;
                for part in req.body.chunks(*chunk) {
                    // The proxy may answer (block) before the body is complete and close.
                    if stream.write_all(part).is_err() {
                        break;
                    }
                    stream.flush()?;
                    std::thread::sleep(*pause);
                }
            }
        }
        stream.flush()?;
        read_response(&mut self.reader, req.method == "HEAD")
    }
}

/// Sends one request on a fresh connection.
pub fn send(addr: SocketAddr, req: &Request) -> io::Result<Response> {
    Conn::open(addr)?.send(req)
}

/// Reads one line without its CRLF.
pub(crate) fn read_line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut line = Vec::new();
    let n = r.take(64 * 1024).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Reads header lines up to the empty line.
pub(crate) fn read_headers<R: BufRead>(r: &mut R) -> io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)?;
        if line.is_empty() {
            return Ok(headers);
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
}

/// Reads a body framed by `Content-Length`, chunked encoding, or (with `until_eof`) the end of
/// the connection.
pub(crate) fn read_body<R: BufRead>(
    r: &mut R,
    headers: &[(String, String)],
    until_eof: bool,
) -> io::Result<Vec<u8>> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        let mut body = Vec::new();
        loop {
            let size_line = read_line(r)?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_hex, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                // Trailers, then the empty line.
                read_headers(r)?;
                return Ok(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            read_line(r)?;
        }
    }
    if let Some(len) = get("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        return Ok(body);
    }
    let mut body = Vec::new();
    if until_eof {
        r.read_to_end(&mut body)?;
    }
    Ok(body)
}

fn read_response<R: BufRead>(r: &mut R, head_only: bool) -> io::Result<Response> {
    let status_line = read_line(r)?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            )
        })?;
    let headers = read_headers(r)?;
    let body = if head_only || status == 204 || status == 304 {
        Vec::new()
    } else {
        read_body(r, &headers, true)?
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_chunked_and_length_bodies() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let resp = read_response(&mut &raw[..], false).expect("parse");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"abcde");
        let raw = b"HTTP/1.1 403 Forbidden\r\ncontent-length: 4\r\n\r\nnope";
        let resp = read_response(&mut &raw[..], false).expect("parse");
        assert_eq!((resp.status, resp.body_text().as_str()), (403, "nope"));
    }

    #[test]
    fn head_has_framing() {
        let head = Request::post("/x", "application/json", "{}").head();
        let head = String::from_utf8(head).expect("ascii");
        assert!(head.starts_with("POST /x HTTP/1.1\r\n"));
        assert!(head.contains("Content-Length: 2\r\n"));
        let head = Request::get("/").head();
        assert!(!String::from_utf8_lossy(&head).contains("Content-Length"));
    }
}
