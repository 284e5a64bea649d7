//! Required-literal prefilters for `@rx`.
//!
//! For each regex we compute, from its syntax tree, a set of strings such that
//! every match must contain at least one of them (case-insensitively). At run
//! time one Aho-Corasick scan of a value tells which of all those strings it
//! contains, and a 256-bit byte set tells which bytes it contains; a rule whose
//! requirement is absent from the value cannot match, so its regex is skipped.
//!
//! The analysis is conservative: when in doubt (unbounded classes, optional
//! parts, too many alternatives) it gives up and the rule always runs. It lives in
//! [`super::literals`] (also run at build time on the embedded files); this module builds
//! and runs the scan.

use std::collections::HashMap;

/// A rule's requirement: a match contains one of a set of bytes or one of a set of literals.
/// Compiled into [`Prefilter`]'s tables; at run time one [`Prefilter::scan`] of a value gives
/// the bit set of the requirements it satisfies, and a rule's test is one bit.
/// Literals shorter than [`MIN_AC_LIT`] are represented by their first byte (a weaker but
/// sound test that keeps the scan from reporting matches everywhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    pub id: u32,
}

/// Shortest literal the scan looks for (shorter ones are byte requirements).
pub const MIN_AC_LIT: usize = 2;

/// How many first bytes of each literal the scan looks up (see [`Builder::build`]).
const HEAD: usize = 4;

/// All literals of all prefiltered rules: their first bytes (lowercase) in hash tables,
/// the literals by head, and which
/// requirements each literal and each byte satisfies.
#[derive(Debug)]
pub struct Prefilter {
    /// The distinct first [`HEAD`] bytes of the literals (head id = index in `tails`), by
    /// their bytes; see [`Builder::build`].
    heads: HeadTable,
    /// The literals that start with head `h`: `tails[tail_start[h]..tail_start[h + 1]]`,
    /// checked in full where the head is found.
    tails: Vec<Tail>,
    tail_start: Vec<u32>,
    /// Words of a requirement bit set.
    pub words: usize,
    /// The bytes by class (bytes that satisfy the same requirements; past 64 classes, the
    /// last one holds the union of the rest, a superset, which is sound): per byte, its
    /// class's bit (0: it satisfies nothing). Class `c`'s row (the requirements its bytes
    /// satisfy) without its zero words: `class_words[class_start[c]..class_start[c + 1]]`,
    /// as (word index, bits).
    byte_class: Box<[u64; 256]>,
    class_start: Vec<u32>,
    class_words: Vec<(u32, u64)>,
    /// The requirements of the literals (see [`Tail::reqs`]).
    lit_reqs: Vec<u32>,
    /// For [`Prefilter::describe`]: the literals, and each requirement's bytes and literal ids.
    lits: Vec<Vec<u8>>,
    reqs: Vec<([u64; 4], Vec<u32>)>,
}

/// A literal as the scan checks it past its head, in one flat array (no pointer to follow
/// before the common case is decided).
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// Its bytes after the head, up to four (lowercase, little-endian), zeros past its end,
    /// and the mask of the bytes it has there.
    next: u32,
    mask: u32,
    /// Its length and id (bytes past `HEAD + 4` are compared in `lits`).
    len: u32,
    lit: u32,
    /// Its requirements: `lit_reqs[reqs.0..reqs.1]`.
    reqs: (u32, u32),
}

/// The requirements a value satisfies (see [`Prefilter::scan`]).
#[derive(Debug, Clone, Default)]
pub struct Satisfied(Words);

/// The words of a requirement set: inline up to [`INLINE_WORDS`] words (512 requirements;
/// the CRS has ~380), so a scan allocates nothing of its own.
#[derive(Debug, Clone)]
enum Words {
    Inline([u64; INLINE_WORDS]),
    Heap(Vec<u64>),
}

const INLINE_WORDS: usize = 8;

impl Default for Words {
    fn default() -> Words {
        Words::Inline([0; INLINE_WORDS])
    }
}

impl Satisfied {
    fn new(words: usize, fill: u64) -> Satisfied {
        if words <= INLINE_WORDS {
            Satisfied(Words::Inline([fill; INLINE_WORDS]))
        } else {
            Satisfied(Words::Heap(vec![fill; words]))
        }
    }

