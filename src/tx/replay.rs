//! Transaction replay: a rule that had no hits in an earlier transaction of its rule set on
//! this thread (its *trace*: the last one of the same method and path among the last
//! [`TRACES`] kept, else the last one), and whose inputs are the same bytes now, has no hits
//! now either; it is passed without being evaluated.
//!
//! Why it holds. A rule has an effect only when its first link has hits (its setvars,
//! captures, later links, ctls, log and disruptive action all follow hits), and whether that
//! link has hits is a function of (a) the request data its targets and operator macros read,
//! classified by `compile::inputs` (anything unclassified is `VOLATILE`, changed every time),
//! and (b) the state the earlier rules left: TX, runtime removals, the body processor. The
//! operators are pure functions (no network, no clock). So while every rule evaluated so far
//! had hits exactly where the last transaction (its *trace*) had them, and every rule with
//! hits read only unchanged data, the state equals the last transaction's at the same point
//! (by induction from phase 1, which both start from the same TX), and a rule the trace says
//! had no hits, reading only unchanged data, has none again. Rules with hits in the trace and
//! rules reading changed data are evaluated as usual; when one of them departs from the
//! trace (hits where there were none or the reverse, or hits on changed data, whose effects
//! may differ) the transaction stops replaying and evaluates every later rule.
//!
//! A rule with hits whose only effect was on TX (its setvars and captures: its chain did not
//! complete, or completing it only applies its ctls and passes) and whose data (every link's, every action's
//! macros) is unchanged is not evaluated either: the same state before it and the same data
//! make the same writes, so the values it left in the TX variables it wrote are set again
//! ([`Effect`], kept when the rule ran while the transaction followed its trace or had none).
//! Such a rule whose data changed is evaluated, and when its effect is the trace's (the same
//! TX variables written with the same values, its chain completing or not as then) the state
//! after it is the trace's again: the transaction goes on following (a rule with hits on
//! data that changes in every request, as CRS 905110's first link on a loopback client
//! whose chain reads `REQUEST_LINE`, no longer ends the replay for every later rule). So
//! does a rule whose hits differ from the trace's where both effects are empty (no TX
//! written, the chain not completed; a rule without hits has the empty effect): 920170's
//! first link, `REQUEST_METHOD` GET, has hits on a GET after a POST, its chain (a body
//! length) does not complete, and the state is the trace's.
//!
//! The trace keeps the last transaction's request itself (its buffers, instead of their
//! being recycled): comparing is a few `memcmp`s of the request line, headers, cookies and
//! body, and in phases 3-5 of the response's status, headers and body, no copying. A header
//! value that changes in every response (a date, a timing) changes only the classes of the
//! rules that read it. A trace is replaced only by a transaction that completed some phase;
//! requests over [`KEPT_MAX`] bytes are not kept (the next one is compared with the older
//! trace). Bytes are compared exactly, never hashed: crafted input cannot make two requests
//! look the same.

use std::mem::ManuallyDrop;
use std::rc::Rc;

use super::request::Request;
use crate::compile::inputs::{self, Keys};
use crate::compile::quick::Index;

/// How many traces a rule set keeps on a thread: the last transaction of each of the last
/// request targets (method and path) that completed a phase, so that requests of a few kinds
/// in turn (a page, an API call, probes) each follow one of their own kind.
pub(crate) const TRACES: usize = 4;

/// The path of a request target (up to any `?`).
fn path_of(uri: &[u8]) -> &[u8] {
    uri.iter().position(|&b| b == b'?').and_then(|i| uri.get(..i)).unwrap_or(uri)
}

impl Trace {
    /// Whether the traced request has this method and this target's path.
    pub(crate) fn same_target(&self, method: &[u8], uri: &[u8]) -> bool {
        self.req.method == method && {
            // Most often the same target: its path is as long as this one's.
            let mine = path_of(&self.req.uri_raw);
            uri.get(..mine.len()) == Some(mine) && matches!(uri.get(mine.len()), None | Some(b'?'))
        }
    }
}

