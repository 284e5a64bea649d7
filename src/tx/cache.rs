//! Per-transaction memo tables: transformation results, prefilter scans and
//! libinjection verdicts, keyed by the address of the bytes they were computed
//! from.
//!
//! Only "stable" bytes are keyed: request data (never freed or changed while
//! the transaction lives) and results held by this cache. So an address names
//! one content for the whole transaction, and a chain like
//! `t:urlDecodeUni,t:lowercase` shared by fifty CRS rules is computed once per
//! value; a transformation that changes nothing maps a value to itself.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::fx::Fx;
use std::rc::Rc;

use crate::compile::prefilter::{Prefilter, Requirement, Satisfied};
use crate::transforms::Transform;
use super::profile::{CacheStats, GroupStat};


type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Bytes being evaluated: borrowed from the request, or a cached result.
#[derive(Clone)]
pub(crate) enum Val<'a> {
    B(&'a [u8]),
    R(Rc<[u8]>),
}

impl Val<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Val::B(b) => b,
            Val::R(r) => r,
        }
    }
    fn key(&self) -> (usize, usize) {
        addr_key(self.bytes())
    }
}

/// Byte strings by content (see `Cache::contents`), what they take charged to the thread's
/// memory budget (see `tx::budget`) until the cache is emptied.
#[derive(Default)]
struct Contents {
    set: std::collections::HashSet<Rc<[u8]>, BuildHasherDefault<Fx>>,
    charge: super::budget::Charge,
}

impl Contents {
    fn with_capacity(n: usize) -> Contents {
        Contents { set: std::collections::HashSet::with_capacity_and_hasher(n, Default::default()), charge: Default::default() }
    }

    fn clear(&mut self) {
        self.set.clear();
        self.charge.release();
    }
}

/// The literal part of the scans of large contents, by lowercase form (see [`Scan::of`]),
/// the copies charged to the memory budget as [`Contents`] are.
#[derive(Default)]
struct BigLits {
    map: FxMap<Rc<[u8]>, Satisfied>,
    charge: super::budget::Charge,
    /// The memory budget of the cache's transaction (see [`Cache::set_budget`]).
    limit: usize,
}
/// A memoized transformation's key: the value's address and length, and the transformation.
type TfKey = (usize, usize, Transform);

/// The one shared copy of `b` in `contents`.
fn share(contents: &mut Contents, b: &[u8]) -> Rc<[u8]> {
    if let Some(rc) = contents.set.get(b) {
        return rc.clone();
    }
    let rc: Rc<[u8]> = Rc::from(b);
    contents.charge.add(b.len());
    contents.set.insert(rc.clone());
    rc
}

/// The memo entry of `v` in `map`: found by address, else by content (the address of its
/// shared copy, so values with equal bytes get one entry), else computed by `f`.
/// `counts`: (reused, computed).
fn memo<T: Clone>(map: &mut FxMap<(usize, usize), T>, contents: &mut Contents, counts: (&mut u64, &mut u64), v: &Val<'_>, f: impl FnOnce() -> T) -> T {
    let key = v.key();
    if let Some(r) = map.get(&key) {
        *counts.0 += 1;
        return r.clone();
    }
    let ck = addr_key(&share(contents, v.bytes()));
    let r = match map.get(&ck) {
        Some(r) => {
            *counts.0 += 1;
            r.clone()
        }
        None => {
            *counts.1 += 1;
            let r = f();
            map.insert(ck, r.clone());
            r
        }
    };
    map.insert(key, r.clone());
    r
}

/// From this length on a chain runs through the memo of single steps (see
/// [`Cache::chain_by_steps`]); below it a lookup per step costs more than the steps, which
/// mostly leave a value unchanged.
const PREFIX_MEMO_MIN: usize = 4096;

/// Whether `rc` is other bytes than `v`'s (by address: both are stable).
fn cur_differs(rc: &Rc<[u8]>, v: &Val<'_>) -> bool {
    addr_key(rc) != v.key()
}

/// The memo key of stable bytes: their address, except that every empty value is one key.
fn addr_key(b: &[u8]) -> (usize, usize) {
    if b.is_empty() {
        (0, 0)
    } else {
        (b.as_ptr() as usize, b.len())
    }
}

/// From this length on a scan's literal part is shared by the contents with the same
/// lowercase form (below it, looking that up costs about what the automaton does).
const BIG_SCAN: usize = 256;

/// What a value contains, for prefilters: the requirements it satisfies.
pub(crate) struct Scan(Satisfied);

impl Scan {
    pub fn new(v: &[u8], pf: &Prefilter) -> Scan {
        Scan(pf.scan(v))
    }

    /// The scan of a new content: a large one runs the automaton only if its lowercase form
    /// was not scanned yet in this transaction (a body and its `t:lowercase`, or its
    /// `t:htmlEntityDecode,t:lowercase`, are the same text for the automaton).
    fn of(v: &[u8], pf: &Prefilter, big: &mut BigLits) -> Scan {
        if v.len() < BIG_SCAN {
            return Scan::new(v, pf);
        }
        let lower: std::borrow::Cow<'_, [u8]> =
            if v.iter().any(u8::is_ascii_uppercase) { std::borrow::Cow::Owned(v.to_ascii_lowercase()) } else { std::borrow::Cow::Borrowed(v) };
        let mut lits = big.map.get(lower.as_ref()).cloned();
        let known = lits.is_some();
        let s = pf.scan_with_lowercase(v, &lower, &mut lits);
        // Past the memory budget (see `tx::budget`) the lowercase form is not kept.
        if let (false, Some(l), false) = (known, lits, super::budget::held() > big.limit) {
            big.charge.add(lower.len());
            big.map.insert(Rc::from(lower.as_ref()), l);
        }
        Scan(s)
    }

    /// False when the requirement is absent: the regex cannot match.
    pub fn satisfies(&self, r: &Requirement) -> bool {
        self.0.has(*r)
    }

    pub fn satisfied(&self) -> &Satisfied {
        &self.0
    }

}

/// Whether `a` and `b` are the same bytes, compared 8 at a time: the wasm build's `memcmp`
/// (wasi-libc's) goes byte by byte, and request values are compared with the last request's
/// at every target list.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if std::ptr::eq(a.as_ptr(), b.as_ptr()) {
        return true;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ta, tb) = (wa.remainder(), wb.remainder());
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or_default());
    wa.zip(wb).all(|(x, y)| word(x) == word(y)) && ta.iter().zip(tb).all(|(x, y)| x == y)
}

pub(crate) use super::byte_set::byte_set;

/// Whether a value with byte set `have` passes a chain with trigger `trig`
/// unchanged.
pub(crate) fn untouched(have: &[u64; 4], trig: &Option<[u64; 4]>) -> bool {
    // One test of the four words together, not a loop that stops at the first: this runs for
    // every (value, chain) pair of a group built from scratch.
    let ([a0, a1, a2, a3], Some([t0, t1, t2, t3])) = (*have, *trig) else { return false };
    (a0 & t0) | (a1 & t1) | (a2 & t2) | (a3 & t3) == 0
}

/// The result of a whole transformation chain on one value, and its scan.
struct Final {
    /// None: the chain left the value unchanged.
    val: Option<Rc<[u8]>>,
    scan: Option<Rc<Scan>>,
}

/// The values of a target list prepared for one chain: the list itself, plus the values the
/// chain changed (by index, ascending). Most values pass a chain unchanged and are not copied.
pub(crate) struct Group {
    pub raw: Rc<Vec<RawItem>>,
    /// By item index (ascending): the value after the chain where it differs from the raw
    /// one; for a `multiMatch` group, every intermediate result that differs from the step
    /// before, in chain order.
    pub changed: Vec<(usize, Rc<Interned>)>,
    /// `multiMatch`: each item's raw value comes first, then its `changed` entries.
    pub multi: bool,
    /// For groups of at least [`UNION_MIN`] values: what any of them may satisfy (a superset:
    /// the union over the whole raw list and the changed values), so a rule whose
    /// requirement none meets skips the group at once (a 10 KB JSON body has ~1,000 values
    /// and ~150 rules read them).
    pub union: std::cell::OnceCell<Satisfied>,
    /// Its rules' `Rule::group_slot` (with runtime removals too: it names the memo's record
    /// of the slot and the slot's memo bits, not the transaction's prepared group).
    pub slot: Option<u32>,
    /// Operators (by `Rule::memo_bit`) known false on every value.
    pub fails: std::cell::RefCell<Vec<u64>>,
    /// The id of its slot's record in the memo that describes it (0: none; see
    /// [`Memo::group_record`]).
    pub record: std::cell::Cell<u64>,
    /// See [`Group::known`].
    known: std::cell::OnceCell<Known>,
}

/// What the memo knows of a large group's values when its first rule runs: the operators
/// false on every value it has recorded, and the values it has recorded nothing for (new
/// values, by item index, in order). A rule whose operator is in the first set needs to run
/// on the second only: a 10 KB JSON body of ~1,000 values, a few of them new, is read by
/// ~150 rules.
pub(crate) struct Known {
    /// Words `first..` of the operators' bits (the group's rules have theirs there).
    first: usize,
    fails: Vec<u64>,
    pub fresh: Vec<(usize, Rc<Interned>)>,
}

