//! Transaction: all per-request state, phases 1-5, interruption.
//!
//! The host (the Envoy adapter, the CLI, tests) feeds the request and response
//! in order — connection, URI, headers, body — and calls `process_*` for each
//! phase. Rules run against an immutable [`Ruleset`]; everything mutable lives
//! here. Nothing an attacker sends makes a call fail: limits become flags
//! (`REQBODY_ERROR`) or interruptions.

pub mod budget;
mod actions;
mod byte_set;
mod cache;
pub mod candidates;
mod fast;
pub(crate) use crate::fx::Fx;
mod link;
mod log;
mod phase;
pub mod profile;
mod reference;
mod removal;
mod replay;
mod request;
mod rule;
mod seam;
mod variables;
pub(crate) mod time;
pub mod persist;
pub(crate) mod txmap;
pub(crate) use txmap::TxMap;

use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::actions::AllowScope;
use crate::compile::{EngineMode, LimitAction, Ruleset, Speed};
use seam::{Shortcuts, Start};
pub use request::percent_decode;
use request::Request;

/// Allocations a finished transaction of a large rule set leaves to the next one, emptied:
/// the CRS sets ~100 TX variables per request and collects lists of up to ~100 values, and
/// fresh tables and lists would grow to that each time (the memo tables have spares of their
/// own, `SPARE_CACHES`). One per thread (a wasm VM has one).
struct Spare {
    tx: TxMap,
    values: Vec<variables::Value<'static>>,
    /// Keeps the capacities of its hits' names, values and captures.
    hits: link::HitPool,
    /// Emptied TX keys and values (see `Transaction::tx_free`).
    tx_free: Vec<(String, Vec<u8>)>,
    /// The rule set whose initial TX variables `tx` holds, exactly (else `tx` is empty).
    tx_init: Option<u64>,
    /// Buffers of `Transaction::tx_undo`.
    tx_undo: Vec<TxUndo>,
    /// Emptied MATCHED_VARS slots.
    matched: rule::Matched,
    /// Emptied lists of runtime removals (`ctl:ruleRemove*`: the CRS's exclusions apply some
    /// to every request) and their rule bits.
    removals: Removals,
}

/// What a phase needs only while it evaluates (`Transaction::values_scratch`, `hit_pool`):
/// the value lists of rules and their hits (a CRS request's grow to ~11 KB and ~6 KB), which
/// nothing reads between phases. Lent by [`Transaction::lend_scratch`].
#[derive(Default)]
struct PhaseScratch {
    values: Vec<variables::Value<'static>>,
    hits: link::HitPool,
}

/// Most phase scratches a thread keeps (phases of one thread run one at a time; a host that
/// nests transactions on one thread may run a few).
const SCRATCH_MAX: usize = 4;
/// The largest value list a phase scratch keeps (a large body's lists of thousands of values
/// are freed).
const SCRATCH_VALUES_MAX: usize = 4096;

/// `Transaction::affected`, `removed_ids`, `removed_tags` and `removed_targets`.
#[derive(Default)]
struct Removals {
    affected: Vec<u64>,
    ids: Vec<(u64, u64)>,
    tags: Vec<u32>,
    targets: Vec<removal::TargetRemoval>,
}

/// Largest list of removals a spare keeps.
const REMOVALS_KEEP: usize = 1024;

/// Most spares of each kind kept (requests, caches, TX maps): about the transactions a
/// worker has in flight at once (Envoy's callbacks of up to 64 interleave: with one spare
/// each, the others allocated and freed theirs, +48 K instructions per CRS GET in Envoy at
/// 64 connections). Linear memory never shrinks, so the pool holds what the peak of
/// transactions in flight had taken anyway; the requests past the first few keep no
/// buffer larger than [`SPARE_BUFFER_MAX`] (a 50 KB body's would be 64 KiB each).
const SPARES_MAX: usize = 64;
const SPARES_LARGE: usize = 4;
const SPARE_BUFFER_MAX: usize = 4096;

/// Most emptied TX entries kept, and the largest key and value capacities kept.
const TX_FREE_MAX: usize = 256;
const TX_FREE_KEY_MAX: usize = 256;
const TX_FREE_VALUE_MAX: usize = 4096;
/// Most TX changes a transaction notes for undoing them (see `Transaction::tx_undo`).
pub(crate) const TX_UNDO_MAX: usize = 256;
/// Most undo buffers a finished transaction leaves to the next (a CRS GET needs ~13).
pub(crate) const TX_UNDO_KEEP: usize = 64;

/// What base entry `TX:key` was before one change (see `Transaction::tx_undo`).
#[derive(Debug, Default)]
pub(crate) struct TxUndo {
    pub key: String,
    pub old: Vec<u8>,
}

impl TxUndo {
    /// Drops buffers larger than a recycled TX entry keeps (see [`recycle_tx_entry`]).
    pub(crate) fn bound(&mut self) {
        if self.key.capacity() > TX_FREE_KEY_MAX {
            self.key = String::new();
        }
        if self.old.capacity() > TX_FREE_VALUE_MAX {
            self.old = Vec::new();
        }
    }
}

/// Keeps an emptied TX entry's allocations in `free` (bounded).
pub(crate) fn recycle_tx_entry(free: &mut Vec<(String, Vec<u8>)>, (k, v): (String, Vec<u8>)) {
    if free.len() < TX_FREE_MAX && k.capacity() <= TX_FREE_KEY_MAX && v.capacity() <= TX_FREE_VALUE_MAX {
        free.push((k, v));
    }
}

