//! One chain link on its target values: the values collected (shared by the rules with the
//! same targets in a phase, as a group of the memo tables), transformed and tested by the
//! operator, with the prefilter's scans and what the memo tables know of each value
//! (`cache`: per transaction, and across transactions in the fast speed).

use std::borrow::Cow;

use super::cache::{byte_set, same_bytes, untouched, write_name, Group, RawItem, Scan, Val, KNOWN_MIN, UNION_MIN};
use super::removal::affected;
use super::variables::{collect, Ctx, VName, Value};
use super::Transaction;
use crate::compile::prefilter::{Requirement, Satisfied};
use crate::compile::Rule;
use crate::operators::{Captures, Operator};
use crate::vars::{Source, Target};

/// Matches of one chain link, in reusable buffers (no allocation per match
/// once warm).
#[derive(Default)]
pub(crate) struct HitPool {
    pub(crate) hits: Vec<Hit>,
    pub(crate) n: usize,
}

impl HitPool {
    /// Few hits, none large: worth keeping for the next transaction.
    pub(crate) fn small(&self) -> bool {
        self.hits.len() <= 256 && self.hits.iter().all(|h| h.value.capacity() <= 4096 && h.captures.len() <= 10)
    }

    fn push(&mut self, name: &dyn Fn(&mut String), value: &[u8], caps: Option<&[Vec<u8>]>) {
        if self.n == self.hits.len() {
            self.hits.push(Hit::default());
        }
        if let Some(h) = self.hits.get_mut(self.n) {
            h.name.clear();
            name(&mut h.name);
            h.value.clear();
            h.value.extend_from_slice(value);
            h.has_captures = caps.is_some();
            match caps {
                Some(c) => {
                    // Into the buffers of the hit this slot held before (no allocation for a
                    // rule that captures on every request, as 920450 does per header).
                    h.captures.truncate(c.len());
                    for (i, src) in c.iter().enumerate() {
                        match h.captures.get_mut(i) {
                            Some(dst) => {
                                dst.clear();
                                dst.extend_from_slice(src);
                            }
                            None => h.captures.push(src.clone()),
                        }
                    }
                }
                None => h.captures.clear(),
            }
        }
        self.n += 1;
    }
}

/// Counters of the rule being evaluated, read by the profiler around each rule.
#[derive(Default)]
pub(crate) struct Probe {
    pub values: std::cell::Cell<u64>,
    pub skipped: std::cell::Cell<u64>,
    pub ran: std::cell::Cell<u64>,
    /// Links evaluated on their own value list (not a shared group).
    pub unshared: std::cell::Cell<u64>,
}

fn bump(c: &std::cell::Cell<u64>) {
    c.set(c.get().wrapping_add(1));
}

/// What one matched value recorded.
#[derive(Default)]
pub(crate) struct Hit {
    pub(crate) name: String,
    pub(crate) value: Vec<u8>,
    pub(crate) has_captures: bool,
    pub(crate) captures: Vec<Vec<u8>>,
}

/// Runs the operator of `link` on one (transformed) value, using the
/// prefilter and the libinjection memo when the value is stable.
fn op_matches(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, v: &Val<'_>, stable: bool, caps: &mut Captures, prefilter: bool) -> bool {
    caps.0.clear();
    if let (true, Some(req)) = (prefilter, &link.prefilter) {
        let possible = if stable {
            t.cache.borrow_mut().scan(v, &t.rs.prefilter).satisfies(req)
        } else {
            Scan::new(v.bytes(), &t.rs.prefilter).satisfies(req)
        };
        if !possible {
            bump(&t.probe.skipped);
            return link.negated;
        }
    }
    bump(&t.probe.ran);
    let m = match (&link.operator, stable) {
        (Operator::DetectSqli, true) => match t.cache.borrow_mut().sqli(v) {
            Some(fp) => {
                if link.capture {
                    caps.0 = vec![fp.as_bytes().to_vec()];
                }
                true
            }
            None => false,
        },
        (Operator::DetectXss, true) => t.cache.borrow_mut().xss(v),
        _ => link.operator.eval(v.bytes(), ctx, link.capture, caps),
    };
    m != link.negated
}

