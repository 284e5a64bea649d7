//! Documented verdicts for edge cases (docs/hardening.md):
//!
//! - malformed JSON body: `@targeted` passes it (200); `@recommended-conf` with
//!   `SecRuleEngine On` blocks it with 400 (rule 200002, `REQBODY_ERROR !@eq 0`).
//! - invalid percent-encoding in the query: kept literally (as ModSecurity), passes `@targeted` (200).
//! - body over `SecRequestBodyLimit` with `SecRequestBodyLimitAction Reject`: 413.
//! - body over the limit with `ProcessPartial`: only the prefix within the limit is inspected.

use wafer_tests::client::Request;
use wafer_tests::envoy::Build;

use crate::{passed_whole, Fixture};

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

per_build!(
    malformed_json_passes_targeted,
    malformed_json_blocked_by_recommended_conf,
    invalid_percent_encoding_in_query,
    body_over_limit_with_reject_is_413,
    body_over_limit_with_process_partial_inspects_prefix,
);

fn config(directives: &[&str]) -> String {
    let list: Vec<String> = directives
        .iter()
        .map(|d| wafer_tests::envoy::json_string(d))
        .collect();
    format!(
        r#"{{"directives_map":{{"default":[{}]}},"default_directives":"default"}}"#,
        list.join(",")
    )
}

fn malformed_json_passes_targeted(build: Build) {
    let fx = Fixture::tier(build, "@targeted");
    let req = Request::post("/api", JSON, r#"{"user": "alice", "#);
    let resp = fx.send(&req).expect("send");
    passed_whole(&req, &resp).expect("malformed JSON passes @targeted");
}

fn malformed_json_blocked_by_recommended_conf(build: Build) {
    let fx = Fixture::start(
        build,
        "reqbody-error",
        &config(&["Include @recommended-conf", "SecRuleEngine On"]),
    );
    let resp = fx
        .send(&Request::post("/api", JSON, r#"{"user": "alice", "#))
        .expect("send");
    assert_eq!(resp.status, 400, "body: {}", resp.body_text());
}

fn invalid_percent_encoding_in_query(build: Build) {
    let fx = Fixture::tier(build, "@targeted");
    let req = Request::get("/search?q=%zz%4");
    let resp = fx.send(&req).expect("send");
    passed_whole(&req, &resp).expect("invalid percent-encoding passes @targeted");
}

fn body_over_limit_with_reject_is_413(build: Build) {
    let fx = Fixture::start(
        build,
        "limit-reject",
        &config(&[
            "Include @recommended-conf",
            "SecRuleEngine On",
            "SecRequestBodyLimit 1024",
            "SecRequestBodyLimitAction Reject",
        ]),
    );
    let body = format!("a={}", "b".repeat(4096));
    let resp = fx
        .send(&Request::post("/upload", FORM, body))
        .expect("send");
    assert_eq!(resp.status, 413, "body: {}", resp.body_text());
}

fn body_over_limit_with_process_partial_inspects_prefix(build: Build) {
    let fx = Fixture::start(
        build,
        "limit-partial",
        &config(&[
            "Include @targeted",
            "SecRequestBodyLimit 1024",
            "SecRequestBodyLimitAction ProcessPartial",
        ]),
    );
    // Attack inside the inspected prefix: blocked.
    let early = format!(
        "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E&pad={}",
        "b".repeat(4096)
    );
    let resp = fx
        .send(&Request::post("/search", FORM, early))
        .expect("send");
    assert_eq!(
        resp.status,
        403,
        "attack in the prefix: {}",
        resp.body_text()
    );
    // Attack past the limit: not inspected, so the request passes whole.
    let late = Request::post(
        "/search",
        FORM,
        format!(
            "pad={}&q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            "b".repeat(4096)
        ),
    );
    let resp = fx.send(&late).expect("send");
    passed_whole(&late, &resp).expect("attack past the limit passes");
}
