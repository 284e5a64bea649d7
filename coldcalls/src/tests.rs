use super::*;
use walrus::{FunctionBuilder, ModuleConfig, TableId};

/// A function of `pad` `i32.const 1; drop` pairs (3 bytes each) followed by calls to `callees`.
fn func(m: &mut Module, name: &str, pad: usize, callees: &[FunctionId]) -> FunctionId {
    let mut b = FunctionBuilder::new(&mut m.types, &[], &[]);
    b.name(name.to_string());
    let mut body = b.func_body();
    for _ in 0..pad {
        body.i32_const(1).drop();
    }
    for c in callees {
        body.call(*c);
    }
    b.finish(vec![], &mut m.funcs)
}

fn table(m: &mut Module) -> TableId {
    m.tables.add_local(false, 1, None, walrus::RefType::FUNCREF)
}

/// Emits and reads back, so bodies have their sizes in the module.
fn reparse(m: &mut Module) -> Module {
    ModuleConfig::new().parse(&m.emit_wasm()).unwrap()
}

fn by_name(m: &Module, name: &str) -> FunctionId {
    m.funcs.by_name(name).unwrap()
}

#[test]
fn stable_names_drop_the_build_hash_and_local_copy_suffix() {
    assert_eq!(stable_name("_ZN5wafer2tx4eval5group17h0c801fae1e537bcbE"), "_ZN5wafer2tx4eval5group");
    assert_eq!(stable_name("_ZN12regex_syntax3hir3Hir5class17h314719ce93f30dd6E.822"), "_ZN12regex_syntax3hir3Hir5class");
    assert_eq!(stable_name("dlmalloc"), "dlmalloc");
    assert_eq!(stable_name("_ZN4core3fmt5write17hzz01e3e095c4285cE"), "_ZN4core3fmt5write17hzz01e3e095c4285cE");
    let list = NameList::parse("# comment\n_ZN5wafer2tx4eval5group17h1111111111111111E\n");
    assert!(list.contains("_ZN5wafer2tx4eval5group17h0c801fae1e537bcbE"));
    assert!(!list.contains("_ZN5wafer2tx4eval7collect17hf87d0389bda7cce9E"));
    assert_eq!(list.found_in(["_ZN5wafer2tx4eval5group17h2222222222222222E", "x"].into_iter()), (1, 1));
}

#[test]
fn inlining_follows_v8s_single_shrinking_budget() {
    let mut m = Module::default();
    let e = func(&mut m, "e", 12, &[]); // ~38 bytes
    let d = func(&mut m, "d", 45, &[]); // ~138
    let a = func(&mut m, "a", 8, &[d]); // ~29
    let big = func(&mut m, "big", 80, &[]); // ~243: over the root's budget
    func(&mut m, "root", 30, &[a, big, e]); // ~100: budget ~200
    let m = reparse(&mut m);
    let mut g = CallGraph::of(&m);
    g.growth = 2.0;
    let (root, a, d, e, big) = (by_name(&m, "root"), by_name(&m, "a"), by_name(&m, "d"), by_name(&m, "e"), by_name(&m, "big"));
    let budget = 2 * g.size[&root];
    assert!(g.size[&big] >= budget && g.size[&a] + g.size[&d] < budget);
    assert!(g.size[&a] + g.size[&d] + g.size[&e] >= budget, "sizes: {:?}", g.size);
    let mut out = HashSet::new();
    let (count, bytes) = g.inline_closure(root, &mut out);
    // a, then d inside a (from the same budget), then nothing left for e; big never fits.
    assert_eq!(out, HashSet::from([a, d]));
    assert_eq!((count, bytes), (2, g.size[&a] + g.size[&d]));
    // Without d's share, e fits: the nested inlinee used the root's budget.
    let mut out = HashSet::new();
    g.calls.insert(a, vec![]);
    g.inline_closure(root, &mut out);
    assert_eq!(out, HashSet::from([a, e]));
}

#[test]
fn cold_functions_call_through_the_table_and_hot_ones_are_untouched() {
    let mut m = Module::default();
    table(&mut m);
    let g = func(&mut m, "g", 80, &[]); // too big for the hot function's budget (5 x ~36)
    let hot = func(&mut m, "hot", 10, &[g]);
    let cold = func(&mut m, "cold", 2, &[g, g, hot]);
    func(&mut m, "unlisted", 1, &[g]);
    m.exports.add("hot", hot);
    m.exports.add("cold", cold);
    let mut m = reparse(&mut m);
    // g (~243 bytes) is over SMALL_CALLEE: listed as frequent, it stays direct in hot functions.
    let p = plan(&m, &NameList::parse("cold\ng\nnot-in-the-module\n"), &NameList::parse("g\n"));
    assert_eq!(p.keep, HashSet::from([by_name(&m, "hot"), by_name(&m, "unlisted")]));
    assert_eq!((p.found, p.frequent_found), ((2, 3), (1, 1)));
    let r = rewrite(&mut m, &p).unwrap();
    assert_eq!(r, Rewritten { functions: 4, cold: 2, sites: 3, kept_sites: 0, callees: 2 });
    let bytes = write(&mut m).unwrap();
    let m = read(&bytes, true).unwrap();
    let body = |name: &str| {
        let FunctionKind::Local(f) = &m.funcs.get(by_name(&m, name)).kind else { panic!() };
        f.block(f.entry_block()).instrs.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>()
    };
    let (g, hot) = (by_name(&m, "g"), by_name(&m, "hot"));
    assert!(matches!(body("hot").last(), Some(Instr::Call(c)) if c.func == g));
    assert!(matches!(body("unlisted").last(), Some(Instr::Call(c)) if c.func == g));
    let cold = body("cold");
    assert!(!cold.iter().any(|i| matches!(i, Instr::Call(_))));
    let slots: Vec<i32> = cold
        .windows(2)
        .filter_map(|w| match (&w[0], &w[1]) {
            (Instr::Const(Const { value: Value::I32(s) }), Instr::CallIndirect(_)) => Some(*s),
            _ => None,
        })
        .collect();
    assert_eq!(slots, vec![1, 1, 2]);
    let t = m.tables.get(m.tables.iter().next().unwrap().id());
    assert_eq!(t.initial, 3);
    let seg = m.elements.iter().find(|e| matches!(e.kind, ElementKind::Active { .. })).unwrap();
    match (&seg.kind, &seg.items) {
        (ElementKind::Active { offset: ConstExpr::Value(Value::I32(1)), .. }, ElementItems::Functions(f)) => assert_eq!(f, &vec![g, hot]),
        other => panic!("{other:?}"),
    }
    let _ = t;
}

