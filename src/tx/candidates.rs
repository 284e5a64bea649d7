//! The candidate rules of a phase, computed from the request's distinct values.
//!
//! A rule whose first link reads only phase-stable request data (`Rule::target_sig`), is not
//! negated and has a prefilter requirement (`Rule::prefilter`: bytes or literals every match
//! contains) cannot match unless one of its values, after its transformations, satisfies that
//! requirement. So the rules a phase may match follow from its distinct values: each distinct
//! value transformed once per distinct chain (a step skipped when the value has none of the
//! bytes that step can change), each distinct transformed form scanned once with the rule
//! set's prefilter, and a rule is a candidate when the union of its values' scans has its
//! requirement. The other rules (TX checks, negated or requirement-free operators, values
//! known only at run time) always run.
//!
//! [`Transaction::candidates`] computes this picture for the values the transaction holds
//! now, with its counts; `wafer candidates` prints it over a corpus and checks it against the
//! reference engine (every rule that matched is a candidate or always runs).

use std::collections::HashMap;

use super::Transaction;
use crate::compile::prefilter::Satisfied;
use crate::compile::{quick::Quick, Entry, Rule};

/// How a phase's rule is decided (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Its requirement and its values decide whether it may match.
    Indexed,
    /// A test of one TX number (the CRS's paranoia-level and score checks), or a rule of phase
    /// 1's prefix that reads and writes only TX: it runs, cheaply.
    TxCheck,
    /// Anything else: it runs.
    Always,
}

/// What a phase's values make of its rules, and what computing it took.
#[derive(Debug, Default, Clone)]
pub struct Picture {
    pub phase: u8,
    /// Rule entries of the phase (markers not counted).
    pub rules: usize,
    pub indexed: usize,
    pub tx_checks: usize,
    pub always: usize,
    /// Of the indexed rules: those a value satisfies the requirement of.
    pub candidates: usize,
    /// Values the indexed rules read (with repeats), distinct values, distinct (value, chain).
    pub values: usize,
    pub distinct_values: usize,
    pub pairs: usize,
    /// Transformation steps run, and skipped because the value had none of the bytes the step changes.
    pub steps_run: usize,
    pub steps_skipped: usize,
    /// Distinct transformed forms scanned.
    pub scans: usize,
    /// By entry index of the phase: `Some(kind, may match)`; None for a marker.
    pub entries: Vec<Option<(Kind, bool)>>,
}

impl Picture {
    /// Whether the rule at entry `i` may match (or must run): false only for an indexed rule
    /// none of whose values satisfies its requirement.
    pub fn may_match(&self, i: usize) -> bool {
        self.entries.get(i).copied().flatten().is_none_or(|(_, m)| m)
    }

    /// Sums (for a report over many transactions).
    pub fn add(&mut self, o: &Picture) {
        self.rules += o.rules;
        self.indexed += o.indexed;
        self.tx_checks += o.tx_checks;
        self.always += o.always;
        self.candidates += o.candidates;
        self.values += o.values;
        self.distinct_values += o.distinct_values;
        self.pairs += o.pairs;
        self.steps_run += o.steps_run;
        self.steps_skipped += o.steps_skipped;
        self.scans += o.scans;
    }
}

/// The kind of a rule (its first link).
pub fn kind(r: &Rule, q: Option<&Quick>) -> Kind {
    if !r.negated && r.target_sig.is_some() && r.prefilter.is_some() && !r.targets.is_empty() {
        return Kind::Indexed;
    }
    match q {
        Some(Quick::TxNum { .. } | Quick::TxSkip { .. } | Quick::Pre) => Kind::TxCheck,
        _ => Kind::Always,
    }
}

/// A byte string's hash, keyed by the rule set's keys (values are the attacker's).
fn hash_of(keys: (u64, u64), v: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(keys.0, keys.1);
    h.write(v);
    h.finish()
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<crate::fx::Fx>>;

/// The per-phase tables: distinct values, their transformed forms and scans, all by number.
struct Tables<'a> {
    keys: (u64, u64),
    words: usize,
    /// Distinct values by number, their byte sets, and a table of their numbers by bytes.
    vals: Vec<std::borrow::Cow<'a, [u8]>>,
    bytes: Vec<[u64; 4]>,
    by_bytes: hashbrown::HashTable<u32>,
    /// By value number: the number of its own scan in `sats`, once made.
    raw_scan: Vec<u32>,
    /// Distinct transformed forms (that differ from their value) and their scans' numbers.
    forms: Vec<Vec<u8>>,
    form_scan: Vec<u32>,
    by_form: hashbrown::HashTable<u32>,
    /// Scans (and unions of a value's multiMatch forms) by number.
    sats: Vec<Satisfied>,
    /// (value, chain id, multiMatch) -> the number in `sats` of what its forms satisfy.
    pairs: FxMap<(u32, u32, bool), u32>,
    /// By target id (`Rule::target_sigs`): its value numbers, `ids[from..to]`.
    targets: FxMap<u32, (u32, u32)>,
    ids: Vec<u32>,
    /// (target list signature, chain id, multiMatch) -> whether its union has each requirement
    /// (the union itself, by number in `sats`).
    groups: FxMap<(u32, u32, bool), u32>,
    /// Scans made.
    scanned: usize,
}