/// What a finished transaction of a rule set on this thread read and did.
pub(crate) struct Trace {
    req: ManuallyDrop<Box<Request>>,
    /// By rule number, one bit each: the rule's first link had hits.
    hits: Vec<u64>,
    /// Phases (bit `p - 1`) whose rules all ran to the end of the list (no interruption,
    /// no `allow`).
    phases: u8,
    /// The body as each phase saw it.
    at: [BodyAt; 5],
    /// In walk order (by rule number, ascending, within a phase): what a rule with hits did,
    /// when that was only to write TX.
    effects: Vec<(u32, Rc<Effect>)>,
    /// Where each phase's effects start in `effects`.
    effects_at: [usize; 5],
    /// Per phase, per entry of its list: the classes the entry's first link reads, or every
    /// class when it had hits (see [`Replay::scan`]); shared with the next trace while the
    /// hits stay the same.
    stops: Rc<[Vec<u64>; 5]>,
    /// Per phase: how its walk went, when it evaluated no rule (see [`Run`]).
    runs: [Option<Rc<Run>>; 5],
}

/// A phase walked while following the trace without evaluating any rule: passed by the trace,
/// paranoia-level skips held in it, effects done again, and rules tested by value with no
/// hits. The next transaction whose data differs from this one's in the same classes (so its
/// walk would stop at the same entries: the stops depend only on the hits, the same here, and
/// the changed classes) walks the same way as long as the rules tested by value have no
/// hits again: it tests those and does the effects, without the walk (see
/// `fast::Fast::phase_start`).
pub(crate) struct Run {
    /// The classes that had changed, and whether [`Replay::many`] was set.
    changed: u64,
    many: bool,
    /// The entries (of the phase's list) whose rules were tested by value, in order.
    pub probes: Vec<u32>,
    /// The rules with hits.
    hits: Vec<u32>,
    /// The effects done, in order (what the rules with hits wrote).
    pub effects: Vec<(u32, Rc<Effect>)>,
    /// The rules whose chains completed and whose ctls were applied: (position in
    /// `effects`, entry), in order.
    pub ctls: Vec<(u32, u32)>,
    /// Rules passed without being evaluated.
    passed: u64,
}

/// What a rule with hits did when its only effect was on TX: the variables it wrote, with
/// their values after it (None: removed), and whether its chain completed (the rule then
/// applies its ctls and passes: see `compile::inputs::Inputs::quiet`).
pub(crate) struct Effect {
    /// Each key with its value (None: removed) and where the last redo put it.
    pub writes: Vec<(String, Option<Vec<u8>>, std::cell::Cell<super::txmap::Loc>)>,
    pub matched: bool,
}

impl Effect {
    /// No write, no completion: what a rule without hits does.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && !self.matched
    }

    /// The same writes (keys and values, in order) and the same completion as `other`.
    pub fn same_as(&self, other: &Effect) -> bool {
        self.matched == other.matched && self.writes.len() == other.writes.len() && self.writes.iter().zip(&other.writes).all(|((k, v, _), (l, w, _))| k == l && v == w)
    }
}

/// Largest list of effects whose allocation is kept for the next transaction.
const EFFECTS_KEEP: usize = 1024;

/// Largest request (the bytes its buffers hold) a trace keeps.
const KEPT_MAX: usize = 256 * 1024;

/// What the body variables of a phase were made of: the request body's first `len` bytes,
/// whether it was parsed and by which processor, and the limit flag; the same for the
/// response body.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct BodyAt {
    len: usize,
    processed: bool,
    inbound_error: bool,
    /// `REQBODY_PROCESSOR` (the known ones are short); `None` when longer.
    processor: Option<([u8; 16], u8)>,
    response: ResponseAt,
}

/// The response body's first `len` bytes, whether the rules see it, and the limit flag.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct ResponseAt {
    len: usize,
    seen: bool,
    outbound_error: bool,
}

impl BodyAt {
    fn of(r: &Request) -> BodyAt {
        let p = &r.reqbody_processor;
        let processor = (p.len() <= 16).then(|| {
            let mut b = [0u8; 16];
            b.get_mut(..p.len()).unwrap_or_default().copy_from_slice(p);
            (b, p.len() as u8)
        });
        let response = ResponseAt { len: r.response_body.len(), seen: r.response_body_seen, outbound_error: r.outbound_data_error };
        BodyAt { len: r.body.len(), processed: r.body_processed, inbound_error: r.inbound_data_error, processor, response }
    }

