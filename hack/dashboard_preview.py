"""Draws charts/reloader/dashboards/reloader.json as a PNG, without Grafana.

Each panel's queries are evaluated as written (Grafana's variables filled in) by a real
Prometheus over a time range, and drawn at the panel's grid position with its title, unit and
legend format. Used by hack/dashboard-preview for docs/dashboard.png.

Usage: dashboard_preview.py <dashboard.json> <prometheus url> <start> <end> <out.png>
"""

import json
import math
import re
import sys
import urllib.parse
import urllib.request
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

BACKGROUND = "#111217"
PANEL = "#181b1f"
TEXT = "#ccccdc"
GRID = "#2c3235"
PALETTE = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0",
           "#37872d", "#fade2a", "#ff9830", "#c4162a"]
ROW_HEIGHT = 0.32  # inches per grid unit
COLUMN_WIDTH = 0.85


def fill_variables(expr, step):
    expr = expr.replace("$__rate_interval", f"{4 * step}s").replace("$__range", f"{4 * step}s")
    return re.sub(r"\$\{?(namespace|job)\}?", ".*", expr)


def query_range(prometheus, expr, start, end, step):
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(template, labels):
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template or "")
    return text.strip() or ", ".join(f"{k}={v}" for k, v in labels.items()) or "value"


def scale(unit, values):
    """Values and an axis label for Grafana's unit names used by the dashboard."""
    if unit == "bytes":
        return [v / 2**20 for v in values], "MiB"
    if unit == "percentunit":
        return [v * 100 for v in values], "% of a core"
    if unit == "s":
        return [v * 1000 for v in values], "ms"
    return values, {"ops": "per second", "reqps": "requests/s"}.get(unit, "")


def main():
    dashboard_path, prometheus, start, end, out = sys.argv[1:6]
    start, end = float(start), float(end)
    step = max(2, int((end - start) / 240))
    dashboard = json.load(open(dashboard_path))
    panels = dashboard["panels"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    figure = plt.figure(figsize=(24 * COLUMN_WIDTH, bottom * ROW_HEIGHT + 0.6), facecolor=BACKGROUND)
    figure.text(0.01, 1 - 0.25 / (bottom * ROW_HEIGHT + 0.6), dashboard["title"], color=TEXT, fontsize=16,
                weight="bold", va="center")
    height = bottom * ROW_HEIGHT + 0.6

    def box(grid):
        left = grid["x"] / 24 + 0.004
        width = grid["w"] / 24 - 0.008
        top = 1 - (0.6 + grid["y"] * ROW_HEIGHT) / height
        return left, top, width, grid["h"] * ROW_HEIGHT / height

    for panel in panels:
        left, top, width, tall = box(panel["gridPos"])
        if panel["type"] == "row":
            figure.text(left, top - tall / 2, panel["title"], color=TEXT, fontsize=12, weight="bold", va="center")
            continue
        axes = figure.add_axes([left + 0.03, top - tall + 0.035, width - 0.04, tall - 0.07], facecolor=PANEL)
        figure.patches.append(plt.Rectangle((left, top - tall + 0.004), width, tall - 0.008, transform=figure.transFigure,
                                            facecolor=PANEL, edgecolor=GRID, zorder=-1))
        axes.set_title(panel["title"], color=TEXT, fontsize=10, loc="left")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        colour = 0
        axis_label = ""
        for target in panel.get("targets", []):
            for series in query_range(prometheus, fill_variables(target["expr"], step), start, end, step):
                points = [(float(t), float(v)) for t, v in series["values"] if not math.isnan(float(v))]
                if not points:
                    continue
                times = [datetime.fromtimestamp(t) for t, _ in points]
                values, axis_label = scale(unit, [v for _, v in points])
                axes.plot(times, values, color=PALETTE[colour % len(PALETTE)], linewidth=1.2,
                          label=legend(target.get("legendFormat"), series["metric"]))
                colour += 1
        axes.set_ylim(bottom=0)
        axes.set_ylabel(axis_label, color=TEXT, fontsize=8)
        axes.tick_params(colors=TEXT, labelsize=7)
        axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        axes.grid(color=GRID, linewidth=0.5)
        for spine in axes.spines.values():
            spine.set_color(GRID)
        if colour:
            axes.legend(loc="upper left", fontsize=6.5, facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT,
                        ncol=2 if colour > 4 else 1)
        else:
            axes.text(0.5, 0.5, "No data", color=TEXT, ha="center", va="center", transform=axes.transAxes)
    figure.savefig(out, dpi=80, facecolor=BACKGROUND)


if __name__ == "__main__":
    main()
