//! The phase loop: the rules of one phase in order, as ModSecurity v3 runs them (markers,
//! `skip` and `skipAfter`, rules removed by `ctl`, disruptive actions, `allow`). It knows no
//! speed mechanism: it asks the seam ([`Shortcuts`], see `seam`) whether an entry may be
//! passed and how a rule is run, and tells it where the phase stands; the reference answers
//! "look at it" and "evaluate it", and does nothing.

use super::removal::rule_removed;
use super::seam::{Pass, Ran, Shortcuts};
use super::variables::Ctx;
use super::{InterruptAction, Interruption, Transaction};
use crate::actions::Disruptive;
use crate::compile::{EngineMode, Entry, Rule, Ruleset};
use crate::operators::Expand;

/// Runs the rules of one phase. Returns the interruption decided, if any (the caller applies
/// it only when the engine is On).
pub(crate) fn run_phase<S: Shortcuts + ?Sized>(s: &S, t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption> {
    let decision = if s.phase_start(t, rs, phase) { None } else { rules(s, t, rs, phase) };
    s.phase_end(t, phase);
    decision
}

/// The phase's list from its first entry, unless the seam did the phase whole.
fn rules<S: Shortcuts + ?Sized>(s: &S, t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption> {
    let pidx = usize::from(phase - 1);
    let list = rs.phases.get(pidx)?;
    let mut i = 0;
    // Rules still to skip (`skip:n` of a rule that matched).
    let mut skip = 0u32;
    while let Some(entry) = list.get(i) {
        match s.pass(t, rs, pidx, i, entry, skip) {
            Pass::No => {}
            Pass::To(next) => {
                i = next;
                continue;
            }
            Pass::Hit(rule) => {
                (i, skip) = skip_from(rs, pidx, i, rule, list.len());
                continue;
            }
        }
        // A marker (`SecMarker`): only a place to skip to.
        let Entry::Rule(rule) = entry else {
            i += 1;
            continue;
        };
        if skip > 0 {
            skip -= 1;
            i += 1;
            continue;
        }
        if rule_removed(t, rule) {
            i += 1;
            continue;
        }
        let decision = match s.run(t, rs, rule, phase, i) {
            Ran::Evaluated(d) => {
                // The phase's memo tables passed the memory budget: no more rules (the
                // transaction answers for it, see `Transaction::run_phase`).
                if t.cache.borrow().over_budget() {
                    return None;
                }
                d
            }
            Ran::Passed(d) => d,
        };
        let Some(decision) = decision else {
            i += 1;
            continue;
        };
        match decision {
            Disruptive::Deny | Disruptive::Drop | Disruptive::Redirect(_) if t.engine == EngineMode::On || phase == 5 => {
                let action = match &decision {
                    Disruptive::Drop => InterruptAction::Drop,
                    Disruptive::Redirect(parts) => {
                        let ctx = Ctx::new(t, Some(rule));
                        InterruptAction::Redirect(String::from_utf8_lossy(&ctx.expand(parts)).into_owned())
                    }
                    _ => InterruptAction::Deny,
                };
                let status = match action {
                    InterruptAction::Redirect(_) if !(300..400).contains(&rule.status) => 302,
                    _ => rule.status,
                };
                if phase == 5 {
                    return None;
                }
                s.leave(t, rs, i);
                return Some(Interruption { status, rule_id: Some(rule.id), phase, action });
            }
            Disruptive::Allow(scope) => {
                s.leave(t, rs, i);
                t.set_allow(scope);
                return None;
            }
            _ => {}
        }
        (i, skip) = skip_from(rs, pidx, i, rule, list.len());
    }
    s.completed(t);
    None
}

/// Where phase list `pidx` goes on after `rule`, entry `i` of its `len`, matched: the entry
/// after its `skipAfter` marker, or the next entry with its `skip` count.
pub(crate) fn skip_from(rs: &Ruleset, pidx: usize, i: usize, rule: &Rule, len: usize) -> (usize, u32) {
    if rule.skip_after.is_some() {
        (rs.skip_target(pidx, i).unwrap_or(len), 0)
    } else {
        (i + 1, rule.skip)
    }
}
