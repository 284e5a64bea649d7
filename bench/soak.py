#!/usr/bin/env python3
"""Soak test: SOAK_SECONDS of mixed benign and attack traffic at SOAK_RPS through
Envoy + wafer + the full OWASP CRS (PL1, blocking), python3 stdlib only (`make soak`).

Passes (exit 0) when
  - every benign request got the upstream's 200 (and its body),
  - every attack got 403 and never reached the upstream,
  - Envoy's RSS after the warm-up (the first SOAK_WARMUP seconds) never rose more than
    SOAK_RSS_MIB above its value at the end of the warm-up,
  - wafer's Envoy counters counted every request (the VM never restarted).

    ENVOY=.venv/bin/envoy WASM=target/wafer.wasm bench/soak.py
Environment: SOAK_SECONDS (600), SOAK_RPS (100), SOAK_WARMUP (60), SOAK_RSS_MIB (48),
SOAK_WORKERS (16). Prints a summary and writes target/soak-<UTC time>.json.
"""
import http.client
import http.server
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
RPS = float(os.environ.get("SOAK_RPS", "100"))
WARMUP = float(os.environ.get("SOAK_WARMUP", "60"))
RSS_MIB = float(os.environ.get("SOAK_RSS_MIB", "48"))
WORKERS = int(os.environ.get("SOAK_WORKERS", "16"))
ENVOY = os.environ.get("ENVOY", ".venv/bin/envoy")
WASM = os.path.abspath(os.environ.get("WASM", "target/wafer.wasm"))
UPSTREAM_BODY = b"soak upstream ok\n"

# ------------------------------------------------------------------------------------------
# Traffic: (kind, method, path, headers, body)
# ------------------------------------------------------------------------------------------
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MP = {"Content-Type": "multipart/form-data; boundary=soakboundary"}


def multipart(name, value, filename=None):
    disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return (f"--soakboundary\r\nContent-Disposition: {disp}\r\n\r\n{value}\r\n"
            f"--soakboundary--\r\n").encode()


ORDER = json.dumps({"customer": {"id": 4711, "name": "Alice Example", "email": "alice@example.com"},
                    "items": [{"sku": f"SKU-{i:04d}", "qty": i % 5 + 1, "price": 9.99 + i} for i in range(12)],
                    "note": "Please deliver after 6pm, ring twice."}).encode()

BENIGN = [
    ("GET", "/", {}, b""),
    ("GET", "/products?category=books&page=3&sort=price", {}, b""),
    ("GET", "/search?q=how+to+bake+bread&lang=en", {"Cookie": "session=abc123; theme=dark"}, b""),
    ("GET", "/static/app.js?v=1.2.3", {"Accept": "application/javascript"}, b""),
    ("POST", "/api/v1/orders", JSON, ORDER),
    ("POST", "/login", FORM, b"username=alice&password=correct+horse+battery+staple&remember=1"),
    ("POST", "/upload", MP, multipart("file", "hello, world\n" * 20, "notes.txt")),
    ("POST", "/api/v1/profile", JSON, b'{"display_name": "Alice", "bio": "I like cats and long walks."}'),
]
ATTACKS = [
    ("GET", "/search?q=1%27%20OR%20%271%27%3D%271", {}, b""),
    ("GET", "/search?q=%3Cscript%3Ealert(document.cookie)%3C%2Fscript%3E", {}, b""),
    ("GET", "/download?file=..%2F..%2F..%2Fetc%2Fpasswd", {}, b""),
    ("GET", "/ping?host=127.0.0.1%3Bcat%20%2Fetc%2Fpasswd", {}, b""),
    ("GET", "/", {"User-Agent": "sqlmap/1.7.2#stable (https://sqlmap.org)"}, b""),
    ("POST", "/api/v1/orders", JSON, b'{"note": "1 UNION SELECT username, password FROM users--"}'),
    ("POST", "/login", FORM, b"username=admin%27--&password=x"),
    ("POST", "/upload", MP, multipart("comment", "<img src=x onerror=alert(1)>")),
]


