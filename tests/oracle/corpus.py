"""The differential corpus: the CRS regression suite's requests plus variants.

Variants are made from a seeded random sample of the suite's requests by
rewriting them the way an attacker or an ordinary client could send the same
thing differently: parameter-name and value case, URL-encoding and double
encoding of values, a query string moved into a form body, a JSON body or
cookies, benign extra headers, lower-case header names. The original request
id is kept as a prefix: `942100-3/1~qs-urlenc`.
"""

import base64
import json
import os
import random
import re
import subprocess

from modsec_ids import ftw_base64, parse


def suite_requests(wafer_bin, crs_dir):
    """[(id, raw bytes)] of every stage of the CRS regression suite (`wafer crs-requests`)."""
    p = subprocess.run([wafer_bin, "crs-requests"], env=dict(os.environ, CRS_DIR=crs_dir), capture_output=True)
    if p.returncode != 0 or not p.stdout.strip():
        raise SystemExit(f"`{wafer_bin} crs-requests` (CRS_DIR={crs_dir}) failed: "
                         + p.stderr.decode(errors="replace")[-1000:])
    out = p.stdout
    reqs = []
    for line in out.splitlines():
        if line.strip():
            v = json.loads(line)
            reqs.append((v["id"], ftw_base64(v["raw"])))
    return reqs


def to_jsonl(reqs):
    return "".join(json.dumps({"id": i, "raw": base64.b64encode(r).decode()}) + "\n" for i, r in reqs)


# -- a small request model ----------------------------------------------------

class Req:
    def __init__(self, method, uri, version, headers, body):
        self.method, self.uri, self.version = method, uri, version
        self.headers = list(headers)  # [(bytes, bytes)]
        self.body = body
        self.chunked = False  # body is already chunk-encoded

    @classmethod
    def from_raw(cls, raw):
        p = parse(raw)
        return cls(*p) if p else None

    def copy(self):
        r = Req(self.method, self.uri, self.version, self.headers, self.body)
        r.chunked = self.chunked
        return r

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def set_header(self, name, value):
        self.headers = [(k, v) for k, v in self.headers if k.lower() != name.lower()]
        self.headers.append((name, value))

    def path_query(self):
        u = self.uri
        q = u.find("?")
        return (u, None) if q < 0 else (u[:q], u[q + 1:])

    def raw(self):
        heads = [(k, v) for k, v in self.headers if k.lower() not in (b"content-length", b"transfer-encoding")]
        if self.chunked:
            heads.append((b"Transfer-Encoding", b"chunked"))
        elif self.body or self.method in ("POST", "PUT", "PATCH"):
            heads.append((b"Content-Length", str(len(self.body)).encode()))
        out = f"{self.method} {self.uri} {self.version}\r\n".encode("utf-8", "surrogateescape")
        for k, v in heads:
            out += k + b": " + v + b"\r\n"
        return out + b"\r\n" + self.body


# The text codec of what is being rewritten: the request line is UTF-8 (lossy,
# as wafer's parser reads it), a form body latin-1 (bytes as they are).
CODEC = ["utf-8"]


def split_pairs(s):
    """'a=b&c' -> [('a', 'b'), ('c', None)] (raw, still encoded)."""
    pairs = []
    for part in s.split("&"):
        if part == "":
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            pairs.append((k, v))
        else:
            pairs.append((part, None))
    return pairs


def join_pairs(pairs):
    return "&".join(k if v is None else f"{k}={v}" for k, v in pairs)


def pct_decode(s):
    """URL-decode like ModSecurity's argument parser ('+' is a space, bad escapes kept)."""
    b = s.encode(CODEC[0], "surrogateescape") if isinstance(s, str) else s
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x2B:
            out.append(0x20)
        elif c == 0x25 and _ishex(b[i + 1:i + 3]):
            out.append(int(b[i + 1:i + 3], 16))
            i += 2
        else:
            out.append(c)
        i += 1
    return bytes(out)


def _ishex(two):
    return len(two) == 2 and all(chr(x) in "0123456789abcdefABCDEF" for x in two)


def pct_encode_all(b):
    """Every byte but letters and digits as %XX."""
    return "".join(chr(c) if chr(c).isalnum() and c < 128 else f"%{c:02X}" for c in b)


