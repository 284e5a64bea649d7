//! The last build step of `target/wafer.wasm`: calls that V8 should not inline become
//! `call_indirect`, so that V8 compiles less when Envoy loads the module.
//!
//! Why: Envoy loads a proxy-wasm module through V8's C API, whose `Module::share()` tiers every
//! function up to TurboFan before the first VM starts; with Liftoff off there is no call-count
//! feedback, and V8 inlines direct calls by a fixed budget into every function it compiles,
//! configure-time code included. That inlining is most of what Envoy's start-up spends beyond the
//! module's own size and sets the peak of the compiler's memory, which Envoy's allocator keeps;
//! requests gain little from most of it (measured in Envoy, session 41: with no inlining at all a
//! CRS GET costs 4.3% more instructions and one with new values 5.8% more, the small rule sets
//! nothing more, while start-up is 0.38 s shorter and idle RSS 9 MiB lower).
//!
//! How: two rules, from two lists measured by `make cold-functions` on the CLI built for
//! wasm32-wasip1 over a corpus of requests. (1) The functions requests never run (a [`NameList`]:
//! the CLI's functions that no request ran) are cold, except those V8 would inline into the
//! others ([`CallGraph::inline_closure_where`], an exact model of V8's rule): every direct call
//! of a cold function goes through the table. (2) In the other functions, a call stays direct
//! only when its callee is small ([`SMALL_CALLEE`]) or frequent (entered
//! at least 100 times in some request of the corpus: the second list) and not large
//! ([`FREQUENT_CALLEE`]); V8 inlines those where its budget allows, and requests keep what
//! inlining buys them (a CRS GET +0.7% instructions against inlining everything V8 would, new
//! values +0.9%, a 1 KB POST -0.3%; Envoy ready 1.32 -> 1.15 s, idle RSS -8.5 MiB). A function the cold list does not name (Envoy's side, or one
//! the CLI's build inlined away) counts as one requests run. A direct call and an indirect call
//! of the same function with its own type do the same thing; V8 does not inline `call_indirect`
//! without feedback.

use std::collections::{HashMap, HashSet};
use walrus::ir::{Call, CallIndirect, Const, Instr, InstrLocId, InstrSeqId, Value};
use walrus::{ConstExpr, ElementItems, ElementKind, FunctionId, FunctionKind, LocalFunction, Module, ValType};

/// A symbol without what changes from build to build: the legacy mangling's hash
/// (`17h<16 hex digits>E`) and LLVM's `.<n>` suffixes of local copies.
pub fn stable_name(name: &str) -> &str {
    let mut s = name;
    if let Some(dot) = s.rfind('.') {
        if dot + 1 < s.len() && s[dot + 1..].bytes().all(|b| b.is_ascii_digit()) {
            s = &s[..dot];
        }
    }
    let b = s.as_bytes();
    if b.len() > 20 && b[b.len() - 1] == b'E' && &s[s.len() - 20..s.len() - 17] == "17h"
        && b[b.len() - 17..b.len() - 1].iter().all(u8::is_ascii_hexdigit)
    {
        s = &s[..s.len() - 20];
    }
    s
}

/// Function names, stable ([`stable_name`]), one per line; `#` comments.
#[derive(Default)]
pub struct NameList {
    names: HashSet<String>,
}

impl NameList {
    pub fn parse(text: &str) -> NameList {
        let names = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
        NameList { names: names.map(|l| stable_name(l).to_string()).collect() }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(stable_name(name))
    }

    /// How many of the listed names `names` holds, of how many listed.
    pub fn found_in<'a>(&self, names: impl Iterator<Item = &'a str>) -> (usize, usize) {
        let present: HashSet<&str> = names.map(stable_name).collect();
        (self.names.iter().filter(|n| present.contains(n.as_str())).count(), self.names.len())
    }
}

/// Direct calls of a function's body in the order V8 decodes them (blocks, then `if` before
/// `else`).
fn calls_in_order(f: &LocalFunction, seq: InstrSeqId, out: &mut Vec<FunctionId>) {
    for (i, _) in &f.block(seq).instrs {
        match i {
            Instr::Block(b) => calls_in_order(f, b.seq, out),
            Instr::Loop(l) => calls_in_order(f, l.seq, out),
            Instr::IfElse(e) => {
                calls_in_order(f, e.consequent, out);
                calls_in_order(f, e.alternative, out);
            }
            Instr::Call(c) => out.push(c.func),
            _ => {}
        }
    }
}

