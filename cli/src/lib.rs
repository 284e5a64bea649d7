//! Library side of the `wafer` command: the CRS regression runner (go-ftw
//! compatible) and its helpers, shared with the end-to-end tests.
pub mod crs;
pub mod candidates;
pub mod differential;

/// The wall clock for transactions' `TIME*` variables and persistent collections (the engine
/// reads no clock: `Transaction::set_time_ms`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
