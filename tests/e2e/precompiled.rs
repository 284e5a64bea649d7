//! The precompiled module (`scripts/precompile.py`, `make wasm-precompiled`): the module with
//! V8's compiled code for this Envoy build in a `precompiled_wee8_v…` section.
//!
//! - with `allow_precompiled: true` Envoy runs it: benign requests reach the upstream, an
//!   attack is blocked;
//! - that section is what Envoy loads then: the same file with one byte of V8's header in it
//!   changed is refused (the plugin fails closed and Envoy does not start);
//! - without `allow_precompiled` the section is ignored: the damaged file loads and blocks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wafer_tests::client::{self, Request};
use wafer_tests::envoy::{bootstrap, tier_config, Build, Envoy, Module, Setup, Start, TempDir};
use wafer_tests::registry::run;
use wafer_tests::upstream::Upstream;

const SQLI: &str = "/?id=1%27%20or%201=1--";

/// V8's serialization header starts with this magic number (high half; the low half depends
/// on the V8 build), then V8's version hash.
const MAGIC_HIGH: u32 = 0xC0DE_0000;

fn precompile(setup: &Setup, dir: &Path) -> PathBuf {
    let out = dir.join("wafer-precompiled.wasm");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/precompile.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script).arg("--envoy").arg(&setup.envoy).arg("--wasm").arg(&setup.wasm).arg("--out").arg(&out);
    let said = run(&mut cmd, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    assert!(said.contains("precompiled_wee8_v"), "precompile.py said: {said}");
    out
}

/// The Envoy configuration for `wasm`, with `allow_precompiled` when `allow`.
fn config(wasm: &Path, upstream: &Upstream, allow: bool) -> String {
    let yaml = bootstrap(Module { build: Build::Wasm, path: wasm }, &tier_config("@targeted"), upstream.addr());
    let runtime = "runtime: envoy.wasm.runtime.v8";
    assert!(yaml.contains(runtime));
    if allow {
        yaml.replace(runtime, &format!("{runtime}\n                  allow_precompiled: true"))
    } else {
        yaml
    }
}

fn serves_and_blocks(envoy: &Envoy, upstream: &Upstream) {
    let ok = client::send(envoy.listener, &Request::get("/products?q=shoes")).expect("benign request");
    assert_eq!(ok.status, 200, "benign request: {}", ok.body_text());
    let blocked = client::send(envoy.listener, &Request::get(SQLI)).expect("attack");
    assert_eq!(blocked.status, 403, "attack: {}", blocked.body_text());
    assert!(upstream.seen().iter().all(|s| !s.target.contains("%27")), "the attack reached the upstream");
}

#[test]
fn precompiled_module_runs_and_its_section_is_what_envoy_loads() {
    let setup = Setup::from_env();
    let dir = TempDir::new("precompiled").expect("temp dir");
    let wasm = precompile(&setup, dir.path());
    let module = fs::read(&setup.wasm).expect("module");
    let precompiled = fs::read(&wasm).expect("precompiled module");
    assert!(precompiled.starts_with(&module), "the module's own bytes come first, unchanged");
    let upstream = Upstream::start().expect("upstream");

    let envoy = Envoy::start_live(&setup, "precompiled", &config(&wasm, &upstream, true));
    serves_and_blocks(&envoy, &upstream);
    drop(envoy);

    // V8's header in the section: its magic number, right after the section's copy of the module.
    let copy = (module.len()..precompiled.len().saturating_sub(module.len()))
        .find(|&i| precompiled[i..].starts_with(&module))
        .expect("the module's copy in the section");
    let at = copy + module.len();
    let magic = precompiled.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    assert!(magic.is_some_and(|m| m & 0xFFFF_0000 == MAGIC_HIGH), "no V8 header after the module's copy: {magic:x?}");
    let mut damaged = precompiled.clone();
    damaged[at + 4] ^= 0xFF;
    let bad = dir.path().join("damaged.wasm");
    fs::write(&bad, &damaged).expect("write");
    match Envoy::start(&setup, "precompiled-damaged", &config(&bad, &upstream, true)) {
        Ok(Start::Exited { log, .. }) => assert!(log.contains("Failed to load Wasm"), "Envoy's log: {log}"),
        Ok(Start::Live(_)) => panic!("a damaged precompiled section was accepted: the section is not what Envoy loads"),
        Ok(Start::TimedOut { log }) => panic!("not LIVE and not exited:\n{log}"),
        Err(e) => panic!("cannot start envoy: {e}"),
    }

    let envoy = Envoy::start_live(&setup, "precompiled-ignored", &config(&bad, &upstream, false));
    serves_and_blocks(&envoy, &upstream);
}
