//! The root context of one plugin configuration: compiles it once ([`wafer_filter::Root`]),
//! hands its shared state to each stream, and runs the tick.

use std::sync::Arc;
use std::time::Duration;

use crate::abi::hostcalls;
use crate::abi::types::BufferType;
use crate::host::WasmHost;
use wafer_filter::host::{Host, Level};

#[derive(Default)]
pub(crate) struct WaferRoot {
    root: Option<wafer_filter::Root<WasmHost>>,
}

impl WaferRoot {
    /// What the streams of this configuration share; `None` before it is configured.
    pub(crate) fn shared(&self) -> Option<Arc<wafer_filter::Shared<WasmHost>>> {
        self.root.as_ref().map(|r| r.shared().clone())
    }

    pub(crate) fn on_vm_start(&mut self) -> bool {
        // What runs, before any configuration: version, git revision, embedded rules, CRS.
        wafer_filter::build_info::announce(&WasmHost);
        true
    }

    /// Envoy rejects the configuration when this returns false; the log has wafer's message.
    pub(crate) fn on_configure(&mut self) -> bool {
        let config = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(bytes) => bytes.unwrap_or_default(),
            Err(status) => {
                WasmHost.log(Level::Critical, &format!("wafer: cannot read the plugin configuration: {status:?}"));
                return false;
            }
        };
        match wafer_filter::Root::configure(WasmHost, &config) {
            Ok(root) => {
                // The tick adds the pending transaction count to its counter (every FLUSH_MS)
                // and sends the request log to its collector (every flush_interval_ms).
                let _ = hostcalls::set_tick_period(Duration::from_millis(root.tick_ms()));
                self.root = Some(root);
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn on_tick(&mut self) {
        if let Some(root) = self.root.as_mut() {
            root.on_tick();
        }
    }
}
