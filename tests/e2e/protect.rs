//! Protections beyond rules (IP lists, rate limits, behaviour scoring, hardening, request
//! log) in a real Envoy with two workers (`--concurrency 2`). Every request goes on a new
//! connection, so Envoy spreads them over both workers; each test checks from Envoy's
//! per-worker listener counters that both workers served connections, so a verdict that
//! needs state (a bucket, a score) proves the state is shared across workers.

use std::time::{Duration, Instant};

use wafer_tests::client::{Request, Response};
use wafer_tests::envoy::{admin_get, bootstrap, Build, Envoy, Options, Setup};
use wafer_tests::upstream::Upstream;

use crate::short;

per_build!(
    rate_limit_is_shared_by_workers,
    ip_lists_deny_allow_and_scale,
    behaviour_scoring_blocks_scanners,
    response_hardening_body_limit_and_forwarding_headers,
    request_log_lines_and_collector,
    protections_off_change_nothing,
    persistent_collections_in_shared_data,
    a_hanging_collector_slows_no_request,
);

struct Fx {
    envoy: Envoy,
    upstream: Upstream,
    build: Build,
}

/// Envoy with two workers and wafer (`build`) configured with `config`.
fn start(build: Build, label: &str, config: &str) -> Fx {
    start_yaml(build, label, config, |y| y)
}

/// Like [`start`], with the bootstrap edited by `edit`.
fn start_yaml(build: Build, label: &str, config: &str, edit: impl Fn(String) -> String) -> Fx {
    let setup = Setup::from_env();
    let upstream = Upstream::start().expect("start the upstream");
    let yaml = edit(bootstrap(setup.module(build), config, upstream.addr()));
    let label = format!("{label}-{}", build.name());
    let options = Options {
        concurrency: 2,
        capture: true,
        ..Options::default()
    };
    let envoy = Envoy::start_live_opts(&setup, &label, &yaml, &options);
    Fx { envoy, upstream, build }
}

impl Fx {
    /// The value of one of wafer's counters (`wafer.protect.ip_denied`, ...).
    fn counter(&self, name: &str) -> u64 {
        self.envoy.counter(&self.build.stat(name))
    }

    fn send(&self, req: &Request) -> Response {
        wafer_tests::client::send(self.envoy.listener, req).expect("request")
    }

    /// Connections each worker accepted on the main listener.
    fn worker_connections(&self) -> Vec<u64> {
        let stats =
            admin_get(self.envoy.admin, "/stats?filter=downstream_cx_total").unwrap_or_default();
        // The listener's stats carry its configured address (port 0: chosen by the kernel).
        (0..2)
            .map(|w| {
                let name = format!("listener.127.0.0.1_0.worker_{w}.downstream_cx_total: ");
                stats
                    .lines()
                    .find_map(|l| l.strip_prefix(&name))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Panics unless both workers served connections.
    fn assert_both_workers(&self) {
        let per_worker = self.worker_connections();
        assert!(
            per_worker.iter().all(|&n| n > 0),
            "connections per worker {per_worker:?}: the test did not reach both workers\n{}",
            admin_get(self.envoy.admin, "/stats?filter=downstream_cx_total").unwrap_or_default()
        );
    }

    fn seen(&self, target: &str) -> bool {
        self.upstream.seen().iter().any(|s| s.target == target)
    }
}

fn from(ip: &str, target: &str) -> Request {
    Request::get(target).header("X-Forwarded-For", ip)
}

const SQLI: &str = "/?id=1%27%20or%201=1--";

fn rate_limit_is_shared_by_workers(build: Build) {
    let fx = start(
        build,
        "ratelimit",
        r#"{"client_ip":{"trusted_hops":1},
            "rate_limit":{"requests_per_second":0.01,"burst":6,"rules":[
              {"authority":"api.example.com","path_prefix":"/login","requests_per_second":0.01,"burst":2,"key":"header:x-api-key"}]}}"#,
    );
    // One client, 20 requests on 20 connections: the burst passes, the rest get 429.
    let statuses: Vec<u16> = (0..20)
        .map(|i| fx.send(&from("1.1.1.1", &format!("/r{i}"))).status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        6,
        "{statuses:?}"
    );
    assert!(statuses.iter().skip(6).all(|&s| s == 429), "{statuses:?}");
    fx.assert_both_workers();
    let refused = fx.send(&from("1.1.1.1", "/again"));
    assert_eq!(refused.status, 429);
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=100).contains(&retry), "Retry-After {retry}");
    assert!(!fx.seen("/again"), "a refused request reached the upstream");
    // Another client has its own bucket.
    assert_eq!(fx.send(&from("2.2.2.2", "/other")).status, 200);
    // The per-route limit, keyed by API key: 2 per key, independent of the address.
    let login = |key: &str, ip: &str| {
        fx.send(
            &from(ip, "/login")
                .header("Host", "api.example.com")
                .header("x-api-key", key),
        )
        .status
    };
    assert_eq!(
        [
            login("k1", "3.3.3.1"),
            login("k1", "3.3.3.2"),
            login("k1", "3.3.3.3")
        ],
        [200, 200, 429]
    );
    assert_eq!(login("k2", "3.3.3.3"), 200);
    assert_eq!(
        fx.counter("wafer.protect.rate_limited"),
        16
    );
}

