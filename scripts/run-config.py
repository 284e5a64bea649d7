#!/usr/bin/env python3
"""The Envoy configuration of `make run`: one of the run examples
(envoy-wasm/examples/run/envoy.yaml, envoy-dynamic/examples/run/envoy.yaml) with wafer's plugin
configuration replaced.

  run-config.py EXAMPLE OUT --tier @targeted     one embedded tier for every host
  run-config.py EXAMPLE OUT --config file.json   a plugin configuration file (docs/configuration.md)
  run-config.py EXAMPLE OUT                      the example as it is (full CRS PL1, blocking)

Prints what wafer runs, one line."""

import argparse
import json
import re
import sys

# The one line of the example that carries wafer's configuration (a StringValue).
VALUE = re.compile(r"^(\s*value: )'(\{.*\})'\s*$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("example")
    ap.add_argument("out")
    ap.add_argument("--tier", default="", help="an embedded rule file, e.g. @targeted")
    ap.add_argument("--config", default="", help="a plugin configuration (JSON file)")
    a = ap.parse_args()
    if a.tier and a.config:
        sys.exit("run-config.py: give TIER or CONFIG, not both")
    lines = open(a.example, encoding="utf-8").read().splitlines(keepends=True)
    at = [i for i, l in enumerate(lines) if VALUE.match(l)]
    if len(at) != 1:
        sys.exit(f"run-config.py: {a.example} has {len(at)} plugin configuration lines, expected 1")
    m = VALUE.match(lines[at[0]])
    if a.tier:
        if not re.fullmatch(r"@[A-Za-z0-9_./*-]+", a.tier):
            sys.exit(f"run-config.py: TIER={a.tier!r} is not an embedded file name (@targeted, @owasp_crs/*.conf, ...)")
        config = {"directives_map": {"default": [f"Include {a.tier}"]}, "default_directives": "default"}
        what = f"tier {a.tier}"
    elif a.config:
        try:
            config = json.load(open(a.config, encoding="utf-8"))
        except (OSError, ValueError) as e:
            sys.exit(f"run-config.py: CONFIG={a.config}: {e}")
        what = f"configuration {a.config}"
    else:
        config = json.loads(m.group(2))
        what = "full OWASP CRS, paranoia level 1, blocking"
    # A JSON string is a YAML double-quoted scalar.
    text = json.dumps(json.dumps(config, separators=(",", ":")))
    lines[at[0]] = f"{m.group(1)}{text}\n"
    with open(a.out, "w", encoding="utf-8") as f:
        f.writelines(lines)
    print(what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
