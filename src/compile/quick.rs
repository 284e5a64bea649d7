//! Compact per-rule records that let a transaction pass a rule without reading it.
//!
//! A CRS request evaluates ~380 rules and most of them match nothing. A [`super::Rule`] is
//! ~600 bytes over a dozen cache lines plus its heap lists (targets, tags, chain), and in
//! Envoy the engine's data is cold at each request (Envoy's own work between two requests
//! evicts it): reading a rule's scattered fields costs cache misses, not instructions. Each
//! phase list therefore has a parallel array of [`Quick`] records (24 bytes each, read in
//! order) from which `tx::fast` decides (behind the phase loop's seam) the common "cannot match" cases.
//!
//! Runtime removals (`ctl:ruleRemove*`) are indexed the same way: [`Index`] maps rule ids
//! and tags to the rules' dense numbers, so a transaction marks the rules a removal concerns
//! once, and every other rule skips the removal checks without reading its tags.

use std::collections::HashMap;

use super::prefilter::Requirement;
use super::{Entry, Rule};
use crate::actions::{Ctl, Disruptive, SetOp};
use crate::seclang::MacroPart;
use crate::operators::{Cmp, Num};
use crate::vars::{KeySel, Var};

/// What can be decided about a rule without reading it (see the module doc). Only "no
/// match" is ever decided here; anything else evaluates the rule. Runtime removals
/// (`ctl:ruleRemoveTarget*`) only take values away, so "no match" stays true under them.
#[derive(Debug, Clone, Copy)]
pub enum Quick {
    /// Nothing: evaluate the rule.
    Eval,
    /// The rule is `TX:key "@lt|@le|@eq|@ge|@gt N"` alone: no chain, one target (not a
    /// count, no exclusions), no transformation, not negated, a literal number (the CRS's
    /// ~150 paranoia-level and score checks). It cannot match when `TX:key` is absent or its
    /// number fails the test. `key`: (offset, length) in [`Index::keys`].
    TxNum { key: (u32, u32), id: u8, cmp: Cmp, n: i64 },
    /// A `TxNum` rule whose only effect when it matches is its skip (`skipAfter` or `skip`;
    /// `pass`, `nolog`, no severity, setvar, ctl or capture): the CRS's ~60 paranoia-level
    /// checks per phase. Decided here both ways: no match, or the skip.
    TxSkip { key: (u32, u32), id: u8, cmp: Cmp, n: i64 },
    /// The rule's first link reads the prepared group of `slot` (`Rule::group_slot`). Once
    /// that group is built in this phase (always without removals: every value the rule
    /// could read is in it), the rule cannot match when the group has no
    /// values, or when the union of its values' scans lacks `req` (the link's prefilter
    /// requirement; None when it has none or is negated), or when the group knows the
    /// link's operator is false on every value (`bit`: its `memo_bit`; None when negated).
    Group { slot: u32, req: Option<Requirement>, bit: Option<u32> },
    /// A rule of phase 1's request-independent prefix (see [`Index::pre_end`]): it reads
    /// and writes only TX, so its effect is the same for every request. The first
    /// transaction computes the prefix's TX once per rule set (`tx::fast::pre_apply`); every
    /// transaction then starts phase 1 from that TX and passes these rules.
    Pre,
}

impl Quick {
    fn of(r: &Rule, keys: &mut String, known: &mut HashMap<String, ((u32, u32), u8)>) -> Quick {
        if let Some(q) = tx_num(r, keys, known) {
            return match q {
                Quick::TxNum { key, id, cmp, n } if skip_only(r) => Quick::TxSkip { key, id, cmp, n },
                q => q,
            };
        }
        match r.group_slot {
            Some(slot) => Quick::Group { slot, req: r.prefilter.filter(|_| !r.negated), bit: r.memo_bit.filter(|_| !r.negated) },
            None => Quick::Eval,
        }
    }
}