impl Known {
    /// Whether operator `bit` is false on every value the memo has recorded.
    pub fn failed(&self, bit: u32) -> bool {
        (bit as usize / 64).checked_sub(self.first).and_then(|w| self.fails.get(w)).is_some_and(|w| w & (1u64 << (bit % 64)) != 0)
    }
}

/// Smallest group worth a [`Known`] (below it, testing each value's bit costs less than
/// the snapshot).
pub(crate) const KNOWN_MIN: usize = 64;

/// Smallest group worth a union of its values' scans (measured: 8 to 16 best on the CRS GET,
/// all groups 0.7% more instructions, only groups of 32 or more 4% more).
pub(crate) const UNION_MIN: usize = 8;

impl Group {
    /// Whether operator `bit` is known false on every value.
    pub fn all_failed(&self, bit: u32) -> bool {
        has_bit(&self.fails.borrow(), bit)
    }

    /// See [`Known`]. Taken once, when first asked: values' records only grow (an operator
    /// found false stays false on the same bytes), so bits set later only make it less
    /// complete, never wrong.
    /// Only words `words` (first, last) of the bits are looked at: the group's rules have
    /// their operators' bits there.
    pub fn known(&self, words: (u32, u32)) -> &Known {
        self.known.get_or_init(|| {
            let (first, last) = (words.0 as usize, words.1 as usize);
            let mut fails = vec![u64::MAX; (last + 1).saturating_sub(first)];
            let mut fresh = Vec::new();
            for (i, _, e) in self.values() {
                let f = e.fails.borrow();
                if f.is_empty() {
                    fresh.push((i, e.clone()));
                    continue;
                }
                let have = f.get(first..).unwrap_or_default();
                fails.truncate(have.len());
                fails.iter_mut().zip(have).for_each(|(a, b)| *a &= b);
            }
            if fresh.len() == self.len() {
                fails.clear();
            }
            Known { first, fails, fresh }
        })
    }

    /// Seeds what is known of this group (just built from `rec`, the record of the same
    /// values but at places `at`, see [`Memo::group_record`]): what the record knows holds for
    /// the values it shares with it, so an operator false on every value of the record needs
    /// to run on the values at `at` only, and is false on every value when it is also false
    /// on those. `words` as for [`Group::known`]. Returns the values at `at` (raw and changed),
    /// for the union.
    pub fn seed(&self, rec: &GroupRecord, at: &[usize], words: (u32, u32)) -> Vec<Rc<Interned>> {
        let mut fresh = Vec::new();
        // In the group's own (pooled) vector: no allocation per near group.
        let mut fails = std::mem::take(&mut *self.fails.borrow_mut());
        fails.clone_from(&rec.fails);
        let mut new_values = Vec::new();
        for &i in at {
            let Some(item) = self.raw.get(i) else { continue };
            new_values.push(item.v.clone());
            // The values `values()` gives for item `i`: its changed ones (the last for a
            // group that is not multiMatch), or its raw one; for multiMatch, the raw one first.
            let from = self.changed.partition_point(|(j, _)| *j < i);
            let to = from + self.changed.get(from..).unwrap_or_default().iter().take_while(|(j, _)| *j == i).count();
            let changed = self.changed.get(from..to).unwrap_or_default();
            new_values.extend(changed.iter().map(|(_, e)| e.clone()));
            let mut give = |e: &Rc<Interned>| {
                let f = e.fails.borrow();
                fails.truncate(f.len());
                fails.iter_mut().zip(f.iter()).for_each(|(a, b)| *a &= b);
                fresh.push((i, e.clone()));
            };
            if self.multi || changed.is_empty() {
                give(&item.v);
            }
            if self.multi {
                changed.iter().for_each(|(_, e)| give(e));
            } else if let Some((_, e)) = changed.first() {
                give(e);
            }
        }
        *self.fails.borrow_mut() = fails;
        let (first, last) = (words.0 as usize, words.1 as usize);
        let mut known = rec.fails.get(first..).unwrap_or_default().to_vec();
        known.truncate((last + 1).saturating_sub(first));
        let _ = self.known.set(Known { first, fails: known, fresh });
        new_values
    }

    /// What [`Group::seed`] set, if it ran.
    pub fn seeded(&self) -> Option<&Known> {
        self.known.get()
    }

    /// The values a rule must run on: all of them ([`Group::values`]), or with `known`
    /// (operator false on every recorded value) the unrecorded ones only.
    pub fn values_to_run<'g>(&'g self, known: Option<&'g Known>) -> ToRun<'g> {
        match known {
            Some(k) => ToRun::Fresh(&self.raw, k.fresh.iter()),
            None => ToRun::All(self.values()),
        }
    }

    /// How many values [`Group::values`] gives.
    pub fn len(&self) -> usize {
        if self.multi {
            self.raw.len() + self.changed.len()
        } else {
            self.raw.len()
        }
    }
}

impl Group {
    /// Each value to evaluate, with its item: per item, the value after the
    /// chain; for `multiMatch`, the raw value and then each changed intermediate.
    pub fn values(&self) -> GroupValues<'_> {
        GroupValues { g: self, item: 0, changed: 0, raw_done: false }
    }
}

/// See [`Group::values`].
pub(crate) struct GroupValues<'g> {
    g: &'g Group,
    item: usize,
    /// Next entry of `g.changed`.
    changed: usize,
    /// `multiMatch`: the current item's raw value was given.
    raw_done: bool,
}

impl<'g> Iterator for GroupValues<'g> {
    /// The item's index, the item, the value.
    type Item = (usize, &'g RawItem, &'g Rc<Interned>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let at = self.item;
            let item = self.g.raw.get(at)?;
            let here = self.g.changed.get(self.changed).filter(|(i, _)| *i == at).map(|(_, p)| p);
            if !self.g.multi {
                self.item += 1;
                return Some(match here {
                    Some(p) => {
                        self.changed += 1;
                        (at, item, p)
                    }
                    None => (at, item, &item.v),
                });
            }
            if !self.raw_done {
                self.raw_done = true;
                return Some((at, item, &item.v));
            }
            if let Some(p) = here {
                self.changed += 1;
                return Some((at, item, p));
            }
            self.item += 1;
            self.raw_done = false;
        }
    }
}

/// See [`Group::values_to_run`]: (item, value).
pub(crate) enum ToRun<'g> {
    All(GroupValues<'g>),
    Fresh(&'g [RawItem], std::slice::Iter<'g, (usize, Rc<Interned>)>),
}

impl<'g> Iterator for ToRun<'g> {
    type Item = (&'g RawItem, &'g Rc<Interned>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ToRun::All(all) => all.next().map(|(_, item, e)| (item, e)),
            ToRun::Fresh(raw, fresh) => fresh.find_map(|(i, e)| Some((raw.get(*i)?, e))),
        }
    }
}

/// `ARGS:name`: the name of a collected value (MATCHED_VAR_NAME).
pub(crate) fn write_name(prefix: &str, key: &Option<Rc<[u8]>>, out: &mut String) {
    out.push_str(prefix);
    if let Some(k) = key {
        out.push(':');
        out.push_str(&String::from_utf8_lossy(k));
    }
}

/// A value being evaluated (a request value, or a transformation's result), with what every
/// list and group needs of it. Values of up to [`MEMO_VALUE_MAX`] bytes are shared through the
/// thread's [`Memo`], so what they record (scan, chain results, operators found false) serves
/// the next transactions too; longer ones live for one transaction.
pub(crate) struct Interned {
    pub raw: Rc<[u8]>,
    /// The bytes it contains (for transformation triggers; all ones over 4 KiB).
    pub bytes: [u64; 4],
    /// The prefilter scan of `raw`, shared by every list and group where the value is unchanged.
    pub scan: std::cell::OnceCell<Rc<Scan>>,
    /// Operators (by `Rule::memo_bit`) known false on this value: one bit each.
    fails: std::cell::RefCell<Vec<u64>>,
    /// What chains (by id) made of this value (see [`ChainOut`]).
    chains: std::cell::RefCell<Vec<(u32, ChainOut)>>,
    /// In the memo: `fails` and `chains` are worth recording (else they are left empty).
    kept: bool,
}

/// A chain's result on a value, as recorded: results are held weakly (a dropped one is
/// computed again), so entries never keep each other alive in cycles.
enum ChainOut {
    /// The chain leaves the value as it is.
    Same,
    One(std::rc::Weak<Interned>),
    /// `multiMatch`: each intermediate result that differs from the step before, in order.
    Steps(Box<[std::rc::Weak<Interned>]>),
}

impl Interned {
    fn new(raw: Rc<[u8]>, kept: bool) -> Interned {
        let bytes = if raw.len() <= 4096 { byte_set(&raw) } else { [u64::MAX; 4] };
        Interned { raw, bytes, scan: std::cell::OnceCell::new(), fails: Default::default(), chains: Default::default(), kept }
    }

    /// Whether the operator numbered `bit` was found false on this value.
    pub fn failed(&self, bit: u32) -> bool {
        has_bit(&self.fails.borrow(), bit)
    }

