//! The one seam between the transaction's semantics and the speed mechanisms.
//!
//! The semantics (the phase loop `phase`, a rule `rule`, its actions `actions`, the variables
//! `variables`) call [`Shortcuts`] at a few points: where a transaction starts and ends, where
//! a phase starts and ends, whether the loop may pass an entry without evaluating it, and how
//! a rule it reached is run. `reference::Reference` (the rule set's `speed` `reference`)
//! answers "look at it" and "evaluate it" and keeps nothing; `fast::Fast` (the default)
//! answers with the replay of the last request's trace, the per-rule quick records, phase 1's
//! prefix applied at once and the spares kept across transactions. `Transaction::new` chooses
//! one, the only place the rule set's speed is read.

use std::sync::Arc;

use super::cache::Cache;
use super::replay::Replay;
use super::request::Request;
use super::{Interruption, SharedMemo, Spare, Transaction};
use crate::compile::{Entry, Rule, Ruleset};

/// What a transaction starts with.
pub(crate) struct Start {
    pub spare: Spare,
    pub memo: SharedMemo,
    /// An emptied request of an ended transaction (None: a new one).
    pub request: Option<Box<Request>>,
    /// The memo tables of the request phases.
    pub cache: Box<Cache>,
    pub replay: Replay,
}

/// The seam's answer for the entry the phase loop reached.
pub(crate) enum Pass<'r> {
    /// Look at it: the loop decides.
    No,
    /// The entries from this one up to this index (excluded) have no hits now: passed.
    To(usize),
    /// The entry is this rule, which matches now and does nothing but skip (`skip`,
    /// `skipAfter`: the paranoia-level checks).
    Hit(&'r Rule),
}

/// What became of a rule the phase loop gave to [`Shortcuts::run`]: its decision when it
/// matched.
pub(crate) enum Ran {
    /// Evaluated (the loop then checks the memory budget).
    Evaluated(Option<crate::actions::Disruptive>),
    /// Not evaluated: what it did in an earlier transaction, on the same data, done again.
    Passed(Option<crate::actions::Disruptive>),
}

/// The speed mechanisms, as the semantics see them (see the module's documentation).
pub(crate) trait Shortcuts {
    /// Transaction start: its buffers, memo, memo tables and replay.
    fn start(&self, rs: &Arc<Ruleset>) -> Start;

    /// Transaction end: what it leaves (its memo tables and request, taken from it already).
    fn end(&self, t: &mut Transaction, cache: Box<Cache>, req: Box<Request>);

    /// The memo tables of the response phases, for a rule set with budget `limit`.
    fn response_cache(&self, limit: usize) -> Box<Cache>;

    /// The request phases' memo tables, done with after phase 2.
    fn request_cache_done(&self, cache: Box<Cache>);

    /// Runs phase `phase` (`phase::run_phase` with these shortcuts).
    fn run_phase(&self, t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption>;

    /// Phase `phase` has no rules.
    fn empty_phase(&self, t: &mut Transaction, phase: u8);

    /// Phase `phase` starts. True: it was done whole, no entry is to be looked at.
    fn phase_start(&self, t: &mut Transaction, rs: &Ruleset, phase: u8) -> bool;

    /// May `entry`, number `i` of phase list `pidx`, be passed without evaluating it (with
    /// `skip` rules still to skip)?
    fn pass<'r>(&self, t: &mut Transaction, rs: &'r Ruleset, pidx: usize, i: usize, entry: &'r Entry, skip: u32) -> Pass<'r>;

    /// Runs `rule`, entry `i`, which the loop reached (not skipped, not removed).
    fn run(&self, t: &mut Transaction, rs: &Ruleset, rule: &Rule, phase: u8, i: usize) -> Ran;

    /// The phase stops at entry `i` (an interruption or `allow`).
    fn leave(&self, t: &mut Transaction, rs: &Ruleset, i: usize);

    /// The loop reached the end of the phase's list.
    fn completed(&self, t: &mut Transaction);

    /// Phase `phase` ended (however it ended).
    fn phase_end(&self, t: &mut Transaction, phase: u8);
}