fn ip_lists_deny_allow_and_scale(build: Build) {
    // 20,000 deny blocks (10.x.y.0/24 and 2001:db8:x::/48) plus one allowed address.
    let mut deny: Vec<String> = (0..10_000)
        .map(|i| format!("\"10.{}.{}.0/24\"", i / 256, i % 256))
        .collect();
    deny.extend((0..10_000).map(|i| format!("\"2001:db8:{i:x}::/48\"")));
    let config = format!(
        r#"{{"client_ip":{{"trusted_hops":1}},"ip_lists":{{"deny":[{}],"allow":["10.0.7.7","192.0.2.0/24"]}},
            "directives_map":{{"default":["Include @targeted"]}},"default_directives":"default"}}"#,
        deny.join(",")
    );
    let fx = start(build, "iplists", &config);
    for i in 0..6 {
        let denied = fx.send(&from("10.38.200.9", &format!("/denied{i}")));
        assert_eq!(denied.status, 403, "{}", short(&denied.body_text()));
    }
    assert!(!fx.seen("/denied0"));
    assert_eq!(
        fx.send(&from("2001:db8:2710::1", "/v6-out")).status,
        200,
        "outside the v6 blocks"
    );
    assert_eq!(
        fx.send(&from("2001:db8:270f::1", "/v6-in")).status,
        403,
        "inside the last v6 block"
    );
    assert_eq!(
        fx.send(&from("10.39.16.1", "/v4-out")).status,
        200,
        "10.39.16.0/24 is the 10,001st block"
    );
    // Allowed: the rules do not run (an attack passes), inside a denied block too.
    assert_eq!(fx.send(&from("10.0.7.7", SQLI)).status, 200);
    assert_eq!(fx.send(&from("192.0.2.50", SQLI)).status, 200);
    // Neither list: the rules decide.
    assert_eq!(fx.send(&from("8.8.8.8", SQLI)).status, 403);
    assert_eq!(fx.send(&from("8.8.8.8", "/benign")).status, 200);
    fx.assert_both_workers();
    assert_eq!(fx.counter("wafer.protect.ip_denied"), 7);
    assert_eq!(fx.counter("wafer.protect.ip_allowed"), 2);
}