def swapcase_outside_escapes(s):
    out = []
    i = 0
    while i < len(s):
        if s[i] == "%" and _ishex(s[i + 1:i + 3].encode("utf-8", "surrogateescape")):
            out.append(s[i:i + 3])
            i += 3
        else:
            out.append(s[i].swapcase())
            i += 1
    return "".join(out)


def is_form(req):
    ct = req.header(b"content-type") or b""
    return ct.lower().startswith(b"application/x-www-form-urlencoded") and req.body


# -- mutations: each returns a new Req or None (not applicable) ---------------

def _map_query(req, f):
    path, q = req.path_query()
    if not q:
        return None
    pairs = split_pairs(q)
    if not pairs:
        return None
    CODEC[0] = "utf-8"
    new = f(pairs)
    if new is None:
        return None
    r = req.copy()
    r.uri = path + "?" + join_pairs(new)
    return r if r.uri != req.uri else None


def _map_form(req, f):
    if not is_form(req):
        return None
    try:
        s = req.body.decode("latin-1")
    except UnicodeDecodeError:
        return None
    pairs = split_pairs(s)
    if not pairs:
        return None
    CODEC[0] = "latin-1"
    new = f(pairs)
    if new is None:
        return None
    r = req.copy()
    r.body = join_pairs(new).encode("latin-1")
    return r if r.body != req.body else None


def _names_case(pairs):
    return [(swapcase_outside_escapes(k), v) for k, v in pairs]


def _values_case(pairs):
    return [(k, None if v is None else swapcase_outside_escapes(v)) for k, v in pairs]


def _values_urlenc(pairs):
    return [(k, None if v is None else pct_encode_all(pct_decode(v))) for k, v in pairs]


def _values_double(pairs):
    return [(k, None if v is None else pct_encode_all(pct_decode(v)).replace("%", "%25")) for k, v in pairs]


def qs_to_form(req):
    path, q = req.path_query()
    if not q or req.body or req.method not in ("GET", "HEAD"):
        return None
    r = req.copy()
    r.method, r.uri, r.body = "POST", path, q.encode("utf-8", "surrogateescape")
    r.set_header(b"Content-Type", b"application/x-www-form-urlencoded")
    return r


def _pairs_to_json(pairs):
    obj = {}
    for k, v in pairs:
        try:
            obj[pct_decode(k).decode("utf-8")] = pct_decode(v or "").decode("utf-8")
        except UnicodeDecodeError:
            return None
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def form_to_json(req):
    if not is_form(req):
        return None
    CODEC[0] = "latin-1"
    body = _pairs_to_json(split_pairs(req.body.decode("latin-1")))
    if body is None:
        return None
    r = req.copy()
    r.body = body
    r.set_header(b"Content-Type", b"application/json")
    return r


def qs_to_json(req):
    path, q = req.path_query()
    if not q or req.body or req.method not in ("GET", "HEAD"):
        return None
    CODEC[0] = "utf-8"
    body = _pairs_to_json(split_pairs(q))
    if body is None:
        return None
    r = req.copy()
    r.method, r.uri, r.body = "POST", path, body
    r.set_header(b"Content-Type", b"application/json")
    return r


def qs_to_cookie(req):
    path, q = req.path_query()
    if not q:
        return None
    pairs = [(k, v) for k, v in split_pairs(q) if v is not None and ";" not in k + v and " " not in k + v]
    if not pairs:
        return None
    r = req.copy()
    r.uri = path
    r.headers = [(k, v) for k, v in r.headers if k.lower() != b"cookie"]
    r.headers.append((b"Cookie", "; ".join(f"{k}={v}" for k, v in pairs).encode("utf-8", "surrogateescape")))
    return r


BENIGN = [
    (b"Accept-Encoding", b"gzip, deflate, br"),
    (b"Accept-Language", b"en-US,en;q=0.5"),
    (b"Cache-Control", b"no-cache"),
    (b"X-Forwarded-For", b"192.0.2.10"),
    (b"DNT", b"1"),
    (b"Upgrade-Insecure-Requests", b"1"),
    (b"X-Request-ID", b"3f0c9a52-6d1e-4b8e-9d7a-2b9f1c0e4a11"),
]


def benign_headers(req, rng):
    r = req.copy()
    have = {k.lower() for k, _ in r.headers}
    extra = [h for h in BENIGN if h[0].lower() not in have]
    if not extra:
        return None
    r.headers += rng.sample(extra, min(len(extra), rng.randint(1, 3)))
    return r