/// What V8's inliner needs of a module: body sizes in bytes (as in the module, locals included)
/// and each declared function's direct calls in order.
pub struct CallGraph {
    pub size: HashMap<FunctionId, i64>,
    pub calls: HashMap<FunctionId, Vec<FunctionId>>,
    /// Inlining budget per byte of the compiled function.
    pub growth: f64,
}

/// In functions requests run, calls to callees of at most this many bytes stay direct.
pub const SMALL_CALLEE: i64 = 100;
/// ... and to frequent callees (the second list) of at most this many bytes: a larger one (the
/// allocator, hashing loops) costs V8 more to inline at every call site than the call it saves.
pub const FREQUENT_CALLEE: i64 = 1000;

/// V8's inlinee cap per compiled function (`InliningTree::kMaxInlinedCount`).
const MAX_INLINED: usize = 60;
/// Bodies under 50 bytes are "small" (`kSmallFunctionThreshold`).
const SMALL_BODY: i64 = 50;

impl CallGraph {
    pub fn of(m: &Module) -> CallGraph {
        let mut size = HashMap::new();
        let mut calls = HashMap::new();
        for (id, f) in m.funcs.iter_local() {
            size.insert(id, f.original_range.as_ref().map_or(0, |r| r.len() as i64));
            let mut v = vec![];
            calls_in_order(f, f.entry_block(), &mut v);
            calls.insert(id, v);
        }
        // `InliningTree::NoLiftoffBudget`: growth 2 when at most 25% of the bodies are small
        // (the toolchain inlined already), 5 from 50%, interpolated between.
        let small = size.values().filter(|&&s| s < SMALL_BODY).count() as f64;
        let pct = if size.is_empty() { 0.0 } else { small * 100.0 / size.len() as f64 };
        let scaled = ((pct - 25.0) / 25.0).clamp(0.0, 1.0);
        CallGraph { size, calls, growth: 2.0 * (1.0 - scaled) + 5.0 * scaled }
    }

    /// The functions V8 inlines into `root` when it compiles it, added to `out`; returns how many
    /// inlinings and bytes. V8's rule with Liftoff off (Turboshaft's `should_inline`): a direct
    /// call is inlined when the callee's body is smaller than the budget left, which starts at
    /// max(50, growth x the root's size) and shrinks by each inlinee's size, nested inlinees
    /// included (one budget per compiled function), at most 60 inlinees.
    pub fn inline_closure(&self, root: FunctionId, out: &mut HashSet<FunctionId>) -> (usize, i64) {
        self.inline_closure_where(root, out, &|_| true)
    }

    /// [`Self::inline_closure`] when only the callees `direct` admits are called directly.
    pub fn inline_closure_where(&self, root: FunctionId, out: &mut HashSet<FunctionId>, direct: &dyn Fn(FunctionId) -> bool) -> (usize, i64) {
        let mut budget = std::cmp::max(SMALL_BODY, (self.growth * self.size[&root] as f64) as i64);
        let (mut count, mut bytes) = (0, 0);
        self.inline_into(root, &mut budget, &mut count, &mut bytes, out, direct);
        (count, bytes)
    }

    fn inline_into(
        &self,
        f: FunctionId,
        budget: &mut i64,
        count: &mut usize,
        bytes: &mut i64,
        out: &mut HashSet<FunctionId>,
        direct: &dyn Fn(FunctionId) -> bool,
    ) {
        let Some(calls) = self.calls.get(&f) else { return };
        for c in calls {
            let Some(&s) = self.size.get(c) else { continue }; // imported
            if s < *budget && *count < MAX_INLINED && direct(*c) {
                *count += 1;
                *bytes += s;
                *budget -= s;
                out.insert(*c);
                self.inline_into(*c, budget, count, bytes, out, direct);
            }
        }
    }
}

/// Which declared functions keep their direct calls, and to which callees.
pub struct Plan {
    /// Functions requests run (and what V8 inlines into them): their calls to `direct` callees
    /// stay direct.
    pub keep: HashSet<FunctionId>,
    /// Callees small or frequent enough to be inlined into `keep`.
    pub direct: HashSet<FunctionId>,
    /// Of `keep`: not listed as cold, and listed but inlined into those.
    pub hot: usize,
    pub inlined: usize,
    /// V8's inlining over the whole module before the rewrite, and after it: inlinings, bytes.
    pub before: (usize, i64),
    pub after: (usize, i64),
    /// Listed names present in the module, of how many listed: the cold list, the frequent one.
    pub found: (usize, usize),
    pub frequent_found: (usize, usize),
}

