//! The filter's host services ([`wafer_filter::host`]) on Envoy's dynamic-module ABI.
//!
//! [`NativeHost`] serves a plugin configuration (Envoy's filter config object: its counters,
//! its HTTP callouts, its scheduler), [`NativeStream`] one stream's callback (Envoy's filter
//! object). The state every worker shares (rate-limit buckets, behaviour scores, persistent
//! collections) is [`STORE`], in process memory: the module runs in Envoy's process, on all of
//! its worker threads, so a lock is all the sharing takes.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wafer_filter::host::{Bytes, HeaderMap, Host, Level, Property, Side, Status, StreamHost};

use crate::abi::{self, Buffer, Header};

/// Event ids of the configuration's scheduler (`on_http_filter_config_scheduled`).
pub(crate) const EVENT_TICK: u64 = 1;
pub(crate) const EVENT_FLUSH: u64 = 2;

/// Envoy's filter config and its scheduler, for as long as the configuration lives.
#[derive(Clone, Copy)]
pub(crate) struct NativeHost {
    config: *mut c_void,
    scheduler: *mut c_void,
}

// SAFETY: the configuration's callbacks used from workers (counters, logs) are thread-safe in
// Envoy (counters are atomic, the log is spdlog's), and the scheduler's commit may be called
// from any thread; the callout is only made on the main thread (the scheduler's events run
// there, see `flush_later`). Both pointers stay valid until the configuration is destroyed,
// after every stream of it (Envoy's filters hold their config).
unsafe impl Send for NativeHost {}
// SAFETY: as above.
unsafe impl Sync for NativeHost {}

impl NativeHost {
    pub(crate) fn new(config: *mut c_void, scheduler: *mut c_void) -> NativeHost {
        NativeHost { config, scheduler }
    }

    /// Asks Envoy to run `event` on the main thread (`on_http_filter_config_scheduled`).
    pub(crate) fn schedule(&self, event: u64) {
        if !self.scheduler.is_null() {
            // SAFETY: the scheduler lives as long as the configuration.
            unsafe { abi::envoy_dynamic_module_callback_http_filter_config_scheduler_commit(self.scheduler, event) }
        }
    }
}

/// Writes a line to Envoy's log (component `dynamic_modules`), with the place in wafer's
/// source that wrote it.
#[track_caller]
pub(crate) fn log(level: Level, message: &str) {
    let at = std::panic::Location::caller();
    let level = match level {
        Level::Info => abi::log_level::INFO,
        Level::Warn => abi::log_level::WARN,
        Level::Error => abi::log_level::ERROR,
        Level::Critical => abi::log_level::CRITICAL,
    };
    // SAFETY: the buffers are read during the call only.
    unsafe {
        if abi::envoy_dynamic_module_callback_log_enabled(level) {
            abi::envoy_dynamic_module_callback_log_v2(level, Buffer::of(message.as_bytes()), Buffer::of(at.file().as_bytes()), at.line());
        }
    }
}

/// A counter, or a member of a family with its label values.
#[derive(Clone)]
pub(crate) struct Counter {
    id: usize,
    labels: Option<Box<[String]>>,
}

impl Host for NativeHost {
    type Counter = Counter;
    type Family = usize;

    #[track_caller]
    fn log(&self, level: Level, message: &str) {
        log(level, message);
    }

    fn now_nanos(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn define_counter(&self, name: &str) -> Option<Counter> {
        let mut id = 0usize;
        // SAFETY: the name is read during the call; Envoy writes one size_t.
        let r = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_config_define_counter(self.config, Buffer::of(name.as_bytes()), std::ptr::null_mut(), 0, &mut id)
        };
        (r == abi::METRICS_SUCCESS).then_some(Counter { id, labels: None })
    }

