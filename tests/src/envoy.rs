//! Starting a real Envoy with wafer for one test, and stopping it whatever happens.
//!
//! wafer comes in two builds ([`Build`]): the proxy-wasm module (`target/wafer.wasm`) and the
//! dynamic module (`target/libwafer.so`); [`bootstrap`] loads either, and the end-to-end tests
//! run once per build.
//!
//! Each [`Envoy`] gets its own temporary directory (config, log, admin address file), binds
//! every port through the kernel (`port_value: 0`; the real ports are read back from the admin
//! interface), and runs with `--disable-hot-restart`, so parallel tests share no port and no
//! shared memory. Dropping the guard kills the process by PID; when the test is failing the
//! directory is kept and its path printed.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::client::{self, Request};

/// How long Envoy may take to say `LIVE` (V8 compiles the module and wafer its rules).
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Which build of wafer Envoy loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// `target/wafer.wasm` in `envoy.filters.http.wasm` (V8).
    Wasm,
    /// `target/libwafer.so` in `envoy.filters.http.dynamic_modules`.
    Native,
}

impl Build {
    pub const ALL: [Build; 2] = [Build::Wasm, Build::Native];

    /// `wasm` / `native`, for labels and messages.
    pub fn name(self) -> &'static str {
        match self {
            Build::Wasm => "wasm",
            Build::Native => "native",
        }
    }

    /// Envoy's name for one of wafer's counters (`wafer.transactions`, ...): the same names
    /// under the namespace Envoy gives the build's custom stats.
    pub fn stat(self, name: &str) -> String {
        match self {
            Build::Wasm => format!("wasmcustom.{name}"),
            Build::Native => format!("dynamicmodulescustom.{name}"),
        }
    }

    /// Whether wafer wrote this line of Envoy's log (default log format): the wasm module's
    /// lines are Envoy's `wasm log`, the dynamic module's name wafer's source file.
    pub fn wafer_wrote(self, line: &str) -> bool {
        match self {
            Build::Wasm => line.contains("wasm log"),
            Build::Native => line.contains("] [filter/src/") || line.contains("] [envoy-dynamic/src/"),
        }
    }
}

/// One build of wafer, ready to load.
#[derive(Clone, Copy, Debug)]
pub struct Module<'a> {
    pub build: Build,
    pub path: &'a Path,
}

/// Paths handed over by `make test`.
#[derive(Clone, Debug)]
pub struct Setup {
    pub envoy: PathBuf,
    pub wasm: PathBuf,
    pub native: PathBuf,
}

impl Setup {
    /// Reads `WAFER_ENVOY`, `WAFER_WASM` and `WAFER_NATIVE`. Panics (the test fails) when one
    /// is missing: end-to-end tests must never pass by skipping.
    pub fn from_env() -> Setup {
        let get = |var: &str| -> PathBuf {
            let value = std::env::var_os(var).unwrap_or_else(|| {
                panic!(
                    "{var} is not set: the end-to-end tests need a real Envoy and both wafer \
                     builds. Run them with `make test` (it installs Envoy, builds \
                     target/wafer.wasm and target/libwafer.so and sets WAFER_ENVOY / \
                     WAFER_WASM / WAFER_NATIVE)."
                )
            });
            let path = PathBuf::from(value);
            assert!(
                path.exists(),
                "{var}={} does not exist; run `make test` (or `make tools wasm native`)",
                path.display()
            );
            path
        };
        Setup {
            envoy: get("WAFER_ENVOY"),
            wasm: get("WAFER_WASM"),
            native: get("WAFER_NATIVE"),
        }
    }

    /// The module of `build`.
    pub fn module(&self, build: Build) -> Module<'_> {
        let path = match build {
            Build::Wasm => &self.wasm,
            Build::Native => &self.native,
        };
        Module { build, path }
    }
}

/// Escapes a string as a JSON (and so YAML flow) string literal (the engine's request-log quoting).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    wafer::config::json::quote(&mut out, s);
    out
}

/// The plugin configuration that loads one embedded tier for every host.
pub fn tier_config(tier: &str) -> String {
    format!(
        r#"{{"directives_map":{{"default":["Include {tier}"]}},"default_directives":"default"}}"#
    )
}

