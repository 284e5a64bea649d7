"""Differential test of @detectXSS and @detectSQLi against ModSecurity v3 (the libinjection it bundles).

Three rules run in both wafer (`wafer ids`) and ModSecurity (modsec_ids.py) on generated query values:
rule 1 `@detectXSS`, rule 2 `@detectSQLi` with `capture`, and rules that spell the captured
fingerprint (TX:0) as rule ids (300000 + 16 * p + h when hex digit p of the fingerprint is h, as
in transforms.py). The same ids mean the same XSS verdict, the same SQLi verdict and the same
fingerprint.

Suites:
  xss-names   event-handler attribute names: the HTML, DOM, SVG, WebKit and Gecko event names below
              (and names that are no event) in tags, quoted and unquoted, any case, one letter shorter
              and longer, with a NUL inside, too short (under 5 bytes); every name of 1-3 letters;
              the other attribute lists (URL, style, indirect) and the tag list.
  xss-random  random HTML-like text (tags, attributes, quotes, comments, entities, doctype).
  sqli-sci    MySQL scientific-notation forms (libinjection PR #60: `1.e`, `1.E`, `.e`, `1.5e`,
              `1e`, `1.e1`, `1.e+`) in every context: around parentheses, commas, operators,
              strings, comments, functions, UNION/SELECT, quotes before and after.
  sqli-random random SQL-like token sequences (numbers with and without exponents among them).
  vectors     the inputs of libinjection's own unit tests (../shared/libinjection-tests/tests, when
              present), through both operators.

    python3 tests/oracle/libinjection.py [--wafer target/release/wafer] [--suite xss-names] [-v]

run.sh runs it (same venv). Ends with "N passed, N failed"; exit status 1 on any difference.
"""

import argparse
import base64
import glob
import itertools
import json
import os
import random
import string
import sys
import tempfile

import operators  # tests/oracle/operators.py: run (wafer ids / modsec_ids.py on requests)
from transforms import raw_bytes, request  # a value's bytes, and the GET carrying it as ?v=

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

HEX = "0123456789abcdef"
XSS_ID, SQLI_ID, FP_BASE = 1, 2, 300000
FP_MAX = 8  # fingerprints have at most 5 characters


def config():
    lines = ["SecRuleEngine DetectionOnly",
             f'SecRule ARGS:v "@detectXSS" "id:{XSS_ID},phase:1,pass,log,t:none"',
             f'SecRule ARGS:v "@detectSQLi" "id:{SQLI_ID},phase:1,pass,log,capture,t:none"']
    for p in range(2 * FP_MAX):
        for h, c in enumerate(HEX):
            lines.append(f'SecRule TX:0 "@rx ^.{{{p}}}{c}" "id:{FP_BASE + 16 * p + h},phase:1,pass,log,t:none,t:hexEncode"')
    return {"directives_map": {"li": lines}, "default_directives": "li"}


def verdict(ids):
    """(xss, sqli fingerprint or None) from the logged ids ("?" when they spell no fingerprint)."""
    ids = ids or []
    digits = {}
    for i in ids:
        if i >= FP_BASE:
            p, h = divmod(i - FP_BASE, 16)
            digits[p] = HEX[h]
    fp = None
    if SQLI_ID in ids:
        s = "".join(digits.get(p, "?") for p in range(len(digits)))
        try:
            fp = bytes.fromhex(s).decode("latin-1")
        except ValueError:
            fp = "?" + s
    return (XSS_ID in ids, fp)


# -- @detectXSS: attribute and tag names -----------------------------------------------

