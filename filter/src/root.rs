//! A plugin configuration ([`Root`]) and what its streams share ([`Shared`]).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::host::{Host, Level};
use crate::metrics::{self, Metrics, FLUSH_MS};
use crate::protect;

/// What every stream of one plugin configuration shares: per wasm VM (one per worker) in the
/// wasm module, per process (every worker) in the dynamic module. Every part a stream changes
/// is behind an atomic or a lock (uncontended in a VM, which has one thread).
pub struct Shared<H: Host> {
    pub host: H,
    pub waf: Arc<wafer::Waf>,
    pub(crate) metrics: Metrics<H>,
    /// Source of unique ids for requests without `x-request-id`.
    pub(crate) next_id: AtomicU64,
    /// Counters and buffers of the protections; `None` when every protection is off.
    pub(crate) protect: Option<protect::ProtectShared<H>>,
    /// The store of persistent collections (`initcol`), handed to each transaction that uses
    /// one (one `Arc` for all, not one per request).
    pub(crate) collections: Arc<dyn wafer::tx::persist::CollectionStore>,
}

/// A plugin configuration: compiles it once, hands its [`Shared`] to each stream, and runs the
/// tick.
pub struct Root<H: Host> {
    shared: Arc<Shared<H>>,
    /// The request-log collector's flush interval, if one is configured.
    collector_ms: Option<u64>,
    /// Milliseconds (in ticks) since the request log was last sent.
    since_collector_flush: u64,
}

impl<H: Host> Root<H> {
    /// Compiles the plugin configuration (JSON) and defines the counters. The error is all the
    /// operator gets (Envoy then refuses the configuration), so it carries the file, line,
    /// column and caret; it has been logged.
    pub fn configure(host: H, config: &[u8]) -> Result<Root<H>, String> {
        let waf = match wafer::Waf::from_json(config) {
            Ok(waf) => waf,
            Err(err) => {
                let message = format!("wafer: invalid plugin configuration: {err}");
                host.log(Level::Critical, &message);
                return Err(message);
            }
        };
        host.log(Level::Info, &format!("wafer: loaded: {}", waf.summary()));
        let (k0, k1) = random_keys();
        waf.set_hash_keys(k0, k1);
        let metrics = Metrics::define(&host, waf.metric_labels());
        let collector_ms = waf.protect().and_then(|p| p.request_log.as_ref()).and_then(|l| l.collector.as_ref()).map(|c| c.flush_interval_ms);
        let protect = waf.protect().map(|_| protect::ProtectShared::define(&host, &metrics::metric_prefix(waf.metric_labels())));
        let shared = Shared {
            collections: Arc::new(protect::SharedCollections(host.clone())),
            host,
            waf: Arc::new(waf),
            metrics,
            next_id: AtomicU64::new(0),
            protect,
        };
        Ok(Root { shared: Arc::new(shared), collector_ms, since_collector_flush: 0 })
    }

    /// What the streams of this configuration share.
    pub fn shared(&self) -> &Arc<Shared<H>> {
        &self.shared
    }

    /// The tick period: [`FLUSH_MS`], or the collector's interval when shorter.
    pub fn tick_ms(&self) -> u64 {
        self.collector_ms.map_or(FLUSH_MS, |c| c.min(FLUSH_MS))
    }

    /// A batch of the request log is full (the host's early tick, see [`Host::flush_later`]):
    /// sends it.
    pub fn on_flush_due(&mut self) {
        let shared = &self.shared;
        let (Some(ps), Some(p)) = (&shared.protect, shared.waf.protect()) else { return };
        if protect::flush_due(ps) {
            self.since_collector_flush = 0;
            protect::flush(&shared.host, ps, p);
        }
    }

    /// Adds the pending transactions to their counter; sends the waiting request-log lines when
    /// the collector's interval has passed or a batch is full.
    pub fn on_tick(&mut self) {
        let shared = &self.shared;
        shared.metrics.flush(&shared.host);
        let Some(interval) = self.collector_ms else { return };
        self.since_collector_flush = self.since_collector_flush.saturating_add(self.tick_ms());
        let (Some(ps), Some(p)) = (&shared.protect, shared.waf.protect()) else { return };
        if self.since_collector_flush < interval && !protect::flush_due(ps) {
            return;
        }
        self.since_collector_flush = 0;
        protect::flush(&shared.host, ps, p);
    }
}

/// Two random words for the engine's memo hash (the engine draws no randomness itself): from
/// the standard library's per-process random hash state (WASI's `random_get` in the wasm
/// module, the operating system's in the dynamic module).
fn random_keys() -> (u64, u64) {
    use std::hash::BuildHasher;
    let s = std::collections::hash_map::RandomState::new();
    (s.hash_one(0x6b30_u64), s.hash_one(0x6b31_u64))
}