# ------------------------------------------------------------------------------------------
# Upstream: counts what reaches it; answers 200 with a fixed body.
# ------------------------------------------------------------------------------------------
class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle + delayed ACKs add
    # 40 ms to each response.
    disable_nagle_algorithm = True
    seen_attack = 0
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def handle_any(self):
        # Envoy forwards the request headers before wafer has seen the body; a phase-2 block
        # then resets the upstream request, so only a complete body counts as "reached".
        n = int(self.headers.get("Content-Length") or 0)
        try:
            got = len(self.rfile.read(n)) if n else 0
        except OSError:
            return
        if got < n:
            return
        if self.headers.get("x-soak-kind") == "attack":
            with Upstream.lock:
                Upstream.seen_attack += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(UPSTREAM_BODY)))
        self.end_headers()
        self.wfile.write(UPSTREAM_BODY)

    do_GET = do_POST = handle_any


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def envoy_yaml(admin, listen, upstream):
    config = json.dumps({"crs": {"paranoia_level": 1}})
    return f"""admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {listen} }} }}
    per_connection_buffer_limit_bytes: 16777216
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route: {{ cluster: upstream, timeout: 20s }}
          http_filters:
          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: wafer
                root_id: wafer
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: {json.dumps(config)}
                vm_config:
                  vm_id: wafer
                  runtime: envoy.wasm.runtime.v8
                  code: {{ local: {{ filename: {json.dumps(WASM)} }} }}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: upstream
    connect_timeout: 2s
    type: STATIC
    per_connection_buffer_limit_bytes: 16777216
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint:
            address: {{ socket_address: {{ address: 127.0.0.1, port_value: {upstream} }} }}
"""


def admin_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    c.close()
    return r.status, body


