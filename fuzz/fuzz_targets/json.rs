//! JSON bodies with small depth and argument limits (the first byte picks them).
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer::body::json::{parse, JsonLimits, OUTPUT_FACTOR, OUTPUT_FLOOR};

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else { return };
    let limits = JsonLimits {
        max_depth: usize::from(first & 0x0f) * 4 + 1,
        max_args: usize::from(first >> 4) * 16,
        max_output: usize::MAX,
    };
    let mut out = Vec::new();
    let _ = parse(input, &limits, &mut out);
    assert!(out.len() <= limits.max_args);
    let total: usize = out.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(total <= (OUTPUT_FACTOR * input.len()).max(OUTPUT_FLOOR) + 64 * 1024);
    let _ = parse(input, &JsonLimits::default(), &mut Vec::new());
});
