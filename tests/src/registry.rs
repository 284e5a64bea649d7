//! Distribution of the module in the tests: a real OCI registry on loopback, the skopeo
//! client, and a plain HTTP server for Envoy's remote fetch.
//!
//! [`Registry`] runs Debian's `docker-registry` (distribution 2.8) with its own config and
//! storage in a temporary directory, on a port the kernel picks (`127.0.0.1:0`; the real port
//! is read from its `listening on` log line), and kills it by PID on drop. `make tools`
//! installs it and skopeo.

use std::fs;
use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::client::{self, read_headers, read_line, Request};
use crate::envoy::TempDir;

/// How long the registry may take to listen.
const REGISTRY_START: Duration = Duration::from_secs(15);

/// A running `docker-registry`; killed on drop.
pub struct Registry {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    // Last: removed after the process is gone.
    dir: TempDir,
}

impl Registry {
    pub fn start() -> io::Result<Registry> {
        let dir = TempDir::new("registry")?;
        let config = dir.path().join("config.yml");
        let log = dir.path().join("registry.log");
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                 delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:0\n  secret: wafer-test-only\n",
                dir.path().join("data").display()
            ),
        )?;
        let file = fs::File::create(&log)?;
        let child = Command::new(tool("docker-registry"))
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("docker-registry: {e} (run `make tools`)")))?;
        let mut guard = Registry { child, addr: "127.0.0.1:0".parse().map_err(io::Error::other)?, log, dir };
        let deadline = Instant::now() + REGISTRY_START;
        loop {
            let text = fs::read_to_string(&guard.log).unwrap_or_default();
            if let Some(addr) = text
                .lines()
                .filter_map(|l| l.split("listening on ").nth(1))
                .filter_map(|rest| rest.split(['"', ' ']).next())
                .find_map(|a| a.parse::<SocketAddr>().ok())
            {
                guard.addr = addr;
                // `/v2/` answers `{}` once the API is up.
                if let Ok(resp) = client::send(addr, &Request::get("/v2/").header("Connection", "close")) {
                    if resp.status == 200 {
                        return Ok(guard);
                    }
                }
            }
            if let Ok(Some(status)) = guard.child.try_wait() {
                return Err(io::Error::other(format!("docker-registry exited ({status}):\n{text}")));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("docker-registry not ready after {REGISTRY_START:?}:\n{text}")));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// `docker://127.0.0.1:PORT/<repo>:<tag>`.
    pub fn reference(&self, repo_tag: &str) -> String {
        format!("docker://{}/{repo_tag}", self.addr)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A scratch directory that lives as long as the registry.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("---- docker-registry log ----\n{}", self.log());
        }
    }
}

/// A tool from PATH or Debian's location (`/usr/bin`, `/usr/sbin`).
pub fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(name)
}

/// The sha256 of a file, in hex (`sha256sum`).
pub fn sha256_hex(path: &std::path::Path) -> String {
    let out = run(Command::new("sha256sum").arg(path), Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    out.split_whitespace().next().unwrap_or_default().to_string()
}

/// Runs a command to completion (bounded by `timeout`), returning stdout; an error carries
/// the command line and its stderr.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<String, String> {
    let line = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{line}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{line}: still running after {timeout:?}, killed"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{line}: {e}")),
        }
    }
    let out = child.wait_with_output().map_err(|e| format!("{line}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{line}: {}\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A loopback HTTP/1.1 server with one file at one path (anything else: 404), counting the
/// requests for it: the "remote" of Envoy's remote wasm fetch.
pub struct FileServer {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FileServer {
    pub fn start(path: &str, body: Vec<u8>) -> io::Result<FileServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (hits2, stop2, path, body) = (hits.clone(), stop.clone(), path.to_string(), Arc::new(body));
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (hits, path, body) = (hits2.clone(), path.clone(), body.clone());
                thread::spawn(move || {
                    let _ = serve_file(stream, &path, &body, &hits);
                });
            }
        });
        Ok(FileServer { addr, hits, stop })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests for the file so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn serve_file(stream: TcpStream, path: &str, body: &[u8], hits: &AtomicUsize) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let line = read_line(&mut reader)?;
        if line.is_empty() {
            return Ok(());
        }
        let _headers = read_headers(&mut reader)?;
        let target = line.split(' ').nth(1).unwrap_or_default().to_string();
        if target == path {
            hits.fetch_add(1, Ordering::SeqCst);
            out.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/wasm\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )?;
            out.write_all(body)?;
        } else {
            out.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")?;
        }
        out.flush()?;
    }
}

/// An example bootstrap that fetches its module (`example`, relative to the repository) on the
/// kernel's ports: admin and listener on port 0, the backend at `upstream`, the module from
/// `server`, checked against `sha256` (written where the example has `placeholder`).
pub fn remote_example(example: &str, placeholder: &str, server: &FileServer, upstream: &crate::upstream::Upstream, sha256: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(example);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    crate::envoy::substituted(
        &text,
        &[
            ("port_value: 9901", "port_value: 0".to_string()),
            ("port_value: 8080", "port_value: 0".to_string()),
            ("port_value: 3000", format!("port_value: {}", upstream.addr().port())),
            ("port_value: 8000", format!("port_value: {}", server.addr().port())),
            ("127.0.0.1:8000", server.addr().to_string()),
            (placeholder, format!("\"{sha256}\"")),
        ],
    )
}