fn behaviour_scoring_blocks_scanners(build: Build) {
    let fx = start(
        build,
        "scoring",
        r#"{"client_ip":{"trusted_hops":1},"behaviour_scoring":{"window_seconds":60,"threshold":6,"block_seconds":60},
            "directives_map":{"default":["Include @targeted"]},"default_directives":"default"}"#,
    );
    let scanner = "5.5.5.5";
    // 4 answers 404 from the upstream and 2 WAF interruptions: 6 bad outcomes.
    for i in 0..4 {
        assert_eq!(
            fx.send(&from(scanner, &format!("/probe{i}")).header("x-upstream-status", "404"))
                .status,
            404
        );
    }
    assert_eq!(fx.send(&from(scanner, SQLI)).status, 403);
    let live = fx.envoy.live().expect("captured log").clone();
    let mark = live.end();
    assert_eq!(fx.send(&from(scanner, "/admin")).status, 403);
    // Now blocked: even a benign request is refused, and never reaches the upstream.
    let blocked = fx.send(&from(scanner, "/benign"));
    assert_eq!(blocked.status, 403, "{}", short(&blocked.body_text()));
    assert!(
        blocked.body_text().contains("behaviour_block"),
        "{}",
        blocked.body_text()
    );
    assert!(!fx.seen("/benign"));
    // Another client is not affected; a few 404s stay under the threshold.
    for i in 0..3 {
        assert_eq!(
            fx.send(&from("6.6.6.6", &format!("/p{i}")).header("x-upstream-status", "404"))
                .status,
            404
        );
    }
    assert_eq!(fx.send(&from("6.6.6.6", "/benign2")).status, 200);
    fx.assert_both_workers();
    assert!(
        live.wait_for(mark, Duration::from_secs(5), |l| l
            .contains("client 5.5.5.5 blocked for 60 s"))
            .is_some(),
        "no block log line"
    );
    assert_eq!(
        fx.counter("wafer.protect.clients_blocked"),
        1
    );
    assert!(
        fx.counter("wafer.protect.behaviour_blocked") >= 1
    );
}

fn response_hardening_body_limit_and_forwarding_headers(build: Build) {
    // Envoy at the edge (`use_remote_address`): `source.address` is the connection's peer and
    // Envoy appends it to X-Forwarded-For; wafer trusts no hop.
    let edge = |y: String| {
        y.replace(
            "stat_prefix: ingress",
            "stat_prefix: ingress\n          use_remote_address: true",
        )
    };
    let fx = start_yaml(
        build,
        "hardening",
        r#"{"hardening":{"hsts":"max-age=31536000; includeSubDomains","content_type_options":"nosniff",
            "frame_options":"DENY","cookies":{"same_site":"Strict"},"max_request_body_bytes":1000,
            "sanitize_forwarded_headers":true}}"#,
        edge,
    );
    let resp = fx.send(
        &Request::get("/cookies")
            .header("x-upstream-set-cookie", "sid=abc; Path=/")
            .header(
                "x-upstream-set-cookie",
                "pref=1; Secure; HttpOnly; SameSite=Lax",
            ),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("strict-transport-security"),
        Some("max-age=31536000; includeSubDomains")
    );
    assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(resp.header("x-frame-options"), Some("DENY"));
    let cookies: Vec<&str> = resp
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        cookies,
        [
            "sid=abc; Path=/; Secure; HttpOnly; SameSite=Strict",
            "pref=1; Secure; HttpOnly; SameSite=Lax"
        ]
    );

    // Body limit: by Content-Length before the body, and by counting a chunked body.
    let big = fx.send(&Request::post("/big", "text/plain", vec![b'a'; 1001]));
    assert_eq!(big.status, 413);
    assert!(!fx.seen("/big"));
    let chunked = fx.send(
        &Request::post("/chunked", "text/plain", vec![b'a'; 3000])
            .chunked(500, Duration::from_millis(20)),
    );
    assert_eq!(chunked.status, 413);
    let ok = fx.send(&Request::post("/small", "text/plain", vec![b'a'; 1000]));
    assert_eq!(ok.status, 200);
    // Local replies are hardened too.
    assert_eq!(big.header("x-frame-options"), Some("DENY"));

    // Forwarding headers: no trusted hop, so what the client wrote is replaced or dropped.
    let resp = fx.send(
        &Request::get("/fwd")
            .header("X-Forwarded-For", "6.6.6.6")
            .header("X-Real-IP", "6.6.6.6")
            .header("Forwarded", "for=6.6.6.6")
            .header("X-Forwarded-Host", "evil.example"),
    );
    assert_eq!(resp.status, 200);
    let seen = fx.upstream.find("/fwd").expect("upstream saw /fwd");
    let get = |name: &str| {
        seen.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    for dropped in ["x-real-ip", "forwarded", "x-forwarded-host"] {
        assert_eq!(get(dropped), None, "{dropped} reached the upstream");
    }
    assert_eq!(
        fx.counter("wafer.protect.body_too_large"),
        2
    );
}