    fn define_family(&self, name: &str, labels: &'static [&'static str]) -> Option<usize> {
        let mut names: Vec<Buffer> = labels.iter().map(|l| Buffer::of(l.as_bytes())).collect();
        let mut id = 0usize;
        // SAFETY: the name and label buffers are read during the call; Envoy writes one size_t.
        let r = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_config_define_counter(self.config, Buffer::of(name.as_bytes()), names.as_mut_ptr(), names.len(), &mut id)
        };
        (r == abi::METRICS_SUCCESS).then_some(id)
    }

    fn family_counter(&self, family: &usize, values: &[&str]) -> Option<Counter> {
        Some(Counter { id: *family, labels: Some(values.iter().map(|v| v.to_string()).collect()) })
    }

    fn increment(&self, counter: &Counter, by: u64) {
        let mut values: Vec<Buffer> = counter.labels.iter().flatten().map(|v| Buffer::of(v.as_bytes())).collect();
        let (ptr, n) = if values.is_empty() { (std::ptr::null_mut(), 0) } else { (values.as_mut_ptr(), values.len()) };
        // SAFETY: the label buffers are read during the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_filter_config_increment_counter(self.config, counter.id, ptr, n, by);
        }
    }

    fn set_gauge(&self, name: &str, value: u64) {
        let mut id = 0usize;
        // SAFETY: the name is read during the call; Envoy writes one size_t.
        unsafe {
            if abi::envoy_dynamic_module_callback_http_filter_config_define_gauge(self.config, Buffer::of(name.as_bytes()), std::ptr::null_mut(), 0, &mut id)
                == abi::METRICS_SUCCESS
            {
                abi::envoy_dynamic_module_callback_http_filter_config_set_gauge(self.config, id, std::ptr::null_mut(), 0, value);
            }
        }
    }

    fn shared_get(&self, key: &str) -> Result<Option<Bytes>, Status> {
        Ok(store().get(key).cloned())
    }

    fn shared_update(&self, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Bytes) -> Result<(), Status> {
        let mut store = store();
        let new = f(store.get(key).map(Vec::as_slice));
        match store.get_mut(key) {
            Some(v) => *v = new,
            None => {
                store.insert(key.to_string(), new);
            }
        }
        Ok(())
    }

    fn http_call(&self, cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<(), Status> {
        let mut headers: Vec<Header> = headers.iter().map(|(k, v)| Header::of(k.as_bytes(), v.as_bytes())).collect();
        let mut id = 0u64;
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        // SAFETY: every buffer is read during the call; Envoy copies them into its request.
        let r = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_config_http_callout(
                self.config,
                &mut id,
                Buffer::of(cluster.as_bytes()),
                headers.as_mut_ptr(),
                headers.len(),
                Buffer::of(body),
                ms,
            )
        };
        match r {
            abi::CALLOUT_SUCCESS => Ok(()),
            // ClusterNotFound
            2 => Err(Status::NotFound),
            _ => Err(Status::InternalFailure),
        }
    }

    /// Config-level callouts belong to the main thread: a stream's full batch is sent by the
    /// scheduler's next event there.
    fn flush_later(&self) -> bool {
        self.schedule(EVENT_FLUSH);
        true
    }

    /// Envoy does not run a local reply through the response callbacks of the filter that
    /// sent it.
    fn replies_skip_filter(&self) -> bool {
        true
    }
}

/// The state every worker shares. Keys are slots (`wafer.rl.<slot>`, ...): the store holds at
/// most the slots the protections configure. One lock: each update holds it for one small
/// decode-compute-encode.
static STORE: LazyLock<Mutex<HashMap<String, Bytes>>> = LazyLock::new(Mutex::default);

/// The store, locked (whatever a panic left: every update is one assignment).
fn store() -> MutexGuard<'static, HashMap<String, Bytes>> {
    STORE.lock().unwrap_or_else(|p| p.into_inner())
}

/// One stream's callback: Envoy's filter object, and whether a local reply went out.
pub(crate) struct NativeStream<'a> {
    pub(crate) envoy: *mut c_void,
    pub(crate) replied: &'a std::cell::Cell<bool>,
}

fn header_type(side: Side) -> u32 {
    match side {
        Side::Request => abi::header_type::REQUEST_HEADER,
        Side::Response => abi::header_type::RESPONSE_HEADER,
    }
}

/// The header block (see [`wafer::body::pairs::block_spans`]) of Envoy's headers.
///
/// # Safety
/// Every header's buffers are readable for their lengths.
unsafe fn block(headers: &[Header]) -> Bytes {
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    let size = 4 + headers.iter().map(|h| 10 + h.key_length + h.value_length).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&len(headers.len()));
    for h in headers {
        out.extend_from_slice(&len(h.key_length));
        out.extend_from_slice(&len(h.value_length));
    }
    for h in headers {
        // SAFETY: the caller's contract.
        unsafe {
            out.extend_from_slice(Buffer { ptr: h.key_ptr, length: h.key_length }.bytes());
            out.push(0);
            out.extend_from_slice(Buffer { ptr: h.value_ptr, length: h.value_length }.bytes());
        }
        out.push(0);
    }
    out
}

