//! The proxy-wasm ABI (version 0.2.1) as wafer uses it: the host functions it calls, the
//! callbacks it exports, and the contexts those callbacks reach.
//!
//! Written here instead of taken from the proxy-wasm SDK because the host charges for every
//! callback a module exports and for every allocation a request makes (measured with
//! `bench/instructions.py` on minimal modules: each exported callback Envoy calls per request
//! costs ~2 K instructions, the SDK's dispatch ~1.7 K more per request), and because the
//! SDK's host calls panic on a status they do not expect (a panic kills every request on the
//! worker). So:
//!
//! - `proxy_on_done` is not exported: the host then treats every context as done at once,
//!   which is what the SDK's default answered. Nor is `proxy_on_log`: a stream's logging phase
//!   runs in `proxy_on_delete`, which Envoy calls right after it, for every stream whose
//!   context was created (completed or reset). Nor are the network-filter, gRPC, queue and
//!   foreign function callbacks, nor `proxy_on_http_call_response` (the request log's
//!   collector call is fire-and-forget).
//! - Streams live in a map keyed by context id with a multiplicative hash (ids are small
//!   sequential integers), in boxes that are kept for the next stream instead of freed.
//! - Every host call returns the status it got as an error; none panics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::http::WaferHttp;
use crate::WaferRoot;

/// Values as the ABI defines them.
pub(crate) mod types {
    pub(crate) type Bytes = Vec<u8>;

    /// What a stream callback tells the host.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum Action {
        Continue = 0,
        /// Envoy: stop iteration (and, for bodies, buffer).
        Pause = 1,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum LogLevel {
        Info = 2,
        Warn = 3,
        Error = 4,
        Critical = 5,
    }

    /// A host call's result other than success (the ABI's `WasmResult`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Status {
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

    impl Status {
        /// `Ok(())` for 0, else the status.
        pub(crate) fn check(raw: u32) -> Result<(), Status> {
            Err(match raw {
                0 => return Ok(()),
                1 => Status::NotFound,
                2 => Status::BadArgument,
                3 => Status::SerializationFailure,
                4 => Status::ParseFailure,
                7 => Status::Empty,
                8 => Status::CasMismatch,
                10 => Status::InternalFailure,
                12 => Status::Unimplemented,
                other => Status::Other(other),
            })
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum BufferType {
        HttpRequestBody = 0,
        HttpResponseBody = 1,
        PluginConfiguration = 7,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum MapType {
        HttpRequestHeaders = 0,
        HttpResponseHeaders = 2,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u32)]
    pub(crate) enum MetricType {
        Counter = 0,
        Gauge = 1,
    }
}

/// The host functions (module `env`), each wrapped so that host data never reaches a panic.
pub(crate) mod hostcalls {
    use std::ptr::{null, null_mut};
    use std::time::Duration;

    use super::types::{BufferType, Bytes, LogLevel, MapType, MetricType, Status};

    #[link(wasm_import_module = "env")]
    extern "C" {
        fn proxy_log(level: u32, message_data: *const u8, message_size: usize) -> u32;
        fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
        fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
        fn proxy_get_buffer_bytes(buffer_type: u32, start: usize, max_size: usize, return_data: *mut *mut u8, return_size: *mut usize) -> u32;
        fn proxy_get_header_map_value(map_type: u32, key_data: *const u8, key_size: usize, return_data: *mut *mut u8, return_size: *mut usize) -> u32;
        fn proxy_replace_header_map_value(map_type: u32, key_data: *const u8, key_size: usize, value_data: *const u8, value_size: usize) -> u32;
        fn proxy_add_header_map_value(map_type: u32, key_data: *const u8, key_size: usize, value_data: *const u8, value_size: usize) -> u32;
        fn proxy_remove_header_map_value(map_type: u32, key_data: *const u8, key_size: usize) -> u32;
        fn proxy_get_shared_data(key_data: *const u8, key_size: usize, return_data: *mut *mut u8, return_size: *mut usize, return_cas: *mut u32) -> u32;
        fn proxy_set_shared_data(key_data: *const u8, key_size: usize, value_data: *const u8, value_size: usize, cas: u32) -> u32;
        #[allow(clippy::too_many_arguments)]
        fn proxy_send_local_response(
            status_code: u32,
            details_data: *const u8,
            details_size: usize,
            body_data: *const u8,
            body_size: usize,
            headers_data: *const u8,
            headers_size: usize,
            grpc_status: i32,
        ) -> u32;
        #[allow(clippy::too_many_arguments)]
        fn proxy_http_call(
            upstream_data: *const u8,
            upstream_size: usize,
            headers_data: *const u8,
            headers_size: usize,
            body_data: *const u8,
            body_size: usize,
            trailers_data: *const u8,
            trailers_size: usize,
            timeout_ms: u32,
            return_token: *mut u32,
        ) -> u32;
        fn proxy_define_metric(metric_type: u32, name_data: *const u8, name_size: usize, return_id: *mut u32) -> u32;
        fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
        fn proxy_record_metric(metric_id: u32, value: u64) -> u32;
    }

