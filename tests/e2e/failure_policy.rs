//! What Envoy 1.40 does when wafer fails, per the wasm filter's `failure_policy`
//! (`envoy.extensions.wasm.v3.PluginConfig`), docs/hardening.md, "Failure policy":
//!
//! - a configuration that does not compile: Envoy refuses it, whatever the policy (also
//!   `FAIL_OPEN`): there is no fail-open at start;
//! - the VM crashes (a wasm trap; provoked here with the test-only `test_trap_header`, which
//!   no request can reach in a real configuration): `FAIL_CLOSED` (the default) answers 503
//!   to that request and every later one on the worker; `FAIL_OPEN` lets later requests through
//!   **uninspected** (an attack reaches the upstream); `FAIL_RELOAD` starts a fresh VM after
//!   the backoff, and inspection resumes.
//!
//! The dynamic module has no VM to lose: it is built with `panic = "unwind"` and catches a panic
//! in every hook, so the request that panicked is answered 500 by wafer (fail closed), and
//! Envoy and every later request go on as before (docs/native.md, "Panics").

use std::time::{Duration, Instant};

use wafer_tests::client::Request;
use wafer_tests::envoy::{bootstrap, Build, Envoy, Setup, Start};
use wafer_tests::upstream::Upstream;

use crate::{passed_whole, Fixture};

per_build!(body_over_envoys_buffer_is_413);

const TRAP: &str = "x-wafer-test-trap";