fn tx_num(r: &Rule, keys: &mut String, known: &mut HashMap<String, ((u32, u32), u8)>) -> Option<Quick> {
    let [target] = r.targets.as_slice() else { return None };
    let KeySel::Key(key) = &target.sel else { return None };
    if r.chain.is_some() || r.negated || !r.transforms.is_empty() || target.var != Var::Tx || target.count || !target.exclude.is_empty() {
        return None;
    }
    let Some((cmp, &Num::Lit(n))) = r.operator.numeric() else { return None };
    let (key, id) = match known.get(key.as_str()) {
        Some(&k) => k,
        None => {
            // `id`: the key's slot in the transaction's cache of TX numbers (`TX_NUMS` of them).
            let id = u8::try_from(known.len()).unwrap_or(u8::MAX);
            let k = ((u32::try_from(keys.len()).ok()?, u32::try_from(key.len()).ok()?), id);
            keys.push_str(key);
            known.insert(key.clone(), k);
            k
        }
    };
    Some(Quick::TxNum { key, id, cmp, n })
}

/// The quick records of the phase lists, and the rule numbering runtime removals use.
#[derive(Debug, Default)]
pub struct Index {
    /// Per phase, one record per entry of the phase list (markers: `Eval`).
    pub phases: [Vec<Quick>; 5],
    /// The `TxNum` keys, concatenated (a few distinct ones, so they share cache lines).
    pub keys: String,
    /// (rule id, rule number), sorted by id.
    by_id: Vec<(u64, u32)>,
    /// Per tag id (`Ruleset::tag_id`), the numbers of the rules with that tag.
    by_tag: Vec<Vec<u32>>,
    /// How many rules (chain heads) are numbered.
    pub rules: usize,
    /// Phase 1's request-independent prefix ends before this entry: from the start of the
    /// list, rules that read and write only TX ([`Quick::Pre`]) and rules that neither read
    /// nor write TX nor skip (which stay interleaved: they run as usual).
    pub pre_end: usize,
    /// By rule number: the classes of request data its first link reads, and those the
    /// whole rule reads when it has hits (see [`super::inputs::of_rule`]).
    pub inputs: Vec<super::inputs::Inputs>,
    /// The request header names rules read by key, with their bits in `inputs`.
    pub header_keys: super::inputs::Keys,
    /// Per phase, per entry of the phase list: the rule's number (`u32::MAX` for markers,
    /// which never have hits).
    pub numbers: [Vec<u32>; 5],
    /// Per phase, per entry: what the rule's first link reads (`Inputs::head`; none for
    /// markers, which do nothing when reached in order).
    pub heads: [Vec<u64>; 5],
}

impl Index {
    /// Numbers the chain heads in phase order (`Rule::index`) and builds the records.
    pub(super) fn build(phases: &mut [Vec<Entry>; 5], tags: usize) -> Index {
        let mut ix = Index { by_tag: vec![Vec::new(); tags], ..Index::default() };
        let mut known = HashMap::new();
        let mut n = 0u32;
        let mut prefix = true;
        for (p, (((list, quick), numbers), heads)) in phases.iter_mut().zip(ix.phases.iter_mut()).zip(ix.numbers.iter_mut()).zip(ix.heads.iter_mut()).enumerate() {
            for e in list.iter_mut() {
                let Entry::Rule(r) = e else {
                    quick.push(Quick::Eval);
                    numbers.push(u32::MAX);
                    heads.push(0);
                    continue;
                };
                numbers.push(n);
                let pre = p == 0 && prefix && pure(r);
                if p == 0 && prefix && !pre && !inert(r) {
                    prefix = false;
                    ix.pre_end = quick.len();
                }
                r.index = n;
                ix.inputs.push(super::inputs::of_rule(r, &mut ix.header_keys));
                ix.by_id.push((r.id, n));
                for &tag in &r.tag_ids {
                    if let Some(list) = ix.by_tag.get_mut(tag as usize) {
                        list.push(n);
                    }
                }
                let q = if pre { Quick::Pre } else { Quick::of(r, &mut ix.keys, &mut known) };
                heads.push(ix.inputs.last().map_or(u64::MAX, |i| i.head));
                quick.push(q);
                n += 1;
            }
        }
        if prefix {
            ix.pre_end = ix.phases[0].len();
        }
        ix.by_id.sort_unstable();
        ix.rules = n as usize;
        ix
    }

