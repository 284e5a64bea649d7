//! ModSecurity-style log lines, one per matched rule with `log`:
//! `ModSecurity: Warning. Matched "Operator ..." [file ".."] [line ".."] [id ".."] [msg ".."] [data ".."] [severity ".."] ... [uri ".."] [unique_id ".."]`
//! go-ftw and other tools read the `[id "N"]` fields from these lines.

use std::fmt::Write as _;

use super::variables::Ctx;
use super::Transaction;
use crate::actions::Disruptive;
use crate::compile::{EngineMode, Rule};
use crate::operators::Expand;

/// Longest value or data excerpt put in a line.
const MAX_FIELD: usize = 512;

/// Escapes a value for a one-line, double-quoted field.
fn esc(out: &mut String, v: &[u8]) {
    let cut = v.len() > MAX_FIELD;
    for &b in v.iter().take(MAX_FIELD) {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    if cut {
        out.push_str("...");
    }
}

fn field(out: &mut String, name: &str, v: &[u8]) {
    let _ = write!(out, " [{name} \"");
    esc(out, v);
    out.push_str("\"]");
}

pub(crate) fn rule_line(t: &Transaction, rule: &Rule, phase: u8) -> String {
    let ctx = Ctx::new(t, Some(rule));
    let mut s = String::with_capacity(512);
    let blocking = t.engine == EngineMode::On && matches!(rule.disruptive, Disruptive::Deny | Disruptive::Drop | Disruptive::Redirect(_)) && phase != 5;
    if blocking {
        let _ = write!(s, "ModSecurity: Access denied with code {} (phase {}). ", rule.status, phase);
    } else {
        s.push_str("ModSecurity: Warning. ");
    }
    s.push_str("Matched \"Operator `");
    s.push_str(rule.operator.log_name());
    s.push_str("' with parameter `");
    esc(&mut s, rule.op_param.as_bytes());
    s.push_str("' against variable `");
    esc(&mut s, t.matched.var_name.as_bytes());
    s.push_str("' (Value: `");
    esc(&mut s, &t.matched.var);
    s.push_str("' )\"");
    field(&mut s, "file", rule.file.as_bytes());
    field(&mut s, "line", rule.line.to_string().as_bytes());
    field(&mut s, "id", rule.id.to_string().as_bytes());
    field(&mut s, "rev", rule.rev.as_deref().unwrap_or("").as_bytes());
    let msg = rule.msg.as_ref().map(|m| ctx.expand(m)).unwrap_or_default();
    field(&mut s, "msg", &msg);
    let data = rule.logdata.as_ref().map(|m| ctx.expand(m)).unwrap_or_default();
    field(&mut s, "data", &data);
    field(&mut s, "severity", rule.severity.map(|v| v.to_string()).unwrap_or_default().as_bytes());
    field(&mut s, "ver", rule.ver.as_deref().unwrap_or("").as_bytes());
    field(&mut s, "maturity", rule.maturity.as_deref().unwrap_or("0").as_bytes());
    field(&mut s, "accuracy", rule.accuracy.as_deref().unwrap_or("0").as_bytes());
    for tag in &rule.tags {
        field(&mut s, "tag", tag.as_bytes());
    }
    field(&mut s, "hostname", t.req.server_name.as_slice());
    field(&mut s, "uri", &t.req.uri_raw);
    field(&mut s, "unique_id", t.unique_id.as_bytes());
    s
}

/// A line for an engine decision that no rule made (body limits, the memory budget);
/// `status` 0: a warning (nothing denied).
pub(crate) fn engine_line(t: &Transaction, what: &str, status: u16) -> String {
    let mut s = if status == 0 { format!("ModSecurity: Warning. {what}") } else { format!("ModSecurity: Access denied with code {status}. {what}") };
    field(&mut s, "uri", &t.req.uri_raw);
    field(&mut s, "unique_id", t.unique_id.as_bytes());
    s
}