/// The `http_filters` of a connection manager: wafer (the `module`, with `plugin_config` as
/// its configuration), then the router. Indented for the listener layout of [`bootstrap`].
pub fn wafer_http_filters(module: Module, plugin_config: &str) -> String {
    match module.build {
        Build::Wasm => wasm_http_filters(module.path, plugin_config),
        Build::Native => native_http_filters(module.path, plugin_config),
    }
}

/// [`wafer_http_filters`] for the dynamic module: Envoy loads the file named (a module already
/// loaded into the process is reused).
fn native_http_filters(path: &Path, plugin_config: &str) -> String {
    format!(
        r#"          http_filters:
          - name: envoy.filters.http.dynamic_modules
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter
              dynamic_module_config: {{ module: {{ local: {{ filename: {path} }} }} }}
              filter_name: wafer
              filter_config:
                "@type": type.googleapis.com/google.protobuf.StringValue
                value: {config}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"#,
        config = json_string(plugin_config),
        path = json_string(&path.display().to_string()),
    )
}

fn wasm_http_filters(wasm: &Path, plugin_config: &str) -> String {
    format!(
        r#"          http_filters:
          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: wafer
                root_id: wafer
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: {config}
                vm_config:
                  vm_id: wafer
                  runtime: envoy.wasm.runtime.v8
                  code: {{ local: {{ filename: {wasm} }} }}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"#,
        config = json_string(plugin_config),
        wasm = json_string(&wasm.display().to_string()),
    )
}

/// A bootstrap with one listener (port chosen by the kernel): wafer, then the router to
/// `upstream`. `plugin_config` is the JSON handed to wafer as a string.
pub fn bootstrap(module: Module, plugin_config: &str, upstream: SocketAddr) -> String {
    bootstrap_buffered(module, plugin_config, upstream, None)
}

/// [`bootstrap`] with the listener's and the upstream cluster's
/// `per_connection_buffer_limit_bytes` set (Envoy's default: 1 MiB; a filter holding a
/// larger body gets Envoy's own 413 past it).
pub fn bootstrap_buffered(module: Module, plugin_config: &str, upstream: SocketAddr, buffer_limit: Option<u64>) -> String {
    let limit = buffer_limit.map(|n| format!("\n    per_connection_buffer_limit_bytes: {n}")).unwrap_or_default();
    format!(
        r#"admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}{limit}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route: {{ cluster: upstream, timeout: 20s }}
{filters}
  clusters:
  - name: upstream
    connect_timeout: 2s
    type: STATIC{limit}
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint:
            address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }}
"#,
        filters = wafer_http_filters(module, plugin_config),
        ip = upstream.ip(),
        port = upstream.port(),
    )
}

/// `text` (an example configuration) with each `from` replaced by its `to`; panics when the text
/// no longer has one of them (the example changed under the test).
pub fn substituted(text: &str, subs: &[(&str, String)]) -> String {
    let mut out = text.to_string();
    for (from, to) in subs {
        assert!(out.contains(from), "the example no longer has {from:?}");
        out = out.replace(from, to);
    }
    out
}

/// A per-test scratch directory.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> io::Result<TempDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!(
            "wafer-e2e-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let path = std::env::temp_dir().join(name);
        fs::create_dir_all(&path)?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// How a start attempt ended.
pub enum Start {
    Live(Envoy),
    /// Envoy exited before becoming ready; its log explains why.
    Exited {
        code: Option<i32>,
        log: String,
    },
    /// Still not ready after [`START_TIMEOUT`] (the process has been killed).
    TimedOut {
        log: String,
    },
}

/// How to run Envoy, beyond the bootstrap.
#[derive(Clone, Debug)]
pub struct Options {
    /// Log level of wafer's lines (Envoy's components `wasm` and `dynamic_modules`).
    pub wafer_log: String,
    /// `--concurrency` (worker threads).
    pub concurrency: u32,
    /// Read stderr through a pipe into [`LiveLog`] as it is written (the log file still gets
    /// every line). File reads can trail Envoy's buffered writes; the pipe cannot.
    pub capture: bool,
    /// More command-line flags (e.g. `--log-format`).
    pub extra_args: Vec<String>,
    /// Environment variables for Envoy (e.g. `ENVOY_DYNAMIC_MODULES_SEARCH_PATH`).
    pub env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            wafer_log: "info".into(),
            concurrency: 1,
            capture: false,
            extra_args: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// Envoy's stderr, line by line, as it arrives. Lines are numbered from 0 for the life of the
/// process; [`LiveLog::forget_before`] frees old ones (their numbers stay taken).
#[derive(Default)]
pub struct LiveLog {
    state: Mutex<LiveState>,
    grew: Condvar,
}

#[derive(Default)]
struct LiveState {
    /// Number of the first line in `lines`.
    base: usize,
    lines: Vec<String>,
    closed: bool,
}

impl LiveLog {
    fn push(&self, line: String) {
        if let Ok(mut st) = self.state.lock() {
            st.lines.push(line);
        }
        self.grew.notify_all();
    }