    /// The numbers of the rules whose id is in `a..=b`.
    pub fn ids(&self, a: u64, b: u64) -> impl Iterator<Item = u32> + '_ {
        let start = self.by_id.partition_point(|&(id, _)| id < a);
        self.by_id.get(start..).unwrap_or_default().iter().take_while(move |&&(id, _)| id <= b).map(|&(_, n)| n)
    }

    /// The numbers of the rules with tag `tag`.
    pub fn tagged(&self, tag: u32) -> &[u32] {
        self.by_tag.get(tag as usize).map_or(&[], Vec::as_slice)
    }

    /// The key of a `TxNum` record.
    pub fn key(&self, (offset, len): (u32, u32)) -> &str {
        self.keys.get(offset as usize..(offset + len) as usize).unwrap_or_default()
    }
}

/// A rule (without chain) whose match does nothing but skip.
fn skip_only(r: &Rule) -> bool {
    matches!(r.disruptive, Disruptive::Pass)
        && !r.log
        && r.severity.is_none()
        && r.setvars.is_empty()
        && r.ctls.is_empty()
        && !r.capture
        && r.chain.is_none()
        && (r.skip_after.is_some() || r.skip > 0)
}

/// Whether `parts` name only TX (or nothing).
fn tx_only(parts: &[MacroPart]) -> bool {
    parts.iter().all(|p| match p {
        MacroPart::Lit(_) => true,
        MacroPart::Var { name, .. } => name.eq_ignore_ascii_case("tx"),
    })
}

/// Whether `parts` name no TX.
fn no_tx(parts: &[MacroPart]) -> bool {
    parts.iter().all(|p| !matches!(p, MacroPart::Var { name, .. } if name.eq_ignore_ascii_case("tx")))
}

/// Each link of a rule.
fn links(r: &Rule) -> impl Iterator<Item = &Rule> {
    std::iter::successors(Some(r), |l| l.chain.as_deref())
}

/// A rule whose outcome depends on TX alone and whose only effect is on TX (its matches may
/// still deny or log: `tx::fast::pre_apply` ends the prefix before such a rule when it
/// matches). No flow change (`skip`, `skipAfter`), no `ctl`.
fn pure(r: &Rule) -> bool {
    r.skip == 0
        && r.skip_after.is_none()
        && links(r).all(|l| {
            l.targets.iter().all(|t| t.var == Var::Tx)
                && tx_only(l.operator.macros())
                && l.ctls.is_empty()
                && l.setvars.iter().all(|sv| {
                    sv.collection == "tx"
                        && tx_only(&sv.key)
                        && match &sv.op {
                            SetOp::Set(v) | SetOp::Add(v) | SetOp::Sub(v) => tx_only(v),
                            SetOp::Delete => true,
                            SetOp::Init(_) | SetOp::Expire(_) => false,
                        }
                })
        })
}

/// A rule that neither reads nor writes TX nor skips: request-dependent, but whatever it
/// does leaves the TX rules around it unaffected. Its `ctl`s may only change body
/// processing (not the engine, not removals). It may deny (or allow): the rules after it
/// then do not run, and the fast engine puts TX back (`tx::fast`, where the phase loop leaves) as it was before it.
fn inert(r: &Rule) -> bool {
    let flow = match &r.disruptive {
        Disruptive::Redirect(parts) => no_tx(parts),
        _ => true,
    };
    flow && r.skip == 0
        && r.skip_after.is_none()
        && r.msg.as_deref().is_none_or(no_tx)
        && r.logdata.as_deref().is_none_or(no_tx)
        && links(r).all(|l| {
            l.targets.iter().all(|t| t.var != Var::Tx)
                && no_tx(l.operator.macros())
                && l.setvars.is_empty()
                && !l.capture
                && l.ctls.iter().all(|c| {
                    matches!(c, Ctl::RequestBodyAccess(_) | Ctl::RequestBodyProcessor(_) | Ctl::ForceRequestBodyVariable(_) | Ctl::Ignored(_))
                })
        })
}