# Event names (without "on"): HTML, DOM, UI Events, Pointer/Touch, CSS animations and
# transitions, media, clipboard, drag and drop, forms, window, workers, WebRTC, WebXR,
# payment, SVG/SMIL, WebKit and Gecko specific ones.
EVENTS = """
abort activate active addsourcebuffer addstream addtrack afterpaint afterprint afterscriptexecute
animationcancel animationend animationiteration animationstart appinstalled audiocomplete audioend
audioprocess audiostart autocomplete autocompleteerror auxclick backgroundfetchabort
backgroundfetchclick backgroundfetchfail backgroundfetchsuccess beforeactivate beforecopy beforecut
beforeinput beforeinstallprompt beforeload beforematch beforepaste beforeprint beforescriptexecute
beforetoggle beforeunload beforexrselect begin beginevent blocked blur boundary bufferedamountlow
bufferedchange cached cancel canplay canplaythrough change characteristicvaluechanged chargingchange
chargingtimechange checking click close closing command complete compositionchange compositionend
compositionstart compositionupdate configurationchange connect connecting connectionstatechange
contentvisibilityautostatechange contextlost contextmenu contextrestored controllerchange
cookiechange coordinatorstatechange copy couponcodechanged cuechange currentchange currententrychange
cut dataavailable datachannel dblclick dequeue devicechange devicelight devicemotion
deviceorientation deviceorientationabsolute deviceproximity dischargingtimechange disconnect dispose
domactivate domattrmodified domcharacterdatamodified domcontentloaded domfocusin domfocusout
domnodeinserted domnodeinsertedintodocument domnoderemoved domnoderemovedfromdocument
domsubtreemodified downloading drag dragend dragenter dragexit dragleave dragover dragstart drop
durationchange edgeuicanceled edgeuicompleted edgeuistarted editorbeforeinput editorinput emptied
encrypted end ended endevent endstreaming enter enterpictureinpicture error exit fencedtreeclick
fetch finish focus focusin focusout formchange formcheckboxstatechange formdata forminput
forminvalid formradiostatechange formreset formselect formsubmit fullscreenchange fullscreenerror
gamepadaxismove gamepadbuttondown gamepadbuttonup gamepadconnected gamepaddisconnected
gatheringstatechange gesturechange gestureend gesturescrollend gesturescrollstart gesturescrollupdate
gesturestart gesturetap gesturetapdown gotpointercapture hashchange icecandidate icecandidateerror
iceconnectionstatechange icegatheringstatechange imageabort inactive input inputsourceschange
install invalid invoke keydown keypress keystatuseschange keyup languagechange
leavepictureinpicture legacyattrmodified legacycharacterdatamodified legacydomactivate
legacydomfocusin legacydomfocusout legacymouselineorpagescroll legacymousepixelscroll
legacynodeinserted legacynodeinsertedintodocument legacynoderemoved legacynoderemovedfromdocument
legacysubtreemodified legacytextinput levelchange load loadeddata loadedmetadata loadend
loadingdone loadingerror loading loadstart lostpointercapture magnifygesture magnifygesturestart
magnifygestureupdate mark mediarecorderdataavailable mediarecorderstop mediarecorderwarning
merchantvalidation message messageerror mousedoubleclick mousedown mouseenter mouseexplorebytouch
mousehittest mouseleave mouselongtap mousemove mouseout mouseover mouseup mousewheel
mozfullscreenchange mozfullscreenerror mozpointerlockchange mozpointerlockerror mozvisualresize
mozvisualscroll mute navigate navigateerror navigatesuccess negotiationneeded nexttrack nomatch
notificationclick notificationclose noupdate obsolete offline online open orientationchange
overconstrained overflowchanged overscroll pagehide pagereveal pageshow pageswap paste pause
payerdetailchange paymentauthorized paymentmethodchange paymentmethodselected play playing
pointerauxclick pointercancel pointerclick pointerdown pointerenter pointergotcapture pointerleave
pointerlockchange pointerlockerror pointerlostcapture pointermove pointerout pointerover
pointerrawupdate pointerup popstate presstapgesture prerenderingchange previoustrack processorerror
progress propertychange push pushnotification pushsubscriptionchange qualitychange ratechange
readystatechange redraw rejectionhandled release remove removesourcebuffer removestream removetrack
repeat repeatevent reset resize resourcetimingbufferfull result resume rotategesture
rotategesturestart rotategestureupdate rtctransform scroll scrollend scrolledareachanged
scrollportoverflow scrollportunderflow scrollsnapchange scrollsnapchanging search
securitypolicyviolation seeked seeking select selectedcandidatepairchange selectend selectionchange
selectstart shippingaddresschange shippingcontactselected shippingmethodselected shippingoptionchange
show signalingstatechange slotchange smilbeginevent smilendevent smilrepeatevent sort soundend
soundstart sourceclose sourceended sourceopen speechend speechstart squeeze squeezeend squeezestart
stalled start started startstreaming statechange stop storage submit success suspend svgabort
svgerror svgload svgresize svgscroll svgunload svgzoom swipegesture swipegestureend
swipegesturemaystart swipegesturestart swipegestureupdate tapgesture textinput timeout timeupdate
toggle tonechange touchcancel touchend touchforcechange touchmove touchstart track transitioncancel
transitionend transitionrun transitionstart uncapturederror unhandledrejection unidentifiedevent
unload unmute update updateend updatefound updateready updatestart upgradeneeded userproximity
validatemerchant versionchange visibilitychange voiceschanged volumechange vrdisplayactivate
vrdisplayconnect vrdisplaydeactivate vrdisplaydisconnect vrdisplaypresentchange waiting
waitingforkey webglcontextchanged webglcontextcreationerror webglcontextlost webglcontextrestored
webkitanimationend webkitanimationiteration webkitanimationstart webkitassociateformcontrols
webkitautofillrequest webkitbeforetextinserted webkitbeginfullscreen
webkitcurrentplaybacktargetiswirelesschanged webkitendfullscreen webkitfullscreenchange
webkitfullscreenerror webkitkeyadded webkitkeyerror webkitkeymessage
webkitmediasessionmetadatachanged webkitmouseforcechanged webkitmouseforcedown webkitmouseforceup
webkitmouseforcewillbegin webkitneedkey webkitnetworkinfochange
webkitplaybacktargetavailabilitychanged webkitpresentationmodechanged webkitregionoversetchange
webkitremovesourcebuffer webkitshadowrootattached webkitsourceclose webkitsourceended
webkitsourceopen webkitspeechchange webkittransitionend webkitwillrevealbottom webkitwillrevealleft
webkitwillrevealright webkitwillrevealtop wheel writeend writestart write xulbroadcast
xulcommandupdate xulpopuphidden xulpopuphiding xulpopupshowing xulpopupshown xulsystemstatusbarclick
zoom
""".split()
# Attribute names that are no event handler (some start with "on").
OTHER_ATTRS = """
id class title name value type href src style action formaction background data datasrc dynsrc
lowsrc poster folder filter attributename by from to values handler xmlns xlink xlink:href
xmlns:xlink srcdoc srcset content http-equiv target rel alt width height one only onion ontology
onward onyx once ontario onz on onx ono
""".split()
TAGS = """
a b i p x abbr applet audio base body comment div embed form frame frameset handler iframe img
import input isindex link listener marquee math meta noscript object script select style svg svgx
svg:svg table textarea video vmlframe xml xss xsl xslt xmp template
""".split()


