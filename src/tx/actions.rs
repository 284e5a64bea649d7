//! Actions at run time: `setvar` on TX and on the persistent collections (`initcol`,
//! `expirevar`), `ctl`, and the TX writes they are made of (each bumps `tx_gen`, notes the
//! key in `tx_written` when kept, and what a base entry was in `tx_undo`).

use std::borrow::Cow;

use super::removal::{mark_ids, mark_tag, TargetRemoval};
use super::variables::Ctx;
use super::Transaction;
use crate::actions::{Ctl, SetOp};
use crate::compile::Rule;
use crate::operators::Expand;
use crate::seclang::MacroPart;

/// Every bit of `Transaction::tx_digits`: each capture slot possibly present.
pub(crate) const ALL_DIGITS: u16 = (1 << 10) - 1;

/// The bit of `Transaction::tx_digits` for `key` when it is a capture slot (`0` .. `9`), else 0.
pub(crate) fn digit_bit(key: &str) -> u16 {
    match key.as_bytes() {
        [d @ b'0'..=b'9'] => 1 << (d - b'0'),
        _ => 0,
    }
}

pub(crate) fn apply_setvar(t: &mut Transaction, rule: &Rule, sv: &crate::actions::SetVar) {
    if sv.collection != "tx" {
        apply_persistent(t, rule, sv);
        return;
    }
    // The expanded value goes to a buffer kept by the transaction, then into the variable's
    // own allocation when it exists (most setvars update a score that exists).
    let mut value = std::mem::take(&mut t.setvar_buf);
    value.clear();
    // An expanded key (`tx.header_name_920450_%{tx.0}`) goes to another kept buffer.
    let mut key_buf = std::mem::take(&mut t.setvar_key_buf);
    key_buf.clear();
    let key = {
        let ctx = Ctx::new(t, Some(rule));
        // Most keys are literal (`tx.anomaly_score`): no expansion needed.
        let key = match sv.key.as_slice() {
            [MacroPart::Lit(k)] => Cow::Borrowed(k.as_str()),
            parts => {
                ctx.expand_into(parts, &mut key_buf);
                key_buf.make_ascii_lowercase();
                match std::str::from_utf8(&key_buf) {
                    Ok(k) => Cow::Borrowed(k),
                    Err(_) => Cow::Owned(String::from_utf8_lossy(&key_buf).into_owned()),
                }
            }
        };
        if let SetOp::Set(v) | SetOp::Add(v) | SetOp::Sub(v) = &sv.op {
            ctx.expand_into(v, &mut value);
        }
        if key.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(key.to_ascii_lowercase())
        } else {
            key
        }
    };
    match &sv.op {
        SetOp::Delete => tx_remove(t, &key),
        SetOp::Set(_) => tx_set(t, &key, &value),
        op @ (SetOp::Add(_) | SetOp::Sub(_)) => {
            let cur = t.tx.get(key.as_ref()).map(|c| crate::operators::to_int(c)).unwrap_or(0);
            let delta = crate::operators::to_int(&value);
            let n = if matches!(op, SetOp::Add(_)) { cur.saturating_add(delta) } else { cur.saturating_sub(delta) };
            value.clear();
            let _ = std::io::Write::write_fmt(&mut value, format_args!("{n}"));
            tx_set(t, &key, &value);
        }
        SetOp::Init(_) | SetOp::Expire(_) => {}
    }
    t.setvar_buf = value;
    t.setvar_key_buf = key_buf;
}

/// Notes a write of `TX:key` in `Transaction::tx_written`, when it is kept.
pub(crate) fn note_write(t: &mut Transaction, key: &str) {
    let Some(w) = t.tx_written.as_mut() else { return };
    match u32::try_from(key.len()) {
        Ok(n) => {
            w.extend_from_slice(&n.to_le_bytes());
            w.extend_from_slice(key.as_bytes());
        }
        // Not noted: no effect is kept for this rule.
        Err(_) => t.tx_written = None,
    }
}

/// Sets `TX:key` (a lowercase key), in its own allocation when it exists (or existed in an
/// earlier transaction: see `txmap`), else in a recycled key and value (see
/// `Transaction::tx_free`): the CRS sets ~100 TX variables per request.
pub(crate) fn tx_set(t: &mut Transaction, key: &str, value: &[u8]) {
    note_write(t, key);
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.tx_digits |= digit_bit(key);
    let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
    t.tx.set(key, value, &mut t.tx_free, |old| undo_note(undo, n, base, key, old));
}

/// Deletes `TX:key`, keeping its allocations for the next new variable.
pub(crate) fn tx_remove(t: &mut Transaction, key: &str) {
    note_write(t, key);
    t.tx_gen = t.tx_gen.wrapping_add(1);
    // A capture slot known absent needs no lookup.
    let digit = digit_bit(key);
    if digit != 0 && t.tx_digits & digit == 0 {
        return;
    }
    t.tx_digits &= !digit;
    let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
    t.tx.remove(key, |old| undo_note(undo, n, base, key, old));
}

/// Deletes every TX variable, keeping their allocations.
pub(crate) fn tx_clear(t: &mut Transaction) {
    // Not a write that can be noted key by key (not during rules).
    t.tx_written = None;
    t.tx_base = None;
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.tx_digits = 0;
    t.tx.drain_into(&mut t.tx_free, super::recycle_tx_entry);
}