thread_local! {
    /// The TX maps and scratch lists of transactions that ended (up to [`SPARES_MAX`]).
    static SPARE: std::cell::RefCell<Vec<Spare>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The emptied requests of transactions that ended (see [`Request::recycle`]; up to
    /// [`SPARES_MAX`]).
    // Boxed: taking one out and putting it back moves a pointer, not the ~900-byte request.
    #[allow(clippy::vec_box)]
    static SPARE_REQUEST: std::cell::RefCell<Vec<Box<Request>>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Emptied memo tables of the request phases and of the response phases, each kept for the
    /// next transactions' same phases (see [`Transaction::end_request_phases`]; up to
    /// [`SPARES_MAX`] per side), and the empty tables a transaction holds while it waits
    /// between phases ([`IDLE_SIDE`]).
    // Boxed for the same reason (see `cache::CacheCell`).
    #[allow(clippy::vec_box)]
    static SPARE_CACHES: std::cell::RefCell<[Vec<Box<cache::Cache>>; 3]> = const { std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new()]) };
    /// The [`cache::Memo`]s of the last rule sets this thread ran (most recent last), shared
    /// by the transactions in flight.
    /// (Rule set uid, its memo).
    static MEMOS: std::cell::RefCell<Vec<(u64, SharedMemo)>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The scratch of a running phase (see [`PhaseScratch`]), lent to each phase as it
    /// starts and given back when it ends: as many as phases run at once on the thread (one),
    /// not as many as transactions in flight.
    static SCRATCH: std::cell::RefCell<Vec<PhaseScratch>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The emptied `unique_id`s of transactions that ended (see [`Transaction::with_id`]; up
    /// to [`SPARES_MAX`]).
    static SPARE_ID: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's pool of spare buffers of one kind.
type Pool<T> = std::thread::LocalKey<std::cell::RefCell<Vec<T>>>;

/// The last spare kept in `pool`, if any.
fn take_spare<T: 'static>(pool: &'static Pool<T>) -> Option<T> {
    pool.try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop())).ok().flatten()
}

/// Keeps `item` in `pool`, unless the pool already holds [`SPARES_MAX`].
fn keep_spare<T: 'static>(pool: &'static Pool<T>, item: T) {
    let _ = pool.try_with(|s| {
        if let Ok(mut pool) = s.try_borrow_mut() {
            if pool.len() < SPARES_MAX {
                pool.push(item);
            }
        }
    });
}

/// Keeps `req`, emptied, for a next transaction (see [`SPARE_REQUEST`]), unless the pool is full.
pub(crate) fn recycle_request(mut req: Box<Request>) {
    let _ = SPARE_REQUEST.try_with(|s| {
        if let Ok(mut pool) = s.try_borrow_mut() {
            if pool.len() < SPARES_MAX {
                // Bodies' buffers are kept by the first few only.
                req.recycle(if pool.len() < SPARES_LARGE { request::RECYCLE_MAX } else { SPARE_BUFFER_MAX });
                pool.push(req);
            }
        }
    });
}

/// The memo of rule set `uid` on this thread (made when new; see [`MEMOS`]).
fn memo_for(uid: u64, keys: (u64, u64)) -> SharedMemo {
    let fresh = || std::rc::Rc::new(std::cell::RefCell::new(cache::Memo::new(keys)));
    MEMOS
        .try_with(|m| {
            let mut m = m.try_borrow_mut().ok()?;
            let found = match m.iter().position(|(u, _)| *u == uid) {
                Some(i) => m.remove(i).1,
                None => fresh(),
            };
            if m.len() >= MEMOS_MAX {
                m.remove(0);
            }
            m.push((uid, found.clone()));
            Some(found)
        })
        .ok()
        .flatten()
        .unwrap_or_else(fresh)
}

/// A rule set's memo, shared by the transactions of one thread.
type SharedMemo = std::rc::Rc<std::cell::RefCell<cache::Memo>>;

/// Rule sets whose memo a thread keeps (a VM runs one plugin configuration, seldom a few).
const MEMOS_MAX: usize = 4;

/// Which phases a cache serves (an index into `SPARE_CACHES`).
const REQUEST_SIDE: usize = 0;
const RESPONSE_SIDE: usize = 1;
/// No phase: empty tables (`Cache::default`, nothing allocated but the box) in the place of
/// the memo tables, which a transaction holds only while its phases run (see
/// [`Transaction::lend_cache`]).
const IDLE_SIDE: usize = 2;

/// The spare cache of one side, or new tables sized for `rules` rules, charging what it
/// keeps to the memory budget `limit` (see [`budget`]).
fn spare_cache(side: usize, rules: usize, limit: usize) -> Box<cache::Cache> {
    let mut c = SPARE_CACHES
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.get_mut(side).and_then(Vec::pop)))
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new(cache::Cache::sized(rules)));
    c.set_budget(limit);
    c
}

/// New memo tables for one transaction of a rule set of `rules` rules (see [`spare_cache`]).
fn fresh_cache(rules: usize, limit: usize) -> Box<cache::Cache> {
    let mut c = Box::new(cache::Cache::sized(rules));
    c.set_budget(limit);
    c
}

/// Empty tables for a transaction between phases (see [`IDLE_SIDE`]).
fn idle_cache() -> Box<cache::Cache> {
    SPARE_CACHES
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.get_mut(IDLE_SIDE).and_then(Vec::pop)))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `c`, emptied, as a spare of its side (unless the pool is full or `c` grew too large).
fn keep_cache(side: usize, mut c: Box<cache::Cache>) {
    if !c.keepable() {
        // Emptied all the same: what its entries hold is charged to the budget until then.
        c.clear();
        return;
    }
    c.clear();
    let _ = SPARE_CACHES.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if let Some(pool) = s.get_mut(side).filter(|p| p.len() < SPARES_MAX) {
                pool.push(c);
            }
        }
    });
}

/// A new TX map and scratch list for a rule set of `rules` rules.
fn fresh_spare(rules: usize) -> Spare {
    Spare {
        tx: TxMap::with_capacity(if rules >= 200 { 128 } else { 0 }),
        // The phases' scratch is lent to each phase (see `Transaction::lend_scratch`).
        values: Vec::new(),
        hits: link::HitPool::default(),
        tx_free: Vec::new(),
        tx_init: None,
        tx_undo: Vec::new(),
        matched: rule::Matched::default(),
        removals: Removals::default(),
    }
}

