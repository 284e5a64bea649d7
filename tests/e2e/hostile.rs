//! Hostile requests through Envoy + wafer + the full CRS (PL1, blocking): each gets its
//! documented verdict (docs/hardening.md), and afterwards wafer still serves (the wasm VM is
//! alive, the dynamic module caught no panic): a benign request gets 200, wafer's transaction
//! counter counted every request, and Envoy logged no failure of the module.

use std::time::Duration;

use wafer_tests::client::{Request, Response};
use wafer_tests::envoy::Build;

use crate::{passed_whole, Fixture};

const FULL_CRS: &str = r#"{"crs":{"paranoia_level":1}}"#;

per_build!(
    hostile_requests_get_their_verdicts_and_wafer_serves_on,
);

fn rep(unit: &str, n: usize) -> String {
    unit.repeat(n)
}

fn multipart(parts: &str) -> Request {
    Request::post("/upload", "multipart/form-data; boundary=b", parts.as_bytes().to_vec())
}

/// (name, request, expected status).
fn hostile() -> Vec<(&'static str, Request, u16)> {
    let json = "application/json";
    let form = "application/x-www-form-urlencoded";
    let xml = "text/xml";
    let mut attrs = String::from("<r ");
    for i in 0..5000 {
        attrs.push_str(&format!("a{i}=\"1\" "));
    }
    attrs.push_str("/>");
    let laughs = "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">\
        <!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\
        <!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">\
        <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">]><lolz>&lol3;</lolz>";
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend_from_slice(b"<\0r\0>\0x"); // odd length, no end tag
    vec![
        ("JSON nested 100,000 deep", Request::post("/api", json, rep("[", 100_000)), 400),
        ("JSON 5,000 keys", Request::post("/api", json, format!("{{{}\"z\":1}}", rep("\"a\":1,", 5000))), 400),
        ("JSON binary garbage", Request::post("/api", json, (0..=255u8).cycle().take(10_000).collect::<Vec<u8>>()), 400),
        ("form 5,000 arguments", Request::post("/f", form, rep("a=1&", 5000)), 400),
        // Under SecRequestBodyNoFilesLimit (128 KiB): inspected; over it: refused as ModSecurity
        // refuses it (REQBODY_ERROR, rule 200002).
        ("form 120 KB of quotes", Request::post("/f", form, format!("q={}", rep("'", 120_000))), 200),
        ("form invalid escapes", Request::post("/f", form, rep("%%zz%u12%", 13_000)), 200),
        ("form 200 KB of quotes", Request::post("/f", form, format!("q={}", rep("'", 200_000))), 400),
        ("form 180 KB of invalid escapes", Request::post("/f", form, rep("%%zz%u12%", 20_000)), 400),
        ("query 5,000 arguments", Request::get(&format!("/?{}", rep("a=1&", 5000))), 400),
        // Entities are never expanded: `&lol3;` stays 6 bytes.
        ("XML billion laughs", Request::post("/x", xml, laughs), 200),
        ("XML 5,000 attributes", Request::post("/x", xml, attrs), 400),
        ("XML nested 100,000 deep", Request::post("/x", xml, rep("<a>", 100_000)), 400),
        ("XML UTF-16, truncated", Request::post("/x", xml, utf16), 400),
        ("multipart 2,000 parts", multipart(&format!("{}--b--\r\n", rep("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n", 2000))), 400),
        ("multipart without final boundary", multipart("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"), 400),
        ("5,000 cookies", Request::get("/").header("Cookie", &rep("a=1;", 5000)), 400),
        ("50 KB header value", Request::get("/").header("X-Long", &rep("a", 50_000)), 200),
        // Envoy's own limits, before any filter: 60 KiB of headers, 100 headers.
        ("headers over 60 KiB", Request::get("/").header("X-Long", &rep("a", 70_000)), 431),
        ("200 headers", (0..200).fold(Request::get("/"), |r, i| r.header(&format!("x-h{i}"), "1")), 431),
        // The same SQL injection, one byte per body callback.
        ("JSON attack in 1-byte chunks", Request::post("/api", json, r#"{"q":"1' or 1=1 union select password from users--"}"#).chunked(1, Duration::ZERO), 403),
    ]
}

fn hostile_requests_get_their_verdicts_and_wafer_serves_on(build: Build) {
    let fx = Fixture::start(build, "hostile", FULL_CRS);
    let benign = Request::get("/index.html?page=2");
    let resp = fx.send(&benign).expect("send benign");
    passed_whole(&benign, &resp).expect("benign request before");
    // The benign request's count reaches the host's counter within a second (see below).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while fx.counter("wafer.transactions") < 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let before = fx.counter("wafer.transactions");
    let mut failures = Vec::new();
    let mut reached_wafer = 0;
    for (name, req, want) in hostile() {
        match fx.send(&req) {
            Ok(Response { status, .. }) if status == want => {}
            Ok(resp) => failures.push(format!("{name}: status {} (want {want})", resp.status)),
            Err(err) => failures.push(format!("{name}: {err} (want {want})")),
        }
        if want != 431 {
            reached_wafer += 1;
        }
    }
    for i in 0..3 {
        let resp = fx.send(&benign).expect("send benign");
        if let Err(err) = passed_whole(&benign, &resp) {
            failures.push(format!("benign request {i} after the hostile ones: {err}"));
        }
    }
    // Every request that reached wafer was counted (the counter is per VM: a restarted VM
    // would not count on from where it was). wafer adds its count to the host's counter once
    // a second: wait for it.
    let want = reached_wafer + 3;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut counted = fx.counter("wafer.transactions") - before;
    while counted < want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        counted = fx.counter("wafer.transactions") - before;
    }
    if counted != want {
        failures.push(format!("wafer counted {counted} transactions, want {want}"));
    }
    // Envoy's own lines (not wafer's rule logs, which quote the attacks) must show no failure
    // of the module; nor may wafer's own (a caught panic).
    let log = fx.envoy.log();
    for line in log.lines() {
        if line.contains("wafer: panic") {
            failures.push(format!("wafer logged: {line}"));
        }
    }
    for line in log.lines().filter(|l| !build.wafer_wrote(l)) {
        let lower = line.to_ascii_lowercase();
        if ["panicked", "function: proxy_on", "runtimeerror", "unreachable", "failed"].iter().any(|b| lower.contains(b)) {
            failures.push(format!("Envoy logged: {line}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
