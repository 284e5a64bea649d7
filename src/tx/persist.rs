//! Persistent collections (`initcol:ip=...`, `initcol:global=...`, then `setvar:ip.x=+1`,
//! `expirevar:ip.x=60`, and `IP:x` / `GLOBAL:x` / `%{ip.x}` in rules), kept by the host.
//!
//! The engine does not store anything itself: the host hands the transaction a
//! [`CollectionStore`] (Envoy: proxy-wasm shared data, one store for all workers). `initcol`
//! loads a record into the transaction; `setvar` / `expirevar` change the local copy (rules
//! later in the transaction see the change) and append to a journal; at the end of the
//! transaction ([`Transaction::process_logging`](super::Transaction::process_logging)) the
//! journal is replayed on the *current* stored record inside one atomic update, so `+1` from
//! two workers at once counts twice (ModSecurity v2 does the same with deltas).
//!
//! Without a store (the CLI, a host that gives none) `initcol` starts an empty collection
//! that lives for the transaction, as before.
//!
//! Records are bounded: at most [`MAX_VARS`] variables, names up to [`MAX_NAME`] bytes,
//! values up to [`MAX_VALUE`] bytes; writes beyond are ignored. A record remembers its
//! collection key so a host that maps keys to a bounded set of slots can detect a slot
//! held by another key (the record then reads as empty and is overwritten).

use std::collections::BTreeMap;

pub const MAX_VARS: usize = 64;
pub const MAX_NAME: usize = 128;
pub const MAX_VALUE: usize = 1024;
const MAX_KEY: usize = 512;

/// Where persistent collections live; implemented by the host.
pub trait CollectionStore: Send + Sync {
    /// The record last written for (`collection`, `key`), if any (opaque bytes).
    fn load(&self, collection: &str, key: &str) -> Option<Vec<u8>>;
    /// Replaces the record with `f(current)` atomically (retrying `f` on a concurrent write).
    /// Returns false when the update could not be made.
    fn update(&self, collection: &str, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Vec<u8>) -> bool;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub value: Vec<u8>,
    /// Milliseconds since the epoch; `None`: no expiry.
    pub expires: Option<u64>,
}

/// One change, replayed on the stored record at the end of the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Set(String, Vec<u8>),
    Add(String, i64),
    Delete(String),
    Expire(String, u64),
}

/// A collection loaded by `initcol`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    pub name: String,
    pub key: String,
    pub vars: BTreeMap<String, Entry>,
    pub journal: Vec<Change>,
}