/// Applies one transformation (memoized for stable values). The flag says
/// whether the value changed.
fn step<'a>(t: &Transaction, stable: bool, cur: Val<'a>, tf: crate::transforms::Transform) -> (Val<'a>, bool) {
    if stable {
        let before = cur.bytes().as_ptr();
        let next = t.cache.borrow_mut().apply(cur, tf);
        let changed = next.bytes().as_ptr() != before;
        (next, changed)
    } else {
        match tf.apply(cur.bytes()) {
            Cow::Borrowed(_) => (cur, false),
            Cow::Owned(o) => (Val::R(std::rc::Rc::from(o)), true),
        }
    }
}

/// Which runtime target removals (ctl:ruleRemoveTarget*) concern this rule, one bit each:
/// rules with the same ones share a list (e.g. all 941xxx after 941010). None past 32.
fn removal_mask(t: &Transaction, head: &Rule) -> Option<u32> {
    if !affected(t, head.index) {
        return Some(0);
    }
    let mut mask = 0u32;
    for (i, r) in t.removed_targets.iter().enumerate() {
        if r.applies_to(head) {
            if i >= 32 {
                return None;
            }
            mask |= 1 << i;
        }
    }
    Some(mask)
}

/// The prepared values of a link whose targets are phase-stable: built by the
/// first rule with these targets and chain in this phase, reused by the rest.
/// None when this link cannot use the shared list.
fn group(t: &Transaction, link: &Rule, head: &Rule) -> Option<std::rc::Rc<Group>> {
    let sig = link.target_sig?;
    let mask = removal_mask(t, head)?;
    let sig = sig.wrapping_mul(0x9e37_79b9) ^ mask;
    // A multiMatch group holds every changed intermediate value, not only the final ones.
    let key = (sig, link.chain_id ^ if link.multi_match { 0x8000_0000 } else { 0 });
    // Without removals the group has a slot of its own (the same key, numbered at load time).
    let slot = link.group_slot.filter(|_| mask == 0).map(|s| s as usize);
    let found = match slot {
        Some(s) => t.cache.borrow().slots.get(s).cloned().flatten(),
        None => t.cache.borrow().groups.get(&key).cloned(),
    };
    if let Some(g) = found {
        let mut cache = t.cache.borrow_mut();
        cache.stats.groups_reused += 1;
        if let Some(s) = cache.group_stats.as_mut().and_then(|m| m.get_mut(&key)) {
            s.reused += 1;
        }
        return Some(g);
    }
    // Values of the request line, cookies and body only, from the same sources as when the
    // slot's record was made: its group, without collecting and comparing the lists.
    let gen = slot.zip(link.sources).and_then(|(_, src)| t.source_generation(src == Source::LineAndBody));
    if let (Some(s), Some(gen)) = (slot, gen) {
        let known = t.memo.borrow().group_of_gen(s, gen);
        if let Some(g) = known {
            let mut cache = t.cache.borrow_mut();
            cache.stats.groups_recorded += 1;
            cache.stats.groups_whole += 1;
            cache.stats.groups_by_gen += 1;
            cache.stats.groups_built += 1;
            cache.hold_group(&g);
            cache.fill_slot(s, g.clone());
            return Some(g);
        }
    }
    let list = raw_list(t, sig, mask, link, head)?;
    let mut cache = t.cache.borrow_mut();
    let mut memo = t.memo.borrow_mut();
    // The memo's record of the slot serves a group with removals too: a record describes
    // exactly the values it was made from (compared one by one), whichever removals left them.
    let slot32 = link.group_slot;
    let most = super::cache::near_most(list.len());
    let mut seeded = None;
    let mut near = false;
    let g = match memo.group_record(slot32, &list, most, &mut cache.record_diffs) {
        // The same values as the last group of this slot: its changed values, union and
        // operators known false on all values.
        Some((rec, at)) if at.is_empty() && rec.group.as_ref().is_some_and(|g| std::rc::Rc::ptr_eq(&g.raw, &list)) => {
            cache.stats.groups_recorded += 1;
            cache.stats.groups_whole += 1;
            let g = rec.group.clone()?;
            cache.hold_group(&g);
            g
        }
        // A few values differ (Envoy's new x-request-id, a changed argument): the record's
        // changed values at the other places, the chain at these; what the record knows of
        // its values holds for the ones kept (see `Group::seed`).
        Some((rec, at)) if !at.is_empty() => {
            cache.stats.groups_near += 1;
            let mut fresh = Vec::new();
            for &i in &at {
                let Some(item) = list.get(i) else { continue };
                if item.v.raw.len() <= 4096 && untouched(&item.v.bytes, &link.chain_trigger) {
                    continue;
                }
                cache.prepare(&item.v, link.chain_id, link.multi_match, &link.transforms, &link.step_triggers, &mut memo, &mut |e| fresh.push((i, e)));
            }
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                let mut fresh = fresh.into_iter().peekable();
                for (i, e) in rec.changed.iter().filter(|(i, _)| at.binary_search(i).is_err()) {
                    while let Some(f) = fresh.next_if(|(j, _)| j < i) {
                        changed.push(f);
                    }
                    cache.hold(e.clone());
                    changed.push((*i, e.clone()));
                }
                changed.extend(fresh);
            });
            let new_values = g.seed(&rec, &at, slot_words(t, link.group_slot));
            seeded = rec.union.clone().map(|u| (u, new_values));
            if rec.open_at(&at, &list) {
                // Only values that are not memo entries differ, at places the record leaves
                // empty: the record describes this group as well as it did the last one (its
                // facts hold for the places it has), and learns what this group's rules find.
                g.record.set(rec.id);
            } else {
                near = true;
            }
            g
        }
        Some((rec, _)) => {
            cache.stats.groups_recorded += 1;
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                for (i, e) in &rec.changed {
                    cache.hold(e.clone());
                    changed.push((*i, e.clone()));
                }
            });
            if let Some(u) = &rec.union {
                let _ = g.union.set(u.clone());
            }
            g.fails.borrow_mut().clone_from(&rec.fails);
            g.record.set(rec.id);
            drop(rec);
            memo.keep_group(&g);
            g
        }
        None => {
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                // No transformation (t:none): no value changes,
                // nothing to look at one by one.
                if link.transforms.is_empty() {
                    cache.stats.chains_untouched += list.len() as u64;
                    return;
                }
                for (i, item) in list.iter().enumerate() {
                    if item.v.raw.len() <= 4096 && untouched(&item.v.bytes, &link.chain_trigger) {
                        cache.stats.chains_untouched += 1;
                        continue;
                    }
                    // As the per-value path; for multiMatch, each step whose result differs from its input.
                    cache.prepare(&item.v, link.chain_id, link.multi_match, &link.transforms, &link.step_triggers, &mut memo, &mut |e| changed.push((i, e)));
                }
            });
            memo.record_group(&g, &mut cache);
            g
        }
    };
    cache.stats.groups_built += 1;
    drop(cache);
    if let Some((mut u, values)) = seeded {
        // The record's union (a superset for the values kept) and the new values' scans.
        for e in &values {
            u.union_with(e.scan(&t.cache, &t.rs.prefilter).satisfied());
        }
        let _ = g.union.set(u);
    }
    if near {
        memo.record_group(&g, &mut t.cache.borrow_mut());
    }
    if let (Some(s), Some(gen)) = (slot, gen) {
        memo.tag_group(s, &g, gen);
    }
    drop(memo);
    let mut cache = t.cache.borrow_mut();
    if let Some(m) = cache.group_stats.as_mut() {
        let s = m.entry(key).or_insert_with(|| super::profile::GroupStat { name: super::profile::group_name(link), ..Default::default() });
        s.built += 1;
        s.values += g.raw.len() as u64;
    }
    if !slot.is_some_and(|s| cache.fill_slot(s, g.clone())) {
        cache.groups.insert(key, g.clone());
    }
    Some(g)
}

