//! Required-literal prefilters for `@rx`.
//!
//! For each regex we compute, from its syntax tree, a set of strings such that
//! every match must contain at least one of them (case-insensitively). At run
//! time one Aho-Corasick scan of a value tells which of all those strings it
//! contains, and a 256-bit byte set tells which bytes it contains; a rule whose
//! requirement is absent from the value cannot match, so its regex is skipped.
//!
//! The analysis is conservative: when in doubt (unbounded classes, optional
//! parts, too many alternatives) it gives up and the rule always runs.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::{BTreeSet, HashMap};

/// Largest set of alternatives kept for a requirement or an exact set.
const MAX_SET: usize = 64;
/// Longest literal kept while building cross products.
const MAX_LIT: usize = 24;
/// A class with more members than this is "any character" for the analysis.
const MAX_CLASS: usize = 12;

type Set = BTreeSet<Vec<u8>>;

/// What a sub-pattern tells us.
#[derive(Debug, Clone)]
struct Info {
    /// Every string the sub-pattern can match, when that set is small.
    exact: Option<Set>,
    /// Every match contains one of these (None: no requirement found).
    required: Option<Set>,
}

fn score(s: &Set) -> (usize, usize) {
    let min = s.iter().map(Vec::len).min().unwrap_or(0);
    (min, usize::MAX - s.len())
}

fn better(a: Option<Set>, b: Option<Set>) -> Option<Set> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if score(&b) > score(&a) { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}

fn usable(s: Set) -> Option<Set> {
    (!s.is_empty() && s.len() <= MAX_SET && s.iter().all(|l| !l.is_empty())).then_some(s)
}

