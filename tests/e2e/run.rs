//! `make run`: the run examples (`envoy-wasm/examples/run/envoy.yaml`,
//! `envoy-dynamic/examples/run/envoy.yaml`) with the configuration they carry, sent the curl
//! lines the Makefile's `run` target prints: each answers the status its comment says (the
//! attacks 403, the benign request 200), each block is logged, and the counters count them.

use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use wafer_tests::client::{self, Request};
use wafer_tests::envoy::{json_string, substituted, Build, Envoy, Setup};

per_build!(make_run_blocks_the_attacks_it_prints_and_passes_the_benign_request);

/// The `curl -i 'http://127.0.0.1:8080<target>'  # <what> -> <status>` lines of the Makefile's
/// `run` target: (target, what, status).
fn printed_requests(makefile: &str) -> Vec<(String, String, u16)> {
    let mut out = Vec::new();
    for line in makefile.lines().filter(|l| l.trim_start().starts_with("@echo \"  curl -i '")) {
        let Some(rest) = line.split("'http://127.0.0.1:8080").nth(1) else { continue };
        let Some((target, comment)) = rest.split_once('\'') else { continue };
        let Some((what, status)) = comment.trim().trim_start_matches('#').trim().trim_end_matches('"').rsplit_once("->") else { continue };
        let status = status.trim().parse().unwrap_or_else(|e| panic!("{line}: status: {e}"));
        out.push((target.to_string(), what.trim().to_string(), status));
    }
    out
}

/// A port nothing listens on now (the demo upstream's listener, bound by Envoy right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("bind a port")
}

fn make_run_blocks_the_attacks_it_prints_and_passes_the_benign_request(build: Build) {
    let setup = Setup::from_env();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let makefile = std::fs::read_to_string(repo.join("Makefile")).expect("read Makefile");
    let requests = printed_requests(&makefile);
    let kinds: Vec<&str> = requests.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(kinds, ["SQL injection", "path traversal", "command injection", "benign"], "make run prints {requests:?}");
    assert_eq!(requests.iter().map(|r| r.2).collect::<Vec<_>>(), [403, 403, 403, 200]);

    let example = match build {
        Build::Wasm => "envoy-wasm/examples/run/envoy.yaml",
        Build::Native => "envoy-dynamic/examples/run/envoy.yaml",
    };
    let text = std::fs::read_to_string(repo.join(example)).expect("read the run example");
    assert!(text.contains(r#"value: '{"crs":{"paranoia_level":1,"mode":"block"}}'"#), "{example} no longer runs the full CRS PL1 blocking");
    // Only where it runs changes: ports chosen by the kernel (the test helpers find the
    // listener named `main`), the module under test.
    let upstream = free_port().to_string();
    let module = match build {
        Build::Wasm => ("filename: target/wafer.wasm", format!("filename: {}", json_string(&setup.wasm.display().to_string()))),
        Build::Native => (
            "dynamic_module_config: { name: wafer }",
            format!("dynamic_module_config: {{ module: {{ local: {{ filename: {} }} }} }}", json_string(&setup.native.display().to_string())),
        ),
    };
    let yaml = substituted(
        &text,
        &[
            ("port_value: 9901", "port_value: 0".to_string()),
            ("- name: wafer\n    address: { socket_address: { address: 127.0.0.1, port_value: 8080 } }", "- name: main\n    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }".to_string()),
            ("port_value: 8081", format!("port_value: {upstream}")),
            module,
        ],
    );
    let envoy = Envoy::start_live(&setup, &format!("make-run-{}", build.name()), &yaml);

    let mut failures = Vec::new();
    for (target, what, want) in &requests {
        match client::send(envoy.listener, &Request::get(target)) {
            Ok(resp) if resp.status == *want => {
                if *want == 200 && resp.body_text() != "hello from upstream\n" {
                    failures.push(format!("{what} {target}: 200 but body {:?}, not the demo upstream's", resp.body_text()));
                }
            }
            Ok(resp) => failures.push(format!("{what} {target}: status {} (make run prints {want})", resp.status)),
            Err(e) => failures.push(format!("{what} {target}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}:\n{}", build.name(), failures.join("\n"));
    let blocked = requests.iter().filter(|r| r.2 == 403).count();
    assert!(
        envoy.wait_for(Duration::from_secs(5), |log| log.matches("ModSecurity: Access denied with code 403").count() >= blocked),
        "not {blocked} 'Access denied' lines in Envoy's log:\n{}",
        envoy.log()
    );
    assert_eq!(envoy.counter(&build.stat("wafer.interruptions")), blocked as u64);
    // A transaction is counted when it ends (after the response went out): wait for the last.
    let transactions = build.stat("wafer.transactions");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while envoy.counter(&transactions) < requests.len() as u64 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(envoy.counter(&transactions), requests.len() as u64);
}
