//! The fast speed's mechanisms behind the seam (`seam::Shortcuts`): what a transaction takes
//! from the ones before it on the same thread and leaves to the next (spare buffers, the
//! memo shared by the rule set's transactions, the replay of the last request's trace per
//! target, `replay`), the per-rule quick records that pass a rule without reading it
//! (`compile::quick`), and phase 1's request-independent prefix applied at once
//! ([`pre_apply`]).

use std::sync::Arc;

use super::actions::{apply_ctls, digit_bit, has_ctls, note_write, tx_clear, tx_set, undo_note, ALL_DIGITS};
use super::cache::Cache;
use super::link::{multi_hits, slot_cannot_match, stable_hit_with};
use super::phase;
use super::removal::rule_removed;
use super::replay::{self, Replay};
use super::request::Request;
use super::rule::{eval_rule, eval_rule_inner};
use super::seam::{Pass, Ran, Shortcuts, Start};
use super::cache::Val;
use super::variables::Ctx;
use super::{Interruption, Removals, Spare, Transaction};
use crate::actions::Disruptive;
use crate::compile::inputs::Inputs;
use crate::compile::quick::Quick;
use crate::compile::{Entry, Rule, Ruleset};
use crate::operators::{to_int, Captures};
use crate::vars::Var;

/// The fast speed (the default).
pub(crate) struct Fast;

impl Shortcuts for Fast {
    #[inline]
    fn start(&self, rs: &Arc<Ruleset>) -> Start {
        let memo = super::memo_for(rs.uid, rs.hash_keys());
        let trace = memo.try_borrow().ok().and_then(|m| m.traces.first().cloned());
        Start {
            spare: super::spare(rs.rule_count(), rs.uid),
            request: super::take_spare(&super::SPARE_REQUEST),
            cache: super::spare_cache(super::REQUEST_SIDE, rs.rule_count(), rs.settings.memory_budget),
            replay: Replay::new(trace, rs.quick.rules),
            memo,
        }
    }

    fn end(&self, t: &mut Transaction, cache: Box<Cache>, req: Box<Request>) {
        super::keep_cache(t.cache_side, cache);
        // The request becomes the memo's trace (see `replay`), or is recycled. The trace it
        // replaces recycles its own when the last transaction following it ends.
        let (spare, replaced) = match t.memo.try_borrow_mut() {
            Ok(mut memo) => {
                // It takes the place of the trace of its target, else of the oldest when
                // there are TRACES, and comes first.
                let traces = &mut memo.traces;
                let at = traces.iter().position(|tr| tr.same_target(&req.method, &req.uri_raw));
                let mut slot = match at {
                    Some(i) => Some(traces.remove(i)),
                    None if traces.len() >= replay::TRACES => traces.pop(),
                    None => None,
                };
                let published = t.replay.publish(req, &mut slot, &t.rs.quick);
                if let Some(tr) = slot {
                    traces.insert(0, tr);
                }
                published
            }
            Err(_) => (Some(req), None),
        };
        drop(replaced);
        t.replay.recycle();
        if let Some(req) = spare {
            super::recycle_request(req);
        }
        let id = std::mem::take(&mut t.unique_id);
        if id.capacity() <= 256 {
            super::keep_spare(&super::SPARE_ID, id);
        }
        let values = t.values_scratch.get_mut();
        if t.tx.capacity() > 1024 || values.capacity() > 4096 || !t.hit_pool.small() {
            return;
        }
        // The rule set's initial TX variables stay in the map for its next transaction when
        // this one's changes can be undone (the CRS: 44 variables, ~13 changes per GET), or
        // when no phase 1 took the map it was given.
        let restored = tx_restore(t);
        let mut tx = std::mem::take(&mut t.tx);
        let unused = if restored { None } else { t.tx_kept.take() };
        let kept = restored || unused.is_some();
        if !restored {
            tx.drain_into(&mut t.tx_free, super::recycle_tx_entry);
        }
        if let Some(init) = unused {
            tx = init;
        }
        let values = t.values_scratch.get_mut();
        let mut spare = Spare {
            tx,
            values: std::mem::take(values),
            hits: std::mem::take(&mut t.hit_pool),
            tx_free: std::mem::take(&mut t.tx_free),
            tx_init: kept.then_some(t.rs.uid),
            tx_undo: std::mem::take(&mut t.tx_undo),
            matched: std::mem::take(&mut t.matched).recycled(),
            removals: Removals {
                affected: std::mem::take(&mut t.affected),
                ids: std::mem::take(&mut t.removed_ids),
                tags: std::mem::take(&mut t.removed_tags),
                targets: std::mem::take(&mut t.removed_targets),
            },
        };
        spare.values.clear();
        let r = &mut spare.removals;
        r.affected.clear();
        r.ids.clear();
        r.tags.clear();
        r.targets.clear();
        if [r.affected.capacity(), r.ids.capacity(), r.tags.capacity(), r.targets.capacity()].iter().any(|&c| c > super::REMOVALS_KEEP) {
            spare.removals = Removals::default();
        }
        super::keep_spare(&super::SPARE, spare);
    }