def counters(admin):
    _, text = admin_get(admin, "/stats?filter=wasmcustom")
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    tmp = tempfile.mkdtemp(prefix="wafer-soak-")
    up_port, admin, listen = free_port(), free_port(), free_port()
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", up_port), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    with open(os.path.join(tmp, "envoy.yaml"), "w") as f:
        f.write(envoy_yaml(admin, listen, up_port))
    log = open(os.path.join(tmp, "envoy.log"), "wb")
    envoy = subprocess.Popen([ENVOY, "-c", os.path.join(tmp, "envoy.yaml"), "--concurrency", "1",
                              "--disable-hot-restart", "-l", "warning", "--component-log-level", "wasm:error"],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(*_):
        if envoy.poll() is None:
            envoy.terminate()
            try:
                envoy.wait(10)
            except subprocess.TimeoutExpired:
                envoy.kill()
    signal.signal(signal.SIGTERM, lambda *a: (stop(), sys.exit(2)))
    try:
        deadline = time.time() + 60
        while True:
            try:
                if admin_get(admin, "/ready")[1].strip() == "LIVE":
                    break
            except OSError:
                pass
            if envoy.poll() is not None or time.time() > deadline:
                print(open(os.path.join(tmp, "envoy.log")).read()[-3000:])
                print("FAIL: Envoy did not become ready")
                return 1
            time.sleep(0.1)
        code = run(envoy, admin, listen, tmp)
        if code == 0:
            stop()
            shutil.rmtree(tmp, ignore_errors=True)
        return code
    finally:
        stop()
        upstream.shutdown()


def run(envoy, admin, listen, tmp):
    rng = random.Random(42)
    jobs = queue.Queue(maxsize=WORKERS * 4)
    lock = threading.Lock()
    stats = {"benign": 0, "attack": 0, "benign_failed": 0, "attack_passed": 0, "late": 0}
    failures = []
    latencies = []

    def worker():
        conn = None
        while True:
            job = jobs.get()
            if job is None:
                return
            kind, (method, path, headers, body) = job
            hdrs = dict(headers, **{"x-soak-kind": kind, "Host": "shop.example.com"})
            if body:
                hdrs["Content-Length"] = str(len(body))
            t0 = time.monotonic()
            status, text = 0, b""
            for attempt in range(2):  # a keep-alive connection closed by the peer: retry once
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=10)
                    conn.request(method, path, body=body or None, headers=hdrs)
                    r = conn.getresponse()
                    status, text = r.status, r.read()
                    if r.getheader("connection", "").lower() == "close":
                        conn.close()
                        conn = None
                    break
                except (OSError, http.client.HTTPException) as e:
                    if conn is not None:
                        conn.close()
                    conn = None
                    text = str(e).encode()
            dt = time.monotonic() - t0
            with lock:
                latencies.append(dt)
                stats[kind] += 1
                if kind == "benign" and (status != 200 or text != UPSTREAM_BODY):
                    stats["benign_failed"] += 1
                    failures.append(f"benign {method} {path}: {status} {text[:80]!r}")
                if kind == "attack" and status != 403:
                    stats["attack_passed"] += 1
                    failures.append(f"attack {method} {path}: {status}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    before = counters(admin)
    rss = []  # (seconds since start, KiB)
    start = time.monotonic()
    next_rss = 0.0
    sent = 0
    while True:
        now = time.monotonic() - start
        if now >= SECONDS:
            break
        if now >= next_rss:
            rss.append((round(now, 1), rss_kib(envoy.pid)))
            next_rss += 5.0
        due = int(now * RPS) + 1
        while sent < due:
            kind = "attack" if rng.random() < 0.3 else "benign"
            req = rng.choice(ATTACKS if kind == "attack" else BENIGN)
            try:
                jobs.put((kind, req), timeout=1.0)
            except queue.Full:
                with lock:
                    stats["late"] += 1
                continue
            sent += 1
        time.sleep(max(0.0, (sent / RPS) - (time.monotonic() - start)))
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join(30)
    rss.append((round(time.monotonic() - start, 1), rss_kib(envoy.pid)))
    time.sleep(1.0)
    after = counters(admin)
    tx_key = next((k for k in after if k.endswith("wafer.transactions")), None)
    int_key = next((k for k in after if k.endswith("wafer.interruptions")), None)
    counted = after.get(tx_key, 0) - before.get(tx_key, 0)
    interrupted = after.get(int_key, 0) - before.get(int_key, 0)

    warm = [k for t, k in rss if t <= WARMUP]
    base = warm[-1] if warm else rss[0][1]
    after_warm = [k for t, k in rss if t > WARMUP]
    peak = max(after_warm) if after_warm else base
    grew_mib = (peak - base) / 1024
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0
    total = stats["benign"] + stats["attack"]
    result = {
        "seconds": SECONDS, "rps_target": RPS, "rps_achieved": round(total / max(SECONDS, 1e-9), 1),
        "requests": total, "benign": stats["benign"], "attacks": stats["attack"],
        "benign_failed": stats["benign_failed"], "attacks_not_blocked": stats["attack_passed"],
        "attacks_reaching_upstream": Upstream.seen_attack, "scheduler_late": stats["late"],
        "wafer_transactions_counted": counted, "wafer_interruptions_counted": interrupted,
        "envoy_rss_mib": {"start": round(rss[0][1] / 1024, 1), "after_warmup": round(base / 1024, 1),
                          "peak_after_warmup": round(peak / 1024, 1), "end": round(rss[-1][1] / 1024, 1),
                          "growth_after_warmup": round(grew_mib, 1), "bound": RSS_MIB},
        "latency_ms": {"p50": round(p(0.5), 2), "p99": round(p(0.99), 2), "max": round(p(1.0), 2)},
        "rss_samples": rss,
        "first_failures": failures[:20],
    }
    problems = []
    if stats["benign_failed"]:
        problems.append(f"{stats['benign_failed']} benign requests failed")
    if stats["attack_passed"] or Upstream.seen_attack:
        problems.append(f"{stats['attack_passed']} attacks not blocked, {Upstream.seen_attack} reached the upstream")
    if grew_mib > RSS_MIB:
        problems.append(f"Envoy RSS grew {grew_mib:.1f} MiB after the warm-up (bound {RSS_MIB})")
    if counted != total:
        problems.append(f"wafer counted {counted} transactions for {total} requests")
    if interrupted != stats["attack"]:
        problems.append(f"wafer counted {interrupted} interruptions for {stats['attack']} attacks")
    if envoy.poll() is not None:
        problems.append("Envoy exited")
    if stats["late"]:
        problems.append(f"{stats['late']} requests not sent on time (load generator saturated)")
    result["problems"] = problems
    os.makedirs("target", exist_ok=True)
    out = time.strftime("target/soak-%Y%m%dT%H%M%SZ.json", time.gmtime())
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    summary = {k: v for k, v in result.items() if k not in ("rss_samples", "first_failures")}
    print(json.dumps(summary, indent=1))
    print(f"details: {out}; Envoy log: {tmp}/envoy.log")
    if problems:
        for pr in problems:
            print("FAIL:", pr)
        for f in failures[:10]:
            print("  ", f)
        return 1
    print(f"PASS: {total} requests in {SECONDS:.0f} s, every benign 200, every attack 403, "
          f"RSS +{grew_mib:.1f} MiB after warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
