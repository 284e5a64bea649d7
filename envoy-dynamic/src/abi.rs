//! Envoy's dynamic-module ABI as wafer uses it: the types and the callbacks (functions Envoy
//! exports) it calls; the event hooks it exports are in `exports.rs`.
//!
//! Written by hand from `source/extensions/dynamic_modules/abi/abi.h` of envoyproxy/envoy
//! (ABI version [`ABI_VERSION`]; the declarations below were checked one by one against the
//! header of commit c2bbc24cbc78403821d26d70d2cf4693abc05deb and their names against the
//! callbacks Envoy 1.40.0's binary exports). Envoy only logs a version mismatch and loads the
//! module anyway, and a declaration that differs from Envoy's loads silently and misbehaves at
//! run time, so every signature here is the header's, type for type: C enums are `u32`
//! (`int`-sized), `size_t` is `usize`, `bool` is `bool`, and the buffer and header structs
//! are `#[repr(C)]` copies passed by value where the header passes them so.
//!
//! A callback Envoy's binary does not export fails the module's load (`undefined symbol`):
//! the module then cannot run on an older Envoy whose ABI lacks one of these.

use std::ffi::{c_char, c_void};

/// `ENVOY_DYNAMIC_MODULES_ABI_VERSION` of the header this binding follows (Envoy 1.40).
pub const ABI_VERSION: &std::ffi::CStr = c"v0.2.0";

/// `envoy_dynamic_module_type_envoy_buffer` / `_module_buffer`: bytes owned by one side.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl Buffer {
    pub const NULL: Buffer = Buffer { ptr: std::ptr::null(), length: 0 };

    /// A module buffer over `bytes` (valid while they are).
    pub fn of(bytes: &[u8]) -> Buffer {
        Buffer { ptr: bytes.as_ptr().cast(), length: bytes.len() }
    }

    /// The bytes of an Envoy buffer.
    ///
    /// # Safety
    /// `ptr` is null or readable for `length` bytes for the lifetime `'a` the caller picks
    /// (Envoy's buffers live until the end of the current event hook, or a setter call).
    pub unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.length == 0 {
            return &[];
        }
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.cast(), self.length) }
    }
}

/// `envoy_dynamic_module_type_envoy_http_header` / `_module_http_header`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    pub key_ptr: *const c_char,
    pub key_length: usize,
    pub value_ptr: *const c_char,
    pub value_length: usize,
}

impl Header {
    pub const EMPTY: Header = Header { key_ptr: std::ptr::null(), key_length: 0, value_ptr: std::ptr::null(), value_length: 0 };

    /// A module header over `key` and `value` (valid while they are).
    pub fn of(key: &[u8], value: &[u8]) -> Header {
        Header { key_ptr: key.as_ptr().cast(), key_length: key.len(), value_ptr: value.as_ptr().cast(), value_length: value.len() }
    }
}

/// `envoy_dynamic_module_type_http_header_type`.
pub mod header_type {
    pub const REQUEST_HEADER: u32 = 0;
    pub const RESPONSE_HEADER: u32 = 2;
}

/// `envoy_dynamic_module_type_http_body_type`.
pub mod body_type {
    pub const RECEIVED_REQUEST_BODY: u32 = 0;
    pub const BUFFERED_REQUEST_BODY: u32 = 1;
    pub const RECEIVED_RESPONSE_BODY: u32 = 2;
    pub const BUFFERED_RESPONSE_BODY: u32 = 3;
}

/// `envoy_dynamic_module_type_attribute_id` (the values wafer reads).
pub mod attribute {
    /// `request.protocol`
    pub const REQUEST_PROTOCOL: u32 = 10;
    /// `source.address` (`ip:port`)
    pub const SOURCE_ADDRESS: u32 = 24;
    /// `destination.address` (`ip:port`)
    pub const DESTINATION_ADDRESS: u32 = 26;
}

/// `envoy_dynamic_module_type_log_level` (Envoy's spdlog levels).
pub mod log_level {
    pub const INFO: u32 = 2;
    pub const WARN: u32 = 3;
    pub const ERROR: u32 = 4;
    pub const CRITICAL: u32 = 5;
}

/// `envoy_dynamic_module_type_metrics_result_Success`.
pub const METRICS_SUCCESS: u32 = 0;

/// `envoy_dynamic_module_type_http_callout_init_result_Success`.
pub const CALLOUT_SUCCESS: u32 = 0;

/// The status every `on_http_filter_*` hook's enum gives 0 (Continue) and 1 (StopIteration
/// for headers and trailers, StopIterationAndBuffer for bodies).
pub const CONTINUE: u32 = 0;
pub const STOP: u32 = 1;

