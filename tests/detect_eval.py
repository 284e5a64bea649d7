#!/usr/bin/env python3
"""`make detect-eval`: what `@wafer-detect` adds to the CRS, measured in process.

    python3 tests/detect_eval.py [--wafer target/release/wafer] [--per-class 300] [--out target/detect-eval]

Also the CRS regression tests (positive tests by their rule's attack tag; negative tests as benign)
and libinjection's test-sqli vectors. Each class is split by a hash of the payload into a tuning half
(misses in OUT/missed.txt) and a check half (OUT/missed-check.txt); the tables show both.

Attacks: the development corpora of ../shared/detection (PayloadsAllTheThings' payload lists, the
HttpParamsDataset train split's `anom` values) and CRLF / mail header payloads generated here,
each placed in the query, a form body, a JSON body, an XML body, a multipart field, a cookie, a
header and the URL path, and (in the query) wrapped in nested URL encoding, base64, JSON/JS
unicode escapes and HTML entities. Benign: the HttpParamsDataset train `norm` values (query and
form), the realistic-traffic corpus of bench/realistic.py, and free text in several languages,
JSON API bodies and code snippets generated here. Never the held-out corpora
(../shared/detection/README.md).

Every request goes through `wafer ids CONFIG` (the native engine) with three configurations: CRS
PL1, CRS PL1 + `@wafer-detect` (`"detect": {}`), CRS PL2. A request is blocked when its status is
not 200. Prints the tables of docs/detection.md; writes the requests missed and the benign ones
blocked by `@wafer-detect` to OUT. Exits 1 when a bar of issue 55 is not met.
"""
import argparse
import base64
import collections
import csv
import html
import json
import os
import random
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(REPO), "shared")
DETECTION = os.path.join(SHARED, "detection")

CRS = ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]
PL2 = 'SecAction "id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=2"'
CONFIGS = {
    "CRS PL1": {"directives_map": {"d": CRS}, "default_directives": "d"},
    "CRS PL1 + @wafer-detect": {"directives_map": {"d": CRS}, "default_directives": "d", "detect": {}},
    "CRS PL2": {"directives_map": {"d": CRS[:3] + [PL2] + CRS[3:]}, "default_directives": "d"},
}
PLACEMENTS = ["query", "form", "json", "xml", "multipart", "cookie", "header", "path"]
ENCODINGS = ["plain", "url-nested", "base64", "js-unicode", "html-entities"]
HOST = "shop.example.com"
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


# -- corpora ------------------------------------------------------------------------------------

def lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [l.rstrip("\n").rstrip("\r") for l in f if l.strip()]


