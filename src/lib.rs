//! wafer: a ModSecurity-compatible WAF engine.
pub mod body;
pub mod operators;
pub mod transforms;