// The callbacks, in the header's order (common, then HTTP filter).
extern "C" {
    pub fn envoy_dynamic_module_callback_log_v2(level: u32, message: Buffer, source_file: Buffer, source_line: u32);
    pub fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;
    /// Main thread only.
    pub fn envoy_dynamic_module_callback_is_validation_mode() -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        filter_config_envoy_ptr: *mut c_void,
        name: Buffer,
        label_names: *mut Buffer,
        label_names_length: usize,
        counter_id_ptr: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
        filter_config_envoy_ptr: *mut c_void,
        name: Buffer,
        label_names: *mut Buffer,
        label_names_length: usize,
        gauge_id_ptr: *mut usize,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
        filter_config_envoy_ptr: *mut c_void,
        id: usize,
        label_values: *mut Buffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    pub fn envoy_dynamic_module_callback_http_filter_config_set_gauge(
        filter_config_envoy_ptr: *mut c_void,
        id: usize,
        label_values: *mut Buffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;

    pub fn envoy_dynamic_module_callback_http_get_header(
        filter_envoy_ptr: *mut c_void,
        header_type: u32,
        key: Buffer,
        result_buffer: *mut Buffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_headers_size(filter_envoy_ptr: *mut c_void, header_type: u32) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_headers(filter_envoy_ptr: *mut c_void, header_type: u32, result_headers: *mut Header) -> bool;
    pub fn envoy_dynamic_module_callback_http_add_header(filter_envoy_ptr: *mut c_void, header_type: u32, key: Buffer, value: Buffer) -> bool;
    pub fn envoy_dynamic_module_callback_http_set_header(filter_envoy_ptr: *mut c_void, header_type: u32, key: Buffer, value: Buffer) -> bool;

    pub fn envoy_dynamic_module_callback_http_send_response(
        filter_envoy_ptr: *mut c_void,
        status_code: u32,
        headers_vector: *mut Header,
        headers_vector_size: usize,
        body: Buffer,
        details: Buffer,
    );

    pub fn envoy_dynamic_module_callback_http_get_body_size(filter_envoy_ptr: *mut c_void, body_type: u32) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(filter_envoy_ptr: *mut c_void, body_type: u32, result_buffer_vector: *mut Buffer) -> bool;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter_envoy_ptr: *mut c_void, body_type: u32) -> usize;
    pub fn envoy_dynamic_module_callback_http_received_buffered_request_body(filter_envoy_ptr: *mut c_void) -> bool;
    pub fn envoy_dynamic_module_callback_http_received_buffered_response_body(filter_envoy_ptr: *mut c_void) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(filter_config_envoy_ptr: *mut c_void) -> *mut c_void;
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(scheduler_module_ptr: *mut c_void);
    pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(scheduler_module_ptr: *mut c_void, event_id: u64);

    pub fn envoy_dynamic_module_callback_http_filter_get_attribute_string(filter_envoy_ptr: *mut c_void, attribute_id: u32, result: *mut Buffer) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_config_http_callout(
        filter_config_envoy_ptr: *mut c_void,
        callout_id_out: *mut u64,
        cluster_name: Buffer,
        headers: *mut Header,
        headers_size: usize,
        body: Buffer,
        timeout_milliseconds: u64,
    ) -> u32;
}

#[cfg(test)]
mod tests {
    /// Every callback declared above, as it is spelled in the `extern` block.
    fn declared() -> Vec<String> {
        let source = include_str!("abi.rs");
        let block = source.split("extern \"C\" {").nth(1).and_then(|rest| rest.split("\n}\n").next()).unwrap_or_default();
        block
            .split("pub fn ")
            .skip(1)
            .filter_map(|decl| decl.split('(').next())
            .map(|name| name.trim().to_string())
            .collect()
    }

    /// Envoy 1.40.0's binary exports every callback bound here (the list of its exports, from
    /// `nm -D`, is in ../shared/envoy-dynamic-modules): a name it lacks would fail the load.
    #[test]
    fn every_callback_is_exported_by_envoy_1_40() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/envoy-dynamic-modules/envoy-1.40.0-exported-callbacks.txt");
        let exported = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let exported: std::collections::HashSet<&str> = exported.lines().map(str::trim).collect();
        let names = declared();
        assert!(names.len() >= 20, "{names:?}");
        for name in names {
            assert!(exported.contains(name.as_str()), "{name} is not exported by Envoy 1.40.0");
        }
    }
}
