//! Adapter paths the tiers do not reach: response phases, redirects, the response body limit.
//! One Envoy runs `@recommended-conf` with the engine on and a few rules of our own.

use wafer_tests::client::Request;
use wafer_tests::envoy::json_string;
use wafer_tests::envoy::Build;

use crate::{passed_whole, short, Fixture};

per_build!(
    response_phases_and_redirect,
    logging_phase_runs_for_completed_and_reset_streams,
    repeated_requests_pass_and_changed_ones_are_inspected,
    repeated_bodies_pass_and_changed_ones_are_inspected,
    repeated_bodies_interleaved_keep_their_verdicts,
);

const RULES: &[&str] = &[
    "Include @recommended-conf",
    "SecRuleEngine On",
    r#"SecRule RESPONSE_STATUS "@streq 418" "id:9002,phase:3,t:none,log,deny,status:403""#,
    r#"SecRule RESPONSE_BODY "@contains secret-token" "id:9001,phase:4,t:none,log,deny,status:403""#,
    r#"SecRule REQUEST_URI "@beginsWith /old/" "id:9003,phase:1,t:none,log,redirect:http://example.com/new/""#,
    r#"SecRule REQUEST_HEADERS:x-log-me "@rx ^[a-z]+$" "id:9004,phase:5,t:none,log,pass,msg:'logging phase of %{MATCHED_VAR}'""#,
];