    fn response_cache(&self, limit: usize) -> Box<Cache> {
        super::spare_cache(super::RESPONSE_SIDE, 0, limit)
    }

    fn request_cache_done(&self, cache: Box<Cache>) {
        super::keep_cache(super::REQUEST_SIDE, cache);
    }

    fn run_phase(&self, t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption> {
        phase::run_phase(self, t, rs, phase)
    }

    #[inline]
    fn empty_phase(&self, t: &mut Transaction, phase: u8) {
        t.replay.empty_phase(phase);
    }

    fn phase_start(&self, t: &mut Transaction, rs: &Ruleset, phase: u8) -> bool {
        if phase == 1 {
            let rs = t.rs.clone();
            pre_apply(t, &rs);
        }
        t.replay.begin(phase, &t.req, &rs.quick.header_keys, t.profile.is_none());
        // Walked as the trace walked it, when its rules tested by value have no hits again.
        let Some(list) = rs.phases.get(usize::from(phase - 1)) else { return false };
        let Some(run) = t.replay.run(phase) else { return false };
        if run.probes.iter().any(|&e| probe_hits(t, rs, list, e)) {
            return false;
        }
        let mut ctls = run.ctls.iter().peekable();
        for (j, (_, e)) in run.effects.iter().enumerate() {
            redo(t, e);
            while let Some(&(_, entry)) = ctls.next_if(|c| c.0 as usize == j) {
                if let Some(Entry::Rule(rule)) = list.get(entry as usize) {
                    apply_ctls(t, rule);
                }
            }
        }
        if !(run.probes.is_empty() && run.effects.is_empty()) {
            t.matched.n = 0;
        }
        t.replay.adopt(phase, run);
        true
    }

    // Inlined into the phase loop (`phase::run_phase`, one copy per speed).
    #[inline(always)]
    fn pass<'r>(&self, t: &mut Transaction, rs: &'r Ruleset, pidx: usize, i: usize, entry: &'r Entry, skip: u32) -> Pass<'r> {
        let q = rs.quick.phases.get(pidx).and_then(|q| q.get(i));
        // Applied with the TX phase 1 started from (also when profiling: a second run would
        // add to the counters again).
        if i < t.pre_upto && matches!(q, Some(Quick::Pre)) {
            return Pass::To(i + 1);
        }
        // Not under a pending `skip`.
        if skip != 0 {
            return Pass::No;
        }
        // No hits in the last transaction, on the same data: none now (see `replay`). First,
        // over a run of such entries at once, as it needs neither the rules nor their quick
        // records' state; not a paranoia-level skip (never evaluated, never in the trace).
        if t.replay.active {
            let to = t.replay.scan(i, pidx);
            if to > i {
                t.replay.passed += (to - i) as u64;
                return Pass::To(to);
            }
        }
        // A paranoia-level check: its skip when it holds, without evaluating it. It holds when
        // it held in the trace (it reads only TX, the trace's at this point: see `replay`),
        // else when its quick record says so and it is not removed.
        if let (None, Some(q @ Quick::TxSkip { .. }), Entry::Rule(rule)) = (&t.profile, q, entry) {
            if t.replay.traced_hit(rule.index) || (!cannot_match(t, rs, q, rule) && !rule_removed(t, rule)) {
                // A hit (the replay passes it only where the trace had none).
                t.replay.record(rule.index, 0, true, false);
                return Pass::Hit(rule);
            }
            return Pass::To(i + 1);
        }
        // From the rule's quick record first: most rules are passed without reading them.
        // (Not when profiling: the profile times each rule's whole evaluation.)
        let gone = match (q, entry) {
            (Some(q), Entry::Rule(rule)) if t.profile.is_none() => cannot_match(t, rs, q, rule),
            _ => false,
        };
        if gone {
            // Decided on data that may have changed (see `replay::Run`); no hits, where the
            // trace may have had some (its effects are then missing: the state departs).
            t.replay.plain = false;
            if let Entry::Rule(rule) = entry {
                let empty = t.replay.traced_effect(rule.index).is_some_and(|e| e.is_empty());
                t.replay.record(rule.index, 0, false, empty);
            }
            return Pass::To(i + 1);
        }
        Pass::No
    }

    // Inlined into the phase loop (`phase::run_phase`, one copy per speed).
    #[inline(always)]
    fn run(&self, t: &mut Transaction, rs: &Ruleset, rule: &Rule, phase: u8, i: usize) -> Ran {
        let inputs = rs.quick.inputs.get(rule.index as usize).copied().unwrap_or(Inputs { head: u64::MAX, all: u64::MAX, by_value: false, tx_writes: false, quiet: false });
        // Reading all request headers when only some header values changed: tested on those.
        if t.replay.by_values(rule.index, &inputs).is_some_and(|at| !header_hits(t, rule, at)) {
            t.replay.probed(i);
            t.replay.passed += 1;
            t.matched.n = 0;
            return Ran::Passed(None);
        }
        if let Some(e) = t.replay.effect(rule.index, inputs.all) {
            // What it did in the last transaction, on the same data and state: done again.
            redo(t, &e);
            t.matched.n = 0;
            t.replay.passed += 1;
            t.replay.record(rule.index, inputs.all, true, false);
            let matched = e.matched;
            if matched {
                if has_ctls(rule) {
                    t.replay.ctls_at(i);
                }
                apply_ctls(t, rule);
            }
            t.replay.keep_effect(rule.index, e);
            return Ran::Passed(matched.then(|| rule.disruptive.clone()));
        }
        // A rule whose only effect may be on TX: its writes are noted, to be done again,
        // and compared with the trace's where what it reads changed.
        t.replay.plain = false;
        let traced = t.replay.traced_effect(rule.index);
        if inputs.tx_writes && t.replay.worth_keeping() {
            t.tx_written = Some(std::mem::take(&mut t.replay.spare_written));
        }
        let before = t.replay.traced_hit(rule.index);
        let decision = eval_rule(t, rule, phase);
        // Over the memory budget the phase stops here (see `phase::run_phase`): nothing kept.
        if t.cache.borrow().over_budget() {
            return Ran::Evaluated(decision);
        }
        // Without hits here or there, the empty effect (see `Replay::record`).
        let mut as_traced = !t.head_hits && (!before || traced.as_ref().is_some_and(|p| p.is_empty()));
        if let Some(mut written) = t.tx_written.take() {
            if t.head_hits && (decision.is_none() || inputs.quiet) {
                let e = effect_of(t, &written, decision.is_some());
                as_traced = if before { traced.is_some_and(|p| p.same_as(&e)) } else { e.is_empty() };
                t.replay.keep_effect(rule.index, std::rc::Rc::new(e));
            }
            written.clear();
            t.replay.spare_written = written;
        }
        t.replay.record(rule.index, inputs.all, t.head_hits, as_traced);
        Ran::Evaluated(decision)
    }

    #[inline]
    fn leave(&self, t: &mut Transaction, rs: &Ruleset, i: usize) {
        if i < t.pre_upto {
            pre_undo(t, rs, i);
        }
    }

    #[inline]
    fn completed(&self, t: &mut Transaction) {
        t.replay.completed = true;
    }

    #[inline]
    fn phase_end(&self, t: &mut Transaction, phase: u8) {
        t.replay.end(phase);
        t.pre_upto = 0;
    }
}

/// What a rule that wrote the TX keys in `written` (each after its length) did: their values now.
fn effect_of(t: &Transaction, written: &[u8], matched: bool) -> replay::Effect {
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut rest = written;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let n = u32::from_le_bytes(*len) as usize;
        let Some((key, tail)) = tail.split_at_checked(n) else { break };
        keys.push(key);
        rest = tail;
    }
    keys.sort_unstable();
    keys.dedup();
    // The keys were `&str`s: each is UTF-8 again.
    let writes = keys.into_iter().map(|k| String::from_utf8_lossy(k).into_owned()).map(|k| {
        let v = t.tx.get(&k).cloned();
        (k, v, Default::default())
    }).collect();
    replay::Effect { writes, matched }
}

