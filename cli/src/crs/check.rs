//! go-ftw's pass/fail decision for one stage (default "log" mode).

use super::ftw::Output;

/// What running a stage produced.
#[derive(Debug, Default)]
pub struct Observed {
    /// None: transport error (no usable response).
    pub status: Option<u16>,
    pub response: Vec<u8>,
    /// WAF log lines written for this stage (between the markers).
    pub log_lines: Vec<String>,
}

/// Rule ids in a line: `[id "942100"]`.
pub fn ids_in(line: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(p) = rest.find("[id \"") {
        let after = &rest[p + 5..];
        let end = after.find('"').unwrap_or(0);
        if let Ok(id) = after[..end].parse() {
            out.push(id);
        }
        rest = &after[end..];
    }
    out
}

/// Ok(()) when the stage passes, Err(reason) otherwise. Checks in go-ftw's order.
pub fn check(out: &Output, obs: &Observed) -> Result<(), String> {
    if out.expect_error == Some(true) {
        return if obs.status.is_none() { Ok(()) } else { Err("expected a transport error, got a response".into()) };
    }
    let Some(status) = obs.status else { return Err("transport error".into()) };
    if !out.status.is_empty() && !out.status.contains(&status) {
        return Err(format!("status {status}, expected {}", out.status.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" or ")));
    }
    if let Some(text) = &out.response_contains {
        if !String::from_utf8_lossy(&obs.response).contains(text.as_str()) {
            return Err(format!("response does not contain {text:?}"));
        }
    }
    if let Some(re) = &out.log.match_regex {
        let re = regex::Regex::new(re).map_err(|e| format!("bad match_regex: {e}"))?;
        if !obs.log_lines.iter().any(|l| re.is_match(l)) {
            return Err(format!("no log line matches {re}"));
        }
    }
    let ids: Vec<u64> = obs.log_lines.iter().flat_map(|l| ids_in(l)).collect();
    let missing: Vec<u64> = out.log.expect_ids.iter().copied().filter(|i| !ids.contains(i)).collect();
    if !missing.is_empty() {
        return Err(format!("expected ids {missing:?} not logged (logged: {ids:?})"));
    }
    if let Some(re) = &out.log.no_match_regex {
        let re = regex::Regex::new(re).map_err(|e| format!("bad no_match_regex: {e}"))?;
        if obs.log_lines.iter().any(|l| re.is_match(l)) {
            return Err(format!("a log line matches {re}"));
        }
    }
    let unwanted: Vec<u64> = out.log.no_expect_ids.iter().copied().filter(|i| ids.contains(i)).collect();
    if !unwanted.is_empty() {
        return Err(format!("unexpected ids {unwanted:?} logged"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_from_modsecurity_lines() {
        assert_eq!(ids_in(r#"x [file "a"] [id "942100"] [msg "m"] [id "1"]"#), vec![942100, 1]);
    }
}