/// A plugin configuration running `rules` for every host.
fn config_of(rules: &[&str]) -> String {
    let list: Vec<String> = rules.iter().map(|r| json_string(r)).collect();
    format!(r#"{{"directives_map":{{"default":[{}]}},"default_directives":"default"}}"#, list.join(","))
}

fn fixture(build: Build) -> Fixture {
    Fixture::start(build, "custom", &config_of(RULES))
}

/// What is wrong with the answer to `req` (`want` 200: passed whole to the upstream).
fn wrong(fx: &Fixture, req: &Request, want: u16) -> Option<String> {
    match fx.send(req) {
        Ok(resp) if want == 200 => passed_whole(req, &resp).err(),
        Ok(resp) if resp.status == want => None,
        Ok(resp) => Some(format!("status {} (want {want})", resp.status)),
        Err(err) => Some(err.to_string()),
    }
}

/// Bodies of the repeated-body tests: two benign ones and an attack, all of one length (so the
/// requests' headers are the same).
const SAME_LEN_ONE: &str = r#"{"a":"hello world"}"#;
const SAME_LEN_TWO: &str = r#"{"a":"goodbye wor"}"#;
const SAME_LEN_BAD: &str = r#"{"a":"attack!!!!!"}"#;

/// A JSON POST of `body` to `/api`.
fn post(body: &str) -> Request {
    Request::post("/api", "application/json", body.as_bytes().to_vec())
}

/// Sends the steps in order; what went wrong, by step.
fn run_steps(fx: &Fixture, steps: &[(&str, Request, u16)]) -> Vec<String> {
    steps.iter().filter_map(|(name, req, want)| wrong(fx, req, *want).map(|why| format!("{name}: {why}"))).collect()
}

fn response_phases_and_redirect(build: Build) {
    let fx = fixture(build);
    let mut failures = Vec::new();

    // Response body inspected and passed whole.
    let req = Request::get("/plain");
    match fx.send(&req) {
        Ok(resp) => {
            if let Err(why) = passed_whole(&req, &resp) {
                failures.push(format!("benign response: {why}"));
            }
        }
        Err(err) => failures.push(format!("benign response: {err}")),
    }

    // Phase 3 on the upstream status: the local reply replaces the upstream response.
    match fx.send(&Request::get("/teapot").header("x-upstream-status", "418")) {
        Ok(resp) if resp.status == 403 => {}
        Ok(resp) => failures.push(format!("phase 3: status {} (want 403)", resp.status)),
        Err(err) => failures.push(format!("phase 3: {err}")),
    }

    // Phase 4: the response headers are already on their way, so Envoy resets the stream;
    // the body must not reach the client either way.
    let leaked =
        match fx.send(&Request::get("/leak").header("x-upstream-reply", "the secret-token")) {
            Ok(resp) => resp
                .body_text()
                .contains("secret-token")
                .then(|| format!("status {}", resp.status)),
            Err(_) => None,
        };
    if let Some(how) = leaked {
        failures.push(format!("phase 4: the body reached the client ({how})"));
    }

    // Past SecResponseBodyLimit (512 KiB, ProcessPartial): inspection stops, all of it passes.
    match fx.send(&Request::get("/big").header("x-upstream-size", "600000")) {
        Ok(resp) if resp.status == 200 && resp.body.len() == 600_000 => {}
        Ok(resp) => failures.push(format!(
            "600 kB response: status {}, {} bytes (want 200, 600000)",
            resp.status,
            resp.body.len()
        )),
        Err(err) => failures.push(format!("600 kB response: {err}")),
    }

    // Redirect action: 302 with Location, upstream not involved.
    match fx.send(&Request::get("/old/page")) {
        Ok(resp)
            if resp.status == 302 && resp.header("location") == Some("http://example.com/new/") => {
        }
        Ok(resp) => failures.push(format!(
            "redirect: status {}, location {:?}, body {:?}",
            resp.status,
            resp.header("location"),
            short(&resp.body_text())
        )),
        Err(err) => failures.push(format!("redirect: {err}")),
    }
    if fx.upstream.find("/old/page").is_some() {
        failures.push("redirect: the upstream saw the request".into());
    }

    for (rule, phase) in [("9001", 4), ("9002", 3), ("9003", 1)] {
        let counter = format!("wafer.rule_interruptions.phase.{phase}.rule_id.{rule}");
        if fx.counter(&counter) != 1 {
            failures.push(format!(
                "{counter} = {} (want 1)",
                fx.counter(&counter)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Phase 5 runs once per stream: for one that completed, and for one the client abandoned in
/// the middle of its body (Envoy resets that stream).
fn logging_phase_runs_for_completed_and_reset_streams(build: Build) {
    use std::io::Write;
    use std::time::Duration;
    let fx = fixture(build);
    let mut failures = Vec::new();
    let from = fx.envoy.log().len();
    match fx.send(&Request::get("/logged").header("x-log-me", "completed")) {
        Ok(resp) if resp.status == 200 => {}
        Ok(resp) => failures.push(format!("completed: status {} (want 200)", resp.status)),
        Err(err) => failures.push(format!("completed: {err}")),
    }
    // Headers and 10 of 100 announced body bytes, then the connection closes.
    match std::net::TcpStream::connect(fx.envoy.listener) {
        Ok(mut conn) => {
            let head = "POST /abandoned HTTP/1.1\r\nhost: a\r\nx-log-me: abandoned\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n0123456789";
            if let Err(err) = conn.write_all(head.as_bytes()) {
                failures.push(format!("abandoned: {err}"));
            }
            std::thread::sleep(Duration::from_millis(200));
            drop(conn);
        }
        Err(err) => failures.push(format!("abandoned: {err}")),
    }
    let count = |who: &str| fx.envoy.log().get(from..).map_or(0, |l| l.matches(&format!("logging phase of {who}")).count());
    fx.envoy.wait_for(Duration::from_secs(5), |_| count("completed") > 0 && count("abandoned") > 0);
    // A second run of the phase would follow within the same stream's end.
    std::thread::sleep(Duration::from_millis(300));
    for who in ["completed", "abandoned"] {
        if count(who) != 1 {
            failures.push(format!("rule 9004 logged \"logging phase of {who}\" {} times (want once)", count(who)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Requests repeated but for their `x-request-id` (what the engine remembers across requests
/// serves them) reach the upstream whole and are counted, and a request that differs anywhere
/// else (a header, the query, the path) is inspected as before, between repeated ones.
fn repeated_requests_pass_and_changed_ones_are_inspected(build: Build) {
    let rules = [
        "SecRuleEngine On",
        r#"SecRule REQUEST_HEADERS:User-Agent "@contains evil" "id:9101,phase:1,t:none,log,deny,status:403""#,
        r#"SecRule ARGS "@contains attack" "id:9102,phase:2,t:none,log,deny,status:403""#,
        r#"SecRule REQUEST_URI "@beginsWith /admin" "id:9103,phase:1,t:none,log,deny,status:403""#,
    ];
    let config = config_of(&rules);
    let fx = Fixture::start(build, "repeated", &config);
    let get = |target: &str, ua: &str| Request::get(target).header("user-agent", ua);
    let benign = || get("/q?a=1&b=2", "ok");
    let steps: Vec<(&str, Request, u16)> = vec![
        ("first", benign(), 200),
        ("repeated", benign(), 200),
        ("repeated again", benign(), 200),
        ("another user agent", get("/q?a=1&b=2", "evil bot"), 403),
        ("repeated after a block", benign(), 200),
        ("another query", get("/q?a=attack&b=2", "ok"), 403),
        ("another path", get("/admin?a=1&b=2", "ok"), 403),
        ("another header added", benign().header("x-extra", "evil"), 200),
        ("repeated at the end", benign(), 200),
    ];
    let mut failures = run_steps(&fx, &steps);
    // Every request is counted (added to the host's counter once a second).
    let want = steps.len() as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut counted = fx.counter("wafer.transactions");
    while counted < want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        counted = fx.counter("wafer.transactions");
    }
    if counted != want {
        failures.push(format!("wafer counted {counted} transactions, want {want}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same with bodies: behind the same headers, the same body passes whole and another one
/// of the same length (the headers say the same length) is inspected, whether the body comes
/// in one read or in several.
fn repeated_bodies_pass_and_changed_ones_are_inspected(build: Build) {
    let rules = [
        "SecRuleEngine On",
        "SecRequestBodyAccess On",
        r#"SecRule REQUEST_HEADERS:User-Agent "@contains evil" "id:9111,phase:1,t:none,log,deny,status:403""#,
        r#"SecRule ARGS "@contains attack" "id:9112,phase:2,t:none,log,deny,status:403""#,
    ];
    let config = config_of(&rules);
    let fx = Fixture::start(build, "repeated-bodies", &config);
    let (one, two, bad) = (SAME_LEN_ONE, SAME_LEN_TWO, SAME_LEN_BAD);
    let parts = |r: Request| r.paced(4, std::time::Duration::from_millis(15));
    let steps: Vec<(&str, Request, u16)> = vec![
        ("first", post(one), 200),
        ("repeated", post(one), 200),
        ("another body, the same length", post(bad), 403),
        ("repeated after a block", post(one), 200),
        ("repeated, in parts", parts(post(one)), 200),
        ("another body in parts", parts(post(bad)), 403),
        ("a benign other body", post(two), 200),
        ("the first body again", post(one), 200),
        ("and again", post(one), 200),
        ("another user agent", post(one).header("user-agent", "evil bot"), 403),
        ("a shorter body", post(r#"{"a":"attack"}"#), 403),
        ("another key, the same length", post(r#"{"b":"attack!!!!!"}"#), 403),
        ("repeated at the end", post(one), 200),
    ];
    let failures = run_steps(&fx, &steps);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Many streams at once on Envoy's one worker, so transactions of repeated and changed bodies
/// interleave: every benign request passes whole, every same-length attack is blocked.
fn repeated_bodies_interleaved_keep_their_verdicts(build: Build) {
    let rules = [
        "SecRuleEngine On",
        "SecRequestBodyAccess On",
        r#"SecRule ARGS "@contains attack" "id:9121,phase:2,t:none,log,deny,status:403""#,
    ];
    let config = config_of(&rules);
    let fx = Fixture::start(build, "repeated-interleaved", &config);
    let (one, two, bad) = (SAME_LEN_ONE, SAME_LEN_TWO, SAME_LEN_BAD);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..8usize {
            let (fx, failures) = (&fx, &failures);
            s.spawn(move || {
                for i in 0..40usize {
                    let (req, want) = match (t * 7 + i) % 5 {
                        0 | 1 => (post(one), 200),
                        2 => (post(two), 200),
                        3 => (post(bad), 403),
                        _ => (post(if i % 2 == 0 { one } else { bad }).paced(6, std::time::Duration::from_millis(3)), if i % 2 == 0 { 200 } else { 403 }),
                    };
                    if let Some(why) = wrong(fx, &req, want) {
                        failures.lock().unwrap().push(format!("thread {t}, request {i}: {why}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
}