/// The TX map and scratch list for rule set `uid` of `rules` rules (see [`Spare`]): the map
/// empty, or holding exactly that rule set's initial TX variables.
fn spare(rules: usize, uid: u64) -> Spare {
    let Some(mut s) = take_spare(&SPARE) else {
        return fresh_spare(rules);
    };
    if s.tx_init.is_some_and(|u| u != uid) {
        s.tx.drain_into(&mut s.tx_free, recycle_tx_entry);
        s.tx_init = None;
    }
    s
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // SAFETY: `cache` and `req` are taken here, once, and not used after: the rest of
        // this function does not read them, and the fields' own drop does nothing.
        let cache = unsafe { ManuallyDrop::take(self.cache.get_mut()) };
        let req = unsafe { ManuallyDrop::take(&mut self.req) };
        let seam = self.seam;
        seam.end(self, cache, req);
    }
}

/// How a transaction is interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptAction {
    Deny,
    Drop,
    Redirect(String),
}

/// A disruptive decision: the host answers with `status` and stops the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    pub status: u16,
    /// The rule that decided, `None` for engine decisions (body limit).
    pub rule_id: Option<u64>,
    /// The phase (1-4) in which it was decided.
    pub phase: u8,
    pub action: InterruptAction,
}

/// What the host should do after feeding a body chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyAppend {
    /// Keep feeding.
    Continue,
    /// The inspection limit is reached (ProcessPartial): stop feeding and run
    /// the body phase now on what was kept.
    Full,
    /// The body is over the limit and the limit action is Reject.
    Interrupt(Interruption),
}

/// State of one HTTP transaction.
pub struct Transaction {
    rs: Arc<Ruleset>,
    pub(crate) unique_id: String,
    pub(crate) req: ManuallyDrop<Box<Request>>,
    /// The TX collection (lowercased keys).
    pub(crate) tx: TxMap,
    /// Emptied keys and values of TX variables of this and earlier transactions, reused for
    /// new variables instead of two allocations each.
    pub(crate) tx_free: Vec<(String, Vec<u8>)>,
    /// A map holding exactly this rule set's initial TX variables, left by a transaction that
    /// ended: `fast::pre_apply` takes it as `tx` instead of inserting them one by one.
    pub(crate) tx_kept: Option<TxMap>,
    /// Some(uid): `tx` held rule set uid's initial TX variables (`Ruleset::init`) and every
    /// change since is in `tx_undo`, so the end of the transaction can undo them
    /// (`fast::tx_restore`). None: unknown (e.g. after `tx_clear`).
    pub(crate) tx_base: Option<u64>,
    /// The changes since, first to last: the first `tx_undo_n` (the others are buffers kept).
    pub(crate) tx_undo: Vec<TxUndo>,
    pub(crate) tx_undo_n: usize,
    /// The caller's clock, milliseconds since the Unix epoch ([`Transaction::set_time_ms`]).
    pub(crate) now_ms: u64,
    /// Per-transaction overrides set by `ctl:`.
    pub(crate) engine: EngineMode,
    pub(crate) request_body_access: bool,
    pub(crate) body_processor: Option<String>,
    pub(crate) force_request_body_variable: bool,
    pub(crate) removed_ids: Vec<(u64, u64)>,
    /// `ctl:ruleRemoveByTag`, by tag id (see `Ruleset::tag_id`).
    pub(crate) removed_tags: Vec<u32>,
    pub(crate) removed_targets: Vec<removal::TargetRemoval>,
    /// `source_generation`'s answers without and with the body.
    source_gens: [std::cell::Cell<Option<SourceGen>>; 2],
    /// The rules (by `Rule::index`) some runtime removal above may concern, one bit each:
    /// the others skip the removal checks without reading their ids and tags.
    pub(crate) affected: Vec<u64>,
    /// `MATCHED_VAR`, `MATCHED_VAR_NAME`, `MATCHED_VARS` of the current rule.
    pub(crate) matched: rule::Matched,
    /// Lowest severity number seen in a matched rule (0 = EMERGENCY); 255 = none.
    pub(crate) highest_severity: u8,
    allow: Option<AllowScope>,
    interruption: Option<Interruption>,
    logs: Vec<String>,
    /// Phases already run (1..=5): each runs at most once.
    phases_run: [bool; 5],
    request_body_full: bool,
    response_body_full: bool,
    /// What this transaction's bodies and parsed body hold against the thread's memory
    /// budget (see [`budget`]); given back when it ends.
    held: budget::Charge,
    /// The parts of `held` reserved for inspecting the request and the response body (see
    /// [`Transaction::keep_body`]).
    request_reserved: usize,
    response_reserved: usize,
    /// Set when the transaction would have passed the memory budget (see
    /// [`Transaction::over_budget`]).
    over_budget: bool,
    /// Memoized transformations, prefilter scans and libinjection verdicts.
    cache: cache::CacheCell,
    /// Whose tables `cache` is: `REQUEST_SIDE` until the end of phase 2, then `IDLE_SIDE`
    /// between the response phases and `RESPONSE_SIDE` while one runs (see
    /// [`Transaction::lend_cache`]).
    cache_side: usize,
    /// What earlier transactions of this rule set on this thread learned about values.
    memo: SharedMemo,
    /// The allocation of the value list of rules that do not share one (see `link::recycle`).
    values_scratch: std::cell::RefCell<Vec<variables::Value<'static>>>,
    /// Reused match buffers.
    hit_pool: link::HitPool,
    /// Reused buffer of `setvar` values being expanded.
    pub(crate) setvar_buf: Vec<u8>,
    /// The expanded key of a setvar whose key has macros.
    pub(crate) setvar_key_buf: Vec<u8>,
    /// Counters of the rule being evaluated (values, prefilter skips, operator runs).
    pub(crate) probe: link::Probe,
    /// Per-rule statistics, when profiling (`wafer profile`).
    pub(crate) profile: Option<Box<profile::Profile>>,
    /// Where `initcol` collections live (set by the host); none: per transaction only.
    pub(crate) store: Option<Arc<dyn persist::CollectionStore>>,
    /// Collections loaded by `initcol` in this transaction.
    pub(crate) collections: Vec<persist::Loaded>,
    /// While phase 1 runs: its entries before this one that are `Quick::Pre` were applied
    /// from `Ruleset::init` (see `fast::pre_apply`).
    pub(crate) pre_upto: usize,
    /// Bumped by every change to `tx` (`actions::tx_set`, `tx_remove`, `tx_clear`: the only ones).
    pub(crate) tx_gen: u32,
    /// Bit i clear: `TX:i` (a capture slot) is known absent, so clearing it needs no lookup
    /// (a capturing rule clears the slots its match did not fill: 9 per header for 920450).
    /// Set by every insertion of the key, and whenever the map is taken whole.
    pub(crate) tx_digits: u16,
    /// Per `Quick::TxNum` key id: (`tx_gen` when read, the number), see `fast::tx_num`.
    pub(crate) tx_nums: [std::cell::Cell<(u32, Option<i64>)>; TX_NUMS],
    /// Following the last transaction's trace, and making this one's (see [`replay`]).
    pub(crate) replay: replay::Replay,
    /// The speed mechanisms this transaction uses (see [`seam`]).
    seam: &'static dyn Shortcuts,
    /// The TX keys written while this is Some, each after its length (4 bytes; a key may hold
    /// any byte, NUL included): set by `fast` around a rule whose effect may be kept.
    pub(crate) tx_written: Option<Vec<u8>>,
    /// Whether the first link of the rule evaluated last (`rule::eval_rule`) had hits.
    pub(crate) head_hits: bool,
}

