//! The reference speed behind the seam (`seam::Shortcuts`): no mechanism. The phase loop
//! evaluates every rule it reaches; a transaction starts from new buffers, its own memo and
//! memo tables, no trace, and leaves nothing to the next.

use std::sync::Arc;

use super::cache::{Cache, Memo};
use super::phase;
use super::replay::Replay;
use super::request::Request;
use super::rule::eval_rule;
use super::seam::{Pass, Ran, Shortcuts, Start};
use super::{Interruption, Transaction};
use crate::compile::{Entry, Rule, Ruleset};

/// No mechanism: every rule a phase reaches is evaluated, nothing is kept from one
/// transaction to the next (the memo tables live and die with their transaction).
pub(crate) struct Reference;

impl Shortcuts for Reference {
    #[inline]
    fn start(&self, rs: &Arc<Ruleset>) -> Start {
        Start {
            spare: super::fresh_spare(rs.rule_count()),
            memo: std::rc::Rc::new(std::cell::RefCell::new(Memo::new(rs.hash_keys()))),
            request: None,
            cache: super::fresh_cache(rs.rule_count(), rs.settings.memory_budget),
            replay: Replay::default(),
        }
    }

    fn end(&self, _t: &mut Transaction, mut cache: Box<Cache>, _req: Box<Request>) {
        // Emptied first: the tables' shared entries refer to each other, and what they hold
        // is charged to the budget.
        cache.clear();
    }

    fn response_cache(&self, limit: usize) -> Box<Cache> {
        super::fresh_cache(0, limit)
    }

    fn request_cache_done(&self, mut cache: Box<Cache>) {
        cache.clear();
    }

    fn run_phase(&self, t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption> {
        phase::run_phase(self, t, rs, phase)
    }

    #[inline]
    fn empty_phase(&self, _t: &mut Transaction, _phase: u8) {}

    #[inline]
    fn phase_start(&self, _t: &mut Transaction, _rs: &Ruleset, _phase: u8) -> bool {
        false
    }

    // Inlined into the phase loop (`phase::run_phase`, one copy per speed).
    #[inline(always)]
    fn pass<'r>(&self, _t: &mut Transaction, _rs: &'r Ruleset, _pidx: usize, _i: usize, _entry: &'r Entry, _skip: u32) -> Pass<'r> {
        Pass::No
    }

    // Inlined into the phase loop (`phase::run_phase`, one copy per speed).
    #[inline(always)]
    fn run(&self, t: &mut Transaction, _rs: &Ruleset, rule: &Rule, phase: u8, _i: usize) -> Ran {
        Ran::Evaluated(eval_rule(t, rule, phase))
    }

    #[inline]
    fn leave(&self, _t: &mut Transaction, _rs: &Ruleset, _i: usize) {}

    #[inline]
    fn completed(&self, _t: &mut Transaction) {}

    #[inline]
    fn phase_end(&self, _t: &mut Transaction, _phase: u8) {}
}
