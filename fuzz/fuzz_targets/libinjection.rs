//! @detectSQLi and @detectXSS (the Rust port of libinjection).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(fp) = wafer::operators::libinjection::detect_sqli(data) {
        assert!(!fp.is_empty() && fp.len() <= 8, "fingerprint {fp:?}");
    }
    let _ = wafer::operators::libinjection::detect_xss(data);
});
