//! Shipping wafer the way Envoy and Istio users deploy filters, against real components:
//!
//! - `make oci`'s image goes through a real registry (Debian `docker-registry` on loopback)
//!   with skopeo, both ways; the pulled module is byte-identical, and the pulled file runs in
//!   Envoy with the ingress-gateway manifest's configuration;
//! - the image is reproducible from the module alone;
//! - every manifest under `istio/` is valid for the WasmPlugin CRD and its `pluginConfig` is
//!   accepted by wafer;
//! - `envoy-wasm/examples/remote-fetch/envoy.yaml` runs for real: Envoy fetches the module from a
//!   loopback HTTP server, checks its sha256, blocks an attack, shows wafer's counters with
//!   Prometheus labels and the build identity; with a wrong sha256 nothing runs and every
//!   request is refused.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use wafer_tests::client::{self, Request};
use wafer_tests::envoy::{admin_get, bootstrap, Build, Envoy, Module, Options, Setup, TempDir};
use wafer_tests::openapi::{crd_path, documents, Crd};
use wafer_tests::registry::{self, run, sha256_hex, tool, FileServer, Registry};
use wafer_tests::upstream::Upstream;

const SQLI: &str = "/?id=1%27%20or%201=1--";
const CMD: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `make oci`'s image layout, handed over by `make test` in `WAFER_OCI`.
fn oci_layout() -> PathBuf {
    let dir = std::env::var_os("WAFER_OCI")
        .map(PathBuf::from)
        .expect("WAFER_OCI is not set: run `make test` (it runs `make oci` and sets it)");
    assert!(dir.join("index.json").is_file(), "{}: no index.json; run `make oci`", dir.display());
    dir
}

fn oci_image(args: &[&str]) -> String {
    let mut cmd = Command::new("python3");
    cmd.arg(repo().join("scripts/oci-image.py")).args(args);
    run(&mut cmd, CMD).unwrap_or_else(|e| panic!("{e}"))
}

fn skopeo(args: &[&str]) -> String {
    run(Command::new(tool("skopeo")).args(args), CMD).unwrap_or_else(|e| panic!("{e} (run `make tools`)"))
}


fn crate_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The git revision of the checkout (what the module must say it was built from), if any.
fn git_revision() -> Option<String> {
    if std::env::var_os("WAFER_GIT_REVISION").is_some() {
        return None; // an explicit override: nothing to compare with
    }
    let mut cmd = Command::new("git");
    cmd.current_dir(repo()).args(["rev-parse", "--short=12", "HEAD"]);
    run(&mut cmd, CMD).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// A JSON blob of an image layout by digest (`sha256:...`).
fn blob_json(layout: &Path, digest: &str) -> Value {
    let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
    let bytes = fs::read(layout.join("blobs/sha256").join(hex)).expect("read blob");
    serde_json::from_slice(&bytes).expect("JSON blob")
}

/// The image config labels of the image tagged `tag` in a layout.
fn labels(layout: &Path, tag: &str) -> Value {
    let index: Value = serde_json::from_slice(&fs::read(layout.join("index.json")).expect("index.json")).expect("JSON");
    let desc = index["manifests"]
        .as_array()
        .and_then(|m| m.iter().find(|d| d["annotations"]["org.opencontainers.image.ref.name"] == tag))
        .unwrap_or_else(|| panic!("no manifest tagged {tag}"))
        .clone();
    let manifest = blob_json(layout, desc["digest"].as_str().unwrap_or_default());
    blob_json(layout, manifest["config"]["digest"].as_str().unwrap_or_default())["config"]["Labels"].clone()
}

fn crd() -> Crd {
    let text = fs::read_to_string(crd_path())
        .unwrap_or_else(|e| panic!("{}: {e} (the Istio CRD is read from ../shared)", crd_path().display()));
    Crd::parse(&text).expect("parse the CRD")
}

/// The WasmPlugin manifests under `istio/`: (file, document).
fn istio_manifests() -> Vec<(String, Value)> {
    manifests_in(&repo().join("istio"))
}

fn manifests_in(dir: &Path) -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).expect("read manifest");
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for doc in documents(&text).unwrap_or_else(|e| panic!("{name}: {e}")) {
            out.push((name.clone(), doc));
        }
    }
    out
}

fn plugin_config(doc: &Value) -> String {
    serde_json::to_string(&doc["spec"]["pluginConfig"]).expect("pluginConfig as JSON")
}

