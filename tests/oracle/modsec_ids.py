#!/usr/bin/env python3
"""ModSecurity v3 (libmodsecurity, in-process) as an oracle for wafer.

Reads JSON lines {"id": ..., "raw": "<base64 raw HTTP/1.1 request>"} on stdin
(the format of `wafer crs-requests`) and prints, per request, one JSON line
{"id": ..., "status": ..., "ids": [sorted unique rule ids logged]} -- the same
shape as `wafer ids CONFIG.json`.

The configuration is the wafer plugin config given as argument (default: the
CRS test setup, TEST_SETUP of cli/src/crs/mod.rs), translated line by line:
plain SecLang lines are loaded as they are; wafer's embedded includes become
the files they embed: `@crs-setup-conf` and `@owasp_crs/*.conf` the CRS files
(load_from_uri, so @pmFromFile finds the .data files next to the rule file),
`@recommended-conf` this repository's rules/recommended-conf.conf, whose
directives are all ModSecurity v3 ones (so both engines run the same text).

The request is fed exactly as wafer's native runner does it
(cli/src/crs/native.rs): same lenient request parsing, same connection
addresses, same albedo-style response (200 text/plain empty body, or the
response described by a POST /reflect JSON body). The one thing the
ModSecurity API cannot express: it takes the HTTP version without "HTTP/"
and always rebuilds REQUEST_PROTOCOL / REQUEST_LINE as "HTTP/" + version, so
a request line whose protocol is not "HTTP/x" reaches ModSecurity as
"HTTP/<protocol>".

Usage: modsec_ids.py [CONFIG.json] [--crs DIR] [--before-crs SECLANG] < requests.jsonl
"""

import argparse
import fnmatch
import json
import os
import re
import sys

import libmodsecurity

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_setup_config():
    """wafer's CRS test setup: the TEST_SETUP lines of cli/src/crs/mod.rs as a plugin config."""
    src = open(os.path.join(REPO, "cli", "src", "crs", "mod.rs"), encoding="utf-8").read()
    body = src[src.index("pub const TEST_SETUP"):]
    body = body[body.index("&[") + 2:body.index("];")]
    lines = [json.loads(m) for m in re.findall(r'"(?:[^"\\]|\\.)*"', body)]
    if not lines:
        sys.exit("modsec_ids: TEST_SETUP not found in cli/src/crs/mod.rs")
    return {"directives_map": {"crs-test": lines}, "default_directives": "crs-test"}


def directives(config):
    """The SecLang lines of a wafer plugin config (its default directive set)."""
    dm = config.get("directives_map", {})
    name = config.get("default_directives") or next(iter(dm), None)
    lines = dm.get(name)
    if lines is None:
        sys.exit(f"modsec_ids: directive set {name!r} not in the config")
    return lines


def load_rules(lines, crs_dir, before_crs=""):
    """Loads wafer config lines into a ModSecurity RulesSet.

    Plain lines are loaded as they are (in runs, with load()). wafer's embedded
    includes become ModSecurity loads: `@crs-setup-conf` and `@owasp_crs/GLOB`
    are the CRS files (load_from_uri, so @pmFromFile finds the .data files next
    to the rule file), any other `@name` is this repository's rules/name.conf
    (e.g. @recommended-conf: its directives are all ModSecurity v3 ones).
    `before_crs` (extra SecLang) goes in right before the first CRS include.
    """
    rules = libmodsecurity.RulesSet()
    pending = []

    def check(n, what):
        if n < 0:
            sys.exit(f"modsec_ids: ModSecurity cannot load {what}: {rules.get_parser_error()}")

    def flush():
        if pending:
            check(rules.load("\n".join(pending) + "\n"), "inline directives: " + " / ".join(pending)[:200])
            pending.clear()

    for line in lines:
        m = re.match(r"\s*Include\s+(@\S+)\s*$", line, re.I)
        if not m:
            pending.append(line)
            continue
        flush()
        target = m.group(1)
        if before_crs and (target == "@crs-setup-conf" or target.startswith("@owasp_crs/")):
            check(rules.load(before_crs), "the --before-crs directives")
            before_crs = ""
        if target == "@crs-setup-conf":
            f = os.path.join(crs_dir, "crs-setup.conf.example")
            check(rules.load_from_uri(f), f)
        elif target.startswith("@owasp_crs/"):
            pat = target[len("@owasp_crs/"):]
            rdir = os.path.join(crs_dir, "rules")
            names = sorted(n for n in os.listdir(rdir) if fnmatch.fnmatchcase(n, pat))
            if not names:
                sys.exit(f"modsec_ids: {target} matches no file in {rdir}")
            for n in names:
                check(rules.load_from_uri(os.path.join(rdir, n)), n)
        else:
            f = os.path.join(REPO, "rules", target[1:] + ".conf")
            if not os.path.isfile(f):
                sys.exit(f"modsec_ids: no ModSecurity equivalent for Include {target} ({f} missing)")
            check(rules.load_from_uri(f), f)
    flush()
    return rules


# -- request parsing: a port of cli/src/crs/native.rs `parse` ----------------

def _ascii_ws(b):
    return b in b" \t\n\r\x0b\x0c"