const NONE: u32 = u32::MAX;

impl<'a> Tables<'a> {
    /// The number of value `v` (a new one when its bytes are new).
    fn value(&mut self, v: std::borrow::Cow<'a, [u8]>) -> u32 {
        let h = hash_of(self.keys, &v);
        let (vals, keys) = (&self.vals, self.keys);
        if let Some(&id) = self.by_bytes.find(h, |&id| vals.get(id as usize).is_some_and(|x| **x == *v)) {
            return id;
        }
        let id = self.vals.len() as u32;
        self.bytes.push(byte_set(&v));
        self.raw_scan.push(NONE);
        self.vals.push(v);
        let vals = &self.vals;
        self.by_bytes.insert_unique(h, id, |&i| vals.get(i as usize).map_or(0, |x| hash_of(keys, x)));
        id
    }

    /// The scan of value `id` as it is.
    fn raw_scan(&mut self, rs: &crate::compile::Ruleset, id: u32) -> u32 {
        let known = self.raw_scan.get(id as usize).copied().unwrap_or(NONE);
        if known != NONE {
            return known;
        }
        let s = rs.prefilter.scan(self.vals.get(id as usize).map_or(&[][..], |v| &v[..]));
        self.scanned += 1;
        let n = self.sats.len() as u32;
        self.sats.push(s);
        if let Some(slot) = self.raw_scan.get_mut(id as usize) {
            *slot = n;
        }
        n
    }

    /// The scan of a transformed form, once per distinct form.
    fn form_scan(&mut self, rs: &crate::compile::Ruleset, form: Vec<u8>) -> u32 {
        let h = hash_of(self.keys, &form);
        let forms = &self.forms;
        if let Some(&f) = self.by_form.find(h, |&f| forms.get(f as usize).is_some_and(|x| *x == form)) {
            return self.form_scan.get(f as usize).copied().unwrap_or(NONE);
        }
        let n = self.sats.len() as u32;
        self.sats.push(rs.prefilter.scan(&form));
        self.scanned += 1;
        let f = self.forms.len() as u32;
        self.forms.push(form);
        self.form_scan.push(n);
        let (forms, keys) = (&self.forms, self.keys);
        self.by_form.insert_unique(h, f, |&i| forms.get(i as usize).map_or(0, |x| hash_of(keys, x)));
        n
    }
}

impl Transaction {
    /// The candidate rules of `phase` (1-5) for the values this transaction holds now (see
    /// the module doc). Reads the transaction, changes nothing.
    pub fn candidates(&self, phase: u8) -> Picture {
        let mut p = Picture { phase, ..Default::default() };
        let rs = self.rs.clone();
        let Some(list) = usize::from(phase).checked_sub(1).and_then(|i| rs.phases.get(i)) else { return p };
        let quick = usize::from(phase).checked_sub(1).and_then(|i| rs.quick.phases.get(i));
        let mut tabs = Tables {
            keys: rs.hash_keys(),
            words: rs.prefilter.words,
            vals: Vec::new(),
            bytes: Vec::new(),
            by_bytes: hashbrown::HashTable::new(),
            raw_scan: Vec::new(),
            forms: Vec::new(),
            form_scan: Vec::new(),
            by_form: hashbrown::HashTable::new(),
            sats: Vec::new(),
            pairs: FxMap::default(),
            targets: FxMap::default(),
            ids: Vec::new(),
            groups: FxMap::default(),
            scanned: 0,
        };
        for (i, e) in list.iter().enumerate() {
            let Entry::Rule(r) = e else {
                p.entries.push(None);
                continue;
            };
            p.rules += 1;
            let k = kind(r, quick.and_then(|q| q.get(i)));
            let may = match k {
                Kind::TxCheck => {
                    p.tx_checks += 1;
                    true
                }
                Kind::Always => {
                    p.always += 1;
                    true
                }
                Kind::Indexed => {
                    p.indexed += 1;
                    let (Some(sig), Some(req)) = (r.target_sig, r.prefilter) else { continue };
                    let key = (sig, r.chain_id, r.multi_match);
                    let u = match tabs.groups.get(&key) {
                        Some(&u) => u,
                        None => {
                            let u = self.group_union(&rs, r, &mut tabs, &mut p);
                            tabs.groups.insert(key, u);
                            u
                        }
                    };
                    let hit = tabs.sats.get(u as usize).is_none_or(|u| u.has(req));
                    p.candidates += usize::from(hit);
                    hit
                }
            };
            p.entries.push(Some((k, may)));
        }
        p.distinct_values = tabs.vals.len();
        p.scans = tabs.scanned;
        p.pairs = tabs.pairs.len();
        p
    }