/// Whether a rule's quick record shows that it cannot match now (see `compile::quick`).
fn cannot_match(t: &Transaction, rs: &Ruleset, q: &Quick, rule: &Rule) -> bool {
    match *q {
        Quick::Eval | Quick::Pre => false,
        Quick::TxNum { key, id, cmp, n } | Quick::TxSkip { key, id, cmp, n } => !tx_num(t, rs, key, id).is_some_and(|v| cmp.holds(v, n)),
        Quick::Group { slot, req, bit } => {
            // Built in this phase by an earlier rule (slots are cleared with every phase and ctl).
            let cache = t.cache.borrow();
            let Some(Some(g)) = cache.slots.get(slot as usize) else {
                // Not built: decided from its values without building it; not while the
                // replay follows a trace (the rule is then evaluated, or tested on its changed
                // values alone, so that the phase's walk can serve the next transaction whole:
                // see `replay::Run`).
                drop(cache);
                return !t.replay.active && slot_cannot_match(t, rule, slot, req);
            };
            // The union exists once a rule evaluated the group (groups of UNION_MIN values or more).
            g.len() == 0 || bit.is_some_and(|b| g.all_failed(b)) || req.is_some_and(|r| g.union.get().is_some_and(|u| !u.has(r)))
        }
    }
}

