#!/usr/bin/env python3
"""Draws a Grafana dashboard's panels as one SVG from a Prometheus's answers, for a picture
of the dashboard where no Grafana is at hand (docs/operations.md). Every target of every
panel is asked with query_range over [--start, --end]; each series is a line, laid out as
the dashboard's gridPos lays out its panels. Prints, per panel, how many series it drew; exits
1 when a panel drew none (a query that returned no data).

    render-dashboard.py --prometheus URL --dashboard FILE.json --start UNIX --end UNIX --out FILE.svg
"""
import argparse
import html
import json
import sys
import urllib.parse
import urllib.request

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf"]
COL_W, ROW_H, PAD = 50, 30, 6


def query_range(url, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(url.rstrip("/") + "/api/v1/query_range?" + q, timeout=30) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise SystemExit("query failed: %s: %s" % (expr, doc))
    return doc["data"]["result"]


def legend(fmt, metric):
    out = fmt or "{{__name__}}"
    for k, v in metric.items():
        out = out.replace("{{%s}}" % k, v)
    while "{{" in out and "}}" in out:
        a = out.index("{{")
        out = out[:a] + out[out.index("}}", a) + 2:]
    return out.strip() or "value"


def fmt_num(v, unit):
    if unit == "percentunit":
        return "%.0f%%" % (v * 100)
    if unit == "currencyUSD":
        return "$%.2f" % v
    if unit == "s":
        return "%.3gs" % v
    return "%.3g" % v


def panel_svg(p, series, start, end):
    g = p["gridPos"]
    x, y, w, h = g["x"] * COL_W, g["y"] * ROW_H, g["w"] * COL_W, g["h"] * ROW_H
    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    out = ['<g transform="translate(%d,%d)">' % (x + PAD / 2, y + PAD / 2),
           '<rect width="%d" height="%d" rx="4" fill="#181b1f" stroke="#2c3235"/>' % (w - PAD, h - PAD),
           '<text x="8" y="18" fill="#d8d9da" font-size="13" font-weight="bold">%s</text>'
           % html.escape(p["title"])]
    px, py, pw, ph = 48, 28, w - PAD - 56, h - PAD - 28 - 22 - 14 * min(len(series), 3)
    vals = [v for _, pts in series for _, v in pts]
    lo, hi = min(vals + [0.0]), max(vals + [0.0])
    if hi == lo:
        hi = lo + 1
    out.append('<text x="%d" y="%d" fill="#8e8e8e" font-size="10" text-anchor="end">%s</text>'
               % (px - 4, py + 8, fmt_num(hi, unit)))
    out.append('<text x="%d" y="%d" fill="#8e8e8e" font-size="10" text-anchor="end">%s</text>'
               % (px - 4, py + ph, fmt_num(lo, unit)))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#2c3235"/>' % (px, py + ph, px + pw, py + ph))
    for i, (name, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        coords = " ".join("%.1f,%.1f" % (px + (t - start) / max(end - start, 1) * pw,
                                          py + ph - (v - lo) / (hi - lo) * ph) for t, v in pts)
        out.append('<polyline class="series" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                   % (c, coords))
    for i, (name, pts) in enumerate(series[:9]):
        lx = 8 + (i % 3) * (pw // 3 + 16)
        ly = py + ph + 18 + 14 * (i // 3)
        last = pts[-1][1] if pts else 0
        out.append('<rect x="%d" y="%d" width="10" height="3" fill="%s"/>' % (lx, ly - 4, COLORS[i % len(COLORS)]))
        out.append('<text x="%d" y="%d" fill="#ccccdc" font-size="10">%s %s</text>'
                   % (lx + 14, ly, html.escape(name[:28]), fmt_num(last, unit)))
    out.append("</g>")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dash = json.load(open(a.dashboard))
    step = max((a.end - a.start) / 120, 1)
    body, bottom, empty = [], 0, []
    for p in dash["panels"]:
        g = p["gridPos"]
        bottom = max(bottom, (g["y"] + g["h"]) * ROW_H)
        if p["type"] == "row":
            body.append('<text x="6" y="%d" fill="#d8d9da" font-size="15" font-weight="bold">%s</text>'
                        % (g["y"] * ROW_H + 20, html.escape(p["title"])))
            continue
        series = []
        for t in p["targets"]:
            for r in query_range(a.prometheus, t["expr"], a.start, a.end, step):
                pts = [(float(ts), float(v)) for ts, v in r["values"]]
                series.append((legend(t.get("legendFormat"), r["metric"]), pts))
        print("%s: %d series" % (p["title"], len(series)))
        if not series:
            empty.append(p["title"])
        body += panel_svg(p, series, a.start, a.end)
    width = 24 * COL_W
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">'
           % (width, bottom + 10),
           '<rect width="100%" height="100%" fill="#111217"/>',
           '<title>%s</title>' % html.escape(dash["title"])] + body + ["</svg>"]
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")
    if empty:
        print("no data: " + ", ".join(empty), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
