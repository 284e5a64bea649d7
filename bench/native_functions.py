#!/usr/bin/env python3
"""Instructions per request in each function of the native engine, for the benchmark's GET:

    python3 bench/native_functions.py CONFIG.json [--top 40] [--n 2000] [--bin target/release/wafer]
    python3 bench/native_functions.py CONFIG.json --corpus target/realistic/requests.raw   # realistic traffic

Runs `wafer time CONFIG N GET <PEERS_DIR's path and headers> --request-id --response <a 180-byte
page>` (`--vary`: `--vary` instead of `--request-id`, new query and cookie values in every request;
`--corpus FILE`: `wafer time CONFIG N --corpus FILE --response <the page>`, the requests of
bench/realistic.py's corpus in turn, all different; `python3 bench/realistic.py` writes it) under valgrind's callgrind twice, with N and 2N requests, and prints each function's own
instructions (not its callees') of the difference divided by N: what one more request costs,
without the rule set's compilation and the process's start. The CLI's own per-request work
(`run_req_with`, `respond`, `time_eval`, formatting the request id) is in the list too; and
inlining decides which function owns which code, as in any profile. Needs valgrind
(`make bench-tools`) and `cargo build --release -p wafer-cli`; ~1 min for a small rule set,
a few for the CRS (use `--n 500`).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.environ.get("PEERS_DIR", os.path.join(ROOT, "..", "shared", "peers"))
PAGE = b"<!doctype html><html><head><title>waf-bench origin</title></head><body><p>ok: static 180-byte response body from the nginx benchmark origin......................</p></body></html>"
LINE = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:\S+:)?(.*?)(?: \[.*\])?$")


def own_costs(out_file):
    """Function -> own instructions, from callgrind_annotate's per-function table."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", out_file], capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m and "PROGRAM TOTALS" not in m.group(2):
            name = re.sub(r"::h[0-9a-f]{16}", "", m.group(2))
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("--n", type=int, default=2000, help="requests of the first run (the second runs twice as many)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "wafer"))
    ap.add_argument("--vary", action="store_true", help="every request's query and cookie values new (make bench's GET, new values)")
    ap.add_argument("--corpus", help="a corpus file of bench/realistic.py (e.g. target/realistic/requests.raw): its requests in turn")
    a = ap.parse_args()
    if a.n < 1:
        sys.exit("--n must be at least 1")
    headers = [l.strip() for l in open(os.path.join(PEERS, "headers.txt")) if l.strip()]
    path = open(os.path.join(PEERS, "get-path.txt")).read().strip()
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.html")
        with open(page, "wb") as f:
            f.write(PAGE)
        runs = []
        for n in (a.n, 2 * a.n):
            out = os.path.join(d, f"callgrind.{n}")
            if a.corpus:
                what = ["--corpus", a.corpus, "--response", page]
            else:
                what = ["GET", path, *headers, "--vary" if a.vary else "--request-id", "--response", page]
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", a.bin, "time", a.config, str(n), *what]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"wafer time failed ({r.returncode}):\n{r.stderr[-2000:]}")
            runs.append(own_costs(out))
    first, second = runs
    per = {k: (v - first.get(k, 0)) / a.n for k, v in second.items()}
    total = sum(per.values())
    print(f"{a.config}: {total / 1000:.1f} K instructions per request (natively, CLI included)")
    for name, v in sorted(per.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{v:9.0f}  {name[:150]}")


if __name__ == "__main__":
    main()