/// A source generation (or None) for (removals so far, body parsed).
type SourceGen = (usize, bool, Option<u64>);

/// How many TX keys of quick records have a cache slot (the CRS has a handful).
const TX_NUMS: usize = 16;

impl Transaction {
    pub fn new(rs: Arc<Ruleset>, unique_id: String) -> Transaction {
        // The one place the speed is read: the mechanisms the transaction uses (see `seam`).
        match rs.settings.speed {
            Speed::Fast => Transaction::with_seam(&fast::Fast, rs, unique_id),
            Speed::Reference => Transaction::with_seam(&reference::Reference, rs, unique_id),
        }
    }

    /// A transaction of `rs` with the speed mechanisms `seam` (its start made in place).
    fn with_seam<S: Shortcuts>(seam: &'static S, rs: Arc<Ruleset>, unique_id: String) -> Transaction {
        let s = &rs.settings;
        let Start { spare, memo, request, cache, replay } = seam.start(&rs);
        let (tx, tx_kept) = match spare.tx_init {
            Some(_) => (TxMap::default(), Some(spare.tx)),
            None => (spare.tx, None),
        };
        Transaction {
            now_ms: 0,
            engine: s.engine,
            request_body_access: s.request_body_access,
            rs: rs.clone(),
            unique_id,
            req: ManuallyDrop::new(request.unwrap_or_default()),
            tx,
            tx_kept,
            tx_free: spare.tx_free,
            tx_base: None,
            tx_undo: spare.tx_undo,
            tx_undo_n: 0,
            body_processor: None,
            force_request_body_variable: false,
            removed_ids: spare.removals.ids,
            removed_tags: spare.removals.tags,
            removed_targets: spare.removals.targets,
            source_gens: Default::default(),
            affected: spare.removals.affected,
            matched: spare.matched,
            highest_severity: 255,
            allow: None,
            interruption: None,
            logs: Vec::new(),
            phases_run: [false; 5],
            request_body_full: false,
            response_body_full: false,
            held: budget::Charge::default(),
            request_reserved: 0,
            response_reserved: 0,
            over_budget: false,
            cache: std::cell::RefCell::new(ManuallyDrop::new(cache)),
            replay,
            seam,
            tx_written: None,
            head_hits: false,
            memo,
            cache_side: REQUEST_SIDE,
            hit_pool: spare.hits,
            setvar_buf: Vec::new(),
            setvar_key_buf: Vec::new(),
            values_scratch: std::cell::RefCell::new(spare.values),
            probe: Default::default(),
            profile: None,
            store: None,
            collections: Vec::new(),
            pre_upto: 0,
            tx_gen: 1,
            tx_digits: actions::ALL_DIGITS,
            tx_nums: Default::default(),
        }
    }

    /// [`Transaction::new`] with a copy of `unique_id` in the buffer of an ended transaction's
    /// id (no allocation per request).
    pub fn with_id(rs: Arc<Ruleset>, unique_id: &str) -> Transaction {
        let mut id = take_spare(&SPARE_ID).unwrap_or_default();
        id.clear();
        id.push_str(unique_id);
        Transaction::new(rs, id)
    }

    /// Drops one part of the transaction's state (for `bench/src/bin/tx-census.rs`, which
    /// counts the bytes each part holds; the transaction is not fit for its phases after).
    #[doc(hidden)]
    pub fn census_drop(&mut self, part: &str) {
        match part {
            "req.headers" => self.req.headers = Default::default(),
            "req.cookies" => self.req.cookies = Default::default(),
            "req.args" => {
                self.req.args_get = Default::default();
                self.req.args_post = Default::default();
            }
            "req.body" => self.req.body = Vec::new(),
            "req.buffers" => {
                let r = &mut *self.req;
                for b in [&mut r.server_name, &mut r.method, &mut r.uri_raw, &mut r.uri, &mut r.protocol, &mut r.request_line, &mut r.query_string, &mut r.filename, &mut r.basename, &mut r.cookie_source] {
                    *b = Vec::new();
                }
            }
            "req" => **self.req = Request::default(),
            "tx" => self.tx = TxMap::default(),
            "tx_kept" => self.tx_kept = None,
            "tx_free" => self.tx_free = Vec::new(),
            "tx_undo" => self.tx_undo = Vec::new(),
            "removals" => {
                self.removed_ids = Vec::new();
                self.removed_tags = Vec::new();
                self.removed_targets = Vec::new();
                self.affected = Vec::new();
            }
            "matched" => self.matched = Default::default(),
            "logs" => self.logs = Vec::new(),
            "cache" => {
                let c = std::mem::replace(self.cache.get_mut(), ManuallyDrop::new(Box::default()));
                drop(ManuallyDrop::into_inner(c));
            }
            "values" => *self.values_scratch.get_mut() = Vec::new(),
            "hits" => self.hit_pool = Default::default(),
            "setvar" => {
                self.setvar_buf = Vec::new();
                self.setvar_key_buf = Vec::new();
            }
            "replay" => self.replay = Default::default(),
            "collections" => self.collections = Vec::new(),
            _ => {}
        }
    }