    /// The request body's part is the same as `other`'s.
    fn same_request(&self, other: &BodyAt) -> bool {
        (self.len, self.processed, self.inbound_error, self.processor) == (other.len, other.processed, other.inbound_error, other.processor)
    }
}

/// A transaction's replay: the trace it follows, and the trace it makes.
#[derive(Default)]
pub(crate) struct Replay {
    base: Option<Rc<Trace>>,
    /// Every rule evaluated so far had hits where `base` had them (and no phase ran without
    /// following it).
    same: bool,
    /// The running phase follows `base`.
    pub active: bool,
    /// The input classes that differ from `base`'s in the running phase.
    pub changed: u64,
    /// This transaction's hits, by rule number.
    hits: Vec<u64>,
    phases: u8,
    at: [BodyAt; 5],
    /// Set by `fast` when the phase loop reached the end of the phase's list.
    pub completed: bool,
    /// Rules passed without being evaluated (see [`Replay::scan`], [`Replay::by_values`]).
    pub passed: u64,
    /// The positions of the request headers whose values changed (names unchanged), when
    /// they are few (see [`Replay::by_values`]), each with its value's byte set (values up to
    /// 512 bytes: computed once here, not by each rule tested on the value).
    headers: Vec<ChangedHeader>,
    /// More header values changed than `headers` keeps, or the names changed.
    many: bool,
    /// The classes of the request headers' changes (`headers`, `many`), and how many headers
    /// there were when they were compared.
    header_bits: Option<(usize, u64)>,
    /// The classes of the request line, cookies and addresses' changes, and the request's
    /// `line_gen` when they were compared (they are set before phase 1: compared once).
    line_bits: Option<(u32, u64)>,
    /// The phase that follows the last one completed (the trace's state at the start of a
    /// phase is this transaction's only when both ran every phase before it).
    next: u8,
    /// This transaction's effects (see [`Trace::effects`]).
    effects: Vec<(u32, Rc<Effect>)>,
    /// Where the search of `base`'s effects goes on (rules come in ascending numbers within
    /// a phase).
    cursor: usize,
    /// Where each phase's effects start in `effects`.
    effects_at: [usize; 5],
    /// The allocation of `Transaction::tx_written` between rules.
    pub spare_written: Vec<u8>,
    /// This transaction's walks (see [`Run`]).
    runs: [Option<Rc<Run>>; 5],
    /// The running phase's walk so far has evaluated no rule (see [`Run`]); cleared by
    /// `fast` when it evaluates one.
    pub plain: bool,
    /// The running phase's rules tested by value and rules with hits, while `plain`.
    probes: Vec<u32>,
    hit_rules: Vec<u32>,
    ctls: Vec<(u32, u32)>,
    /// Where the running phase's effects and passed count start.
    from: (usize, u64),
}

/// Most changed header values a rule is tested on alone (see [`Replay::by_values`]).
const HEADERS_MAX: usize = 8;

/// A request header whose value changed: its position, and its value's byte set (values up
/// to 512 bytes; see `cache::byte_set`).
pub(crate) type ChangedHeader = (usize, Option<[u64; 4]>);

impl Replay {
    /// Following `base` (the last transaction's trace), for a rule set of `rules` rules.
    pub fn new(base: Option<Rc<Trace>>, rules: usize) -> Replay {
        let mut hits = SPARE_HITS.try_with(|s| s.take()).unwrap_or_default();
        hits.clear();
        hits.resize(rules.div_ceil(64), 0);
        let headers = SPARE_HEADERS.try_with(|s| s.take()).unwrap_or_default();
        let effects = SPARE_EFFECTS.try_with(|s| s.take()).unwrap_or_default();
        Replay { same: base.is_some(), base, hits, headers, effects, next: 1, ..Replay::default() }
    }

    /// At the end of the transaction: its list of changed headers (one allocation per request
    /// otherwise: a new `x-request-id` in each) is kept, emptied, for the next one.
    pub fn recycle(&mut self) {
        let mut headers = std::mem::take(&mut self.headers);
        if headers.capacity() <= 64 {
            headers.clear();
            let _ = SPARE_HEADERS.try_with(|s| s.set(headers));
        }
    }

