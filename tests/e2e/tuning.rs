//! docs/tuning.md, "Tuning false positives": each configuration the page shows (the JSON block
//! after a `<!-- tuning: NAME -->` marker, read from the page itself) runs in Envoy. The false
//! positive the page shows is blocked by the plain CRS, passes whole to the upstream with the
//! exclusion, and the same payload where the exclusion does not reach is still blocked.

use std::path::Path;

use wafer_tests::client::Request;
use wafer_tests::envoy::Build;

use crate::{passed_whole, Fixture};

per_build!(each_tuning_example_passes_its_false_positive_and_still_blocks_elsewhere);

const FORM: &str = "application/x-www-form-urlencoded";
/// The page's running example (`curl -d`, which sends the body as is).
const SNIPPET: &str = "code=SELECT name FROM users WHERE id = 1";
/// The same payload in another argument.
const SNIPPET_IN_Q: &str = "q=SELECT name FROM users WHERE id = 1";
/// The page's WordPress comment.
const COMMENT: &str = "comment=To+list+users+run+cat+/etc/passwd+then+grep&author=Ann&email=ann@example.com&comment_post_ID=1";

/// A POST as curl sends it (curl's User-Agent and Accept).
fn post(path: &str, body: &str) -> Request {
    Request::post(path, FORM, body).header("User-Agent", "curl/8.5.0").header("Accept", "*/*")
}

/// (marker, the false positive it must pass, requests it must still block).
fn examples() -> Vec<(&'static str, Request, Vec<Request>)> {
    let fp = || post("/api/snippets", SNIPPET);
    vec![
        ("path", fp(), vec![post("/api/other", SNIPPET)]),
        ("argument", fp(), vec![post("/api/snippets", SNIPPET_IN_Q)]),
        ("seclang-update-target", fp(), vec![post("/api/snippets", SNIPPET_IN_Q)]),
        ("seclang-ctl", fp(), vec![post("/api/other", SNIPPET), post("/api/snippets", SNIPPET_IN_Q)]),
        ("plugin", post("/wp-comments-post.php", COMMENT), vec![post("/contact", COMMENT)]),
    ]
}

/// The JSON block after each `<!-- tuning: NAME -->` marker of docs/tuning.md.
fn page_configs() -> Vec<(String, String)> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/tuning.md");
    let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(p) = rest.find("<!-- tuning: ") {
        let after = &rest[p + 13..];
        let name = after.split_whitespace().next().unwrap_or_default().to_string();
        let block = after.split_once("```json\n").and_then(|(_, b)| b.split_once("```")).map(|(b, _)| b.to_string());
        out.push((name, block.unwrap_or_else(|| panic!("docs/tuning.md: no ```json block after the marker"))));
        rest = after;
    }
    out
}

fn status(fx: &Fixture, req: &Request) -> String {
    match fx.send(req) {
        Ok(r) => r.status.to_string(),
        Err(e) => e.to_string(),
    }
}

fn each_tuning_example_passes_its_false_positive_and_still_blocks_elsewhere(build: Build) {
    let configs = page_configs();
    let examples = examples();
    let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, examples.iter().map(|e| e.0).collect::<Vec<_>>(), "docs/tuning.md's examples changed: update this test");

    // The false positives are real: the plain CRS blocks them.
    let plain = Fixture::start(build, "tuning-plain", r#"{"crs": {"paranoia_level": 1}}"#);
    let mut failures = Vec::new();
    for fp in [post("/api/snippets", SNIPPET), post("/wp-comments-post.php", COMMENT)] {
        let got = status(&plain, &fp);
        if got != "403" {
            failures.push(format!("plain CRS: {} {:?}: {got}, want 403", fp.target, String::from_utf8_lossy(&fp.body)));
        }
    }
    drop(plain);

    for ((name, config), (_, fp, blocked)) in configs.iter().zip(examples) {
        let fx = Fixture::start(build, &format!("tuning-{name}"), config);
        match fx.send(&fp) {
            Ok(resp) => {
                if let Err(e) = passed_whole(&fp, &resp) {
                    failures.push(format!("{name}: the false positive {}: {e}", fp.target));
                }
            }
            Err(e) => failures.push(format!("{name}: the false positive {}: {e}", fp.target)),
        }
        for req in &blocked {
            let got = status(&fx, req);
            if got != "403" {
                failures.push(format!("{name}: {} {:?} is {got}, want 403 (the exclusion reaches too far)", req.target, String::from_utf8_lossy(&req.body)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