/// `initcol`, and `setvar` / `expirevar` on a persistent collection (see `persist`).
fn apply_persistent(t: &mut Transaction, rule: &Rule, sv: &crate::actions::SetVar) {
    use super::persist::{self, Change, Loaded};
    let now = t.now_ms;
    let (name, value) = {
        let ctx = Ctx::new(t, Some(rule));
        let name = String::from_utf8_lossy(&ctx.expand(&sv.key)).to_ascii_lowercase();
        let value = match &sv.op {
            SetOp::Set(v) | SetOp::Add(v) | SetOp::Sub(v) | SetOp::Init(v) | SetOp::Expire(v) => Some(ctx.expand(v)),
            SetOp::Delete => None,
        };
        (name, value)
    };
    if let SetOp::Init(_) = sv.op {
        // A second initcol of the same collection keeps the first (as ModSecurity).
        if t.collections.iter().any(|c| c.name == sv.collection) {
            return;
        }
        let key = String::from_utf8_lossy(&value.unwrap_or_default()).into_owned();
        let vars = t.store.as_ref().and_then(|s| s.load(&sv.collection, &key)).and_then(|b| persist::decode(&b, &key, now)).unwrap_or_default();
        t.collections.push(Loaded { name: sv.collection.clone(), key, vars, journal: Vec::new() });
        return;
    }
    // Without initcol the collection does not exist: the change is dropped (ModSecurity logs it).
    let Some(col) = t.collections.iter_mut().find(|c| c.name == sv.collection) else { return };
    let int = |v: &[u8]| crate::operators::to_int(v);
    let change = match (&sv.op, value) {
        (SetOp::Set(_), Some(v)) => Change::Set(name, v),
        (SetOp::Add(_), Some(v)) => Change::Add(name, int(&v)),
        (SetOp::Sub(_), Some(v)) => Change::Add(name, int(&v).saturating_neg()),
        (SetOp::Delete, _) => Change::Delete(name),
        (SetOp::Expire(_), Some(v)) => Change::Expire(name, now.saturating_add((int(&v).max(0) as u64).saturating_mul(1000))),
        _ => return,
    };
    persist::apply(&mut col.vars, &change);
    // Bounded: a transaction replays at most this many changes.
    if col.journal.len() < 1024 {
        col.journal.push(change);
    }
}

/// Whether a link of `rule` has ctls.
pub(crate) fn has_ctls(rule: &Rule) -> bool {
    std::iter::successors(Some(rule), |l| l.chain.as_deref()).any(|l| !l.ctls.is_empty())
}

/// The ctls of every link of `rule`, in order.
pub(crate) fn apply_ctls(t: &mut Transaction, rule: &Rule) {
    let mut link = Some(rule);
    while let Some(l) = link {
        for c in &l.ctls {
            apply_ctl(t, c);
        }
        link = l.chain.as_deref();
    }
}

fn apply_ctl(t: &mut Transaction, c: &Ctl) {
    // Target lists may depend on what a ctl changes (body variable, removals).
    t.cache.get_mut().clear_prepared();
    match c {
        Ctl::RuleEngine(m) => t.engine = *m,
        Ctl::RequestBodyAccess(b) => t.request_body_access = *b,
        Ctl::RequestBodyProcessor(p) => t.body_processor = Some(p.clone()),
        Ctl::ForceRequestBodyVariable(b) => t.force_request_body_variable = *b,
        Ctl::RuleRemoveById(ids) => {
            t.removed_ids.extend(ids.iter().copied());
            mark_ids(t, ids);
        }
        Ctl::RuleRemoveByTag(tag) => {
            // A tag no rule has removes nothing.
            if let Some(id) = t.rs.tag_id(tag) {
                t.removed_tags.push(id);
                mark_tag(t, id);
            }
        }
        Ctl::RuleRemoveTargetById(ids, target) => {
            t.removed_targets.push(TargetRemoval { origin: c as *const Ctl as usize, ids: ids.clone(), tag: None, var: target.var, sel: target.sel.clone() });
            mark_ids(t, ids);
        }
        Ctl::RuleRemoveTargetByTag(tag, target) => {
            let tag = t.rs.tag_id(tag);
            t.removed_targets.push(TargetRemoval { origin: c as *const Ctl as usize, ids: Vec::new(), tag, var: target.var, sel: target.sel.clone() });
            if let Some(tag) = tag {
                mark_tag(t, tag);
            }
        }
        Ctl::Ignored(_) => {}
    }
}

/// Notes, before base entry `TX:key` (one of the rule set's initial variables: see `txmap`)
/// changes or goes, what it was, so that the end of the transaction can put the map back to
/// the initial variables (see `Transaction::tx_base`; what the transaction added goes with its
/// generation). Past a bound the map is emptied at the end instead.
pub(crate) fn undo_note(undo: &mut Vec<super::TxUndo>, n: &mut usize, base: &mut Option<u64>, key: &str, old: &[u8]) {
    if base.is_none() {
        return;
    }
    if *n >= super::TX_UNDO_MAX {
        *base = None;
        return;
    }
    let fill = |u: &mut super::TxUndo| {
        u.key.clear();
        u.key.push_str(key);
        u.old.clear();
        u.old.extend_from_slice(old);
    };
    match undo.get_mut(*n) {
        Some(u) => fill(u),
        None => {
            let mut u = super::TxUndo::default();
            fill(&mut u);
            undo.push(u);
        }
    }
    *n += 1;
}