/// The collected values of a target list (by signature), once per phase: the concatenation
/// of its targets' values, each target collected once per phase whatever lists it is in.
fn raw_list(t: &Transaction, sig: u32, mask: u32, link: &Rule, head: &Rule) -> Option<std::rc::Rc<Vec<RawItem>>> {
    if let Some(l) = t.cache.borrow().lists.get(&sig) {
        return Some(l.clone());
    }
    if link.target_sigs.len() != link.targets.len() {
        return None;
    }
    let l = if let ([target], [ts]) = (link.targets.as_slice(), link.target_sigs.as_slice()) {
        target_items(t, *ts, mask, target, head)?
    } else {
        // The parts in the cache's scratch vector (given back emptied, also on failure).
        let mut parts = std::mem::take(&mut t.cache.borrow_mut().parts);
        parts.clear();
        let l = concat(t, sig, mask, link, head, &mut parts);
        parts.clear();
        t.cache.borrow_mut().parts = parts;
        l?
    };
    t.cache.borrow_mut().lists.insert(sig, l.clone());
    Some(l)
}

/// The list of a rule's targets (`parts` empty, for their lists): their lists concatenated.
fn concat(t: &Transaction, sig: u32, mask: u32, link: &Rule, head: &Rule, parts: &mut Vec<std::rc::Rc<Vec<RawItem>>>) -> Option<std::rc::Rc<Vec<RawItem>>> {
    for (target, ts) in link.targets.iter().zip(&link.target_sigs) {
        parts.push(target_items(t, *ts, mask, target, head)?);
    }
    // The very same lists as last time: the same concatenation (whose identity lets the
    // memo's group record give its group whole).
    if let Some(l) = t.memo.borrow().last_concat(sig, parts) {
        return Some(l);
    }
    let mut out = t.cache.borrow_mut().new_list();
    let list = std::rc::Rc::get_mut(&mut out)?;
    list.reserve(parts.iter().map(|p| p.len()).sum());
    for p in parts.iter() {
        list.extend(p.iter().cloned());
    }
    t.memo.borrow_mut().keep_concat(sig, parts, &link.target_sigs, mask, &out);
    Some(out)
}

