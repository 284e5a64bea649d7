//! Differential: a raw HTTP/1.x request (as for `transaction`) through phases 1-5 against the
//! full CRS at paranoia level 4, its request's and response's headers given in one serialized
//! block each with pseudo-headers first (as Envoy gives them to the module), must end as it
//! ends with the headers added one by one without the transaction replay: the same status,
//! log lines and final TX. Checked without the replay, then with it (following the trace of
//! the run before, the same request), so hostile requests test the block parser and the
//! replay's equivalence at once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer_cli::crs::native;

fuzz_target!(|data: &[u8]| {
    let Some(req) = native::parse(data) else { return };
    let rs = native::crs_pl4();
    let (want, want_tx, _) = native::run_request_with(rs, &req, false, None);
    for replay in [false, true] {
        let (got, got_tx, _) = native::run_request_as_blocks(rs, &req, replay, None);
        assert_eq!(got.status, want.status, "status, headers as blocks (replay {replay})");
        assert_eq!(got.log_lines, want.log_lines, "log lines, headers as blocks (replay {replay})");
        assert!(got_tx == want_tx, "TX differs, headers as blocks (replay {replay})");
    }
});
