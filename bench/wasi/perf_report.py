#!/usr/bin/env python3
"""Names the wasm functions of a `perf record` of bench/wasi/requests.mjs (node --perf-basic-prof):
    python3 bench/wasi/perf_report.py perf.data MODULE.wasm.symbols [N]
MODULE.wasm.symbols is wasm-opt's --symbolmap of the profiled module (index:name, imports
included, as V8's wasm-function[index]). Prints the share of samples in the module's code, in
V8's compiler (the module's compile at start) and elsewhere, then the N hottest symbols
(demangled with rustfilt when installed)."""
import sys,subprocess,re,collections
data,symf=sys.argv[1],sys.argv[2]
syms={}
for line in open(symf):
    k,_,v=line.rstrip("\n").partition(":"); syms[int(k)]=v
out=subprocess.run(["perf","report","-i",data,"--sort","sym","--stdio","-g","none"],capture_output=True,text=True).stdout
rows=[]
for line in out.splitlines():
    m=re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*)",line)
    if not m: continue
    pct,sym=float(m.group(1)),m.group(2).strip()
    w=re.match(r"JS:wasm-function\[(\d+)\]",sym)
    if w: sym="W "+syms.get(int(w.group(1)),"?")
    rows.append((pct,sym))
names=[s for _,s in rows]
try:
    dem=subprocess.run(["rustfilt"],input="\n".join(names),capture_output=True,text=True).stdout.split("\n")
except FileNotFoundError:
    dem=names
tot=collections.Counter()
for (p,s),d in zip(rows,dem):
    cat="wasm" if s.startswith("W ") else ("v8compile" if "compiler::" in s or "Zone" in s else "other")
    tot[cat]+=p
print(dict(tot))
n=int(sys.argv[3]) if len(sys.argv)>3 else 40
for (p,s),d in list(zip(rows,dem))[:n]: print(f"{p:6.2f} {d[:150]}")
