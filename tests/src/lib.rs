//! Harness for wafer's end-to-end tests: a real Envoy loading `target/wafer.wasm`, an
//! upstream written here, and a raw HTTP/1.1 client. The tests themselves live in `e2e/`.
//!
//! Everything is std-only on purpose: the tests should build fast and depend on nothing that
//! could hide what goes over the wire.

pub mod client;
pub mod crs;
pub mod envoy;
pub mod openapi;
pub mod registry;
pub mod upstream;
