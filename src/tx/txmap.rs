//! The TX collection: a hash map whose entries outlive the transaction that made them.
//!
//! A map kept between the transactions of a rule set holds its initial variables
//! (`Ruleset::init`, the *base* entries); what a transaction adds belongs to its generation.
//! At its end the base entries it changed are put back (`restore_base`, from the undo notes)
//! and one increment of the generation ([`TxMap::end`]) removes everything it added at once:
//! the entries stay in the table, dead, and the next transaction that sets the same key (the
//! CRS's 920450 sets `tx.header_name_920450_<name>` for every header of every request) finds
//! its slot and buffers in one lookup instead of inserting them again. Dead entries are
//! never seen (every read skips them) and are purged when they outnumber the live ones.
//!
//! Values are kept in a list of slots that only grows between purges, so a replayed rule's
//! effect, which writes the same keys in every transaction, remembers where each went
//! ([`Loc`]) and writes there again without hashing or comparing its keys.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Fx;

/// The generation of base entries: live in every transaction.
const BASE: u32 = u32::MAX;
/// The generation of removed entries.
const DEAD: u32 = 0;

/// Dead entries kept beyond the live ones (see [`TxMap::end`]).
const DEAD_SLACK: usize = 64;

/// Source of [`TxMap::stamp`]s: every map, and every map again each time its slots move, takes
/// a new one, so a [`Loc`] made for other slots never matches (a `u64` does not wrap).
static STAMPS: AtomicU64 = AtomicU64::new(1);

fn new_stamp() -> u64 {
    STAMPS.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug, Default)]
struct Slot {
    gen: u32,
    value: Vec<u8>,
}

/// Where a key's entry was in a map (see [`TxMap::set_at`]): kept by a replayed effect, so
/// that doing it again in the same map needs no lookup. Valid while the map's stamp is the one
/// it was made with.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Loc {
    stamp: u64,
    slot: u32,
}

/// See the module documentation. Keys are bounded by the rules (and the request values a
/// rule's `setvar` key takes from the request, which Envoy bounds), so the small hash is safe.
#[derive(Debug)]
pub(crate) struct TxMap {
    /// Key -> its entry in `slots` (dead or live); entries are never removed from either but
    /// all at once (a purge or a drain, which take a new `stamp`).
    index: HashMap<String, u32, std::hash::BuildHasherDefault<Fx>>,
    slots: Vec<Slot>,
    stamp: u64,
    /// The running transaction's generation (never `BASE` nor `DEAD`).
    now: u32,
    /// Live entries, and how many of them are of generation `now`.
    live: usize,
    live_now: usize,
}

impl Default for TxMap {
    fn default() -> TxMap {
        TxMap::with_capacity(0)
    }
}

/// What [`TxMap::set`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Set {
    /// The value was already that.
    Same,
    /// A base entry changed (its old value went to the undo callback).
    Base,
    /// An entry of this transaction changed or was added.
    Now,
}

impl TxMap {
    pub fn with_capacity(n: usize) -> TxMap {
        TxMap { index: HashMap::with_capacity_and_hasher(n, Default::default()), slots: Vec::with_capacity(n), stamp: new_stamp(), now: 1, live: 0, live_now: 0 }
    }

    fn is_live(&self, s: &Slot) -> bool {
        s.gen == BASE || s.gen == self.now
    }

    fn live_slot(&self, i: u32) -> Option<&Slot> {
        self.slots.get(i as usize).filter(|s| self.is_live(s))
    }

    pub fn get(&self, key: &str) -> Option<&Vec<u8>> {
        self.live_slot(*self.index.get(key)?).map(|s| &s.value)
    }

    pub fn get_key_value(&self, key: &str) -> Option<(&String, &Vec<u8>)> {
        let (k, &i) = self.index.get_key_value(key)?;
        self.live_slot(i).map(|s| (k, &s.value))
    }

