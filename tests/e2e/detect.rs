//! `@wafer-detect` through Envoy (docs/detection.md): with the CRS PL1 it blocks attacks the
//! CRS PL1 alone passes (a base64-wrapped command, server-side JavaScript for a NoSQL query in a JSON body, an XXE
//! entity in an XML body, a command in a URL path segment, a mail header in a form field, a NoSQL operator in a header, a
//! traversal with a fuzzer's separators, a parameter-entity reference, SQLi in one path segment, a
//! remote inclusion from an IP address in a header, a base64 Java class name), benign requests (a browser's
//! headers, a bearer token, percent signs in text, an IP-address Referer, a URL parameter) still pass whole,
//! and in DetectionOnly it blocks nothing. The same requests pass with the CRS alone, so the
//! blocks are the include's.

use wafer_tests::client::Request;
use wafer_tests::envoy::Build;

use crate::{passed_whole, Fixture};

const CRS_PL1: &str = r#"{"crs":{"paranoia_level":1}}"#;
const CRS_PL1_DETECT: &str = r#"{"crs":{"paranoia_level":1},"detect":{}}"#;
const DETECT_ONLY: &str = r#"{"crs":{"paranoia_level":1,"mode":"detect"},"detect":{}}"#;

per_build!(wafer_detect_blocks_what_the_crs_passes,);

fn attacks() -> Vec<(&'static str, Request)> {
    vec![
        // base64 of "cat /etc/passwd"
        ("base64 command in the query", Request::get("/search?q=Y2F0IC9ldGMvcGFzc3dk")),
        ("NoSQL JavaScript in JSON", Request::post("/api/login", "application/json", br#"{"user":"admin","password":"x' && this.password.match(/.*/)//"}"#.to_vec())),
        ("XXE in an XML body", Request::post("/api/soap", "text/xml", br#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "https://example.org/x">]><r>&x;</r>"#.to_vec())),
        ("a command in a URL path segment", Request::get("/files/%3B%20pwd/view")),
        ("mail header in a form field", Request::post("/contact", "application/x-www-form-urlencoded", b"email=me%40example.com%0ABcc%3A+all%40example.org&msg=hi".to_vec())),
        ("a NoSQL operator in a header", Request::get("/api/items").header("X-Filter", r#"{"price": {"$gt": ""}}"#)),
        ("a traversal with a fuzzer's separators", Request::get("/download?file=..%25bg%25qfwindows%25bg%25qfsystem32%25bg%25qfdrivers%25bg%25qfetc%25bg%25qfhosts")),
        ("a parameter-entity reference", Request::get("/search?q=%25remote%3B")),
        ("SQL injection in one URL path segment", Request::get("/files/-8709%22%20or%208571%3D8571--/view")),
        ("a remote inclusion from an IP address in a header", Request::get("/api/items").header("X-Include", "http://66.240.183.75/crash.php")),
        // base64 of "java.lang.Runtime"
        ("a base64 Java runtime class name", Request::get("/search?q=amF2YS5sYW5nLlJ1bnRpbWU=")),
    ]
}

fn benign() -> Vec<Request> {
    vec![
        Request::get("/search?q=Tom+%26+Jerry&page=2"),
        Request::get("/search?q=hello+world+(test)&sort=date"),
        Request::get("/shop/cat/toys/id"),
        Request::post("/api/orders", "application/json", r#"{"sku":"A-12","qty":2,"note":"Bitte bis Freitag liefern (Tür hinten)."}"#.as_bytes().to_vec()),
        Request::post("/contact", "application/x-www-form-urlencoded", b"email=me%40example.com&msg=Dear+team%2C%0Athanks%21%0ANote%3A+see+below".to_vec()),
        // A browser's headers and an API client's bearer token (base64url JSON once decoded).
        Request::get("/api/v2/categories/kids/products?page=13&price[gte]=25")
            .header("sec-ch-ua", r#""Google Chrome";v="125", "Chromium";v="125", "Not_A Brand";v="24""#)
            .header("Authorization", "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0NDI0MjQ4Iiwic2NvcGUiOiJvcmRlcnM6cmVhZCBjYXJ0In0.eOgITOkdNXTSegoRMEdpRDjjD30zHhKG0JCw63JoTxY"),
        Request::get("/search?q=100%25+cotton%3B+50%25+off&fmt=%25s%3B"),
        // A page of an intranet host by IP as the Referer, a URL to a named host in a parameter,
        // a path with punctuation in its segments.
        Request::get("/app/index.php?next=https%3A%2F%2Fshop.example.com%2Fcart.php%3Fid%3D1").header("Referer", "http://192.168.0.10/app/index.php"),
        Request::get("/blog/2024/05/hello-world-(part-2)/comments"),
    ]
}

fn wafer_detect_blocks_what_the_crs_passes(build: Build) {
    let crs = Fixture::start(build, "detect-crs", CRS_PL1);
    for (name, req) in attacks() {
        let resp = crs.send(&req).expect("send");
        assert_eq!(resp.status, 200, "CRS PL1 alone: {name}");
    }
    drop(crs);
    let fx = Fixture::start(build, "detect", CRS_PL1_DETECT);
    for (name, req) in attacks() {
        let resp = fx.send(&req).expect("send");
        assert_eq!(resp.status, 403, "CRS PL1 + @wafer-detect: {name}");
    }
    for req in benign() {
        let resp = fx.send(&req).expect("send");
        passed_whole(&req, &resp).unwrap_or_else(|e| panic!("benign request blocked or changed: {e}"));
    }
    drop(fx);
    let fx = Fixture::start(build, "detect-only", DETECT_ONLY);
    for (name, req) in attacks() {
        let resp = fx.send(&req).expect("send");
        assert_eq!(resp.status, 200, "DetectionOnly: {name}");
    }
}