    /// Records that the operator numbered `bit` is false on this value (a pure operator only:
    /// the entry is read by later transactions).
    pub fn set_failed(&self, bit: u32) {
        if self.kept {
            set_bit(&mut self.fails.borrow_mut(), bit);
        }
    }

    /// The recorded results of chain `id` (see [`ChainOut`]), given to `out`; false when
    /// none is recorded or one was dropped.
    fn chain_out(&self, id: u32, out: &mut impl FnMut(Rc<Interned>)) -> bool {
        let c = self.chains.borrow();
        let Ok(at) = c.binary_search_by_key(&id, |(i, _)| *i) else { return false };
        match c.get(at).map(|(_, o)| o) {
            None => false,
            Some(ChainOut::Same) => true,
            Some(ChainOut::One(w)) => w.upgrade().map(out).is_some(),
            Some(ChainOut::Steps(ws)) => {
                if ws.iter().any(|w| w.strong_count() == 0) {
                    return false;
                }
                ws.iter().filter_map(std::rc::Weak::upgrade).for_each(out);
                true
            }
        }
    }

    fn set_chain_out(&self, id: u32, out: ChainOut) {
        if !self.kept {
            return;
        }
        // Sorted by id (looked up by binary search).
        let mut c = self.chains.borrow_mut();
        match c.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(at) => {
                if let Some(slot) = c.get_mut(at) {
                    slot.1 = out;
                }
            }
            Err(at) => c.insert(at, (id, out)),
        }
    }

    /// The scan of this value, computed once.
    pub fn scan(&self, cache: &CacheCell, pf: &Prefilter) -> &Rc<Scan> {
        self.scan.get_or_init(|| cache.borrow_mut().scan_rc(&self.raw, pf))
    }
}

/// A group's values and what is known of all of them together (see [`Memo::group_record`]).
#[derive(Clone)]
pub(crate) struct GroupRecord {
    /// Distinct for every record of the memo (see `Group::record`).
    pub id: u64,
    /// The raw values' entries, in order; none where the value is not a memo entry. Shared
    /// by the records made from the same list in a phase (see [`Cache::record_base`]).
    base: Base,
    /// The places (ascending) where what the chain made of the value is not a memo entry,
    /// though the value is one: the record has no entry there either.
    holes: Vec<usize>,
    /// As `Group::changed`.
    pub changed: Vec<(usize, Rc<Interned>)>,
    pub union: Option<Satisfied>,
    /// Operators (by `Rule::memo_bit`) false on every value.
    pub fails: Vec<u64>,
    /// What the record itself takes: its lists of entries (its group's list is one of the
    /// memo's last lists, counted there).
    bytes: usize,
    /// The group itself, given whole to a transaction whose list is the very same one (the
    /// memo's last lists keep a target's list when its values are the same): everything in
    /// a group is a function of its values and chain, so transactions can share it.
    pub group: Option<Rc<Group>>,
    /// The generation of the sources `group`'s values came from, when they are all the
    /// request line's, cookies' and body's (see [`Memo::group_of_gen`]).
    gen: Option<u64>,
}

/// What a record of `g` takes (see [`GroupRecord::bytes`]).
impl GroupRecord {
    /// The record's entry at place `i`.
    fn entry(&self, i: usize) -> Option<&Rc<Interned>> {
        if self.holes.binary_search(&i).is_ok() {
            return None;
        }
        self.base.get(i)?.as_ref()
    }

    /// Whether the record has no entry at any of places `at` (values that were not memo
    /// entries) and `raw` has none there either.
    pub fn open_at(&self, at: &[usize], raw: &[RawItem]) -> bool {
        at.iter().all(|&i| i < self.base.len() && self.entry(i).is_none() && raw.get(i).is_some_and(|item| !item.v.kept))
    }
}

/// A list's entries as records keep them (see [`GroupRecord::base`]).
pub(crate) type Base = Rc<[Option<Rc<Interned>>]>;

/// The places where a record's base and a list differ (see [`Cache::record_diffs`]); None:
/// more than the most a near group may have.
type Diff = Option<Rc<[usize]>>;

fn record_bytes(g: &Group) -> usize {
    g.raw.len() * std::mem::size_of::<Rc<Interned>>() + g.changed.len() * std::mem::size_of::<(usize, Rc<Interned>)>()
}

/// Whether `bytes` in place of `replaced` keep `used` within [`MEMO_RECORD_BYTES`]; if so,
/// `used` counts them.
fn within_budget(used: &mut usize, replaced: usize, bytes: usize) -> bool {
    let total = used.saturating_sub(replaced).saturating_add(bytes);
    if total > MEMO_RECORD_BYTES {
        return false;
    }
    *used = total;
    true
}

/// What a kept target list takes: its items and their keys' bytes.
fn list_bytes(l: &[RawItem]) -> usize {
    std::mem::size_of_val(l) + l.iter().map(|i| i.key.as_ref().map_or(0, |k| k.len())).sum::<usize>()
}

/// A concatenation of target lists: the parts, and the list they make (see
/// [`Memo::last_concat`]).
type Concat = (Vec<Rc<Vec<RawItem>>>, Rc<Vec<RawItem>>);

/// Most places at which a group's values may differ from its slot's record for the group to
/// be built from the record (see [`Memo::group_record`]).
pub(crate) fn near_most(len: usize) -> usize {
    (len / 8).max(2)
}

/// Sets bit `bit` of `words`, growing them as needed.
fn set_bit(words: &mut Vec<u64>, bit: u32) {
    let b = bit as usize;
    if words.len() <= b / 64 {
        words.resize(b / 64 + 1, 0);
    }
    if let Some(w) = words.get_mut(b / 64) {
        *w |= 1u64 << (b % 64);
    }
}

/// Whether bit `bit` of `words` is set.
fn has_bit(words: &[u64], bit: u32) -> bool {
    let b = bit as usize;
    words.get(b / 64).is_some_and(|w| w & (1u64 << (b % 64)) != 0)
}

/// Longest value the [`Memo`] keeps (a header, a cookie, a JSON string, a whole body or page
/// of up to 64 KiB: the values that come again; one seen once costs its hash, no entry).
pub(crate) const MEMO_VALUE_MAX: usize = 64 * 1024;
/// Values and bytes of a [`Memo`] generation.
pub(crate) const MEMO_ENTRIES: usize = 4096;
const MEMO_BYTES: usize = 1 << 20;
/// Largest group a [`Memo`] keeps a record of (a GET's groups have ~30 values, a 1 KB JSON
/// POST's up to ~150, a 10 KB one's ~1,000).
const MEMO_GROUP_MAX: usize = 4096;
/// Most bytes the group records of a [`Memo`] may take (see [`GroupRecord::bytes`]). The
/// entries they hold are the memo's own: records go when a generation retires.
const MEMO_RECORD_BYTES: usize = 1 << 20;
/// Bits of the [`Memo`]'s doorkeeper (8 KiB).
const MEMO_SEEN: usize = 1 << 16;
/// What an entry costs besides its bytes (the entry, its table slot, its scan, its bits).
const MEMO_ENTRY_COST: usize = 256;

/// The values of earlier transactions of one rule set on this thread (a wasm VM), by content,
/// with what was learned about them: their scan, their chains' results, and which operators
/// are false on them. Browsers send the same headers and cookies again and again, and a value
/// seen before then costs a table lookup instead of transformations, scans and regexes.
///
/// Nothing in it depends on anything but the value's bytes and the rule set: the key is the
/// exact content (a hash only finds the slot; the bytes are compared), only operators without
/// macros are recorded, and only as false, after they ran. So no request can make another's
/// verdict differ. Bounded: two generations of at most [`MEMO_ENTRIES`] values and
/// [`MEMO_BYTES`] bytes; a value used in the current generation moves to it, and a full
/// generation retires the older one (a least-recently-used approximation). The table's hash
/// is keyed per process (random keys), so contents cannot be chosen to collide.
pub(crate) struct Memo {
    /// The doorkeeper: one bit per hash slot, set by the values seen once. A value enters the
    /// memo when it comes a second time (or shares a slot with one seen before), so values seen
    /// only once (a search term, a session's first request) cost no entry and push out none.
    seen: Box<[u64]>,
    /// Bits set in `seen`.
    seen_bits: usize,
    keys: SipKeys,
    /// Entries by their bytes (hashed with `keys` once per lookup, for both tables and the
    /// doorkeeper).
    young: hashbrown::HashTable<Rc<Interned>>,
    old: hashbrown::HashTable<Rc<Interned>>,
    young_bytes: usize,
    /// By group slot: what the last group of that slot learned (see [`Memo::group_record`]).
    groups: Vec<Option<Rc<GroupRecord>>>,
    /// The id of the last record made.
    next_record: u64,
    /// The sum of the records' [`GroupRecord::bytes`] (at most [`MEMO_RECORD_BYTES`]).
    record_bytes: usize,
    /// By (target id, removal mask): the last list of that target whose values were all
    /// entries of the memo (see [`Memo::last_list`]); dropped when a generation retires.
    lists: FxMap<(u32, u32), Rc<Vec<RawItem>>>,
    /// By target list signature: the last concatenation of target lists that were all
    /// `lists`' (the parts, the concatenation).
    concats: FxMap<u32, Concat>,
    /// What `lists` and `concats` take: items and key bytes (at most [`MEMO_RECORD_BYTES`]).
    list_bytes: usize,
    /// By (target id, removal mask) of a sourced variable ([`crate::vars::Var::is_sourced`]):
    /// the generation of the sources `lists` holds its list from (see
    /// [`Memo::source_generation`]).
    list_gens: FxMap<(u32, u32), u64>,
    /// The last sources, most recent first, with their generations.
    sources: Vec<Sources>,
    next_gen: u64,
    /// The last transactions that completed a phase, at most one per request target (method
    /// and path) and [`super::replay::TRACES`] in all, most recent first: what each read and
    /// where its rules had hits (see `tx::replay`). A transaction follows the one of its
    /// target, else the most recent.
    pub traces: Vec<Rc<super::replay::Trace>>,
}

