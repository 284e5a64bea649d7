//! The event hooks the module exports (Envoy's dynamic-module ABI) and what each one does with
//! the filter ([`wafer_filter`]).
//!
//! Every hook catches unwinding (the module is built with `panic = "unwind"`): a panic must not
//! cross into Envoy (undefined behaviour) and must not end Envoy (every worker's requests). A
//! panic fails that stream closed instead: wafer sends a 500 local reply unless it already
//! replied, every later hook of the stream stops iteration, its logging phase does not run,
//! and Envoy goes on serving the other streams. A panic while a configuration is created makes
//! Envoy refuse it. The panic's message goes to Envoy's log.
//!
//! A stream's hooks may nest: a local reply sent inside a hook can complete the stream at
//! once, calling `on_http_filter_stream_complete` before the hook returns. The stream's state
//! is therefore only borrowed while no hook of it runs ([`Filter::busy`]); the completion is
//! then kept for when the outer hook returns.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wafer_filter::host::{Level, Side};
use wafer_filter::{Action, Root, Shared, Stream};

use crate::abi::{self, Buffer, Header};
use crate::host::{self as native, NativeHost, NativeStream, EVENT_FLUSH, EVENT_TICK};

/// The filter name a configuration must give (`filter_name: wafer`).
const FILTER_NAME: &[u8] = b"wafer";

/// Status of wafer's local reply after a panic.
const PANIC_STATUS: u32 = 500;

/// One plugin configuration (`on_http_filter_config_new` to `_destroy`).
struct Config {
    root: Mutex<Root<NativeHost>>,
    shared: Arc<Shared<NativeHost>>,
    scheduler: *mut c_void,
    ticker: Option<Ticker>,
}

/// The thread that asks for the tick every `tick_ms` (Envoy runs the event on its main
/// thread, where the tick's HTTP calls may go out).
struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl Ticker {
    fn start(host: NativeHost, period: Duration) -> Option<Ticker> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wafer-tick".into())
            .spawn(move || {
                let (lock, wake) = &*flag;
                let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    let (guard, _) = wake.wait_timeout(stopped, period).unwrap_or_else(|p| p.into_inner());
                    stopped = guard;
                    if *stopped {
                        return;
                    }
                    host.schedule(EVENT_TICK);
                }
            })
            .ok()?;
        Some(Ticker { stop, thread })
    }

    fn stop(self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        let _ = self.thread.join();
    }
}

/// One stream (`on_http_filter_new` to `_destroy`).
struct Filter {
    /// Borrowed only while `busy` is set, by the one hook running.
    stream: UnsafeCell<Stream<NativeHost>>,
    /// A hook of this stream is running.
    busy: Cell<bool>,
    /// The stream completed while a hook ran: its end waits for that hook's return.
    end_pending: Cell<bool>,
    /// Its logging phase ran (or must not: after a panic).
    ended: Cell<bool>,
    /// A hook panicked: the stream failed closed.
    poisoned: Cell<bool>,
    /// wafer sent a local reply on this stream.
    replied: Cell<bool>,
}

/// Ids of streams, for the ids made for requests without `x-request-id`.
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// The allocator's options, the ABI version, and a panic hook that writes panics to Envoy's log.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    crate::alloc::configure();
    let installed = catch_unwind(|| {
        std::panic::set_hook(Box::new(|info| native::log(Level::Critical, &format!("wafer: panic: {info}"))));
    });
    if installed.is_err() {
        return std::ptr::null();
    }
    abi::ABI_VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(config_envoy: *mut c_void, name: Buffer, config: Buffer) -> *const c_void {
    catch_unwind(|| {
        // SAFETY: Envoy's buffers live during this call.
        let (name, config) = unsafe { (name.bytes(), config.bytes()) };
        if name != FILTER_NAME {
            native::log(Level::Critical, &format!("wafer: filter_name must be \"wafer\", not {:?}", String::from_utf8_lossy(name)));
            return std::ptr::null();
        }
        // SAFETY: called on the main thread with Envoy's config object, valid until destroy.
        let (scheduler, validating) = unsafe {
            (abi::envoy_dynamic_module_callback_http_filter_config_scheduler_new(config_envoy), abi::envoy_dynamic_module_callback_is_validation_mode())
        };
        let host = NativeHost::new(config_envoy, scheduler);
        wafer_filter::build_info::announce(&host);
        let Ok(root) = Root::configure(host, config) else {
            delete_scheduler(scheduler);
            return std::ptr::null();
        };
        // `envoy --mode validate` only checks the configuration: no thread for it.
        let ticker = if validating { None } else { Ticker::start(host, Duration::from_millis(root.tick_ms())) };
        let shared = root.shared().clone();
        Box::into_raw(Box::new(Config { root: Mutex::new(root), shared, scheduler, ticker })).cast_const().cast()
    })
    .unwrap_or(std::ptr::null())
}