def case_variant(rng, name):
    k = rng.randrange(3)
    if k == 0:
        return name.lower()
    if k == 1:
        return name.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)


def xss_name_values(rng, n):
    names = list(dict.fromkeys(EVENTS))
    for e in names:
        yield f"<x on{e}=alert(1)>"
        yield f'<a ON{e.upper()}="x">'
        yield f"<img src=x on{case_variant(rng, e)}=1>"
        yield f'" on{e}=alert(1) x="'
        yield f"' on{e}=a"
        yield f"<x on{e[:-1]}=1>"            # one letter shorter
        yield f"<x on{e}x=1>"                # one letter longer
        yield f"<x on{e}>"                   # no value
        yield f"<x on{e[:2]}\x00{e[2:]}=1>"   # a NUL inside the name
        yield f"<svg><x attributename=on{e}>"  # the name as an attribute value (indirect)
    for a in OTHER_ATTRS:
        for v in ("alert(1)", "javascript:alert(1)", "data:x", " vbscript:x", "&#106;avascript:x", "x"):
            yield f"<x {a}={v}>"
            yield f"<x {a.upper()}=\"{v}\">"
    for t in TAGS:
        yield f"<{t}>"
        yield f"<{t.upper()} x=1>"
        yield f"</{t}>"
    # too short for an event name (the attribute must have 5 bytes or more)
    for e in ("onab", "oncut", "onend", "onx", "on", "oncu", "oncopy", "onplay"):
        yield f"<x {e}=1>"
    # every name of 1 to 3 letters after "on" (with two more bytes for 1-2 letters: the attribute
    # must have 5 bytes or more)
    for k in (1, 2, 3):
        for t in itertools.product(string.ascii_lowercase, repeat=k):
            yield f"<x on{''.join(t)}{'_0' if k < 3 else ''}=1>"


