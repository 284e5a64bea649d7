//! Transformation chains: the first bytes (up to 4, until a byte >= 0x80) pick
//! transformations from `Transform::ALL`, applied in order to the rest.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::borrow::Cow;
use wafer::transforms::Transform;

fuzz_target!(|data: &[u8]| {
    let mut chain = Vec::new();
    let mut rest = data;
    while let Some((&b, tail)) = rest.split_first() {
        if b >= 0x80 || chain.len() == 4 {
            break;
        }
        chain.push(Transform::ALL[usize::from(b) % Transform::ALL.len()]);
        rest = tail;
    }
    let mut value: Cow<[u8]> = Cow::Borrowed(rest);
    for t in chain {
        let before = value.len();
        let next = t.apply(&value).into_owned();
        // Only the encoders and hashes may grow a value, and by a bounded factor.
        assert!(next.len() <= before * 6 + 64, "{t:?}: {before} -> {}", next.len());
        value = Cow::Owned(next);
    }
    // Each transformation alone on the raw input, too.
    for t in Transform::ALL {
        let _ = t.apply(rest);
    }
});
