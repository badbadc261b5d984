#!/usr/bin/env python3
"""Plot book/src/scaling.csv (written by `cargo bench --bench scale`) as an SVG.

Python 3 standard library only. Log-log axes: catalog size (× the stock catalog's
versions) against the median time in milliseconds, one line per measurement, with a
dashed "linear" reference (time proportional to the catalog) through the 1x point of the
first `lock` measurement. The written SVG is parsed back with xml.dom.minidom, so a
malformed file fails the script.

    python3 scripts/plot-scaling.py --machine "2 vCPU AMD EPYC VM, Debian 12" --date 2026-11-22

Options: --csv PATH (default book/src/scaling.csv), --out PATH (default
book/src/scaling.svg), --machine TEXT and --date TEXT (shown in the title).
"""

import argparse
import csv
import math
import os
import sys
import xml.dom.minidom
from xml.sax.saxutils import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Colour-blind-safe palette (Okabe-Ito), in measurement order.
COLOURS = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442"]
WIDTH, HEIGHT = 860, 540
LEFT, RIGHT, TOP, BOTTOM = 80, 250, 60, 70


def read(path):
    """Rows of the CSV as dicts, in file order; measurement names in first-seen order."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"factor", "versions", "catalog_kib", "measurement", "runs", "min_ms", "median_ms"}
    if not rows or not need.issubset(rows[0].keys()):
        sys.exit(f"{path}: expected the columns {sorted(need)}")
    names = []
    for r in rows:
        if r["measurement"] not in names:
            names.append(r["measurement"])
    return rows, names


def decades(lo, hi):
    """Powers of ten covering [lo, hi]."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** e for e in range(a, b + 1)]


def fmt(v):
    return f"{v:g}" if v >= 1 else f"{v:.2g}"


def plot(rows, names, title):
    factors = sorted({int(r["factor"]) for r in rows})
    times = [float(r["median_ms"]) for r in rows if float(r["median_ms"]) > 0]
    xs = decades(min(factors), max(factors))
    ys = decades(min(times), max(times))
    x0, x1 = math.log10(xs[0]), math.log10(xs[-1])
    y0, y1 = math.log10(ys[0]), math.log10(ys[-1])
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(f):
        return LEFT + (math.log10(f) - x0) / (x1 - x0) * pw

    def py(ms):
        return TOP + ph - (math.log10(ms) - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
    ]
    head, _, sub = title.partition(" — ")
    out.append(f'<text x="{WIDTH / 2:.1f}" y="24" text-anchor="middle" font-size="15">{escape(head)}</text>')
    if sub:
        out.append(f'<text x="{WIDTH / 2:.1f}" y="44" text-anchor="middle" fill="#444444">{escape(sub)}</text>')
    # Grid and ticks: decades, plus every factor on the x axis.
    for y in ys:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + pw}" y2="{py(y):.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{fmt(y)}</text>')
    for f in sorted(set(factors) | {int(x) for x in xs}):
        out.append(f'<line x1="{px(f):.1f}" y1="{TOP}" x2="{px(f):.1f}" y2="{TOP + ph}" stroke="#eeeeee"/>')
        out.append(f'<text x="{px(f):.1f}" y="{TOP + ph + 18}" text-anchor="middle">{f}×</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#000000"/>')
    out.append(
        f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 22}" text-anchor="middle">'
        "catalog size (× the stock catalog's versions), log scale</text>"
    )
    out.append(
        f'<text transform="translate(22 {TOP + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
        "median time (ms), log scale</text>"
    )
    # Linear reference through the first lock measurement at the smallest factor.
    ref = next((r for r in rows if r["measurement"].startswith("lock") and int(r["factor"]) == factors[0]), None)
    legend = []
    if ref is not None:
        t0 = float(ref["median_ms"])
        pts = [(f, t0 * f / factors[0]) for f in (factors[0], factors[-1])]
        pts = [(f, t) for f, t in pts if ys[0] <= t <= ys[-1]] or pts
        out.append(
            f'<polyline class="reference" points="{" ".join(f"{px(f):.1f},{py(t):.1f}" for f, t in pts)}" '
            'fill="none" stroke="#999999" stroke-dasharray="6 4"/>'
        )
        legend.append(("∝ catalog size (linear)", "#999999", True))
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        pts = sorted((int(r["factor"]), float(r["median_ms"])) for r in rows if r["measurement"] == name)
        pts = [(f, t) for f, t in pts if t > 0]
        coords = " ".join(f"{px(f):.1f},{py(t):.1f}" for f, t in pts)
        out.append(
            f'<polyline class="measurement" data-name="{escape(name)}" points="{coords}" '
            f'fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for f, t in pts:
            out.append(f'<circle cx="{px(f):.1f}" cy="{py(t):.1f}" r="3" fill="{colour}"/>')
        legend.append((name, colour, False))
    lx, ly = LEFT + pw + 20, TOP + 10
    for j, (name, colour, dashed) in enumerate(legend):
        y = ly + j * 22
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 24}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 30}" y="{y + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=os.path.join(ROOT, "book/src/scaling.csv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "book/src/scaling.svg"))
    ap.add_argument("--machine", default="", help="the machine the figures come from")
    ap.add_argument("--date", default="", help="the date of the run")
    a = ap.parse_args()
    rows, names = read(a.csv)
    title = "gpustack: time against catalog size (in-process, median)"
    extra = ", ".join(x for x in (a.machine, a.date) if x)
    if extra:
        title += f" — {extra}"
    svg = plot(rows, names, title)
    xml.dom.minidom.parseString(svg.encode("utf-8"))  # well-formed, or raise
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(svg)
    print(f"wrote {os.path.relpath(a.out, ROOT)} ({len(names)} measurements, {len(rows)} points)")


if __name__ == "__main__":
    main()