    /// Phase `phase` starts with the request as it is now; `follow`: replaying is allowed
    /// (not when profiling).
    pub fn begin(&mut self, phase: u8, req: &Request, keys: &Keys, follow: bool) {
        let p = usize::from(phase - 1);
        let now = BodyAt::of(req);
        if let Some(a) = self.at.get_mut(p) {
            *a = now;
        }
        if let Some(e) = self.effects_at.get_mut(p) {
            *e = self.effects.len();
        }
        self.completed = false;
        self.active = false;
        self.plain = false;
        if !follow || phase != self.next {
            self.same = false;
        }
        let Some(base) = self.base.as_ref().filter(|b| self.same && b.phases & (1 << p) != 0) else {
            self.same = false;
            return;
        };
        self.cursor = base.effects_at.get(p).copied().unwrap_or_default();
        // The request headers are compared once (they only grow: a header added since is
        // a new comparison).
        let header_bits = match self.header_bits {
            Some((n, bits)) if n == req.headers.len() => bits,
            _ => {
                self.headers.clear();
                let bits = headers_changed(req, &base.req, keys, &mut self.headers);
                self.many = self.headers.len() > HEADERS_MAX || (bits & inputs::NAMES != 0);
                if !self.many {
                    for (i, set) in &mut self.headers {
                        *set = req.headers.get(*i).and_then(|(_, v)| (v.len() <= 512).then(|| super::byte_set::byte_set(v)));
                    }
                }
                self.header_bits = Some((req.headers.len(), bits));
                bits
            }
        };
        let line_bits = match self.line_bits {
            Some((g, bits)) if g == req.line_gen => bits,
            _ => {
                let bits = line_changed(req, &base.req);
                self.line_bits = Some((req.line_gen, bits));
                bits
            }
        };
        self.changed = changed(req, &now, base, p, keys) | header_bits | line_bits;
        self.active = true;
        self.plain = true;
        self.probes.clear();
        self.hit_rules.clear();
        self.ctls.clear();
        self.from = (self.effects.len(), self.passed);
    }

    /// How the trace walked the running phase, when this transaction's walk would go the same
    /// way (see [`Run`]): it follows the trace and its data differs in the same classes.
    pub fn run(&self, phase: u8) -> Option<Rc<Run>> {
        let base = self.base.as_ref().filter(|_| self.active)?;
        let run = base.runs.get(usize::from(phase - 1))?.as_ref()?;
        (run.changed == self.changed && run.many == self.many).then(|| run.clone())
    }

    /// The running phase went as `run` (its rules tested by value had no hits, its effects
    /// are done): the walk is taken as this transaction's.
    pub fn adopt(&mut self, phase: u8, run: Rc<Run>) {
        for &n in &run.hits {
            set_bit(&mut self.hits, n);
        }
        self.effects.extend(run.effects.iter().cloned());
        self.passed += run.passed;
        self.completed = true;
        if let Some(r) = self.runs.get_mut(usize::from(phase - 1)) {
            *r = Some(run);
        }
        self.plain = false;
    }

    /// The rule of entry `i` of the running phase's list was tested by value and had no hits.
    pub fn probed(&mut self, i: usize) {
        if self.plain {
            self.probes.push(i as u32);
        }
    }

    /// The rule of entry `i`, whose effect is done next, applies its ctls.
    pub fn ctls_at(&mut self, i: usize) {
        if self.plain {
            let at = self.effects.len() - self.from.0;
            self.ctls.push((at as u32, i as u32));
        }
    }

    /// Whether to keep the effect of a rule for the next transaction: when there is no trace,
    /// or while following it (the next transaction passes the rule by it where the rule's
    /// data is unchanged, and compares with it where it changed: see [`Replay::record`]).
    /// Not after this transaction departed from the trace: the next one would likely depart
    /// there too, and keeping costs copies of the TX variables written.
    pub fn worth_keeping(&self) -> bool {
        self.base.is_none() || self.active
    }