impl NativeStream<'_> {
    /// The body chunks of `side` held so far: what Envoy buffered, then what this callback
    /// received (outside the body callbacks nothing is received; when an earlier filter
    /// buffered the body, what is received is that buffer).
    fn chunks(&self, side: Side) -> Vec<Buffer> {
        let (received, buffered) = match side {
            Side::Request => (abi::body_type::RECEIVED_REQUEST_BODY, abi::body_type::BUFFERED_REQUEST_BODY),
            Side::Response => (abi::body_type::RECEIVED_RESPONSE_BODY, abi::body_type::BUFFERED_RESPONSE_BODY),
        };
        // SAFETY: the filter object is valid during its callbacks.
        let received_is_buffered = unsafe {
            match side {
                Side::Request => abi::envoy_dynamic_module_callback_http_received_buffered_request_body(self.envoy),
                Side::Response => abi::envoy_dynamic_module_callback_http_received_buffered_response_body(self.envoy),
            }
        };
        let mut out = Vec::new();
        let kinds: &[u32] = if received_is_buffered { &[received] } else { &[buffered, received] };
        for &kind in kinds {
            // SAFETY: Envoy writes at most the number of chunks it reported.
            unsafe {
                let n = abi::envoy_dynamic_module_callback_http_get_body_chunks_size(self.envoy, kind);
                if n == 0 {
                    continue;
                }
                let mut chunks = vec![Buffer::NULL; n];
                if abi::envoy_dynamic_module_callback_http_get_body_chunks(self.envoy, kind, chunks.as_mut_ptr()) {
                    out.extend(chunks);
                }
            }
        }
        out
    }

    /// The size of the body of `side` held so far (see [`NativeStream::chunks`]).
    pub(crate) fn held(&self, side: Side) -> usize {
        self.chunks(side).iter().map(|c| c.length).sum()
    }
}

impl StreamHost for NativeStream<'_> {
    fn headers(&mut self, side: Side) -> Option<HeaderMap> {
        let t = header_type(side);
        // SAFETY: Envoy writes at most the number of headers it reported; their buffers live
        // until the end of this callback, and the block copies them.
        unsafe {
            let n = abi::envoy_dynamic_module_callback_http_get_headers_size(self.envoy, t);
            let mut headers = vec![Header::EMPTY; n];
            if n > 0 && !abi::envoy_dynamic_module_callback_http_get_headers(self.envoy, t, headers.as_mut_ptr()) {
                return None;
            }
            HeaderMap::from_block(block(&headers))
        }
    }

    fn header(&mut self, side: Side, name: &str) -> Option<Bytes> {
        let mut value = Buffer::NULL;
        let mut count = 0usize;
        // SAFETY: the key is read during the call; Envoy writes a buffer (valid until the end
        // of this callback, copied here) and a count.
        unsafe {
            let ok = abi::envoy_dynamic_module_callback_http_get_header(self.envoy, header_type(side), Buffer::of(name.as_bytes()), &mut value, 0, &mut count);
            (ok && count > 0).then(|| value.bytes().to_vec())
        }
    }

    fn set_header(&mut self, side: Side, name: &str, value: Option<&[u8]>) -> bool {
        let value = value.map_or(Buffer::NULL, Buffer::of);
        // SAFETY: the buffers are read during the call (a null value removes the header).
        unsafe { abi::envoy_dynamic_module_callback_http_set_header(self.envoy, header_type(side), Buffer::of(name.as_bytes()), value) }
    }

    fn add_header(&mut self, side: Side, name: &str, value: &[u8]) -> bool {
        // SAFETY: the buffers are read during the call.
        unsafe { abi::envoy_dynamic_module_callback_http_add_header(self.envoy, header_type(side), Buffer::of(name.as_bytes()), Buffer::of(value)) }
    }

    fn body(&mut self, side: Side, start: usize, max: usize) -> Result<Option<Bytes>, Status> {
        let mut out = Vec::new();
        let mut at = 0usize;
        let end = start.saturating_add(max);
        for chunk in self.chunks(side) {
            // SAFETY: Envoy's chunks live until the end of this callback; copied here.
            let bytes = unsafe { chunk.bytes() };
            let (lo, hi) = (at, at.saturating_add(bytes.len()));
            at = hi;
            if hi <= start || lo >= end {
                continue;
            }
            let from = start.saturating_sub(lo);
            let to = end.min(hi) - lo;
            out.extend_from_slice(bytes.get(from..to).unwrap_or_default());
        }
        Ok((!out.is_empty()).then_some(out))
    }

    fn property(&mut self, property: Property) -> Option<Bytes> {
        let id = match property {
            Property::SourceAddress => abi::attribute::SOURCE_ADDRESS,
            Property::DestinationAddress => abi::attribute::DESTINATION_ADDRESS,
            Property::RequestProtocol => abi::attribute::REQUEST_PROTOCOL,
        };
        let mut value = Buffer::NULL;
        // SAFETY: Envoy writes a buffer valid until the end of this callback; copied here.
        unsafe { abi::envoy_dynamic_module_callback_http_filter_get_attribute_string(self.envoy, id, &mut value).then(|| value.bytes().to_vec()) }
    }

    fn send_reply(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> bool {
        let mut headers: Vec<Header> = headers.iter().map(|(k, v)| Header::of(k.as_bytes(), v.as_bytes())).collect();
        self.replied.set(true);
        // SAFETY: every buffer is read during the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_send_response(
                self.envoy,
                u32::from(status),
                headers.as_mut_ptr(),
                headers.len(),
                Buffer::of(body),
                Buffer::of(b"wafer"),
            );
        }
        true
    }
}
