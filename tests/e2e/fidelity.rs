//! Verdicts that follow ModSecurity v3 (libmodsecurity 3.0.15 answers the same), through Envoy
//! with `Include @recommended-conf` and `SecRuleEngine On`:
//!
//! - an XML body referencing an entity it never declares (the XXE through an external
//!   parameter entity) is a body error: 400 (rule 200002);
//! - a form body over `SecRequestBodyNoFilesLimit` (128 KiB) is a body error: 400; a multipart
//!   body whose 200 KB are a file part is not;
//! - a multipart body with bare-LF lines or a folded part header fails the strict check: 400
//!   (rule 200003, MULTIPART_STRICT_ERROR); a `'` inside a double-quoted filename does not.

use wafer_tests::client::Request;
use wafer_tests::envoy::Build;

use crate::{passed_whole, Fixture};

per_build!(recommended_conf_answers_as_modsecurity,);

const CONFIG: &str = r#"{"directives_map":{"default":["Include @recommended-conf","SecRuleEngine On"]},"default_directives":"default"}"#;
const XML: &str = "text/xml";
const FORM: &str = "application/x-www-form-urlencoded";
const MULTIPART: &str = "multipart/form-data; boundary=b";

fn recommended_conf_answers_as_modsecurity(build: Build) {
    let fx = Fixture::start(build, "fidelity", CONFIG);
    let file_part = {
        let mut b = b"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\n".to_vec();
        b.extend(std::iter::repeat_n(b'z', 200_000));
        b.extend_from_slice(b"\r\n--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n");
        b
    };
    let cases: Vec<(&str, Request, u16)> = vec![
        ("XXE via parameter entity", Request::post("/x", XML, r#"<!DOCTYPE x [<!ENTITY % e PUBLIC "a" "http://h/x.dtd">%e;]><root>&xxe;</root>"#), 400),
        ("XML with a declared entity", Request::post("/x", XML, r#"<!DOCTYPE x [<!ENTITY xxe "v">]><root>&xxe;</root>"#), 200),
        ("form at the NoFilesLimit", Request::post("/f", FORM, format!("a={}", "b".repeat(131_070))), 200),
        ("form over the NoFilesLimit", Request::post("/f", FORM, format!("a={}", "b".repeat(131_071))), 400),
        ("multipart with a 200 KB file", Request::post("/u", MULTIPART, file_part), 200),
        ("multipart with CRLF", Request::post("/u", MULTIPART, "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n"), 200),
        ("multipart with bare LF", Request::post("/u", MULTIPART, "--b\nContent-Disposition: form-data; name=\"a\"\n\n1\n--b--\n"), 400),
        ("multipart with a folded header", Request::post("/u", MULTIPART, "--b\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\n1\r\n--b--\r\n"), 400),
        ("multipart filename with a quote", Request::post("/u", MULTIPART, "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"te'st.txt\"\r\n\r\n1\r\n--b--\r\n"), 200),
    ];
    let mut failures = Vec::new();
    for (name, req, want) in cases {
        match fx.send(&req) {
            Ok(resp) if want == 200 => {
                if let Err(e) = passed_whole(&req, &resp) {
                    failures.push(format!("{name}: {e}"));
                }
            }
            Ok(resp) if resp.status == want => {}
            Ok(resp) => failures.push(format!("{name}: status {} (want {want})", resp.status)),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