    /// The rule set it runs.
    pub fn ruleset(&self) -> &Arc<Ruleset> {
        &self.rs
    }

    /// The id given to [`Transaction::new`] (`UNIQUE_ID`).
    pub fn unique_id(&self) -> &str {
        &self.unique_id
    }

    /// The time of the transaction, milliseconds since the Unix epoch: what `TIME*` variables
    /// show and persistent collections expire by. The engine reads no clock; a host sets it
    /// when the transaction starts (without it, the epoch).
    pub fn set_time_ms(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// Gives the transaction a store for persistent collections (`initcol`). Hosts call it
    /// only when [`Ruleset::uses_persistent_collections`] says a rule needs one.
    pub fn set_collection_store(&mut self, store: Arc<dyn persist::CollectionStore>) {
        self.store = Some(store);
    }

    /// Writes the changes to persistent collections (done by [`Transaction::process_logging`];
    /// at most once).
    fn persist_collections(&mut self) {
        let Some(store) = self.store.clone() else { return };
        for col in &mut self.collections {
            if col.journal.is_empty() {
                continue;
            }
            let journal = std::mem::take(&mut col.journal);
            let now = self.now_ms;
            let _ = store.update(&col.name, &col.key, &mut |cur| persist::replay(cur, &col.key, &journal, now));
        }
    }

    /// Collects per-rule statistics from now on (see [`profile::Profile`]).
    pub fn enable_profile(&mut self) {
        self.profile = Some(Box::default());
        self.cache.get_mut().group_stats = Some(Default::default());
    }

    /// As [`Transaction::enable_profile`], timing each rule with `clock` (monotonic nanoseconds).
    pub fn enable_profile_with_clock(&mut self, clock: fn() -> u64) {
        self.enable_profile();
        if let Some(p) = self.profile.as_mut() {
            p.clock = Some(clock);
        }
    }

    /// The statistics of this transaction (with the memo table counters).
    pub fn take_profile(&mut self) -> Option<profile::Profile> {
        let mut p = *self.profile.take()?;
        let cache = self.cache.get_mut();
        p.transactions = 1;
        p.cache = cache.stats;
        p.groups = cache.group_stats.take().unwrap_or_default();
        Some(p)
    }

    pub fn process_connection(&mut self, client_ip: &str, client_port: u16, server_ip: &str, server_port: u16) {
        self.req.line_gen = self.req.line_gen.wrapping_add(1);
        self.req.client_ip.clear();
        self.req.client_ip.push_str(client_ip);
        self.req.client_port = client_port;
        self.req.server_ip.clear();
        self.req.server_ip.push_str(server_ip);
        self.req.server_port = server_port;
    }

    /// The request line: `uri` as received (path and query, raw), `method`,
    /// `protocol` like `HTTP/1.1`.
    pub fn process_uri(&mut self, uri: &str, method: &str, protocol: &str) {
        let parse_args = self.rs.mentions.args;
        // The trace of the same method and path, if kept, rather than the most recent.
        if let Ok(memo) = self.memo.try_borrow() {
            if let Some(t) = memo.traces.iter().find(|t| t.same_target(method.as_bytes(), uri.as_bytes())) {
                self.replay.rebase(t);
            }
        }
        // The last request's arguments of the same query, copied (not when profiling).
        let old = self.replay.trace_request().filter(|_| self.profile.is_none());
        self.req.set_uri(uri, method, protocol, self.rs.settings.arguments_limit, parse_args, old);
    }

    pub fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
        // Cookies are bounded like arguments (wafer's choice; ModSecurity has no cookie
        // limit): every rule on REQUEST_COOKIES inspects each one, so 30,000 tiny cookies
        // in one 60 KiB header cost seconds. Those over SecArgumentsLimit are not kept;
        // rule 200008 of @recommended-conf answers 400 from 1000 on. Rule sets that never
        // mention cookies do not parse them at all.
        let limit = self.rs.settings.arguments_limit;
        // The last request's cookies of the same header, copied (not when profiling).
        let old = self.replay.trace_request().filter(|_| self.profile.is_none());
        self.req.add_request_header_limited(name, value, self.rs.mentions.cookies, limit, old);
    }

    /// Adds the request headers serialized in `block` (a little-endian `u32` count N, N pairs
    /// of `u32` lengths (name, value), then each name and value followed by a NUL: proxy-wasm's
    /// serialization of header maps), skipping pseudo-headers (names starting with `:`), as
    /// [`Transaction::add_request_header`] adds each. The block is kept, not copied.
    pub fn add_request_header_block(&mut self, block: Vec<u8>) {
        let limit = self.rs.settings.arguments_limit;
        let old = self.replay.trace_request().filter(|_| self.profile.is_none());
        self.req.add_request_header_block(block, self.rs.mentions.cookies, limit, old);
    }

    /// Phase 1.
    pub fn process_request_headers(&mut self) -> Option<Interruption> {
        self.run_phase(1)
    }

    /// Whether the host should buffer and feed the request body.
    pub fn request_body_access(&self) -> bool {
        self.request_body_access && self.engine != EngineMode::Off && self.interruption.is_none()
    }

    /// Feeds a chunk of the request body (only the new bytes). Past `SecRequestBodyLimit`,
    /// or past the memory budget (see [`budget`]), the request is refused with 413
    /// (`SecRequestBodyLimitAction Reject`, engine On) or its body inspected as far as it
    /// goes (`ProcessPartial`, or DetectionOnly).
    pub fn append_request_body(&mut self, chunk: &[u8]) -> BodyAppend {
        if self.request_body_full {
            return BodyAppend::Full;
        }
        let limit = self.rs.settings.request_body_limit;
        let have = self.req.body.len();
        let within_limit = limit == 0 || have.saturating_add(chunk.len()) <= limit;
        if within_limit && self.keep_body(chunk, true) {
            return BodyAppend::Continue;
        }
        self.req.inbound_data_error = true;
        self.request_body_full = true;
        let reject = self.rs.settings.request_body_limit_action == LimitAction::Reject && self.engine == EngineMode::On;
        if !within_limit && reject {
            let i = Interruption { status: 413, rule_id: None, phase: 2, action: InterruptAction::Deny };
            self.logs.push(log::engine_line(self, "Request body is larger than the configured limit (SecRequestBodyLimit)", 413));
            self.interruption = Some(i.clone());
            return BodyAppend::Interrupt(i);
        }
        if within_limit && reject {
            return self.refuse_over_budget(2).map_or(BodyAppend::Full, BodyAppend::Interrupt);
        }
        let part = if within_limit { chunk } else { chunk.get(..limit.saturating_sub(have)).unwrap_or(chunk) };
        let kept = self.keep_what_fits(part, true);
        if kept < part.len() {
            self.note_over_budget("Request body inspected only in part", 0);
        }
        BodyAppend::Full
    }