def xss_random_values(rng, n):
    parts = ["<", ">", "</", "/>", "=", "'", '"', "`", " ", "\t", "\n", "\x00", "<!--", "-->", "<!", "<?", "?>",
             "<!DOCTYPE", "&#106;", "&#x6a;", "&lt;", "&", "javascript:", "data:", "vbscript:", "x", "a", "img",
             "src", "href", "style", "onload", "onauxclick", "onpointerrawupdate", "onfocusin", "ondomfocusin",
             "onx", "script", "svg", "xmlns", "attributename", "[if", "xml", "import", "ENTITY", "alert(1)", "b",
             "foo", "1", "\xe9", "\x0b", "\x0c", "\r", "/", "'/", "div"]
    for _ in range(n):
        yield "".join(rng.choice(parts) for _ in range(rng.randrange(1, 14)))


# -- @detectSQLi ---------------------------------------------------------------------------

SCI = ["1.e", "1.E", "1.5e", "10.10E", ".e", ".E", "1e", "1E", "1.e1", "1.e+", "1.e-", "1.e+1", "1.5e-3", "0.e",
       "9.e", "1.ee", "1.e.e", "1.e_", "1.eunion", "0x1.e", "1..e", "1.ed", "1.ef", "1.eD", "1.2f", "1.e(", "1.e'"]
SCI_CONTEXTS = [
    "{n}(1)", "{n}(ascii {n}(substring({n}(select password from users limit 1 {n},1 {n}) {n},1 {n},1 {n}){n}){n}) = 70 or'1'='2",
    "1' or {n}(1)", "1' or {n}(1)--", "1' or {n}(1)='1", "' or {n}(1)=1#", "1 {n}/1", "1 {n},1", "{n},1", "{n})",
    "{n}", "x{n}", "{n}x", "'{n}'", "\"{n}\"", "{n} union select 1", "1 {n}union select 1,2", "1{n} or 1=1",
    "1' {n}and 1=1 --", "{n}/**/or 1=1", "1 or {n}/*x*/1=1", "select {n}(version())", "1 and {n}sleep(5)",
    "1' and {n}(select 1)='1", "{n}{n}{n}", "{n} {n} {n}", "1,{n}(1)", "concat({n}(1),{n})", "-{n}", "+{n}(1)",
    "{n};drop table x", "{n}) or (1=1", "'){n} or ('1'='1", "@{n}", "{n}@@version", "{n}-- x", "{n}#x",
    "a={n}&b=1", "1 = {n}", "({n})", "{n}(", "1'{n}", "\"{n}(1)", "1 union {n}(select 1)",
]


