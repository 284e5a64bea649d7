"""Differential test of transformations against ModSecurity v3: the exact output bytes.

For each suite, generated query values go through the suite's transformation chain followed by
`t:hexEncode` in both wafer (`wafer ids`) and ModSecurity (modsec_ids.py). The hex text is read
back from the rule ids: rule 300000 + 16 * p + h is logged when hex digit p of the output is h
(`@rx ^.{p}h`), and rule 299999 when the output is empty. The same ids mean the same output
bytes; a difference is printed as both outputs, decoded from the ids.

Suites:
  html      t:htmlEntityDecode over entity names (the five ModSecurity decodes, HTML5 names that
            must stay as they are, any case), &#DDD; and &#xHH; forms (leading zeros, out of range,
            huge), missing semicolons, truncated entities, several in a row, text around.
  uni       t:urlDecodeUni on %uXXXX: every code unit of 0000-02ff, 2000-22ff, 3000-30ff, fe00-ffff,
            smart quotes, guillemets, full width forms in any case and with text around, random
            ones, invalid and truncated escapes.
  uni-map   the same with `SecUnicodeMapFile unicode.mapping 20127`, and every code unit 0000-ffff.
  js-map    t:jsDecode on \\uXXXX with the map (which it does not use).
  utf8, utf8-map  t:utf8toUnicode on UTF-8 text, without and with the map (which it does not use).
  crs-map   the CRS test setup (as compare.py) with the map, on ~300 SQLi/XSS payloads whose quotes
            and brackets (and some letters) are %u code units the map turns into them: the same
            rule ids in both (apart from 980170, which ModSecurity v3 never logs).
The map suites need ModSecurity's unicode.mapping for ModSecurity (UNICODE_MAPPING, default
/etc/nginx/unicode.mapping, from the Debian package libnginx-mod-http-modsecurity); wafer
embeds the table and reads no file. Without the file they are reported as skipped.

    python3 tests/oracle/transforms.py [--wafer target/release/wafer] [--suite html] [--n 2000]

run.sh runs it (same venv). Ends with "N passed, N failed"; exit status 1 on any difference.
"""

import argparse
import base64
import json
import os
import random
import sys
import tempfile
import urllib.parse

import operators  # tests/oracle/operators.py: run (wafer ids / modsec_ids.py on requests)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

HEX = "0123456789abcdef"
BASE_ID = 300000
EMPTY_ID = 299999


def config(chain, max_out, extra=()):
    """Rules that spell the hex of `chain`'s output of ARGS:v as rule ids."""
    t = ",".join(f"t:{x}" for x in ["none", *chain, "hexEncode"])
    lines = ["SecRuleEngine DetectionOnly", *extra]
    lines.append(f'SecRule ARGS:v "@rx ^$" "id:{EMPTY_ID},phase:1,pass,log,{t}"')
    for p in range(2 * max_out):
        for h, c in enumerate(HEX):
            lines.append(f'SecRule ARGS:v "@rx ^.{{{p}}}{c}" "id:{BASE_ID + 16 * p + h},phase:1,pass,log,{t}"')
    return {"directives_map": {"t": lines}, "default_directives": "t"}


def decode_ids(ids):
    """The output bytes the ids spell (None if they do not spell one string)."""
    if ids == [EMPTY_ID]:
        return b""
    digits = {}
    for i in ids:
        if i < BASE_ID:
            return None
        p, h = divmod(i - BASE_ID, 16)
        if p in digits:
            return None
        digits[p] = HEX[h]
    s = "".join(digits.get(p, "?") for p in range(len(digits)))
    if "?" in s or len(s) % 2:
        return None
    return bytes.fromhex(s)


# -- t:htmlEntityDecode ----------------------------------------------------------

DECODED_NAMES = ["quot", "amp", "lt", "gt", "nbsp"]
# HTML5 (and HTML 4) names ModSecurity 3.0.15 keeps as they are.
OTHER_NAMES = ["colon", "lpar", "rpar", "period", "equals", "NewLine", "Tab", "apos", "excl", "num", "dollar",
               "percnt", "ast", "plus", "comma", "sol", "semi", "quest", "commat", "lsqb", "rsqb", "bsol", "lowbar",
               "grave", "lcub", "rcub", "verbar", "copy", "reg", "euro", "hellip", "lsquo", "rsquo", "ldquo", "rdquo",
               "laquo", "raquo", "iexcl", "shy", "auml", "Auml", "eacute", "AMP", "LT", "GT", "QUOT", "Quot"]
FILLER = ["", "", "a", "x", " ", ";", "&", "#", "1", "z9", "<", "\xe9", "\x00"]


def case_variant(rng, name):
    k = rng.randrange(4)
    if k == 0:
        return name
    if k == 1:
        return name.upper()
    if k == 2:
        return name.capitalize()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)