/// What the sourced variables' values are made of: the request line's parts and the `Cookie`
/// headers ([`Sources::line`]), the body and its processor when it was parsed, and the runtime
/// target removals (by the `ctl` that made each, in order: they give the removal masks their
/// meaning).
struct Sources {
    line: [Vec<u8>; 4],
    body: Option<(Vec<u8>, Vec<u8>)>,
    removals: Vec<usize>,
    gen: u64,
}

/// Keyed SipHash-1-3 as a `BuildHasher` (the keys: [`crate::compile::Ruleset::set_hash_keys`]).
#[derive(Clone, Copy)]
struct SipKeys((u64, u64));

impl std::hash::BuildHasher for SipKeys {
    type Hasher = siphasher::sip::SipHasher13;
    fn build_hasher(&self) -> Self::Hasher {
        siphasher::sip::SipHasher13::new_with_keys(self.0 .0, self.0 .1)
    }
}

/// Sources a [`Memo`] remembers (a request's phase 1 and 2 have two).
const SOURCES_KEPT: usize = 4;

impl Memo {
    pub fn new(keys: (u64, u64)) -> Memo {
        Memo { seen: vec![0; MEMO_SEEN / 64].into_boxed_slice(), seen_bits: 0, keys: SipKeys(keys), young: hashbrown::HashTable::new(), old: hashbrown::HashTable::new(), young_bytes: 0, groups: Vec::new(), next_record: 0, record_bytes: 0, lists: FxMap::default(), concats: FxMap::default(), list_bytes: 0, list_gens: FxMap::default(), sources: Vec::new(), next_gen: 0, traces: Vec::new() }
    }

    /// The entry of `b`, or a new one (`make` shares the bytes); None for a long value and
    /// for one the doorkeeper sees for the first time. Counted in `stats`.
    fn entry(&mut self, b: &[u8], stats: &mut CacheStats, make: impl FnOnce() -> Rc<[u8]>) -> Option<Rc<Interned>> {
        if b.len() > MEMO_VALUE_MAX {
            return None;
        }
        let hash = std::hash::BuildHasher::hash_one(&self.keys, b);
        let same = |e: &Rc<Interned>| same_bytes(&e.raw, b);
        if let Some(e) = self.young.find(hash, same) {
            stats.memo_hits += 1;
            return Some(e.clone());
        }
        let e = match self.old.find_entry(hash, same) {
            Ok(found) => {
                stats.memo_hits += 1;
                found.remove().0
            }
            Err(_) => {
                stats.memo_misses += 1;
                let h = hash as usize % MEMO_SEEN;
                let (word, bit) = (h / 64, 1u64 << (h % 64));
                match self.seen.get_mut(word) {
                    Some(w) if *w & bit == 0 => {
                        // First sighting (as far as the doorkeeper knows): not kept yet.
                        *w |= bit;
                        self.seen_bits += 1;
                        if self.seen_bits > MEMO_SEEN / 2 {
                            // Half full: it would soon admit anything; start again.
                            self.seen.fill(0);
                            self.seen_bits = 0;
                        }
                        return None;
                    }
                    _ => Rc::new(Interned::new(make(), true)),
                }
            }
        };
        if self.young.len() >= MEMO_ENTRIES || self.young_bytes + b.len() + MEMO_ENTRY_COST > MEMO_BYTES {
            // The older generation goes; its table's allocation serves the new one. The group
            // records go too: they may hold its entries, which must not outlive the memo.
            self.old.clear();
            std::mem::swap(&mut self.old, &mut self.young);
            self.young_bytes = 0;
            self.groups.clear();
            self.record_bytes = 0;
            self.lists.clear();
            self.list_gens.clear();
            self.concats.clear();
            self.list_bytes = 0;
        }
        self.young_bytes += b.len() + MEMO_ENTRY_COST;
        let keys = &self.keys;
        self.young.insert_unique(hash, e.clone(), |e| std::hash::BuildHasher::hash_one(keys, &*e.raw));
        Some(e)
    }

    /// The last list of target `key` kept by [`Memo::keep_list`]: a new list takes its items
    /// where they have the same bytes at the same place, instead of looking each value up.
    pub fn last_list(&self, key: (u32, u32)) -> Option<Rc<Vec<RawItem>>> {
        self.lists.get(&key).cloned()
    }

    /// The generation of these sources: the same number for the same bytes (compared whole,
    /// part by part), a new one for new ones; None past [`MEMO_VALUE_MAX`] bytes. `line`: the
    /// method, the request target, the protocol and the `Cookie` headers (see
    /// `Request::cookie_source`).
    pub fn source_generation(&mut self, line: [&[u8]; 4], body: Option<(&[u8], &[u8])>, removals: &[usize]) -> Option<u64> {
        let size: usize = line.iter().map(|p| p.len()).sum::<usize>() + body.map_or(0, |(p, b)| p.len() + b.len());
        if size > MEMO_VALUE_MAX {
            return None;
        }
        let same = |s: &Sources| s.line.iter().zip(line).all(|(a, b)| a[..] == *b) && s.body.as_ref().map(|(p, b)| (&p[..], &b[..])) == body && s.removals == removals;
        if let Some(at) = self.sources.iter().position(same) {
            let s = self.sources.remove(at);
            let gen = s.gen;
            self.sources.insert(0, s);
            return Some(gen);
        }
        self.next_gen += 1;
        let gen = self.next_gen;
        // The oldest sources give their buffers to the new ones (no allocation per request
        // once SOURCES_KEPT have been seen, the body's buffers aside).
        self.sources.truncate(SOURCES_KEPT);
        let oldest = if self.sources.len() == SOURCES_KEPT { self.sources.pop() } else { None };
        let mut s = oldest.unwrap_or_else(|| Sources { line: Default::default(), body: None, removals: Vec::new(), gen });
        for (to, from) in s.line.iter_mut().zip(line) {
            to.clear();
            to.extend_from_slice(from);
        }
        s.body = body.map(|(p, b)| (p.to_vec(), b.to_vec()));
        s.removals.clear();
        s.removals.extend_from_slice(removals);
        s.gen = gen;
        self.sources.insert(0, s);
        Some(gen)
    }

    /// The last list of target `key` when it was collected from sources of generation `gen`.
    pub fn last_list_of(&self, key: (u32, u32), gen: u64) -> Option<Rc<Vec<RawItem>>> {
        (self.list_gens.get(&key) == Some(&gen)).then(|| self.lists.get(&key).cloned()).flatten()
    }

    /// Notes that `l`, when it is the last list of `key`, was collected from sources of
    /// generation `gen` (none: forgets any).
    pub fn tag_list(&mut self, key: (u32, u32), l: &Rc<Vec<RawItem>>, gen: Option<u64>) {
        match gen {
            Some(g) if self.lists.get(&key).is_some_and(|kept| Rc::ptr_eq(kept, l)) => {
                self.list_gens.insert(key, g);
            }
            _ => {
                self.list_gens.remove(&key);
            }
        }
    }

    /// Keeps `l` as the last list of target `key` when all its values are entries of the memo
    /// (and the lists stay within their bound).
    pub fn keep_list(&mut self, key: (u32, u32), l: &Rc<Vec<RawItem>>) {
        if let Some(old) = self.lists.get(&key) {
            if Rc::ptr_eq(old, l) {
                return;
            }
        }
        if !l.iter().all(|i| i.v.kept) {
            return;
        }
        let replaced = self.lists.get(&key).map_or(0, |o| list_bytes(o));
        if within_budget(&mut self.list_bytes, replaced, list_bytes(l)) {
            self.lists.insert(key, l.clone());
        }
    }

