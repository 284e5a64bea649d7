#!/usr/bin/env python3
"""Checks the relative links of the user documentation (run by `make lint`).

    scripts/check-links.py [FILE.md ...]     default: README.md docs/*.md bench/README.md
    scripts/check-links.py --self-test       shows the check fails on each kind of broken link

A link fails when its file (relative to the linking file) does not exist, or its `#anchor` is
not a heading of the target Markdown file under GitHub's rules: lower case, punctuation other
than `-` and `_` dropped, each space a `-`, the n-th repeat of a slug suffixed `-n`; an
`<a name="x">` or `id="x"` also counts. Links in code (fenced blocks, `inline`) and absolute
URLs (http:, https:, mailto:) are not checked. Exits 1 and prints `file:line: reason` per
broken link.
"""

import os
import re
import sys
import tempfile

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)=\"([^\"]+)\"|\bid=\"([^\"]+)\"")


def strip_code(line):
    return re.sub(r"`+[^`]*`+", "", line)


def slug(text):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits, _ (Unicode too)
    return text.replace(" ", "-")


def lines_outside_code(path):
    """(line number, line) of the lines of `path` outside fenced code blocks."""
    with open(path, encoding="utf-8") as f:
        fenced = False
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line.rstrip("\n")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        for _, line in lines_outside_code(path):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                k = seen.get(s, 0)
                seen[s] = k + 1
                out.add(s if k == 0 else f"{s}-{k}")
            for a, b in HTML_ANCHOR.findall(line):
                out.add(a or b)
        _anchors[path] = out
    return _anchors[path]


def targets(path):
    for n, line in lines_outside_code(path):
        m = REF_DEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        for m in INLINE_LINK.finditer(strip_code(line)):
            yield n, m.group(1)


def check(files):
    errors = []
    for path in files:
        for n, target in targets(path):
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # an absolute URL (http:, https:, mailto:, ...)
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append(f"{path}:{n}: {target}: no file {dest}")
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest) and anchor not in anchors(dest):
                errors.append(f"{path}:{n}: {target}: no heading #{anchor} in {dest}")
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "docs", "a.md"), "w") as f:
            f.write("# Tuning false positives\n## The `crs` object (JSON)\n## Limits\n## Limits\n<a name=\"x-y\"></a>\n")
        good = os.path.join(d, "good.md")
        with open(good, "w") as f:
            f.write(
                "# Top\n[a](docs/a.md) [b](docs/a.md#tuning-false-positives) [c](docs/a.md#the-crs-object-json)\n"
                "[d](docs/a.md#limits-1) [e](#top) [f](docs/a.md#x-y) [g](https://example.com/#nothing)\n"
                "[ref]: docs/a.md#limits\n```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n"
            )
        if check([good]):
            print("self-test: good links reported broken:", check([good]), file=sys.stderr)
            return 1
        broken = {
            "[a](docs/missing.md)": "no file",
            "[b](docs/a.md#no-such-heading)": "no heading",
            "[c](#nowhere)": "no heading",
            "[d](docs/a.md#limits-2)": "no heading",
            "[r]: ../docs/a.md": "no file",
        }
        for link, why in broken.items():
            bad = os.path.join(d, "bad.md")
            with open(bad, "w") as f:
                f.write(f"# Bad\n\n{link}\n")
            errs = check([bad])
            if len(errs) != 1 or why not in errs[0]:
                print(f"self-test: {link!r} should fail with {why!r}, got {errs}", file=sys.stderr)
                return 1
    print("check-links: self-test passed (8 good links pass, 5 broken ones fail)")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if argv:
        files = argv
    else:
        os.chdir(root)
        docs = sorted(os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md"))
        files = ["README.md"] + docs + ["bench/README.md"]
    errors = check(files)
    for e in errors:
        print(e)
    if errors:
        print(f"check-links: {len(errors)} broken links in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-links: {len(files)} files, every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