fn delete_scheduler(scheduler: *mut c_void) {
    if !scheduler.is_null() {
        // SAFETY: made by scheduler_new, deleted once.
        unsafe { abi::envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler) }
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    let _ = catch_unwind(|| {
        if config.is_null() {
            return;
        }
        // SAFETY: made by config_new with Box::into_raw; Envoy destroys it once, after every
        // stream of it.
        let config = unsafe { Box::from_raw(config.cast_mut().cast::<Config>()) };
        let Config { ticker, scheduler, .. } = *config;
        if let Some(t) = ticker {
            t.stop();
        }
        delete_scheduler(scheduler);
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(_config_envoy: *mut c_void, config: *const c_void, event: u64) {
    let _ = catch_unwind(|| {
        // SAFETY: a live configuration (Envoy runs its events before destroying it).
        let Some(config) = (unsafe { config.cast::<Config>().as_ref() }) else { return };
        let mut root = config.root.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            EVENT_TICK => root.on_tick(),
            EVENT_FLUSH => root.on_flush_due(),
            _ => {}
        }
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(config: *const c_void, _filter_envoy: *mut c_void) -> *const c_void {
    catch_unwind(|| {
        // SAFETY: a live configuration (it outlives its streams).
        let Some(config) = (unsafe { config.cast::<Config>().as_ref() }) else { return std::ptr::null() };
        let id = NEXT_STREAM.fetch_add(1, Ordering::Relaxed);
        let filter = Filter {
            stream: UnsafeCell::new(Stream::new(id, Some(config.shared.clone()))),
            busy: Cell::new(false),
            end_pending: Cell::new(false),
            ended: Cell::new(false),
            poisoned: Cell::new(false),
            replied: Cell::new(false),
        };
        Box::into_raw(Box::new(filter)).cast_const().cast()
    })
    .unwrap_or(std::ptr::null())
}

/// Runs one stream hook: `f` on the stream, its answer as the hook's status.
fn hook(envoy: *mut c_void, filter: *const c_void, f: impl FnOnce(&mut Stream<NativeHost>, &mut NativeStream) -> Action) -> u32 {
    // SAFETY: made by filter_new; Envoy calls a stream's hooks on one thread until destroy.
    let Some(filter) = (unsafe { filter.cast::<Filter>().as_ref() }) else { return abi::CONTINUE };
    if filter.poisoned.get() {
        return abi::STOP;
    }
    if filter.busy.get() {
        // Envoy does not nest these hooks; should it, the stream is not touched twice.
        return abi::CONTINUE;
    }
    filter.busy.set(true);
    let mut io = NativeStream { envoy, replied: &filter.replied };
    // SAFETY: `busy` makes this the only borrow of the stream.
    let result = catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *filter.stream.get() }, &mut io)));
    filter.busy.set(false);
    let status = match result {
        Ok(Action::Continue) => abi::CONTINUE,
        Ok(Action::Pause) => abi::STOP,
        Err(_) => {
            fail_closed(envoy, filter);
            abi::STOP
        }
    };
    if filter.end_pending.replace(false) {
        end(filter);
    }
    status
}

/// After a panic: the stream is failed closed (see the module docs).
fn fail_closed(envoy: *mut c_void, filter: &Filter) {
    filter.poisoned.set(true);
    filter.ended.set(true);
    native::log(Level::Error, "wafer: a panic failed this request closed (500); Envoy serves on");
    if !filter.replied.replace(true) {
        let mut headers = [Header::of(b"content-type", b"text/plain")];
        let body = b"wafer: internal error\n";
        // SAFETY: the filter object is valid during its hooks; the buffers are read during the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_send_response(envoy, PANIC_STATUS, headers.as_mut_ptr(), headers.len(), Buffer::of(body), Buffer::of(b"wafer_panic"));
        }
    }
}