    /// What the last group of `slot` learned, when it was built from the very same values
    /// (the same entries, in order): its changed values, union and operators known false on
    /// every value, all functions of those values. The record holds its entries, so their
    /// addresses name them.
    ///
    /// Also when the values differ at up to `most` places only (the same number of values):
    /// the places where they differ are given with it (ascending; none: the same values).
    ///
    /// The places where the record's base differs from `raw` are found once per phase for
    /// all the records of that base (`diffs`, the cache's [`Cache::record_diffs`]); then
    /// the record's holes join them.
    pub fn group_record(&self, slot: Option<u32>, raw: &Rc<Vec<RawItem>>, most: usize, diffs: &mut FxMap<(usize, usize), (Base, Diff)>) -> Option<(Rc<GroupRecord>, Vec<usize>)> {
        let r = self.groups.get(slot? as usize)?.as_ref()?;
        if r.group.as_ref().is_some_and(|g| Rc::ptr_eq(&g.raw, raw)) {
            return Some((r.clone(), Vec::new()));
        }
        if r.base.len() != raw.len() {
            return None;
        }
        // Keyed by both addresses: the entry holds the base and the cache the list for the
        // phase, so neither address names another list meanwhile.
        let key = (Rc::as_ptr(&r.base) as *const Option<Rc<Interned>> as usize, Rc::as_ptr(raw) as usize);
        let (_, diff) = diffs.entry(key).or_insert_with(|| {
            let mut at = Vec::new();
            for (i, (a, b)) in r.base.iter().zip(raw.iter()).enumerate() {
                if !a.as_ref().is_some_and(|a| Rc::ptr_eq(a, &b.v)) {
                    if at.len() >= most {
                        return (r.base.clone(), None);
                    }
                    at.push(i);
                }
            }
            (r.base.clone(), Some(at.into()))
        });
        let diff = diff.as_deref()?;
        // Both short (a record has at most `most` holes): merged by sorting, each place once.
        let mut at: Vec<usize> = diff.iter().chain(&r.holes).copied().collect();
        at.sort_unstable();
        at.dedup();
        if at.len() > most {
            return None;
        }
        Some((r.clone(), at))
    }

    /// Makes `g` (just built) its slot's record, when at most [`near_most`] of its values are
    /// not memo entries (a transaction's own entries never come again: Envoy's x-request-id)
    /// and there are at most [`MEMO_GROUP_MAX`]. The record leaves those places empty (they
    /// differ from any later value).
    ///
    /// The entries of its list come from `cache` (see [`Cache::record_base`]).
    pub fn record_group(&mut self, g: &Rc<Group>, cache: &mut Cache) {
        let Some(slot) = g.slot.map(|s| s as usize) else { return };
        if g.len() > MEMO_GROUP_MAX {
            return;
        }
        let (Some(base), not_kept) = cache.record_base(&g.raw) else { return };
        // A place whose raw and changed values are both not entries counts twice.
        let open = not_kept + g.changed.iter().filter(|(_, e)| !e.kept).count();
        if open > near_most(g.raw.len()) {
            return;
        }
        // (A multiMatch group has several changed values at a place: one hole for them.)
        let mut holes: Vec<usize> = g.changed.iter().filter(|(i, e)| !e.kept && base.get(*i).is_some_and(Option::is_some)).map(|(i, _)| *i).collect();
        holes.dedup();
        let entry = |i: usize| holes.binary_search(&i).is_err() && base.get(i).is_some_and(Option::is_some);
        let changed = g.changed.iter().filter(|(i, _)| entry(*i)).cloned().collect();
        // Only a list of memo entries is one of the memo's lists (see `keep_group`).
        let complete = not_kept == 0 && holes.is_empty();
        if self.groups.len() <= slot {
            self.groups.resize_with(slot + 1, || None);
        }
        let bytes = record_bytes(g);
        if let Some(rec) = self.groups.get_mut(slot) {
            let replaced = rec.as_ref().map_or(0, |r| r.bytes);
            if !within_budget(&mut self.record_bytes, replaced, bytes) {
                return;
            }
            self.next_record += 1;
            *rec = Some(Rc::new(GroupRecord {
                id: self.next_record,
                base,
                holes,
                changed,
                union: g.union.get().cloned(),
                fails: g.fails.borrow().clone(),
                bytes,
                group: None,
                gen: None,
            }));
            g.record.set(self.next_record);
        }
        if complete {
            self.keep_group(g);
        }
    }

    /// Makes `g` the group its record gives whole, when its list is one of the memo's last
    /// lists (only those come again as the very same list; and they are bounded there).
    pub fn keep_group(&mut self, g: &Rc<Group>) {
        let kept = self.lists.values().chain(self.concats.values().map(|(_, l)| l)).any(|l| Rc::ptr_eq(l, &g.raw));
        if let (true, Some(r)) = (kept, self.record_of(g)) {
            r.group = Some(g.clone());
            r.gen = None;
        }
    }

    /// The group of `slot` its record gives whole, when its values came from sources of
    /// generation `gen` (targets of the request line, cookies and body only, no removal):
    /// the same sources make the same lists, so the same group, without collecting them.
    pub fn group_of_gen(&self, slot: usize, gen: u64) -> Option<Rc<Group>> {
        let r = self.groups.get(slot)?.as_ref()?;
        if r.gen == Some(gen) {
            r.group.clone()
        } else {
            None
        }
    }

    /// Notes that `g`, the group `slot`'s record gives whole, came from sources of generation
    /// `gen` (see [`Memo::group_of_gen`]).
    pub fn tag_group(&mut self, slot: usize, g: &Rc<Group>, gen: u64) {
        let Some(Some(r)) = self.groups.get_mut(slot) else { return };
        if r.gen != Some(gen) && r.group.as_ref().is_some_and(|kept| Rc::ptr_eq(kept, g)) {
            Rc::make_mut(r).gen = Some(gen);
        }
    }

    /// The last concatenation of target lists `parts` for signature `sig` (see
    /// [`Memo::keep_concat`]), when the parts are the very same lists.
    pub fn last_concat(&self, sig: u32, parts: &[Rc<Vec<RawItem>>]) -> Option<Rc<Vec<RawItem>>> {
        let (p, l) = self.concats.get(&sig)?;
        (p.len() == parts.len() && p.iter().zip(parts).all(|(a, b)| Rc::ptr_eq(a, b))).then(|| l.clone())
    }

    /// Keeps `l`, the concatenation of `parts`, when every part is one of the memo's last
    /// lists (so the same parts come again as the same lists) and within the bound.
    /// `ids`: the parts' target ids, `mask` their removal mask.
    pub fn keep_concat(&mut self, sig: u32, parts: &[Rc<Vec<RawItem>>], ids: &[u32], mask: u32, l: &Rc<Vec<RawItem>>) {
        if parts.len() != ids.len() || !parts.iter().zip(ids).all(|(p, id)| self.lists.get(&(*id, mask)).is_some_and(|kept| Rc::ptr_eq(kept, p))) {
            return;
        }
        let replaced = self.concats.get(&sig).map_or(0, |(_, o)| std::mem::size_of_val(o.as_slice()));
        if within_budget(&mut self.list_bytes, replaced, std::mem::size_of_val(l.as_slice())) {
            self.concats.insert(sig, (parts.to_vec(), l.clone()));
        }
    }

    /// The record that describes `g`, to update (None when another group's replaced it).
    fn record_of(&mut self, g: &Group) -> Option<&mut GroupRecord> {
        let r = self.groups.get_mut(g.slot? as usize)?.as_mut().filter(|r| r.id == g.record.get())?;
        Some(Rc::make_mut(r))
    }

    /// Records the union of the values of `g`.
    pub fn keep_union(&mut self, g: &Group, u: &Satisfied) {
        if let Some(r) = self.record_of(g) {
            r.union = Some(u.clone());
        }
    }

    /// Records that operator `bit` is false on every value of `g` (in `g` and in its record).
    pub fn all_failed(&mut self, g: &Group, bit: u32) {
        set_bit(&mut g.fails.borrow_mut(), bit);
        if let Some(r) = self.record_of(g) {
            set_bit(&mut r.fails, bit);
        }
    }

    /// Whether every entry the group records hold is one of the memo's, and the records within
    /// their bound.
    #[cfg(test)]
    pub fn records_within_memo(&self) -> bool {
        let keys = &self.keys;
        let held = |e: &Rc<Interned>| {
            let hash = std::hash::BuildHasher::hash_one(keys, &*e.raw);
            [&self.young, &self.old].iter().any(|t| t.find(hash, |x| Rc::ptr_eq(x, e)).is_some())
        };
        let records: Vec<&GroupRecord> = self.groups.iter().flatten().map(|r| &**r).collect();
        let bytes: usize = records.iter().map(|r| r.bytes).sum();
        bytes == self.record_bytes && bytes <= MEMO_RECORD_BYTES && records.iter().all(|r| r.base.iter().flatten().all(held) && r.changed.iter().all(|(_, e)| held(e))) && self.lists.values().all(|l| l.iter().all(|i| held(&i.v))) && self.list_bytes <= MEMO_RECORD_BYTES
    }

    /// Values held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
}

/// One collected value of a target list, before any transformation.
#[derive(Clone)]
pub(crate) struct RawItem {
    pub prefix: &'static str,
    pub key: Option<Rc<[u8]>>,
    pub v: Rc<Interned>,
}

/// A transaction's cache: boxed, so that handing it to and from the spares moves a pointer
/// (its ~800 bytes were copied a few times per transaction), and taken out once when the
/// transaction ends (see `Transaction::drop`).
pub(crate) type CacheCell = std::cell::RefCell<std::mem::ManuallyDrop<Box<Cache>>>;

