#!/usr/bin/env python3
"""The MULTIPART_* flags of wafer and of libmodsecurity (in process) on multipart bodies.

    .venv-oracle/bin/python tests/oracle/multipart_flags.py [BODIES.json]

BODIES.json (default multipart_bodies.json next to this file): a list of
[name, Content-Type, body as Latin-1]. One `SecRule <flag> "!@eq 0"` rule per flag (and
MULTIPART_UNMATCHED_BOUNDARY "@eq 1"); prints each body's flags on both sides and how many differ.
Needs target/release/wafer (WAFER_BIN) and the venv of run.sh.
"""
import base64, json, os, subprocess, sys, tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FLAGS = ["MULTIPART_STRICT_ERROR","REQBODY_PROCESSOR_ERROR","MULTIPART_BOUNDARY_QUOTED","MULTIPART_BOUNDARY_WHITESPACE",
 "MULTIPART_DATA_BEFORE","MULTIPART_DATA_AFTER","MULTIPART_HEADER_FOLDING","MULTIPART_LF_LINE","MULTIPART_MISSING_SEMICOLON",
 "MULTIPART_INVALID_QUOTING","MULTIPART_INVALID_PART","MULTIPART_INVALID_HEADER_FOLDING","MULTIPART_FILE_LIMIT_EXCEEDED",
 "MULTIPART_UNMATCHED_BOUNDARY","REQBODY_ERROR","MULTIPART_CRLF_LF_LINES"]
lines = ["SecRuleEngine DetectionOnly","SecRequestBodyAccess On"]
for i,f in enumerate(FLAGS):
    lines.append(f'SecRule {f} "!@eq 0" "id:{100+i},phase:2,pass,log"')
lines.append('SecRule MULTIPART_UNMATCHED_BOUNDARY "@eq 1" "id:200,phase:2,pass,log"')
cfg = {"directives_map":{"t":lines},"default_directives":"t"}
cfg_path = os.path.join(tempfile.mkdtemp(), "cfg.json")
json.dump(cfg, open(cfg_path, "w"))
cases = json.load(open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "multipart_bodies.json")))
reqs = []
for name, ct, body in cases:
    b = body.encode("latin1")
    raw = f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: {ct}\r\nContent-Length: {len(b)}\r\n\r\n".encode() + b
    reqs.append(json.dumps({"id":name,"raw":base64.b64encode(raw).decode()}))
inp = "\n".join(reqs)+"\n"
W = subprocess.run([os.environ.get("WAFER_BIN", os.path.join(REPO, "target/release/wafer")), "ids", cfg_path],input=inp,capture_output=True,text=True).stdout
M = subprocess.run([sys.executable, os.path.join(HERE, "modsec_ids.py"), cfg_path],input=inp,capture_output=True,text=True)
if M.returncode: print(M.stderr)
w = {j["id"]:j["ids"] for j in map(json.loads, W.splitlines())}
m = {j["id"]:j["ids"] for j in map(json.loads, M.stdout.splitlines())}
short = lambda ids: ",".join(FLAGS[i-100].replace("MULTIPART_","") for i in ids if 100<=i<200) + (" UB=1" if 200 in ids else "")
bad=0
for name,_,_ in cases:
    a, b = short(w.get(name,[])), short(m.get(name,[]))
    mark = "OK  " if a==b else "DIFF"
    bad += a!=b
    print(f"{mark} {name:30} wafer[{a}] modsec[{b}]")
print(bad, "differ")
