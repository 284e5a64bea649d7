#!/usr/bin/env python3
"""`make bench-floor`: what Envoy's start-up and memory cost for a proxy-wasm module, by what it holds
(and for wafer's dynamic module, which V8 does not compile).

The issue's start-up and memory bars (Envoy ready in 1 s with the full CRS; its RSS at most 32 MiB
over vanilla Envoy's) price the module Envoy loads, not only the rules. This runs, one after the
other, Envoy (--concurrency 1, pinned to SUT_CPU, as `make bench`) with:

  vanilla Envoy; the empty proxy-wasm filter (bench/conf/minimal-filter.wat); the reference
  filter of bench/floor/ built three ways (the standard library alone, + aho-corasick,
  + regex and aho-corasick: the crates a WAF's matcher is built on, with wafer's features,
  and nothing of wafer); wafer with no rules; wafer with the full CRS (as `make bench`); the same
  two as the dynamic module (target/libwafer.so, `make native`).

For each, READY_RUNS starts (default 3): seconds until the admin /ready says LIVE, then one benign
GET (must be the upstream's 200) and one GET whose User-Agent is a scanner's (must be 403 where the
filter has patterns or the CRS, 200 elsewhere), two seconds idle, then Envoy's RSS and its
allocator's numbers (admin /memory: allocated, heap, free pages, caches). Medians are reported,
with RSS and heap against vanilla Envoy's. Writes bench/results/<date>-floor.md (RESULTS_DIR).

Stdlib only; run from the repository root after `make tools wasm native` (the Makefile does).
Environment: READY_RUNS (3), SUT_CPU (0), PORT_BASE (29500), ENVOY_BIN, WASM, NATIVE, RESULTS_DIR,
FLOOR_TARGET_DIR (target/floor), TARGETS (a comma list of the names below, to run a subset).
"""
import datetime
import http.server
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time

from run import (CRS_PL1, PROCS, cpu_model, envoy_ready, find_envoy, http_get, mem_kb, port_free, render_template,
                 wafer_config)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from precompile import read_leb, sections  # noqa: E402 (scripts/ is not a package)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIB = 1024 * 1024

# The reference filter's patterns (one per line): regexes for the regex build, literals for the
# others; "sqlmap" is found by all three in the scanner's User-Agent.
FLOOR_PATTERNS = "(?i)union\\s+select\n<script\nsqlmap\n"
SCANNER_UA = "sqlmap/1.7.2#stable (https://sqlmap.org)"
NO_RULES = wafer_config(["SecRuleEngine On"])

# name, label, module (None: no filter; "minimal"; "floor:<features>"; "wafer"; "native": the
# dynamic module), plugin configuration (a string as is, else JSON), whether the scanner's request
# is refused
TARGETS = [
    ("vanilla", "vanilla Envoy", None, None, False),
    ("empty-filter", "empty proxy-wasm filter (WAT)", "minimal", "", False),
    ("rust-std", "Rust filter, standard library only", "floor:", FLOOR_PATTERNS, True),
    ("rust-aho", "Rust filter + aho-corasick", "floor:aho", FLOOR_PATTERNS, True),
    ("rust-regex", "Rust filter + regex + aho-corasick", "floor:regex", FLOOR_PATTERNS, True),
    ("wafer-none", "wafer, no rules", "wafer", NO_RULES, False),
    ("wafer-crs", "wafer, CRS PL1", "wafer", wafer_config(CRS_PL1), True),
    ("native-none", "wafer native (dynamic module), no rules", "native", NO_RULES, False),
    ("native-crs", "wafer native (dynamic module), CRS PL1", "native", wafer_config(CRS_PL1), True),
]
TARGETS = [t for t in TARGETS if t[0] == "vanilla" or t[0] in os.environ.get("TARGETS", ",".join(t[0] for t in TARGETS)).split(",")]


def log(msg):
    print(f"[floor] {msg}", file=sys.stderr, flush=True)


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = b"floor upstream\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