    /// Takes back a buffer the host filled: it was allocated by `proxy_on_memory_allocate`
    /// (a `Vec<u8>` of capacity `size`, forgotten), so it is freed with the same layout.
    ///
    /// # Safety
    /// `data` is null or what the host returned with `size` from such an allocation.
    unsafe fn taken(data: *mut u8, size: usize) -> Option<Bytes> {
        // SAFETY: the caller's contract.
        (!data.is_null()).then(|| unsafe { Vec::from_raw_parts(data, size, size) })
    }

    /// Writes one line to Envoy's log (component `wasm`); Envoy drops it below its level.
    pub(crate) fn log(level: LogLevel, message: &str) -> Result<(), Status> {
        // SAFETY: the message is readable for its length.
        Status::check(unsafe { proxy_log(level as u32, message.as_ptr(), message.len()) })
    }

    /// Nanoseconds since the Unix epoch, by the host's clock.
    pub(crate) fn current_time_nanos() -> Result<u64, Status> {
        let mut t = 0u64;
        // SAFETY: the host writes one u64.
        Status::check(unsafe { proxy_get_current_time_nanoseconds(&mut t) })?;
        Ok(t)
    }

    pub(crate) fn set_tick_period(period: Duration) -> Result<(), Status> {
        let ms = u32::try_from(period.as_millis()).unwrap_or(u32::MAX);
        // SAFETY: no memory is passed.
        Status::check(unsafe { proxy_set_tick_period_milliseconds(ms) })
    }

    /// `max_size` bytes of a buffer from `start`; `None` when the host has none.
    pub(crate) fn get_buffer(buffer: BufferType, start: usize, max_size: usize) -> Result<Option<Bytes>, Status> {
        let (mut data, mut size) = (null_mut(), 0usize);
        // SAFETY: the host writes a pointer and a size (see `taken`).
        match Status::check(unsafe { proxy_get_buffer_bytes(buffer as u32, start, max_size, &mut data, &mut size) }) {
            // SAFETY: as above.
            Ok(()) => Ok(unsafe { taken(data, size) }),
            Err(Status::NotFound) => Ok(None),
            Err(status) => Err(status),
        }
    }

    /// The value of a header (`Some(empty)` for an empty one); `None` when absent.
    pub(crate) fn get_map_value_bytes(map: MapType, key: &str) -> Result<Option<Bytes>, Status> {
        let (mut data, mut size) = (null_mut(), 0usize);
        // SAFETY: the key is readable; the host writes a pointer and a size (see `taken`).
        match Status::check(unsafe { proxy_get_header_map_value(map as u32, key.as_ptr(), key.len(), &mut data, &mut size) }) {
            // SAFETY: as above.
            Ok(()) => Ok(Some(unsafe { taken(data, size) }.unwrap_or_default())),
            Err(Status::NotFound) => Ok(None),
            Err(status) => Err(status),
        }
    }

    /// Replaces a header's values with `value`, or removes the header (`None`).
    pub(crate) fn set_map_value(map: MapType, key: &str, value: Option<&str>) -> Result<(), Status> {
        match value {
            // SAFETY: key and value are readable for their lengths.
            Some(v) => Status::check(unsafe { proxy_replace_header_map_value(map as u32, key.as_ptr(), key.len(), v.as_ptr(), v.len()) }),
            None => remove_map_value(map, key),
        }
    }

    pub(crate) fn add_map_value_bytes(map: MapType, key: &str, value: &[u8]) -> Result<(), Status> {
        // SAFETY: key and value are readable for their lengths.
        Status::check(unsafe { proxy_add_header_map_value(map as u32, key.as_ptr(), key.len(), value.as_ptr(), value.len()) })
    }

    pub(crate) fn remove_map_value(map: MapType, key: &str) -> Result<(), Status> {
        // SAFETY: the key is readable for its length.
        Status::check(unsafe { proxy_remove_header_map_value(map as u32, key.as_ptr(), key.len()) })
    }

