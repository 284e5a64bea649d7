//! End-to-end tests: a real Envoy loads wafer in front of an upstream written in the test (see
//! `wafer_tests::upstream`), and requests go over raw TCP. Most tests run once per build
//! ([`per_build!`]: `<file>::wasm::<test>` loads `target/wafer.wasm`, `<file>::native::<test>`
//! `target/libwafer.so`); the tests of one build's own machinery (V8's precompiled code, the
//! OCI image, Istio, the wasm `failure_policy`, the dynamic module's panic handling) run for it.
//!
//! Run them with `make test`, which installs Envoy, builds both modules, and passes the paths
//! in `WAFER_ENVOY` / `WAFER_WASM` / `WAFER_NATIVE`. Without those variables every test here
//! fails (never skips).
//!
//! Layout:
//! - `cases`: the request table (what to send, which status each tier must answer);
//! - `tiers`: runs the table against each tier, one Envoy per test;
//! - `plumbing`: the module loads, connections and bodies survive the filter;
//! - `custom_rules`: response phases, redirect and the response body limit, with rules of our own;
//! - `config_errors`: bad plugin configurations are refused with a position;
//! - `examples`: `envoy --mode validate` on the configurations under `envoy-wasm/examples/`
//!   and `envoy-dynamic/examples/`;
//! - `edge_cases`: malformed JSON, invalid percent-encoding, body limits (Reject, ProcessPartial);
//! - `ship`: the OCI image through a real registry, `istio/` manifests against the CRD, Envoy's
//!   remote fetch with sha256, build identity and Prometheus labels.
//! - `protect`: IP lists, rate limits, behaviour scoring, hardening, request log (two workers);
//! - `hostile`: hostile requests against the full CRS, then wafer is still serving;
//! - `failure_policy`: Envoy's `failure_policy` when the VM crashes, a panic in the dynamic
//!   module, bad rules, Envoy's buffer.
//! - `dynamic_module`: the dynamic module loaded the ways Envoy finds one (`name` and the search path,
//!   a remote source checked by sha256).
//! - `budget`: the memory budget: bodies held at once past it get 413, counted and logged.
//! - `fidelity`: verdicts of `@recommended-conf` that follow ModSecurity v3 (XXE, NoFilesLimit, strict multipart).
//! - `precompiled`: the module with V8's compiled code for this Envoy (`make wasm-precompiled`).
//! - `run`: `make run`'s configuration answers the requests it prints as it says.
//! - `tuning`: docs/tuning.md's exclusions pass their false positive and still block elsewhere.

/// Runs each named test function (`fn name(build: Build)`) once per build: the tests
/// `wasm::name` and `native::name` of the module that invokes it.
macro_rules! per_build {
    ($($name:ident),* $(,)?) => {
        mod wasm {
            $(#[test]
            fn $name() {
                super::$name(wafer_tests::envoy::Build::Wasm)
            })*
        }
        mod native {
            $(#[test]
            fn $name() {
                super::$name(wafer_tests::envoy::Build::Native)
            })*
        }
    };
}

mod budget;
mod cases;
mod config_errors;
mod custom_rules;
mod examples;
mod plumbing;
mod ship;
mod tiers;
mod edge_cases;
mod protect;
mod hostile;
mod detect;
mod failure_policy;
mod dynamic_module;
mod precompiled;
mod fidelity;
mod run;
mod tuning;

use std::time::Duration;

use wafer_tests::client::{self, Request, Response};
use wafer_tests::envoy::{bootstrap, tier_config, Build, Envoy, Setup};
use wafer_tests::upstream::{reply_for, Upstream};

/// Header naming the table case on each request, so the upstream's record can be matched.
pub const CASE_HEADER: &str = "x-wafer-case";

/// One Envoy with wafer in front of one upstream. Envoy is declared first so it stops first.
pub struct Fixture {
    pub envoy: Envoy,
    pub upstream: Upstream,
    pub build: Build,
}

impl Fixture {
    /// Starts the upstream and an Envoy whose wafer (`build`) gets `plugin_config`.
    pub fn start(build: Build, label: &str, plugin_config: &str) -> Fixture {
        let setup = Setup::from_env();
        let upstream = Upstream::start().expect("start the upstream");
        let yaml = bootstrap(setup.module(build), plugin_config, upstream.addr());
        let envoy = Envoy::start_live(&setup, &format!("{label}-{}", build.name()), &yaml);
        Fixture { envoy, upstream, build }
    }

    /// Starts with one embedded tier (`@targeted`, `@headers-only`, ...) for every host.
    pub fn tier(build: Build, tier: &str) -> Fixture {
        let label = tier.trim_start_matches('@');
        Fixture::start(build, label, &tier_config(tier))
    }

    /// The value of one of wafer's counters (`wafer.transactions`, ...).
    pub fn counter(&self, name: &str) -> u64 {
        self.envoy.counter(&self.build.stat(name))
    }

    pub fn send(&self, req: &Request) -> std::io::Result<Response> {
        client::send(self.envoy.listener, req)
    }

    /// Whether the upstream received the whole request of table case `name`.
    pub fn upstream_saw_case(&self, name: &str) -> bool {
        self.upstream.seen().iter().any(|s| {
            s.headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case(CASE_HEADER) && v == name)
        })
    }
}

/// Checks that a passed request reached the upstream with its body intact (the upstream's
/// reply carries the body's length and hash).
pub fn passed_whole(req: &Request, resp: &Response) -> Result<(), String> {
    let want = reply_for(&req.body);
    if resp.status != 200 {
        return Err(format!(
            "status {} (want 200), body {:?}",
            resp.status,
            short(&resp.body_text())
        ));
    }
    if resp.body_text() != want {
        return Err(format!(
            "upstream answered {:?}, want {want:?}",
            short(&resp.body_text())
        ));
    }
    Ok(())
}

/// The first 200 characters of a text, for failure messages.
pub fn short(text: &str) -> String {
    text.chars().take(200).collect()
}

/// How long to wait for a log line that should follow a response.
pub const LOG_WAIT: Duration = Duration::from_secs(5);