    fn words(&self) -> &[u64] {
        match &self.0 {
            Words::Inline(w) => w,
            Words::Heap(w) => w,
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.0 {
            Words::Inline(w) => w,
            Words::Heap(w) => w,
        }
    }

    /// Adds what `other` satisfies.
    pub fn union_with(&mut self, other: &Satisfied) {
        // Both inline (the CRS): a loop of known length, unrolled.
        if let (Words::Inline(a), Words::Inline(b)) = (&mut self.0, &other.0) {
            for (a, b) in a.iter_mut().zip(b) {
                *a |= b;
            }
            return;
        }
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a |= b;
        }
    }

    /// Satisfies nothing (for [`Satisfied::union_with`]).
    pub fn none(words: usize) -> Satisfied {
        Satisfied::new(words, 0)
    }

    pub fn has(&self, r: Requirement) -> bool {
        self.words().get(r.id as usize / 64).is_some_and(|w| w & (1u64 << (r.id % 64)) != 0)
    }

    fn set(&mut self, id: u32) {
        if let Some(w) = self.words_mut().get_mut(id as usize / 64) {
            *w |= 1u64 << (id % 64);
        }
    }
}

impl Prefilter {
    /// A requirement in words: `bytes [..] or literals "..", ".."` (for `wafer profile`).
    pub fn describe(&self, r: Requirement) -> String {
        let Some((bytes, lits)) = self.reqs.get(r.id as usize) else { return String::new() };
        let mut out = String::new();
        let set: Vec<u8> = (0..=255u8).filter(|&b| bytes.get(usize::from(b / 64)).is_some_and(|w| w & (1u64 << (b % 64)) != 0)).collect();
        if !set.is_empty() {
            out.push_str(&format!("bytes {:?}", String::from_utf8_lossy(&set)));
        }
        if !lits.is_empty() {
            if !out.is_empty() {
                out.push_str(" or ");
            }
            let words: Vec<String> = lits.iter().filter_map(|&l| self.lits.get(l as usize)).map(|l| format!("{:?}", String::from_utf8_lossy(l))).collect();
            out.push_str(&format!("{} literals {}", words.len(), words.join(" ")));
        }
        out
    }

    /// The requirements `v` satisfies: one pass for its bytes, one for its literals.
    pub fn scan(&self, v: &[u8]) -> Satisfied {
        if self.words == 0 || self.tails.is_empty() {
            return self.bytes_part(v);
        }
        let mut out = Satisfied::new(self.words, 0);
        let classes = self.literals_and_classes(v, &mut out);
        self.classes_into(classes, &mut out);
        out
    }

    /// What the literals of `v` satisfy, from its lowercase form `lower` (the same for every
    /// value that lowercases to it), added to what the bytes of `v` satisfy.
    pub fn scan_with_lowercase(&self, v: &[u8], lower: &[u8], lits: &mut Option<Satisfied>) -> Satisfied {
        if self.words == 0 {
            return self.bytes_part(v);
        }
        // When `lower` is `v` itself (no capitals), the literal pass also gives v's byte classes.
        let mut classes = None;
        let lits = lits.get_or_insert_with(|| {
            let mut l = Satisfied::new(self.words, 0);
            if !self.tails.is_empty() {
                let c = self.literals_and_classes(lower, &mut l);
                classes = std::ptr::eq(lower, v).then_some(c);
            }
            l
        });
        let mut out = match classes {
            Some(c) => {
                let mut out = Satisfied::new(self.words, 0);
                self.classes_into(c, &mut out);
                out
            }
            None => self.bytes_part(v),
        };
        out.union_with(lits);
        out
    }