fn request_log_lines_and_collector(build: Build) {
    // The collector is the test upstream itself (cluster `upstream`, path /collect).
    let fx = start(
        build,
        "requestlog",
        r#"{"request_log":{"mode":"all","collector":{"cluster":"upstream","path":"/collect","batch_size":50,"flush_interval_ms":200}},
            "directives_map":{"default":["Include @targeted"]},"default_directives":"default"}"#,
    );
    let live = fx.envoy.live().expect("captured log").clone();
    let mark = live.end();
    assert_eq!(
        fx.send(&Request::get(SQLI).header("x-request-id", "log-attack-1"))
            .status,
        403
    );
    assert_eq!(
        fx.send(&Request::get("/fine").header("x-request-id", "log-benign-1"))
            .status,
        200
    );
    let line = live
        .wait_for(mark, Duration::from_secs(5), |l| {
            l.contains("\"unique_id\":\"log-attack-1\"")
        })
        .map(|n| live.lines(n, n + 1).concat())
        .expect("no JSON log line for the attack");
    let json: serde_json::Value =
        serde_json::from_str(&line[line.find('{').expect("JSON")..]).expect("valid JSON");
    let t = &json["transaction"];
    assert_eq!(t["response"]["http_code"], 403);
    assert_eq!(t["request"]["method"], "GET");
    assert_eq!(t["request"]["uri"], SQLI);
    assert_eq!(t["wafer"]["action"], "waf");
    let ids: Vec<&str> = t["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["details"]["ruleId"].as_str())
        .collect();
    assert!(!ids.is_empty(), "no rule in messages: {line}");
    assert!(live
        .wait_for(mark, Duration::from_secs(5), |l| l
            .contains("\"unique_id\":\"log-benign-1\""))
        .is_some());

    // Both lines reach the collector in a batch, without holding the requests.
    let deadline = Instant::now() + Duration::from_secs(5);
    let collected = loop {
        let body: String = fx
            .upstream
            .seen()
            .iter()
            .filter(|s| s.target == "/collect")
            .map(|s| String::from_utf8_lossy(&s.body).into_owned())
            .collect();
        if (body.contains("log-attack-1") && body.contains("log-benign-1"))
            || Instant::now() > deadline
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        collected.contains("log-attack-1") && collected.contains("log-benign-1"),
        "collector got {:?}",
        short(&collected)
    );
    for l in collected.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("each collected line is JSON");
        assert!(v["transaction"]["unique_id"].is_string());
    }
}

fn protections_off_change_nothing(build: Build) {
    // No protection key: no protection counters are defined, responses carry no added header.
    let fx = start(
        build,
        "protect-off",
        r#"{"directives_map":{"default":["Include @targeted"]},"default_directives":"default"}"#,
    );
    let resp = fx.send(&Request::get("/x").header("x-upstream-set-cookie", "a=b"));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("set-cookie"), Some("a=b"));
    assert_eq!(resp.header("strict-transport-security"), None);
    let stats = admin_get(fx.envoy.admin, "/stats?filter=wafer.protect").unwrap_or_default();
    assert!(!stats.contains("protect"), "{stats}");
}