def lower_header_names(req):
    r = req.copy()
    r.headers = [(k.lower(), v) for k, v in r.headers]
    return r if r.headers != req.headers else None


def _values_unicode(pairs):
    """IIS-style %uXXXX for every non-alphanumeric ASCII byte (t:urlDecodeUni territory)."""
    def enc(b):
        return "".join(chr(c) if (chr(c).isalnum() and c < 128) else (f"%u00{c:02X}" if c < 128 else f"%{c:02X}") for c in b)
    return [(k, None if v is None else enc(pct_decode(v))) for k, v in pairs]


def _values_entities(pairs):
    """HTML numeric entities (URL-encoded) for every non-alphanumeric ASCII byte."""
    def enc(b):
        return "".join(chr(c) if (chr(c).isalnum() and c < 128) else (pct_encode_all(f"&#x{c:x};".encode()) if c < 128 else f"%{c:02X}") for c in b)
    return [(k, None if v is None else enc(pct_decode(v))) for k, v in pairs]


def _form_pairs(req):
    """Decoded (name, value) pairs of a GET query or a form body, with the request minus them."""
    path, q = req.path_query()
    if is_form(req):
        CODEC[0] = "latin-1"
        pairs = split_pairs(req.body.decode("latin-1"))
        r = req.copy()
        r.body = b""
    elif q and not req.body and req.method in ("GET", "HEAD"):
        CODEC[0] = "utf-8"
        pairs = split_pairs(q)
        r = req.copy()
        r.uri = path
    else:
        return None, None
    return [(pct_decode(k), pct_decode(v or "")) for k, v in pairs], r


def to_multipart(req):
    pairs, r = _form_pairs(req)
    if not pairs:
        return None
    b = b"----wafer-oracle-7d3f"
    body = b""
    for k, v in pairs:
        if b'"' in k or b"\r" in k or b"\n" in k or b in v:
            return None
        body += b"--" + b + b'\r\nContent-Disposition: form-data; name="' + k + b'"\r\n\r\n' + v + b"\r\n"
    r.method = "POST"
    r.body = body + b"--" + b + b"--\r\n"
    r.set_header(b"Content-Type", b"multipart/form-data; boundary=" + b)
    return r


def to_json_nested(req):
    pairs, r = _form_pairs(req)
    if not pairs:
        return None
    try:
        obj = {"data": [{k.decode("utf-8"): v.decode("utf-8")} for k, v in pairs], "n": 1}
    except UnicodeDecodeError:
        return None
    r.method = "POST"
    r.body = json.dumps(obj).encode()
    r.set_header(b"Content-Type", b"application/json")
    return r


def value_to_header(req, rng):
    pairs, r = _form_pairs(req)
    if not pairs:
        return None
    k, v = rng.choice(pairs)
    if any(c in v for c in b"\r\n\0") or not v:
        return None
    name = rng.choice([b"User-Agent", b"Referer", b"X-Data"])
    r = req.copy()
    r.set_header(name, v)
    return r


def chunked(req, rng):
    if not req.body:
        return None
    r = req.copy()
    b, out = req.body, b""
    while b:
        n = min(rng.randint(1, 16), len(b))
        out += f"{n:x}\r\n".encode() + b[:n] + b"\r\n"
        b = b[n:]
    r.body = out + b"0\r\n\r\n"
    r.chunked = True
    return r


def path_case(req):
    path, q = req.path_query()
    new = path.swapcase()
    if new == path:
        return None
    r = req.copy()
    r.uri = new + ("" if q is None else "?" + q)
    return r


def _xml_escape(b):
    return b.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;").replace(b'"', b"&quot;")


def to_xml(req):
    pairs, r = _form_pairs(req)
    if not pairs:
        return None
    body = b'<?xml version="1.0"?><root>'
    for k, v in pairs:
        if not re.fullmatch(rb"[A-Za-z_][A-Za-z0-9_.-]*", k):
            return None
        try:
            v.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if any(c < 0x20 and c not in b"\t\r\n" for c in v):
            return None
        body += b"<" + k + b' a="' + _xml_escape(v) + b'">' + _xml_escape(v) + b"</" + k + b">"
    r.method = "POST"
    r.body = body + b"</root>"
    r.set_header(b"Content-Type", b"application/xml")
    return r


