"""Differential test of @verifyCC, @verifySSN, @verifyCPF and @verifySVNR against ModSecurity v3.

Rules with these operators (several patterns each, with `capture`) and, after each, rules that
describe the captured TX:0 (its length, separators, first and last digit) run in both wafer
(`wafer ids`) and ModSecurity (modsec_ids.py) on generated query values: valid and invalid card,
SSN, CPF and SVNR numbers, with separators, inside text, several in one value, runs of digits.
Both must log the same rule ids for every request: the same verdict and the same candidate.

    python3 tests/oracle/operators.py [--wafer target/release/wafer] [--n 3000] [--seed S]

run.sh runs it after the CRS comparison (same venv). Ends with "N passed, N failed"; exit
status 1 on any disagreement.
"""

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

OPERATORS = [
    ("verifyCC", [r"\d{13,16}", r"\b(?:\d[ -]?){12,15}\d\b", r"^\d{4}-?\d{4}-?\d{4}-?\d{4}"]),
    ("verifySSN", [r"\d{3}-?\d{2}-?\d{4}", r"^\d{9}", r"\b\d{3}-\d{2}-\d{4}\b", r"\d+", r"(\d{3})-?(\d{2})-?(\d{4})"]),
    ("verifyCPF", [r"\d{3}\.?\d{3}\.?\d{3}-?\d{2}", r"\d{11,13}", r"^\d{11}"]),
    ("verifySVNR", [r"\d{4} ?\d{6}", r"\d{10,12}", r"\b\d{10}"]),
]
# What the captured TX:0 looks like (each a rule of its own, logged when TX:0 has it).
FINGERPRINTS = [r"^\d+$", r"-", r"\.", r"\x20", r"^.{9,10}$", r"^.{11,13}$", r"^.{14,}$", r"[13579]$", r"^[0-4]", r"^[^0-9]"]


def config():
    lines = ["SecRuleEngine DetectionOnly", "SecRequestBodyAccess On"]
    rid = 100000
    for op, patterns in OPERATORS:
        for p in patterns:
            rid += 100
            lines.append(f'SecAction "id:{rid},phase:1,pass,nolog,setvar:!tx.0"')
            lines.append(f'SecRule ARGS:v "@{op} {p}" "id:{rid + 1},phase:1,pass,log,capture"')
            for k, f in enumerate(FINGERPRINTS):
                lines.append(f'SecRule TX:0 "@rx {f}" "id:{rid + 10 + k},phase:1,pass,log"')
    return {"directives_map": {"ops": lines}, "default_directives": "ops"}


def luhn_digit(body):
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def cpf_digits(nine):
    d = [int(c) for c in nine]
    s = sum(x * w for x, w in zip(d, range(10, 1, -1)))
    d.append(0 if s % 11 < 2 else 11 - s % 11)
    s = sum(x * w for x, w in zip(d, range(11, 1, -1)))
    d.append(0 if s % 11 < 2 else 11 - s % 11)
    return "".join(map(str, d))


def svnr(rng):
    d = [rng.randrange(10) for _ in range(10)]
    s = d[0] * 3 + d[1] * 7 + d[2] * 9 + d[4] * 5 + d[5] * 8 + d[6] * 4 + d[7] * 2 + d[8] + d[9] * 6
    d[3] = 0 if s % 11 == 10 else s % 11
    return "".join(map(str, d))


def number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        n = rng.choice([13, 15, 16])
        body = "".join(rng.choice("0123456789") for _ in range(n - 1))
        return body + luhn_digit(body)
    if kind == 1:
        area = rng.choice([rng.randrange(1, 740), 0, 666, rng.randrange(740, 1000)])
        return f"{area:03d}-{rng.randrange(0, 100):02d}-{rng.randrange(0, 10000):04d}"
    if kind == 2:
        c = cpf_digits("".join(rng.choice("0123456789") for _ in range(9)))
        return rng.choice([c, f"{c[:3]}.{c[3:6]}.{c[6:9]}-{c[9:]}"])
    if kind == 3:
        s = svnr(rng)
        return rng.choice([s, f"{s[:4]} {s[4:]}"])
    if kind == 4:
        return rng.choice(["4111111111111111", "078-05-1120", "111.444.777-35", "1237 010180", "123456789", "111111111",
                           "0123456789", "8888888888", "01234567890", "99999999999"])
    return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 30)))


def mutate(rng, s):
    s = list(s)
    for _ in range(rng.randrange(0, 3)):
        if not s:
            break
        i = rng.randrange(len(s))
        op = rng.randrange(3)
        if op == 0:
            s[i] = rng.choice("0123456789")
        elif op == 1:
            del s[i]
        else:
            s.insert(i, rng.choice("0123456789 -.x"))
    return "".join(s)


def value(rng):
    parts = []
    for _ in range(rng.randrange(1, 4)):
        n = number(rng)
        if rng.random() < 0.4:
            n = mutate(rng, n)
        parts.append(n)
    seps = ["", " ", "x", "-", ".", " id ", "\n"]
    out = rng.choice(["", "card ", "a", "9", "-"])
    for p in parts:
        out += p + rng.choice(seps)
    return out


def corpus(n, seed):
    rng = random.Random(seed)
    for i in range(n):
        v = value(rng)
        raw = f"GET /?v={urllib.parse.quote(v, safe='')} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: oracle\r\nAccept: */*\r\n\r\n"
        yield {"id": f"op-{i}", "raw": base64.b64encode(raw.encode()).decode(), "value": v}


def run(cmd, items, who="operators"):
    """`cmd` (`wafer ids` or modsec_ids.py) on the requests `items`: the rule ids per request id."""
    inp = "".join(json.dumps({"id": it["id"], "raw": it["raw"]}) + "\n" for it in items)
    r = subprocess.run(cmd, input=inp, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return {o["id"]: o["ids"] for o in map(json.loads, r.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wafer", default=os.environ.get("WAFER_BIN", os.path.join(REPO, "target/release/wafer")))
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    items = list(corpus(a.n, a.seed))
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "ops.json")
        with open(cfg, "w") as f:
            json.dump(config(), f)
        wafer = run([a.wafer, "ids", cfg], items)
        modsec = run([sys.executable, os.path.join(HERE, "modsec_ids.py"), cfg], items)
    failed = [it for it in items if wafer.get(it["id"]) != modsec.get(it["id"])]
    matched = sum(1 for it in items if any(i % 100 == 1 for i in modsec.get(it["id"], [])))
    print(f"operators: {len(items)} values, {matched} with a verified number (ModSecurity)")
    for it in failed[: (len(failed) if a.verbose else 10)]:
        w, m = set(wafer.get(it["id"], [])), set(modsec.get(it["id"], []))
        print(f"  {it['id']} {it['value']!r}: wafer-only {sorted(w - m)} modsec-only {sorted(m - w)}")
    print(f"{len(items) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
