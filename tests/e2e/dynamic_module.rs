//! The dynamic module loaded the ways Envoy finds one (the other tests name the file with
//! `module.local.filename`):
//!
//! - by name: `dynamic_module_config: {name: wafer}` loads
//!   `$ENVOY_DYNAMIC_MODULES_SEARCH_PATH/libwafer.so`, and Envoy logs that the module's ABI
//!   version is its own;
//! - `envoy-dynamic/examples/remote/envoy.yaml` for real: Envoy fetches the module from a
//!   loopback HTTP server, checks its sha256, blocks an attack with the full CRS, and shows
//!   wafer's counters with Prometheus labels;
//! - the same with a wrong sha256: Envoy 1.40 refuses the module, starts anyway, and skips the
//!   filter: requests pass uninspected (docs/native.md, "Loading it": a remote source fails open).
//!
//! Envoy keeps each module it fetched and checked in `$TMPDIR` (see [`fresh_cache`]).

use std::fs;
use std::time::Duration;

use wafer_tests::client::{self, Request};
use wafer_tests::envoy::{admin_get, bootstrap, tier_config, Build, Envoy, Options, Setup, TempDir};
use wafer_tests::registry::{self, sha256_hex, FileServer};
use wafer_tests::upstream::Upstream;

const SQLI: &str = "/?id=1%27%20or%201=1--";

#[test]
fn loads_by_name_from_the_search_path_with_envoys_abi_version() {
    let setup = Setup::from_env();
    assert_eq!(setup.native.file_name().and_then(|n| n.to_str()), Some("libwafer.so"), "Envoy looks for lib<name>.so");
    let dir = setup.native.parent().expect("the module's directory").to_path_buf();
    let upstream = Upstream::start().expect("upstream");
    let yaml = bootstrap(setup.module(Build::Native), &tier_config("@targeted"), upstream.addr());
    let local = format!("dynamic_module_config: {{ module: {{ local: {{ filename: {} }} }} }}", wafer_tests::envoy::json_string(&setup.native.display().to_string()));
    assert!(yaml.contains(&local), "bootstrap layout changed");
    let yaml = yaml.replace(&local, "dynamic_module_config: { name: wafer }");
    let options = Options { env: vec![("ENVOY_DYNAMIC_MODULES_SEARCH_PATH".into(), dir.display().to_string())], ..Options::default() };
    let envoy = Envoy::start_live_opts(&setup, "by-name", &yaml, &options);
    let attack = client::send(envoy.listener, &Request::get(SQLI)).expect("send the attack");
    assert_eq!(attack.status, 403, "SQL injection: {}", attack.body_text());
    let benign = client::send(envoy.listener, &Request::get("/")).expect("send");
    assert_eq!(benign.status, 200, "benign: {}", benign.body_text());
    assert!(
        envoy.log().contains("Dynamic module ABI version v0.2.0 matched."),
        "Envoy did not confirm the module's ABI version:\n{}",
        envoy.log()
    );
}

/// Envoy keeps the modules it fetched in `$TMPDIR/envoy_dynamic_module_<sha256>.so` and loads
/// a cached one (checked again) without fetching: each test gets its own `TMPDIR`.
fn fresh_cache(dir: &TempDir) -> Options {
    Options { env: vec![("TMPDIR".into(), dir.path().display().to_string())], ..Options::default() }
}

/// `envoy-dynamic/examples/remote/envoy.yaml` on the kernel's ports, fetching from `server`,
/// with `sha256`.
fn remote_example(server: &FileServer, upstream: &Upstream, sha256: &str) -> String {
    registry::remote_example("envoy-dynamic/examples/remote/envoy.yaml", "SHA256_OF_LIBWAFER_SO", server, upstream, sha256)
}

#[test]
fn remote_example_fetches_verifies_blocks_and_labels_metrics() {
    let setup = Setup::from_env();
    let module = fs::read(&setup.native).expect("read the module");
    let server = FileServer::start("/libwafer.so", module).expect("file server");
    let upstream = Upstream::start().expect("upstream");
    let sha256 = sha256_hex(&setup.native);
    let yaml = remote_example(&server, &upstream, &sha256);
    let cache = TempDir::new("native-remote-cache").expect("temp dir");
    let envoy = Envoy::start_live_opts(&setup, "native-remote", &yaml, &fresh_cache(&cache));
    assert!(server.hits() >= 1, "Envoy did not fetch the module");
    assert!(cache.path().join(format!("envoy_dynamic_module_{sha256}.so")).is_file(), "Envoy did not cache the module it checked");

    let attack = client::send(envoy.listener, &Request::get(SQLI)).expect("send the attack");
    assert_eq!(attack.status, 403, "SQL injection: {}", attack.body_text());
    let benign = client::send(envoy.listener, &Request::get("/")).expect("send");
    assert_eq!(benign.status, 200, "benign: {}", benign.body_text());
    assert!(upstream.seen().iter().all(|s| !s.target.contains("%27")), "the attack reached the upstream");

    // The per-rule family's labels are Envoy tags; the build gauge's come from stats_tags.
    let prom = admin_get(envoy.admin, "/stats/prometheus").expect("/stats/prometheus");
    let line = prom
        .lines()
        .find(|l| l.contains("wafer_rule_interruptions{"))
        .unwrap_or_else(|| panic!("no wafer_rule_interruptions in:\n{prom}"));
    assert!(line.contains("rule_id=\"949110\"") && line.contains("phase=\"2\"") && line.ends_with(" 1"), "{line}");
    let build = prom.lines().find(|l| l.contains("wafer_build{")).unwrap_or_else(|| panic!("no wafer_build gauge in:\n{prom}"));
    let crs = wafer::embedded::CRS_VERSION.replace('.', "_");
    assert!(build.contains(&format!("crs=\"{crs}\"")) && build.contains("revision=\"") && build.ends_with(" 1"), "{build}");
}

#[test]
fn remote_module_with_a_wrong_sha256_is_refused_and_the_filter_skipped() {
    let setup = Setup::from_env();
    let module = fs::read(&setup.native).expect("read the module");
    let server = FileServer::start("/libwafer.so", module).expect("file server");
    let upstream = Upstream::start().expect("upstream");
    let wrong = "0".repeat(63) + "1";
    let yaml = remote_example(&server, &upstream, &wrong);
    let cache = TempDir::new("native-remote-bad-cache").expect("temp dir");
    let envoy = Envoy::start_live_opts(&setup, "native-remote-bad-sha", &yaml, &fresh_cache(&cache));
    assert!(server.hits() >= 1, "Envoy did not even fetch the module");
    assert!(
        envoy.wait_for_log("Remote dynamic module fetch returned empty data", Duration::from_secs(10)),
        "Envoy did not refuse the module:\n{}",
        envoy.log()
    );
    assert!(!envoy.log().contains("wafer: loaded"), "the module ran:\n{}", envoy.log());
    // Envoy 1.40 fails open here: the attack reaches the upstream uninspected.
    let resp = client::send(envoy.listener, &Request::get(SQLI)).expect("send");
    assert_eq!(resp.status, 200, "{}", resp.body_text());
    assert!(upstream.seen().iter().any(|s| s.target.contains("%27")), "the attack did not reach the upstream");
    assert!(envoy.counter("dynamic_modules.remote_fetch_error.config_name.wafer") >= 1, "no fetch error counted");
}