pub(crate) struct Cache {
    /// Stable request bytes copied once into shared buffers (address -> copy).
    raw: FxMap<(usize, usize), Rc<Interned>>,
    /// target signature -> its collected values, for the current phase.
    pub lists: FxMap<u32, Rc<Vec<RawItem>>>,
    /// A target list (by the address of its `Rc`, alive while `lists` holds it: cleared with
    /// it) -> what any of its values satisfies (see [`Group::union`]).
    pub list_unions: FxMap<usize, Satisfied>,
    /// A target list (as `list_unions`) -> the bytes any of its values contains.
    pub list_bytes: FxMap<usize, [u64; 4]>,
    /// Group slot -> its number of values and what any of them may satisfy after its chain,
    /// computed without building the group (`link::slot_cannot_match`); None: not known that
    /// way (runtime removals, values that are not stable).
    pub slot_unions: FxMap<u32, Option<(usize, Satisfied)>>,
    /// A target list (as `list_unions`) -> its entries as group records keep them, and how
    /// many of its values are not memo entries (see [`Cache::record_base`]).
    record_bases: FxMap<usize, (Option<Base>, usize)>,
    /// (a record base, a target list) by address -> where they differ (see
    /// [`Memo::group_record`]); the entry holds the base for the phase.
    pub record_diffs: FxMap<(usize, usize), (Base, Diff)>,
    /// (target id, removal mask) -> that one target's collected values, for the current phase.
    pub targets: FxMap<(u32, u32), Rc<Vec<RawItem>>>,
    /// (target signature, chain id) -> the prepared values, for the current phase, when
    /// runtime target removals apply (else in `slots`).
    pub groups: FxMap<(u32, u32), Rc<Group>>,
    /// `Rule::group_slot` -> the prepared values, for the current phase (no hashing: a CRS
    /// request looks groups up a few hundred times).
    pub slots: Vec<Option<Rc<Group>>>,
    /// The slots filled since the last [`Cache::clear_prepared`] (set by [`Cache::fill_slot`]),
    /// which empties only those: a CRS rule set has ~1,000 slots, a request fills a few dozen
    /// per phase.
    slots_filled: Vec<u32>,
    /// (value address, length, transformation) -> its result (None: the value unchanged).
    tf: FxMap<TfKey, Option<Rc<[u8]>>>,
    /// (value address, length, chain id) -> index into `finals`.
    chains: FxMap<(usize, usize, u32), usize>,
    finals: Vec<Final>,
    scans: FxMap<(usize, usize), Rc<Scan>>,
    /// The literal part of the scans of large contents, by lowercase form (see [`Scan::of`]).
    big_lits: BigLits,
    sqli: FxMap<(usize, usize), Option<Rc<str>>>,
    xss: FxMap<(usize, usize), bool>,
    /// Entries of transformation results used by this transaction (kept alive: see
    /// [`Cache::derived`]).
    held: Vec<Rc<Interned>>,
    /// Target lists used by this transaction, kept alive to its end: their values may come
    /// from the memo's last lists (not interned here), and the address-keyed tables key them.
    held_lists: Vec<Rc<Vec<RawItem>>>,
    /// Groups given whole by the memo's records, kept alive to the end of the transaction
    /// (their changed values are keyed by address too).
    held_groups: Vec<Rc<Group>>,
    /// Every byte string this cache holds, by content: equal values (a header and its
    /// lowercase form when it had no capitals, two chains with the same result) share one
    /// allocation, so the address-keyed memos above compute once per distinct content.
    contents: Contents,
    /// The memory budget the transaction using these tables runs under (see `tx::budget`).
    budget_limit: usize,
    /// Hit/miss counters (always kept: a few additions per value).
    pub stats: CacheStats,
    /// Per (targets, chain) group use, only while profiling.
    pub group_stats: Option<HashMap<(u32, u32), GroupStat>>,
    pools: Pools,
    /// The allocation of the parts of a target list being concatenated (empty between uses).
    pub parts: Vec<Rc<Vec<RawItem>>>,
}

/// Most entries `Cache::held` keeps room for between transactions.
const HELD_KEEP: usize = 16 * 1024;

/// Tables that grew past this many entries (a request with thousands of values) are not kept
/// for the next transaction.
const SPARE_MAX_ENTRIES: usize = 1024;

/// Most objects of each kind a pool keeps, and the largest list capacity it keeps (a pool
/// holds at most ~2 MB: a large body's lists of thousands of values are freed).
const POOL_MAX: usize = 256;
const POOL_LIST_MAX: usize = 128;

/// Emptied objects of the last phases and transactions, reused instead of allocated: a CRS
/// GET builds ~90 groups, ~170 value lists, ~80 scans and ~50 interned values. Reuse saves
/// the allocator's work, and the same few blocks serve every request instead of blocks
/// spread over the heap (cold-cache and TLB misses in Envoy). Each pooled `Rc` is unique.
#[derive(Default)]
struct Pools {
    scans: Vec<Rc<Scan>>,
    interned: Vec<Rc<Interned>>,
    groups: Vec<Rc<Group>>,
    lists: Vec<Rc<Vec<RawItem>>>,
    /// What a pooled group's `raw` points to (made by the first one).
    empty: Option<Rc<Vec<RawItem>>>,
}

/// `v` in a pooled allocation when there is one.
fn reuse<T>(pool: &mut Vec<Rc<T>>, v: T) -> Rc<T> {
    fill_in(pool.pop(), v)
}

/// `v` in the allocation of `pooled` (taken from a pool), else in a new one.
fn fill_in<T>(pooled: Option<Rc<T>>, v: T) -> Rc<T> {
    match pooled {
        Some(mut rc) => match Rc::get_mut(&mut rc) {
            Some(slot) => {
                *slot = v;
                rc
            }
            None => Rc::new(v),
        },
        None => Rc::new(v),
    }
}

/// Keeps `rc` in `pool` when it is the last reference (and `keep` approves), else drops it.
fn put<T>(pool: &mut Vec<Rc<T>>, mut rc: Rc<T>, keep: impl FnOnce(&mut T) -> bool) {
    if pool.len() < POOL_MAX && Rc::get_mut(&mut rc).is_some_and(keep) {
        pool.push(rc);
    }
}

impl Pools {
    fn put_group(&mut self, g: Rc<Group>) {
        let mut raw = None;
        put(&mut self.groups, g, |g| {
            g.changed.clear();
            g.union = std::cell::OnceCell::new();
            g.fails.get_mut().clear();
            g.known = std::cell::OnceCell::new();
            raw = Some(std::mem::replace(&mut g.raw, self.empty.get_or_insert_with(Rc::default).clone()));
            g.changed.capacity() <= POOL_LIST_MAX
        });
        if let Some(raw) = raw {
            self.put_list(raw);
        }
    }

    fn put_list(&mut self, l: Rc<Vec<RawItem>>) {
        put(&mut self.lists, l, |l| {
            l.clear();
            l.capacity() <= POOL_LIST_MAX
        });
    }
}

impl Default for Cache {
    fn default() -> Cache {
        Cache::sized(0)
    }
}

impl Cache {
    /// Tables sized for a rule set of `rules` rules: nothing is allocated for
    /// small rule sets; a CRS-sized one starts at the sizes a request needs.
    pub fn sized(rules: usize) -> Cache {
        let n = |c: usize| if rules >= 200 { c } else { 0 };
        Cache {
            raw: FxMap::with_capacity_and_hasher(n(64), Default::default()),
            lists: FxMap::with_capacity_and_hasher(n(64), Default::default()),
            list_unions: FxMap::default(),
            list_bytes: FxMap::default(),
            slot_unions: FxMap::default(),
            record_bases: FxMap::default(),
            record_diffs: FxMap::default(),
            targets: FxMap::with_capacity_and_hasher(n(64), Default::default()),
            groups: FxMap::with_capacity_and_hasher(n(128), Default::default()),
            slots: Vec::new(),
            slots_filled: Vec::new(),
            tf: FxMap::default(),
            chains: FxMap::with_capacity_and_hasher(n(64), Default::default()),
            finals: Vec::with_capacity(n(64)),
            scans: FxMap::with_capacity_and_hasher(n(64), Default::default()),
            big_lits: BigLits { limit: super::budget::DEFAULT, ..BigLits::default() },
            sqli: FxMap::with_capacity_and_hasher(n(32), Default::default()),
            xss: FxMap::with_capacity_and_hasher(n(32), Default::default()),
            contents: Contents::with_capacity(n(128)),
            budget_limit: super::budget::DEFAULT,
            held: Vec::new(),
            held_lists: Vec::new(),
            held_groups: Vec::new(),
            stats: CacheStats::default(),
            group_stats: None,
            pools: Pools::default(),
            parts: Vec::new(),
        }
    }

    /// Memoized entries held (transformations, scans, interned values, libinjection verdicts).
    #[cfg(test)]
    pub(crate) fn memo_entries(&self) -> usize {
        self.raw.len() + self.tf.len() + self.chains.len() + self.finals.len() + self.scans.len() + self.contents.set.len() + self.sqli.len() + self.xss.len()
    }

    /// Makes `limit` the memory budget these tables run under (see `tx::budget`).
    pub(crate) fn set_budget(&mut self, limit: usize) {
        self.budget_limit = limit;
        self.big_lits.limit = limit;
    }

    /// Whether the thread's transactions hold more than the memory budget these tables run
    /// under (see `tx::budget`): the byte strings made since the last rule would have
    /// passed it, and the phase stops.
    pub(crate) fn over_budget(&self) -> bool {
        super::budget::held() > self.budget_limit
    }