/// The number in `TX:key` (None: absent), from the transaction's cache while TX is unchanged
/// (the CRS checks its paranoia levels ~150 times per request).
fn tx_num(t: &Transaction, rs: &Ruleset, key: (u32, u32), id: u8) -> Option<i64> {
    let cell = t.tx_nums.get(usize::from(id));
    if let Some((gen, v)) = cell.map(std::cell::Cell::get) {
        if gen == t.tx_gen {
            return v;
        }
    }
    let v = t.tx.get(rs.quick.key(key)).map(|v| to_int(v));
    if let Some(c) = cell {
        c.set((t.tx_gen, v));
    }
    v
}

/// Starts phase 1 from the TX its request-independent prefix leaves (see
/// [`Quick::Pre`]): computed by the first transaction of the rule set, then copied. Only from
/// an empty TX (nothing wrote TX before phase 1), else the prefix runs as usual.
pub(crate) fn pre_apply(t: &mut Transaction, rs: &std::sync::Arc<Ruleset>) {
    if rs.quick.pre_end == 0 || !t.tx.is_empty() {
        return;
    }
    let init = rs.init.get_or_init(|| prefix_tx(rs));
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.pre_upto = init.upto;
    match t.tx_kept.take() {
        // A map a finished transaction left at these values (see `Transaction::drop`).
        Some(kept) => {
            t.tx = kept;
            t.tx_digits = ALL_DIGITS;
        }
        None => {
            // Into the empty map: each key is new (the prefix's keys are distinct), one lookup each.
            t.tx.reserve(init.tx.len());
            for (k, v) in &init.tx {
                t.tx_digits |= digit_bit(k);
                t.tx.insert_base(k, v, &mut t.tx_free);
            }
        }
    }
    t.tx_base = Some(rs.uid);
    t.tx_undo_n = 0;
}

/// Undoes the transaction's TX changes, last first: the map then holds the rule set's initial
/// variables again, and its next transaction takes it instead of inserting them one by one
/// (`pre_apply`). False when it cannot (no initial values, or changes not all noted).
pub(crate) fn tx_restore(t: &mut Transaction) -> bool {
    let n = std::mem::take(&mut t.tx_undo_n);
    let mut undo = std::mem::take(&mut t.tx_undo);
    let rs = t.rs.clone();
    let restored = match rs.init.get().filter(|_| t.tx_base == Some(rs.uid)) {
        Some(init) => {
            for u in undo.iter().take(n).rev() {
                t.tx.restore_base(&u.key, &u.old, &mut t.tx_free);
            }
            t.tx.end(&mut t.tx_free, super::recycle_tx_entry);
            t.tx.len() == init.tx.len()
        }
        None => false,
    };
    // The buffers are kept for the next transactions: not a large value's, nor more than
    // `TX_UNDO_KEEP` of them (with `tx_free`, a spare keeps at most ~1.4 MB).
    for u in undo.iter_mut().take(n) {
        u.bound();
    }
    undo.truncate(super::TX_UNDO_KEEP);
    t.tx_undo = undo;
    restored
}

