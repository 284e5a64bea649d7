//! proxy-wasm adapter.