def attacks(per_class, rng):
    """{class: [payload]}, at most per_class each (a fixed sample)."""
    patt = os.path.join(DETECTION, "payloadsallthethings")
    by = collections.defaultdict(list)
    files = {"cmdi": "rce", "path-traversal": "path-traversal", "file-inclusion": "file-inclusion", "ldapi": "ldapi",
             "nosqli": "nosqli", "ssti": "ssti", "xxe": "xxe", "sqli": "sqli", "xss": "xss"}
    targets = ["etc/passwd", "etc/shadow", "windows/win.ini", "proc/self/environ", "boot.ini"]
    for name, cls in files.items():
        for i, p in enumerate(lines(os.path.join(patt, f"{name}.txt"))):
            p = p.replace("{FILE}", targets[i % len(targets)])
            by["ssi" if "<!--#" in html.unescape(urllib.parse.unquote(p)) else cls].append(p)
    with open(os.path.join(DETECTION, "httpparams", "payload_train.csv"), newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            if row["label"] != "norm":
                cls = {"cmdi": "rce", "path-traversal": "path-traversal"}.get(row["attack_type"], row["attack_type"])
                by[cls].append(row["payload"])
    by["crlf"] += crlf_payloads()
    crs, _ = crs_tests()
    libinj, _ = libinjection_vectors()
    crs["sqli"] += libinj
    out = collections.defaultdict(list)
    # At most per_class payloads of each class from each source (a fixed sample), so the CRS tests'
    # and libinjection's payloads are not drowned by the longer lists.
    for src in (by, crs):
        for cls, ps in sorted(src.items()):
            ps = sorted(set(p for p in ps if attack_value(p)) - set(out[cls]))
            rng.shuffle(ps)
            out[cls] += ps[:per_class]
    return dict(sorted(out.items()))


def crlf_payloads():
    """CRLF, header and mail header injection: generated (there is no development list of them)."""
    out = []
    breaks = ["\r\n", "\n", "\r", "%0d%0a", "%0a", "%0D%0A", "\\r\\n"]
    heads = ["Set-Cookie: session=attacker", "Location: https://evil.example/", "Content-Type: text/html",
             "X-Injected: 1", "Bcc: victim@example.org", "Cc: list@example.org", "To: everyone@example.org",
             "Content-Length: 0", "Refresh: 0; url=https://evil.example/", "Reply-To: evil@example.org",
             "Subject: you won", "Transfer-Encoding: chunked"]
    prefixes = ["user@example.com", "en", "/home", "John", ""]
    for i, h in enumerate(heads):
        for j, b in enumerate(breaks):
            out.append(prefixes[(i + j) % len(prefixes)] + b + h)
    for b in breaks[:4]:
        out.append("x" + b + b + "<html><script>alert(1)</script></html>")
        out.append("x" + b + "HTTP/1.1 200 OK")
    return out


def benign_httpparams():
    with open(os.path.join(DETECTION, "httpparams", "payload_train.csv"), newline="", encoding="utf-8", errors="replace") as f:
        return [r["payload"] for r in csv.DictReader(f) if r["label"] == "norm"]


FREE_TEXT = [
    "Hello, I'd like to return my order #4521 - the shoes don't fit. Can you help?",
    "Great product!!! 5/5 would buy again :) Shipping took 3-4 days though.",
    "Bonjour, je voudrais savoir si l'article est disponible en taille 42. Merci d'avance !",
    "Sehr geehrte Damen und Herren, leider ist die Lieferung beschädigt angekommen (Karton eingedrückt).",
    "Hola, ¿cuándo llegará mi pedido? Lo necesito antes del viernes 12/07.",
    "ご注文ありがとうございます。商品は3日以内に発送いたします。",
    "Здравствуйте! Подскажите, пожалуйста, есть ли доставка в Казань?",
    "您好，请问这款手机支持双卡吗？谢谢！",
    "Olá, gostaria de trocar o produto por outro tamanho (M -> G).",
    "Tom & Jerry, Ben & Jerry's, R&D, Q&A - all fine; see you at 10:30 a.m.",
    "The cat sat on the mat; then the dog & the cat slept. Who's there? It's me.",
    "Price: $5.99 (was $7.99) - 25% off! Use code SAVE25 at checkout.",
    "My e-mail is jane.doe+shop@example.com and my phone is +1 (555) 123-4567.",
    "Address: 221B Baker Street, London NW1 6XE, UK",
    "I rated it 4/5 because the battery lasts ~8h, not 10h as advertised.",
    "Please deliver to the back door :-) Code for the gate: 1234#",
    "Dear team,\nthanks for the quick answer.\nBest regards,\nMaria",
    "Note: the item arrived late.\nTime: 10:00\nPlace: front desk",
    "Can I pay with PayPal | credit card | bank transfer?",
    "Ich finde das Produkt super; die Farbe (dunkelblau) ist genau wie auf dem Foto.",
    "C'est \"vraiment\" top - je recommande à 100%.",
    "Wie viel kostet der Versand nach Österreich? Und nach Zürich?",
    "Use the {{name}} placeholder in your greeting card text.",
    "Our office hours are Mon-Fri 9:00-17:00 (CET).",
    "I ordered 2 x 'Blue Mug' and 1 x 'Red Plate' - only the mugs came.",
    "see ../faq for details, or https://shop.example.com/help?topic=returns",
    "1 + 1 = 2, 2 * 3 = 6 and 10 / 2 = 5",
    "Is the size chart (EU/US/UK) correct for kids?",
    "Cheers mate - top service, ta!",
    "The file is at C:\\Users\\maria\\Documents\\invoice.pdf, can you read it?",
]

CODE_SNIPPETS = [
    "def add(a, b):\n    return a + b\n",
    "for (let i = 0; i < items.length; i++) { total += items[i].price; }",
    "SELECT name, price FROM products WHERE category = ? ORDER BY price",
    "const user = await fetch('/api/users/42').then(r => r.json());",
    "if x > 0 and y < 10:\n    print(f\"{x} {y}\")",
    "public static void main(String[] args) { System.out.println(\"hi\"); }",
    "git commit -m \"fix typo\" && git push",
    "<div class=\"card\"><p>Hello</p></div>",
    "npm install --save lodash",
    "body { color: #333; margin: 0 auto; }",
    "{\"name\": \"widget\", \"tags\": [\"a\", \"b\"], \"price\": 9.99}",
    "SELECT * FROM orders",
    "x = [i * 2 for i in range(10)]",
    "echo $HOME",
    "fn main() { println!(\"{}\", 1 + 2); }",
]


def json_apis(rng):
    out = []
    for i in range(400):
        doc = {
            "id": rng.randint(1, 10**6), "sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 9),
            "customer": {"name": rng.choice(["Anna Müller", "José García", "李雷", "Jean-Luc O'Neil", "Zoë Smith"]),
                         "email": f"user{i}@example.com", "phone": f"+49 30 {rng.randint(100000, 999999)}"},
            "items": [{"sku": f"A-{rng.randint(1, 999)}", "price": round(rng.random() * 100, 2)} for _ in range(rng.randint(1, 4))],
            "note": rng.choice(FREE_TEXT), "filters": {"price": {"min": 5, "max": 50}, "sort": "-created_at"},
            "meta": {"schema": "https://example.com/schema/v1", "ref": base64.b64encode(os.urandom(12)).decode() if False else "b3JkZXItMTIz"},
        }
        out.append(doc)
    return out

CRS_DIR = os.path.join(SHARED, "coreruleset")
LIBINJ = os.path.join(SHARED, "libinjection-tests", "tests")
# CRS tags -> our classes; rules of REQUEST-921 on response splitting / header injection are crlf.
CRS_TAG_CLASS = {"attack-rce": "rce", "attack-lfi": "path-traversal", "attack-rfi": "file-inclusion",
                 "attack-sqli": "sqli", "attack-xss": "xss", "attack-ssti": "ssti"}
CRS_CRLF_RULES = {"921120", "921130", "921140", "921150", "921151", "921160"}
TRIVIAL = {"", "get", "post", "index.html", "test", "foo", "bar"}


def crs_rule_classes():
    """{rule id: class} from the tags of the CRS rule files."""
    import re
    out = {}
    rules = os.path.join(CRS_DIR, "rules")
    for fn in sorted(os.listdir(rules)):
        if not fn.endswith(".conf"):
            continue
        text = open(os.path.join(rules, fn), encoding="utf-8", errors="replace").read().replace("\\\n", " ")
        for m in re.finditer(r"\bid:(\d+)(.*?)(?=\bid:\d+|\Z)", text, re.S):
            rid, body = m.group(1), m.group(2)
            tags = re.findall(r"tag:'(attack-[a-z-]+)'", body)
            cls = "crlf" if rid in CRS_CRLF_RULES else next((CRS_TAG_CLASS[t] for t in tags if t in CRS_TAG_CLASS), None)
            if cls:
                out[rid] = cls
    return out


def attack_value(v):
    """A value that can carry an attack: not a bare word (letters, digits, `_.-`: the attribute names
    of the ldapi fuzz list, a CRS test's own `NNNNNN-N` key) and at least 3 characters (`(`, `*`)."""
    import re
    return len(v.strip()) >= 3 and not re.fullmatch(r"[\w.-]*", v.strip())


def request_values(inp):
    """The values a CRS test request carries: query and form values, a non-form body whole, cookie
    values, or else the path."""
    vals = []
    uri = str(inp.get("uri") or "")
    path, _, query = uri.partition("?")
    vals += [v for _, v in urllib.parse.parse_qsl(query, keep_blank_values=True)]
    headers = {str(k).lower(): str(v) for k, v in (inp.get("headers") or {}).items()}
    data = inp.get("data")
    if isinstance(data, list):
        data = "\n".join(str(x) for x in data)
    if data:
        ct = headers.get("content-type", "application/x-www-form-urlencoded").lower()
        if "x-www-form-urlencoded" in ct:
            vals += [v for _, v in urllib.parse.parse_qsl(str(data), keep_blank_values=True)]
        elif "multipart" not in ct:
            vals.append(str(data))
    for c in headers.get("cookie", "").split(";"):
        if "=" in c:
            vals.append(urllib.parse.unquote(c.split("=", 1)[1]))
    vals = [v for v in vals if v.strip().lower() not in TRIVIAL and len(v.strip()) >= 3]
    if not vals:
        p = urllib.parse.unquote(path).lstrip("/")
        if p.lower() not in TRIVIAL and len(p) >= 3:
            vals.append(p)
    return vals


def crs_tests():
    """({class: [attack payload]}, [benign payload]) from the CRS regression tests: a positive test's
    values are attacks of its rule's class; a negative test's values (rules of those classes) are benign."""
    import yaml
    classes = crs_rule_classes()
    atk, neg = collections.defaultdict(list), []
    root = os.path.join(CRS_DIR, "tests", "regression", "tests")
    for d in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, d)):
            continue
        for fn in sorted(os.listdir(os.path.join(root, d))):
            rid = fn.split(".")[0]
            if rid not in classes or not fn.endswith(".yaml"):
                continue
            try:
                doc = yaml.safe_load(open(os.path.join(root, d, fn), encoding="utf-8", errors="replace"))
            except yaml.YAMLError:
                continue
            for t in doc.get("tests") or []:
                for st in t.get("stages") or []:
                    inp, log = st.get("input") or {}, (st.get("output") or {}).get("log") or {}
                    if int(rid) in (log.get("expect_ids") or []):
                        atk[classes[rid]] += [v for v in request_values(inp) if attack_value(v)]
                    elif int(rid) in (log.get("no_expect_ids") or []) and not log.get("expect_ids"):
                        neg += request_values(inp)
    return atk, neg


