//! The module loads and the stream plumbing holds: connections, framing, bodies.

use std::time::Duration;

use wafer_tests::client::{Conn, Request};
use wafer_tests::envoy::Build;

use crate::cases::json_of_size;
use crate::{passed_whole, Fixture, LOG_WAIT};

per_build!(
    module_loads_and_logs_its_summary,
    keep_alive_connection_carries_several_requests,
    body_larger_than_one_read_arrives_whole,
    blocked_request_leaves_keep_alive_connection_usable,
);

fn module_loads_and_logs_its_summary(build: Build) {
    let fx = Fixture::tier(build, "@targeted");
    assert!(
        fx.envoy.wait_for_log("wafer: loaded", LOG_WAIT),
        "no start-up summary in Envoy's log:\n{}",
        fx.envoy.log()
    );
}

fn keep_alive_connection_carries_several_requests(build: Build) {
    let fx = Fixture::tier(build, "@targeted");
    let mut conn = Conn::open(fx.envoy.listener).expect("connect");
    let requests = [
        Request::get("/one"),
        Request::post("/two", "application/json", json_of_size(10 * 1024)),
        Request::post("/three", "application/json", json_of_size(20 * 1024))
            .chunked(4096, Duration::from_millis(10)),
        Request::post("/four", "text/plain", "short body"),
        Request::get("/five?a=b"),
    ];
    for req in &requests {
        let resp = conn
            .send(req)
            .unwrap_or_else(|e| panic!("{} {}: {e}", req.method, req.target));
        if let Err(why) = passed_whole(req, &resp) {
            panic!("{} {}: {why}", req.method, req.target);
        }
    }
}

fn body_larger_than_one_read_arrives_whole(build: Build) {
    // 300 KB crosses many socket reads and Envoy buffer slices, still under Envoy's 1 MiB
    // default buffer limit.
    let fx = Fixture::tier(build, "@targeted");
    let body: Vec<u8> = (0..300 * 1024)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i % 26])
        .collect();
    let req = Request::post("/upload", "application/octet-stream", body);
    let resp = fx.send(&req).expect("send");
    if let Err(why) = passed_whole(&req, &resp) {
        panic!("{why}");
    }
}

/// Waits on the engine: a request blocked in phase 1 must not cost the client its
/// keep-alive connection.
fn blocked_request_leaves_keep_alive_connection_usable(build: Build) {
    let fx = Fixture::tier(build, "@targeted");
    let mut conn = Conn::open(fx.envoy.listener).expect("connect");
    let first = Request::get("/");
    let resp = conn.send(&first).expect("first request");
    passed_whole(&first, &resp).expect("first request passes");
    let resp = conn.send(&Request::get("/admin")).expect("blocked request");
    assert_eq!(resp.status, 403, "body: {}", resp.body_text());
    let last = Request::get("/after");
    let resp = conn.send(&last).expect("request after the block");
    passed_whole(&last, &resp).expect("request after the block passes");
}
