//! wafer: a ModSecurity-compatible WAF engine.
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

pub mod body;
pub mod compile;
pub mod config;
pub mod actions;
pub mod embedded;
pub mod error;
pub(crate) mod fx;
pub mod operators;
pub mod protect;
pub mod seclang;
pub mod transforms;
pub mod vars;
pub mod tx;

pub use compile::Ruleset;
pub use config::Waf;
pub use error::Error;
pub use tx::{BodyAppend, InterruptAction, Interruption, Transaction};

/// Tests' deterministic pseudo-random numbers (xorshift64): each call steps `seed` and
/// returns it.
#[cfg(test)]
pub(crate) fn test_rng(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
