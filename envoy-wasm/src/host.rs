//! The filter's host services ([`wafer_filter::host`]) on the proxy-wasm ABI.
//!
//! [`WasmHost`] serves a plugin configuration, [`WasmStream`] a stream's callback: both are
//! empty, since the ABI's host knows the current context. Shared state is the VM's shared data
//! (one store per Envoy process and VM id, seen by every worker), updated with
//! compare-and-swap: read the value and its CAS token, compute, write with the token; when
//! another worker wrote in between the host answers `CasMismatch` and the update starts over
//! (a few times, then it fails).

use std::time::Duration;

use crate::abi::hostcalls;
use crate::abi::types::{BufferType, Bytes, MapType, MetricType, Status};
use wafer_filter::host::{HeaderMap, Host, Level, Property, Side, StreamHost};

/// CAS attempts before giving up on one update.
const CAS_ATTEMPTS: usize = 8;

#[derive(Clone, Copy, Default)]
pub(crate) struct WasmHost;

impl Host for WasmHost {
    type Counter = u32;
    /// The family's name and labels: members are defined by their full names on first use.
    type Family = (String, &'static [&'static str]);

    fn log(&self, level: Level, message: &str) {
        let _ = hostcalls::log(level, message);
    }

    fn now_nanos(&self) -> u64 {
        hostcalls::current_time_nanos().unwrap_or(0)
    }

    fn define_counter(&self, name: &str) -> Option<u32> {
        hostcalls::define_metric(MetricType::Counter, name).ok()
    }

    fn define_family(&self, name: &str, labels: &'static [&'static str]) -> Option<Self::Family> {
        Some((name.to_string(), labels))
    }

    fn family_counter(&self, (name, labels): &Self::Family, values: &[&str]) -> Option<u32> {
        self.define_counter(&wafer_filter::family_member_name(name, labels, values))
    }

    fn increment(&self, counter: &u32, by: u64) {
        let _ = hostcalls::increment_metric(*counter, i64::try_from(by).unwrap_or(i64::MAX));
    }

    fn set_gauge(&self, name: &str, value: u64) {
        if let Ok(id) = hostcalls::define_metric(MetricType::Gauge, name) {
            let _ = hostcalls::record_metric(id, value);
        }
    }

    fn shared_get(&self, key: &str) -> Result<Option<Bytes>, Status> {
        hostcalls::get_shared_data(key).map(|(value, _)| value)
    }

    fn shared_update(&self, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Bytes) -> Result<(), Status> {
        for _ in 0..CAS_ATTEMPTS {
            let (value, cas) = hostcalls::get_shared_data(key)?;
            let new = f(value.as_deref());
            match hostcalls::set_shared_data(key, Some(&new), cas) {
                Ok(()) => return Ok(()),
                Err(Status::CasMismatch) => continue,
                Err(status) => return Err(status),
            }
        }
        Err(Status::CasMismatch)
    }

    fn http_call(&self, cluster: &str, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<(), Status> {
        hostcalls::dispatch_http_call(cluster, headers, body, timeout).map(|_token| ())
    }

    /// A stream's context may dispatch calls itself.
    fn flush_later(&self) -> bool {
        false
    }

    /// A local reply runs through the response callbacks of every filter, this one's too.
    fn replies_skip_filter(&self) -> bool {
        false
    }
}

#[derive(Clone, Copy, Default)]
pub(crate) struct WasmStream;

fn map(side: Side) -> MapType {
    match side {
        Side::Request => MapType::HttpRequestHeaders,
        Side::Response => MapType::HttpResponseHeaders,
    }
}

/// Property paths as the ABI serializes them (the parts joined by NUL): constants, so a
/// request's property reads allocate only the host's answer.
fn path(property: Property) -> &'static [u8] {
    match property {
        Property::SourceAddress => b"source\0address",
        Property::DestinationAddress => b"destination\0address",
        Property::RequestProtocol => b"request\0protocol",
    }
}

impl StreamHost for WasmStream {
    fn headers(&mut self, side: Side) -> Option<HeaderMap> {
        HeaderMap::from_block(hostcalls::get_header_map_pairs(map(side)).ok()?)
    }

    fn header(&mut self, side: Side, name: &str) -> Option<Bytes> {
        hostcalls::get_map_value_bytes(map(side), name).ok().flatten()
    }

    fn set_header(&mut self, side: Side, name: &str, value: Option<&[u8]>) -> bool {
        hostcalls::set_map_value(map(side), name, value).is_ok()
    }

    fn add_header(&mut self, side: Side, name: &str, value: &[u8]) -> bool {
        hostcalls::add_map_value_bytes(map(side), name, value).is_ok()
    }

    /// With `Action::Pause` (Envoy: StopIterationAndBuffer) the host's body buffer is
    /// everything held so far.
    fn body(&mut self, side: Side, start: usize, max: usize) -> Result<Option<Bytes>, Status> {
        let buffer = match side {
            Side::Request => BufferType::HttpRequestBody,
            Side::Response => BufferType::HttpResponseBody,
        };
        hostcalls::get_buffer(buffer, start, max)
    }

    fn property(&mut self, property: Property) -> Option<Bytes> {
        hostcalls::get_property(path(property))
    }

    fn send_reply(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> bool {
        hostcalls::send_http_response(u32::from(status), headers, body).is_ok()
    }
}
