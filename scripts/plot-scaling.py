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

When book/src/scaling-shape.csv exists (--shape-csv; written by the same bench), a second
plot, book/src/scaling-shape.svg (--shape-out), shows the other two axes on linear scales:
lock and gen time against the number of GPU models in the spec, and gen time against the
number of targets rendered. An ASCII version of both is printed, for the book's table.
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
COLOURS = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442", "#882255"]
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


def read_shape(path):
    """Rows of the shape CSV (axis, n, measurement, files, runs, min_ms, median_ms)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"axis", "n", "measurement", "files", "runs", "min_ms", "median_ms"}
    if not rows or not need.issubset(rows[0].keys()):
        sys.exit(f"{path}: expected the columns {sorted(need)}")
    return rows


def shape_series(rows):
    """(panel title, x label, [(series name, [(n, ms)])]) per axis, in file order."""
    panels = []
    for axis, title, xlabel in (
        ("gpus", "time against GPU models in [hardware].gpus", "GPU models"),
        ("targets", "gen time against targets rendered (h100-ib-train-serve)", "targets"),
    ):
        mine = [r for r in rows if r["axis"] == axis]
        names = []
        for r in mine:
            name = "gen" if axis == "targets" else r["measurement"]
            if name not in names:
                names.append(name)
        series = []
        for name in names:
            pts = [
                (int(r["n"]), float(r["median_ms"]))
                for r in mine
                if (axis == "targets" or r["measurement"] == name)
            ]
            series.append((name, sorted(pts)))
        if series:
            panels.append((title, xlabel, series))
    return panels


def plot_shape(panels, title):
    """Side-by-side panels with linear axes from zero."""
    width, height = 860, 400
    pl, pr, pt, pb = 70, 30, 70, 60
    gap = 60
    pw = (width - pl - pr - gap * (len(panels) - 1)) / max(len(panels), 1)
    ph = height - pt - pb
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    head, _, sub = title.partition(" — ")
    out.append(f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-size="15">{escape(head)}</text>')
    if sub:
        out.append(f'<text x="{width / 2:.1f}" y="40" text-anchor="middle" fill="#444444">{escape(sub)}</text>')
    for i, (ptitle, xlabel, series) in enumerate(panels):
        x_left = pl + i * (pw + gap)
        xs = [n for _, pts in series for n, _ in pts]
        ys = [t for _, pts in series for _, t in pts]
        xmax = max(xs)
        ymax = max(ys) * 1.15
        step = 10 ** math.floor(math.log10(ymax))
        if ymax / step < 3:
            step /= 5
        elif ymax / step < 6:
            step /= 2

        def px(n, x_left=x_left, xmax=xmax):
            return x_left + n / xmax * pw

        def py(t, ymax=ymax):
            return pt + ph - t / ymax * ph

        out.append(f'<text x="{x_left + pw / 2:.1f}" y="{pt - 10}" text-anchor="middle">{escape(ptitle)}</text>')
        y = 0.0
        while y <= ymax:
            out.append(f'<line x1="{x_left:.1f}" y1="{py(y):.1f}" x2="{x_left + pw:.1f}" y2="{py(y):.1f}" stroke="#dddddd"/>')
            out.append(f'<text x="{x_left - 6:.1f}" y="{py(y) + 4:.1f}" text-anchor="end">{fmt(y) if y else "0"}</text>')
            y += step
        for n in sorted(set(xs)):
            out.append(f'<text x="{px(n):.1f}" y="{pt + ph + 16}" text-anchor="middle">{n}</text>')
        out.append(f'<rect x="{x_left:.1f}" y="{pt}" width="{pw:.1f}" height="{ph}" fill="none" stroke="#000000"/>')
        out.append(f'<text x="{x_left + pw / 2:.1f}" y="{height - 20}" text-anchor="middle">{escape(xlabel)}</text>')
        if i == 0:
            out.append(
                f'<text transform="translate(18 {pt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
                "median time (ms), in-process</text>"
            )
        for j, (name, pts) in enumerate(series):
            colour = COLOURS[j % len(COLOURS)]
            coords = " ".join(f"{px(n):.1f},{py(t):.1f}" for n, t in pts)
            out.append(
                f'<polyline class="measurement" data-name="{escape(name)}" points="{coords}" '
                f'fill="none" stroke="{colour}" stroke-width="2"/>'
            )
            for n, t in pts:
                out.append(f'<circle cx="{px(n):.1f}" cy="{py(t):.1f}" r="3" fill="{colour}"/>')
            out.append(f'<line x1="{x_left + 10:.1f}" y1="{pt + 14 + j * 18}" x2="{x_left + 30:.1f}" y2="{pt + 14 + j * 18}" stroke="{colour}" stroke-width="2"/>')
            out.append(f'<text x="{x_left + 36:.1f}" y="{pt + 18 + j * 18}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def ascii_shape(rows):
    """The shape CSV as text bars, one line per row (for a terminal or the book)."""
    top = max(float(r["median_ms"]) for r in rows)
    lines = []
    for r in rows:
        t = float(r["median_ms"])
        bar = "#" * max(1, round(t / top * 40))
        lines.append(f'{r["axis"]:<8} {r["n"]:>2} {r["measurement"]:<36} {t:8.3f} ms {bar}')
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=os.path.join(ROOT, "book/src/scaling.csv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "book/src/scaling.svg"))
    ap.add_argument("--shape-csv", default=os.path.join(ROOT, "book/src/scaling-shape.csv"))
    ap.add_argument("--shape-out", default=os.path.join(ROOT, "book/src/scaling-shape.svg"))
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
    if os.path.exists(a.shape_csv):
        shape_rows = read_shape(a.shape_csv)
        title = "gpustack: time against GPU models and targets (stock catalog, in-process, median)"
        if extra:
            title += f" — {extra}"
        svg = plot_shape(shape_series(shape_rows), title)
        xml.dom.minidom.parseString(svg.encode("utf-8"))
        with open(a.shape_out, "w", encoding="utf-8") as f:
            f.write(svg)
        print(f"wrote {os.path.relpath(a.shape_out, ROOT)} ({len(shape_rows)} points)")
        print(ascii_shape(shape_rows))


if __name__ == "__main__":
    main()