    /// The live entries, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.index.iter().filter_map(|(k, &i)| self.live_slot(i).map(|s| (k, &s.value)))
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Entries the table holds, dead ones included.
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }

    pub fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
        self.slots.reserve(n);
    }

    /// Sets `key` to `value`. A base entry's old value is given to `undo` before it changes;
    /// a new entry takes a dead entry's slot, else a key and value buffer from `free`.
    pub fn set(&mut self, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>, undo: impl FnOnce(&[u8])) -> Set {
        let at = self.index.get(key).copied();
        self.set_slot(at, key, value, free, undo).1
    }

    /// [`TxMap::set`] where `loc` says the entry is when it was made for this map's slots
    /// (no lookup); `loc` then says where it is now.
    pub fn set_at(&mut self, loc: &Cell<Loc>, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>, undo: impl FnOnce(&[u8])) -> Set {
        let at = self.find(loc, key);
        let (slot, r) = self.set_slot(at, key, value, free, undo);
        loc.set(Loc { stamp: self.stamp, slot });
        r
    }

    fn find(&self, loc: &Cell<Loc>, key: &str) -> Option<u32> {
        let l = loc.get();
        if l.stamp == self.stamp {
            Some(l.slot)
        } else {
            self.index.get(key).copied()
        }
    }

    fn set_slot(&mut self, at: Option<u32>, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>, undo: impl FnOnce(&[u8])) -> (u32, Set) {
        let now = self.now;
        let Some((i, s)) = at.and_then(|i| Some((i, self.slots.get_mut(i as usize)?))) else {
            let i = self.insert_new(key, value, now, free);
            self.live_now += 1;
            return (i, Set::Now);
        };
        if s.gen == BASE || s.gen == now {
            if s.value == value {
                return (i, Set::Same);
            }
            let base = s.gen == BASE;
            if base {
                undo(&s.value);
            }
            s.value.clear();
            s.value.extend_from_slice(value);
            (i, if base { Set::Base } else { Set::Now })
        } else {
            s.gen = now;
            s.value.clear();
            s.value.extend_from_slice(value);
            self.live += 1;
            self.live_now += 1;
            (i, Set::Now)
        }
    }

    /// Adds `key`, absent or dead, as a base entry (the rule set's initial variables), or
    /// makes a live one a base entry with `value`.
    pub fn insert_base(&mut self, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>) {
        let now = self.now;
        match self.index.get(key).and_then(|&i| self.slots.get_mut(i as usize)) {
            Some(s) => {
                if s.gen == now {
                    self.live_now -= 1;
                } else if s.gen != BASE {
                    self.live += 1;
                }
                s.gen = BASE;
                s.value.clear();
                s.value.extend_from_slice(value);
            }
            None => {
                self.insert_new(key, value, BASE, free);
            }
        }
    }

    fn insert_new(&mut self, key: &str, value: &[u8], gen: u32, free: &mut Vec<(String, Vec<u8>)>) -> u32 {
        let (mut k, mut v) = free.pop().unwrap_or_default();
        k.clear();
        k.push_str(key);
        v.clear();
        v.extend_from_slice(value);
        let i = self.slots.len() as u32;
        self.slots.push(Slot { gen, value: v });
        self.index.insert(k, i);
        self.live += 1;
        i
    }

    /// Removes `key`; a base entry's old value is given to `undo` first. False when absent.
    pub fn remove(&mut self, key: &str, undo: impl FnOnce(&[u8])) -> bool {
        let at = self.index.get(key).copied();
        self.remove_slot(at, undo)
    }

    /// [`TxMap::remove`] with a [`Loc`] (see [`TxMap::set_at`]).
    pub fn remove_at(&mut self, loc: &Cell<Loc>, key: &str, undo: impl FnOnce(&[u8])) -> bool {
        let at = self.find(loc, key);
        if let Some(slot) = at {
            loc.set(Loc { stamp: self.stamp, slot });
        }
        self.remove_slot(at, undo)
    }

    fn remove_slot(&mut self, at: Option<u32>, undo: impl FnOnce(&[u8])) -> bool {
        let now = self.now;
        let Some(s) = at.and_then(|i| self.slots.get_mut(i as usize)) else { return false };
        if s.gen == BASE {
            undo(&s.value);
        } else if s.gen == now {
            self.live_now -= 1;
        } else {
            return false;
        }
        s.gen = DEAD;
        self.live -= 1;
        true
    }

    /// Puts base entry `key` back to `value` (undoing a change noted by [`TxMap::set`] or
    /// [`TxMap::remove`]).
    pub fn restore_base(&mut self, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>) {
        self.insert_base(key, value, free);
    }

    /// Ends the running transaction: the entries it added die (the base ones stay). Dead
    /// entries beyond [`DEAD_SLACK`] more than the live ones are dropped, their buffers to
    /// `free` (through `keep`, which bounds them).
    pub fn end(&mut self, free: &mut Vec<(String, Vec<u8>)>, keep: impl Fn(&mut Vec<(String, Vec<u8>)>, (String, Vec<u8>))) {
        self.live -= self.live_now;
        self.live_now = 0;
        self.now += 1;
        if self.now == BASE || self.index.len() > 2 * self.live + DEAD_SLACK {
            let mut old = std::mem::take(&mut self.slots);
            let dead: Vec<(String, u32)> = self.index.extract_if(|_, i| old.get(*i as usize).is_none_or(|s| s.gen != BASE)).collect();
            for (k, i) in dead {
                let v = old.get_mut(i as usize).map(|s| std::mem::take(&mut s.value)).unwrap_or_default();
                keep(free, (k, v));
            }
            let mut slots = Vec::with_capacity(self.index.len());
            for i in self.index.values_mut() {
                let s = old.get_mut(*i as usize).map(std::mem::take).unwrap_or_default();
                *i = slots.len() as u32;
                slots.push(s);
            }
            self.slots = slots;
            self.stamp = new_stamp();
            if self.now == BASE {
                self.now = 1;
            }
        }
    }

    /// Empties the map, every entry's buffers to `keep`.
    pub fn drain_into(&mut self, free: &mut Vec<(String, Vec<u8>)>, keep: impl Fn(&mut Vec<(String, Vec<u8>)>, (String, Vec<u8>))) {
        for (k, i) in self.index.drain() {
            let v = self.slots.get_mut(i as usize).map(|s| std::mem::take(&mut s.value)).unwrap_or_default();
            keep(free, (k, v));
        }
        self.slots.clear();
        self.stamp = new_stamp();
        self.live = 0;
        self.live_now = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(free: &mut Vec<(String, Vec<u8>)>, kv: (String, Vec<u8>)) {
        free.push(kv);
    }

    fn sorted(m: &TxMap) -> Vec<(String, String)> {
        let mut v: Vec<_> = m.iter().map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned())).collect();
        v.sort();
        v
    }

    #[test]
    fn a_transaction_end_removes_what_it_added_and_keeps_the_base() {
        let mut free = Vec::new();
        let mut m = TxMap::default();
        m.insert_base("score", b"0", &mut free);
        let mut undo = Vec::new();
        assert_eq!(m.set("score", b"5", &mut free, |old| undo.push(old.to_vec())), Set::Base);
        assert_eq!(m.set("header_name_host", b"/host/", &mut free, |_| panic!("not a base entry")), Set::Now);
        assert_eq!(m.set("header_name_host", b"/host/", &mut free, |_| panic!()), Set::Same);
        assert_eq!(m.len(), 2);
        assert_eq!(undo, vec![b"0".to_vec()]);
        // The end of the transaction: undo, then the generation moves on.
        m.restore_base("score", &undo[0], &mut free);
        m.end(&mut free, keep);
        assert_eq!(sorted(&m), vec![("score".into(), "0".into())]);
        assert_eq!(m.get("header_name_host"), None);
        assert!(m.get_key_value("header_name_host").is_none());
        // The next transaction sets the same key: the dead entry comes back to life.
        assert_eq!(m.set("header_name_host", b"/other/", &mut free, |_| panic!()), Set::Now);
        assert_eq!(m.get("header_name_host").map(Vec::as_slice), Some(&b"/other/"[..]));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn removed_base_entries_come_back_and_removed_new_ones_stay_gone() {
        let mut free = Vec::new();
        let mut m = TxMap::default();
        m.insert_base("a", b"1", &mut free);
        let mut undo = Vec::new();
        assert!(m.remove("a", |old| undo.push(old.to_vec())));
        assert!(!m.remove("a", |_| panic!("already removed")));
        assert_eq!(m.get("a"), None);
        assert!(m.is_empty());
        // Set again in the same transaction: a new entry, no undo needed.
        assert_eq!(m.set("a", b"2", &mut free, |_| panic!()), Set::Now);
        assert_eq!(m.set("0", b"cap", &mut free, |_| panic!()), Set::Now);
        assert!(m.remove("0", |_| panic!("not a base entry")));
        assert_eq!(m.len(), 1);
        m.restore_base("a", &undo[0], &mut free);
        m.end(&mut free, keep);
        assert_eq!(sorted(&m), vec![("a".into(), "1".into())]);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_remembered_location_is_used_only_for_the_slots_it_was_made_for() {
        let mut free = Vec::new();
        let mut m = TxMap::default();
        m.insert_base("base", b"x", &mut free);
        let loc = Cell::new(Loc::default());
        assert_eq!(m.set_at(&loc, "k", b"1", &mut free, |_| panic!()), Set::Now);
        m.end(&mut free, keep);
        // The next transaction: the remembered slot, dead, comes back with the new value.
        assert_eq!(m.set_at(&loc, "k", b"2", &mut free, |_| panic!()), Set::Now);
        assert_eq!(m.get("k").map(Vec::as_slice), Some(&b"2"[..]));
        assert!(m.remove_at(&loc, "k", |_| panic!()));
        assert_eq!(m.get("k"), None);
        // Another map (another stamp): looked up by key, not by the slot number.
        let mut other = TxMap::default();
        other.insert_base("first", b"a", &mut free);
        other.insert_base("k", b"b", &mut free);
        let mut undo = Vec::new();
        assert_eq!(other.set_at(&loc, "k", b"3", &mut free, |old| undo.push(old.to_vec())), Set::Base);
        assert_eq!(undo, vec![b"b".to_vec()]);
        assert_eq!(other.get("first").map(Vec::as_slice), Some(&b"a"[..]));
        // After a drain the slots are new: the location is stale again.
        other.drain_into(&mut free, keep);
        assert_eq!(other.set_at(&loc, "k", b"4", &mut free, |_| panic!()), Set::Now);
        assert_eq!(sorted(&other), vec![("k".into(), "4".into())]);
    }

    #[test]
    fn dead_entries_are_bounded() {
        let mut free = Vec::new();
        let mut m = TxMap::default();
        m.insert_base("base", b"x", &mut free);
        for t in 0..50 {
            for i in 0..20 {
                m.set(&format!("k{t}_{i}"), b"v", &mut free, |_| panic!());
            }
            m.end(&mut free, keep);
            assert!(m.index.len() <= 2 * m.len() + DEAD_SLACK + 20, "{}", m.index.len());
            assert_eq!(m.index.len(), m.slots.len());
            assert_eq!(sorted(&m), vec![("base".into(), "x".into())]);
        }
        assert!(!free.is_empty());
        m.drain_into(&mut free, keep);
        assert!(m.is_empty() && m.index.is_empty() && m.slots.is_empty());
    }
}