    /// A VM-shared value and its compare-and-swap token; `(None, None)` when absent.
    pub(crate) fn get_shared_data(key: &str) -> Result<(Option<Bytes>, Option<u32>), Status> {
        let (mut data, mut size, mut cas) = (null_mut(), 0usize, 0u32);
        // SAFETY: the key is readable; the host writes a pointer, a size (see `taken`) and a u32.
        match Status::check(unsafe { proxy_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut size, &mut cas) }) {
            // SAFETY: as above.
            Ok(()) => Ok((unsafe { taken(data, size) }, (cas != 0).then_some(cas))),
            Err(Status::NotFound) => Ok((None, None)),
            Err(status) => Err(status),
        }
    }

    /// Stores a VM-shared value; with `cas`, only if nobody stored one since that token
    /// (`Err(CasMismatch)` otherwise).
    pub(crate) fn set_shared_data(key: &str, value: Option<&[u8]>, cas: Option<u32>) -> Result<(), Status> {
        let (p, n) = value.map_or((null(), 0), |v| (v.as_ptr(), v.len()));
        // SAFETY: key and value are readable for their lengths.
        Status::check(unsafe { proxy_set_shared_data(key.as_ptr(), key.len(), p, n, cas.unwrap_or(0)) })
    }

    /// The ABI's map serialization: count, (name length, value length) pairs, then each
    /// name and value followed by a NUL.
    pub(crate) fn serialize_map(map: &[(&str, &str)]) -> Bytes {
        let size = 4 + map.iter().map(|(n, v)| n.len() + v.len() + 10).sum::<usize>();
        let mut out = Vec::with_capacity(size);
        let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
        out.extend_from_slice(&len(map.len()));
        for (n, v) in map {
            out.extend_from_slice(&len(n.len()));
            out.extend_from_slice(&len(v.len()));
        }
        for (n, v) in map {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
            out.extend_from_slice(v.as_bytes());
            out.push(0);
        }
        out
    }

    /// Sends a local reply (no gRPC status); Envoy stops the stream's filter iteration.
    pub(crate) fn send_http_response(status: u32, headers: &[(&str, &str)], body: &[u8]) -> Result<(), Status> {
        let headers = serialize_map(headers);
        // SAFETY: body and headers are readable for their lengths; no details are passed.
        Status::check(unsafe { proxy_send_local_response(status, null(), 0, body.as_ptr(), body.len(), headers.as_ptr(), headers.len(), -1) })
    }