def json_types(req):
    pairs, r = _form_pairs(req)
    if not pairs:
        return None
    try:
        obj = {k.decode("utf-8"): [v.decode("utf-8"), 1, 2.5, True, None, {"k": v.decode("utf-8")}] for k, v in pairs}
    except UnicodeDecodeError:
        return None
    r.method = "POST"
    r.body = json.dumps(obj, ensure_ascii=False).encode()
    r.set_header(b"Content-Type", b"application/json; charset=utf-8")
    return r


def form_ct_charset(req):
    if not is_form(req):
        return None
    r = req.copy()
    r.set_header(b"Content-Type", b"application/x-www-form-urlencoded; charset=UTF-8")
    return r


def dup_args(req):
    return _map_query(req, lambda pairs: [p for k, v in pairs for p in ((k, "x1"), (k, v))])


REFLECT_TYPES = ["text/html; charset=UTF-8", "TEXT/PLAIN", "application/json", "text/xml",
                 "application/octet-stream", "text/plain;charset=iso-8859-1", None]


def reflect_variant(req, rng):
    """albedo /reflect: other response Content-Type (or none) and status."""
    if req.method != "POST" or not req.uri.startswith("/reflect"):
        return None
    try:
        spec = json.loads(req.body)
    except ValueError:
        return None
    if not isinstance(spec, dict):
        return None
    heads = {k: v for k, v in (spec.get("headers") or {}).items() if k.lower() != "content-type"}
    ct = rng.choice(REFLECT_TYPES)
    if ct:
        heads["Content-Type"] = ct
    spec["headers"] = heads
    if rng.random() < 0.3:
        spec["status"] = rng.choice([200, 404, 500, 503])
    r = req.copy()
    r.body = json.dumps(spec).encode()
    return r


MUTATIONS = {
    "qs-name-case": lambda r, g: _map_query(r, _names_case),
    "qs-value-case": lambda r, g: _map_query(r, _values_case),
    "qs-urlenc": lambda r, g: _map_query(r, _values_urlenc),
    "qs-double-enc": lambda r, g: _map_query(r, _values_double),
    "form-name-case": lambda r, g: _map_form(r, _names_case),
    "form-value-case": lambda r, g: _map_form(r, _values_case),
    "form-urlenc": lambda r, g: _map_form(r, _values_urlenc),
    "form-double-enc": lambda r, g: _map_form(r, _values_double),
    "qs-to-form": lambda r, g: qs_to_form(r),
    "qs-to-json": lambda r, g: qs_to_json(r),
    "form-to-json": lambda r, g: form_to_json(r),
    "qs-to-cookie": lambda r, g: qs_to_cookie(r),
    "qs-unicode-enc": lambda r, g: _map_query(r, _values_unicode),
    "form-unicode-enc": lambda r, g: _map_form(r, _values_unicode),
    "qs-entities": lambda r, g: _map_query(r, _values_entities),
    "form-entities": lambda r, g: _map_form(r, _values_entities),
    "to-multipart": lambda r, g: to_multipart(r),
    "to-json-nested": lambda r, g: to_json_nested(r),
    "value-to-header": value_to_header,
    "chunked": chunked,
    "path-case": lambda r, g: path_case(r),
    "to-xml": lambda r, g: to_xml(r),
    "json-types": lambda r, g: json_types(r),
    "form-ct-charset": lambda r, g: form_ct_charset(r),
    "qs-dup-args": lambda r, g: dup_args(r),
    "reflect-response": reflect_variant,
    "benign-headers": benign_headers,
    "header-names-lower": lambda r, g: lower_header_names(r),
}


def variants(suite, n, seed=20261129):
    """Up to n variants of a seeded random sample of the suite's requests, spread
    evenly over the mutation kinds (round robin over each kind's shuffled
    applicable requests)."""
    rng = random.Random(seed)
    base = []
    for rid, raw in suite:
        req = Req.from_raw(raw)
        # Odd protocols are left as they are.
        if req is not None and req.version.startswith("HTTP/1."):
            base.append((rid, req))
    pools = {}
    for name in MUTATIONS:
        order = base[:]
        rng.shuffle(order)
        pools[name] = iter(order)
    out = []
    live = list(MUTATIONS)
    while len(out) < n and live:
        for name in list(live):
            if len(out) >= n:
                break
            for rid, req in pools[name]:
                new = MUTATIONS[name](req, rng)
                if new is not None:
                    out.append((f"{rid}~{name}", new.raw()))
                    break
            else:
                live.remove(name)
    out.sort(key=lambda x: x[0])
    return out