    fn close(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.closed = true;
        }
        self.grew.notify_all();
    }

    /// The number the next line will get.
    pub fn end(&self) -> usize {
        self.state.lock().map(|st| st.base + st.lines.len()).unwrap_or(0)
    }

    /// Waits (bounded) for the first line numbered `from` or later that satisfies `pred`;
    /// its number, or None on timeout (or when Envoy's stderr closed).
    pub fn wait_for(&self, from: usize, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().ok()?;
        let mut next = from.max(st.base);
        loop {
            while next < st.base + st.lines.len() {
                if pred(&st.lines[next - st.base]) {
                    return Some(next);
                }
                next += 1;
            }
            let now = Instant::now();
            if st.closed || now >= deadline {
                return None;
            }
            st = self.grew.wait_timeout(st, deadline - now).ok()?.0;
        }
    }

    /// Copies of the lines numbered `from..to` (those still kept).
    pub fn lines(&self, from: usize, to: usize) -> Vec<String> {
        let Ok(st) = self.state.lock() else {
            return Vec::new();
        };
        let lo = from.max(st.base) - st.base;
        let hi = to.min(st.base + st.lines.len()).saturating_sub(st.base);
        st.lines.get(lo..hi.max(lo)).map(<[String]>::to_vec).unwrap_or_default()
    }

    /// Frees the lines numbered below `line`.
    pub fn forget_before(&self, line: usize) {
        if let Ok(mut st) = self.state.lock() {
            let n = line.saturating_sub(st.base).min(st.lines.len());
            st.lines.drain(..n);
            st.base += n;
        }
    }
}

/// A running Envoy; killed on drop.
pub struct Envoy {
    child: Child,
    pub admin: SocketAddr,
    pub listener: SocketAddr,
    log_path: PathBuf,
    /// Set when started with [`Options::capture`].
    live: Option<Arc<LiveLog>>,
    // Last: removed after the process is gone.
    _dir: TempDir,
}

impl Envoy {
    /// Starts Envoy on `yaml` and waits until it is ready.
    pub fn start(setup: &Setup, label: &str, yaml: &str) -> io::Result<Start> {
        Self::start_with(setup, label, yaml, "info")
    }

    /// Like [`Envoy::start`] with another log level for wafer's lines.
    pub fn start_with(setup: &Setup, label: &str, yaml: &str, wafer_log: &str) -> io::Result<Start> {
        let options = Options {
            wafer_log: wafer_log.into(),
            ..Options::default()
        };
        Self::start_opts(setup, label, yaml, &options)
    }