/// The collected values of one target (by id and the removals that apply), once per phase.
fn target_items(t: &Transaction, ts: u32, mask: u32, target: &Target, head: &Rule) -> Option<std::rc::Rc<Vec<RawItem>>> {
    if let Some(l) = t.cache.borrow().targets.get(&(ts, mask)) {
        return Some(l.clone());
    }
    // A list of ARGS, cookies or a part of the request line collected from the very same
    // request line, cookies, body and removals as now: the same list (a body that comes again
    // is not collected and compared per target again).
    let source = t.rs.target_sources.get(ts as usize).copied().unwrap_or(Source::Other);
    let sourced = source != Source::Other;
    let gen = if sourced { t.source_generation(source == Source::LineAndBody) } else { None };
    if let Some(l) = gen.and_then(|g| t.memo.borrow().last_list_of((ts, mask), g)) {
        let mut cache = t.cache.borrow_mut();
        cache.hold_list(&l);
        cache.targets.insert((ts, mask), l.clone());
        return Some(l);
    }
    // The scratch list of `eval_link` (not in use here: lists are built before it runs).
    let mut values: Vec<Value<'_>> = recycle(std::mem::take(&mut *t.values_scratch.borrow_mut()));
    collect(t, target, Some(head), &mut values);
    let mut cache = t.cache.borrow_mut();
    let mut memo = t.memo.borrow_mut();
    // The last list of this target: its items serve where the bytes are the same at the same
    // place (a header, a cookie, an argument that came in the last request too), without a
    // lookup; the same list whole is taken as it is.
    let last = memo.last_list((ts, mask));
    let mut l = cache.new_list();
    let mut complete = false;
    // While `same`, every value so far is the last list's at its place: nothing pushed yet.
    let mut same = last.as_ref().is_some_and(|p| p.len() == values.len());
    if let Some(out) = std::rc::Rc::get_mut(&mut l) {
        let mut done = 0;
        for (j, v) in values.iter().enumerate() {
            let (prefix, key) = match (&v.name, &v.value, v.stable) {
                (VName::Plain(n), Cow::Borrowed(_), true) => (*n, None),
                (VName::Keyed(n, k), Cow::Borrowed(_), true) => (*n, Some(*k)),
                _ => break,
            };
            let same_key = |p: &RawItem| match (p.key.as_deref(), key) {
                (Some(a), Some(b)) => same_bytes(a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            let prev = last.as_ref().and_then(|p| p.get(j)).filter(|p| same_bytes(p.prefix.as_bytes(), prefix.as_bytes()) && same_key(p) && same_bytes(&p.v.raw, &v.value));
            done = j + 1;
            match (same, prev) {
                (true, Some(_)) => continue,
                (true, None) => {
                    same = false;
                    out.extend(last.iter().flat_map(|p| p.iter().take(j)).cloned());
                }
                (false, Some(p)) => {
                    out.push(p.clone());
                    continue;
                }
                (false, None) => {}
            }
            let key = key.map(|k| cache.intern(k, &mut memo).raw.clone());
            let v = cache.intern(&v.value, &mut memo);
            out.push(RawItem { prefix, key, v });
        }
        complete = done == values.len() && (same || out.len() == values.len());
    }
    *t.values_scratch.borrow_mut() = recycle(values);
    if !complete {
        return None;
    }
    let l = match (same, last) {
        (true, Some(p)) => {
            cache.return_list(l);
            p
        }
        _ => {
            memo.keep_list((ts, mask), &l);
            l
        }
    };
    if sourced {
        memo.tag_list((ts, mask), &l, gen);
    }
    // Its values stay alive to the end of the transaction: the address-keyed tables key
    // them, and the memo may let them go before (another request's list, a retired
    // generation); an address reused by other bytes must never find their entries.
    cache.hold_list(&l);
    cache.targets.insert((ts, mask), l.clone());
    Some(l)
}

/// The words (first, last) of the memo bits that the rules of group slot `slot` have; all of
/// them without a slot.
fn slot_words(t: &Transaction, slot: Option<u32>) -> (u32, u32) {
    slot.and_then(|s| t.rs.slot_words.get(s as usize)).copied().unwrap_or((0, (t.rs.memo_bits / 64) as u32))
}

/// Whether `rule` (its first link, with group slot `slot`, prefilter requirement `req`: see
/// `Quick::Group`) cannot match, decided from the slot's values without building its group:
/// it has none, or none of them satisfies `req` after the chain ([`slot_union`]). Once per
/// slot and phase (and after every ctl); false when the values cannot tell.
pub(crate) fn slot_cannot_match(t: &Transaction, rule: &Rule, slot: u32, req: Option<Requirement>) -> bool {
    let lacks = |known: &Option<(usize, Satisfied)>| known.as_ref().is_some_and(|(n, u)| *n == 0 || req.is_some_and(|r| !u.has(r)));
    if let Some(known) = t.cache.borrow().slot_unions.get(&slot) {
        return lacks(known);
    }
    let known = slot_union(t, rule);
    let out = lacks(&known);
    t.cache.borrow_mut().slot_unions.insert(slot, known);
    out
}

/// The number of values of `rule`'s first link and a superset of what they may satisfy after
/// its chain: the union of the scans of its target lists' values as they are and of the
/// forms the chain makes of the values it can change (the group's union, see
/// [`group_union`], plus the unchanged values' own scans). Each target list is collected once
/// per phase for every rule (see [`target_items`]), its byte set and union once per phase for
/// every slot over it, and a value's forms and scans come from the memo when an earlier
/// transaction made them. None without a shared list: runtime target removals concern the
/// rule (other rules of the slot may read more values), or a value is not stable.
fn slot_union(t: &Transaction, rule: &Rule) -> Option<(usize, Satisfied)> {
    if removal_mask(t, rule)? != 0 || rule.target_sigs.len() != rule.targets.len() {
        return None;
    }
    let pf = &t.rs.prefilter;
    // `t:lowercase` changes no literal the scan finds (it compares in ASCII lowercase), only
    // which bytes a value has. A value the chain's other steps leave as it is, with its
    // capitals lowered too, has two forms at most, itself and its lowercase, and they satisfy
    // what its own scan and its lowered capitals satisfy: `others` is the other steps'
    // trigger, `lowered_bytes` the capitals' lowercase bytes of such values (one set for all).
    let (others, lower) = rule.cased_trigger;
    let with_lowered = |b: &[u64; 4]| if lower { or4(b, &lowered(b)) } else { *b };
    let mut lowered_bytes = [0u64; 4];
    let mut union = Satisfied::none(pf.words);
    let mut n = 0;
    let mut forms = Vec::new();
    for (target, &ts) in rule.targets.iter().zip(&rule.target_sigs) {
        let list = target_items(t, ts, 0, target, rule)?;
        n += list.len();
        let key = std::rc::Rc::as_ptr(&list) as usize;
        let known = t.cache.borrow().list_bytes.get(&key).copied();
        let any = known.unwrap_or_else(|| {
            let mut any = [0u64; 4];
            for item in list.iter() {
                any = or4(&any, &item.v.bytes);
            }
            t.cache.borrow_mut().list_bytes.insert(key, any);
            any
        });
        union.union_with(&list_union(t, &list));
        if rule.transforms.is_empty() {
            continue;
        }
        // Values over 4 KiB have every byte (see `Interned::bytes`): never untouched.
        if untouched(&with_lowered(&any), &others) {
            if lower {
                lowered_bytes = or4(&lowered_bytes, &lowered(&any));
            }
            continue;
        }
        {
            let mut cache = t.cache.borrow_mut();
            let mut memo = t.memo.borrow_mut();
            for item in list.iter() {
                if untouched(&with_lowered(&item.v.bytes), &others) {
                    if lower {
                        lowered_bytes = or4(&lowered_bytes, &lowered(&item.v.bytes));
                    }
                    continue;
                }
                cache.prepare(&item.v, rule.chain_id, rule.multi_match, &rule.transforms, &rule.step_triggers, &mut memo, &mut |e| forms.push(e));
            }
        }
        for e in forms.drain(..) {
            union.union_with(e.scan(&t.cache, pf).satisfied());
        }
    }
    if lowered_bytes != [0; 4] {
        union.union_with(&pf.bytes_of_set(&lowered_bytes));
    }
    Some((n, union))
}

fn or4(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    [a[0] | b[0], a[1] | b[1], a[2] | b[2], a[3] | b[3]]
}

/// The lowercase letters of the capitals in byte set `b` (ASCII: bits 65-90 of word 1 moved
/// to 97-122).
fn lowered(b: &[u64; 4]) -> [u64; 4] {
    const CAPITALS: u64 = ((1u64 << 26) - 1) << 1;
    [0, (b[1] & CAPITALS) << 32, 0, 0]
}

/// The union of the scans of `list`'s values as they are, once per list and phase (shared by
/// every group and slot over it: `Cache::list_unions`).
fn list_union(t: &Transaction, list: &std::rc::Rc<Vec<RawItem>>) -> Satisfied {
    let key = std::rc::Rc::as_ptr(list) as usize;
    if let Some(u) = t.cache.borrow().list_unions.get(&key) {
        return u.clone();
    }
    let mut u = Satisfied::none(t.rs.prefilter.words);
    for item in list.iter() {
        u.union_with(item.v.scan(&t.cache, &t.rs.prefilter).satisfied());
    }
    t.cache.borrow_mut().list_unions.insert(key, u.clone());
    u
}

/// What any value of `g` may satisfy (see [`Group::union`]). A superset is as good (sound)
/// and cheaper: the union of the whole raw list (shared by every group over it) and of the
/// values the chain changed.
fn group_union<'g>(t: &Transaction, g: &'g Group) -> &'g Satisfied {
    g.union.get_or_init(|| {
        let mut u = list_union(t, &g.raw);
        for (_, p) in &g.changed {
            u.union_with(p.scan(&t.cache, &t.rs.prefilter).satisfied());
        }
        t.memo.borrow_mut().keep_union(g, &u);
        u
    })
}

