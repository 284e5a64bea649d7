//! Criterion benchmarks of the native engine with the full CRS at PL1: compiling the rule set,
//! and the requests of `make bench`. Every iteration checks the verdict (benign: no
//! interruption; attack: 403), so a rule change that blocks benign traffic fails the run
//! instead of making it faster.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use wafer_bench::{attack_get, crs_pl1, get, post_json, run, Request};

fn compile(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile");
    g.sample_size(10);
    g.bench_function("crs_pl1", |b| b.iter(|| crs_pl1()));
    g.finish();
}

fn requests(c: &mut Criterion) {
    let waf = crs_pl1();
    let cases: Vec<(&str, Request, Option<u16>)> = vec![
        ("get", get(), None),
        ("post_json_1k", post_json(1), None),
        ("post_json_10k", post_json(10), None),
        ("post_json_50k", post_json(50), None),
        ("attack_get", attack_get(), Some(403)),
    ];
    let mut g = c.benchmark_group("crs_pl1");
    for (name, req, want) in &cases {
        // Warm up (lazily built regexes) and check once outside the timing.
        assert_eq!(run(&waf, req), *want, "{name}: unexpected verdict");
        g.throughput(Throughput::Bytes((req.uri.len() + req.body.len()) as u64));
        g.bench_function(*name, |b| {
            b.iter_batched(
                || (),
                |()| {
                    let verdict = run(&waf, req);
                    assert_eq!(verdict, *want, "{name}: unexpected verdict");
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, compile, requests);
criterion_main!(benches);