fn persistent_collections_in_shared_data(build: Build) {
    // A classic ModSecurity brute-force rule: IP and GLOBAL collections, setvar + expirevar.
    let rules = [
        "SecRuleEngine On",
        "SecAction \"id:1,phase:1,nolog,pass,initcol:ip=%{remote_addr},initcol:global=global\"",
        "SecRule REQUEST_FILENAME \"@streq /login\" \"id:2,phase:1,deny,status:429,log,msg:'brute force: %{ip.login_attempts} attempts',chain\"",
        "  SecRule IP:login_attempts \"@ge 3\" \"t:none\"",
        "SecRule REQUEST_FILENAME \"@streq /login\" \"id:3,phase:1,nolog,pass,setvar:ip.login_attempts=+1,expirevar:ip.login_attempts=600\"",
        "SecAction \"id:4,phase:1,nolog,pass,setvar:global.requests=+1\"",
        "SecRule REQUEST_FILENAME \"@streq /count\" \"id:5,phase:1,deny,status:418,msg:'%{global.requests}',log\"",
    ];
    let list: Vec<String> = rules
        .iter()
        .map(|r| wafer_tests::envoy::json_string(r))
        .collect();
    let config = format!(
        r#"{{"client_ip":{{"trusted_hops":1}},"directives_map":{{"default":[{}]}},"default_directives":"default"}}"#,
        list.join(",")
    );
    let fx = start(build, "collections", &config);
    let mut statuses = Vec::new();
    for i in 0..8 {
        statuses.push(
            fx.send(&from("7.7.7.7", "/login").header("x-request-id", &format!("bf-{i}")))
                .status,
        );
        // Collections are written when a transaction ends (phase 5), as in ModSecurity.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429]);
    // REMOTE_ADDR is the client `client_ip` designates: another client has its own IP record.
    assert_eq!(fx.send(&from("7.7.7.8", "/login")).status, 200);
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..4 {
        assert_eq!(fx.send(&Request::get(&format!("/other{i}"))).status, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    fx.assert_both_workers();
    // GLOBAL counted the requests of both workers that reached rule 4: 4 logins (the 5
    // refused ones stopped at rule 2), 4 others, and this one.
    let live = fx.envoy.live().expect("captured log").clone();
    let mark = live.end();
    assert_eq!(fx.send(&Request::get("/count")).status, 418);
    assert!(
        live.wait_for(mark, Duration::from_secs(5), |l| l.contains("[id \"5\"]")
            && l.contains("[msg \"9\"]"))
            .is_some(),
        "GLOBAL:requests is not 9"
    );
}

fn a_hanging_collector_slows_no_request(build: Build) {
    // A collector that accepts connections and never answers.
    let sink = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let sink_addr = sink.local_addr().expect("addr");
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held2 = held.clone();
    std::thread::spawn(move || {
        for conn in sink.incoming().flatten() {
            if let Ok(mut h) = held2.lock() {
                h.push(conn);
            }
        }
    });
    let cluster = format!(
        r#"  - name: slowlog
    connect_timeout: 1s
    type: STATIC
    load_assignment:
      cluster_name: slowlog
      endpoints:
      - lb_endpoints:
        - endpoint:
            address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }}
  - name: upstream
"#,
        sink_addr.port()
    );
    let fx = start_yaml(
        build,
        "slowcollector",
        r#"{"request_log":{"mode":"all","proxy_log":false,"collector":{"cluster":"slowlog","batch_size":1,"timeout_ms":10000}}}"#,
        |y| y.replacen("  - name: upstream\n", &cluster, 1),
    );
    let started = Instant::now();
    for i in 0..20 {
        assert_eq!(fx.send(&Request::get(&format!("/q{i}"))).status, 200);
    }
    let took = started.elapsed();
    // 20 requests, each dispatching a batch to a collector that never answers (10 s timeout).
    assert!(took < Duration::from_secs(3), "20 requests took {took:?}");
    // Sent from the stream (wasm) or by the configuration's next tick, which a full batch
    // brings forward (dynamic module: its calls go out from Envoy's main thread).
    let deadline = Instant::now() + Duration::from_secs(5);
    while fx.counter("wafer.protect.log_lines_sent") < 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(fx.counter("wafer.protect.log_lines_sent") >= 20);
    assert!(
        !held.lock().map(|h| h.is_empty()).unwrap_or(true),
        "the collector was never called"
    );
}