def number_text(rng, hexa):
    k = rng.randrange(8)
    if k == 0:
        v = rng.randrange(0, 128)
    elif k == 1:
        v = rng.randrange(128, 256)
    elif k == 2:
        v = rng.randrange(256, 0x110000)
    elif k == 3:
        v = rng.choice([0, 9, 10, 13, 32, 34, 38, 39, 40, 41, 58, 59, 60, 62, 160, 255, 256, 257, 0x2018, 0xff0e])
    elif k == 4:
        v = rng.choice([2**31 - 1, 2**31, 2**32, 2**32 + 65, 2**63 - 1, 2**63, 2**64 + 60])
    elif k == 5:
        return rng.choice(["9" * 25, "1" * 19, "0" * 12 + "65"]) if not hexa else rng.choice(["f" * 20, "0" * 10 + "3c", "1" * 17])
    elif k == 6:
        v = rng.randrange(0, 100000)
    else:
        v = rng.randrange(0, 4096)
    s = format(v, "x") if hexa else str(v)
    if rng.random() < 0.2:
        s = "0" * rng.randrange(1, 4) + s
    if hexa and rng.random() < 0.5:
        s = s.upper() if rng.random() < 0.5 else "".join(c.upper() if rng.random() < 0.5 else c for c in s)
    return s


def entity(rng):
    k = rng.randrange(10)
    semi = ";" if rng.random() < 0.7 else ""
    if k <= 2:
        return "&" + case_variant(rng, rng.choice(DECODED_NAMES)) + semi
    if k <= 4:
        return "&" + rng.choice(OTHER_NAMES) + semi
    if k == 5:
        return "&#" + number_text(rng, False) + semi
    if k == 6:
        return "&#" + rng.choice("xX") + number_text(rng, True) + semi
    if k == 7:
        # a decoded name run into more alphanumerics (&ltest;, &amp1;)
        return "&" + rng.choice(DECODED_NAMES) + rng.choice(["est", "1", "x", "a9", "S"]) + semi
    if k == 8:
        return rng.choice(["&", "&;", "&#", "&#;", "&#x", "&#X", "&#x;", "&#xg;", "&#-1;", "&#+65;", "&# 65;",
                           "&#x 41;", "&&amp;", "&#&#65;", "&#65&#66", "& amp;", "&am", "&l", "&#6", "&#x4"])
    # truncated: a cut-off entity at the end of the value
    full = rng.choice(["&quot;", "&amp;", "&nbsp;", "&#65;", "&#x41;", "&#X3C;", "&colon;", "&#0060;"])
    return full[: rng.randrange(1, len(full))]


def html_values(rng, n):
    fixed = ["&" + x + s for x in DECODED_NAMES + OTHER_NAMES for s in (";", "")]
    fixed += ["&#" + str(v) + ";" for v in (0, 1, 9, 10, 34, 38, 60, 62, 65, 127, 128, 160, 255, 256, 321, 65601)]
    fixed += ["&#x" + format(v, "x") + ";" for v in (0, 0x22, 0x26, 0x3c, 0x41, 0x7f, 0x80, 0xa0, 0xff, 0x100, 0x141)]
    fixed += ["", "&", "&&", "a&b", "&;", "&#", "&#x", "&#X", "&#;", "&#x;", "&lt", "&ltest;", "&#65", "&#x41",
              "&#99999999999999999999;", "&#xffffffffffffffffff;", "&ltest;", "&amp1;", "&quotx", "&quotS;x&gtS;1&Nbspx",
              "&l&lz9&am&amx&nbs;&g", "&ltgt;&gtlt", "&nbspamp;", "&AMPLT;"]
    for v in fixed:
        yield v
    for _ in range(max(0, n - len(fixed))):
        out = rng.choice(FILLER)
        for _ in range(rng.randrange(1, 4)):
            out += entity(rng) + rng.choice(FILLER)
        yield out[:40]


# -- t:urlDecodeUni / t:utf8toUnicode, with and without SecUnicodeMapFile ----------

# ModSecurity needs the file (wafer embeds its code page 20127 table); the Debian package
# libnginx-mod-http-modsecurity installs it here.
UNICODE_MAPPING = os.environ.get("UNICODE_MAPPING", "/etc/nginx/unicode.mapping")
MAP_DIRECTIVE = [f"SecUnicodeMapFile {UNICODE_MAPPING} 20127"]
# Code points the 20127 best-fit table maps (smart quotes, guillemets, dotless i, full width...)
INTERESTING = [0x00ab, 0x00bb, 0x0131, 0x2018, 0x2019, 0x201c, 0x201d, 0x2032, 0x2039, 0x203a, 0x02bc, 0x02c6, 0x02dc,
               0xff0e, 0xff1c, 0xff1e, 0xff07, 0xff02, 0xff5e, 0xff5f, 0xff00, 0x00a0, 0x00ff, 0x0100, 0x0000, 0x0041,
               0x0141, 0x2044, 0x2215, 0x2216, 0x2260, 0x3008, 0x3009, 0xfe64, 0xfe65, 0x1d00, 0x0410, 0xfffd, 0xffff]