def libinjection_vectors():
    """(sqli attacks, benign) from libinjection's test-sqli vectors (the development test files, not
    its sample corpora): a vector with an expected fingerprint is an attack, one without is benign."""
    atk, ben = [], []
    for fn in sorted(os.listdir(LIBINJ)):
        if not fn.startswith("test-sqli-"):
            continue
        text = open(os.path.join(LIBINJ, fn), encoding="utf-8", errors="surrogateescape").read()
        inp = text.split("--INPUT--\n", 1)[1].split("--EXPECTED--", 1)
        v, exp = inp[0].rstrip(), inp[1].strip()
        (atk if exp else ben).append(v)
    return atk, ben


def half(p):
    """Deterministic split of a class's corpus: 'tune' or 'check' from a hash of the payload."""
    import hashlib
    return "tune" if hashlib.sha256(p.encode("utf-8", "surrogateescape")).digest()[0] % 2 == 0 else "check"


# -- requests -----------------------------------------------------------------------------------

def req(method, path, headers, body=b""):
    h = [("Host", HOST), ("User-Agent", UA), ("Accept", "text/html,application/json;q=0.9,*/*;q=0.8"), ("Accept-Language", "en-US,en;q=0.5")]
    h += headers
    if body or method == "POST":
        h.append(("Content-Length", str(len(body))))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h) + "\r\n"
    return head.encode("utf-8", "surrogateescape") + body


