#!/usr/bin/env python3
"""Writes the oracle's requests (the CRS test stages and their generated variants, as
compare.py sends them to both engines) as JSON lines {id, raw (base64)}: for `wafer differential`.

    tests/oracle/requests_jsonl.py OUT.jsonl [--variants N] [--seed S]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--wafer", default=os.environ.get("WAFER_BIN", os.path.join(HERE, "..", "..", "target", "release", "wafer")))
    ap.add_argument("--crs", default=os.environ.get("CRS_DIR", os.path.join(HERE, "..", "..", "..", "shared", "coreruleset")))
    ap.add_argument("--variants", type=int, default=int(os.environ.get("ORACLE_VARIANTS", "5000")))
    ap.add_argument("--seed", type=int, default=20261129)
    a = ap.parse_args()
    suite = corpus.suite_requests(a.wafer, a.crs)
    reqs = suite + (corpus.variants(suite, a.variants, a.seed) if a.variants > 0 else [])
    with open(a.out, "w") as f:
        f.write(corpus.to_jsonl(reqs))
    print(f"{a.out}: {len(reqs)} requests", file=sys.stderr)


if __name__ == "__main__":
    main()
