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

/// The per-phase tables: distinct values, their transformed forms and scans.
struct Tables {
    /// Distinct values (by bytes) -> their number, and by number.
    ids: HashMap<Vec<u8>, u32>,
    vals: Vec<Vec<u8>>,
    /// By value number: its byte set.
    bytes: Vec<[u64; 4]>,
    /// (value, chain id, multiMatch) -> what its forms satisfy.
    pairs: HashMap<(u32, u32, bool), Satisfied>,
    /// Distinct transformed forms -> what they satisfy.
    scans: HashMap<Vec<u8>, Satisfied>,
    /// By target id (`Rule::target_sigs`): the value numbers it gives.
    targets: HashMap<u32, Vec<u32>>,
    /// (target list signature, chain id, multiMatch) -> the union of its values' scans.
    groups: HashMap<(u32, u32, bool), Satisfied>,
}

impl Transaction {
    /// The candidate rules of `phase` (1-5) for the values this transaction holds now (see
    /// the module doc). Reads the transaction, changes nothing.
    pub fn candidates(&self, phase: u8) -> Picture {
        let mut p = Picture { phase, ..Default::default() };
        let rs = self.rs.clone();
        let Some(list) = usize::from(phase).checked_sub(1).and_then(|i| rs.phases.get(i)) else { return p };
        let quick = usize::from(phase).checked_sub(1).and_then(|i| rs.quick.phases.get(i));
        let words = rs.prefilter.words;
        let mut tabs = Tables { ids: HashMap::new(), vals: Vec::new(), bytes: Vec::new(), pairs: HashMap::new(), scans: HashMap::new(), targets: HashMap::new(), groups: HashMap::new() };
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
                    if !tabs.groups.contains_key(&key) {
                        let u = self.group_union(r, &mut tabs, &mut p, words);
                        tabs.groups.insert(key, u);
                    }
                    let hit = tabs.groups.get(&key).is_none_or(|u| u.has(req));
                    p.candidates += usize::from(hit);
                    hit
                }
            };
            p.entries.push(Some((k, may)));
        }
        p.distinct_values = tabs.bytes.len();
        p.scans = tabs.scans.len();
        p.pairs = tabs.pairs.len();
        p
    }

    /// The union of the scans of `r`'s values' transformed forms (for multiMatch, every
    /// form the operator sees).
    fn group_union(&self, r: &Rule, tabs: &mut Tables, p: &mut Picture, words: usize) -> Satisfied {
        let mut union = Satisfied::none(words);
        for (target, &ts) in r.targets.iter().zip(&r.target_sigs) {
            if !tabs.targets.contains_key(&ts) {
                let mut vals = Vec::new();
                super::eval::collect(self, target, None, &mut vals);
                let mut ids = Vec::with_capacity(vals.len());
                for v in &vals {
                    let next = tabs.bytes.len() as u32;
                    let id = *tabs.ids.entry(v.value.to_vec()).or_insert(next);
                    if id == next {
                        tabs.bytes.push(byte_set(&v.value));
                        tabs.vals.push(v.value.to_vec());
                    }
                    ids.push(id);
                }
                tabs.targets.insert(ts, ids);
            }
            let ids = tabs.targets.get(&ts).cloned().unwrap_or_default();
            p.values += ids.len();
            for id in ids {
                let key = (id, r.chain_id, r.multi_match);
                if !tabs.pairs.contains_key(&key) {
                    let s = self.forms(r, id, tabs, p, words);
                    tabs.pairs.insert(key, s);
                }
                if let Some(s) = tabs.pairs.get(&key) {
                    union.union_with(s);
                }
            }
        }
        union
    }

    /// What the transformed forms of value `id` under `r`'s chain satisfy.
    fn forms(&self, r: &Rule, id: u32, tabs: &mut Tables, p: &mut Picture, words: usize) -> Satisfied {
        let Some(raw) = tabs.vals.get(id as usize).cloned() else { return Satisfied::none(words) };
        let mut have = tabs.bytes.get(id as usize).copied().unwrap_or([0; 4]);
        let mut cur = raw;
        let mut out = Satisfied::none(words);
        if r.multi_match {
            out.union_with(&scan(self, tabs, &cur));
        }
        for (tf, trig) in r.transforms.iter().zip(&r.step_triggers) {
            if super::cache::untouched(&have, trig) {
                p.steps_skipped += 1;
                continue;
            }
            p.steps_run += 1;
            if let std::borrow::Cow::Owned(next) = tf.apply(&cur) {
                if next != cur {
                    cur = next;
                    have = byte_set(&cur);
                    if r.multi_match {
                        out.union_with(&scan(self, tabs, &cur));
                    }
                }
            }
        }
        if !r.multi_match {
            out.union_with(&scan(self, tabs, &cur));
        }
        out
    }
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

/// The scan of a transformed form, once per distinct form.
fn scan(t: &Transaction, tabs: &mut Tables, v: &[u8]) -> Satisfied {
    if let Some(s) = tabs.scans.get(v) {
        return s.clone();
    }
    let s = t.rs.prefilter.scan(v);
    tabs.scans.insert(v.to_vec(), s.clone());
    s
}