/// Encodes a record: key, then (name, value, expires) per variable, lengths little-endian.
pub(crate) fn encode(key: &str, vars: &BTreeMap<String, Entry>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    for (name, e) in vars {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(e.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.value);
        out.extend_from_slice(&e.expires.unwrap_or(0).to_le_bytes());
    }
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<usize> {
        self.take(4).and_then(|b| b.try_into().ok()).map(|b| u32::from_le_bytes(b) as usize)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }
    fn string(&mut self, max: usize) -> Option<String> {
        let n = self.u32()?;
        if n > max {
            return None;
        }
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// Decodes a record of `key`: `None` when it is damaged; an empty map when it belongs to
/// another key. Variables expired at `now` are dropped.
pub(crate) fn decode(bytes: &[u8], key: &str, now: u64) -> Option<BTreeMap<String, Entry>> {
    let mut r = Reader(bytes);
    let stored_key = r.string(MAX_KEY)?;
    let mut vars = BTreeMap::new();
    if stored_key != key {
        return Some(vars);
    }
    while !r.0.is_empty() && vars.len() < MAX_VARS {
        let name = r.string(MAX_NAME)?;
        let n = r.u32()?;
        if n > MAX_VALUE {
            return None;
        }
        let value = r.take(n)?.to_vec();
        let expires = match r.u64()? {
            0 => None,
            t => Some(t),
        };
        if expires.is_none_or(|t| t > now) {
            vars.insert(name, Entry { value, expires });
        }
    }
    Some(vars)
}

/// Applies one change to a variable map (bounded), at time `now`.
pub(crate) fn apply(vars: &mut BTreeMap<String, Entry>, change: &Change) {
    let room = |vars: &BTreeMap<String, Entry>, name: &str| name.len() <= MAX_NAME && (vars.contains_key(name) || vars.len() < MAX_VARS);
    match change {
        Change::Set(name, value) => {
            if room(vars, name) && value.len() <= MAX_VALUE {
                let expires = vars.get(name).and_then(|e| e.expires);
                vars.insert(name.clone(), Entry { value: value.clone(), expires });
            }
        }
        Change::Add(name, delta) => {
            if room(vars, name) {
                let cur = vars.get(name).map(|e| crate::operators::to_int(&e.value)).unwrap_or(0);
                let expires = vars.get(name).and_then(|e| e.expires);
                vars.insert(name.clone(), Entry { value: cur.saturating_add(*delta).to_string().into_bytes(), expires });
            }
        }
        Change::Delete(name) => {
            vars.remove(name);
        }
        Change::Expire(name, at) => {
            if let Some(e) = vars.get_mut(name) {
                e.expires = Some(*at);
            }
        }
    }
}

/// The stored record after replaying `journal` on `current` (another key's or a damaged
/// record is replaced).
pub(crate) fn replay(current: Option<&[u8]>, key: &str, journal: &[Change], now: u64) -> Vec<u8> {
    let mut vars = current.and_then(|c| decode(c, key, now)).unwrap_or_default();
    for c in journal {
        apply(&mut vars, c);
    }
    encode(key, &vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_expire() {
        let mut vars = BTreeMap::new();
        vars.insert("hits".to_string(), Entry { value: b"3".to_vec(), expires: Some(2_000) });
        vars.insert("flag".to_string(), Entry { value: b"\xff\x00".to_vec(), expires: None });
        let bytes = encode("1.2.3.4", &vars);
        assert_eq!(decode(&bytes, "1.2.3.4", 1_000), Some(vars.clone()));
        // Expired at 2,000.
        let later = decode(&bytes, "1.2.3.4", 2_000).unwrap();
        assert_eq!(later.keys().collect::<Vec<_>>(), ["flag"]);
        // Another key's record reads as empty; damaged bytes as None.
        assert_eq!(decode(&bytes, "5.6.7.8", 0), Some(BTreeMap::new()));
        assert_eq!(decode(&bytes[..bytes.len() - 3], "1.2.3.4", 0), None);
        assert_eq!(decode(b"", "k", 0), None);
        assert_eq!(decode(&[0xff; 4], "k", 0), None);
    }

    #[test]
    fn replay_adds_deltas_to_the_current_record() {
        let j = [Change::Add("hits".into(), 1), Change::Expire("hits".into(), 9_000)];
        let first = replay(None, "k", &j, 0);
        // Another worker wrote hits=5 in between: the delta lands on 5.
        let mut other = BTreeMap::new();
        other.insert("hits".to_string(), Entry { value: b"5".to_vec(), expires: None });
        let merged = replay(Some(&encode("k", &other)), "k", &j, 0);
        assert_eq!(decode(&merged, "k", 0).unwrap()["hits"], Entry { value: b"6".to_vec(), expires: Some(9_000) });
        assert_eq!(decode(&first, "k", 0).unwrap()["hits"].value, b"1");
        let deleted = replay(Some(&merged), "k", &[Change::Delete("hits".into())], 0);
        assert!(decode(&deleted, "k", 0).unwrap().is_empty());
    }

    #[test]
    fn records_stay_bounded() {
        let mut vars = BTreeMap::new();
        for i in 0..200 {
            apply(&mut vars, &Change::Set(format!("v{i}"), b"x".to_vec()));
        }
        assert_eq!(vars.len(), MAX_VARS);
        apply(&mut vars, &Change::Set("v0".into(), vec![b'a'; MAX_VALUE + 1]));
        assert_eq!(vars["v0"].value, b"x");
        apply(&mut vars, &Change::Set("n".repeat(MAX_NAME + 1), b"x".to_vec()));
        assert_eq!(vars.len(), MAX_VARS);
    }
}