def build_floor(features, target_dir):
    """The reference filter with `features`, optimized as wafer's module is (wasm-opt -O3)."""
    name = features or "std"
    out = os.path.join(target_dir, f"floor-{name}.wasm")
    subprocess.run(["cargo", "build", "--release", "--locked", "--target", "wasm32-wasip1", "--features", features,
                    "--target-dir", target_dir], cwd=os.path.join(HERE, "floor"), check=True)
    raw = os.path.join(target_dir, "wasm32-wasip1", "release", "wafer_floor.wasm")
    subprocess.run(["wasm-opt", "-O3", raw, "-o", out], check=True)
    return out


def code_bytes(path):
    """The size of a module's code section (what V8 compiles)."""
    data = open(path, "rb").read()
    return sum(read_leb(data, start + 1)[0] for sid, _, start, _ in sections(data) if sid == 10)


class Floor:
    def __init__(self):
        self.envoy = find_envoy()
        self.sut = os.environ.get("SUT_CPU", "0")
        self.runs = int(os.environ.get("READY_RUNS", "3"))
        base = int(os.environ.get("PORT_BASE", "29500"))
        self.port, self.admin, self.upstream_port = base, base + 1, base + 2
        for p in (self.port, self.admin, self.upstream_port):
            if not port_free(p):
                raise SystemExit(f"[floor] port {p} is in use (PORT_BASE)")
        self.wasm = os.environ.get("WASM", os.path.join(REPO, "target", "wafer.wasm"))
        self.native = os.path.abspath(os.environ.get("NATIVE", os.path.join(REPO, "target", "libwafer.so")))
        self.target_dir = os.environ.get("FLOOR_TARGET_DIR", os.path.join(REPO, "target", "floor"))
        self.run_dir = os.path.join(self.target_dir, "run")
        os.makedirs(self.run_dir, exist_ok=True)
        self.modules = {}

    def module(self, kind):
        if kind not in self.modules:
            if kind == "wafer":
                self.modules[kind] = self.wasm
            elif kind == "native":
                self.modules[kind] = self.native
            elif kind == "minimal":
                out = os.path.join(self.target_dir, "minimal-filter.wasm")
                subprocess.run(["wasm-opt", os.path.join(HERE, "conf", "minimal-filter.wat"), "-o", out], check=True,
                               capture_output=True)
                self.modules[kind] = out
            else:
                self.modules[kind] = build_floor(kind.split(":", 1)[1], self.target_dir)
        return self.modules[kind]

    def config(self, kind, plugin):
        wasm_filter = ""
        if kind == "native":
            wasm_filter = render_template("native-filter.yaml", PLUGIN_CONFIG=json.dumps(json.dumps(plugin)), NATIVE=self.module(kind)).rstrip("\n")
        elif kind is not None:
            value = plugin if isinstance(plugin, str) else json.dumps(plugin)
            wasm_filter = render_template("wasm-filter.yaml", PLUGIN_CONFIG=json.dumps(value), WASM=self.module(kind)).rstrip("\n")
        path = os.path.join(self.run_dir, "envoy.yaml")
        with open(path, "w") as f:
            f.write(render_template("envoy.yaml", PORT=self.port, ADMIN_PORT=self.admin, UPSTREAM_PORT=self.upstream_port,
                           WASM_FILTER=wasm_filter))
        return path

    def start(self, conf):
        t0 = time.monotonic()
        p = PROCS.start("envoy", ["taskset", "-c", self.sut, self.envoy, "-c", conf, "--concurrency", "1",
                                  "--disable-hot-restart", "-l", "warning"], os.path.join(self.run_dir, "envoy.log"))
        ready = envoy_ready(p, self.admin, t0)
        if ready is None:
            what = f"exited with {p.returncode}" if p.poll() is not None else "was not LIVE after 120 s"
            PROCS.stop(p)
            raise SystemExit(f"[floor] envoy {what}; see {self.run_dir}/envoy.log")
        return p, ready

    def measure(self, t):
        name, label, kind, plugin, refuses = t
        conf = self.config(kind, plugin)
        runs = []
        for _ in range(self.runs):
            p, ready = self.start(conf)
            try:
                st, _, _ = http_get(self.port, "/floor?q=1", {"Host": "shop.example.com"}, timeout=10)
                if st != 200:
                    raise SystemExit(f"[floor] {name}: a benign GET answered {st}")
                st, _, _ = http_get(self.port, "/floor", {"Host": "shop.example.com", "User-Agent": SCANNER_UA}, timeout=10)
                if st != (403 if refuses else 200):
                    raise SystemExit(f"[floor] {name}: the scanner's GET answered {st}, expected {403 if refuses else 200}")
                time.sleep(2)
                rss = mem_kb(p.pid).get("VmRSS", 0) / 1024
                _, _, body = http_get(self.admin, "/memory", timeout=5)
                m = {k: int(v) / MIB for k, v in json.loads(body).items() if isinstance(v, str) and v.isdigit()}
            finally:
                PROCS.stop(p)
            runs.append(dict(ready=ready, rss=rss, allocated=m.get("allocated", 0), heap=m.get("heap_size", 0),
                             free=m.get("pageheap_free", 0), caches=m.get("total_thread_cache", 0)))
        cell = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        cell["ready_runs"] = [round(r["ready"], 3) for r in runs]
        if kind is not None:
            path = self.module(kind)
            cell["module_bytes"] = os.path.getsize(path)
            if kind != "native":
                cell["code_bytes"] = code_bytes(path)
        log(f"{label}: ready {cell['ready']:.3f} s, RSS {cell['rss']:.1f} MiB, heap {cell['heap']:.1f} MiB")
        return cell

    def run(self):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.upstream_port), Upstream)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            cells = {t[0]: self.measure(t) for t in TARGETS}
        finally:
            PROCS.stop_all()
            srv.shutdown()
        return cells


