//! wafer as an Envoy dynamic module: `target/libwafer.so`, loaded by Envoy's
//! `envoy.filters.http.dynamic_modules` filter (`dynamic_module_config: {name: wafer}`,
//! `filter_name: wafer`), with the same plugin configuration JSON as the wasm module
//! (`filter_config` as a `google.protobuf.StringValue`). See docs/native.md.
//!
//! The filter itself (phases, bodies, protections, replies, logs, counters) is
//! [`wafer_filter`], shared with the wasm module (`envoy-wasm/`). This crate is only the
//! dynamic-module side:
//!
//! - [`abi`]: the ABI's types and the callbacks the module calls, bound by hand;
//! - [`host`]: the filter's host services on them (and the state every worker shares, in
//!   process memory);
//! - [`exports`]: the event hooks the module exports, and which filter call each one makes:
//!
//! | event hook                                | filter                                             |
//! |-------------------------------------------|----------------------------------------------------|
//! | `on_program_init`                         | the ABI version; panics go to Envoy's log            |
//! | `on_http_filter_config_new`               | `build_info::announce`, `Root::configure`, the tick |
//! | `on_http_filter_config_scheduled`         | `Root::on_tick`, `Root::on_flush_due` (main thread)  |
//! | `on_http_filter_new`                      | `Stream::new`                                       |
//! | `on_http_filter_request_headers`          | `Stream::on_request_headers`                        |
//! | `on_http_filter_request_body` / `_trailers` | `Stream::on_request_body` / `_trailers`           |
//! | `on_http_filter_response_headers`         | `Stream::on_response_headers`                       |
//! | `on_http_filter_response_body` / `_trailers` | `Stream::on_response_body` / `_trailers`         |
//! | `on_http_filter_stream_complete` (or `_destroy`) | `Stream::on_end`                              |
//!
//! Built with `panic = "unwind"` (the `release-native` profile): every hook catches a panic
//! and fails that stream closed (see [`exports`]).
// Request data must never reach a panic: no unwrap / expect / panic! / unchecked indexing
// outside tests (a panic is caught, but fails its request).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

pub mod abi;
mod alloc;
mod exports;
mod host;

