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

use std::collections::HashMap;

use super::Fx;

/// The generation of base entries: live in every transaction.
const BASE: u32 = u32::MAX;
/// The generation of removed entries.
const DEAD: u32 = 0;

/// Dead entries kept beyond the live ones (see [`TxMap::end`]).
const DEAD_SLACK: usize = 64;

#[derive(Debug)]
struct Slot {
    gen: u32,
    value: Vec<u8>,
}

/// See the module documentation. Keys are bounded by the rules (and the request values a
/// rule's `setvar` key takes from the request, which Envoy bounds), so the small hash is safe.
#[derive(Debug)]
pub(crate) struct TxMap {
    map: HashMap<String, Slot, std::hash::BuildHasherDefault<Fx>>,
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
        TxMap { map: HashMap::with_capacity_and_hasher(n, Default::default()), now: 1, live: 0, live_now: 0 }
    }

    fn is_live(&self, s: &Slot) -> bool {
        s.gen == BASE || s.gen == self.now
    }

    pub fn get(&self, key: &str) -> Option<&Vec<u8>> {
        self.map.get(key).filter(|s| self.is_live(s)).map(|s| &s.value)
    }

    pub fn get_key_value(&self, key: &str) -> Option<(&String, &Vec<u8>)> {
        self.map.get_key_value(key).filter(|(_, s)| self.is_live(s)).map(|(k, s)| (k, &s.value))
    }

    /// The live entries, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.map.iter().filter(|(_, s)| self.is_live(s)).map(|(k, s)| (k, &s.value))
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Entries the table holds, dead ones included.
    pub fn capacity(&self) -> usize {
        self.map.capacity()
    }

    pub fn reserve(&mut self, n: usize) {
        self.map.reserve(n);
    }

    /// Sets `key` to `value`. A base entry's old value is given to `undo` before it changes;
    /// a new entry takes a dead entry's slot, else a key and value buffer from `free`.
    pub fn set(&mut self, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>, undo: impl FnOnce(&[u8])) -> Set {
        let now = self.now;
        match self.map.get_mut(key) {
            Some(s) if s.gen == BASE || s.gen == now => {
                if s.value == value {
                    return Set::Same;
                }
                let base = s.gen == BASE;
                if base {
                    undo(&s.value);
                }
                s.value.clear();
                s.value.extend_from_slice(value);
                if base {
                    Set::Base
                } else {
                    Set::Now
                }
            }
            Some(s) => {
                s.gen = now;
                s.value.clear();
                s.value.extend_from_slice(value);
                self.live += 1;
                self.live_now += 1;
                Set::Now
            }
            None => {
                self.insert_new(key, value, now, free);
                self.live_now += 1;
                Set::Now
            }
        }
    }

    /// Adds `key`, absent from the table, as a base entry (the rule set's initial variables).
    pub fn insert_base(&mut self, key: &str, value: &[u8], free: &mut Vec<(String, Vec<u8>)>) {
        match self.map.get_mut(key) {
            Some(s) => {
                if !(s.gen == BASE || s.gen == self.now) {
                    self.live += 1;
                } else if s.gen == self.now {
                    self.live_now -= 1;
                }
                s.gen = BASE;
                s.value.clear();
                s.value.extend_from_slice(value);
            }
            None => self.insert_new(key, value, BASE, free),
        }
    }

    fn insert_new(&mut self, key: &str, value: &[u8], gen: u32, free: &mut Vec<(String, Vec<u8>)>) {
        let (mut k, mut v) = free.pop().unwrap_or_default();
        k.clear();
        k.push_str(key);
        v.clear();
        v.extend_from_slice(value);
        self.map.insert(k, Slot { gen, value: v });
        self.live += 1;
    }

    /// Removes `key`; a base entry's old value is given to `undo` first. False when absent.
    pub fn remove(&mut self, key: &str, undo: impl FnOnce(&[u8])) -> bool {
        let now = self.now;
        let Some(s) = self.map.get_mut(key) else { return false };
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
    /// `free` (bounded by `keep`).
    pub fn end(&mut self, free: &mut Vec<(String, Vec<u8>)>, keep: impl Fn(&mut Vec<(String, Vec<u8>)>, (String, Vec<u8>))) {
        self.live -= self.live_now;
        self.live_now = 0;
        self.now += 1;
        if self.now == BASE || self.map.len() > 2 * self.live + DEAD_SLACK {
            for (k, s) in self.map.extract_if(|_, s| s.gen != BASE) {
                keep(free, (k, s.value));
            }
            if self.now == BASE {
                self.now = 1;
            }
        }
    }

    /// Empties the map, every entry's buffers to `keep`.
    pub fn drain_into(&mut self, free: &mut Vec<(String, Vec<u8>)>, keep: impl Fn(&mut Vec<(String, Vec<u8>)>, (String, Vec<u8>))) {
        for (k, s) in self.map.drain() {
            keep(free, (k, s.value));
        }
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
    fn dead_entries_are_bounded() {
        let mut free = Vec::new();
        let mut m = TxMap::default();
        m.insert_base("base", b"x", &mut free);
        for t in 0..50 {
            for i in 0..20 {
                m.set(&format!("k{t}_{i}"), b"v", &mut free, |_| panic!());
            }
            m.end(&mut free, keep);
            assert!(m.map.len() <= 2 * m.len() + DEAD_SLACK + 20, "{}", m.map.len());
            assert_eq!(sorted(&m), vec![("base".into(), "x".into())]);
        }
        assert!(!free.is_empty());
        m.drain_into(&mut free, keep);
        assert!(m.is_empty() && m.map.is_empty());
    }
}
