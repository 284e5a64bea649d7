//! Runtime rule removal (`ctl:ruleRemoveById`, `ruleRemoveByTag`, `ruleRemoveTarget*`): what is
//! in force for the transaction, and which rules it may concern (one bit per rule, so the
//! others skip the checks).

use super::Transaction;
use crate::compile::Rule;
use crate::vars::{KeySel, Var};

/// A `ctl:ruleRemoveTarget*` in force for this transaction.
#[derive(Debug, Clone)]
pub(crate) struct TargetRemoval {
    /// The address of the `ctl` (in the rule set) that made it: removals from the same ctls in
    /// the same order mean the same masks (see `Transaction::source_generation`).
    pub origin: usize,
    pub ids: Vec<(u64, u64)>,
    /// The tag's id (`Ruleset::tag_id`); None: not by tag, or a tag no rule has.
    pub tag: Option<u32>,
    pub var: Var,
    pub sel: KeySel,
}

impl TargetRemoval {
    /// Whether this removal concerns `rule` (by id or tag).
    pub fn applies_to(&self, rule: &Rule) -> bool {
        self.ids.iter().any(|&(a, b)| (a..=b).contains(&rule.id)) || self.tag.is_some_and(|tag| rule.tag_ids.contains(&tag))
    }
}

pub(crate) fn rule_removed(t: &Transaction, rule: &Rule) -> bool {
    // The lists first: the rule's fields are read only when some removal exists.
    (!t.removed_ids.is_empty() || !t.removed_tags.is_empty())
        && affected(t, rule.index)
        && (t.removed_ids.iter().any(|&(a, b)| (a..=b).contains(&rule.id)) || t.removed_tags.iter().any(|tag| rule.tag_ids.contains(tag)))
}

/// Whether some runtime removal may concern the rule numbered `n` (see `Transaction::affected`).
pub(crate) fn affected(t: &Transaction, n: u32) -> bool {
    t.affected.get(n as usize / 64).is_some_and(|w| w & (1u64 << (n % 64)) != 0)
}

/// Marks the rules numbered `ns` as concerned by a runtime removal.
pub(crate) fn mark(t: &mut Transaction, ns: impl Iterator<Item = u32>) {
    let words = t.rs.quick.rules.div_ceil(64);
    if t.affected.len() < words {
        t.affected.resize(words, 0);
    }
    for n in ns {
        if let Some(w) = t.affected.get_mut(n as usize / 64) {
            *w |= 1u64 << (n % 64);
        }
    }
}

/// Marks the rules whose ids are in `ranges`.
pub(crate) fn mark_ids(t: &mut Transaction, ranges: &[(u64, u64)]) {
    let rs = t.rs.clone();
    for &(a, b) in ranges {
        mark(t, rs.quick.ids(a, b));
    }
}

/// Marks the rules with the tag numbered `tag`.
pub(crate) fn mark_tag(t: &mut Transaction, tag: u32) {
    let rs = t.rs.clone();
    mark(t, rs.quick.tagged(tag).iter().copied());
}
