#!/usr/bin/env python3
"""`make bench-instructions`: instructions per request of each rule tier and traffic shape in
Envoy, counted by callgrind (bench/instructions.py, one run per cell, two at a time), against
vanilla Envoy's for the same shape: the throughput table's ratios measured in a way the host's
noise cannot move (counts repeat within a few tenths of a percent; req/s on a shared host move
by tens of percent). Instructions are not time: `make bench` stays the measure of req/s (a
wafer request's instructions ran ~5 points slower per instruction than vanilla Envoy's in the
last quiet run, session 25). Writes bench/results/<date>-instructions.md and .json.

    python3 bench/instruction_table.py [--n 1000] [-c 64] [--out bench/results/DATE-instructions]
"""
import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import run  # noqa: E402  (the tiers' plugin configurations and the bars, as make bench has them)

TARGETS = ["envoy", "wafer-headers-only", "wafer-targeted", "wafer-crs-pl1", "wafer-crs-pl1-detect", "wafer-native-crs-pl1"]
# Targets counted on the realistic traffic only.
REALISTIC_ONLY = {"wafer-crs-pl1-detect"}
SHAPES = [("realistic", "realistic traffic"), ("get", "GET, one request repeated"),
          ("get-varied", "GET, one request repeated with new values"), ("get-mixed", "GETs, 4 requests repeated in turn"),
          ("post1k", "POST 1 KB, one request repeated")]
LINE = re.compile(r": ([\d.]+) K instructions per request \((.*)\)$")


