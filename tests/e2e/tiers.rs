//! The request table against each tier. Passing and blocking are separate tests so that the
//! plumbing (requests pass, bodies arrive whole) is reported apart from the rules.

use wafer_tests::envoy::Build;

use crate::cases::{Case, Tier, CASES};
use crate::{passed_whole, short, Fixture, CASE_HEADER, LOG_WAIT};

/// Runs the cases of `tier` whose expected status satisfies `select`; fails with every
/// mismatch listed.
fn run(build: Build, tier: Tier, select: fn(u16) -> bool) {
    let fx = Fixture::tier(build, tier.include());
    let cases: Vec<&Case> = CASES.iter().filter(|c| select(c.expected(tier))).collect();
    assert!(!cases.is_empty(), "no cases selected");
    let mut failures = Vec::new();
    let mut blocked = 0;
    let mut expected_lines = Vec::new();
    for case in &cases {
        let want = case.expected(tier);
        let req = (case.request)().header(CASE_HEADER, case.name);
        let resp = match fx.send(&req) {
            Ok(resp) => resp,
            Err(err) => {
                failures.push(format!("{}: request failed: {err}", case.name));
                continue;
            }
        };
        if want == 200 {
            if let Err(why) = passed_whole(&req, &resp) {
                failures.push(format!("{}: {why}", case.name));
            }
        } else {
            blocked += 1;
            if let (Some(rule), Some(id)) = (case.rule, blocked_id(&resp.body_text())) {
                expected_lines.push((case.name, rule, id.to_string()));
            }
            if resp.status != want {
                failures.push(format!(
                    "{}: status {} (want {want}), body {:?}",
                    case.name,
                    resp.status,
                    short(&resp.body_text())
                ));
            }
        }
    }
    // Checked after all requests: whatever wafer blocked never reached the upstream whole.
    for case in cases.iter().filter(|c| c.expected(tier) != 200) {
        if fx.upstream_saw_case(case.name) {
            failures.push(format!(
                "{}: blocked case reached the upstream whole",
                case.name
            ));
        }
    }
    for (name, rule, id) in expected_lines {
        let rule_field = format!("[id \"{rule}\"]");
        let id_field = format!("[unique_id \"{id}\"]");
        let found = fx.envoy.wait_for(LOG_WAIT, |log| {
            log.lines()
                .any(|l| l.contains(&rule_field) && l.contains(&id_field))
        });
        if !found {
            failures.push(format!(
                "{name}: Envoy's log has no line with {rule_field} and {id_field}"
            ));
        }
    }
    if blocked > 0 {
        let interruptions = fx.counter("wafer.interruptions");
        if interruptions < blocked {
            failures.push(format!(
                "counter wafer.interruptions = {interruptions}, want >= {blocked}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problem(s) in {} case(s) under {}:\n  {}",
        failures.len(),
        cases.len(),
        tier.include(),
        failures.join("\n  ")
    );
}

/// The request id from wafer's block page (`Request blocked by wafer (id <id>).`).
fn blocked_id(body: &str) -> Option<&str> {
    let rest = body.split_once("(id ")?.1;
    Some(rest.split_once(')')?.0)
}

per_build!(
    targeted_passes_benign_requests_with_whole_bodies,
    targeted_blocks_attacks,
    headers_only_passes_benign_requests_and_body_attacks,
    headers_only_blocks_attacks_in_headers,
);

fn targeted_passes_benign_requests_with_whole_bodies(build: Build) {
    run(build, Tier::Targeted, |status| status == 200);
}

fn targeted_blocks_attacks(build: Build) {
    run(build, Tier::Targeted, |status| status != 200);
}

fn headers_only_passes_benign_requests_and_body_attacks(build: Build) {
    run(build, Tier::HeadersOnly, |status| status == 200);
}

fn headers_only_blocks_attacks_in_headers(build: Build) {
    run(build, Tier::HeadersOnly, |status| status != 200);
}