def q(s):
    return urllib.parse.quote(s, safe="")


def place(p, where, name="q"):
    if where == "query":
        return req("GET", f"/search?{name}={q(p)}&page=1", [])
    if where == "form":
        return req("POST", "/account/profile", [("Content-Type", "application/x-www-form-urlencoded")], f"{name}={q(p)}&save=1".encode())
    if where == "json":
        return req("POST", "/api/v1/items", [("Content-Type", "application/json")], json.dumps({name: p, "page": 1}, ensure_ascii=False).encode())
    if where == "xml":
        if p.lstrip().startswith(("<?xml", "<!DOCTYPE", "<!doctype")):
            body = p
        else:
            body = f"<?xml version=\"1.0\"?><request><{name}>{html.escape(p, quote=False)}</{name}></request>"
        return req("POST", "/api/v1/soap", [("Content-Type", "text/xml")], body.encode())
    if where == "multipart":
        b = "----wafereval7d1f"
        body = f"--{b}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{p}\r\n--{b}\r\nContent-Disposition: form-data; name=\"save\"\r\n\r\n1\r\n--{b}--\r\n"
        return req("POST", "/account/upload", [("Content-Type", f"multipart/form-data; boundary={b}")], body.encode())
    if where == "cookie":
        return req("GET", "/", [("Cookie", f"lang=en; {name}={q(p)}")])
    if where == "header":
        v = "".join(c if 0x20 <= ord(c) < 0x7f else q(c) for c in p)
        return req("GET", "/", [("X-Forwarded-Prefix", v)])
    if where == "path":
        return req("GET", f"/files/{q(p)}/view", [])
    raise ValueError(where)