pub fn plan(m: &Module, cold: &NameList, frequent: &NameList) -> Plan {
    let g = CallGraph::of(m);
    let name = |id: FunctionId| m.funcs.get(id).name.as_deref();
    let direct: HashSet<FunctionId> = m
        .funcs
        .iter_local()
        .map(|(id, _)| id)
        .filter(|id| {
            let s = g.size[id];
            s <= SMALL_CALLEE || (s <= FREQUENT_CALLEE && name(*id).is_some_and(|n| frequent.contains(n)))
        })
        .collect();
    let admits = |c: FunctionId| direct.contains(&c);
    let mut keep: HashSet<FunctionId> =
        m.funcs.iter_local().map(|(id, _)| id).filter(|id| !name(*id).is_some_and(|n| cold.contains(n))).collect();
    let hot_count = keep.len();
    let mut inlined = HashSet::new();
    for &id in &keep {
        g.inline_closure_where(id, &mut inlined, &admits);
    }
    let n_inlined = inlined.difference(&keep).count();
    keep.extend(inlined);
    let (mut before, mut after) = ((0, 0), (0, 0));
    for (id, _) in m.funcs.iter_local() {
        let (c, b) = g.inline_closure(id, &mut HashSet::new());
        before = (before.0 + c, before.1 + b);
        if keep.contains(&id) {
            let (c, b) = g.inline_closure_where(id, &mut HashSet::new(), &admits);
            after = (after.0 + c, after.1 + b);
        }
    }
    let names = || m.funcs.iter_local().filter_map(|(id, _)| name(id));
    Plan { keep, direct, hot: hot_count, inlined: n_inlined, before, after, found: cold.found_in(names()), frequent_found: frequent.found_in(names()) }
}

/// What [`rewrite`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Rewritten {
    pub functions: usize,
    pub cold: usize,
    /// Call sites made indirect: in all, and of those in functions of `keep`.
    pub sites: usize,
    pub kept_sites: usize,
    pub callees: usize,
}

/// Every direct call to a declared function made by a function outside `p.keep`, or to a callee
/// outside `p.direct`, becomes `i32.const slot; call_indirect (type of the callee)` through the
/// main function table, which grows by one slot per such callee (an active element segment fills
/// them).
pub fn rewrite(m: &mut Module, p: &Plan) -> Result<Rewritten, String> {
    let table = match m.tables.main_function_table().map_err(|e| e.to_string())? {
        Some(t) => t,
        None => return Err("the module has no function table".into()),
    };
    let types: HashMap<FunctionId, walrus::TypeId> = m.funcs.iter().map(|f| (f.id(), f.ty())).collect();
    let locals: Vec<FunctionId> = m.funcs.iter_local().map(|(id, _)| id).collect();
    let declared: HashSet<FunctionId> = locals.iter().copied().collect();
    let base = m.tables.get(table).initial;
    let mut slots: HashMap<FunctionId, u64> = HashMap::new();
    let mut order: Vec<FunctionId> = vec![];
    let mut done = Rewritten { functions: locals.len(), ..Rewritten::default() };
    for id in locals {
        let kept = p.keep.contains(&id);
        if !kept {
            done.cold += 1;
        }
        let FunctionKind::Local(f) = &mut m.funcs.get_mut(id).kind else { continue };
        let mut seqs = vec![f.entry_block()];
        while let Some(seq) = seqs.pop() {
            let instrs = std::mem::take(&mut f.block_mut(seq).instrs);
            let mut out: Vec<(Instr, InstrLocId)> = Vec::with_capacity(instrs.len());
            for (ins, loc) in instrs {
                match &ins {
                    Instr::Block(b) => seqs.push(b.seq),
                    Instr::Loop(l) => seqs.push(l.seq),
                    Instr::IfElse(e) => {
                        seqs.push(e.consequent);
                        seqs.push(e.alternative);
                    }
                    Instr::Call(Call { func }) if declared.contains(func) && !(kept && p.direct.contains(func)) => {
                        let slot = *slots.entry(*func).or_insert_with(|| {
                            order.push(*func);
                            base + order.len() as u64 - 1
                        });
                        let slot = i32::try_from(slot).map_err(|_| "function table too large")?;
                        done.sites += 1;
                        done.kept_sites += usize::from(kept);
                        out.push((Instr::Const(Const { value: Value::I32(slot) }), loc));
                        out.push((Instr::CallIndirect(CallIndirect { ty: types[func], table }), loc));
                        continue;
                    }
                    _ => {}
                }
                out.push((ins, loc));
            }
            f.block_mut(seq).instrs = out;
        }
    }
    done.callees = order.len();
    if order.is_empty() {
        return Ok(done);
    }
    let t = m.tables.get_mut(table);
    t.initial = base + order.len() as u64;
    if let Some(max) = t.maximum.as_mut() {
        *max = (*max).max(t.initial);
    }
    let offset = ConstExpr::Value(Value::I32(base as i32));
    let e = m.elements.add(ElementKind::Active { table, offset }, ElementItems::Functions(order));
    m.tables.get_mut(table).elem_segments.insert(e);
    Ok(done)
}