    /// Appends `chunk` to the request body (`request`) or the response body within the
    /// bodies' part of the memory budget (see [`budget`]): its bytes, and as much again
    /// reserved for its inspection (the request body's parse, when it will be parsed: for a
    /// multipart body, whose files are not kept, up to `SecRequestBodyNoFilesLimit`; the
    /// copy phase 4 makes of the response body). False (nothing kept) when that does not fit.
    fn keep_body(&mut self, chunk: &[u8], request: bool) -> bool {
        let share = budget::for_bodies(self.rs.settings.memory_budget);
        let reserve = match (request, self.req.body_processor(self.body_processor.as_deref())) {
            (false, _) => chunk.len(),
            (true, None) => 0,
            (true, Some("MULTIPART")) => chunk.len().min(self.rs.settings.request_body_no_files_limit.saturating_sub(self.request_reserved)),
            (true, Some(_)) => chunk.len(),
        };
        if !self.held.try_add(reserve, share) {
            return false;
        }
        let expected = if request { self.req.content_length() } else { None };
        let expected = expected.filter(|&n| n <= self.rs.settings.request_body_limit || self.rs.settings.request_body_limit == 0).unwrap_or(0);
        let buf = if request { &mut self.req.body } else { &mut self.req.response_body };
        if !budget::append(buf, chunk, &mut self.held, share, expected) {
            self.held.sub(reserve);
            return false;
        }
        let reserved = if request { &mut self.request_reserved } else { &mut self.response_reserved };
        *reserved = reserved.saturating_add(reserve);
        true
    }

    /// Keeps as much of `chunk` as the bodies' part of the memory budget holds, in the
    /// request body (`request`) or the response body (see [`Transaction::keep_body`]);
    /// returns how much.
    fn keep_what_fits(&mut self, chunk: &[u8], request: bool) -> usize {
        let room = budget::room(budget::for_bodies(self.rs.settings.memory_budget));
        let buf = if request { &self.req.body } else { &self.req.response_body };
        let spare = buf.capacity().saturating_sub(buf.len());
        let reserves = !request || matches!(self.req.body_processor(self.body_processor.as_deref()), Some(p) if p != "MULTIPART");
        let fits = if reserves { room.min(room.saturating_add(spare) / 2) } else { room.saturating_add(spare) };
        let part = chunk.get(..fits.min(chunk.len())).unwrap_or_default();
        if self.keep_body(part, request) {
            part.len()
        } else {
            0
        }
    }

    /// Refuses the request for the memory budget (see [`budget`]): with the engine On, the
    /// interruption of phase `phase`, 413 in the request phases and 500 in the response's
    /// (as `SecResponseBodyLimitAction Reject`); in DetectionOnly, only the log line.
    fn refuse_over_budget(&mut self, phase: u8) -> Option<Interruption> {
        if self.engine != EngineMode::On {
            self.note_over_budget("Transaction inspected only in part", 0);
            return None;
        }
        let status = if phase <= 2 { 413 } else { 500 };
        self.note_over_budget(if phase <= 2 { "Request refused" } else { "Response refused" }, status);
        let i = Interruption { status, rule_id: None, phase, action: InterruptAction::Deny };
        self.interruption = Some(i.clone());
        Some(i)
    }

    /// Marks the transaction as over the memory budget, with a log line (once).
    fn note_over_budget(&mut self, what: &str, status: u16) {
        if self.over_budget {
            return;
        }
        self.over_budget = true;
        let what = format!(
            "{what}: the requests in flight would hold more than the memory budget (memory_budget_bytes {}; held {})",
            self.rs.settings.memory_budget,
            budget::held()
        );
        let line = log::engine_line(self, &what, status);
        self.logs.push(line);
    }

    /// Whether the transaction would have passed the memory budget (see [`budget`]): its
    /// body was refused or cut, or a phase stopped (hosts count these).
    pub fn over_budget(&self) -> bool {
        self.over_budget
    }

    /// Phase 2: parses the body (if accessed) and runs the rules.
    pub fn process_request_body(&mut self) -> Option<Interruption> {
        if !self.phases_run.first().copied().unwrap_or(true) {
            let _ = self.run_phase(1);
        }
        let body_phase_pending = !self.phases_run.get(1).copied().unwrap_or(true);
        if body_phase_pending && self.engine != EngineMode::Off && self.request_body_access && self.interruption.is_none() {
            if let Some(i) = self.parse_request_body() {
                if let Some(run) = self.phases_run.get_mut(1) {
                    *run = true;
                }
                self.end_request_phases();
                return Some(i);
            }
        }
        let out = self.run_phase(2);
        self.end_request_phases();
        out
    }

    /// After phase 2 the request phases' memo tables (transformed values, scans, prepared
    /// groups: about 1 MB for a 10 KB JSON body) are emptied and kept for the next request
    /// instead of waiting with this one for the upstream's response (a VM with 64 requests in
    /// flight held 64 of them: +74 MiB of linear memory, which never shrinks); the response
    /// phases memoize in the spare tables of earlier responses. Memo entries are only ever
    /// recomputed, never wrong: a response-phase rule on request values computes them again.
    fn end_request_phases(&mut self) {
        if self.cache_side != REQUEST_SIDE {
            return;
        }
        self.give_back_cache();
    }