def encode(p, how):
    if how == "plain":
        return p
    if how == "url-nested":
        return urllib.parse.quote(urllib.parse.quote(p, safe=""), safe="")
    if how == "base64":
        return base64.b64encode(p.encode("utf-8", "surrogateescape")).decode()
    if how == "js-unicode":
        return "".join(c if c.isalnum() else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in p)
    if how == "html-entities":
        return "".join(c if c.isalnum() or c == " " else f"&#x{ord(c):x};" for c in p)
    raise ValueError(how)


# -- running ------------------------------------------------------------------------------------

def run(wafer, config, records):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cf:
        json.dump(config, cf)
    data = "".join(json.dumps({"id": i, "raw": base64.b64encode(raw).decode()}) + "\n" for i, (_, raw) in enumerate(records))
    p = subprocess.run([wafer, "ids", cf.name], input=data.encode(), capture_output=True)
    os.unlink(cf.name)
    if p.returncode != 0:
        sys.exit(f"wafer ids failed: {p.stderr.decode(errors='replace')[-2000:]}")
    got = {}
    for l in p.stdout.decode().splitlines():
        r = json.loads(l)
        got[r["id"]] = (r.get("status") not in (200, None), r.get("ids") or [])
    if len(got) != len(records):
        sys.exit(f"wafer ids answered {len(got)} of {len(records)}")
    return [got[i] for i in range(len(records))]


def pct(a, b):
    return f"{100 * a / b:5.1f}%" if b else "    -"