/// Evaluates one link of a chain; returns its hits (empty = no match).
pub(crate) fn eval_link(t: &Transaction, link: &Rule, head: &Rule, hits: &mut HitPool) {
    hits.n = 0;
    if let Some(g) = group(t, link, head) {
        // Known false on every value (the operator is not negated): no value can match.
        if !link.negated && link.memo_bit.is_some_and(|b| g.all_failed(b)) {
            let n = g.len() as u64;
            t.probe.values.set(t.probe.values.get().wrapping_add(n));
            t.probe.skipped.set(t.probe.skipped.get().wrapping_add(n));
            return;
        }
        if let (Some(req), false) = (&link.prefilter, link.negated) {
            if g.len() >= UNION_MIN && !group_union(t, &g).has(*req) {
                // No value can match (the operator is not negated).
                if let Some(b) = link.memo_bit {
                    t.memo.borrow_mut().all_failed(&g, b);
                }
                let n = g.len() as u64;
                t.probe.values.set(t.probe.values.get().wrapping_add(n));
                t.probe.skipped.set(t.probe.skipped.get().wrapping_add(n));
                return;
            }
        }
        let ctx = Ctx::new(t, Some(head));
        let mut caps = Captures::default();
        // A large group: when the operator is known false on every value the memo has
        // recorded, only the values it has not (see `Group::known`) can match.
        let known = match (link.memo_bit, link.negated, g.seeded()) {
            (Some(b), false, Some(k)) => Some(k).filter(|k| k.failed(b)),
            (Some(b), false, None) if g.len() >= KNOWN_MIN => Some(g.known(slot_words(t, g.slot))).filter(|k| k.failed(b)),
            _ => None,
        };
        if let Some(k) = known {
            let passed = (g.len() - k.fresh.len()) as u64;
            t.probe.values.set(t.probe.values.get().wrapping_add(passed));
            t.probe.skipped.set(t.probe.skipped.get().wrapping_add(passed));
        }
        for (item, e) in g.values_to_run(known) {
            bump(&t.probe.values);
            let name = |o: &mut String| write_name(item.prefix, &item.key, o);
            let known_false = link.memo_bit.is_some_and(|b| e.failed(b));
            let possible = !known_false && link.prefilter.as_ref().is_none_or(|req| e.scan(&t.cache, &t.rs.prefilter).satisfies(req));
            let m = if possible {
                op_matches(t, link, &ctx, &Val::R(e.raw.clone()), true, &mut caps, false) != link.negated
            } else {
                bump(&t.probe.skipped);
                caps.0.clear();
                false
            };
            if !m {
                if let (false, Some(b)) = (known_false, link.memo_bit) {
                    e.set_failed(b);
                }
            }
            if m != link.negated {
                hits.push(&name, &e.raw, link.capture.then_some(&caps.0[..]));
            }
        }
        if let (0, false, Some(b)) = (hits.n, link.negated, link.memo_bit) {
            t.memo.borrow_mut().all_failed(&g, b);
        }
        return;
    }
    bump(&t.probe.unshared);
    let ctx = Ctx::new(t, Some(head));
    // The list's allocation is reused from one evaluation to the next (see `recycle`).
    let mut values: Vec<Value<'_>> = recycle(std::mem::take(&mut *t.values_scratch.borrow_mut()));
    if link.targets.is_empty() {
        // SecAction, or a rule without targets: one empty value.
        values.push(Value { name: VName::Plain(""), value: Cow::Borrowed(&b""[..]), stable: false });
    }
    for target in &link.targets {
        collect(t, target, Some(head), &mut values);
    }
    let mut caps = Captures::default();
    for item in &values {
        bump(&t.probe.values);
        let record = |v: &Val<'_>, hits: &mut HitPool, caps: &Captures| {
            hits.push(&|o: &mut String| item.name.write(o), v.bytes(), link.capture.then_some(&caps.0[..]));
        };
        let (base, stable) = match &item.value {
            Cow::Borrowed(b) if item.stable => (Val::B(b), true),
            other => (Val::B(other.as_ref()), false),
        };
        let mut cur = base;
        if link.multi_match {
            multi_hits(t, link, &ctx, cur, stable, &mut caps, |v, caps| {
                record(v, hits, caps);
                false
            });
        } else if stable {
            let (v, hit) = stable_hit(t, link, &ctx, cur, &mut caps);
            if hit {
                record(&v, hits, &caps);
            }
        } else {
            if !link.transforms.is_empty() && !untouched(&byte_set(cur.bytes()), &link.chain_trigger) {
                for tf in &link.transforms {
                    cur = step(t, stable, cur, *tf).0;
                }
            }
            if op_matches(t, link, &ctx, &cur, stable, &mut caps, true) {
                record(&cur, hits, &caps);
            }
        }
    }
    *t.values_scratch.borrow_mut() = recycle(values);
}

