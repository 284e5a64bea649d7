//! wafer: a ModSecurity-compatible WAF engine.
pub mod body;
pub mod compile;
pub mod config;
pub mod actions;
pub mod embedded;
pub mod error;
pub mod operators;
pub mod seclang;
pub mod transforms;
pub mod vars;
pub mod tx;

pub use compile::Ruleset;
pub use config::Waf;
pub use error::Error;
pub use tx::{BodyAppend, InterruptAction, Interruption, Transaction};