def uni_values(rng, n):
    """%uXXXX escapes: every code unit of 0000-02ff, 2000-22ff, 3000-30ff, fe00-ffff, the interesting
    ones in any case and with text around, random ones, invalid and truncated escapes."""
    cps = list(range(0x0000, 0x0300)) + list(range(0x2000, 0x2300)) + list(range(0x3000, 0x3100)) + list(range(0xfe00, 0x10000))
    for c in cps:
        yield f"%u{c:04x}"
    for c in INTERESTING:
        yield f"%U{c:04X}"
        yield f"a%u{c:04x}b%{c & 0xff:02x}"
    for v in ["%u", "%u1", "%u12", "%u123", "%u12g4", "%uff0", "%%uff0e", "%u%uff0e", "+%2b%uFF0E"]:
        yield v
    for _ in range(max(0, n - len(cps) - 2 * len(INTERESTING))):
        c = rng.choice([rng.randrange(0x10000), rng.choice(INTERESTING), rng.randrange(0xff00, 0x10000)])
        h = f"{c:04x}"
        h = "".join(x.upper() if rng.random() < 0.3 else x for x in h)
        yield rng.choice(["", "x", "%41", " "]) + "%" + rng.choice("uU") + h + rng.choice(["", "'", "%u0027", "1"])


def uni_all_values(rng, n):
    """Every %uXXXX code unit, then uni_values."""
    for c in range(0x10000):
        yield f"%u{c:04x}"
    yield from uni_values(rng, n)


