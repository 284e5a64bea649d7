#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from the OWASP CRS regression suite and wafer's rules.

    fuzz/seed.py WAFER_BIN CRS_DIR OUT_DIR

`WAFER_BIN crs-requests` turns every CRS test stage into a raw HTTP request; from those:
transaction and header_blocks (the raw request), replay_pairs (a request and the next one,
or the same with every query value changed, separated by two NUL bytes), urlencoded (query strings and form bodies), json, xml,
multipart (Content-Type line + body), libinjection and transforms (decoded argument values),
seclang (each directive of the CRS rule files and wafer's rules/*.conf). Writes one file per
distinct input under OUT_DIR/<target>/ (generated, git-ignored: target/fuzz-corpus).
"""
import base64, glob, hashlib, json, os, subprocess, sys, urllib.parse

wafer, crs, out = sys.argv[1:4]
seen = {}


def put(target, data):
    if not data or len(data) > 64 * 1024:
        return
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    path = os.path.join(d, name)
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
        seen[target] = seen.get(target, 0) + 1


def args_of(qs):
    try:
        return [v.encode("utf-8", "surrogateescape") for _, v in
                urllib.parse.parse_qsl(qs.decode("latin-1"), keep_blank_values=True)]
    except ValueError:
        return []


env = dict(os.environ, CRS_DIR=crs)
lines = subprocess.run([wafer, "crs-requests"], env=env, check=True,
                       capture_output=True).stdout.decode().splitlines()
def vary(raw, n):
    """`raw` with `n` appended to every value of its query string."""
    first, sep, rest = raw.partition(b"\r\n")
    parts = first.split(b" ")
    if len(parts) < 2 or b"?" not in parts[1]:
        return raw
    path, _, qs = parts[1].partition(b"?")
    pairs = [p + (b"" if b"=" in p else b"=") + n for p in qs.split(b"&")]
    parts[1] = path + b"?" + b"&".join(pairs)
    return b" ".join(parts) + sep + rest


last = b""
for i, line in enumerate(lines):
    raw = base64.b64decode(json.loads(line)["raw"])
    put("transaction", raw)
    put("header_blocks", raw)
    put("replay_pairs", last + b"\0\0" + raw)
    put("replay_pairs", raw + b"\0\0" + vary(raw, str(i).encode()))
    last = raw
    head, _, body = raw.partition(b"\r\n\r\n")
    first, *hdrs = head.split(b"\r\n")
    ct = b""
    for h in hdrs:
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-type":
            ct = v.strip()
    parts = first.split(b" ")
    uri = parts[1] if len(parts) > 1 else b""
    qs = uri.partition(b"?")[2]
    values = args_of(qs)
    if qs:
        put("urlencoded", bytes([i % 64]) + qs)
    low = ct.lower()
    if b"json" in low:
        put("json", bytes([0x8f]) + body)
    elif b"xml" in low:
        put("xml", body)
    elif b"multipart" in low:
        put("multipart", ct + b"\n" + body)
    elif body:
        put("urlencoded", bytes([0x7f]) + body)
        values += args_of(body)
    for v in values:
        put("libinjection", v)
        put("transforms", bytes([i % 37, (i * 7) % 37, 0x80]) + v)

for conf in sorted(glob.glob(os.path.join(crs, "rules", "*.conf")) + glob.glob("rules/*.conf")):
    text = open(conf, encoding="utf-8", errors="replace").read().replace("\\\n", " ")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            put("seclang", line.encode())
for cfg in glob.glob("envoy-wasm/examples/**/*.json", recursive=True) + glob.glob("testdata/**/*.json", recursive=True):
    put("seclang", open(cfg, "rb").read())
put("seclang", b'{"crs":{"paranoia_level":2,"exclusions":[{"rule_ids":[942100],"path_prefix":"/api"}]}}')

print(", ".join(f"{k}: {v}" for k, v in sorted(seen.items())), "new seed files in", out)
