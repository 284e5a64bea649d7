//! What a `@rx` pattern needs, from its syntax tree alone: the required literals of its
//! prefilter (see `prefilter`), whether it matches every whole value, the byte-mode form of its
//! escapes. Pure functions of the pattern (only `regex_syntax` and `std`), so `build.rs`
//! includes this file too and analyzes the embedded rule files' patterns at build time
//! ([`analyze_pattern`]): a VM then looks them up instead of parsing each one
//! (`crate::embedded::rx_analysis`).
//!
//! Required literals: for each regex we compute, from its syntax tree, a set of strings such
//! that every match must contain at least one of them (case-insensitively). The analysis is
//! conservative: when in doubt (unbounded classes, optional parts, too many alternatives) it
//! gives up and the rule always runs.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Largest set of alternatives kept for a requirement or an exact set.
const MAX_SET: usize = 64;
/// Longest literal kept while building cross products.
const MAX_LIT: usize = 24;
/// A class with more members than this is "any character" for the analysis.
const MAX_CLASS: usize = 12;

/// A set of literals, sorted: at most [`MAX_SET`] of them, so a vector (a tree allocated a node
/// per few literals and was a fifth of compiling the CRS).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Set(Vec<Vec<u8>>);

impl Set {
    fn new() -> Set {
        Set(Vec::new())
    }

    fn one(literal: Vec<u8>) -> Set {
        Set(vec![literal])
    }

    fn insert(&mut self, literal: Vec<u8>) {
        if let Err(at) = self.0.binary_search(&literal) {
            self.0.insert(at, literal);
        }
    }