def parse(raw):
    p = raw.find(b"\r\n\r\n")
    if p >= 0:
        head, rest = raw[:p], raw[p + 4:]
    else:
        p = raw.find(b"\n\n")
        if p < 0:
            return None
        head, rest = raw[:p], raw[p + 2:]
    lines = [l[:-1] if l.endswith(b"\r") else l for l in head.split(b"\n")]
    line = lines[0].decode("utf-8", "replace")
    parts = line.split(" ", 2)
    method = parts[0]
    uri = parts[1] if len(parts) > 1 else "/"
    version = parts[2] if len(parts) > 2 else "HTTP/1.1"
    headers = []
    for l in lines[1:]:
        c = l.find(b":")
        if c < 0:
            continue
        v = l[c + 1:]
        i = 0
        while i < len(v) and v[i] in b" \t\n\r\x0c":  # Rust is_ascii_whitespace (no \x0b)
            i += 1
        headers.append((l[:c], v[i:]))
    chunked = any(k.lower() == b"transfer-encoding" and v.lower() == b"chunked" for k, v in headers)
    if chunked:
        body = dechunk(rest)
    else:
        n = 0
        for k, v in headers:
            if k.lower() == b"content-length":
                try:
                    n = int(v.decode("utf-8", "replace").strip())
                    if n < 0:
                        n = 0
                except ValueError:
                    n = 0
                break
        body = rest[:n]
    return method, uri, version, headers, body


def dechunk(b):
    out = bytearray()
    while True:
        p = b.find(b"\r\n")
        if p < 0:
            break
        try:
            size = int(b[:p].decode("utf-8", "replace").split(";")[0].strip(), 16)
        except ValueError:
            size = 0
        b = b[p + 2:]
        if size == 0 or size > len(b):
            break
        out += b[:size]
        b = b[size + 2:]
    return bytes(out)


def ftw_base64(s):
    """cli/src/crs/ftw.rs `base64`: lenient, URL-safe alphabet too, empty on junk."""
    out = bytearray()
    acc = bits = 0
    for c in s.encode():
        if 65 <= c <= 90:
            v = c - 65
        elif 97 <= c <= 122:
            v = c - 97 + 26
        elif 48 <= c <= 57:
            v = c - 48 + 52
        elif c in b"+-":
            v = 62
        elif c in b"/_":
            v = 63
        elif c in b"=\n\r ":
            continue
        else:
            return b""
        acc = ((acc << 6) | v) & 0xFFFFFFFF
        bits += 6
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    return bytes(out)


def reflect(method, uri, body):
    """albedo: POST /reflect answers with what the JSON body describes (native.rs `reflect`)."""
    if method != "POST" or not uri.startswith("/reflect"):
        return 200, [("Content-Type", "text/plain")], b""
    try:
        v = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return 400, [], b"bad reflect spec"
    if not isinstance(v, dict):
        v = {}
    status = v.get("status")
    if not (isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 65535):
        status = 200
    headers = []
    h = v.get("headers")
    if isinstance(h, dict):
        for k in sorted(h):  # serde_json's Map is ordered by key
            val = h[k]
            headers.append((k, val if isinstance(val, str) else json.dumps(val, separators=(",", ":"))))
    if not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", "text/plain; charset=utf-8"))
    if isinstance(v.get("encodedBody"), str):
        rbody = ftw_base64(v["encodedBody"])
    else:
        b = v.get("body")
        rbody = b.encode() if isinstance(b, str) else b""
    return status, headers, rbody


def run(ms, rules, raw):
    """One request through phases 1-5; returns (status, sorted logged rule ids)."""
    req = parse(raw)
    if req is None:
        return None, []
    method, uri, version, headers, body = req
    http_version = version[5:] if version.startswith("HTTP/") else version
    tx = libmodsecurity.Transaction(ms, rules)
    status = None

    def interrupted():
        it = tx.intervention()
        return it.status if it is not None and it.disruptive else None

    tx.process_connection("127.0.0.1", 50000, "127.0.0.1", 80)
    tx.process_uri(uri.encode("utf-8", "surrogateescape"), method.encode(), http_version.encode())
    status = interrupted()
    if status is None:
        for k, v in headers:
            tx.add_request_header(k, v)
        tx.process_request_headers()
        status = interrupted()
    if status is None:
        if body:
            tx.append_request_body(body)
            status = interrupted()
        if status is None:
            tx.process_request_body()
            status = interrupted()
    if status is None:
        st, rheaders, rbody = reflect(method, uri, body)
        status = st
        for k, v in rheaders:
            tx.add_response_header(k.encode(), v.encode())
        tx.process_response_headers(st, "HTTP/1.1")
        s = interrupted()
        if s is not None:
            status = s
        else:
            if rbody:
                tx.append_response_body(rbody)
            tx.process_response_body()
            s = interrupted()
            if s is not None:
                status = s
    tx.process_logging()
    # get_rule_messages() is the transaction's m_rulesMessages: ModSecurity
    # pushes a message there exactly when it writes the rule's server-log line
    # (RuleWithActions::performLogging: not for nolog rules, not for the
    # non-final links of a chain, per match for multiMatch rules).
    ids = sorted({m.rule_id for m in tx.get_rule_messages()})
    return status, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="wafer plugin config JSON (default: TEST_SETUP of cli/src/crs/mod.rs)")
    ap.add_argument("--crs", default=os.environ.get("CRS_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "coreruleset")))
    ap.add_argument("--before-crs", default="", help="extra SecLang loaded right before the CRS (for experiments)")
    args = ap.parse_args()
    config = json.load(open(args.config)) if args.config else test_setup_config()
    ms = libmodsecurity.ModSecurity()
    # Without a callback libmodsecurity prints every log line on stdout.
    ms.set_log_callback(lambda line: None)
    rules = load_rules(directives(config), args.crs, args.before_crs)
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        v = json.loads(line)
        raw = ftw_base64(v.get("raw", ""))
        status, ids = run(ms, rules, raw)
        out.write(json.dumps({"id": v.get("id"), "status": status, "ids": ids}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
