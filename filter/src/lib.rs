//! wafer's HTTP filter for Envoy, whatever binds it to Envoy: what the wasm module
//! (`envoy-wasm/`, proxy-wasm) and the dynamic module (`envoy-dynamic/`, Envoy's dynamic-module
//! ABI) share above the engine. Each of those crates is only its ABI binding and the glue that
//! turns the ABI's callbacks into the calls below; everything a user can observe (which phase
//! runs when, what is held, the local replies, the log lines, the counters, the protections)
//! is decided here, once.
//!
//! | Envoy callback                 | here                                                          |
//! |--------------------------------|---------------------------------------------------------------|
//! | module start                   | [`build_info::announce`]: the build identity, log and gauge    |
//! | plugin configuration           | [`Root::configure`]: [`wafer::Waf::from_json`], counters        |
//! | tick                           | [`Root::on_tick`]: pending counts, the request log's collector |
//! | request headers                | [`Stream::on_request_headers`]: phase 1 (and 2 without body)   |
//! | request body / trailers        | [`Stream::on_request_body`] / `_trailers`: phase 2 at the end  |
//! | response headers               | [`Stream::on_response_headers`]: phase 3 (and 4 without body)  |
//! | response body / trailers       | [`Stream::on_response_body`] / `_trailers`: phase 4 at the end |
//! | stream end (complete or reset) | [`Stream::on_end`]: phase 5                                    |
//!
//! What the filter needs from Envoy is two small traits ([`host::Host`] for a configuration,
//! [`host::StreamHost`] for a stream's callback); the bindings implement them, and the
//! compiler makes one copy of this crate per binding (no dynamic dispatch on the request path).
//!
//! Design rules, because a panic kills the wasm VM for every request on its worker (and the
//! dynamic module turns one into a failed request):
//!
//! - Host data is never unwrapped: every host call returns `Option`/`Result`, and headers are
//!   read as bytes (a value that is not UTF-8 is data, not an error).
//! - A stream whose transaction was interrupted has had its local reply sent; later callbacks
//!   of that stream only keep the original request or response from moving on.
//! - While the engine wants a body, the body callbacks hold it ([`host::Action::Pause`]);
//!   headers are never held (see [`stream`] for why and what it means). Envoy keeps what a
//!   filter holds within the listener's `per_connection_buffer_limit_bytes` (1 MiB by default),
//!   and it adds each new read to the held data *before* calling the filter: when held data
//!   plus one read passes the limit, Envoy answers 413 itself (request) or resets the stream
//!   (response), whatever the engine's own body limit (`SecRequestBodyLimit`,
//!   `SecResponseBodyLimit`) says. Size the listener's limit above the engine's body limits
//!   plus one read.
// Request data must never reach a panic: no unwrap / expect / panic! / unchecked indexing
// outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

pub mod build_info;
pub mod host;
mod metrics;
mod protect;
mod root;
pub mod stream;
mod sync;

pub use host::{Action, Host, StreamHost};
pub use metrics::{family_member_name, FLUSH_MS};
pub use root::{Root, Shared};
pub use stream::Stream;