    fn extend(&mut self, literals: impl IntoIterator<Item = Vec<u8>>) {
        for l in literals {
            self.insert(l);
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn iter(&self) -> std::slice::Iter<'_, Vec<u8>> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Set {
    type Item = &'a Vec<u8>;
    type IntoIter = std::slice::Iter<'a, Vec<u8>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Set {
    type Item = Vec<u8>;
    type IntoIter = std::vec::IntoIter<Vec<u8>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

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
        HirKind::Empty | HirKind::Look(_) => Info { exact: Some(Set::one(Vec::new())), required: None },
        HirKind::Literal(l) => {
            let lit: Vec<u8> = l.0.iter().map(|&b| lower(b)).collect();
            let s = Set::one(lit);
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
            // `x{m,n}` holds m matches of `x` in a row: with a small exact set E for `x`, a
            // string of E^m (e.g. `\.{2,3}` needs ".."; a lone "." matches far more values).
            let run = sub.exact.as_ref().and_then(|e| {
                let mut acc = e.clone();
                for _ in 1..r.min.min(8) {
                    acc = cross(&acc, e)?;
                }
                Some(acc)
            });
            let exact = if r.max == Some(r.min) && r.min <= 8 { run.clone() } else { None };
            Info { exact, required: better(better(sub.required, sub.exact.and_then(usable)), run.and_then(usable)) }
        }
        HirKind::Alternation(alts) => {
            // Each alternative's sets are merged (exact) or taken (required) as they come, not
            // cloned; once both are gone the rest cannot bring them back.
            let mut exact = Some(Set::new());
            let mut required = Some(Set::new());
            for a in alts {
                let i = analyze(a, depth + 1);
                exact = match (exact, &i.exact) {
                    (Some(mut e), Some(x)) if e.len() + x.len() <= MAX_SET => {
                        e.extend(x.iter().cloned());
                        Some(e)
                    }
                    _ => None,
                };
                let req = better(i.required, i.exact.and_then(usable));
                required = match (required, req) {
                    (Some(mut r), Some(x)) if r.len() + x.len() <= MAX_SET => {
                        r.extend(x);
                        Some(r)
                    }
                    _ => None,
                };
                if exact.is_none() && required.is_none() {
                    break;
                }
            }
            Info { exact, required: required.and_then(usable) }
        }
        HirKind::Concat(parts) => {
            let mut best: Option<Set> = None;
            let mut run: Option<Set> = Some(Set::one(Vec::new()));
            let mut all_exact = true;
            for p in parts {
                let i = analyze(p, depth + 1);
                best = better(best, i.required);
                match (run.take(), i.exact) {
                    (Some(r), Some(x)) => match cross(&r, &x) {
                        Some(c) => run = Some(c),
                        None => {
                            best = better(best, usable(r));
                            all_exact = false;
                            run = Some(x);
                        }
                    },
                    (None, Some(x)) => run = Some(x),
                    (r, None) => {
                        best = better(best, r.and_then(usable));
                        all_exact = false;
                        run = Some(Set::one(Vec::new()));
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
    required_literals_hir(&hir)
}

/// [`required_literals`] of an already parsed pattern (byte mode).
pub fn required_literals_hir(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let info = analyze(hir, 0);
    let set = better(info.required, info.exact.and_then(usable))?;
    Some(set.into_iter().collect())
}

/// Whether `hir` matches every value from its start to its end, leftmost-first: `.*` (any
/// byte, greedy) with at most a start anchor before and an end anchor after.
pub fn matches_whole(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind, Look};
    let any = |h: &regex_syntax::hir::Hir| match h.kind() {
        HirKind::Repetition(r) if r.min == 0 && r.max.is_none() && r.greedy => match r.sub.kind() {
            HirKind::Class(Class::Bytes(c)) => c.ranges().len() == 1 && c.ranges().first().is_some_and(|r| r.start() == 0 && r.end() == 255),
            _ => false,
        },
        _ => false,
    };
    let start = |h: &regex_syntax::hir::Hir| matches!(h.kind(), HirKind::Look(Look::Start | Look::StartLF));
    let end = |h: &regex_syntax::hir::Hir| matches!(h.kind(), HirKind::Look(Look::End | Look::EndLF));
    match hir.kind() {
        HirKind::Concat(parts) => match parts.as_slice() {
            [s, a, e] => start(s) && any(a) && end(e),
            [x, y] => (start(x) && any(y)) || (any(x) && end(y)),
            _ => false,
        },
        _ => any(hir),
    }
}

pub fn syntax(pattern: &str, unicode: bool) -> Result<regex_syntax::hir::Hir, String> {
    regex_syntax::ParserBuilder::new()
        .unicode(unicode)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .build()
        .parse(pattern)
        .map_err(|e| e.to_string())
}

/// Rewrites `\x{hh}` (hh < 0x100) into `\xhh` so it names a byte.
pub fn byte_escapes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(pos) = rest.find("\\x{") {
        // Count the backslashes before: an escaped backslash is not an escape.
        let before = rest.get(..pos).unwrap_or("");
        let slashes = before.bytes().rev().take_while(|&b| b == b'\\').count();
        let after = rest.get(pos + 3..).unwrap_or("");
        let close = after.find('}');
        match close {
            Some(end) if slashes % 2 == 0 => {
                let hex = after.get(..end).unwrap_or("");
                match u32::from_str_radix(hex, 16) {
                    Ok(v) if v < 0x100 && !hex.is_empty() => {
                        out.push_str(before);
                        out.push_str(&format!("\\x{v:02x}"));
                    }
                    _ => {
                        out.push_str(before);
                        out.push_str("\\x{");
                        out.push_str(hex);
                        out.push('}');
                    }
                }
                rest = after.get(end + 1..).unwrap_or("");
            }
            _ => {
                out.push_str(rest.get(..pos + 3).unwrap_or(""));
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Required literals: a match contains one of them (case-insensitively).
pub type Literals = Vec<Vec<u8>>;

/// A pattern's analysis: whether it needs Unicode mode (else its regex is built in byte mode
/// from [`byte_escapes`] of it), whether it matches every whole value, and its required
/// literals (None: no requirement, the rule always runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub unicode: bool,
    pub whole: bool,
    pub literals: Option<Literals>,
}

/// Parses `pattern` as `@rx` does (byte mode, else Unicode mode) and analyzes it; Err with the
/// byte mode's error when neither mode parses it.
pub fn analyze_pattern(pattern: &str) -> Result<Analysis, String> {
    let pattern = if pattern.is_empty() { ".*" } else { pattern };
    match syntax(&byte_escapes(pattern), false) {
        Ok(hir) => Ok(Analysis { unicode: false, whole: matches_whole(&hir), literals: required_literals_hir(&hir) }),
        Err(first) => match syntax(pattern, true) {
            Ok(_) => Ok(Analysis { unicode: true, whole: false, literals: None }),
            Err(_) => Err(format!("invalid regular expression: {first}")),
        },
    }
}

/// Names a pattern in the build-time table: its length and two 64-bit hashes (FNV-1a and a
/// multiply-rotate hash), so that another pattern taking an embedded one's analysis would need
/// both to collide at once.
pub fn pattern_key(pattern: &str) -> (u64, u64, u32) {
    let (mut a, mut b) = (0xcbf2_9ce4_8422_2325u64, 0x9e37_79b9_7f4a_7c15u64);
    for &x in pattern.as_bytes() {
        a = (a ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ u64::from(x)).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29);
    }
    (a, b, pattern.len() as u32)
}
