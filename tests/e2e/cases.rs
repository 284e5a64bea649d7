//! The request table: each case is one request and the status each tier must answer.
//!
//! A 200 case must reach the upstream with its body intact; any other status must come from
//! wafer, and the upstream must never see the whole request. Add a case here, not a test.

use std::time::Duration;

use wafer_tests::client::Request;

/// A tier under test: the rule set `Include`d by the plugin configuration.
#[derive(Clone, Copy, Debug)]
pub enum Tier {
    /// `@targeted` (rules/targeted.conf): phase-1 URI/User-Agent rules, phase-2 rules on ARGS
    /// (libinjection SQLi/XSS, `payload=maliciouspayload`), request body access on.
    Targeted,
    /// `@headers-only` (rules/headers-only.conf): only the phase-1 URI/User-Agent rules, no body
    /// access.
    HeadersOnly,
}

impl Tier {
    pub fn include(self) -> &'static str {
        match self {
            Tier::Targeted => "@targeted",
            Tier::HeadersOnly => "@headers-only",
        }
    }
}

pub struct Case {
    pub name: &'static str,
    pub request: fn() -> Request,
    /// Status under `@targeted`.
    pub targeted: u16,
    /// Status under `@headers-only`.
    pub headers_only: u16,
    /// The rule that blocks this case: Envoy's log must have its line (`[id "<rule>"]`) with
    /// the request's `[unique_id "..."]`.
    pub rule: Option<u64>,
}

impl Case {
    pub fn expected(&self, tier: Tier) -> u16 {
        match tier {
            Tier::Targeted => self.targeted,
            Tier::HeadersOnly => self.headers_only,
        }
    }
}

const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";

pub const CASES: &[Case] = &[
    // Benign: must pass every tier, bodies intact.
    Case {
        name: "benign GET /",
        request: || Request::get("/"),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign GET with query",
        request: || Request::get("/products?id=42&sort=asc&page=2"),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign form POST",
        request: || Request::post("/profile", FORM, "name=alice&city=paris&newsletter=yes"),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign JSON POST 1 KB",
        request: || Request::post("/api/items", JSON, json_of_size(1024)),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign JSON POST 10 KB",
        request: || Request::post("/api/items", JSON, json_of_size(10 * 1024)),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign JSON POST 50 KB",
        request: || Request::post("/api/items", JSON, json_of_size(50 * 1024)),
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    Case {
        name: "benign JSON POST 50 KB chunked",
        // Several body callbacks: the adapter must feed each new slice exactly once.
        request: || {
            Request::post("/api/items", JSON, json_of_size(50 * 1024))
                .chunked(7000, Duration::from_millis(20))
        },
        targeted: 200,
        headers_only: 200,
        rule: None,
    },
    // Attacks matched by phase-1 rules on the URI or headers: every tier blocks them.
    Case {
        name: "admin path",
        request: || Request::get("/admin"),
        targeted: 403,
        headers_only: 403,
        rule: Some(101),
    },
    Case {
        name: "scanner user agent",
        request: || {
            Request::get("/").header("User-Agent", "sqlmap/1.7.2#stable (https://sqlmap.org)")
        },
        targeted: 403,
        headers_only: 403,
        rule: Some(9131),
    },
    Case {
        name: "SQLi in query",
        // @targeted checks ARGS in phase 2; @headers-only has only the URI and User-Agent rules.
        request: || Request::get("/?id=1%27%20or%201=1--"),
        targeted: 403,
        headers_only: 200,
        rule: Some(9421),
    },
    // Attacks in arguments or the body: blocked by @targeted's phase-2 rules.
    Case {
        name: "SQLi in JSON body",
        request: || {
            Request::post(
                "/api/login",
                JSON,
                r#"{"user":"admin' or 1=1--","password":"x"}"#,
            )
        },
        targeted: 403,
        headers_only: 200,
        rule: Some(9421),
    },
    Case {
        name: "SQLi in JSON body, chunked",
        request: || {
            Request::post(
                "/api/login",
                JSON,
                r#"{"user":"admin' or 1=1--","password":"x"}"#,
            )
            .chunked(5, Duration::from_millis(5))
        },
        targeted: 403,
        headers_only: 200,
        rule: Some(9421),
    },
    Case {
        name: "XSS in form body",
        request: || Request::post("/search", FORM, "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
        targeted: 403,
        headers_only: 200,
        rule: Some(9411),
    },
    Case {
        name: "maliciouspayload in form body",
        request: || Request::post("/submit", FORM, "payload=maliciouspayload"),
        targeted: 403,
        headers_only: 200,
        rule: Some(102),
    },
];

/// A benign JSON document of exactly `size` bytes (plain words and numbers only).
pub fn json_of_size(size: usize) -> Vec<u8> {
    let mut out = String::from("{\"items\":[");
    let mut i = 0;
    loop {
        let item = format!(
            "{}{{\"id\":{i},\"name\":\"widget\",\"color\":\"blue\",\"price\":12,\"in_stock\":true}}",
            if i == 0 { "" } else { "," }
        );
        // Leave room for the closing `],"pad":""}` (11 bytes).
        if out.len() + item.len() + 11 > size {
            break;
        }
        out.push_str(&item);
        i += 1;
    }
    out.push_str("],\"pad\":\"");
    while out.len() + 2 < size {
        out.push('x');
    }
    out.push_str("\"}");
    out.into_bytes()
}

#[test]
fn json_of_size_is_exact_and_valid_shape() {
    for size in [64, 1024, 10 * 1024, 50 * 1024] {
        let doc = json_of_size(size);
        assert_eq!(doc.len(), size);
        assert!(doc.starts_with(b"{\"items\":[") && doc.ends_with(b"\"}"));
    }
}