/// Runs phase 1's `Quick::Pre` rules on an empty request, in order, up to the first that
/// would do more than change TX (deny, log, severity) if it matched: that one matches for
/// every request, so it and the rest run as usual. The others' outcome is the same for every
/// request (they read only TX, which only they have written so far).
fn prefix_tx(rs: &std::sync::Arc<Ruleset>) -> crate::compile::Init {
    let mut t = Transaction::new(rs.clone(), String::new());
    let list = rs.phases.first().map_or(&[][..], Vec::as_slice);
    let quick = rs.quick.phases.first().map_or(&[][..], Vec::as_slice);
    let mut upto = 0;
    // (entry, TX before it) for the rules that may interrupt; TX before the rule that ended
    // the prefix by matching.
    let mut interrupts = Vec::new();
    let mut ended = None;
    let copy = |tx: &super::TxMap| tx.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>();
    while upto < rs.quick.pre_end {
        if let (Some(Entry::Rule(r)), Some(q)) = (list.get(upto), quick.get(upto)) {
            if !matches!(q, Quick::Pre) {
                if !matches!(r.disruptive, Disruptive::Pass) {
                    interrupts.push((upto, copy(&t.tx)));
                }
                upto += 1;
                continue;
            }
            let risky = !matches!(r.disruptive, Disruptive::Pass) || r.log || r.severity.is_some();
            let saved = risky.then(|| copy(&t.tx));
            if eval_rule_inner(&mut t, r, 1).is_some() && risky {
                ended = saved;
                break;
            }
        }
        upto += 1;
    }
    crate::compile::Init { upto, tx: ended.unwrap_or_else(|| copy(&t.tx)), before: interrupts }
}

/// Phase 1 stopped at entry `i` of its request-independent prefix: TX as the `Pre` rules
/// before `i` alone would have left it (see [`pre_apply`]).
fn pre_undo(t: &mut Transaction, rs: &Ruleset, i: usize) {
    let Some((_, tx)) = rs.init.get().and_then(|init| init.before.iter().find(|(at, _)| *at == i)) else { return };
    tx_clear(t);
    for (k, v) in tx {
        tx_set(t, k, v);
    }
}

/// The TX writes of a rule's effect (see `replay::Effect`), done again.
fn redo(t: &mut Transaction, e: &replay::Effect) {
    for (key, v, loc) in &e.writes {
        note_write(t, key);
        t.tx_gen = t.tx_gen.wrapping_add(1);
        let digit = digit_bit(key);
        let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
        match v {
            Some(v) => {
                t.tx_digits |= digit;
                t.tx.set_at(loc, key, v, &mut t.tx_free, |old| undo_note(undo, n, base, key, old));
            }
            // As `tx_remove`: a capture slot known absent needs nothing.
            None if digit != 0 && t.tx_digits & digit == 0 => {}
            None => {
                t.tx_digits &= !digit;
                t.tx.remove_at(loc, key, |old| undo_note(undo, n, base, key, old));
            }
        }
    }
}

/// Whether the rule of entry `e` of `list`, tested by value in the trace's walk of this phase,
/// may have hits now (see `replay::Run`).
fn probe_hits(t: &Transaction, rs: &Ruleset, list: &[Entry], e: u32) -> bool {
    let Some(Entry::Rule(rule)) = list.get(e as usize) else { return true };
    let Some(inputs) = rs.quick.inputs.get(rule.index as usize) else { return true };
    t.replay.by_values(rule.index, inputs).is_none_or(|at| header_hits(t, rule, at))
}

/// Whether the first link of `rule` has a hit on one of the request header values at
/// positions `at` (through its `REQUEST_HEADERS` targets; runtime target removals are not
/// applied, so a removed value may answer true: the rule is then evaluated as usual).
fn header_hits(t: &Transaction, rule: &Rule, at: &[replay::ChangedHeader]) -> bool {
    let ctx = Ctx::new(t, Some(rule));
    let mut caps = Captures::default();
    at.iter().any(|&(i, bytes)| {
        let Some((name, value)) = t.req.headers.get(i) else { return true };
        let selected = rule.targets.iter().any(|tg| tg.var == Var::RequestHeaders && !tg.count && tg.sel.matches(name) && !tg.excluded(name));
        selected
            && if rule.multi_match {
                multi_hits(t, rule, &ctx, Val::B(value), true, &mut caps, |_, _| true)
            } else {
                stable_hit_with(t, rule, &ctx, Val::B(value), bytes, &mut caps).1
            }
    })
}