/// The callee of each call instruction of `name`'s body, direct or through the table.
fn call_targets(m: &Module, name: &str) -> Vec<(FunctionId, bool)> {
    let FunctionKind::Local(f) = &m.funcs.get(by_name(m, name)).kind else { panic!() };
    let instrs: Vec<Instr> = f.block(f.entry_block()).instrs.iter().map(|(i, _)| i.clone()).collect();
    let table = m.tables.main_function_table().unwrap().unwrap();
    let slot = |s: i32| {
        m.elements
            .iter()
            .find_map(|e| match (&e.kind, &e.items) {
                (ElementKind::Active { table: t, offset: ConstExpr::Value(Value::I32(o)) }, ElementItems::Functions(fs)) if *t == table && s >= *o => {
                    fs.get((s - o) as usize).copied()
                }
                _ => None,
            })
            .unwrap()
    };
    let mut out = vec![];
    for (k, i) in instrs.iter().enumerate() {
        match i {
            Instr::Call(c) => out.push((c.func, true)),
            Instr::CallIndirect(_) => {
                let Instr::Const(Const { value: Value::I32(s) }) = instrs[k - 1] else { panic!() };
                out.push((slot(s), false));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn functions_requests_run_call_directly_only_small_or_frequent_callees() {
    let mut m = Module::default();
    table(&mut m);
    let leaf = func(&mut m, "leaf", 2, &[]);
    let small = func(&mut m, "small", 10, &[leaf]); // ~35 bytes
    let rare = func(&mut m, "rare", 60, &[leaf]); // ~185: over SMALL_CALLEE, not frequent
    let frequent = func(&mut m, "frequent", 60, &[leaf]); // ~185, frequent
    let huge = func(&mut m, "huge", 400, &[leaf]); // ~1,200: over FREQUENT_CALLEE though frequent
    let inlined = func(&mut m, "inlined", 5, &[rare, leaf]); // listed cold, but V8 inlines it into hot
    let hot = func(&mut m, "hot", 1000, &[small, rare, frequent, huge, inlined]);
    m.exports.add("hot", hot);
    let mut m = reparse(&mut m);
    let size = |n: &str| CallGraph::of(&m).size[&by_name(&m, n)];
    assert!(size("small") <= SMALL_CALLEE && size("rare") > SMALL_CALLEE && size("frequent") <= FREQUENT_CALLEE);
    assert!(size("huge") > FREQUENT_CALLEE && size("inlined") <= SMALL_CALLEE);
    let p = plan(&m, &NameList::parse("inlined\n"), &NameList::parse("frequent\nhuge\n"));
    let ids = |names: &[&str]| names.iter().map(|n| by_name(&m, n)).collect::<HashSet<_>>();
    // "inlined" is listed cold, but V8 inlines it into hot: its own calls stay as hot's would be.
    assert_eq!(p.keep, ids(&["leaf", "small", "rare", "frequent", "huge", "inlined", "hot"]));
    assert_eq!(p.inlined, 1);
    let r = rewrite(&mut m, &p).unwrap();
    // hot -> rare, hot -> huge, inlined -> rare; nothing else.
    assert_eq!((r.sites, r.kept_sites, r.cold, r.callees), (3, 3, 0, 2));
    let m = read(&write(&mut m).unwrap(), true).unwrap();
    let id = |n: &str| by_name(&m, n);
    assert_eq!(
        call_targets(&m, "hot"),
        vec![(id("small"), true), (id("rare"), false), (id("frequent"), true), (id("huge"), false), (id("inlined"), true)]
    );
    assert_eq!(call_targets(&m, "inlined"), vec![(id("rare"), false), (id("leaf"), true)]);
    assert_eq!(call_targets(&m, "rare"), vec![(id("leaf"), true)]);
}

#[test]
fn instrumented_functions_report_their_ordinal_first() {
    let mut m = Module::default();
    table(&mut m);
    let a = func(&mut m, "a", 1, &[]);
    func(&mut m, "b", 1, &[a]);
    let names = instrument(&mut m);
    assert_eq!(names, vec!["a".to_string(), "b".to_string()]);
    let m = read(&write(&mut m).unwrap(), true).unwrap();
    let FunctionKind::Local(f) = &m.funcs.get(by_name(&m, "b")).kind else { panic!() };
    let first: Vec<_> = f.block(f.entry_block()).instrs.iter().take(2).map(|(i, _)| i.clone()).collect();
    assert!(matches!(first[0], Instr::Const(Const { value: Value::I32(1) })));
    let Instr::Call(c) = &first[1] else { panic!("{first:?}") };
    let FunctionKind::Import(i) = &m.funcs.get(c.func).kind else { panic!() };
    assert_eq!((m.imports.get(i.import).module.as_str(), m.imports.get(i.import).name.as_str()), ("env", "hit"));
}