    /// Whether no table grew past [`SPARE_MAX_ENTRIES`]: worth keeping for the next
    /// transaction once cleared.
    pub(crate) fn keepable(&self) -> bool {
        [self.raw.capacity(), self.tf.capacity(), self.chains.capacity(), self.scans.capacity(), self.contents.set.capacity(), self.finals.capacity()]
            .iter()
            .all(|&n| n <= SPARE_MAX_ENTRIES)
    }

    /// Room for about `values` more request values (a CRS transaction memoizes a few entries
    /// per value and table).
    pub(crate) fn reserve(&mut self, values: usize) {
        let values = values.min(1 << 16);
        self.raw.reserve(2 * values);
        self.contents.set.reserve(4 * values);
        self.scans.reserve(2 * values);
        self.chains.reserve(4 * values);
        self.finals.reserve(4 * values);
    }

    /// Empties every table, keeping their allocations.
    pub(crate) fn clear(&mut self) {
        // Holders before what they hold, so the pooled objects are the last references.
        self.clear_prepared();
        // Every slot is empty now: they stay, for the next transaction (emptying the list
        // would visit each of them, and its first phase would write each again).
        self.clear_targets();
        for (_, i) in self.raw.drain() {
            put(&mut self.pools.interned, i, |i| {
                i.scan = std::cell::OnceCell::new();
                true
            });
        }
        for i in self.held.drain(..) {
            put(&mut self.pools.interned, i, |i| {
                i.scan = std::cell::OnceCell::new();
                true
            });
        }
        // A CRS request holds a few thousand (one per group and changed value); a large
        // body's hundred thousand are not kept.
        self.held.shrink_to(HELD_KEEP);
        // Before the lists go back to their pool (their last reference: see `put_list`).
        self.held_groups.clear();
        while let Some(l) = self.held_lists.pop() {
            self.pools.put_list(l);
        }
        self.tf.clear();
        self.chains.clear();
        self.finals.clear();
        for (_, sc) in self.scans.drain() {
            put(&mut self.pools.scans, sc, |_| true);
        }
        self.big_lits.map.clear();
        self.big_lits.charge.release();
        self.sqli.clear();
        self.xss.clear();
        self.contents.clear();
        self.stats = CacheStats::default();
        self.group_stats = None;
    }
}

impl Cache {
    /// Forgets the prepared groups and lists (their values may change: a new phase, a `ctl`),
    /// keeping the slots' number.
    pub(crate) fn clear_prepared(&mut self) {
        // Each phase and ctl clears: only what was filled is visited (an empty table's drain
        // would still reset its whole control array).
        if !self.groups.is_empty() {
            for (_, g) in self.groups.drain() {
                self.pools.put_group(g);
            }
        }
        for s in self.slots_filled.drain(..) {
            if let Some(g) = self.slots.get_mut(s as usize).and_then(Option::take) {
                self.pools.put_group(g);
            }
        }
        if !self.lists.is_empty() {
            for (_, l) in self.lists.drain() {
                self.pools.put_list(l);
            }
        }
        self.list_unions.clear();
        self.list_bytes.clear();
        self.slot_unions.clear();
        self.record_bases.clear();
        self.record_diffs.clear();
    }

    /// The entries of `list` (held by `lists`) as group records keep them, once per phase for
    /// all its groups' records, and how many of its values are not memo entries; no entries
    /// when those are too many for a record ([`near_most`]: most lists of new values).
    pub(crate) fn record_base(&mut self, list: &Rc<Vec<RawItem>>) -> (Option<Base>, usize) {
        self.record_bases
            .entry(Rc::as_ptr(list) as usize)
            .or_insert_with(|| {
                let not_kept = list.iter().filter(|i| !i.v.kept).count();
                let base = (not_kept <= near_most(list.len())).then(|| list.iter().map(|i| i.v.kept.then(|| i.v.clone())).collect());
                (base, not_kept)
            })
            .clone()
    }

    /// Puts group `g` in slot `s` (see `slots`); false when there is no such slot.
    pub(crate) fn fill_slot(&mut self, s: usize, g: Rc<Group>) -> bool {
        let Some(entry) = self.slots.get_mut(s) else { return false };
        if entry.replace(g).is_none() {
            self.slots_filled.push(s as u32);
        }
        true
    }

    /// Forgets the per-target lists (a new phase).
    pub(crate) fn clear_targets(&mut self) {
        if !self.targets.is_empty() {
            for (_, l) in self.targets.drain() {
                self.pools.put_list(l);
            }
        }
    }

    /// Keeps group `g` alive to the end of the transaction (see `held_groups`).
    pub(crate) fn hold_group(&mut self, g: &Rc<Group>) {
        self.held_groups.push(g.clone());
    }

    /// Keeps target list `l` alive to the end of the transaction (see `held_lists`).
    pub(crate) fn hold_list(&mut self, l: &Rc<Vec<RawItem>>) {
        self.held_lists.push(l.clone());
    }

    /// Gives back a list [`Cache::new_list`] gave and that was not used.
    pub(crate) fn return_list(&mut self, l: Rc<Vec<RawItem>>) {
        self.pools.put_list(l);
    }

    /// An empty value list to fill (pooled: unique).
    pub(crate) fn new_list(&mut self) -> Rc<Vec<RawItem>> {
        self.pools.lists.pop().unwrap_or_default()
    }

    /// A group of `raw` prepared by `fill`, which adds the changed values to the (emptied,
    /// pooled) vector it is given.
    pub(crate) fn new_group(&mut self, raw: Rc<Vec<RawItem>>, multi: bool, slot: Option<u32>, fill: impl FnOnce(&mut Self, &mut Vec<(usize, Rc<Interned>)>)) -> Rc<Group> {
        let mut pooled = self.pools.groups.pop();
        let mut changed = pooled.as_mut().and_then(Rc::get_mut).map(|g| std::mem::take(&mut g.changed)).unwrap_or_default();
        fill(self, &mut changed);
        let fails = pooled.as_mut().and_then(Rc::get_mut).map(|g| std::mem::take(g.fails.get_mut())).unwrap_or_default();
        fill_in(pooled, Group { raw, changed, multi, union: std::cell::OnceCell::new(), slot, fails: std::cell::RefCell::new(fails), record: std::cell::Cell::new(0), known: std::cell::OnceCell::new() })
    }

    /// The one shared copy of `b` (see `contents`).
    fn share(&mut self, b: &[u8]) -> Rc<[u8]> {
        share(&mut self.contents, b)
    }

