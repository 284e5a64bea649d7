//! A whole transaction against the full OWASP CRS (paranoia level 4, blocking, the
//! recommended base configuration): the input is a raw HTTP/1.x request; a
//! `POST /reflect` JSON body describes the response (as the CRS test backend does), so
//! phases 3-4 see hostile data too. The body is fed in two chunks. Then the request through
//! the fast engine, after every input before it, must end as through the reference engine.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wafer::{BodyAppend, Transaction};
use wafer_cli::crs::native;

fuzz_target!(|data: &[u8]| {
    let Some(req) = native::parse(data) else { return };
    let mut tx = Transaction::new(native::crs_pl4().clone(), "fuzz".into());
    tx.process_connection("127.0.0.1", 50000, "127.0.0.1", 80);
    tx.process_uri(&req.uri, &req.method, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    if tx.process_request_headers().is_none() {
        let mut stop = false;
        if tx.request_body_access() {
            let (a, b) = req.body.split_at(req.body.len() / 2);
            for chunk in [a, b] {
                match tx.append_request_body(chunk) {
                    BodyAppend::Continue => {}
                    BodyAppend::Full => break,
                    BodyAppend::Interrupt(_) => {
                        stop = true;
                        break;
                    }
                }
            }
        }
        if !stop && tx.process_request_body().is_none() {
            let (status, headers, body) = native::reflect(&req);
            for (k, v) in &headers {
                tx.add_response_header(k.as_bytes(), v.as_bytes());
            }
            if tx.process_response_headers(status, "HTTP/1.1").is_none() {
                if tx.response_body_access() {
                    let _ = tx.append_response_body(&body);
                }
                let _ = tx.process_response_body();
            }
        }
    }
    tx.process_logging();
    let _ = tx.take_log_lines();
    // The long-lived fast engine (after every input before this one) against the reference
    // (`Speed::Reference`: nothing kept across requests): the same status and log lines.
    let (fast, _, _) = native::run_request(native::crs_pl4(), &req, true);
    let (plain, _, _) = native::run_request(native::crs_pl4_reference(), &req, true);
    assert_eq!(fast.status, plain.status, "status: fast vs reference");
    assert_eq!(fast.log_lines, plain.log_lines, "log lines: fast vs reference");
});