def count(wasm, config, shape, n, c, port_base):
    """(total K, {part: K}) per request of one cell, from bench/instructions.py."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config or {}, f)
        cfg = f.name
    try:
        argv = [sys.executable, os.path.join(HERE, "instructions.py"), "--wasm", wasm if config is not None else "none",
                "--shape", shape, "-n", str(n), "-c", str(c), "--port-base", str(port_base)]
        if config is not None:
            argv += ["--config", cfg]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    finally:
        os.unlink(cfg)
    m = LINE.search(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "")
    if out.returncode != 0 or not m:
        raise RuntimeError(f"instructions.py {shape} failed ({out.returncode}): {out.stdout[-400:]} {out.stderr[-800:]}")
    parts = {k: float(v) for k, v in (p.rsplit(" ", 1) for p in m.group(2).split("  "))}
    return float(m.group(1)), parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wasm", default=os.path.join(ROOT, "target", "wafer.wasm"))
    ap.add_argument("--native", default=os.path.join(ROOT, "target", "libwafer.so"), help="the dynamic module (make native)")
    ap.add_argument("--n", type=int, default=1000, help="requests counted per cell")
    ap.add_argument("-c", type=int, default=64, help="connections (make bench's load: 64)")
    ap.add_argument("--out", help="output path without extension (default bench/results/<date>-instructions)")
    a = ap.parse_args()
    configs = {t[0]: t[3] for t in run.ALL_TARGETS}
    labels = {t[0]: t[1] for t in run.ALL_TARGETS}
    cells = [(t, s) for t in TARGETS for s, _ in SHAPES if t not in REALISTIC_ONLY or s == "realistic"]
    import realistic
    realistic.ensure(run.CORPUS_DIR)  # before the cells run two at a time
    t0 = time.time()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {pool.submit(count, a.native if t in run.NATIVE else a.wasm, configs[t], s, a.n, a.c, 29600 + 10 * i): (t, s)
                   for i, (t, s) in enumerate(cells)}
        for fut in concurrent.futures.as_completed(futures):
            t, s = futures[fut]
            results[(t, s)] = fut.result()
            print(f"[instructions] {labels[t]} {s}: {results[(t, s)][0]:.1f} K", flush=True)
    date = datetime.date.today().isoformat()
    out = a.out or os.path.join(HERE, "results", f"{date}-instructions")
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    wasm = open(a.wasm, "rb").read()
    fields = subprocess.run([run.find_envoy(), "--version"], capture_output=True, text=True).stdout.split("version:")[-1].strip().split("/")
    envoy_version = " ".join(fields[1:4:2]) if len(fields) > 3 else "?"
    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    L = [f"# wafer instructions per request, {date}", "",
         f"Machine: {os.cpu_count()} CPUs, {cpu}, kernel {platform.release()}; Envoy {envoy_version}; {valgrind}.",
         f"wafer {rev}{' (with uncommitted changes)' if dirty else ''}, target/wafer.wasm {len(wasm):,} bytes (sha256 {hashlib.sha256(wasm).hexdigest()[:16]}…).",
         "",
         f"Each cell: Envoy (`--concurrency 1`) under callgrind, instrumentation on only while {a.n:,} requests of the shape are "
         f"served on {a.c} connections at once (after 50 uncounted; `bench/instructions.py`); every response the upstream's 200. "
         "Requests and configurations are `make bench`'s (tiers from `bench/run.py`); realistic traffic: the requests of "
         "`bench/realistic.py`'s corpus, all different, as `make bench`'s realistic cell; \"GETs, 4 requests repeated in turn\": the GET in turn "
         "with `/healthz`, `/readyz` and `/api/v1/status`, each the same every time, as probes and polls repeat. Counted in Envoy's binary (with V8), "
         "in the module (code without a file: the wasm module compiled by V8, its wrappers; libwafer.so for the dynamic "
         "module), in libc. Runtime "
         f"{time.time() - t0:.0f} s.", "",
         "## Instructions per request (K; % of vanilla Envoy's for the same shape: vanilla / target)", "",
         "| target | " + " | ".join(l for _, l in SHAPES) + " |", "|---|" + "---:|" * len(SHAPES)]
    for t in TARGETS:
        row = [labels[t]]
        for s, _ in SHAPES:
            if (t, s) not in results:
                row.append("")
                continue
            k, parts = results[(t, s)]
            base = results[("envoy", s)][0]
            module = parts.get("module")
            row.append(f"{k:,.1f}" if t == "envoy" else f"{k:,.1f} ({100 * base / k:.1f}%; module {module:,.1f})")
        L.append("| " + " | ".join(row) + " |")
    L += ["", "## The issue's throughput bars, by instructions (indicative: the bars are on `make bench`'s req/s)", "",
          "| bar | by instructions | limit |", "|---|---:|---:|"]
    for _, desc, target, shape, kind, limit in run.BARS:
        if kind == "ratio" and (target, shape) in results:
            r = results[("envoy", shape)][0] / results[(target, shape)][0]
            L.append(f"| {desc.replace('req/s', 'instructions')} | {100 * r:.1f}% | >= {100 * limit:.0f}% |")
        if kind == "vs_crs" and (target, shape) in results and ("wafer-crs-pl1", shape) in results:
            r = results[("wafer-crs-pl1", shape)][0] / results[(target, shape)][0]
            L.append(f"| {desc.replace('req/s', 'instructions')} | {r:.2f}x | >= {limit:.2f}x |")
        if kind == "vs_wasm" and (target, shape) in results and (run.NATIVE[target], shape) in results:
            # Throughput by instructions: the wasm module's count over the native one's.
            r = results[(run.NATIVE[target], shape)][0] / results[(target, shape)][0]
            L.append(f"| {desc.replace('req/s', 'instructions, wasm / native')} | {r:.2f}x | >= {limit:.2f}x |")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".md", "w") as f:
        f.write("\n".join(L) + "\n")
    with open(out + ".json", "w") as f:
        json.dump({"date": date, "rev": rev, "n": a.n, "connections": a.c,
                   "cells": [{"target": t, "shape": s, "k_instructions": results[(t, s)][0], "parts_k": results[(t, s)][1]}
                             for t, s in cells]}, f, indent=1)
    print(f"[instructions] {out}.md")


if __name__ == "__main__":
    main()