/// What wafer answers to a GET (None: passes), natively, and whether any rule logged.
fn verdict(waf: &wafer::Waf, host: &str, uri: &str) -> (Option<u16>, bool) {
    let Some(rs) = waf.ruleset_for(host) else {
        return (None, false);
    };
    let mut tx = wafer::Transaction::new(rs, "ship-1".into());
    tx.process_connection("127.0.0.1", 12345, "127.0.0.1", 80);
    tx.process_uri(uri, "GET", "HTTP/1.1");
    tx.add_request_header(b"Host", host.as_bytes());
    tx.add_request_header(b"User-Agent", b"curl/8.5.0");
    tx.add_request_header(b"Accept", b"*/*");
    let verdict = tx.process_request_headers().or_else(|| tx.process_request_body());
    (verdict.map(|i| i.status), !tx.take_log_lines().is_empty())
}

/// What each manifest's comments promise, per (host, URI): the status (None: passes) and
/// whether rules must have logged.
fn promised(file: &str) -> Vec<(&'static str, &'static str, Option<u16>, bool)> {
    let sqli = SQLI;
    match file {
        "ingress-gateway.yaml" => vec![("shop.example.com", sqli, Some(403), true), ("shop.example.com", "/products?page=2", None, false)],
        // Detection only: the attack is logged, not refused.
        "sidecar-detection-pl2.yaml" => vec![("shop.example.com", sqli, None, true)],
        "per-authority.yaml" => vec![
            ("shop.example.com", sqli, Some(403), true),
            ("api.example.com", sqli, Some(403), true),
            ("status.example.com", sqli, Some(403), true),
            ("www.example.com", "/products?page=2", None, false),
        ],
        "path-exclusion.yaml" => vec![
            ("shop.example.com", "/search?q=1%27%20or%201=1--", None, false),
            ("shop.example.com", "/other?q=1%27%20or%201=1--", Some(403), true),
            ("shop.example.com", "/login?password=1%27%20or%201=1--", None, false),
        ],
        _ => Vec::new(),
    }
}