def sqli_sci_values(rng, n):
    for ctx in SCI_CONTEXTS:
        for s in SCI:
            yield ctx.replace("{n}", s)
    for _ in range(n):
        ctx = rng.choice(SCI_CONTEXTS)
        out = ""
        while "{n}" in ctx:
            head, ctx = ctx.split("{n}", 1)
            out += head + rng.choice(SCI)
        yield out + ctx


def sqli_random_values(rng, n):
    toks = ["1", "0", "1.e", "1.E", "2.5e", ".e", "1e5", "1.2f", "0x1f", "0b1", "$1", "'", "\"", "`", "'a'", "\"b\"",
            "(", ")", ",", ";", "=", "<>", "!=", "||", "&&", "-", "+", "*", "/", "%", ".", ":", "@", "@@version",
            "@x", "#", "--", "-- ", "/*", "*/", "/*!", "{", "}", "\\", "select", "union", "all", "or", "and", "not",
            "from", "where", "sleep", "ascii", "substring", "char", "concat", "version", "users", "x", "a", "null",
            "like", "in", "between", "case", "when", "then", "end", "order by", "group by", "limit", "exec",
            "waitfor delay", "declare", "\n", " ", "  ", "\t", "\x00", "\xa0", "N'", "x'41'", "b'1'", "e'", "U&"]
    for _ in range(n):
        out = ""
        for _ in range(rng.randrange(1, 10)):
            out += rng.choice(toks) + rng.choice(["", "", " ", " "])
        yield out


def vector_values(rng, n):
    d = os.environ.get("LIBINJECTION_TESTS", os.path.join(REPO, "..", "shared", "libinjection-tests", "tests"))
    for path in sorted(glob.glob(os.path.join(d, "*.txt"))):
        data = open(path, "rb").read()
        try:
            inp = data.split(b"--INPUT--\n", 1)[1].split(b"\n--EXPECTED--", 1)[0].rstrip(b" \t\r\n")
        except IndexError:
            continue
        yield inp


SUITES = {
    "xss-names": (xss_name_values, 0),
    "xss-random": (xss_random_values, 4000),
    "sqli-sci": (sqli_sci_values, 2000),
    "sqli-random": (sqli_random_values, 4000),
    "vectors": (vector_values, 0),
}


def run_suite(name, wafer_bin, seed, verbose):
    gen, n = SUITES[name]
    rng = random.Random(seed)
    values = list(dict.fromkeys(gen(rng, n)))
    items = [{"id": f"{name}-{i}", "value": v, "raw": base64.b64encode(request(v).encode()).decode()}
             for i, v in enumerate(values)]
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "li.json")
        with open(cfg, "w") as f:
            json.dump(config(), f)
        wafer = operators.run([wafer_bin, "ids", cfg], items, "libinjection")
        modsec = operators.run([sys.executable, os.path.join(HERE, "modsec_ids.py"), cfg], items, "libinjection")
    failed = []
    xss = sqli = 0
    for it in items:
        w, m = verdict(wafer.get(it["id"])), verdict(modsec.get(it["id"]))
        xss += m[0]
        sqli += m[1] is not None
        if w != m or (m[1] or "").startswith("?"):
            failed.append((it, w, m))
    print(f"libinjection {name}: {len(items)} values, ModSecurity: {xss} XSS, {sqli} SQLi")
    for it, w, m in failed[: (len(failed) if verbose else 10)]:
        print(f"  {it['id']} {it['value']!r}: wafer xss={w[0]} sqli={w[1]!r}  modsec xss={m[0]} sqli={m[1]!r}")
    print(f"{len(items) - len(failed)} passed, {len(failed)} failed")
    return not failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wafer", default=os.environ.get("WAFER_BIN", os.path.join(REPO, "target/release/wafer")))
    ap.add_argument("--suite", action="append", choices=list(SUITES), help="default: all")
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    ok = True
    for name in a.suite or list(SUITES):
        ok &= run_suite(name, a.wafer, a.seed, a.verbose)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