def js_values(rng, n):
    """\\uXXXX escapes for t:jsDecode (which ModSecurity decodes without the map)."""
    for c in INTERESTING + [rng.randrange(0x10000) for _ in range(n // 4)]:
        yield f"\\u{c:04x}"
        yield f"a\\u{c:04X}'"


def utf8_values(rng, n):
    """UTF-8 text (the code points of uni_values) for t:utf8toUnicode."""
    for c in INTERESTING + [rng.randrange(0x80, 0xd800) for _ in range(n // 2)]:
        if c:
            yield chr(c).encode()
            yield b"a" + chr(c).encode() + b"'"


SUITES = {
    # name: (transformation chain, value generator, longest output in bytes, extra directives)
    "html": (["htmlEntityDecode"], html_values, 40, []),
    "uni": (["urlDecodeUni"], uni_values, 8, []),
    "uni-map": (["urlDecodeUni"], uni_all_values, 8, MAP_DIRECTIVE),
    "js-map": (["jsDecode"], js_values, 8, MAP_DIRECTIVE),
    "utf8": (["utf8toUnicode"], utf8_values, 16, []),
    "utf8-map": (["utf8toUnicode"], utf8_values, 16, MAP_DIRECTIVE),
}


def raw_bytes(v):
    """The value's bytes (str values: latin-1, UTF-8 beyond)."""
    if isinstance(v, bytes):
        return v
    try:
        return v.encode("latin-1")
    except UnicodeEncodeError:
        return v.encode("utf-8")


def request(v):
    q = urllib.parse.quote(raw_bytes(v), safe="")
    return f"GET /?v={q} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: oracle\r\nAccept: */*\r\n\r\n"


def run(cmd, items):
    return operators.run(cmd, items, "transforms")


def run_suite(name, wafer_bin, n, seed, verbose):
    chain, gen, max_out, extra = SUITES[name]
    if extra is MAP_DIRECTIVE and not os.path.isfile(UNICODE_MAPPING):
        print(f"transforms {name}: SKIPPED, ModSecurity needs {UNICODE_MAPPING} (set UNICODE_MAPPING; "
              "apt-get download libnginx-mod-http-modsecurity has it)")
        return True
    rng = random.Random(seed)
    values = list(dict.fromkeys(gen(rng, n)))
    items = [{"id": f"{name}-{i}", "value": v, "raw": base64.b64encode(request(v).encode()).decode()}
             for i, v in enumerate(values)]
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "t.json")
        with open(cfg, "w") as f:
            json.dump(config(chain, max_out, extra), f)
        wafer = run([wafer_bin, "ids", cfg], items)
        modsec = run([sys.executable, os.path.join(HERE, "modsec_ids.py"), cfg], items)
    failed = []
    unreadable = 0
    changed = 0
    for it in items:
        w, m = wafer.get(it["id"]), modsec.get(it["id"])
        mo = decode_ids(m or [])
        if mo is None:
            unreadable += 1
        elif mo != raw_bytes(it["value"]):
            changed += 1
        if w != m or mo is None:
            failed.append((it, decode_ids(w or []), mo))
    print(f"transforms {name} (t:{',t:'.join(chain)}): {len(items)} values, {changed} changed by ModSecurity"
          + (f", {unreadable} with an output longer than {max_out} bytes or unreadable" if unreadable else ""))
    for it, wo, mo in failed[: (len(failed) if verbose else 10)]:
        print(f"  {it['id']} {it['value']!r}: wafer {wo!r} modsec {mo!r}")
    print(f"{len(items) - len(failed)} passed, {len(failed)} failed")
    return not failed


# -- the CRS with the map ----------------------------------------------------------

CRS_PAYLOADS = ["' or 1=1--", "1' union select 1,2--", "<script>alert(1)</script>", "x') or ('1'='1", "admin'--",
                "<img src=x onerror=alert(1)>", "\" or \"\"=\"", "1' and sleep(5)#", "<svg/onload=alert(1)>",
                "'; drop table users; --", "<a href=\"javascript:alert(1)\">x</a>", "1\" or 1=1 limit 1 -- -",
                "../../etc/passwd", "a'b", "<b>bold</b>", "it's fine", "\"hello\"", "1<2"]


def best_fit_forms():
    """byte -> the %u code units wafer's embedded 20127 table maps to it (read from the table)."""
    import re
    text = open(os.path.join(REPO, "src", "transforms", "unicode_map_20127.rs"), encoding="utf-8").read()
    forms = {}
    for code, byte in re.findall(r"\(0x([0-9a-f]{4}), 0x([0-9a-f]{2})\)", text):
        forms.setdefault(chr(int(byte, 16)), []).append(code)
    return forms


def crs_map(wafer_bin, n, seed, verbose):
    """CRS test setup with SecUnicodeMapFile: payloads whose quotes, brackets, letters are
    written as %u code units of the map (as an attacker evading a CRS without it would)."""
    if not os.path.isfile(UNICODE_MAPPING):
        print(f"transforms crs-map: SKIPPED, ModSecurity needs {UNICODE_MAPPING}")
        return True
    sys.path.insert(0, HERE)
    import modsec_ids
    rng = random.Random(seed)
    forms = best_fit_forms()
    values = []
    for _ in range(n):
        p = rng.choice(CRS_PAYLOADS)
        values.append("".join("%u" + rng.choice(forms[c]) if c in forms and (c in "'\"<>" or rng.random() < 0.2) else
                              urllib.parse.quote(c, safe="") for c in p))
    values = list(dict.fromkeys(values))
    cfg = modsec_ids.test_setup_config()
    cfg["directives_map"]["crs-test"] = MAP_DIRECTIVE + cfg["directives_map"]["crs-test"]
    items = [{"id": f"crs-{i}", "value": v, "raw": base64.b64encode(
        f"GET /?q={v} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: oracle\r\nAccept: */*\r\n\r\n".encode()).decode()}
        for i, v in enumerate(values)]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "crs.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        wafer = run([wafer_bin, "ids", path], items)
        modsec = run([sys.executable, os.path.join(HERE, "modsec_ids.py"), path], items)
    failed = []
    detected = 0
    for it in items:
        # ModSecurity v3 never logs 980170 (known_differences.yaml).
        w = [i for i in wafer.get(it["id"], []) if i != 980170]
        m = modsec.get(it["id"], [])
        detected += any(941000 <= i < 943000 for i in m)
        if w != m:
            failed.append((it, sorted(set(w) - set(m)), sorted(set(m) - set(w))))
    print(f"transforms crs-map (CRS test setup + SecUnicodeMapFile): {len(items)} requests, {detected} with an "
          "XSS or SQLi rule (ModSecurity)")
    for it, wo, mo in failed[: (len(failed) if verbose else 10)]:
        print(f"  {it['id']} {it['value']!r}: wafer-only {wo} modsec-only {mo}")
    print(f"{len(items) - len(failed)} passed, {len(failed)} failed")
    return not failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wafer", default=os.environ.get("WAFER_BIN", os.path.join(REPO, "target/release/wafer")))
    ap.add_argument("--suite", action="append", choices=sorted(SUITES) + ["crs-map"], help="default: all")
    ap.add_argument("--n", type=int, default=2000, help="values per suite")
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    ok = True
    for name in a.suite or list(SUITES) + ["crs-map"]:
        if name == "crs-map":
            ok &= crs_map(a.wafer, 300, a.seed, a.verbose)
        else:
            ok &= run_suite(name, a.wafer, a.n, a.seed, a.verbose)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