fn lower(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

fn class_bytes(c: &Class) -> Option<Set> {
    let mut out = Set::new();
    match c {
        Class::Bytes(b) => {
            for r in b.ranges() {
                for x in r.start()..=r.end() {
                    out.insert(vec![lower(x)]);
                    if out.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
        Class::Unicode(u) => {
            for r in u.ranges() {
                let (s, e) = (u32::from(r.start()), u32::from(r.end()));
                if e > 0x7f || e - s > MAX_CLASS as u32 {
                    return None;
                }
                for x in s..=e {
                    out.insert(vec![lower(u8::try_from(x).ok()?)]);
                    if out.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
    }
    Some(out)
}

fn cross(a: &Set, b: &Set) -> Option<Set> {
    if a.len() * b.len() > MAX_SET {
        return None;
    }
    let mut out = Set::new();
    for x in a {
        for y in b {
            if x.len() + y.len() > MAX_LIT {
                return None;
            }
            let mut v = x.clone();
            v.extend_from_slice(y);
            out.insert(v);
        }
    }
    Some(out)
}

fn analyze(h: &Hir, depth: usize) -> Info {
    let none = Info { exact: None, required: None };
    if depth > 200 {
        return none;
    }
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Info { exact: Some(Set::from([Vec::new()])), required: None },
        HirKind::Literal(l) => {
            let lit: Vec<u8> = l.0.iter().map(|&b| lower(b)).collect();
            let s = Set::from([lit]);
            Info { exact: Some(s.clone()), required: usable(s) }
        }
        HirKind::Class(c) => match class_bytes(c) {
            Some(s) => Info { exact: Some(s.clone()), required: usable(s) },
            None => none,
        },
        HirKind::Capture(c) => analyze(&c.sub, depth + 1),
        HirKind::Repetition(r) => {
            let sub = analyze(&r.sub, depth + 1);
            if r.min == 0 {
                return none;
            }
            let exact = if r.min == 1 && r.max == Some(1) { sub.exact.clone() } else { None };
            Info { exact, required: better(sub.required, sub.exact.and_then(usable)) }
        }
        HirKind::Alternation(alts) => {
            let infos: Vec<Info> = alts.iter().map(|a| analyze(a, depth + 1)).collect();
            let mut exact = Some(Set::new());
            let mut required = Some(Set::new());
            for i in &infos {
                exact = match (exact, &i.exact) {
                    (Some(mut e), Some(x)) if e.len() + x.len() <= MAX_SET => {
                        e.extend(x.iter().cloned());
                        Some(e)
                    }
                    _ => None,
                };
                let req = better(i.required.clone(), i.exact.clone().and_then(usable));
                required = match (required, req) {
                    (Some(mut r), Some(x)) if r.len() + x.len() <= MAX_SET => {
                        r.extend(x);
                        Some(r)
                    }
                    _ => None,
                };
            }
            Info { exact, required: required.and_then(usable) }
        }
        HirKind::Concat(parts) => {
            let mut best: Option<Set> = None;
            let mut run: Option<Set> = Some(Set::from([Vec::new()]));
            let mut all_exact = true;
            for p in parts {
                let i = analyze(p, depth + 1);
                best = better(best, i.required.clone());
                match (&run, &i.exact) {
                    (Some(r), Some(x)) => match cross(r, x) {
                        Some(c) => run = Some(c),
                        None => {
                            best = better(best, run.take().and_then(usable));
                            all_exact = false;
                            run = Some(x.clone());
                        }
                    },
                    (None, Some(x)) => run = Some(x.clone()),
                    (_, None) => {
                        best = better(best, run.take().and_then(usable));
                        all_exact = false;
                        run = Some(Set::from([Vec::new()]));
                    }
                }
            }
            let exact = if all_exact { run.clone() } else { None };
            best = better(best, run.and_then(usable));
            Info { exact, required: best }
        }
    }
}

/// The requirement of one pattern: None when it can match without any of a
/// known set of strings.
pub fn required_literals(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .nest_limit(500)
        .build()
        .parse(pattern)
        .ok()?;
    let info = analyze(&hir, 0);
    let set = better(info.required, info.exact.and_then(usable))?;
    Some(set.into_iter().collect())
}

/// A rule's compiled requirement: a match contains one of `bytes` or one of
/// the literals `lits` (ids in [`Prefilter`]'s automaton). Literals shorter
/// than [`MIN_AC_LIT`] are represented by their first byte (a weaker but
/// sound test that keeps the automaton from reporting matches everywhere).
#[derive(Debug, Clone)]
pub struct Requirement {
    pub bytes: [u64; 4],
    pub lits: Vec<u32>,
}

/// Shortest literal put in the automaton.
pub const MIN_AC_LIT: usize = 3;

/// All literals of all prefiltered rules in one case-insensitive automaton.
#[derive(Debug, Default)]
pub struct Prefilter {
    pub ac: Option<AhoCorasick>,
    pub literal_count: usize,
}

/// Collects literals while rules are compiled, then builds the automaton.
#[derive(Default)]
pub struct Builder {
    ids: HashMap<Vec<u8>, u32>,
    lits: Vec<Vec<u8>>,
}

pub fn byte_set(bytes: impl Iterator<Item = u8>) -> [u64; 4] {
    let mut s = [0u64; 4];
    for b in bytes {
        for x in [b, b.to_ascii_uppercase(), b.to_ascii_lowercase()] {
            if let Some(w) = s.get_mut(usize::from(x >> 6)) {
                *w |= 1u64 << (x & 63);
            }
        }
    }
    s
}

impl Builder {
    pub fn requirement(&mut self, pattern: &str) -> Option<Requirement> {
        let lits = required_literals(pattern)?;
        self.from_literals(lits)
    }

    /// For `@pm`: a match is one of its words (case-insensitive).
    pub fn words(&mut self, words: impl Iterator<Item = Vec<u8>>) -> Option<Requirement> {
        let lits: Vec<Vec<u8>> = words.filter(|w| !w.is_empty()).map(|w| w.to_ascii_lowercase()).collect();
        if lits.is_empty() {
            return None;
        }
        self.from_literals(lits)
    }

    fn from_literals(&mut self, lits: Vec<Vec<u8>>) -> Option<Requirement> {
        let bytes = byte_set(lits.iter().filter(|l| l.len() < MIN_AC_LIT).filter_map(|l| l.first().copied()));
        let mut ids = Vec::new();
        for l in lits.into_iter().filter(|l| l.len() >= MIN_AC_LIT) {
            let next = u32::try_from(self.lits.len()).ok()?;
            let id = *self.ids.entry(l.clone()).or_insert_with(|| {
                self.lits.push(l);
                next
            });
            ids.push(id);
        }
        Some(Requirement { bytes, lits: ids })
    }

    pub fn build(self) -> Prefilter {
        if self.lits.is_empty() {
            return Prefilter::default();
        }
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&self.lits)
            .ok();
        Prefilter { ac, literal_count: self.lits.len() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(p: &str) -> Option<Vec<String>> {
        required_literals(p).map(|v| v.into_iter().map(|l| String::from_utf8_lossy(&l).into_owned()).collect())
    }

    #[test]
    fn extracts_required_literals() {
        assert_eq!(req("(?i)union\\s+select"), Some(vec!["select".into()]));
        assert_eq!(req("foo|bar"), Some(vec!["bar".into(), "foo".into()]));
        assert_eq!(req("a(?:b|c)d"), Some(vec!["abd".into(), "acd".into()]));
        assert_eq!(req("x*"), None);
        assert_eq!(req("[<>]"), Some(vec!["<".into(), ">".into()]));
        assert_eq!(req("\\w+"), None);
        assert_eq!(req("(?:ab)?c"), Some(vec!["c".into()]));
    }

    #[test]
    fn requirement_is_sound_on_samples() {
        // Every match of the pattern contains one of the required literals.
        let cases = [("(?i)on(?:load|error)\\s*=", "x ONLOAD = y"), ("a[bc]{2,3}d", "zzacbcd"), ("(?:\\.\\./)+etc", "../../etc/passwd")];
        for (p, hay) in cases {
            let re = regex::bytes::RegexBuilder::new(p).unicode(false).build().unwrap();
            let m = re.find(hay.as_bytes()).unwrap();
            let lits = required_literals(p).unwrap();
            let text = m.as_bytes().to_ascii_lowercase();
            assert!(lits.iter().any(|l| text.windows(l.len()).any(|w| w == l.as_slice())), "{p}");
        }
    }
}