/// The stream's logging phase, once (not while a hook runs, nor after a panic).
fn end(filter: &Filter) {
    if filter.busy.get() {
        filter.end_pending.set(true);
        return;
    }
    if filter.ended.replace(true) || filter.poisoned.get() {
        return;
    }
    filter.busy.set(true);
    // SAFETY: `busy` makes this the only borrow of the stream.
    let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*filter.stream.get()).on_end() }));
    filter.busy.set(false);
    if result.is_err() {
        filter.poisoned.set(true);
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(envoy: *mut c_void, filter: *const c_void, end_of_stream: bool) -> u32 {
    hook(envoy, filter, |s, io| s.on_request_headers(io, end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(envoy: *mut c_void, filter: *const c_void, end_of_stream: bool) -> u32 {
    hook(envoy, filter, |s, io| {
        let held = io.held(Side::Request);
        s.on_request_body(io, held, end_of_stream)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(envoy: *mut c_void, filter: *const c_void) -> u32 {
    hook(envoy, filter, |s, io| s.on_request_trailers(io))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(envoy: *mut c_void, filter: *const c_void, end_of_stream: bool) -> u32 {
    hook(envoy, filter, |s, io| s.on_response_headers(io, end_of_stream))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(envoy: *mut c_void, filter: *const c_void, end_of_stream: bool) -> u32 {
    hook(envoy, filter, |s, io| {
        let held = io.held(Side::Response);
        s.on_response_body(io, held, end_of_stream)
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(envoy: *mut c_void, filter: *const c_void) -> u32 {
    hook(envoy, filter, |s, io| s.on_response_trailers(io))
}

/// The stream's end (completed or reset): its logging phase.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(_envoy: *mut c_void, filter: *const c_void) {
    let _ = catch_unwind(|| {
        // SAFETY: made by filter_new, not yet destroyed.
        if let Some(filter) = unsafe { filter.cast::<Filter>().as_ref() } {
            end(filter);
        }
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter: *const c_void) {
    let _ = catch_unwind(|| {
        if filter.is_null() {
            return;
        }
        // SAFETY: made by filter_new with Box::into_raw; Envoy destroys it once, never while
        // one of its hooks runs.
        let filter = unsafe { Box::from_raw(filter.cast_mut().cast::<Filter>()) };
        // A stream Envoy never completed still gets its logging phase.
        end(&filter);
        drop(filter);
    });
}

// Hooks Envoy requires that wafer has no use for: HTTP callouts and streams of a stream (the
// request log's callouts belong to the configuration), a stream's scheduler, watermarks.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _envoy: *mut c_void,
    _filter: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut Header,
    _headers_size: usize,
    _body_chunks: *mut Buffer,
    _body_chunks_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _envoy: *mut c_void,
    _filter: *const c_void,
    _stream_id: u64,
    _headers: *mut Header,
    _headers_size: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _envoy: *mut c_void,
    _filter: *const c_void,
    _stream_id: u64,
    _data: *const Buffer,
    _data_count: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _envoy: *mut c_void,
    _filter: *const c_void,
    _stream_id: u64,
    _trailers: *mut Header,
    _trailers_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(_envoy: *mut c_void, _filter: *const c_void, _stream_id: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(_envoy: *mut c_void, _filter: *const c_void, _stream_id: u64, _reason: u32) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(_envoy: *mut c_void, _filter: *const c_void, _event_id: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(_envoy: *mut c_void, _filter: *const c_void) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(_envoy: *mut c_void, _filter: *const c_void) {}