def table(title, rows, labels, n_of, blocked_of, benign=False):
    names = list(CONFIGS)
    what = "passed" if benign else "blocked"
    print(f"\n{title}\n")
    print(f"| {'':24} | {'n':>6} | " + " | ".join(f"{n} {what}" for n in names) + " |")
    print("|" + "---|" * (2 + len(names)))
    for lab in labels:
        n = n_of(lab)
        if not n:
            continue
        cells = []
        for c in names:
            b = blocked_of(lab, c)
            cells.append(pct(n - b if benign else b, n))
        print(f"| {lab:24} | {n:6} | " + " | ".join(f"{x:>{len(c) + len(what) + 1}}" for x, c in zip(cells, names)) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wafer", default=os.path.join(REPO, "target", "release", "wafer"))
    ap.add_argument("--per-class", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(REPO, "target", "detect-eval"))
    ap.add_argument("--realistic", default=os.path.join(REPO, "target", "realistic"))
    a = ap.parse_args()
    rng = random.Random(55)
    os.makedirs(a.out, exist_ok=True)

    # Attack requests: (class, placement, encoding, payload) -> raw.
    atk = attacks(a.per_class, rng)
    arecs = []
    for cls, ps in atk.items():
        for p in ps:
            for where in PLACEMENTS:
                arecs.append(((cls, where, "plain", p), place(p, where)))
            for how in ENCODINGS[1:]:
                arecs.append(((cls, "query", how, p), place(encode(p, how), "query")))
    # Benign requests: (corpus, payload) -> raw.
    brecs = []
    for p in benign_httpparams():
        brecs.append((("httpparams norm (query)", p), place(p, "query", "city")))
        brecs.append((("httpparams norm (form)", p), place(p, "form", "city")))
    _, crs_neg = crs_tests()
    _, libinj_neg = libinjection_vectors()
    for p in sorted(set(crs_neg)):
        for where in ["query", "form", "json"]:
            brecs.append((("CRS negative tests", p), place(p, where, "comment")))
    for p in libinj_neg:
        for where in ["query", "form"]:
            brecs.append((("libinjection benign", p), place(p, where, "q")))
    for t in FREE_TEXT:
        for where in ["query", "form", "json", "multipart", "xml"]:
            brecs.append((("free text", t), place(t, where, "comment")))
    for s in CODE_SNIPPETS:
        for where in ["form", "json", "multipart"]:
            brecs.append((("code snippets", s), place(s, where, "snippet")))
    for d in json_apis(rng):
        body = json.dumps(d, ensure_ascii=False).encode()
        brecs.append((("JSON APIs", ""), req("POST", "/api/v1/orders", [("Content-Type", "application/json")], body)))
    subprocess.run([sys.executable, os.path.join(REPO, "bench", "realistic.py"), "--ensure", "--out", a.realistic], check=True, capture_output=True)
    with open(os.path.join(a.realistic, "requests.jsonl")) as f:
        for l in f:
            r = json.loads(l)
            brecs.append((("realistic traffic", r["id"]), base64.b64decode(r["raw"])))

    res = {}
    for name, cfg in CONFIGS.items():
        res[name] = (run(a.wafer, cfg, arecs), run(a.wafer, cfg, brecs))
    D = "CRS PL1 + @wafer-detect"

    print(f"`make detect-eval` ({len(arecs)} attack requests, {len(brecs)} benign requests; blocked = status not 200)")
    classes = list(atk)
    idx = collections.defaultdict(list)
    for i, (k, _) in enumerate(arecs):
        idx[("class", k[0])].append(i)
        idx[("half", f"{k[0]} ({half(k[3])})")].append(i)
        if k[2] == "plain":
            idx[("place", k[1])].append(i)
        idx[("enc", k[2])].append(i)
    for kind, title, labels in [("class", "Attacks blocked per class (every placement and encoding)", classes),
                                ("half", "Attacks blocked per class, tuning half and check half (every placement and encoding)",
                                 [f"{c} ({h})" for c in classes for h in ("tune", "check")]),
                                ("place", "Attacks blocked per placement (plain payloads, every class)", PLACEMENTS),
                                ("enc", "Attacks blocked per encoding (in the query, every class)", ENCODINGS)]:
        table(title, res, labels, lambda l: len(idx[(kind, l)]), lambda l, c: sum(res[c][0][i][0] for i in idx[(kind, l)]))
    bidx = collections.defaultdict(list)
    for i, (k, _) in enumerate(brecs):
        bidx[k[0]].append(i)
    corpora = list(dict.fromkeys(k[0] for k, _ in brecs))
    table("Benign requests passed", res, corpora, lambda l: len(bidx[l]), lambda l, c: sum(res[c][1][i][0] for i in bidx[l]), benign=True)

    # Bars.
    extra = [i for i in range(len(brecs)) if res[D][1][i][0] and not res["CRS PL1"][1][i][0]]
    extra_real = [i for i in extra if brecs[i][0][0] == "realistic traffic"]
    print(f"\nBenign blocked by @wafer-detect beyond CRS PL1: {len(extra)} of {len(brecs)} ({100 * len(extra) / len(brecs):.3f}%), realistic traffic: {len(extra_real)}")
    fails = []
    for cls in classes:
        ii = idx[("class", cls)]
        rate = sum(res[D][0][i][0] for i in ii) / len(ii)
        if len(atk[cls]) >= 20 and rate < 0.97:
            fails.append(f"{cls}: {100 * rate:.1f}% < 97%")
    if len(extra) > 0.002 * len(brecs):
        fails.append(f"extra benign blocked {100 * len(extra) / len(brecs):.3f}% > 0.2%")
    if extra_real:
        fails.append(f"{len(extra_real)} realistic requests blocked")
    # The tuning half's misses are what to tune on; the check half's are for reading only.
    for h, fn in [("tune", "missed.txt"), ("check", "missed-check.txt")]:
        with open(os.path.join(a.out, fn), "w") as f:
            for i, (k, _) in enumerate(arecs):
                if not res[D][0][i][0] and half(k[3]) == h:
                    f.write(f"{k[0]}\t{k[1]}\t{k[2]}\t{k[3]!r}\n")
    with open(os.path.join(a.out, "benign-blocked.txt"), "w") as f:
        for i in extra:
            f.write(f"{brecs[i][0][0]}\t{res[D][1][i][1]}\t{brecs[i][0][1]!r}\n")
    print(f"missed attacks: {a.out}/missed.txt (tuning half), {a.out}/missed-check.txt (check half); benign blocked by @wafer-detect only: {a.out}/benign-blocked.txt")
    print("bars: " + ("all met" if not fails else "NOT met: " + "; ".join(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