    /// Gives the memo tables of the phase that ended back to the thread's spares (see
    /// [`Transaction::lend_cache`]), holding empty ones until the next phase.
    fn give_back_cache(&mut self) {
        let side = std::mem::replace(&mut self.cache_side, IDLE_SIDE);
        if side == IDLE_SIDE {
            return;
        }
        let mut idle = idle_cache();
        let cur = self.cache.get_mut();
        idle.stats = cur.stats;
        idle.group_stats = cur.group_stats.take();
        let done = ManuallyDrop::into_inner(std::mem::replace(cur, ManuallyDrop::new(idle)));
        if side == REQUEST_SIDE {
            self.seam.request_cache_done(done);
        } else {
            keep_cache(side, done);
        }
    }

    /// The value lists and hit buffers for a phase about to run, from the thread's (see
    /// [`PhaseScratch`]): a transaction in flight between phases holds none.
    fn lend_scratch(&mut self) {
        let Some(s) = take_spare(&SCRATCH) else { return };
        let values = self.values_scratch.get_mut();
        if values.capacity() == 0 {
            *values = s.values;
        }
        if self.hit_pool.hits.is_empty() {
            self.hit_pool = s.hits;
        }
    }

    /// Gives the phase's scratch back to the thread's (see [`Transaction::lend_scratch`]),
    /// unless it grew past what a spare keeps.
    fn give_back_scratch(&mut self) {
        let mut values = std::mem::take(self.values_scratch.get_mut());
        let mut hits = std::mem::take(&mut self.hit_pool);
        values.clear();
        hits.n = 0;
        if values.capacity() > SCRATCH_VALUES_MAX || !hits.small() {
            return;
        }
        let _ = SCRATCH.try_with(|s| {
            if let Ok(mut pool) = s.try_borrow_mut() {
                if pool.len() < SCRATCH_MAX {
                    pool.push(PhaseScratch { values, hits });
                }
            }
        });
    }

