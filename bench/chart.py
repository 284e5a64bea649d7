#!/usr/bin/env python3
"""Draws the chart of a `make bench` results JSON (needs matplotlib: `make bench-tools`).

    target/bench-venv/bin/python bench/chart.py bench/results/<date>.json bench/results/<date>.png

Left: max throughput of each target as % of vanilla Envoy (log scale), per request shape, with
the issue's bars for the full CRS PL1. Right: p99 latency at the fixed rate.
"""
import json
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

COLORS = {"envoy": "#555555", "wafer-headers-only": "#9ecae1", "wafer-targeted": "#4292c6",
          "wafer-crs-pl1": "#08519c", "wafer-crs-pl2": "#08306b",
          "modsec-crs-pl1": "#fd8d3c", "modsec-crs-pl2": "#d94801",
          # Every target a colour of its own: without one, matplotlib takes its next colour at each
          # bar, and a target that has no cell in one group (nginx + ModSecurity in quick mode) shifts them.
          "wafer-crs-pl1-all": "#6a51a3", "empty-filter": "#bdbdbd", "headers-filter": "#969696",
          "wafer-protect-only": "#9e9ac8"}
# The throughput bars (% of vanilla Envoy), drawn over the bar they apply to.
BARS = {("wafer-crs-pl1", "get"): 50, ("wafer-crs-pl1", "post1k"): 35, ("wafer-crs-pl1", "post10k"): 10,
        ("wafer-crs-pl1", "post50k"): 3, ("wafer-targeted", "get"): 80, ("wafer-targeted", "post1k"): 80,
        ("wafer-headers-only", "get"): 82, ("wafer-headers-only", "post1k"): 82}


def main(src, out):
    d = json.load(open(src))
    labels, slabels, cells = d["labels"], d["shape_labels"], d["cells"]
    # Targets measured for start-up only (no cells) have no bars.
    targets = [t for t in labels if t in d["targets"] and any(c["target"] == t for c in cells)]
    shapes = []
    for c in cells:
        if c["shape"] not in shapes:
            shapes.append(c["shape"])

    def cell(t, s, k):
        return next((c for c in cells if c["target"] == t and c["shape"] == s and c["kind"] == k), None)

    def ratio(t, s):
        """As bench/run.py's ratio(): against the paired vanilla run, else vanilla's own cell."""
        c = cell(t, s, "max")
        v = next((x for x in cells if x["kind"] == "ref" and x.get("for_target") == t and x["shape"] == s), None)
        v = v or cell("envoy", s, "max")
        return c["rps"] / v["rps"] if c and v and c["valid"] and v["valid"] and v.get("rps") else None

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.6), gridspec_kw={"width_ratios": [3, 2]})
    others = [t for t in targets if t != "envoy"]
    w = 0.8 / max(1, len(others))
    first_bar = True
    for i, t in enumerate(others):
        for j, s in enumerate(shapes):
            c, r = cell(t, s, "max"), ratio(t, s)
            x = j - 0.4 + w * (i + 0.5)
            if r is not None:
                y = 100 * r
                ax1.bar([x], [y], w, label=labels[t] if j == 0 else None, color=COLORS.get(t))
                ax1.text(x, y * 1.06, f"{y:.0f}" if y >= 10 else f"{y:.1f}", ha="center", va="bottom", fontsize=7)
            elif c:
                ax1.bar([x], [0], w, label=labels[t] if j == 0 else None, color=COLORS.get(t))
                ax1.text(x, 0.6, "INVALID" if not c["valid"] else "", ha="center", rotation=90, fontsize=7)
            if (t, s) in BARS:
                ax1.hlines(BARS[(t, s)], x - w / 2, x + w / 2, colors="red", linewidth=1.5,
                           label="the issue's bar" if first_bar else None)
                first_bar = False
    ticks = []
    for s in shapes:
        v = cell("envoy", s, "max")
        ticks.append(textwrap.fill(slabels[s], 16) + (f"\nvanilla Envoy: {v['rps']:,.0f} req/s" if v and v["valid"] else ""))
    ax1.set_yscale("log")
    ax1.set_ylim(0.3, 300)
    ax1.set_yticks([1, 3, 10, 35, 50, 100])
    ax1.set_yticklabels(["1%", "3%", "10%", "35%", "50%", "100%"])
    ax1.set_xticks(range(len(shapes)))
    ax1.set_xticklabels(ticks)
    ax1.set_ylabel("max req/s, % of vanilla Envoy (paired run; log)")
    ax1.set_title("Throughput on one core (higher is better)")
    ax1.grid(axis="y", alpha=0.3)
    ax1.legend(fontsize=8, loc="upper right", ncol=2)

    meta = d["meta"]
    rate_shapes = [s for s in shapes if any(c["kind"] == "rate" and c["shape"] == s for c in cells)]
    w2 = 0.8 / max(1, len(targets))
    for i, t in enumerate(targets):
        xs, ys = [], []
        for j, s in enumerate(rate_shapes):
            c = cell(t, s, "rate")
            if c and c["valid"]:
                xs.append(j - 0.4 + w2 * (i + 0.5))
                ys.append(c["p99_ms"])
        if xs:
            ax2.bar(xs, ys, w2, label=labels[t], color=COLORS.get(t))
        for x, y in zip(xs, ys):
            ax2.text(x, y * 1.06, f"{y:.2f}" if y < 10 else f"{y:.0f}", ha="center", va="bottom", fontsize=7)
    ax2.set_yscale("log")
    ax2.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    lo, hi = ax2.get_ylim()
    ax2.set_ylim(min(lo, 0.1), hi * 2)
    ax2.legend(fontsize=7, loc="upper left")
    ax2.set_xticks(range(len(rate_shapes)))
    ax2.set_xticklabels([textwrap.fill(slabels[s], 16) for s in rate_shapes])
    ax2.set_ylabel("p99 latency, ms (log)")
    ax2.set_title(f"p99 at {meta['rate']} req/s, latency-corrected (lower is better)")
    ax2.grid(axis="y", alpha=0.3)

    fig.suptitle(f"wafer {meta['wafer_rev']} vs vanilla Envoy {meta['envoy'].split()[0]} vs nginx + ModSecurity "
                 f"{meta['libmodsecurity'].split('-')[0]}, CRS {meta['crs']} — {meta['date'][:10]}, "
                 f"{meta['cpu_model']}, target on 1 core", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
