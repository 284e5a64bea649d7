//! wafer's proxy-wasm binding for Envoy: `target/wafer.wasm`.
//!
//! The filter itself (phases, bodies, protections, replies, logs, counters) is
//! [`wafer_filter`], shared with the dynamic module (`envoy-dynamic/`). This crate is only the
//! proxy-wasm side:
//!
//! - [`abi`]: the host functions the module calls, bound by hand (see there why not the SDK);
//! - [`host`]: the filter's host services on them;
//! - [`exports`]: the callbacks the module exports, the context table, and which filter call
//!   each one makes:
//!
//! | proxy-wasm callback                   | filter                                       |
//! |---------------------------------------|----------------------------------------------|
//! | root `on_vm_start`                    | `build_info::announce`                        |
//! | root `on_configure`                   | `Root::configure` (and the tick period)       |
//! | root `on_tick`                        | `Root::on_tick`                               |
//! | `on_http_request_headers`             | `Stream::on_request_headers`                  |
//! | `on_http_request_body` / `_trailers`  | `Stream::on_request_body` / `_trailers`       |
//! | `on_http_response_headers`            | `Stream::on_response_headers`                 |
//! | `on_http_response_body` / `_trailers` | `Stream::on_response_body` / `_trailers`      |
//! | `on_delete` (the stream's end)        | `Stream::on_end`                              |
//!
//! - [`root`]: the root context glue; [`mem`]: `memcmp`/`memcpy`/`memmove`/`memset` for
//!   the wasm build.
//!
//! The release profile builds the module with `panic = "abort"`: a panic traps, the VM is
//! gone, and Envoy's `failure_policy` decides what its worker's requests get (see the e2e
//! test `failure_policy`).
// Request data must never reach a panic (in the wasm VM a panic kills every request on the
// worker): no unwrap / expect / panic! / unchecked indexing outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

mod abi;
mod exports;
mod host;
mod mem;
mod root;