    /// Memo tables for a response phase about to run, from the thread's spares: a
    /// transaction holds them only while a phase runs. Between phase 2 and the response (the
    /// upstream's time: with 64 connections, 64 transactions wait on a worker at once) and
    /// between the response phases it holds empty ones, so a thread's spares are as many
    /// tables as it runs phases at once, one, not as many as it has transactions in flight
    /// (each CRS-sized table set is ~30 KB emptied, more with its pools: docs/native.md).
    /// Memo entries are only ever recomputed, never wrong: a response-phase rule on request
    /// values computes them again.
    fn lend_cache(&mut self) {
        if self.cache_side != IDLE_SIDE {
            return;
        }
        self.cache_side = RESPONSE_SIDE;
        let mut next = self.seam.response_cache(self.rs.settings.memory_budget);
        let cur = self.cache.get_mut();
        next.stats = cur.stats;
        next.group_stats = cur.group_stats.take();
        let idle = ManuallyDrop::into_inner(std::mem::replace(cur, ManuallyDrop::new(next)));
        keep_cache(IDLE_SIDE, idle);
    }

    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.req.add_response_header(name, value);
    }

    /// The response headers in one serialized block, as
    /// [`Transaction::add_request_header_block`] takes the request's (`:status` is skipped:
    /// the host gives it to [`Transaction::process_response_headers`]).
    pub fn add_response_header_block(&mut self, block: Vec<u8>) {
        self.req.add_response_header_block(block);
    }

    /// Phase 3.
    pub fn process_response_headers(&mut self, status: u16, protocol: &str) -> Option<Interruption> {
        self.req.response_status = status;
        self.req.response_protocol.clear();
        self.req.response_protocol.push_str(protocol);
        self.run_phase(3)
    }

    /// Whether the host should buffer and feed the response body: access is on
    /// and the response's MIME type is one of `SecResponseBodyMimeType`.
    pub fn response_body_access(&self) -> bool {
        let s = &self.rs.settings;
        s.response_body_access
            && self.engine != EngineMode::Off
            && self.interruption.is_none()
            && s.response_body_mime_types.iter().any(|m| m.eq_ignore_ascii_case(&self.req.response_content_type))
    }

    /// Feeds a chunk of the response body (only the new bytes). Past
    /// `SecResponseBodyLimit`, or past the memory budget (see [`budget`]), the body is
    /// inspected as far as it goes (`ProcessPartial`) or the response refused with 500
    /// (`Reject`, engine On).
    pub fn append_response_body(&mut self, chunk: &[u8]) -> BodyAppend {
        if self.response_body_full {
            return BodyAppend::Full;
        }
        let s = &self.rs.settings;
        let limit = s.response_body_limit;
        let have = self.req.response_body.len();
        let within_limit = limit == 0 || have.saturating_add(chunk.len()) <= limit;
        if within_limit && self.keep_body(chunk, false) {
            return BodyAppend::Continue;
        }
        self.req.outbound_data_error = true;
        self.response_body_full = true;
        let part = if within_limit { chunk } else { chunk.get(..limit.saturating_sub(have)).unwrap_or(chunk) };
        if self.keep_what_fits(part, false) < part.len() {
            self.note_over_budget("Response body inspected only in part", 0);
        }
        if self.rs.settings.response_body_limit_action == LimitAction::Reject && self.engine == EngineMode::On {
            let i = Interruption { status: 500, rule_id: None, phase: 4, action: InterruptAction::Deny };
            self.interruption = Some(i.clone());
            return BodyAppend::Interrupt(i);
        }
        BodyAppend::Full
    }

    /// Phase 4.
    pub fn process_response_body(&mut self) -> Option<Interruption> {
        // The body's reservation is the room for its inspection (see `keep_body`).
        let reserved = std::mem::take(&mut self.response_reserved);
        self.held.sub(reserved);
        self.req.response_body_seen = self.response_body_access();
        self.run_phase(4)
    }

    /// Phase 5 (never interrupts).
    pub fn process_logging(&mut self) {
        // Logging always runs, even after an interruption.
        let _ = self.run_phase(5);
        self.persist_collections();
    }

    /// Log lines of rules that matched with `log`, since the last call.
    pub fn take_log_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.logs)
    }

    pub fn interruption(&self) -> Option<&Interruption> {
        self.interruption.as_ref()
    }

    /// Whether any rule looks at the response (phases 3 and 4) or its body is
    /// inspected: when not, the host need not pass response headers at all.
    pub fn inspects_response(&self) -> bool {
        self.engine != EngineMode::Off
            && (self.rs.settings.response_body_access || self.rs.has_rules_in_phase(3) || self.rs.has_rules_in_phase(4))
    }

    /// Makes the transaction evaluate every rule it reaches, as if no earlier transaction had
    /// left a trace (see [`replay`]; for tools that check the replay against it).
    pub fn without_replay(&mut self) {
        self.replay.off();
    }

    /// How many rules the replay passed without evaluating them (see [`replay`]).
    pub fn replay_passed(&self) -> u64 {
        self.replay.passed
    }

    /// The TX collection, sorted by key (for tests and tools).
    pub fn tx_vars(&self) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = self.tx.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort();
        v
    }

    /// The value of `TX:name` (for tests and tools).
    pub fn tx_var(&self, name: &str) -> Option<&[u8]> {
        self.tx.get(&name.to_ascii_lowercase()).map(Vec::as_slice)
    }

    fn run_phase(&mut self, phase: u8) -> Option<Interruption> {
        let idx = usize::from(phase - 1);
        // Run earlier phases first if the host skipped them (e.g. no body).
        for p in 1..phase {
            if !self.phases_run.get(usize::from(p - 1)).copied().unwrap_or(true) {
                if p == 2 {
                    let _ = self.process_request_body();
                } else {
                    let _ = self.run_phase(p);
                }
            }
        }
        if self.phases_run.get(idx).copied().unwrap_or(true) {
            return None;
        }
        if let Some(slot) = self.phases_run.get_mut(idx) {
            *slot = true;
        }
        if self.engine == EngineMode::Off {
            return None;
        }
        if self.interruption.is_some() && phase != 5 {
            return None;
        }
        match self.allow {
            Some(AllowScope::All) if phase != 5 => return None,
            Some(AllowScope::Request) if phase <= 2 => return None,
            _ => {}
        }
        if self.allow == Some(AllowScope::Phase) {
            self.allow = None;
        }
        // A phase without rules (most of them in small rule sets): nothing to prepare.
        if self.rs.phases.get(idx).is_none_or(Vec::is_empty) {
            self.seam.empty_phase(self, phase);
            return None;
        }
        self.lend_cache();
        self.lend_scratch();
        // Request/response data may have grown since the last phase.
        let cache = self.cache.get_mut();
        cache.clear_prepared();
        cache.slots.resize(self.rs.group_slots, None);
        cache.clear_targets();
        let rs = self.rs.clone();
        let seam = self.seam;
        let decision = seam.run_phase(self, &rs, phase);
        self.give_back_scratch();
        let over = decision.is_none() && phase != 5 && self.cache.get_mut().over_budget();
        if phase >= 3 {
            self.give_back_cache();
        }
        if over {
            return self.refuse_over_budget(phase);
        }
        if let Some(i) = decision {
            if self.engine == EngineMode::On && phase != 5 {
                self.interruption = Some(i.clone());
                return Some(i);
            }
        }
        None
    }

    /// Parses the request body (see [`Request::parse_body`]) within the memory budget (see
    /// [`budget`]): in the place of the body's reservation, what the parse took is charged;
    /// a JSON body's names and values are capped at the reservation and the room left.
    /// Over the budget: the interruption (413), or in DetectionOnly the body parsed as far
    /// as it fits.
    fn parse_request_body(&mut self) -> Option<Interruption> {
        let s = &self.rs.settings;
        let limit = s.memory_budget;
        let processor = self.req.body_processor(self.body_processor.as_deref());
        let reserved = std::mem::take(&mut self.request_reserved);
        let room = budget::room(limit).saturating_add(reserved);
        let before = self.req.retained_bytes();
        // The last request's parse of the same JSON body, copied (not when profiling).
        let reused = processor == Some("JSON") && self.profile.is_none() && self.replay.trace_request().is_some_and(|old| self.req.reuse_json(old));
        let stopped = !reused && self.req.parse_body(processor, s.request_body_json_depth_limit, s.arguments_limit, room, s.request_body_no_files_limit);
        self.held.sub(reserved);
        self.held.add(self.req.retained_bytes().saturating_sub(before));
        if stopped || self.held.over(limit) {
            return self.refuse_over_budget(2);
        }
        // A body of many arguments fills the memo tables in phase 2: grown once, not doubling
        // their way there.
        let n = self.req.args_post.len();
        if n > 64 && self.rs.rule_count() >= 200 {
            self.cache.get_mut().reserve(n);
        }
        None
    }

    /// The memo's generation of what the sourced variables (`Var::source`) are made of now
    /// (see `Memo::source_generation`): the request line, the cookies, with `with_body` the
    /// body when parsed (urlencoded or JSON only: a multipart body's fields also depend on its
    /// headers), the removals so far.
    pub(crate) fn source_generation(&self, with_body: bool) -> Option<u64> {
        let parsed = with_body && self.req.body_processed;
        let state = (self.removed_targets.len(), parsed);
        let cell = self.source_gens.get(usize::from(with_body))?;
        if let Some((n, p, gen)) = cell.get() {
            if (n, p) == state {
                return gen;
            }
        }
        let processor = self.req.reqbody_processor.as_slice();
        let body = match (parsed, processor) {
            (false, _) => Some(None),
            (true, b"" | b"URLENCODED" | b"JSON") => Some(Some((processor, self.req.body.as_slice()))),
            (true, _) => None,
        };
        let gen = body.and_then(|body| {
            let removals: Vec<usize> = self.removed_targets.iter().map(|r| r.origin).collect();
            let r = &self.req;
            let line = [&r.method[..], &r.uri_raw[..], &r.protocol[..], &r.cookie_source[..]];
            self.memo.borrow_mut().source_generation(line, body, &removals)
        });
        cell.set(Some((state.0, state.1, gen)));
        gen
    }

    pub(crate) fn set_allow(&mut self, scope: AllowScope) {
        self.allow = Some(scope);
    }
}

#[cfg(test)]
mod tests;