/// For `make cold-functions`: each declared function first calls the import `env.hit(i32)` with
/// its ordinal; returns the functions' names by ordinal.
pub fn instrument(m: &mut Module) -> Vec<String> {
    let ty = m.types.add(&[ValType::I32], &[]);
    let (hit, _) = m.add_import_func("env", "hit", ty);
    let locals: Vec<FunctionId> = m.funcs.iter_local().map(|(id, _)| id).filter(|&id| id != hit).collect();
    let mut names = vec![];
    for (k, id) in locals.iter().enumerate() {
        names.push(m.funcs.get(*id).name.clone().unwrap_or_default());
        let FunctionKind::Local(f) = &mut m.funcs.get_mut(*id).kind else { continue };
        let entry = f.entry_block();
        let instrs = &mut f.block_mut(entry).instrs;
        instrs.insert(0, (Instr::Call(Call { func: hit }), InstrLocId::default()));
        instrs.insert(0, (Instr::Const(Const { value: Value::I32(k as i32) }), InstrLocId::default()));
    }
    names
}

/// Reads a module. `keep_names`: written back with its names section and custom sections
/// (for `instrument`); otherwise written with neither, as `wasm-opt` without `-g` would.
pub fn read(bytes: &[u8], keep_names: bool) -> Result<Module, String> {
    let mut config = walrus::ModuleConfig::new();
    config.generate_name_section(keep_names).generate_producers_section(keep_names);
    let mut m = config.parse(bytes).map_err(|e| format!("{e:#}"))?;
    if !keep_names {
        for name in m.customs.iter().map(|(_, c)| c.name().to_string()).collect::<Vec<_>>() {
            m.customs.remove_raw(&name);
        }
    }
    Ok(m)
}

/// Names functions from a symbol map (`index:name` lines, as `wasm-opt --symbolmap` writes them
/// for the module it outputs without names); returns how many were named.
pub fn apply_symbol_map(m: &mut Module, map: &str) -> Result<usize, String> {
    let by_index: HashMap<usize, FunctionId> = m.funcs.iter().map(|f| (f.id().index(), f.id())).collect();
    let mut named = 0;
    for line in map.lines().filter(|l| !l.is_empty()) {
        let (index, name) = line.split_once(':').ok_or_else(|| format!("symbol map line without ':': {line}"))?;
        let index: usize = index.parse().map_err(|_| format!("symbol map line without an index: {line}"))?;
        let id = *by_index.get(&index).ok_or_else(|| format!("symbol map names function {index}, which the module lacks"))?;
        m.funcs.get_mut(id).name = Some(name.to_string());
        named += 1;
    }
    Ok(named)
}

/// Writes a module and checks that it validates.
pub fn write(m: &mut Module) -> Result<Vec<u8>, String> {
    let bytes = m.emit_wasm();
    let mut features = wasmparser::WasmFeatures::default();
    features.insert(wasmparser::WasmFeatures::BULK_MEMORY | wasmparser::WasmFeatures::REFERENCE_TYPES);
    wasmparser::Validator::new_with_features(features)
        .validate_all(&bytes)
        .map_err(|e| format!("the rewritten module does not validate: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
