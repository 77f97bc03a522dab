"""What a bench run leaves: the comparison with the study, CSV, JSON, the PNG plot, and tables."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

from analytics.bench.core import Experiment, Plot, Published

__all__ = ["compare", "point_columns", "write_files", "plot_png", "points_table", "comparison_table"]


def _matches(point: dict, match: dict) -> bool:
    return all(point.get(k) == v for k, v in match.items() if v not in ("max", "min"))


def _pick(points: list[dict], pub: Published) -> dict | None:
    """Our point for a published figure: the one matching ``pub.match``; with ``"max"`` or
    ``"min"`` for a column, the best of the matching points on ``pub.metric``."""
    found = [p for p in points if _matches(p, pub.match) and isinstance(p.get(pub.metric), (int, float))]
    if not found:
        return None
    if "min" in pub.match.values():
        return min(found, key=lambda p: p[pub.metric])
    return max(found, key=lambda p: p[pub.metric]) if "max" in pub.match.values() or len(found) > 1 else found[0]


def compare(experiment: Experiment, points: list[dict], hardware: str) -> list[dict]:
    """One row per published figure: theirs, ours (on ``hardware``) and ours / theirs."""
    rows = []
    for pub in experiment.published:
        ours = _pick(points, pub)
        value = None if ours is None else ours.get(pub.metric)
        ratio = None
        if value is not None and pub.value:
            ratio = round(value / pub.value, 3)
        rows.append({
            "figure": pub.figure, "what": pub.what, "unit": pub.unit,
            "published": pub.value, "published_hardware": pub.hardware, "note": pub.note,
            "ours": value, "ours_at": {k: ours.get(k) for k in pub.match} if ours else None,
            "ours_hardware": hardware, "ratio": ratio,
        })  # fmt: skip
    return rows


def point_columns(points: Iterable[dict]) -> list[str]:
    cols: list[str] = []
    for p in points:
        for k in p:
            if k not in cols:
                cols.append(k)
    return cols


def write_files(run: dict, experiment: Experiment, out_dir: Path) -> dict[str, str]:
    """``OUT/NAME/RUN_ID.json`` (the whole run document), ``.csv`` (the points) and ``.png``."""
    folder = Path(out_dir) / run["experiment"]
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / run["_id"]
    paths = {"json": str(base) + ".json", "csv": str(base) + ".csv", "png": str(base) + ".png"}
    run = {**run, "files": paths}
    tmp = Path(paths["json"] + ".part")
    tmp.write_text(json.dumps(run, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(paths["json"])
    cols = point_columns(run["points"])
    with open(paths["csv"], "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for p in run["points"]:
            w.writerow({k: _cell(v) for k, v in p.items()})
    plot_png(experiment.plot, run["points"], paths["png"], f"{experiment.name}: {experiment.title}",
             subtitle=f"{run['machine_label']} | {run['server_label']} | {run['size']}",
             published=experiment.published)  # fmt: skip
    return paths


def _cell(value):
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def plot_png(plot: Plot, points: list[dict], path: str, title: str, subtitle: str = "",
             published: tuple[Published, ...] = ()) -> None:
    """The study figure's axes: ``plot.x`` against each ``plot.y``, one line per series; the
    ``published`` figures on a plotted metric as dashed lines beside ours (named, with the
    study's hardware in the caption), or listed under the plot when far off its scale."""
    import matplotlib  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    pts = [p for p in points if _matches(p, plot.where)]
    fig, ax = plt.subplots(figsize=(7.5, 4.6), dpi=110)
    groups: dict = {}
    for p in pts:
        groups.setdefault(p.get(plot.series) if plot.series else None, []).append(p)
    drawn = 0
    for key, members in groups.items():
        for y in plot.y:
            xy = sorted((p[plot.x], p[y]) for p in members
                        if isinstance(p.get(plot.x), (int, float)) and isinstance(p.get(y), (int, float)))  # fmt: skip
            if not xy:
                continue
            label = " ".join(str(s) for s in (key, y if len(plot.y) > 1 else None) if s is not None) or y
            ax.plot([a for a, _ in xy], [b for _, b in xy], marker="o", label=label)
            drawn += 1
    off = _published_lines(ax, plot, pts, published)
    if off:
        subtitle = (subtitle + "\n" if subtitle else "") + "off scale: " + "; ".join(off)
    if plot.xlog:
        ax.set_xscale("log", base=2)
    if plot.ylog:
        ax.set_yscale("log")
    ax.set_xlabel(plot.xlabel or plot.x)
    ax.set_ylabel(plot.ylabel or ", ".join(plot.y))
    ax.set_title(plot.title or title, fontsize=10)
    if subtitle:
        fig.text(0.01, 0.01, subtitle, fontsize=7, color="#555")
    if drawn > 1 or ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    if not drawn:
        ax.text(0.5, 0.5, "no points", ha="center", va="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3)
    fig.tight_layout(rect=(0, 0.03 * (1 + subtitle.count("\n")), 1, 1))
    fig.savefig(path)
    plt.close(fig)


def _published_lines(ax, plot: Plot, points: list[dict], published) -> list[str]:
    """Dashed lines for the published values of a plotted metric within 5x of our data; the
    others as text ("off scale") for the caption."""
    ours = [p[y] for p in points for y in plot.y if isinstance(p.get(y), (int, float))]
    off: list[str] = []
    if not ours:
        return off
    lo, hi = min(ours), max(ours)
    for pub in published:
        if pub.value is None or pub.metric not in plot.y:
            continue
        label = f"{pub.figure}: {format_value(pub.value)} {pub.unit} ({pub.what})".strip()
        if (lo <= 0 or pub.value >= lo / 5) and pub.value <= hi * 5:
            ax.axhline(pub.value, linestyle="--", linewidth=1, color="#888", label=label[:70])
        else:
            off.append(f"{pub.figure} {format_value(pub.value)} {pub.unit}".strip())
    return off


def format_value(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, dict):
        return " ".join(f"{k}={format_value(x)}" for k, x in v.items())
    return str(v)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def points_table(points: list[dict], columns: list[str] | None = None) -> str:
    cols = columns or point_columns(points)
    return _table([cols] + [[format_value(p.get(c)) for c in cols] for p in points]) if points else "(no points)"


def comparison_table(rows: list[dict]) -> str:
    if not rows:
        return "(the study publishes no figure for this experiment)"
    head = ["figure", "what", "published", "on", "ours", "at", "ours/published"]
    body = [[r["figure"], r["what"], f"{format_value(r['published'])} {r['unit']}".strip(), r["published_hardware"],
             f"{format_value(r['ours'])} {r['unit']}".strip(), format_value(r["ours_at"]), format_value(r["ratio"])] for r in rows]  # fmt: skip
    return _table([head] + body)