    /// The request of the trace this transaction follows (whether or not it still follows it).
    /// Follows `base` instead of the trace it was made with (any trace of the rule set serves:
    /// the argument above does not need the last one); only before phase 1 began, and not once
    /// the replay was turned off.
    pub fn rebase(&mut self, base: &Rc<Trace>) {
        if self.next == 1 && self.base.as_ref().is_some_and(|b| !Rc::ptr_eq(b, base)) {
            self.base = Some(base.clone());
            self.same = true;
        }
    }

    pub fn trace_request(&self) -> Option<&Request> {
        self.base.as_ref().map(|b| &**b.req)
    }

    /// Follows no trace from now on (and takes nothing from it).
    pub fn off(&mut self) {
        self.base = None;
        self.same = false;
        self.active = false;
        self.plain = false;
    }

    /// The running phase ended; `completed`: its list ran to the end.
    pub fn end(&mut self, phase: u8) {
        if self.completed && self.active && self.plain {
            let run = Run {
                changed: self.changed,
                many: self.many,
                probes: std::mem::take(&mut self.probes),
                hits: std::mem::take(&mut self.hit_rules),
                ctls: std::mem::take(&mut self.ctls),
                effects: self.effects.get(self.from.0..).unwrap_or_default().to_vec(),
                passed: self.passed - self.from.1,
            };
            if let Some(r) = self.runs.get_mut(usize::from(phase - 1)) {
                *r = Some(Rc::new(run));
            }
        }
        self.plain = false;
        if self.completed {
            self.phases |= 1 << (phase - 1);
            self.next = phase + 1;
        }
        if !self.active || !self.completed {
            self.same = false;
        }
        self.active = false;
    }

    /// Phase `phase` has no rules: nothing to follow or record, it changes nothing.
    pub fn empty_phase(&mut self, phase: u8) {
        self.phases |= 1 << (phase - 1);
        if phase == self.next {
            self.next = phase + 1;
        } else {
            self.same = false;
        }
    }

    /// From entry `i` of phase list `p` (index), the first entry that cannot be passed:
    /// passed are the rules that had no hits in the trace and read nothing that changed.
    pub fn scan(&self, i: usize, p: usize) -> usize {
        let Some(stops) = self.base.as_ref().filter(|_| self.active).and_then(|b| b.stops.get(p)) else { return i };
        let rest = stops.get(i..).unwrap_or_default();
        i + rest.iter().position(|s| s & self.changed != 0).unwrap_or(rest.len())
    }

    /// The positions of the request headers whose values changed, when rule `n` (`inputs`)
    /// is decided by testing its first link on them alone: it had no hits in the trace, of
    /// what it reads only header values changed, and they reach it as values of its
    /// `REQUEST_HEADERS` targets (each value tested on its own: the unchanged ones, which
    /// had no hits, have none again).
    pub fn by_values(&self, n: u32, i: &inputs::Inputs) -> Option<&[ChangedHeader]> {
        let c = i.head & self.changed;
        let ok = self.active && i.by_value && !self.many && c & !inputs::HEADER_VALUES == 0 && self.base.as_ref().is_some_and(|b| !bit(&b.hits, n));
        ok.then_some(&self.headers[..])
    }

    /// What rule `n` (reading `all` when it has hits) did in the trace, when it had hits,
    /// only wrote TX, and reads nothing that changed: done again, it would do the same (the
    /// state before it is the trace's).
    pub fn effect(&mut self, n: u32, all: u64) -> Option<Rc<Effect>> {
        if all & self.changed != 0 {
            return None;
        }
        self.traced_effect(n)
    }

    /// What rule `n` did in the trace (see [`Replay::effect`]) while this transaction follows
    /// it, whatever changed in what the rule reads: evaluated again, the rule leaves the
    /// trace's state when it does the same (see [`Replay::record`]).
    pub fn traced_effect(&mut self, n: u32) -> Option<Rc<Effect>> {
        if !self.active {
            return None;
        }
        let base = self.base.as_ref()?;
        while base.effects.get(self.cursor).is_some_and(|(m, _)| *m < n) {
            self.cursor += 1;
        }
        base.effects.get(self.cursor).filter(|(m, _)| *m == n).map(|(_, e)| e.clone())
    }