    /// The union of the scans of `r`'s values' transformed forms (for multiMatch, every
    /// form the operator sees), by number in `tabs.sats`.
    fn group_union<'a>(&'a self, rs: &crate::compile::Ruleset, r: &Rule, tabs: &mut Tables<'a>, p: &mut Picture) -> u32 {
        let mut union = Satisfied::none(tabs.words);
        let mut vals = Vec::new();
        for (target, &ts) in r.targets.iter().zip(&r.target_sigs) {
            let (from, to) = match tabs.targets.get(&ts) {
                Some(&range) => range,
                None => {
                    vals.clear();
                    super::variables::collect(self, target, None, &mut vals);
                    let from = tabs.ids.len() as u32;
                    for v in vals.drain(..) {
                        let id = tabs.value(v.value);
                        tabs.ids.push(id);
                    }
                    let range = (from, tabs.ids.len() as u32);
                    tabs.targets.insert(ts, range);
                    range
                }
            };
            p.values += (to - from) as usize;
            for at in from..to {
                let Some(&id) = tabs.ids.get(at as usize) else { continue };
                let key = (id, r.chain_id, r.multi_match);
                let s = match tabs.pairs.get(&key) {
                    Some(&s) => s,
                    None => {
                        let s = forms(rs, r, id, tabs, p);
                        tabs.pairs.insert(key, s);
                        s
                    }
                };
                if let Some(s) = tabs.sats.get(s as usize) {
                    union.union_with(s);
                }
            }
        }
        let n = tabs.sats.len() as u32;
        tabs.sats.push(union);
        n
    }
}

/// What the transformed forms of value `id` under `r`'s chain satisfy, by number in
/// `tabs.sats`: the scan of its final form (its own scan when the chain leaves it as it is);
/// for multiMatch, the union of the scans of the value and of every step's changed result.
fn forms(rs: &crate::compile::Ruleset, r: &Rule, id: u32, tabs: &mut Tables<'_>, p: &mut Picture) -> u32 {
    let mut have = tabs.bytes.get(id as usize).copied().unwrap_or([0; 4]);
    let mut cur: Option<Vec<u8>> = None;
    let mut seen = if r.multi_match { vec![tabs.raw_scan(rs, id)] } else { Vec::new() };
    for (tf, trig) in r.transforms.iter().zip(&r.step_triggers) {
        if super::cache::untouched(&have, trig) {
            p.steps_skipped += 1;
            continue;
        }
        p.steps_run += 1;
        let input: &[u8] = match &cur {
            Some(c) => c,
            None => tabs.vals.get(id as usize).map_or(&[][..], |v| &v[..]),
        };
        if let std::borrow::Cow::Owned(next) = tf.apply(input) {
            if next != input {
                have = byte_set(&next);
                if r.multi_match {
                    seen.push(tabs.form_scan(rs, next.clone()));
                }
                cur = Some(next);
            }
        }
    }
    if !r.multi_match {
        return match cur {
            Some(form) => tabs.form_scan(rs, form),
            None => tabs.raw_scan(rs, id),
        };
    }
    let mut u = Satisfied::none(tabs.words);
    for s in seen {
        if let Some(s) = tabs.sats.get(s as usize) {
            u.union_with(s);
        }
    }
    let n = tabs.sats.len() as u32;
    tabs.sats.push(u);
    n
}

/// The bytes `v` contains, one bit each (what transformation triggers are tested against).
fn byte_set(v: &[u8]) -> [u64; 4] {
    let mut s = [0u64; 4];
    for &b in v {
        if let Some(w) = s.get_mut(usize::from(b >> 6)) {
            *w |= 1u64 << (b & 63);
        }
    }
    s
}
