//! `wafer candidates`: the candidate rules of phases 1 and 2 (`wafer::tx::candidates`) over
//! a corpus, checked against the reference engine: every rule that matched must be a
//! candidate or a rule that always runs. Prints what the request's distinct values make of
//! the rule set (per request: values, distinct values, distinct (value, chain) pairs,
//! transformation steps run and skipped by byte class, scans, candidate rules).

use std::collections::HashMap;
use std::sync::Arc;

use wafer::tx::candidates::Picture;
use wafer::{BodyAppend, Ruleset, Transaction};

use crate::crs::native;

/// A rule that matched although the picture said it could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    pub request: usize,
    pub rule: u64,
    pub phase: u8,
}

/// The sums of the pictures of phases 1 and 2 over a corpus, and the misses.
#[derive(Debug, Default)]
pub struct Report {
    pub requests: usize,
    pub phase: [Picture; 2],
    /// Rules evaluated by the reference engine in each phase (it evaluates every rule it reaches).
    pub evaluated: [usize; 2],
    pub misses: Vec<Miss>,
}

/// Runs each request through phases 1-2 of `rs` (a reference rule set: every rule it reaches
/// is evaluated) with a profile, and checks the rules that matched against the pictures.
pub fn check(rs: &Arc<Ruleset>, reqs: &[native::RawRequest]) -> Report {
    let mut report = Report { requests: reqs.len(), ..Default::default() };
    for (n, req) in reqs.iter().enumerate() {
        let mut tx = Transaction::new(rs.clone(), format!("c{n}"));
        tx.set_time_ms(1_700_000_000_000 + n as u64 * 1000);
        tx.enable_profile();
        tx.process_connection("192.0.2.7", 40000, "127.0.0.1", 80);
        tx.process_uri(&req.uri, &req.method, &req.version);
        for (k, v) in &req.headers {
            tx.add_request_header(k, v);
        }
        let mut pictures = Vec::new();
        let mut stopped = tx.process_request_headers().is_some();
        pictures.push(tx.candidates(1));
        if !stopped {
            if tx.request_body_access() && !req.body.is_empty() {
                stopped = matches!(tx.append_request_body(&req.body), BodyAppend::Interrupt(_));
            }
            if !stopped {
                let _ = tx.process_request_body();
                pictures.push(tx.candidates(2));
            }
        }
        let Some(profile) = tx.take_profile() else { continue };
        for (i, p) in pictures.iter().enumerate() {
            report.phase[i].add(p);
            report.evaluated[i] += profile.rules.values().filter(|s| usize::from(s.phase) == i + 1).map(|s| s.evals as usize).sum::<usize>();
        }
        let index: HashMap<(u8, u64), bool> = pictures
            .iter()
            .flat_map(|p| {
                let list = rs.phases.get(usize::from(p.phase) - 1).map_or(&[][..], Vec::as_slice);
                list.iter().enumerate().filter_map(move |(i, e)| match e {
                    wafer::compile::Entry::Rule(r) => Some(((p.phase, r.id), p.may_match(i))),
                    wafer::compile::Entry::Marker(_) => None,
                })
            })
            .collect();
        for (&id, s) in &profile.rules {
            if s.matched > 0 && index.get(&(s.phase, id)) == Some(&false) {
                report.misses.push(Miss { request: n, rule: id, phase: s.phase });
            }
        }
    }
    report.misses.sort_by_key(|m| (m.request, m.phase, m.rule));
    report
}

/// The rules of phases 1 and 2 that run whatever the values (kind `Always`): `phase: id
/// operator targets` each, the cost the index cannot take away.
pub fn always(rs: &Ruleset) -> Vec<String> {
    let mut out = Vec::new();
    for phase in 0..2 {
        let quick = rs.quick.phases.get(phase);
        for (i, e) in rs.phases.get(phase).map_or(&[][..], Vec::as_slice).iter().enumerate() {
            let wafer::compile::Entry::Rule(r) = e else { continue };
            if wafer::tx::candidates::kind(r, quick.and_then(|q| q.get(i))) == wafer::tx::candidates::Kind::Always {
                let targets: Vec<String> = r.targets.iter().map(|t| format!("{}{}", if t.count { "&" } else { "" }, t.var.name())).collect();
                out.push(format!("{}: {} {}{} {}", phase + 1, r.id, if r.negated { "!" } else { "" }, r.op_name, targets.join("|")));
            }
        }
    }
    out
}

