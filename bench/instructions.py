#!/usr/bin/env python3
"""Instructions per request in Envoy itself, deterministic: Envoy (and its V8, and wafer's
compiled wasm) under valgrind's callgrind, counting only while N requests are served.

    python3 bench/instructions.py --wasm target/wafer.wasm --config CONFIG.json [--shape get|get-varied|post1k] [-n 1000] [-c 1]
    python3 bench/instructions.py --wasm target/libwafer.so --config CONFIG.json   # the dynamic module
    python3 bench/instructions.py --wasm none            # vanilla Envoy
    python3 bench/instructions.py --wasm target/wafer.wasm --config CONFIG.json --shape realistic -n 2000 -c 64

CPU time on a shared machine moves by +-20% between runs; instruction counts do not (a few
tenths of a percent), so small changes can be judged in the real proxy. Envoy starts under
callgrind with instrumentation off (V8 compiling the module is not counted), serves 50
requests, then counts N requests of one shape (the browser-like GET of PEERS_DIR, with a new
`x-request-id` each as Envoy adds; the same GET with new query and cookie values in each request,
as `make bench`'s "GET, one request repeated with new values"; `get-mixed`: that GET in turn with three other GETs that
repeat, as probes and polls do; its 1 KB JSON POST; or `realistic`: requests of
bench/realistic.py's corpus, all different, as `make bench`'s realistic cell, the 50 of the
warm-up first and the N counted after them; `--corpus FILE` for another corpus file), sent by oha (the new-values, mixed and
realistic GETs: by this script) one at a time on one keep-alive connection, or with `-c N` on N connections at once (`make bench` uses 64: the
transactions in flight then overlap, as in a busy proxy). Every response must be the upstream's 200. The upstream is a
second Envoy (not counted) answering a 180-byte `text/html` page, like `make bench`'s origin.
Prints instructions per request: in Envoy's binary (which includes V8 and its builtins), in
the module (code without a file: the wasm module's code compiled by V8; or libwafer.so, the
dynamic module), in libc, and in total.
Needs valgrind, oha and the envoy command (`make tools bench-tools`); takes ~1 min per run.
"""
import argparse
import http.client
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from run import CORPUS_DIR, find_envoy, read_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.environ.get("PEERS_DIR", os.path.join(ROOT, "..", "shared", "peers"))
BODY = "<!doctype html><html><head><title>waf-bench origin</title></head><body><p>ok: static 180-byte response body from the nginx benchmark origin......................</p></body></html>\n"

UPSTREAM = """static_resources:
  listeners:
  - address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: up
          route_config:
            virtual_hosts:
            - name: a
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                direct_response: {{ status: 200, body: {{ inline_string: {body} }} }}
              response_headers_to_add:
              - header: {{ key: content-type, value: text/html }}
                append_action: OVERWRITE_IF_EXISTS_OR_ADD
          http_filters: [ {{ name: envoy.filters.http.router, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }} }} ]
"""


def corpus_requests(path=None):
    """[(id, raw)] of a corpus file of bench/realistic.py; by default its corpus, written when missing."""
    if path is None:
        import realistic
        realistic.ensure(CORPUS_DIR)
        path = os.path.join(CORPUS_DIR, "requests.raw")
    return read_corpus(path)


def wait_ready(port, proc, limit):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            sys.exit(f"Envoy exited with status {proc.returncode}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).read().strip() == b"LIVE":
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"Envoy not ready after {limit} s")


def load(url, n, headers, body, connections=1):
    args = ["oha", "-n", str(n), "-c", str(connections), "--no-tui", "--output-format", "json"]
    for h in headers:
        args += ["-H", h]
    if body is not None:
        args += ["-m", "POST", "-D", body, "-H", "Content-Type: application/json"]
    out = subprocess.run(args + [url], capture_output=True, text=True, timeout=1200)
    try:
        stats = json.loads(out.stdout)
    except ValueError:
        sys.exit(f"oha failed: {out.stderr.strip()[:400]}")
    codes = stats.get("statusCodeDistribution", {})
    if codes != {"200": n} or stats.get("errorDistribution"):
        sys.exit(f"unexpected responses: {codes} {stats.get('errorDistribution')}")


def varied(path, headers, n):
    """Request `n`'s path and headers: every query and cookie value with `n` appended (as
    bench/conf/wrk.lua's WRK_VARY)."""
    tag = str(n)
    p = re.sub(r"=([^&]*)", lambda m: "=" + m.group(1) + tag, path)
    hs = []
    for h in headers:
        k, _, v = h.partition(":")
        if k.strip().lower() == "cookie":
            v = re.sub(r"=([^;]*)", lambda m: "=" + m.group(1).strip() + tag, v.strip())
        hs.append((k.strip(), v.strip()))
    return p, hs


# The mixed shape's other paths: the benchmark's GET in turn with requests a proxied service
# also gets again and again (probes, a status poll), each the same every time.
MIXED = ["/healthz", "/readyz", "/api/v1/status"]