    /// What a value containing the bytes of `set` (one bit per byte) satisfies by its bytes
    /// alone (its literals not looked at).
    pub fn bytes_of_set(&self, set: &[u64; 4]) -> Satisfied {
        let mut out = Satisfied::new(self.words, 0);
        if self.words == 0 {
            return out;
        }
        let mut classes = 0u64;
        for (w, &bits) in set.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let b = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                classes |= self.byte_class.get(b).copied().unwrap_or(0);
            }
        }
        self.classes_into(classes, &mut out);
        out
    }

    /// What the bytes of `v` satisfy.
    fn bytes_part(&self, v: &[u8]) -> Satisfied {
        let mut out = Satisfied::new(self.words, 0);
        if self.words == 0 {
            return out;
        }
        // One load and an OR in a register per byte, then one row per class present.
        let mut classes = 0u64;
        for &b in v {
            classes |= self.byte_class.get(usize::from(b)).copied().unwrap_or(0);
        }
        self.classes_into(classes, &mut out);
        out
    }

    /// Adds the rows of the byte classes in `classes`.
    fn classes_into(&self, mut classes: u64, out: &mut Satisfied) {
        let words = out.words_mut();
        while classes != 0 {
            let c = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            let (from, to) = (self.class_start.get(c).copied().unwrap_or(0), self.class_start.get(c + 1).copied().unwrap_or(0));
            for &(w, bits) in self.class_words.get(from as usize..to as usize).unwrap_or_default() {
                if let Some(o) = words.get_mut(w as usize) {
                    *o |= bits;
                }
            }
        }
    }

    /// Adds what the literals of head `h`, found at the start of `rest` (in any case), satisfy.
    #[inline(always)]
    fn tails_into(&self, h: usize, rest: &[u8], out: &mut Satisfied) {
        let (from, to) = (self.tail_start.get(h).copied().unwrap_or(0), self.tail_start.get(h + 1).copied().unwrap_or(0));
        let next = rest.iter().skip(HEAD).take(4).rev().fold(0u32, |k, &b| k << 8 | u32::from(lower_t(b)));
        for t in self.tails.get(from as usize..to as usize).unwrap_or_default() {
            if next & t.mask == t.next && t.len as usize <= rest.len() && (t.len as usize <= HEAD + 4 || self.long_matches(t.lit, rest)) {
                for &r in self.lit_reqs.get(t.reqs.0 as usize..t.reqs.1 as usize).unwrap_or_default() {
                    out.set(r);
                }
            }
        }
    }

    /// Whether literal `l` (lowercase, longer than `HEAD + 4`), whose first `HEAD + 4`
    /// bytes `rest` starts with, continues as `rest` does in any case.
    #[inline(never)]
    fn long_matches(&self, l: u32, rest: &[u8]) -> bool {
        self.lits.get(l as usize).is_some_and(|lit| match (rest.get(HEAD + 4..lit.len()), lit.get(HEAD + 4..)) {
            (Some(r), Some(t)) => r.eq_ignore_ascii_case(t),
            _ => false,
        })
    }

    /// Adds what the literals found in `v` (case-insensitively) satisfy, and returns the
    /// byte classes present (see [`Prefilter::bytes_part`]): one pass for both.
    fn literals_and_classes(&self, v: &[u8], out: &mut Satisfied) -> u64 {
        let t = &self.heads;
        // Every start position: its window `win` (v[i..i + 4] lowercase, zeros past the end,
        // built as i advances) tested against two 8 KB bit sets, the 2-byte heads and the
        // hashed 3-byte starts of longer heads; the 15-20% of positions that pass (most of
        // them a head: CRS literals such as "on", "if", "json") look their heads up in hash
        // tables. No state carried from byte to byte (a DFA's transition loads form one
        // chain of dependent loads through a large table), no lowercase copy. (Measured on
        // the values of a CRS GET, 1 KB and 10 KB JSON: 30-40% less time than one 64 KB
        // table of 2-byte starts, a lowercase copy and a second pass for the bytes;
        // collecting the candidates first and looking them up after was slower.)
        let class = |b: u8| self.byte_class.get(usize::from(b)).copied().unwrap_or(0);
        let mut classes = v.iter().take(HEAD).fold(0u64, |c, &b| c | class(b));
        let mut win = v.iter().take(HEAD).rev().fold(0u32, |k, &b| k << 8 | u32::from(lower_t(b)));
        // The test of the position whose window is `win`.
        let at = |i: usize, win: u32, out: &mut Satisfied| {
            let w2 = (win & 0xffff) as usize;
            let h3 = hash3(win);
            let two = t.two.get(w2 >> 6).map_or(0, |w| w >> (w2 & 63));
            let three = t.three.get(h3 >> 6).map_or(0, |w| w >> (h3 & 63));
            if (two | three) & 1 != 0 {
                self.heads_at(win, two & 1 != 0, three & 1 != 0, v.get(i..).unwrap_or_default(), out);
            }
        };
        // While bytes enter the window (the bulk of the value: one iterator step and no
        // bounds check per position), then its last positions, zeros entering.
        let mut i = 0;
        for &b in v.get(HEAD..).unwrap_or_default() {
            at(i, win, out);
            classes |= class(b);
            win = win >> 8 | u32::from(lower_t(b)) << 24;
            i += 1;
        }
        while i + 1 < v.len() {
            at(i, win, out);
            win >>= 8;
            i += 1;
        }
        classes
    }

    /// Adds what the literals at the start of `rest` (a candidate position, `win` its first
    /// four bytes lowercase; `two`, `three`: the bit sets that passed it) satisfy.
    #[inline(never)]
    fn heads_at(&self, win: u32, two: bool, three: bool, rest: &[u8], out: &mut Satisfied) {
        let t = &self.heads;
        if two {
            if let Some(h) = find(&t.slots2, win & 0xffff) {
                self.tails_into(h, rest, out);
            }
        }
        if !three {
            return;
        }
        if rest.len() >= 3 {
            if let Some(h) = find(&t.slots3, win & 0xff_ffff) {
                self.tails_into(h, rest, out);
            }
        }
        if rest.len() >= 4 {
            if let Some(h) = find(&t.slots4, win) {
                self.tails_into(h, rest, out);
            }
        }
    }
}

