//! Differential: two raw HTTP/1.x requests (the input split at its first `\0\0`) through
//! phases 1-5 against the full CRS at paranoia level 4: the second, run right after the first
//! and following its trace (the transaction replay), must end as it ends without the replay:
//! the same status, log lines and final TX. Hostile pairs test what the replay decides from
//! the differences between two requests: the rules it passes, those it tests on changed
//! values alone, the effects it does again, the rules it evaluates and compares. And it must
//! end as the reference engine (`Speed::Reference`: no memo, spares or quick records) ends it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer_cli::crs::native;

fuzz_target!(|data: &[u8]| {
    let Some(at) = data.windows(2).position(|w| w == b"\0\0") else { return };
    let (Some(first), Some(second)) = (data.get(..at).and_then(native::parse), data.get(at + 2..).and_then(native::parse)) else { return };
    let rs = native::crs_pl4();
    let _ = native::run_request(rs, &first, false);
    let (got, got_tx, _) = native::run_request(rs, &second, true);
    let (want, want_tx, _) = native::run_request(rs, &second, false);
    assert_eq!(got.status, want.status, "status after the first request (replay)");
    assert_eq!(got.log_lines, want.log_lines, "log lines after the first request (replay)");
    assert!(got_tx == want_tx, "TX differs after the first request (replay)");
    // And as the reference engine (no memo, spares or quick records either) ends it.
    let (plain, plain_tx, _) = native::run_request(native::crs_pl4_reference(), &second, true);
    assert_eq!(got.status, plain.status, "status after the first request (fast vs reference)");
    assert_eq!(got.log_lines, plain.log_lines, "log lines after the first request (fast vs reference)");
    assert!(got_tx == plain_tx, "TX differs after the first request (fast vs reference)");
});
