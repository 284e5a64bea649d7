//! The memory budget (`memory_budget_bytes`, docs/limits.md) in a real Envoy: bodies held at
//! once past it are refused with 413, counted (`wafer.over_budget`) and logged; the bodies
//! within it are inspected as usual, and so are the requests after.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use wafer_tests::client::Request;

use crate::{Fixture, LOG_WAIT};

/// 4 MiB: three quarters for bodies, each form body counting twice (its bytes and the room
/// for its parse), so three 400 KiB forms fit and a fourth does not.
const CONFIG: &str = r#"{"directives_map":{"default":["Include @recommended-conf","SecRequestBodyNoFilesLimit 13107200","SecRuleEngine On","SecRule ARGS \"@contains attack\" \"id:1,phase:2,deny,status:403\""]},"default_directives":"default","memory_budget_bytes":4194304}"#;

/// A connection that has sent a form's headers and all of its body but the last byte.
fn open_form(f: &Fixture, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(f.envoy.listener).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let head = format!("POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).expect("send the head");
    // A refused body is answered (and its connection closed) while it is sent.
    let _ = s.write_all(&body[..body.len() - 1]);
    s
}

/// Sends the last byte and reads the status of the answer.
fn finish(mut s: TcpStream, body: &[u8]) -> Option<u16> {
    let _ = s.write_all(&body[body.len() - 1..]);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).split(' ').nth(1)?.parse().ok()
}

fn form(value: &str, len: usize) -> Vec<u8> {
    let mut b = b"q=".to_vec();
    while b.len() < len {
        b.extend_from_slice(value.as_bytes());
    }
    b.truncate(len);
    b
}

#[test]
fn bodies_held_at_once_past_the_memory_budget_are_refused_with_413() {
    let f = Fixture::start(wafer_tests::envoy::Build::Wasm, "budget", CONFIG);
    let benign = form("benign+", 400 << 10);
    let attack = form("attack+", 400 << 10);
    // Five held at once, one after the other (so that Envoy has given each to wafer before
    // the next comes): the first three fit, the last two do not.
    let mut held = Vec::new();
    for body in [&benign, &attack, &benign, &benign, &benign] {
        held.push((open_form(&f, body), body));
        std::thread::sleep(Duration::from_millis(300));
    }
    let answers: Vec<Option<u16>> = held.into_iter().map(|(s, body)| finish(s, body)).collect();
    assert_eq!(answers, vec![Some(200), Some(403), Some(200), Some(413), Some(413)], "the bodies within the budget inspected, the others refused");
    assert!(f.envoy.wait_for_log("memory_budget_bytes 4194304", LOG_WAIT), "the refusal is logged");
    assert_eq!(f.envoy.counter("wasmcustom.wafer.over_budget"), 2);
    // What the held requests took came back: the same bodies one at a time are inspected.
    for (body, status) in [(&benign, 200), (&attack, 403), (&benign, 200)] {
        let r = f.send(&Request::post("/form", "application/x-www-form-urlencoded", body.clone())).expect("send");
        assert_eq!(r.status, status);
    }
    assert_eq!(f.send(&Request::get("/?id=1")).map(|r| r.status).ok(), Some(200));
    assert!(!f.envoy.log().contains("RuntimeError"), "no VM failure");
}