    /// Starts an HTTP call to a cluster; its response is not read. Returns the call's token.
    pub(crate) fn dispatch_http_call(upstream: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<u32, Status> {
        let headers = serialize_map(headers);
        let trailers = serialize_map(&[]);
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let mut token = 0u32;
        // SAFETY: every buffer is readable for its length; the host writes one u32.
        Status::check(unsafe {
            proxy_http_call(
                upstream.as_ptr(),
                upstream.len(),
                headers.as_ptr(),
                headers.len(),
                body.as_ptr(),
                body.len(),
                trailers.as_ptr(),
                trailers.len(),
                ms,
                &mut token,
            )
        })?;
        Ok(token)
    }

    pub(crate) fn define_metric(kind: MetricType, name: &str) -> Result<u32, Status> {
        let mut id = 0u32;
        // SAFETY: the name is readable; the host writes one u32.
        Status::check(unsafe { proxy_define_metric(kind as u32, name.as_ptr(), name.len(), &mut id) })?;
        Ok(id)
    }

    pub(crate) fn increment_metric(id: u32, offset: i64) -> Result<(), Status> {
        // SAFETY: no memory is passed.
        Status::check(unsafe { proxy_increment_metric(id, offset) })
    }

    pub(crate) fn record_metric(id: u32, value: u64) -> Result<(), Status> {
        // SAFETY: no memory is passed.
        Status::check(unsafe { proxy_record_metric(id, value) })
    }
}

/// Context ids are small integers handed out in order: a multiplication spreads them over
/// the hash's high bits (the map's tag) and keeps consecutive ids apart in its low bits.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Most stream boxes kept for later streams.
const STREAMS_KEEP: usize = 256;

#[derive(Default)]
struct Contexts {
    /// Root contexts (one per plugin configuration sharing this VM) by id.
    roots: Vec<(u32, WaferRoot)>,
    streams: HashMap<u32, Box<WaferHttp>, BuildHasherDefault<IdHasher>>,
    /// Boxes of ended streams, emptied, for the next ones (boxed, so that handing one to
    /// the map and back moves a pointer, not a stream).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<WaferHttp>>,
}

thread_local! {
    static CONTEXTS: RefCell<Contexts> = RefCell::new(Contexts::default());
}

impl Contexts {
    fn root(&mut self, id: u32) -> Option<&mut WaferRoot> {
        self.roots.iter_mut().find(|(i, _)| *i == id).map(|(_, r)| r)
    }
}

/// Runs `f` on the contexts; `None` when they are already in use (a host call re-entering a
/// callback, which the ABI does not do) or the thread is ending.
fn with_contexts<R>(f: impl FnOnce(&mut Contexts) -> R) -> Option<R> {
    CONTEXTS.try_with(|c| c.try_borrow_mut().ok().map(|mut c| f(&mut c))).ok().flatten()
}

/// Runs `f` on stream `id`'s context; `default` when there is none.
fn with_stream<R>(id: u32, default: R, f: impl FnOnce(&mut WaferHttp) -> R) -> R {
    with_contexts(|c| c.streams.get_mut(&id).map(|s| f(s))).flatten().unwrap_or(default)
}

fn action(a: types::Action) -> u32 {
    a as u32
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// WASI reactor start: runs the C and Rust static constructors (wasi-libc's among them).
#[cfg(target_os = "wasi")]
#[no_mangle]
pub extern "C" fn _initialize() {
    extern "C" {
        fn __wasm_call_ctors();
    }
    // SAFETY: called once by the host, before any other export.
    unsafe { __wasm_call_ctors() }
}

/// The host asks for `size` bytes it will fill and hand back (host calls returning data):
/// what a `Vec<u8>` of capacity `size` would allocate, taken back as one (see
/// `hostcalls::taken`). Null when the memory cannot be had (the linear memory cannot grow):
/// the host then fails the call it was making (`InvalidMemoryAccess`), which the callers
/// answer, instead of the VM trapping on a failed allocation.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut v: Vec<u8> = Vec::new();
    if v.try_reserve_exact(size).is_err() {
        return std::ptr::null_mut();
    }
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(id: u32, root_id: u32) {
    with_contexts(|c| {
        if root_id == 0 {
            if c.root(id).is_none() {
                c.roots.push((id, WaferRoot::default()));
            }
            return;
        }
        let shared = c.root(root_id).and_then(|r| r.shared.clone());
        let stream = match c.spare.pop() {
            Some(mut b) => {
                b.reuse(id, shared);
                b
            }
            None => Box::new(WaferHttp::new(id, shared)),
        };
        if let Some(mut old) = c.streams.insert(id, stream) {
            // A reused id (the host never does this): the old stream ends here.
            old.release();
        }
    });
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(id: u32, _vm_configuration_size: usize) -> u32 {
    with_contexts(|c| c.root(id).map(WaferRoot::on_vm_start)).flatten().unwrap_or(false).into()
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(id: u32, _plugin_configuration_size: usize) -> u32 {
    with_contexts(|c| c.root(id).map(WaferRoot::on_configure)).flatten().unwrap_or(false).into()
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(id: u32) {
    with_contexts(|c| c.root(id).map(WaferRoot::on_tick));
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(id: u32, num_headers: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, types::Action::Continue, |s| s.on_http_request_headers(num_headers, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(id: u32, body_size: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, types::Action::Continue, |s| s.on_http_request_body(body_size, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(id: u32, _num_trailers: usize) -> u32 {
    action(with_stream(id, types::Action::Continue, WaferHttp::on_http_request_trailers))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_headers(id: u32, num_headers: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, types::Action::Continue, |s| s.on_http_response_headers(num_headers, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_body(id: u32, body_size: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, types::Action::Continue, |s| s.on_http_response_body(body_size, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(id: u32, _num_trailers: usize) -> u32 {
    action(with_stream(id, types::Action::Continue, WaferHttp::on_http_response_trailers))
}

/// The end of a context. For a stream: its logging phase (here rather than in `proxy_on_log`,
/// which Envoy calls just before: one callback fewer per request), then its context is kept
/// for the next stream.
#[no_mangle]
pub extern "C" fn proxy_on_delete(id: u32) {
    with_contexts(|c| {
        if let Some(mut s) = c.streams.remove(&id) {
            s.on_end();
            s.release();
            if c.spare.len() < STREAMS_KEEP {
                c.spare.push(s);
            }
        } else {
            c.roots.retain(|(i, _)| *i != id);
        }
    });
}