/// An emptied list of values with a new lifetime, in the same allocation (`Vec`'s in-place
/// collection: the element types have one layout). `filter` would keep the old lifetime, which
/// the 'static scratch slot cannot hold.
#[allow(clippy::unnecessary_filter_map)]
pub(crate) fn recycle<'b>(mut v: Vec<Value<'_>>) -> Vec<Value<'b>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// `multiMatch`: `link`'s operator on `value` and on each transformation of it that changed
/// it; `hit` on each hit, until it answers true (then returns true).
pub(crate) fn multi_hits<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, value: Val<'a>, stable: bool, caps: &mut Captures, mut hit: impl FnMut(&Val<'a>, &Captures) -> bool) -> bool {
    let mut cur = value;
    if op_matches(t, link, ctx, &cur, stable, caps, true) && hit(&cur, caps) {
        return true;
    }
    // No step can change this value: the transformed values are all the same one.
    if cur.bytes().len() <= 512 && untouched(&byte_set(cur.bytes()), &link.chain_trigger) {
        return false;
    }
    for tf in &link.transforms {
        let (next, changed) = step(t, stable, cur, *tf);
        cur = next;
        if changed && op_matches(t, link, ctx, &cur, stable, caps, true) && hit(&cur, caps) {
            return true;
        }
    }
    false
}