    /// Rule `n` did `e` (kept for the next transaction's replay).
    pub fn keep_effect(&mut self, n: u32, e: Rc<Effect>) {
        self.effects.push((n, e));
    }

    /// Whether rule `n` had hits in the trace while this transaction follows it (the state
    /// before the rule is then the trace's: a rule reading only that state hits again).
    pub fn traced_hit(&self, n: u32) -> bool {
        self.active && self.base.as_ref().is_some_and(|b| bit(&b.hits, n))
    }

    /// Rule `n` was evaluated: its first link had `hits` or not; `inputs`: what the whole
    /// rule reads when it has hits; `as_traced`: its effect was the trace's (see
    /// [`Effect::same_as`]; no hits is the empty effect), so the state after it is the
    /// trace's, whether or not it had hits as there and whatever it read.
    pub fn record(&mut self, n: u32, inputs: u64, hits: bool, as_traced: bool) {
        if hits {
            set_bit(&mut self.hits, n);
            if self.plain {
                self.hit_rules.push(n);
            }
        }
        if self.active {
            let before = self.base.as_ref().is_some_and(|b| bit(&b.hits, n));
            if !as_traced && (hits != before || (hits && inputs & self.changed != 0)) {
                self.active = false;
                self.same = false;
                self.plain = false;
            }
        }
    }

    /// At the end of the transaction: makes this transaction the trace of `slot` when it
    /// completed a phase and its request is small enough (`ix`: the rule set's records).
    /// Returns the request when it is not kept, and the trace it replaced (to be dropped
    /// once the memo is no longer borrowed: the last holder of a trace recycles its request).
    pub fn publish(&mut self, req: Box<Request>, slot: &mut Option<Rc<Trace>>, ix: &Index) -> (Option<Box<Request>>, Option<Rc<Trace>>) {
        let base = self.base.take();
        if self.phases == 0 || req.retained_bytes() > KEPT_MAX {
            return (Some(req), None);
        }
        let hits = std::mem::take(&mut self.hits);
        let stops = match base {
            Some(b) if b.hits == hits => b.stops.clone(),
            _ => Rc::new(std::array::from_fn(|p| {
                let (heads, numbers) = (ix.heads.get(p).map_or(&[][..], Vec::as_slice), ix.numbers.get(p).map_or(&[][..], Vec::as_slice));
                heads.iter().zip(numbers).map(|(&h, &n)| if bit(&hits, n) { u64::MAX } else { h }).collect()
            })),
        };
        // The trace replaced, when no transaction follows it any more, is overwritten in its
        // allocation (no Rc freed and made per request); its hits become the next
        // transaction's (see `Replay::new`), its request is recycled.
        let effects = std::mem::take(&mut self.effects);
        let runs = std::mem::take(&mut self.runs);
        if let Some(old) = slot.as_mut().and_then(Rc::get_mut) {
            let old_req = std::mem::replace(&mut old.req, ManuallyDrop::new(req));
            super::recycle_request(ManuallyDrop::into_inner(old_req));
            let old_hits = std::mem::replace(&mut old.hits, hits);
            let _ = SPARE_HITS.try_with(|s| s.set(old_hits));
            old.phases = self.phases;
            old.at = self.at;
            let mut old_effects = std::mem::replace(&mut old.effects, effects);
            if old_effects.capacity() <= EFFECTS_KEEP {
                old_effects.clear();
                let _ = SPARE_EFFECTS.try_with(|s| s.set(old_effects));
            }
            old.effects_at = self.effects_at;
            old.stops = stops;
            old.runs = runs;
            return (None, None);
        }
        let trace = Trace { req: ManuallyDrop::new(req), hits, phases: self.phases, at: self.at, effects, effects_at: self.effects_at, stops, runs };
        (None, slot.replace(Rc::new(trace)))
    }
}

thread_local! {
    /// The hits' allocation of a trace that was replaced, for the next `Replay::new`.
    static SPARE_HITS: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
    /// The effects' list of a trace that was replaced, emptied, for the next `Replay::new`.
    static SPARE_EFFECTS: std::cell::Cell<Vec<(u32, Rc<Effect>)>> = const { std::cell::Cell::new(Vec::new()) };
    /// The changed headers' allocation of an ended transaction (see `Replay::recycle`).
    static SPARE_HEADERS: std::cell::Cell<Vec<ChangedHeader>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for Trace {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the field's own drop does nothing.
        super::recycle_request(unsafe { ManuallyDrop::take(&mut self.req) });
    }
}