def markdown(cells, machine):
    v = cells["vanilla"]
    lines = [
        f"# Start-up and memory by what the module holds ({datetime.date.today().isoformat()})",
        "",
        f"Machine: {machine}. Envoy --concurrency 1 pinned to one core; medians of "
        f"{len(v['ready_runs'])} starts. RSS two seconds after a benign and a scanner's GET; heap, allocated, "
        "free pages and caches from Envoy's admin /memory (its allocator, tcmalloc). Bars of the issue: ready "
        "<= 1 s with the full CRS, RSS <= +32 MiB over vanilla Envoy.",
        "",
        "| module | code bytes | ready s | RSS MiB | over vanilla | heap MiB | allocated | free pages | caches |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, label, *_ in TARGETS:
        c = cells[name]
        code = f"{c['code_bytes']:,}" if "code_bytes" in c else "-"
        over = "-" if name == "vanilla" else f"+{c['rss'] - v['rss']:.1f}"
        lines.append(f"| {label} | {code} | {c['ready']:.3f} | {c['rss']:.1f} | {over} | {c['heap']:.1f} | "
                     f"{c['allocated']:.1f} | {c['free']:.1f} | {c['caches']:.1f} |")
    lines += ["", "Ready times of each start: " + "; ".join(f"{n} {cells[n]['ready_runs']}" for n, *_ in TARGETS), ""]
    return "\n".join(lines)


def machine():
    v = subprocess.run([find_envoy(), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version: \S+/(\d+\.\d+\.\d+)", v)
    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    return f"{cpu_model()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Envoy {m.group(1) if m else '?'}, rev {rev or '?'}"


def main():
    cells = Floor().run()
    text = markdown(cells, machine())
    out_dir = os.environ.get("RESULTS_DIR", os.path.join(HERE, "results"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{datetime.date.today().isoformat()}-floor.md")
    with open(path, "w") as f:
        f.write(text)
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
