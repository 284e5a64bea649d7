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

/// The lines of each `envoy.filters.http.wasm` filter of an Envoy YAML: from its `- name:`
/// line to the next line indented no deeper.
fn wasm_filter_blocks(text: &str) -> Vec<Vec<&str>> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "- name: envoy.filters.http.wasm" {
            continue;
        }
        let depth = indent(line);
        let rest = lines[i + 1..].iter().take_while(|l| l.trim().is_empty() || indent(l) > depth);
        blocks.push(std::iter::once(*line).chain(rest.copied()).collect());
    }
    blocks
}

/// How many lines of `block` set `key` (comments aside).
fn settings_of(block: &[&str], key: &str) -> usize {
    block.iter().filter(|l| l.trim_start().starts_with(&format!("{key}:"))).count()
}

/// Every wasm filter of the example configurations says exactly once what Envoy does when its
/// VM fails: a key given twice in a YAML mapping is taken from its last line, so the first
/// (and the comment above it) would describe what the filter does not do, and a filter
/// without one gets Envoy's default silently. The Istio manifests' WasmPlugins the same, with
/// `failStrategy`.
#[test]
fn every_example_wasm_filter_has_exactly_one_failure_policy() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut dirs = vec![repo.join("envoy-wasm/examples"), repo.join("istio")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    let mut filters = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read example");
        for block in wasm_filter_blocks(&text) {
            filters += 1;
            assert_eq!(settings_of(&block, "failure_policy"), 1, "{}: a wasm filter with {} failure_policy lines:\n{}", path.display(), settings_of(&block, "failure_policy"), block.join("\n"));
        }
        for doc in text.split("\n---").filter(|d| d.contains("kind: WasmPlugin")) {
            filters += 1;
            let lines: Vec<&str> = doc.lines().collect();
            assert_eq!(settings_of(&lines, "failStrategy"), 1, "{}: a WasmPlugin without exactly one failStrategy", path.display());
        }
    }
    assert!(filters >= 7, "only {filters} wasm filters found in {} files", files.len());
    // The check sees a duplicate: the example's block as it was.
    let twice = "          - name: envoy.filters.http.wasm\n            typed_config:\n              config:\n                failure_policy: FAIL_RELOAD\n                failure_policy: FAIL_CLOSED\n          - name: envoy.filters.http.router\n";
    assert_eq!(wasm_filter_blocks(twice).iter().map(|b| settings_of(b, "failure_policy")).collect::<Vec<_>>(), vec![2]);
}