    /// `t` applied to a stable value, memoized.
    pub fn apply<'a>(&mut self, v: Val<'a>, t: Transform) -> Val<'a> {
        let (p, l) = v.key();
        if let Some(entry) = self.tf.get(&(p, l, t)) {
            return match entry {
                None => v,
                Some(rc) => Val::R(rc.clone()),
            };
        }
        let out = match t.apply(v.bytes()) {
            std::borrow::Cow::Borrowed(_) => None,
            std::borrow::Cow::Owned(o) => Some(self.share(&o)),
        };
        self.tf.insert((p, l, t), out.clone());
        match out {
            None => v,
            Some(rc) => Val::R(rc),
        }
    }

    /// The `multiMatch` intermediates of a stable value `raw` (byte set `bytes`): each step's
    /// result where it differs from the step before, in chain order, given to `out`. Steps
    /// are applied directly, not memoized (the intermediates of one rule's chain are seldom
    /// another's), and skipped when the value holds none of the bytes they could change.
    pub fn variants(&mut self, raw: &Rc<[u8]>, bytes: [u64; 4], tfs: &[Transform], triggers: &[Option<[u64; 4]>], mut out: impl FnMut(Rc<[u8]>)) {
        let mut cur = raw.clone();
        let mut have = bytes;
        for (i, &t) in tfs.iter().enumerate() {
            if untouched(&have, triggers.get(i).unwrap_or(&None)) {
                continue;
            }
            let next = match t.apply(&cur) {
                std::borrow::Cow::Borrowed(_) => continue,
                std::borrow::Cow::Owned(o) => self.share(&o),
            };
            if !Rc::ptr_eq(&next, &cur) {
                have = byte_set(&next);
                out(next.clone());
                cur = next;
            }
        }
    }

    /// A whole chain (interned as `id`) applied to a stable value: one lookup
    /// when seen before. Returns the result and a handle for [`Cache::chain_scan`].
    /// `triggers`: each step's trigger bytes; `bytes`: the value's byte set when known: the
    /// steps before the first one that changes the value are run only if they could.
    pub fn chain<'a>(&mut self, v: Val<'a>, id: u32, tfs: &[Transform], triggers: &[Option<[u64; 4]>], bytes: Option<[u64; 4]>) -> (Val<'a>, usize) {
        let key = (v.key().0, v.key().1, id);
        if let Some(&i) = self.chains.get(&key) {
            self.stats.chains_reused += 1;
            let out = match self.finals.get(i).and_then(|f| f.val.clone()) {
                Some(rc) => Val::R(rc),
                None => v,
            };
            return (out, i);
        }
        let val = if v.bytes().len() >= PREFIX_MEMO_MIN {
            self.chain_by_steps(&v, tfs, triggers, bytes)
        } else {
            // Steps are applied directly: most leave a benign value unchanged
            // (no copy), which costs less than a memo lookup per step.
            let mut owned: Option<Vec<u8>> = None;
            let mut have = bytes;
            for (i, &t) in tfs.iter().enumerate() {
                if have.is_some_and(|h| untouched(&h, triggers.get(i).unwrap_or(&None))) {
                    continue;
                }
                let input: &[u8] = owned.as_deref().unwrap_or(v.bytes());
                if let std::borrow::Cow::Owned(o) = t.apply(input) {
                    // The byte set is not recomputed: later steps all run.
                    have = None;
                    owned = Some(o);
                }
            }
            owned.map(|o| self.share(&o))
        };
        self.stats.chains_computed += 1;
        let i = self.finals.len();
        self.finals.push(Final { val: val.clone(), scan: None });
        self.chains.insert(key, i);
        (val.map(Val::R).unwrap_or(v), i)
    }

    /// A chain on a large stable value, step by step through the memo of single steps
    /// ([`Cache::apply`]): chains with a common prefix (`t:utf8toUnicode,t:urlDecodeUni`
    /// begins a dozen CRS chains) compute it once, so each distinct prefix costs one pass
    /// over the value, not each chain. The result when it differs from `v`.
    fn chain_by_steps(&mut self, v: &Val<'_>, tfs: &[Transform], triggers: &[Option<[u64; 4]>], bytes: Option<[u64; 4]>) -> Option<Rc<[u8]>> {
        let mut cur = v.clone();
        let mut have = bytes;
        for (i, &t) in tfs.iter().enumerate() {
            if have.is_some_and(|h| untouched(&h, triggers.get(i).unwrap_or(&None))) {
                continue;
            }
            // Past the memory budget the phase stops after this rule, and the transaction
            // is refused (see `tx::budget`): no more copies of a value too long to be a memo
            // entry (what is made of it here is not recorded beyond this transaction).
            if v.bytes().len() > MEMO_VALUE_MAX && self.over_budget() {
                break;
            }
            let before = cur.key();
            cur = self.apply(cur, t);
            if cur.key() != before {
                // The byte set is not recomputed: later steps all run.
                have = None;
            }
        }
        match cur {
            Val::R(rc) if cur_differs(&rc, v) => Some(rc),
            _ => None,
        }
    }

    /// The prefilter scan of a chain result (computed once).
    pub fn chain_scan(&mut self, handle: usize, v: &Val<'_>, pf: &Prefilter) -> Option<Rc<Scan>> {
        let f = self.finals.get_mut(handle)?;
        if f.scan.is_none() {
            let key = v.key();
            let stats = &mut self.stats;
            let big = &mut self.big_lits;
            let scan = self.scans.entry(key).or_insert_with(|| {
                stats.scans_computed += 1;
                reuse(&mut self.pools.scans, Scan::of(v.bytes(), pf, big))
            }).clone();
            f.scan = Some(scan);
        }
        f.scan.clone()
    }

    /// The entry of stable request bytes (one per distinct address): the memo's when it has
    /// one, else a new one for this transaction.
    pub fn intern(&mut self, b: &[u8], memo: &mut Memo) -> Rc<Interned> {
        let key = addr_key(b);
        if let Some(i) = self.raw.get(&key) {
            return i.clone();
        }
        let contents = &mut self.contents;
        let i = match memo.entry(b, &mut self.stats, || share(contents, b)) {
            Some(e) => e,
            None => {
                let raw = self.share(b);
                let mut e = Interned::new(raw, false);
                // A large request value's bytes too: chains skip the steps that cannot change
                // it (most, on a long run of plain text), one pass instead of one per step.
                if e.raw.len() > 4096 {
                    e.bytes = byte_set(&e.raw);
                }
                reuse(&mut self.pools.interned, e)
            }
        };
        self.raw.insert(key, i.clone());
        i
    }

    /// Keeps `e` alive for this transaction (see [`Cache::derived`]).
    pub fn hold(&mut self, e: Rc<Interned>) {
        self.held.push(e);
    }

    /// The entry of a transformation's result `v` (held by this cache), kept alive for this
    /// transaction: the address-keyed tables may key its bytes.
    pub fn derived(&mut self, v: Rc<[u8]>, memo: &mut Memo) -> Rc<Interned> {
        let e = memo.entry(&v, &mut self.stats, || v.clone()).unwrap_or_else(|| reuse(&mut self.pools.interned, Interned::new(v.clone(), false)));
        self.held.push(e.clone());
        e
    }

    /// The values of `item` after chain `id` (transformations `tfs`, their `triggers`) where
    /// they differ from it, given to `out`: for `multi`, every intermediate result that differs
    /// from the step before. From the memo when the chain ran on the value before.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(&mut self, item: &Rc<Interned>, id: u32, multi: bool, tfs: &[Transform], triggers: &[Option<[u64; 4]>], memo: &mut Memo, out: &mut impl FnMut(Rc<Interned>)) {
        let key = id | if multi { 0x8000_0000 } else { 0 };
        let held = &mut self.held;
        if item.chain_out(key, &mut |e| {
            held.push(e.clone());
            out(e);
        }) {
            return;
        }
        if multi {
            let mut vals = Vec::new();
            self.variants(&item.raw, item.bytes, tfs, triggers, |v| vals.push(v));
            let mut steps = Vec::with_capacity(vals.len());
            for v in vals {
                let e = self.derived(v, memo);
                steps.push(Rc::downgrade(&e));
                out(e);
            }
            item.set_chain_out(key, if steps.is_empty() { ChainOut::Same } else { ChainOut::Steps(steps.into()) });
            return;
        }
        match self.chain(Val::R(item.raw.clone()), id, tfs, triggers, Some(item.bytes)).0 {
            Val::R(rc) if !Rc::ptr_eq(&rc, &item.raw) => {
                let e = self.derived(rc, memo);
                item.set_chain_out(key, ChainOut::One(Rc::downgrade(&e)));
                out(e);
            }
            _ => item.set_chain_out(key, ChainOut::Same),
        }
    }

    /// The scan of `v` (memoized by address).
    pub fn scan_rc(&mut self, v: &Rc<[u8]>, pf: &Prefilter) -> Rc<Scan> {
        let stats = &mut self.stats;
        let big = &mut self.big_lits;
        stats.scans_reused += 1;
        self.scans.entry(addr_key(v)).or_insert_with(|| {
            stats.scans_reused -= 1;
            stats.scans_computed += 1;
            reuse(&mut self.pools.scans, Scan::of(v, pf, big))
        }).clone()
    }

    pub fn scan(&mut self, v: &Val<'_>, pf: &Prefilter) -> Rc<Scan> {
        let counts = (&mut self.stats.scans_reused, &mut self.stats.scans_computed);
        let big = &mut self.big_lits;
        let pool = &mut self.pools.scans;
        memo(&mut self.scans, &mut self.contents, counts, v, || reuse(pool, Scan::of(v.bytes(), pf, big)))
    }

    pub fn sqli(&mut self, v: &Val<'_>) -> Option<Rc<str>> {
        let counts = (&mut self.stats.libinjection_reused, &mut self.stats.libinjection_computed);
        memo(&mut self.sqli, &mut self.contents, counts, v, || {
            crate::operators::libinjection::detect_sqli(v.bytes()).map(Rc::from)
        })
    }

    pub fn xss(&mut self, v: &Val<'_>) -> bool {
        let counts = (&mut self.stats.libinjection_reused, &mut self.stats.libinjection_computed);
        memo(&mut self.xss, &mut self.contents, counts, v, || crate::operators::libinjection::detect_xss(v.bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(b: &[u8], kept: bool) -> RawItem {
        RawItem { prefix: "ARGS", key: None, v: Rc::new(Interned::new(Rc::from(b), kept)) }
    }

    /// A multiMatch group has a changed value per step at a place: where none of them is a
    /// memo entry, its record has one hole there, and a group of the same values is near at
    /// that one place (found by fuzzing: the place given once per step made a near group run
    /// more values than it has).
    #[test]
    fn a_multimatch_record_has_one_hole_per_place() {
        let mut cache = Cache::default();
        let mut memo = Memo::new((1, 2));
        let list = Rc::new(vec![item(b"x", true), item(b"%42AD", true), item(b"y", true)]);
        let steps: Vec<Rc<Interned>> = [&b"BAD"[..], b"bad"].iter().map(|b| Rc::new(Interned::new(Rc::from(*b), false))).collect();
        let g = cache.new_group(list.clone(), true, Some(0), |_, changed| changed.extend(steps.iter().map(|e| (1, e.clone()))));
        memo.record_group(&g, &mut cache);
        let (rec, at) = memo.group_record(Some(0), &list, near_most(list.len()), &mut cache.record_diffs).expect("a near record");
        assert_eq!(at, vec![1]);
        assert!(!rec.open_at(&[1], &list), "the raw value is an entry");
        // A list that also differs at another place: both places, once each, in order.
        let other = Rc::new(vec![item(b"x2", false), list[1].clone(), list[2].clone()]);
        let (_, at) = memo.group_record(Some(0), &other, near_most(other.len()), &mut cache.record_diffs).expect("a near record");
        assert_eq!(at, vec![0, 1]);
    }
}
