//! wafer's proxy-wasm adapter for Envoy: thin glue between the host and the engine.
//!
//! The engine (`wafer`) knows nothing about proxy-wasm. This crate binds the ABI itself
//! ([`abi`]: exports, host calls, the contexts) and maps the host's callbacks onto the
//! engine's transaction phases:
//!
//! | proxy-wasm callback                   | engine                                                      |
//! |---------------------------------------|-------------------------------------------------------------|
//! | root `on_vm_start`                    | logs the build identity, sets the build gauge ([`build_info`]) |
//! | root `on_configure`                   | [`wafer::Waf::from_json`] once per plugin configuration       |
//! | `on_http_request_headers`             | connection, URI, headers, phase 1 (and phase 2 without body)  |
//! | `on_http_request_body` / `_trailers`  | `append_request_body` per new slice, phase 2 at end of stream |
//! | `on_http_response_headers`            | phase 3 (and phase 4 without body or body access)            |
//! | `on_http_response_body` / `_trailers` | `append_response_body` per new slice, phase 4 at end        |
//! | `on_delete` (the stream's end)         | phase 5                                                     |
//!
//! Design rules, because a panic inside the VM kills it for every request on that worker:
//!
//! - Host data is never unwrapped: every host call ([`abi::hostcalls`], our own binding of the
//!   ABI) returns the host's status as a `Result`, and headers are read as bytes (a value that
//!   is not UTF-8 is data, not an error).
//! - A stream whose transaction was interrupted has had its local reply sent; later callbacks of
//!   that stream only keep the original request or response from moving on.
//! - While the engine wants a body, the body callbacks hold it (`Action::Pause`); headers are
//!   never held (see [`http`] for why and what it means). Envoy keeps what we hold within the
//!   listener's `per_connection_buffer_limit_bytes` (1 MiB by default), and it adds each new
//!   read to the held data *before* calling us: when held data plus one read passes the limit,
//!   Envoy answers 413 itself (request) or resets the stream (response), whatever the engine's
//!   own body limit (`SecRequestBodyLimit`, `SecResponseBodyLimit`) says. Size the listener's
//!   limit above the engine's body limits plus one read.
// Request data must never reach a panic (in the wasm VM a panic kills every request on the
// worker): no unwrap / expect / panic! / unchecked indexing outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]


mod abi;
mod build_info;
mod host;
mod http;
mod mem;
mod metrics;
mod protect;
mod quiet;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use crate::abi::hostcalls;
use crate::abi::types::{BufferType, LogLevel};
use crate::metrics::Metrics;

/// What every HTTP context of one plugin configuration shares.
pub(crate) struct Shared {
    pub(crate) waf: Arc<wafer::Waf>,
    pub(crate) metrics: Metrics,
    /// Source of unique ids for requests without `x-request-id`.
    pub(crate) next_id: Cell<u64>,
    /// Counters and buffers of the protections; `None` when every protection is off.
    pub(crate) protect: Option<protect::ProtectShared>,
    /// The store of persistent collections (`initcol`), handed to each transaction that
    /// uses one (one `Arc` for all, not one per request).
    pub(crate) collections: Arc<dyn wafer::tx::persist::CollectionStore>,
    /// The last requests that passed quietly under a rule set allowing it (see [`quiet`]): a
    /// request the same as one of them but for its `x-request-id` gets no transaction.
    pub(crate) quiet: std::cell::RefCell<quiet::Records>,
}

/// The root (plugin) context: compiles the configuration once and hands it to each stream.
#[derive(Default)]
pub(crate) struct WaferRoot {
    pub(crate) shared: Option<Rc<Shared>>,
    /// The request-log collector's flush interval, if one is configured.
    collector_ms: Option<u64>,
    /// Milliseconds (in ticks) since the request log was last sent.
    since_collector_flush: u64,
}

impl WaferRoot {
    /// The tick period: [`metrics::FLUSH_MS`], or the collector's interval when shorter.
    fn tick_ms(&self) -> u64 {
        self.collector_ms.map_or(metrics::FLUSH_MS, |c| c.min(metrics::FLUSH_MS))
    }

    pub(crate) fn on_vm_start(&mut self) -> bool {
        // What runs, before any configuration: version, git revision, embedded rules, CRS.
        build_info::announce();
        true
    }

    pub(crate) fn on_configure(&mut self) -> bool {
        let config = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(bytes) => bytes.unwrap_or_default(),
            Err(status) => {
                host::log(
                    LogLevel::Critical,
                    &format!("wafer: cannot read the plugin configuration: {status:?}"),
                );
                return false;
            }
        };
        match wafer::Waf::from_json(&config) {
            Ok(waf) => {
                host::log(LogLevel::Info, &format!("wafer: loaded: {}", waf.summary()));
                let metrics = Metrics::define(waf.metric_labels());
                // The tick adds the pending transaction count to its counter (every
                // FLUSH_MS) and sends the request log to its collector (every
                // flush_interval_ms, counted in ticks).
                let collector_ms = waf.protect().and_then(|p| p.request_log.as_ref()).and_then(|l| l.collector.as_ref()).map(|c| c.flush_interval_ms);
                self.collector_ms = collector_ms;
                self.since_collector_flush = 0;
                let _ = hostcalls::set_tick_period(std::time::Duration::from_millis(self.tick_ms()));
                let protect = waf.protect().map(|_| protect::ProtectShared::define(&metrics::metric_prefix(waf.metric_labels())));
                self.shared = Some(Rc::new(Shared {
                    waf: Arc::new(waf),
                    metrics,
                    next_id: Cell::new(0),
                    protect,
                    collections: Arc::new(protect::SharedCollections),
                    quiet: Default::default(),
                }));
                true
            }
            Err(err) => {
                // Envoy rejects the configuration when this returns false; the message is all
                // the operator gets, so it carries the file, line, column and caret.
                host::log(
                    LogLevel::Critical,
                    &format!("wafer: invalid plugin configuration: {err}"),
                );
                false
            }
        }
    }

    /// Adds the pending transactions to their counter; sends the waiting request-log lines
    /// when the collector's interval has passed.
    pub(crate) fn on_tick(&mut self) {
        let Some(shared) = &self.shared else { return };
        shared.metrics.flush();
        let Some(interval) = self.collector_ms else { return };
        self.since_collector_flush = self.since_collector_flush.saturating_add(self.tick_ms());
        if self.since_collector_flush < interval {
            return;
        }
        self.since_collector_flush = 0;
        if let (Some(ps), Some(p)) = (&shared.protect, shared.waf.protect()) {
            protect::flush(ps, p);
        }
    }
}
