//! application/x-www-form-urlencoded bodies (and query strings). The first byte picks the
//! argument limit, so the over-limit path is fuzzed too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer::body::urlencoded::{parse_with, url_decode, UrlencodedOptions};

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else { return };
    let opts = UrlencodedOptions {
        separator: if first & 0x80 != 0 { b';' } else { b'&' },
        max_args: usize::from(first & 0x7f),
    };
    let mut out = Vec::new();
    let report = parse_with(input, &opts, &mut out);
    assert!(out.len() <= opts.max_args);
    // Decoding never grows the input: names + values fit in the input.
    let total: usize = out.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(total <= input.len());
    let _ = report;
    let _ = url_decode(input);
});