#[test]
fn istio_manifests_are_valid_wasmplugins_and_wafer_accepts_their_config() {
    let crd = crd();
    let manifests = istio_manifests();
    assert!(manifests.len() >= 4, "want the ingress, sidecar, per-authority and exclusion manifests");
    let mut failures = Vec::new();
    for (file, doc) in &manifests {
        for e in crd.validate(doc) {
            failures.push(format!("{file}: {e}"));
        }
        let spec = &doc["spec"];
        if spec["phase"] != "AUTHN" || spec["failStrategy"].is_null() || spec["imagePullPolicy"].is_null() {
            failures.push(format!("{file}: want phase AUTHN, a failStrategy and an imagePullPolicy"));
        }
        let url = spec["url"].as_str().unwrap_or_default();
        if !url.starts_with("oci://") || !url.ends_with(&format!(":{}", crate_version())) {
            failures.push(format!("{file}: url {url:?} is not an oci:// reference to version {}", crate_version()));
        }
        if spec["pluginConfig"].is_null() {
            failures.push(format!("{file}: no pluginConfig"));
            continue;
        }
        match wafer::Waf::from_json(plugin_config(doc).as_bytes()) {
            Ok(waf) => {
                if waf.ruleset_for("www.example.com").is_none() {
                    failures.push(format!("{file}: no rule set for an unlisted host"));
                }
                let cases = promised(file);
                if cases.is_empty() {
                    failures.push(format!("{file}: no expectations in promised(): add them"));
                }
                for (host, uri, status, logged) in cases {
                    let got = verdict(&waf, host, uri);
                    if got != (status, logged) {
                        failures.push(format!("{file}: {host} GET {uri}: got {got:?}, want {:?}", (status, logged)));
                    }
                }
            }
            Err(e) => failures.push(format!("{file}: wafer refuses pluginConfig: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn oci_image_round_trip_through_a_registry_then_runs_in_envoy() {
    let setup = Setup::from_env();
    let layout = oci_layout();
    let wasm = fs::read(&setup.wasm).expect("read the module");
    let version = crate_version();
    let registry = Registry::start().unwrap_or_else(|e| panic!("{e}"));
    let scratch = registry.scratch().to_path_buf();

    let mut pulled_compat = PathBuf::new();
    let mut compat_digest = String::new();
    for tag in [version.to_string(), format!("{version}-artifact")] {
        let local = oci_image(&["digest", "--layout", &layout.to_string_lossy(), "--tag", &tag]);
        let remote = registry.reference(&format!("wafer:{tag}"));
        skopeo(&["copy", "--dest-tls-verify=false", &format!("oci:{}:{tag}", layout.display()), &remote]);
        let pull_dir = scratch.join(format!("pull-{tag}"));
        skopeo(&["copy", "--src-tls-verify=false", &remote, &format!("oci:{}:{tag}", pull_dir.display())]);
        // The digest survives the trip: a WasmPlugin's sha256 pins exactly what was built.
        let pulled = oci_image(&["digest", "--layout", &pull_dir.to_string_lossy(), "--tag", &tag]);
        assert_eq!(pulled.trim(), local.trim(), "{tag}: manifest digest changed through the registry");
        let out = scratch.join(format!("{tag}.wasm"));
        oci_image(&["extract", "--layout", &pull_dir.to_string_lossy(), "--tag", &tag, "--out", &out.to_string_lossy()]);
        let bytes = fs::read(&out).expect("read the pulled module");
        assert!(bytes == wasm, "{tag}: the pulled plugin.wasm differs from {}", setup.wasm.display());
        assert_eq!(sha256_hex(&out), sha256_hex(&setup.wasm), "{tag}: sha256");
        if tag == version {
            pulled_compat = out;
            compat_digest = pulled.trim().to_string();
        }
    }

    // The manifests as `make push` writes them for this registry: still valid, pinned to the
    // digest Istio will compute for the pulled image.
    let rendered = scratch.join("istio");
    oci_image(&[
        "istio",
        "--layout",
        &layout.to_string_lossy(),
        "--tag",
        version,
        "--url",
        &format!("oci://{}/wafer:{version}", registry.addr),
        "--in",
        &repo().join("istio").to_string_lossy(),
        "--out",
        &rendered.to_string_lossy(),
    ]);
    let crd = crd();
    let rendered = manifests_in(&rendered);
    assert_eq!(rendered.len(), istio_manifests().len());
    for (file, doc) in &rendered {
        assert_eq!(crd.validate(doc), Vec::<String>::new(), "rendered {file}");
        assert_eq!(doc["spec"]["sha256"], compat_digest.as_str(), "rendered {file}: sha256");
    }

    // What the registry tells about the image: the labels.
    let inspect: Value = serde_json::from_str(&skopeo(&[
        "inspect",
        "--tls-verify=false",
        &registry.reference(&format!("wafer:{version}")),
    ]))
    .expect("skopeo inspect JSON");
    let labels = &inspect["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version, "{inspect}");
    let revision = labels["org.opencontainers.image.revision"].as_str().unwrap_or_default().to_string();
    assert!(!revision.is_empty(), "no revision label: {inspect}");
    let crs = labels["dev.wafer.crs.version"].as_str().unwrap_or_default().to_string();
    assert_eq!(crs, wafer::embedded::CRS_VERSION, "CRS label vs the CRS this tree embeds");

    // The pulled file in Envoy, with the ingress gateway manifest's configuration.
    let (_, ingress) = rendered
        .into_iter()
        .find(|(f, _)| f == "ingress-gateway.yaml")
        .expect("istio/ingress-gateway.yaml");
    let upstream = Upstream::start().expect("upstream");
    let yaml = bootstrap(Module { build: Build::Wasm, path: &pulled_compat }, &plugin_config(&ingress), upstream.addr());
    let envoy = Envoy::start_live(&setup, "oci-pulled", &yaml);
    let attack = client::send(envoy.listener, &Request::get(SQLI)).expect("send the attack");
    assert_eq!(attack.status, 403, "SQL injection through the pulled module: {}", attack.body_text());
    let benign = client::send(envoy.listener, &Request::get("/products?page=2")).expect("send");
    assert_eq!(benign.status, 200, "benign request: {}", benign.body_text());
    assert!(upstream.find("/products?page=2").is_some() && upstream.find(SQLI).is_none());
    // The module says it is what the image labels say.
    let gauge = format!(
        "wasmcustom.wafer.build.version.{}.revision.{revision}.crs.{}",
        version.replace('.', "_"),
        crs.replace('.', "_")
    );
    assert_eq!(envoy.counter(&gauge), 1, "build gauge {gauge} in /stats");
}

#[test]
fn oci_image_is_reproducible_from_the_module() {
    let setup = Setup::from_env();
    let layout = oci_layout();
    let crs = labels(&layout, crate_version())["dev.wafer.crs.version"].as_str().unwrap_or_default().to_string();
    let dir = TempDir::new("oci-repro").expect("temp dir");
    let mut tars = Vec::new();
    for i in 0..2 {
        if i == 1 {
            // Another second on the clock: nothing time-dependent may reach the bytes.
            std::thread::sleep(Duration::from_millis(1100));
        }
        let out = dir.path().join(format!("oci-{i}"));
        let tar = dir.path().join(format!("oci-{i}.tar"));
        oci_image(&[
            "build",
            "--wasm",
            &setup.wasm.to_string_lossy(),
            "--out",
            &out.to_string_lossy(),
            "--tar",
            &tar.to_string_lossy(),
            "--crs-version",
            &crs,
        ]);
        tars.push((fs::read(&tar).expect("tar"), fs::read(out.join("index.json")).expect("index")));
    }
    assert!(tars[0].0 == tars[1].0, "two builds of the same module give different tarballs");
    // And `make oci` made exactly this image of the module under test.
    let made = fs::read(layout.join("index.json")).expect("index.json");
    assert_eq!(String::from_utf8_lossy(&tars[0].1), String::from_utf8_lossy(&made), "make oci vs a rebuild");
}

/// `envoy-wasm/examples/remote-fetch/envoy.yaml` with its addresses on free loopback ports.
fn remote_example(server: &FileServer, upstream: &Upstream, sha256: &str) -> String {
    registry::remote_example("envoy-wasm/examples/remote-fetch/envoy.yaml", "SHA256_OF_WAFER_WASM", server, upstream, sha256)
}

#[test]
fn remote_fetch_example_fetches_verifies_blocks_and_labels_metrics() {
    let setup = Setup::from_env();
    let wasm = fs::read(&setup.wasm).expect("read the module");
    let server = FileServer::start("/wafer.wasm", wasm).expect("file server");
    let upstream = Upstream::start().expect("upstream");
    let yaml = remote_example(&server, &upstream, &sha256_hex(&setup.wasm));
    let envoy = Envoy::start_live_opts(&setup, "remote-fetch", &yaml, &Options::default());
    assert!(server.hits() >= 1, "Envoy did not fetch the module");

    let attack = client::send(envoy.listener, &Request::get(SQLI)).expect("send the attack");
    assert_eq!(attack.status, 403, "SQL injection: {}", attack.body_text());
    let benign = client::send(envoy.listener, &Request::get("/")).expect("send");
    assert_eq!(benign.status, 200, "benign: {}", benign.body_text());

    // Stats tags: the per-rule counter and the build gauge as Prometheus labels.
    let prom = admin_get(envoy.admin, "/stats/prometheus").expect("/stats/prometheus");
    let line = prom
        .lines()
        .find(|l| l.starts_with("wafer_rule_interruptions{"))
        .unwrap_or_else(|| panic!("no wafer_rule_interruptions in:\n{prom}"));
    assert!(
        line.contains("rule_id=\"949110\"") && line.contains("phase=\"2\"") && line.ends_with(" 1"),
        "{line}"
    );
    let build = prom
        .lines()
        .find(|l| l.starts_with("wafer_build{"))
        .unwrap_or_else(|| panic!("no wafer_build gauge in:\n{prom}"));
    let crs = wafer::embedded::CRS_VERSION.replace('.', "_");
    assert!(
        build.contains(&format!("version=\"{}\"", crate_version().replace('.', "_")))
            && build.contains(&format!("crs=\"{crs}\""))
            && build.contains("revision=\"")
            && build.ends_with(" 1"),
        "{build}"
    );

    // The build identity line, with the revision of this checkout.
    assert!(
        envoy.wait_for_log("wafer: build version=", Duration::from_secs(5)),
        "no build line in the log:\n{}",
        envoy.log()
    );
    let log = envoy.log();
    let id = log.lines().find(|l| l.contains("wafer: build version=")).unwrap_or_default();
    assert!(id.contains(&format!("crs={}", wafer::embedded::CRS_VERSION)) && id.contains("@owasp_crs/*.conf"), "{id}");
    if let Some(rev) = git_revision() {
        assert!(
            id.contains(&format!("revision={rev} ")) && build.contains(&format!("revision=\"{rev}\"")),
            "the module says it was built from another revision than HEAD {rev} (stale target/wafer.wasm? run `make wasm`):\n{id}\n{build}"
        );
    }
}

#[test]
fn remote_fetch_with_a_wrong_sha256_never_runs_the_module() {
    let setup = Setup::from_env();
    let wasm = fs::read(&setup.wasm).expect("read the module");
    let server = FileServer::start("/wafer.wasm", wasm).expect("file server");
    let upstream = Upstream::start().expect("upstream");
    let wrong = "0".repeat(63) + "1";
    let yaml = remote_example(&server, &upstream, &wrong);
    let envoy = Envoy::start_live_opts(&setup, "remote-bad-sha", &yaml, &Options::default());
    assert!(
        envoy.wait_for_log("failed to load", Duration::from_secs(10)),
        "Envoy did not refuse the module:\n{}",
        envoy.log()
    );
    // Fail closed: no request passes uninspected.
    for target in [SQLI, "/"] {
        let resp = client::send(envoy.listener, &Request::get(target)).expect("send");
        assert_eq!(resp.status, 503, "{target}: {}", resp.body_text());
    }
    assert!(upstream.seen().is_empty(), "a request reached the upstream without wafer");
    assert!(server.hits() >= 1, "Envoy did not even fetch the module");
}