    /// Like [`Envoy::start`] with [`Options`].
    pub fn start_opts(setup: &Setup, label: &str, yaml: &str, options: &Options) -> io::Result<Start> {
        let dir = TempDir::new(label)?;
        let config = dir.path().join("envoy.yaml");
        let log_path = dir.path().join("envoy.log");
        let admin_path = dir.path().join("admin.addr");
        fs::write(&config, yaml)?;
        let log = fs::File::create(&log_path)?;
        let mut command = Command::new(&setup.envoy);
        command
            .arg("-c")
            .arg(&config)
            .args(["--concurrency", &options.concurrency.to_string(), "--disable-hot-restart"])
            .args([
                "-l",
                "warning",
                "--component-log-level",
                &format!("wasm:{0},dynamic_modules:{0}", options.wafer_log),
            ])
            .args(&options.extra_args)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .arg("--admin-address-path")
            .arg(&admin_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?);
        if options.capture {
            command.stderr(Stdio::piped());
        } else {
            command.stderr(log.try_clone()?);
        }
        let mut child = command.spawn()?;
        let live = match child.stderr.take() {
            Some(stderr) => {
                let live = Arc::new(LiveLog::default());
                let (live2, mut file) = (live.clone(), log);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stderr);
                    let mut buf = Vec::new();
                    loop {
                        buf.clear();
                        match reader.read_until(b'\n', &mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                let _ = file.write_all(&buf);
                                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                                    buf.pop();
                                }
                                live2.push(String::from_utf8_lossy(&buf).into_owned());
                            }
                        }
                    }
                    live2.close();
                });
                Some(live)
            }
            None => None,
        };
        let mut guard = Starting { child: Some(child) };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = guard.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    guard.child = None;
                    return Ok(Start::Exited {
                        code: status.code(),
                        log: read(&log_path),
                    });
                }
            }
            if let Some(admin) = fs::read_to_string(&admin_path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                if admin_get(admin, "/ready").is_ok_and(|b| b.trim() == "LIVE") {
                    let listener = admin_get(admin, "/listeners")
                        .ok()
                        .and_then(|text| parse_listener(&text, "main"));
                    if let (Some(listener), Some(child)) = (listener, guard.child.take()) {
                        return Ok(Start::Live(Envoy {
                            child,
                            admin,
                            listener,
                            log_path,
                            live,
                            _dir: dir,
                        }));
                    }
                }
            }
            if Instant::now() > deadline {
                drop(guard);
                return Ok(Start::TimedOut {
                    log: read(&log_path),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts and insists on `LIVE`; panics with Envoy's log otherwise.
    pub fn start_live(setup: &Setup, label: &str, yaml: &str) -> Envoy {
        match Envoy::start(setup, label, yaml) {
            Ok(Start::Live(envoy)) => envoy,
            Ok(Start::Exited { code, log }) => {
                panic!("envoy exited ({code:?}) during start:\n{log}")
            }
            Ok(Start::TimedOut { log }) => {
                panic!("envoy not LIVE after {START_TIMEOUT:?}:\n{log}")
            }
            Err(err) => panic!("cannot start envoy {}: {err}", setup.envoy.display()),
        }
    }

    /// Starts with [`Options`] and insists on `LIVE`; panics with Envoy's log otherwise.
    pub fn start_live_opts(setup: &Setup, label: &str, yaml: &str, options: &Options) -> Envoy {
        match Envoy::start_opts(setup, label, yaml, options) {
            Ok(Start::Live(envoy)) => envoy,
            Ok(Start::Exited { code, log }) => {
                panic!("envoy exited ({code:?}) during start:\n{log}")
            }
            Ok(Start::TimedOut { log }) => {
                panic!("envoy not LIVE after {START_TIMEOUT:?}:\n{log}")
            }
            Err(err) => panic!("cannot start envoy {}: {err}", setup.envoy.display()),
        }
    }

    /// The live stderr lines (only with [`Options::capture`]).
    pub fn live(&self) -> Option<&Arc<LiveLog>> {
        self.live.as_ref()
    }

    /// The process id (for reading its memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Envoy's combined stdout/stderr so far.
    pub fn log(&self) -> String {
        read(&self.log_path)
    }

    /// Waits (bounded) for `needle` to appear in the log; log writes may trail the response.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_for(timeout, |log| log.contains(needle))
    }

    /// Waits (bounded) until the log satisfies `pred`.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(&self.log()) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The value of one counter from the admin `/stats` (0 when absent).
    pub fn counter(&self, name: &str) -> u64 {
        let stats = admin_get(self.admin, &format!("/stats?filter=^{name}$")).unwrap_or_default();
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- envoy log ({}) ----\n{}",
                self.log_path.display(),
                tail(&self.log(), 200)
            );
        }
    }
}

/// Kills a child that never became a ready [`Envoy`].
struct Starting {
    child: Option<Child>,
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn read(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// GET on the admin interface; the body as text.
pub fn admin_get(admin: SocketAddr, path: &str) -> io::Result<String> {
    let resp = client::send(admin, &Request::get(path).header("Connection", "close"))?;
    Ok(resp.body_text())
}

/// Finds `name::ip:port` in the admin `/listeners` text.
fn parse_listener(text: &str, name: &str) -> Option<SocketAddr> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}::")))
        .and_then(|addr| addr.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escaping() {
        assert_eq!(json_string(r#"{"a":"b\c"}"#), r#""{\"a\":\"b\\c\"}""#);
        assert_eq!(json_string("x\ny"), r#""x\ny""#);
    }

    #[test]
    fn listener_lines() {
        let text = "admin::127.0.0.1:1\nmain::127.0.0.1:40000\n";
        assert_eq!(parse_listener(text, "main"), "127.0.0.1:40000".parse().ok());
        assert_eq!(parse_listener(text, "other"), None);
    }
}
