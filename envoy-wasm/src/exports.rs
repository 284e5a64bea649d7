//! The callbacks the module exports (proxy-wasm ABI 0.2.1) and the contexts they reach: the
//! root contexts (one per plugin configuration sharing this VM, see `root.rs`) and the streams
//! ([`wafer_filter::Stream`]), which live in a map keyed by context id with a multiplicative
//! hash (ids are small sequential integers), in boxes kept for the next stream instead of
//! freed. The ABI's host sets the current context before each callback, so a stream's host
//! services ([`WasmStream`]) need no handle.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::abi::types::action;
use crate::host::{WasmHost, WasmStream};
use crate::root::WaferRoot;

type Stream = wafer_filter::Stream<WasmHost>;

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
    streams: HashMap<u32, Box<Stream>, BuildHasherDefault<IdHasher>>,
    /// Boxes of ended streams, emptied, for the next ones (boxed, so that handing one to
    /// the map and back moves a pointer, not a stream).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Stream>>,
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
fn with_stream<R>(id: u32, default: R, f: impl FnOnce(&mut Stream) -> R) -> R {
    with_contexts(|c| c.streams.get_mut(&id).map(|s| f(s))).flatten().unwrap_or(default)
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
        let shared = c.root(root_id).and_then(|r| r.shared());
        let stream = match c.spare.pop() {
            Some(mut b) => {
                b.reuse(u64::from(id), shared);
                b
            }
            None => Box::new(Stream::new(u64::from(id), shared)),
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
pub extern "C" fn proxy_on_request_headers(id: u32, _num_headers: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_request_headers(&mut WasmStream, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(id: u32, body_size: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_request_body(&mut WasmStream, body_size, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(id: u32, _num_trailers: usize) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_request_trailers(&mut WasmStream)))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_headers(id: u32, _num_headers: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_response_headers(&mut WasmStream, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_body(id: u32, body_size: usize, end_of_stream: u32) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_response_body(&mut WasmStream, body_size, end_of_stream != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(id: u32, _num_trailers: usize) -> u32 {
    action(with_stream(id, wafer_filter::Action::Continue, |s| s.on_response_trailers(&mut WasmStream)))
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

