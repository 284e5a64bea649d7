//! One rule with its chain, as ModSecurity v3 runs it: each link's hits update the captures
//! (`TX:0-9`), `MATCHED_VAR*` and run that link's `setvar`s; when every link matched, the
//! `ctl`s, the severity, the log line and the decision.

use super::actions::{apply_ctls, apply_setvar, tx_remove, tx_set};
use super::link::eval_link;
use super::variables::DIGITS;
use super::{log, Transaction};
use crate::actions::Disruptive;
use crate::compile::Rule;


/// `MATCHED_VAR`, `MATCHED_VAR_NAME` and `MATCHED_VARS` of the current rule.
#[derive(Debug, Default)]
pub(crate) struct Matched {
    pub var: Vec<u8>,
    pub var_name: String,
    /// `vars[..n]` are this rule's matches; slots beyond are kept for reuse.
    pub vars: Vec<(String, Vec<u8>)>,
    pub n: usize,
}

impl Matched {
    fn record(&mut self, name: &str, value: &[u8]) {
        self.var.clear();
        self.var.extend_from_slice(value);
        self.var_name.clear();
        self.var_name.push_str(name);
        if let Some((n, v)) = self.vars.get_mut(self.n) {
            n.clear();
            n.push_str(name);
            v.clear();
            v.extend_from_slice(value);
        } else {
            self.vars.push((name.to_string(), value.to_vec()));
        }
        self.n += 1;
    }

    pub fn list(&self) -> &[(String, Vec<u8>)] {
        self.vars.get(..self.n).unwrap_or_default()
    }

    /// Emptied for the next transaction, keeping its buffers (unless they grew large).
    pub(crate) fn recycled(mut self) -> Matched {
        let small = self.vars.len() <= 64 && self.vars.iter().all(|(n, v)| n.capacity() <= 256 && v.capacity() <= 4096);
        if !small || self.var.capacity() > 4096 || self.var_name.capacity() > 256 {
            return Matched::default();
        }
        self.var.clear();
        self.var_name.clear();
        self.n = 0;
        self
    }
}

/// `TX:0` .. `TX:9`, the capture slots.
const CAPTURE_KEYS: [&str; 10] = DIGITS;

/// Runs a rule (with its chain). Returns the decision if it matched.
///
/// As in ModSecurity v3, each matched value of a link immediately updates the
/// captures (`TX:0-9`), `MATCHED_VAR*` and runs that link's `setvar`s (so a
/// chain head's `setvar` is visible to the next link). `ctl`, `msg`/`logdata`
/// expansion (with the last link's captures, as the CRS tests expect), logging
/// and the disruptive action wait for the whole chain.
pub(crate) fn eval_rule(t: &mut Transaction, rule: &Rule, phase: u8) -> Option<Disruptive> {
    if t.profile.is_none() {
        return eval_rule_inner(t, rule, phase);
    }
    let before = (t.probe.values.get(), t.probe.skipped.get(), t.probe.ran.get(), t.probe.unshared.get());
    let clock = t.profile.as_ref().and_then(|p| p.clock);
    let start = clock.map_or(0, |c| c());
    let decision = eval_rule_inner(t, rule, phase);
    let nanos = clock.map_or(0, |c| c().saturating_sub(start));
    let after = (t.probe.values.get(), t.probe.skipped.get(), t.probe.ran.get(), t.probe.unshared.get());
    if let Some(p) = t.profile.as_mut() {
        p.rules.entry(rule.id).or_default().add(&super::profile::RuleStat {
            phase,
            evals: 1,
            values: after.0.wrapping_sub(before.0),
            skipped: after.1.wrapping_sub(before.1),
            ran: after.2.wrapping_sub(before.2),
            matched: u64::from(decision.is_some()),
            unshared: after.3.wrapping_sub(before.3),
            nanos,
        });
    }
    decision
}

pub(crate) fn eval_rule_inner(t: &mut Transaction, rule: &Rule, phase: u8) -> Option<Disruptive> {
    t.matched.n = 0;
    let mut pool = std::mem::take(&mut t.hit_pool);
    let mut link = Some(rule);
    t.head_hits = false;
    while let Some(l) = link {
        eval_link(t, l, rule, &mut pool);
        if pool.n == 0 {
            t.hit_pool = pool;
            return None;
        }
        t.head_hits = true;
        let last = pool.n.saturating_sub(1);
        for (k, h) in pool.hits.iter().take(pool.n).enumerate() {
            // Only this link's setvars could read a hit's captures before the next hit
            // replaces them: without setvars, the last hit's captures are the ones kept.
            if h.has_captures && (k == last || !l.setvars.is_empty()) {
                for (i, key) in CAPTURE_KEYS.iter().enumerate() {
                    match h.captures.get(i) {
                        Some(v) => tx_set(t, key, v),
                        None => tx_remove(t, key),
                    }
                }
            }
            t.matched.record(&h.name, &h.value);
            for sv in &l.setvars {
                apply_setvar(t, rule, sv);
            }
        }
        link = l.chain.as_deref();
    }
    t.hit_pool = pool;
    // Every link matched (a link without hits returned above).
    apply_ctls(t, rule);
    if let Some(sev) = rule.severity {
        t.highest_severity = t.highest_severity.min(sev);
    }
    if rule.log {
        let line = log::rule_line(t, rule, phase);
        t.logs.push(line);
    }
    Some(rule.disruptive.clone())
}
