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
    let p = plan(&m, &NameList::parse("cold\ng\nnot-in-the-module\n"));
    assert_eq!(p.keep, HashSet::from([by_name(&m, "hot"), by_name(&m, "unlisted")]));
    assert_eq!(p.found, (2, 3));
    let r = rewrite(&mut m, &p.keep).unwrap();
    assert_eq!(r, Rewritten { functions: 4, cold: 2, sites: 3, callees: 2 });
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