/// ASCII lowercase by table (one load, no branch).
#[inline(always)]
fn lower_t(b: u8) -> u8 {
    LOWER.get(usize::from(b)).copied().unwrap_or(b)
}

// Indexing in a constant is checked by the compiler: out of bounds fails the build.
#[allow(clippy::indexing_slicing)]
static LOWER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u8).to_ascii_lowercase();
        i += 1;
    }
    t
};

/// The bit of a 3-byte start (the low three bytes of `win`) in [`HeadTable::three`].
#[inline(always)]
fn hash3(win: u32) -> usize {
    ((win & 0xff_ffff).wrapping_mul(0x9e37_79b1) >> 16) as usize
}

/// The heads (2 to [`HEAD`] bytes, little-endian in a `u32`) by length, in open-addressed
/// hash tables, and two bit sets that rule most positions out before a lookup: ~50 KB for
/// the CRS's 1,643 heads (the DFA it replaced took 1.7 MB).
#[derive(Debug)]
struct HeadTable {
    /// One bit per two bytes (a `u16`): a 2-byte head is them.
    two: Box<[u64; 1 << 10]>,
    /// One bit per [`hash3`]: the first three bytes of some 3- or 4-byte head hash there.
    three: Box<[u64; 1 << 10]>,
    /// (key, head id) slots per head length, a power of two of them; id `u32::MAX`: empty.
    slots2: Vec<(u32, u32)>,
    slots3: Vec<(u32, u32)>,
    slots4: Vec<(u32, u32)>,
}

const EMPTY: u32 = u32::MAX;


impl HeadTable {
    fn new(heads: &[&[u8]]) -> HeadTable {
        let table = |len: usize| {
            let n = heads.iter().filter(|h| h.len() == len).count();
            if n == 0 {
                return Vec::new();
            }
            // At most half full: probes stay short.
            let mut slots = vec![(0, EMPTY); (2 * n).next_power_of_two()];
            let mask = slots.len() - 1;
            for (id, h) in heads.iter().enumerate().filter(|(_, h)| h.len() == len) {
                let k = pack(h);
                let mut i = hash(k) & mask;
                while slots.get(i).is_some_and(|&(_, v)| v != EMPTY) {
                    i = (i + 1) & mask;
                }
                if let Some(s) = slots.get_mut(i) {
                    *s = (k, id as u32);
                }
            }
            slots
        };
        let set = |bits: &mut [u64; 1 << 10], i: usize| {
            if let Some(w) = bits.get_mut(i >> 6) {
                *w |= 1u64 << (i & 63);
            }
        };
        let (mut two, mut three) = (Box::new([0u64; 1 << 10]), Box::new([0u64; 1 << 10]));
        for h in heads {
            match h.len() {
                2 => set(&mut two, pack(h) as usize),
                3..=HEAD => set(&mut three, hash3(pack(h))),
                _ => {}
            }
        }
        HeadTable { two, three, slots2: table(2), slots3: table(3), slots4: table(4) }
    }
}