fn config() -> String {
    format!(r#"{{"directives_map":{{"default":["Include @targeted"]}},"default_directives":"default","test_trap_header":"{TRAP}"}}"#)
}

/// The bootstrap of [`bootstrap`] with `failure_policy` (and a 100 ms reload backoff) set.
fn with_policy(yaml: &str, policy: &str) -> String {
    let anchor = "                root_id: wafer\n";
    assert!(yaml.contains(anchor), "bootstrap layout changed");
    yaml.replace(
        anchor,
        &format!("{anchor}                failure_policy: {policy}\n                reload_config: {{ backoff: {{ base_interval: 0.1s, max_interval: 0.2s }} }}\n"),
    )
}

fn start(label: &str, policy: &str) -> Fixture {
    let setup = Setup::from_env();
    let upstream = Upstream::start().expect("start the upstream");
    let yaml = with_policy(&bootstrap(setup.module(Build::Wasm), &config(), upstream.addr()), policy);
    let envoy = Envoy::start_live(&setup, label, &yaml);
    Fixture { envoy, upstream, build: Build::Wasm }
}

fn attack() -> Request {
    Request::get("/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
}

fn benign() -> Request {
    Request::get("/index.html")
}

fn trap() -> Request {
    Request::get("/").header(TRAP, "1")
}

/// Status of `req` (0 when the connection fails without a response).
fn status(fx: &Fixture, req: &Request) -> u16 {
    fx.send(req).map(|r| r.status).unwrap_or(0)
}

#[test]
fn fail_closed_answers_503_after_a_crash() {
    let fx = start("fp-closed", "FAIL_CLOSED");
    assert_eq!(status(&fx, &attack()), 403, "inspection works before the crash");
    assert_eq!(status(&fx, &trap()), 503, "the request that crashed the VM");
    for req in [benign(), attack(), benign()] {
        assert_eq!(status(&fx, &req), 503, "{} after the crash", req.target);
    }
    assert!(
        !fx.upstream.seen().iter().any(|s| s.target.starts_with("/search")),
        "no attack reached the upstream"
    );
}

#[test]
fn fail_open_passes_uninspected_after_a_crash() {
    let fx = start("fp-open", "FAIL_OPEN");
    assert_eq!(status(&fx, &attack()), 403, "inspection works before the crash");
    let _ = status(&fx, &trap());
    let resp = fx.send(&benign()).expect("send");
    passed_whole(&benign(), &resp).expect("benign after the crash");
    // The documented risk of FAIL_OPEN: the attack now reaches the upstream.
    assert_eq!(status(&fx, &attack()), 200, "FAIL_OPEN lets the attack through");
}

#[test]
fn fail_reload_restores_inspection_after_a_crash() {
    let fx = start("fp-reload", "FAIL_RELOAD");
    assert_eq!(status(&fx, &attack()), 403, "inspection works before the crash");
    let crashed = status(&fx, &trap());
    assert_ne!(crashed, 200, "the request that crashed the VM must not pass");
    // A fresh VM after the backoff: benign 200 and the attack blocked again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let b = status(&fx, &benign());
        let a = status(&fx, &attack());
        seen.push((b, a));
        if (b, a) == (200, 403) {
            break;
        }
        assert!(a != 200, "an attack passed while the VM reloaded: {seen:?}");
        assert!(Instant::now() < deadline, "no working VM 20 s after the crash: {seen:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        fx.envoy.log().contains("wafer ready") || fx.envoy.log().contains("loaded"),
        "the reloaded VM logged its start"
    );
}

#[test]
fn bad_rules_are_refused_even_with_fail_open() {
    let setup = Setup::from_env();
    let upstream = Upstream::start().expect("start the upstream");
    let bad = r#"{"directives_map":{"default":["SecRule ARGS \"@rxx a\" \"id:1\""]},"default_directives":"default"}"#;
    let yaml = with_policy(&bootstrap(setup.module(Build::Wasm), bad, upstream.addr()), "FAIL_OPEN");
    match Envoy::start(&setup, "fp-bad-open", &yaml).expect("spawn envoy") {
        Start::Exited { code, log } => {
            assert_ne!(code, Some(0), "{log}");
            assert!(log.contains("unknown operator"), "wafer's message in the log:\n{log}");
        }
        Start::Live(envoy) => panic!("Envoy took a configuration that does not compile:\n{}", envoy.log()),
        Start::TimedOut { log } => panic!("Envoy neither refused nor took it:\n{log}"),
    }
}

/// A body larger than Envoy's buffer (`per_connection_buffer_limit_bytes`, 1 MiB by default,
/// as in this bootstrap): wafer holds the body until the end of the stream to inspect it, so
/// Envoy answers 413 itself and the upstream never sees the request. A tier without body
/// access streams it through.
fn body_over_envoys_buffer_is_413(build: Build) {
    let body = format!("a={}", "b".repeat(2 << 20));
    let fx = Fixture::tier(build, "@targeted");
    let req = Request::post("/upload", "application/x-www-form-urlencoded", body.clone());
    assert_eq!(status(&fx, &req), 413, "over Envoy's buffer with body inspection");
    assert!(fx.upstream.seen().is_empty(), "the upstream never saw it");
    let fx = Fixture::tier(build, "@headers-only");
    let req = Request::post("/upload", "application/x-www-form-urlencoded", body);
    let resp = fx.send(&req).expect("send");
    passed_whole(&req, &resp).expect("streamed through without body inspection");
}

/// A panic in the dynamic module (the trap header panics inside the request-headers hook, in
/// the filter, where a bug in the engine would): that request gets wafer's 500 and never
/// reaches the upstream, Envoy keeps running on the same worker, and inspection goes on for
/// every later request, each panic again caught.
#[test]
fn a_panic_in_the_dynamic_module_fails_its_request_closed_and_envoy_serves_on() {
    let fx = Fixture::start(Build::Native, "panic", &config());
    assert_eq!(status(&fx, &attack()), 403, "inspection works before the panic");
    for round in 0..3 {
        let resp = fx.send(&trap()).expect("the request that panics gets an answer");
        assert_eq!(resp.status, 500, "round {round}: {}", resp.body_text());
        assert_eq!(resp.body_text(), "wafer: internal error\n");
        let resp = fx.send(&benign()).expect("send");
        passed_whole(&benign(), &resp).expect("benign after the panic");
        assert_eq!(status(&fx, &attack()), 403, "round {round}: an attack after the panic is blocked");
    }
    let mut envoy = fx.envoy;
    assert!(envoy.running(), "Envoy is still running");
    assert!(
        !fx.upstream.seen().iter().any(|s| s.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(TRAP))),
        "a request that panicked reached the upstream"
    );
    let log = envoy.log();
    assert_eq!(log.matches("wafer: panic: panicked at").count(), 3, "each panic is logged:\n{log}");
    assert_eq!(log.matches("a panic failed this request closed (500)").count(), 3, "{log}");
}
