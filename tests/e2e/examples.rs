//! The configurations under `envoy-wasm/examples/` and `envoy-dynamic/examples/` stay valid:
//! `envoy --mode validate` loads the module and runs wafer's configuration step, so a stale
//! plugin configuration fails here too.

use std::path::Path;
use std::process::Command;

use wafer_tests::envoy::{Setup, TempDir};

fn validate(example: &str) {
    let setup = Setup::from_env();
    let native = example.starts_with("envoy-dynamic/");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(repo.join(example))
        .unwrap_or_else(|e| panic!("read {example}: {e}"));
    // The examples name the module relative to the repository root; point at the one under
    // test instead, wherever it is. (The remote-fetch example names a URL: validation does
    // not fetch it; tests/e2e/ship.rs runs that one for real.)
    assert!(
        text.contains("filename: target/wafer.wasm") || text.contains("remote:") || (native && text.contains("dynamic_module_config: { name: wafer }")),
        "{example} does not load wafer"
    );
    let text = text.replace(
        "filename: target/wafer.wasm",
        &format!("filename: {}", setup.wasm.display()),
    );
    let dir = TempDir::new("validate").expect("temp dir");
    let config = dir.path().join("envoy.yaml");
    std::fs::write(&config, text).expect("write config");
    // `name: wafer` is found as lib<name>.so in the search path (the dynamic module's examples
    // say to run Envoy with ENVOY_DYNAMIC_MODULES_SEARCH_PATH=target).
    let search = setup.native.parent().map(|d| d.display().to_string()).unwrap_or_default();
    let out = Command::new(&setup.envoy)
        .env("ENVOY_DYNAMIC_MODULES_SEARCH_PATH", search)
        .args(["--mode", "validate", "--disable-hot-restart", "-c"])
        .arg(&config)
        .output()
        .expect("run envoy --mode validate");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && log.contains(" OK"),
        "{example} does not validate:\n{log}"
    );
}

#[test]
fn example_envoy_yaml_validates() {
    validate("envoy-wasm/examples/envoy.yaml");
}

#[test]
fn make_run_envoy_yaml_validates() {
    validate("envoy-wasm/examples/run/envoy.yaml");
}

#[test]
fn remote_fetch_envoy_yaml_validates() {
    validate("envoy-wasm/examples/remote-fetch/envoy.yaml");
}

#[test]
fn native_example_envoy_yaml_validates() {
    validate("envoy-dynamic/examples/envoy.yaml");
}

#[test]
fn make_run_native_envoy_yaml_validates() {
    validate("envoy-dynamic/examples/run/envoy.yaml");
}

#[test]
fn native_remote_envoy_yaml_validates() {
    validate("envoy-dynamic/examples/remote/envoy.yaml");
}