/// Up to four bytes as a little-endian `u32` (a head's key; the scan's window).
fn pack(bytes: &[u8]) -> u32 {
    bytes.iter().rev().fold(0u32, |k, &b| k << 8 | u32::from(b))
}

/// The head id stored under `key` in `slots` (see [`HeadTable`]).
#[inline(always)]
fn find(slots: &[(u32, u32)], key: u32) -> Option<usize> {
    let mask = slots.len().wrapping_sub(1);
    let mut i = hash(key) & mask;
    loop {
        let &(k, id) = slots.get(i)?;
        if id == EMPTY {
            return None;
        }
        if k == key {
            return Some(id as usize);
        }
        i = (i + 1) & mask;
    }
}

/// Multiplicative hash of a head key (the high bits are the best mixed).
#[inline(always)]
fn hash(key: u32) -> usize {
    (key.wrapping_mul(0x9e37_79b1).rotate_left(16)) as usize
}


/// Collects literals while rules are compiled, then builds the scan's tables.
#[derive(Default)]
pub struct Builder {
    ids: HashMap<Vec<u8>, u32>,
    lits: Vec<Vec<u8>>,
    /// Per requirement: its bytes and its literal ids.
    reqs: Vec<([u64; 4], Vec<u32>)>,
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
    /// The requirement of an `@rx` pattern whose required literals are `lits`
    /// (`literals::analyze_pattern`).
    pub fn literals(&mut self, lits: Vec<Vec<u8>>) -> Option<Requirement> {
        self.add_literals(lits)
    }

    /// For `@pm`: a match is one of its words (case-insensitive).
    pub fn words(&mut self, words: impl Iterator<Item = Vec<u8>>) -> Option<Requirement> {
        let lits: Vec<Vec<u8>> = words.filter(|w| !w.is_empty()).map(|w| w.to_ascii_lowercase()).collect();
        if lits.is_empty() {
            return None;
        }
        self.add_literals(lits)
    }

    fn add_literals(&mut self, lits: Vec<Vec<u8>>) -> Option<Requirement> {
        let bytes = byte_set(lits.iter().filter(|l| l.len() < MIN_AC_LIT).filter_map(|l| l.first().copied()));
        let mut ids = Vec::new();
        // Lowercase: values are scanned in their lowercase form.
        for l in lits.into_iter().filter(|l| l.len() >= MIN_AC_LIT).map(|l| l.to_ascii_lowercase()) {
            let next = u32::try_from(self.lits.len()).ok()?;
            let id = *self.ids.entry(l.clone()).or_insert_with(|| {
                self.lits.push(l);
                next
            });
            ids.push(id);
        }
        let id = u32::try_from(self.reqs.len()).ok()?;
        self.reqs.push((bytes, ids));
        Some(Requirement { id })
    }