/// `link`'s transformations (memoized) and operator on one stable value: the value the
/// operator saw, and whether it is a hit (the prefilter decides when it can).
fn stable_hit<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, cur: Val<'a>, caps: &mut Captures) -> (Val<'a>, bool) {
    let bytes = (cur.bytes().len() <= 512).then(|| byte_set(cur.bytes()));
    stable_hit_with(t, link, ctx, cur, bytes, caps)
}

/// [`stable_hit`] with the value's byte set known (`None` when over 512 bytes).
pub(crate) fn stable_hit_with<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, cur: Val<'a>, bytes: Option<[u64; 4]>, caps: &mut Captures) -> (Val<'a>, bool) {
    if bytes.is_some_and(|b| untouched(&b, &link.chain_trigger)) {
        let hit = op_matches(t, link, ctx, &cur, true, caps, true);
        return (cur, hit);
    }
    let (v, handle) = t.cache.borrow_mut().chain(cur, link.chain_id, &link.transforms, &link.step_triggers, bytes);
    if let Some(req) = &link.prefilter {
        let scan = t.cache.borrow_mut().chain_scan(handle, &v, &t.rs.prefilter);
        if scan.is_some_and(|s| !s.satisfies(req)) {
            bump(&t.probe.skipped);
            // The regex cannot match: the operator is false.
            caps.0.clear();
            return (v, link.negated);
        }
    }
    let hit = op_matches(t, link, ctx, &v, true, caps, false);
    (v, hit)
}