def mixed(path, headers, n):
    """Request `n` of the mixed shape: the benchmark's GET and MIXED's paths in turn."""
    paths = [path] + MIXED
    return paths[n % len(paths)], [(k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in headers)]


NUMBERS = itertools.count(1)


def load_varied(port, path, n, headers, connections=1, make=varied):
    """`n` GETs with new values (see `varied`, numbered on from the last call; or another
    `make`) on `connections` keep-alive connections at once; every answer must be the
    upstream's 200."""
    lock = threading.Lock()
    bad = []

    def worker(count):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            for _ in range(count):
                with lock:
                    k = next(NUMBERS)
                p, hs = make(path, headers, k)
                c.putrequest("GET", p, skip_host=True, skip_accept_encoding=True)
                for name, v in hs:
                    c.putheader(name, v)
                c.endheaders()
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    bad.append(r.status)
        except (OSError, http.client.HTTPException) as e:
            bad.append(repr(e))
        finally:
            c.close()

    per = [n // connections + (1 if i < n % connections else 0) for i in range(connections)]
    all_done([threading.Thread(target=worker, args=(k,)) for k in per], bad, n)


def all_done(threads, bad, n):
    """Starts the connections' threads, waits for them; exits when an answer was not the upstream's 200."""
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if bad:
        sys.exit(f"unexpected responses: {bad[:5]} ({len(bad)} of {n})")


def load_corpus(port, reqs, connections=1):
    """Sends the raw requests `reqs` (each once, in order, spread over `connections` keep-alive
    connections at once); every answer must be the upstream's 200."""
    lock = threading.Lock()
    todo = iter(reqs)
    bad = []

    def worker():
        s = socket.create_connection(("127.0.0.1", port), timeout=600)
        try:
            while True:
                with lock:
                    raw = next(todo, None)
                if raw is None:
                    return
                s.sendall(raw)
                r = http.client.HTTPResponse(s)
                r.begin()
                r.read()
                if r.status != 200:
                    bad.append(r.status)
                if r.will_close:
                    s.close()
                    s = socket.create_connection(("127.0.0.1", port), timeout=600)
        except (OSError, http.client.HTTPException) as e:
            bad.append(repr(e))
        finally:
            s.close()

    all_done([threading.Thread(target=worker) for _ in range(connections)], bad, len(reqs))


def by_object(path):
    """Events by part (Envoy, module code, libc, other) from a callgrind output file: the event
    names, and per part one count per event (Ir first; with `--cache-sim`, the cache misses)."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True).stdout
    events = ["Ir"]
    parts = {}
    for line in out.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            continue
        m = re.match(r"^\s*((?:[\d,]+ \([^)]*\)\s+)+)(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        counts = [int(x.replace(",", "")) for x in re.findall(r"([\d,]+) \(", m.group(1))]
        obj = re.search(r"\[([^\]]*)\]\s*$", m.group(2))
        obj = obj.group(1) if obj else "?"
        if obj == "???":
            # Code without a file: V8's compiled wasm (high addresses), or Envoy's own code
            # remapped at start (low addresses).
            a = re.search(r"0x([0-9a-f]+)", m.group(2))
            part = "module" if a and int(a.group(1), 16) >= 1 << 32 else "envoy"
        elif obj.endswith("/envoy"):
            part = "envoy"
        elif obj.endswith("libwafer.so"):
            part = "module"
        elif "libc.so" in obj:
            part = "libc"
        else:
            part = "other"
        have = parts.setdefault(part, [0] * len(events))
        for i, n in enumerate(counts[: len(events)]):
            have[i] += n
    return events, parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wasm", required=True, help="wafer.wasm, libwafer.so (the dynamic module), or none for vanilla Envoy")
    ap.add_argument("--config", help="the plugin configuration (JSON file; a JSON string is passed as it is, e.g. to bench/conf/minimal-filter.wat)")
    ap.add_argument("--shape", choices=["get", "get-varied", "get-mixed", "post1k", "realistic"], default="get")
    ap.add_argument("--corpus", help="--shape realistic: the corpus file (default: target/realistic/requests.raw, written when missing)")
    ap.add_argument("-n", type=int, default=1000, help="requests counted")
    ap.add_argument("-c", type=int, default=1, help="connections (requests in flight at once)")
    ap.add_argument("--out", help="keep callgrind's output file here (for callgrind_annotate)")
    ap.add_argument("--cache-sim", nargs="?", const="524288,8,64", metavar="SIZE,ASSOC,LINE",
                    help="also simulate the caches and print the last level's lines missed per request (default 524288,8,64: a 512 KB L2; 1048576,8,64 for a 1 MB one)")
    ap.add_argument("--port-base", type=int, default=int(os.environ.get("PORT_BASE", "29180")))
    a = ap.parse_args()
    env = find_envoy()
    headers = [l.strip() for l in open(os.path.join(PEERS, "headers.txt")) if l.strip()]
    path = open(os.path.join(PEERS, "get-path.txt")).read().strip()
    body = os.path.join(PEERS, "body-1k.json") if a.shape == "post1k" else None
    if body is not None:
        path = path.split("?")[0]
    up_port, port, admin = a.port_base, a.port_base + 1, a.port_base + 2
    tmpl = open(os.path.join(ROOT, "bench", "conf", "envoy.yaml")).read()
    filt = ""
    if a.wasm.endswith(".so"):
        cfg = json.load(open(a.config)) if a.config else {}
        filt = open(os.path.join(ROOT, "bench", "conf", "native-filter.yaml")).read().rstrip("\n")
        filt = filt.replace("@PLUGIN_CONFIG@", json.dumps(cfg if isinstance(cfg, str) else json.dumps(cfg))).replace("@NATIVE@", os.path.abspath(a.wasm))
    elif a.wasm != "none":
        cfg = json.load(open(a.config)) if a.config else {}
        filt = open(os.path.join(ROOT, "bench", "conf", "wasm-filter.yaml")).read().rstrip("\n")
        filt = filt.replace("@PLUGIN_CONFIG@", json.dumps(cfg if isinstance(cfg, str) else json.dumps(cfg))).replace("@WASM@", os.path.abspath(a.wasm))
    conf = tmpl.replace("@PORT@", str(port)).replace("@ADMIN_PORT@", str(admin)).replace("@UPSTREAM_PORT@", str(up_port)).replace("@WASM_FILTER@", filt)
    with tempfile.TemporaryDirectory() as d:
        for name, text in [("up.yaml", UPSTREAM.format(port=up_port, body=json.dumps(BODY))), ("envoy.yaml", conf)]:
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        out = os.path.join(d, "callgrind.out")
        procs = []
        try:
            procs.append(subprocess.Popen([env, "-c", os.path.join(d, "up.yaml"), "--concurrency", "1", "--disable-hot-restart", "-l", "error", "--base-id", str(a.port_base)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            vg = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--smc-check=all-non-file", f"--callgrind-out-file={out}",
                                   *(["--cache-sim=yes", f"--LL={a.cache_sim}"] if a.cache_sim else []),
                                   env, "-c", os.path.join(d, "envoy.yaml"), "--concurrency", "1", "--disable-hot-restart", "-l", "error",
                                   "--base-id", str(a.port_base + 1)], stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "valgrind.log"), "w"))
            procs.append(vg)
            wait_ready(admin, vg, 900)
            url = f"http://127.0.0.1:{port}{path}"
            if a.shape == "get-varied":
                send = lambda n, c=1: load_varied(port, path, n, headers, c)  # noqa: E731
            elif a.shape == "realistic":
                reqs = [raw for _, raw in corpus_requests(a.corpus)]
                if len(reqs) < 50 + a.n:
                    sys.exit(f"the corpus has {len(reqs)} requests, fewer than the 50 of the warm-up and -n {a.n}")
                sent = iter([reqs[:50], reqs[50:50 + a.n]])
                send = lambda n, c=1: load_corpus(port, next(sent), c)  # noqa: E731
            elif a.shape == "get-mixed":
                send = lambda n, c=1: load_varied(port, path, n, headers, c, mixed)  # noqa: E731
            else:
                send = lambda n, c=1: load(url, n, headers, body, c)  # noqa: E731
            send(50)
            subprocess.run(["callgrind_control", "-i", "on", str(vg.pid)], capture_output=True, check=True)
            send(a.n, a.c)
            # Off before Envoy stops: its shutdown (freeing the VMs and the module, in
            # proportion to the module's functions: ~13 M instructions for wafer, ~8 M for
            # vanilla Envoy) is not a request's work, and would add 13 K per request at -n 1000.
            subprocess.run(["callgrind_control", "-i", "off", str(vg.pid)], capture_output=True, check=True)
            vg.send_signal(signal.SIGINT)
            vg.wait(timeout=300)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        events, parts = by_object(out)
        if a.out:
            shutil.copyfile(out, a.out)
        if not parts:
            sys.exit("no counts: " + open(os.path.join(d, "valgrind.log")).read()[-800:] + " files: " + " ".join(os.listdir(d)))
    total = sum(v[0] for v in parts.values())
    line = "  ".join(f"{k} {v[0] / a.n / 1000:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1][0]))
    print(f"{a.wasm} {a.config or ''} {a.shape} -c {a.c}: {total / a.n / 1000:.1f} K instructions per request ({line})")
    if a.cache_sim:
        # Last-level misses: code (ILmr), data reads (DLmr), data writes (DLmw); per part.
        for ev in ("ILmr", "DLmr", "DLmw"):
            if ev in events:
                i = events.index(ev)
                per = "  ".join(f"{k} {v[i] / a.n:,.0f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1][i]))
                print(f"  {ev} {sum(v[i] for v in parts.values()) / a.n:,.0f} lines per request ({per})")


if __name__ == "__main__":
    main()