impl Report {
    /// The per-request means, one line per phase.
    pub fn lines(&self) -> Vec<String> {
        let n = self.requests.max(1) as f64;
        self.phase
            .iter()
            .zip(self.evaluated)
            .enumerate()
            .map(|(i, (p, evaluated))| {
                let per = |x: usize| x as f64 / n;
                format!(
                    "phase {}: {:.1} rules ({:.1} indexed, {:.1} TX checks, {:.1} always run); {:.1} candidates of the indexed; {:.1} evaluated by the reference; {:.1} values read, {:.1} distinct, {:.1} distinct (value, chain); {:.1} steps run, {:.1} skipped by byte class; {:.1} scans",
                    i + 1,
                    per(p.rules),
                    per(p.indexed),
                    per(p.tx_checks),
                    per(p.always),
                    per(p.candidates),
                    per(evaluated),
                    per(p.values),
                    per(p.distinct_values),
                    per(p.pairs),
                    per(p.steps_run),
                    per(p.steps_skipped),
                    per(p.scans)
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Arc<Ruleset> {
        let (_, reference) = crate::differential::pair("t", text).expect("rules compile");
        reference
    }

    fn get(uri: &str) -> native::RawRequest {
        native::parse(format!("GET {uri} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()).expect("request parses")
    }

    #[test]
    fn a_rule_whose_literal_is_absent_is_no_candidate_and_one_whose_literal_is_present_is() {
        let rs = rules("SecRuleEngine On\nSecRule ARGS \"@rx evil[0-9]+\" \"id:1,phase:1,pass,log,t:lowercase\"\nSecRule ARGS \"@rx benign\" \"id:2,phase:1,pass,log\"");
        let r = check(&rs, &[get("/x?a=EVIL42")]);
        assert!(r.misses.is_empty(), "{:?}", r.misses);
        let p = &r.phase[0];
        assert_eq!((p.rules, p.indexed, p.candidates), (2, 2, 1), "{p:?}");
        // The value is distinct once; two chains (t:lowercase, none): two pairs, two scans.
        assert_eq!((p.distinct_values, p.pairs, p.scans), (1, 2, 2), "{p:?}");
    }

    #[test]
    fn a_lowercase_step_on_a_value_without_capitals_is_skipped() {
        let rs = rules("SecRuleEngine On\nSecRule ARGS \"@rx evil\" \"id:1,phase:1,pass,log,t:lowercase\"");
        let r = check(&rs, &[get("/x?a=quiet")]);
        assert_eq!((r.phase[0].steps_run, r.phase[0].steps_skipped, r.phase[0].candidates), (0, 1, 0), "{:?}", r.phase[0]);
    }

    #[test]
    fn negated_and_tx_rules_always_run() {
        let rs = rules("SecRuleEngine On\nSecRule ARGS \"!@rx evil\" \"id:1,phase:2,pass,log\"\nSecRule TX:x \"@lt 1\" \"id:2,phase:2,pass,log\"");
        let p = &check(&rs, &[get("/x?a=1")]).phase[1];
        assert_eq!((p.indexed, p.always, p.tx_checks), (0, 1, 1), "{p:?}");
    }

    #[test]
    fn a_multimatch_rule_is_a_candidate_through_the_value_before_its_transformation() {
        // The argument "%41" (sent as %2541) decodes to "A": only multiMatch sees "%41" and matches.
        let with = rules("SecRuleEngine On\nSecRule ARGS \"@rx %41\" \"id:1,phase:1,pass,log,t:urlDecode,multiMatch\"");
        let r = check(&with, &[get("/x?a=%2541")]);
        assert!(r.misses.is_empty(), "{:?}", r.misses);
        assert_eq!(r.phase[0].candidates, 1);
        let without = rules("SecRuleEngine On\nSecRule ARGS \"@rx %41\" \"id:1,phase:1,pass,log,t:urlDecode\"");
        assert_eq!(check(&without, &[get("/x?a=%2541")]).phase[0].candidates, 0);
    }
}