    pub fn build(self) -> Prefilter {
        let words = self.reqs.len().div_ceil(64);
        let mut byte_table = vec![0u64; 256 * words];
        let mut lit_reqs: Vec<Vec<u32>> = vec![Vec::new(); self.lits.len()];
        for (r, (bytes, lits)) in self.reqs.iter().enumerate() {
            let (word, bit) = (r / 64, 1u64 << (r % 64));
            for b in 0..256usize {
                if bytes.get(b / 64).is_some_and(|w| w & (1u64 << (b % 64)) != 0) {
                    if let Some(w) = byte_table.get_mut(b * words + word) {
                        *w |= bit;
                    }
                }
            }
            for &l in lits {
                if let Some(list) = lit_reqs.get_mut(l as usize) {
                    list.push(r as u32);
                }
            }
        }
        // The scan finds only the literals' first HEAD bytes (1,643 distinct heads for the
        // CRS's 6,155 literals), and each head found is checked against the literals that
        // start with it. Heads are looked up in hash tables (~50 KB, see HeadTable): a DFA over
        // the heads (1.7 MB; earlier design) cost as many cycles natively despite fewer
        // instructions (each byte's transition waits on the previous one's load), a DFA over
        // the whole literals took ~1 s to build, the contiguous NFA walked ~40 instructions
        // per byte.
        let mut head_ids: HashMap<&[u8], u32> = HashMap::new();
        let mut heads: Vec<&[u8]> = Vec::new();
        let mut by_head: Vec<Vec<u32>> = Vec::new();
        for (id, l) in self.lits.iter().enumerate() {
            let head = l.get(..l.len().min(HEAD)).unwrap_or(l);
            let h = *head_ids.entry(head).or_insert_with(|| {
                heads.push(head);
                by_head.push(Vec::new());
                (heads.len() - 1) as u32
            });
            if let Some(t) = by_head.get_mut(h as usize) {
                t.push(id as u32);
            }
        }
        let (mut tails, mut tail_start, mut flat_reqs) = (Vec::new(), Vec::with_capacity(by_head.len() + 1), Vec::new());
        for ids in &by_head {
            tail_start.push(tails.len() as u32);
            for &id in ids {
                let l = self.lits.get(id as usize).map(Vec::as_slice).unwrap_or_default();
                let after: Vec<u8> = l.iter().skip(HEAD).take(4).copied().collect();
                let from = flat_reqs.len() as u32;
                flat_reqs.extend(lit_reqs.get(id as usize).map(Vec::as_slice).unwrap_or_default());
                tails.push(Tail {
                    next: pack(&after),
                    mask: pack(&vec![0xff; after.len()]),
                    len: u32::try_from(l.len()).unwrap_or(u32::MAX),
                    lit: id,
                    reqs: (from, flat_reqs.len() as u32),
                });
            }
        }
        tail_start.push(tails.len() as u32);
        let heads = HeadTable::new(&heads);
        let mut rows: Vec<Vec<u64>> = Vec::new();
        let mut byte_class = Box::new([0u64; 256]);
        for (b, class) in byte_class.iter_mut().enumerate() {
            let row = byte_table.get(b * words..(b + 1) * words).unwrap_or_default();
            if row.iter().all(|&w| w == 0) {
                continue;
            }
            let c = match rows.iter().position(|r| r.as_slice() == row) {
                Some(c) => c,
                None if rows.len() < 64 => {
                    rows.push(row.to_vec());
                    rows.len() - 1
                }
                None => {
                    if let Some(last) = rows.last_mut() {
                        for (a, b) in last.iter_mut().zip(row) {
                            *a |= b;
                        }
                    }
                    63
                }
            };
            *class = 1u64 << c;
        }
        let (mut class_start, mut class_words) = (Vec::with_capacity(rows.len() + 1), Vec::new());
        for row in &rows {
            class_start.push(class_words.len() as u32);
            class_words.extend(row.iter().enumerate().filter(|(_, &bits)| bits != 0).map(|(w, &bits)| (w as u32, bits)));
        }
        class_start.push(class_words.len() as u32);
        Prefilter { heads, tails, tail_start, words, byte_class, class_start, class_words, lit_reqs: flat_reqs, lits: self.lits, reqs: self.reqs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::literals::required_literals;

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
        assert_eq!(req("\\.{2,3}/"), Some(vec!["..".into()]));
        assert_eq!(req("x(?:ab){2}"), Some(vec!["xabab".into()]));
        // An alternative without an exact set ends the exact union, not the required one.
        assert_eq!(req("foo[a-z]*|barbaz|quxquux"), Some(vec!["barbaz".into(), "foo".into(), "quxquux".into()]));
        assert_eq!(req("foo|x*|barbaz"), None);
    }

    #[test]
    fn requirement_is_sound_on_samples() {
        // Every match of the pattern contains one of the required literals.
        let cases = [("(?i)on(?:load|error)\\s*=", "x ONLOAD = y"), ("a[bc]{2,3}d", "zzacbcd"), ("(?:\\.\\./)+etc", "../../etc/passwd"), ("\\.{2,3}[/\\\\]", "a...\\b"), ("(?:ab){2}c", "xababc")];
        for (p, hay) in cases {
            let re = regex::bytes::RegexBuilder::new(p).unicode(false).build().unwrap();
            let m = re.find(hay.as_bytes()).unwrap();
            let lits = required_literals(p).unwrap();
            let text = m.as_bytes().to_ascii_lowercase();
            assert!(lits.iter().any(|l| text.windows(l.len()).any(|w| w == l.as_slice())), "{p}");
        }
    }

    #[test]
    fn scan_of_bytes_past_64_classes_stays_sound() {
        // 100 one-byte requirements: 100 byte classes, more than a class bit set holds; the
        // ones past 64 share a row (a superset). A byte must still satisfy its own
        // requirement, and a byte of no requirement nothing.
        let mut b = Builder::default();
        let reqs: Vec<Requirement> = (100u8..200).map(|x| b.add_literals(vec![vec![x]]).unwrap()).collect();
        let pf = b.build();
        for (x, r) in (100u8..200).zip(&reqs) {
            let got = pf.scan(&[b'#', x, b'!']);
            assert!(got.has(*r), "byte {x}");
            if x < 160 {
                // Among the first classes: exact.
                assert_eq!(reqs.iter().filter(|o| got.has(**o)).count(), 1, "byte {x}");
            }
        }
        let none = pf.scan(b"#-! 0-9");
        assert!(reqs.iter().all(|r| !none.has(*r)));
    }

    #[test]
    fn scan_finds_exactly_the_literals_present() {
        // Literals sharing heads, shorter and longer than HEAD, one byte (a byte requirement),
        // with capitals (matched case-insensitively); values from a small alphabet so that
        // heads often match without their literal.
        let mut sets: Vec<Vec<Vec<u8>>> = [
            &[&b"ab"[..], b"abcab"][..],
            &[b"abca", b"abcabc", b"bcab"],
            &[b"ABCAB", b"cc"],
            &[b"abcb", b"abcc", b"c"],
            &[b"aaaaaaaa", b"ba"],
            &[b"cab", b"abcabca"],
            // Longer than the head and the four bytes packed after it.
            &[b"abcabcabca", b"bcabcabcab"],
        ]
        .iter()
        .map(|set| set.iter().map(|l| l.to_vec()).collect())
        .collect();
        // A head with more than 16 literals, one requirement each.
        for x in b"abcx" {
            sets.push(vec![[&b"bcba"[..], &[*x]].concat()]);
            for y in b"abcx" {
                sets.push(vec![[&b"bcba"[..], &[*x, *y]].concat()]);
            }
        }
        sets.push(vec![b"bcba".to_vec()]);
        let mut b = Builder::default();
        let reqs: Vec<Requirement> = sets.iter().map(|s| b.add_literals(s.clone()).unwrap()).collect();
        let pf = b.build();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        // Random values, then the long literals present, cut short and missed by their last byte.
        let fixed: [&[u8]; 5] = [b"xAbCaBcAbCax", b"bcabcabcab", b"abcabcabc", b"abcabcabcb", b"BCABCABCAX"];
        for k in 0..20_000 + fixed.len() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 13) as usize;
            let v: Vec<u8> = match k.checked_sub(20_000) {
                Some(f) => fixed[f].to_vec(),
                None => (0..len).map(|i| b"abcABx"[((seed >> (8 + 3 * i)) % 6) as usize]).collect(),
            };
            let got = pf.scan(&v);
            let lower = v.to_ascii_lowercase();
            // The large-value path (literals from the lowercase form, kept for the next value
            // with that form; `lower` is `v` itself when it has no capitals) gives the same set.
            let lower_form: &[u8] = if lower == v { &v } else { &lower };
            let mut lits = None;
            for _ in 0..2 {
                assert_eq!(pf.scan_with_lowercase(&v, lower_form, &mut lits).words(), got.words(), "{:?}", String::from_utf8_lossy(&v));
            }
            for (set, r) in sets.iter().zip(&reqs) {
                let want = set.iter().any(|l| {
                    let l = l.to_ascii_lowercase();
                    if l.len() == 1 {
                        v.iter().any(|c| c.to_ascii_lowercase() == l[0])
                    } else {
                        lower.windows(l.len()).any(|w| w == l.as_slice())
                    }
                });
                assert_eq!(got.has(*r), want, "{:?} in {:?}", set, String::from_utf8_lossy(&v));
            }
        }
    }
}
