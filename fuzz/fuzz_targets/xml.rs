//! XML bodies (UTF-8/UTF-16/Latin-1, DOCTYPE, entities) with a small depth limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer::body::xml::{parse, XmlLimits};

fuzz_target!(|data: &[u8]| {
    let r = parse(data, &XmlLimits { max_depth: 16, max_attrs: 64 });
    // No entity expansion: the output is at most a small multiple of the input
    // (UTF-16 -> UTF-8 may grow 3 bytes per 2, and Latin-1 2 per 1).
    assert!(r.attr_values.len() <= 64);
    let attrs: usize = r.attr_values.iter().map(|v| v.len()).sum();
    let text = r.root_text().map_or(0, <[u8]>::len);
    assert!(attrs + text <= 2 * data.len() + 16, "{attrs} + {text} from {}", data.len());
    let _ = parse(data, &XmlLimits::default());
});
