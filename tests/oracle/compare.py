#!/usr/bin/env python3
"""Differential test: wafer against ModSecurity v3 (libmodsecurity) on the CRS.

Runs the same corpus (the CRS regression suite's requests plus generated
variants, see corpus.py) through `wafer ids CONFIG` and through modsec_ids.py
with the same configuration (the CRS test setup), and compares, per request,
the sets of rule ids each engine logged.

A disagreement is one (request, rule id, side) where side is "wafer-only" or
"modsec-only". It is *known* when an entry of known_differences.yaml matches it
(rule id, side, optional request-id / raw-request regexes) and, if the entry
has `emulate:` SecLang, ModSecurity re-run with that SecLang (loaded before
the CRS) logs the rule exactly as wafer did, and if it has `wafer_transform:`,
wafer run on the request rewritten the way ModSecurity sees it logs the rule
exactly as ModSecurity did -- both prove the stated cause.
`derived: true` entries (anomaly-score rules) are known only when another
disagreement of the same request is known.

A request passes when its ids agree or every disagreement is known; it fails
otherwise. Exit status 1 when any request fails. The last line of output is
`N passed, N failed`.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpus  # noqa: E402
import modsec_ids  # noqa: E402

REPO = modsec_ids.REPO


# -- request predicates for `when:` in known_differences.yaml ----------------

def _req(raw):
    return modsec_ids.parse(raw)


def _content_type(req):
    for k, v in req[3]:
        if k.lower() == b"content-type":
            return v
    return b""


def _multipart_parts(req):
    """[(header lines, value)] of a multipart/form-data body (roughly as ModSecurity splits it)."""
    ct = _content_type(req)
    m = re.search(rb"boundary=\"?([^\";,]+)", ct)
    if not ct.lower().startswith(b"multipart/form-data") or not m or not req[4]:
        return []
    delim = b"--" + m.group(1)
    parts = []
    for chunk in req[4].split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk[1:] if chunk.startswith(b"\n") else chunk
        sep = re.search(rb"\r?\n\r?\n", chunk)
        if not sep:
            continue
        heads, value = chunk[:sep.start()], chunk[sep.end():]
        value = value[:-2] if value.endswith(b"\r\n") else value[:-1] if value.endswith(b"\n") else value
        parts.append((re.split(rb"\r?\n", heads), value))
    return parts


def _json_leaves(v):
    if isinstance(v, dict):
        return sum(_json_leaves(x) for x in v.values())
    if isinstance(v, list):
        return sum(_json_leaves(x) for x in v)
    return 1


def _json_args(req):
    """Arguments ModSecurity would make of a JSON request (query args + JSON leaves), or 0."""
    if not re.match(rb"(?i)\s*application/json", _content_type(req)):
        return 0
    try:
        leaves = _json_leaves(json.loads(req[4]))
    except ValueError:
        return 0
    q = req[1].split("?", 1)[1] if "?" in req[1] else ""
    return leaves + len([a for a in q.split("&") if a])


V3_INSPECTED = {"text/plain", "text/html", "text/xml", "application/json"}  # TEST_SETUP's SecResponseBodyMimeType


def _v3_skips_response_body(req):
    """ModSecurity v3 runs phase 4 only if the response's Content-Type up to ';' (as sent,
    case-sensitive) is one of SecResponseBodyMimeType (Transaction::processResponseBody)."""
    _, headers, _ = modsec_ids.reflect(req[0], req[1], req[4])
    ct = next((v for k, v in headers if k.lower() == "content-type"), None)
    return ct is not None and ct.split(";")[0] not in V3_INSPECTED


PREDICATES = {
    # The request line's protocol is not "HTTP/x" (ModSecurity's API always
    # prefixes "HTTP/" to the version it is given).
    "protocol_not_http": lambda r: not r[2].startswith("HTTP/"),
    # The request target carries a "#fragment".
    "uri_fragment": lambda r: "#" in r[1],
    "multipart": lambda r: _content_type(r).lower().startswith(b"multipart/form-data") and bool(r[4]),
    # Some multipart field value spans several lines.
    "multipart_multiline_value": lambda r: any(b"\n" in v or b"\r" in v for _, v in _multipart_parts(r)),
    # The (albedo /reflect) response has a Content-Type ModSecurity v3 does not inspect.
    "response_body_skipped_by_v3": _v3_skips_response_body,
    # A JSON body with more arguments than SecArgumentsLimit (1000).
    "json_over_args_limit": lambda r: _json_args(r) > 1000,
    # Content-Type application/<x>+json (not application/json...).
    "json_suffix_type": lambda r: bool(re.match(rb"(?i)\s*application/(?!json)[^;\s]*\+json", _content_type(r))),
}


# -- wafer-side emulations (`wafer_transform:`): rewrite a request so that
# wafer sees what ModSecurity v3 sees; wafer on the rewritten request must then
# log the rule exactly as ModSecurity did on the original.

def _rewrite_multipart(raw, f):
    """raw with each multipart part (header lines, value) replaced by f(header lines, value)."""
    req = corpus.Req.from_raw(raw)
    m = re.search(rb"boundary=\"?([^\";,]+)", req.header(b"content-type") or b"")
    if m is None:
        return raw
    delim = b"--" + m.group(1)
    segs = req.body.split(delim)
    for i in range(1, len(segs)):
        seg = segs[i]
        if seg.startswith(b"--"):
            break
        lead = b"\r\n" if seg.startswith(b"\r\n") else b"\n" if seg.startswith(b"\n") else b""
        sep = re.search(rb"\r?\n\r?\n", seg[len(lead):])
        if not sep:
            continue
        heads = seg[len(lead):len(lead) + sep.start()]
        rest = seg[len(lead) + sep.end():]
        tail = b"\r\n" if rest.endswith(b"\r\n") else b"\n" if rest.endswith(b"\n") else b""
        value = rest[:len(rest) - len(tail)]
        lines, value = f(re.split(rb"(?<=\n)", heads), value)
        segs[i] = lead + b"".join(lines) + seg[len(lead) + sep.start():len(lead) + sep.end()] + value + tail
    req.body = delim.join(segs)
    req.chunked = False
    return req.raw()


TRANSFORMS = {
    # v3 loses every line ending inside a multipart field value.
    "multipart_join_lines": lambda raw: _rewrite_multipart(raw, lambda h, v: (h, re.sub(rb"\r?\n", b"", v))),
}


def load_known(path):
    if path.endswith(".json"):
        entries = json.load(open(path))
    else:
        import yaml
        entries = yaml.safe_load(open(path))
    out = []
    for i, e in enumerate(entries or []):
        ids = e["rule_id"] if isinstance(e["rule_id"], list) else [e["rule_id"]]
        anyrule = ids == ["*"]
        side = e.get("side", "any")
        if side not in ("wafer-only", "modsec-only", "any"):
            sys.exit(f"{path}: entry {i}: side must be wafer-only, modsec-only or any")
        reason = (e.get("reason") or "").strip()
        if len(reason) < 20:
            sys.exit(f"{path}: entry {i} (rule {ids}): a real reason is required")
        out.append({
            "n": i,
            "ids": None if anyrule else {int(x) for x in ids},
            "side": side,
            "request": re.compile(e["request"]) if e.get("request") else None,
            "raw": re.compile(e["raw"].encode("latin-1"), re.S) if e.get("raw") else None,
            "when": _when(e.get("when"), path, i),
            "derived": bool(e.get("derived")),
            "scoring": e.get("scoring", True),
            "everywhere": bool(e.get("everywhere")),
            "emulate": (e.get("emulate") or "").strip(),
            "transform": _transform(e.get("wafer_transform"), path, i),
            "reason": reason,
            "bug": reason.startswith("BUG"),
            "used": 0,
        })
    return out


def _transform(name, path, i):
    if name and name not in TRANSFORMS:
        sys.exit(f"{path}: entry {i}: unknown wafer_transform {name!r} (known: {', '.join(TRANSFORMS)})")
    return name


def _when(w, path, i):
    names = [w] if isinstance(w, str) else (w or [])
    for n in names:
        if n not in PREDICATES:
            sys.exit(f"{path}: entry {i}: unknown predicate {n!r} (known: {', '.join(PREDICATES)})")
    return [PREDICATES[n] for n in names]


def matching(known, rid, raw, rule, side):
    req = None
    out = []
    for k in known:
        if (k["ids"] is not None and rule not in k["ids"]) or k["side"] not in (side, "any"):
            continue
        if k["request"] is not None and not k["request"].search(rid):
            continue
        if k["raw"] is not None and not k["raw"].search(raw):
            continue
        if k["when"]:
            req = req or _req(raw)
            if req is None or not all(f(req) for f in k["when"]):
                continue
        out.append(k)
    return out


def run_wafer(wafer, config, jsonl):
    p = subprocess.run([wafer, "ids", config], input=jsonl.encode(), capture_output=True, check=False)
    if p.returncode != 0:
        sys.exit(f"wafer ids failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    return {v["id"]: v for v in map(json.loads, p.stdout.decode().splitlines())}


def start_modsec(config, jsonl, crs, before_crs=""):
    """Starts modsec_ids.py on jsonl; returns (process, input file)."""
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    f.write(jsonl)
    f.close()
    cmd = [sys.executable, os.path.join(HERE, "modsec_ids.py"), config, "--crs", crs]
    if before_crs:
        cmd += ["--before-crs", before_crs]
    err = tempfile.TemporaryFile()
    with open(f.name) as stdin:
        p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=err)
    return p, f.name, err


def finish_modsec(handle):
    p, name, err = handle
    out = p.stdout.read()
    rc = p.wait()
    os.unlink(name)
    if rc != 0:
        err.seek(0)
        # (libxml2 writes its parse errors there too: keep the last lines)
        tail = err.read().decode(errors="replace").splitlines()[-5:]
        sys.exit(f"modsec_ids.py failed ({rc}):\n" + "\n".join(tail))
    err.close()
    return {v["id"]: v for v in map(json.loads, out.decode().splitlines())}


def run_modsec(config, reqs, crs, jobs, before_crs=""):
    shards = [reqs[i::jobs] for i in range(jobs)] if len(reqs) >= 200 * jobs else [reqs]
    handles = [start_modsec(config, corpus.to_jsonl(s), crs, before_crs) for s in shards if s]
    res = {}
    for h in handles:
        res.update(finish_modsec(h))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wafer", default=os.environ.get("WAFER_BIN", os.path.join(REPO, "target/release/wafer")))
    ap.add_argument("--crs", default=os.environ.get("CRS_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "coreruleset")))
    ap.add_argument("--known", default=os.path.join(HERE, "known_differences.yaml"))
    ap.add_argument("--variants", type=int, default=int(os.environ.get("ORACLE_VARIANTS", "5000")),
                    help="number of generated variants (0: the suite only)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("ORACLE_JOBS", "2")),
                    help="parallel ModSecurity processes")
    ap.add_argument("--filter", help="only requests whose id matches this regex")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--save", help="directory to write the corpus and both engines' results to")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every unexplained disagreement")
    args = ap.parse_args()

    t0 = time.time()
    known = load_known(args.known)
    config = os.path.join(tempfile.gettempdir(), f"wafer-oracle-config-{os.getpid()}.json")
    json.dump(modsec_ids.test_setup_config(), open(config, "w"))

    suite = corpus.suite_requests(args.wafer, args.crs)
    reqs = suite + (corpus.variants(suite, args.variants, args.seed) if args.variants > 0 else [])
    if args.filter:
        rx = re.compile(args.filter)
        reqs = [r for r in reqs if rx.search(r[0])]
    raw_of = dict(reqs)
    jsonl = corpus.to_jsonl(reqs)

    # ModSecurity (slow) in the background while wafer runs.
    shards = [reqs[i::args.jobs] for i in range(args.jobs)] if args.jobs > 1 else [reqs]
    handles = [start_modsec(config, corpus.to_jsonl(s), args.crs) for s in shards if s]
    w = run_wafer(args.wafer, config, jsonl)
    m = {}
    for h in handles:
        m.update(finish_modsec(h))
    t_run = time.time() - t0

    missing = [rid for rid, _ in reqs if rid not in w or rid not in m]
    if missing:
        sys.exit(f"no result for {len(missing)} requests, e.g. {missing[:5]}")

    # Disagreements, and the known entries that could explain them.
    diffs = {}  # rid -> [(rule, side, [entries])]
    status_diff = [rid for rid, _ in reqs if w[rid].get("status") != m[rid].get("status")]
    everywhere = set()
    for k in known:
        if k["everywhere"] and k["ids"]:
            everywhere |= k["ids"]
    n_agree_ev = sum(1 for rid, _ in reqs if set(w[rid]["ids"]) - everywhere == set(m[rid]["ids"]) - everywhere)
    for rid, _ in reqs:
        a, b = set(w[rid]["ids"]), set(m[rid]["ids"])
        if a == b:
            continue
        d = [(r, "wafer-only") for r in sorted(a - b)] + [(r, "modsec-only") for r in sorted(b - a)]
        diffs[rid] = [(r, s, matching(known, rid, raw_of[rid], r, s)) for r, s in d]

    # Re-run ModSecurity with the emulations the matching entries carry.
    groups = collections.defaultdict(list)  # emulation text -> [rid]
    for rid, d in diffs.items():
        emu = sorted({k["emulate"] for _, _, ks in d for k in ks if k["emulate"]})
        if emu:
            groups["\n".join(emu)].append(rid)
    emulated = {}
    for text, rids in groups.items():
        res = run_modsec(config, [(r, raw_of[r]) for r in rids], args.crs, args.jobs, text)
        for r in rids:
            emulated[r] = set(res[r]["ids"])

    # Re-run wafer on rewritten requests for entries with a wafer_transform.
    transformed = collections.defaultdict(dict)  # rid -> transform -> ids
    todo = collections.defaultdict(list)
    for rid, d in diffs.items():
        for name in {k["transform"] for _, _, ks in d for k in ks if k["transform"]}:
            todo[name].append(rid)
    for name, rids in todo.items():
        res = run_wafer(args.wafer, config, corpus.to_jsonl([(r, TRANSFORMS[name](raw_of[r])) for r in rids]))
        for r in rids:
            transformed[r][name] = set(res[r]["ids"])
    os.unlink(config)

    # Classification.
    per_rule = collections.defaultdict(lambda: {"wafer-only": [], "modsec-only": [], "known": 0})
    unexplained = []  # (rid, rule, side)
    n_agree = n_known = 0
    for rid, _ in reqs:
        if rid not in diffs:
            n_agree += 1
            continue
        d = diffs[rid]
        wids = set(w[rid]["ids"])
        ok = {}
        for rule, side, ks in d:
            good = None
            for k in ks:
                if k["derived"]:
                    continue
                if k["emulate"] and (rule in emulated.get(rid, set())) != (rule in wids):
                    continue
                if k["transform"] and (rule in transformed[rid].get(k["transform"], set())) != (rule in m[rid]["ids"]):
                    continue
                good = k
                break
            ok[(rule, side)] = good
        for rule, side, ks in d:
            if ok[(rule, side)] is None:
                derived = [k for k in ks if k["derived"]]
                others = any(v is not None and v["scoring"] and not v["derived"]
                             for (r2, s2), v in ok.items() if (r2, s2) != (rule, side))
                emu_ok = rid in emulated and (rule in emulated[rid]) == (rule in wids)
                if derived and (others or emu_ok):
                    ok[(rule, side)] = derived[0]
        failed = False
        for rule, side, _ in d:
            e = ok[(rule, side)]
            per_rule[rule][side].append(rid)
            if e is None:
                unexplained.append((rid, rule, side))
                failed = True
            else:
                e["used"] += 1
                per_rule[rule]["known"] += 1
        if not failed:
            n_known += 1
    n = len(reqs)
    n_failed = n - n_agree - n_known
    for rid in status_diff:  # DetectionOnly: both must answer with the backend's status
        if rid not in {u[0] for u in unexplained}:
            n_failed += 1
            n_known -= rid in diffs
            n_agree -= rid not in diffs
        unexplained.append((rid, "status", f"wafer {w[rid].get('status')} / modsec {m[rid].get('status')}"))

    # Report.
    print(f"wafer vs ModSecurity {modsec_ids.libmodsecurity.__version__} on CRS "
          f"({len(suite)} suite requests, {n - len([r for r in reqs if '~' not in r[0]])} variants; "
          f"{time.time() - t0:.0f}s, engines {t_run:.0f}s)")
    ev = ",".join(map(str, sorted(everywhere)))
    print(f"requests: {n}   identical ids: {n_agree} ({100.0 * n_agree / max(n, 1):.2f}%)   "
          f"identical apart from {ev or '-'}: {n_agree_ev} ({100.0 * n_agree_ev / max(n, 1):.2f}%)")
    print(f"passed: {n - n_failed} ({n_known} with known differences only)   failed (unexplained): {n_failed}")
    print()
    print(f"{'rule':>7} {'wafer-only':>10} {'modsec-only':>11} {'known':>6}  examples")
    for rule in sorted(per_rule):
        p = per_rule[rule]
        ex = (p["wafer-only"] + p["modsec-only"])
        unk = [rid for rid, r, _ in unexplained if r == rule]
        shown = (unk or ex)[:args.examples]
        flag = "" if not unk else f"  <- {len(unk)} UNEXPLAINED"
        print(f"{rule:>7} {len(p['wafer-only']):>10} {len(p['modsec-only']):>11} {p['known']:>6}  "
              f"{' '.join(shown)}{flag}")
    print()
    print("known differences used:")
    for k in known:
        tag = "BUG " if k["bug"] else ""
        first = k["reason"].splitlines()[0][:110]
        ids = "*" if k["ids"] is None else ",".join(map(str, sorted(k["ids"])))
        print(f"  {k['used']:>6}  {tag}{ids} {k['side']}: {first}")
    if unexplained:
        print()
        print("UNEXPLAINED disagreements (rule, side, request):")
        shown = unexplained if args.verbose else unexplained[:40]
        for rid, rule, side in shown:
            print(f"  {rule} {side} {rid}")
        if len(shown) < len(unexplained):
            print(f"  ... {len(unexplained) - len(shown)} more (-v lists all)")
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        open(os.path.join(args.save, "corpus.jsonl"), "w").write(jsonl)
        with open(os.path.join(args.save, "wafer.jsonl"), "w") as f:
            for rid, _ in reqs:
                f.write(json.dumps(w[rid]) + "\n")
        with open(os.path.join(args.save, "modsec.jsonl"), "w") as f:
            for rid, _ in reqs:
                f.write(json.dumps(m[rid]) + "\n")
    print()
    print(f"{n - n_failed} passed, {n_failed} failed")
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