fn set_bit(words: &mut [u64], n: u32) {
    if let Some(w) = words.get_mut(n as usize / 64) {
        *w |= 1u64 << (n % 64);
    }
}

fn bit(words: &[u64], n: u32) -> bool {
    words.get(n as usize / 64).is_some_and(|w| w & (1u64 << (n % 64)) != 0)
}

/// The input classes in which the transaction `now` (its bodies as `at`) differs from the
/// trace's in phase index `p`, but for the request headers (see [`headers_changed`]) and the
/// request line, cookies and addresses ([`line_changed`]). In phases 1 and 2 the response is
/// taken as changed (there is none yet; the trace's is complete).
fn changed(now: &Request, at: &BodyAt, then: &Trace, p: usize, keys: &Keys) -> u64 {
    let old = &then.req;
    let mut c = inputs::VOLATILE;
    let then_at = then.at.get(p).copied().unwrap_or_default();
    if !at.same_request(&then_at) || old.body.get(..then_at.len) != Some(&now.body[..]) {
        c |= inputs::BODY;
    }
    c | if p < 2 { inputs::RESPONSE } else { response_changed(now, at, old, &then_at, keys) }
}

/// The input classes in which the request line, the cookies and the addresses of `now` differ
/// from those of the trace's request `old`.
fn line_changed(now: &Request, old: &Request) -> u64 {
    let mut c = 0;
    if now.method != old.method || now.uri_raw != old.uri_raw || now.protocol != old.protocol {
        c |= inputs::LINE;
    }
    if now.cookie_source != old.cookie_source {
        c |= inputs::COOKIES;
    }
    if now.client_ip != old.client_ip || now.server_ip != old.server_ip {
        c |= inputs::ADDR;
    }
    if now.client_port != old.client_port || now.server_port != old.server_port {
        c |= inputs::PORT;
    }
    c
}

/// The input classes in which the request headers of `now` differ from those of the trace's
/// request `old`; `headers`: the positions of the values that differ (names the same).
fn headers_changed(now: &Request, old: &Request, keys: &Keys, headers: &mut Vec<ChangedHeader>) -> u64 {
    let mut c = 0;
    if now.headers.len() != old.headers.len() {
        return inputs::NAMES | inputs::HEADERS | inputs::BODY | keys.all();
    }
    for (i, ((name, value), (old_name, old_value))) in now.headers.iter().zip(old.headers.iter()).enumerate() {
        if name != old_name {
            return inputs::NAMES | inputs::HEADERS | inputs::BODY | keys.all();
        }
        if value != old_value {
            headers.push((i, None));
            c |= inputs::HEADERS | keys.find(name);
            if name.eq_ignore_ascii_case(b"content-type") {
                c |= inputs::BODY;
            }
        }
    }
    c
}

/// The response classes in which `now` (its response body as `at`) differs from the trace's
/// request `old` (`then_at` in the same phase).
fn response_changed(now: &Request, at: &BodyAt, old: &Request, then_at: &BodyAt, keys: &Keys) -> u64 {
    let mut c = 0;
    if now.response_status != old.response_status || now.response_protocol != old.response_protocol {
        c |= inputs::RESP_LINE;
    }
    let (r, then_r) = (&at.response, &then_at.response);
    if r != then_r || old.response_body.get(..then_r.len) != Some(&now.response_body[..]) {
        c |= inputs::RESP_BODY;
    }
    let names_changed = |c: u64| c | inputs::RESP_NAMES | inputs::RESP_HEADERS | keys.all_response();
    if now.response_headers.len() != old.response_headers.len() {
        return names_changed(c);
    }
    for ((name, value), (old_name, old_value)) in now.response_headers.iter().zip(old.response_headers.iter()) {
        if name != old_name {
            return names_changed(c);
        }
        if value != old_value {
            c |= inputs::RESP_HEADERS | keys.find_response(name);
        }
    }
    c
}
