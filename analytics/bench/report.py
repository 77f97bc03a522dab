"""``sci-ingest bench report``: every stored run on one self-contained HTML page.

One section per experiment (in ``bench list`` order), with each size's newest run from
``bench_runs``: its plot (the PNG it wrote, else drawn again from its points), the
points, the study's published figures beside ours (hardware named on both sides, ratios
rather than claims of equality), what differs from the study's setup, and the run's
machine, server, software and parameters.  The page needs nothing but itself: styles
inline, plots as ``data:`` URIs, no script, no font or CDN request.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from analytics.bench import all_experiments
from analytics.bench.output import format_value, plot_png, point_columns
from analytics.bench.runner import stored_runs
from analytics.report.page import CSS, esc, html_table, png_uri
from ingest.server.connection import database

__all__ = ["write_report", "render"]

_e = esc  # every string from the database is text, never markup


def _table(rows: list[dict], columns: list[str], text: frozenset = frozenset()) -> str:
    """An HTML table; the first column and those in ``text`` align left, numbers right."""
    return html_table(rows, columns, text, fmt=format_value)


def _png_uri(run: dict, experiment) -> str | None:
    path = (run.get("files") or {}).get("png")
    data = None
    if path and Path(path).is_file():
        data = Path(path).read_bytes()
    elif run.get("points"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "plot.png"
            plot_png(experiment.plot, run["points"], str(out), f"{experiment.name}: {experiment.title}")
            data = out.read_bytes()
    return None if data is None else png_uri(data)


def _comparison(rows: list[dict]) -> str:
    if not rows:
        return '<p class="missing">The study publishes no figure for this experiment.</p>'
    out = []
    for r in rows:
        out.append({"figure": r["figure"], "what": r["what"],
                    "published": f"{format_value(r['published'])} {r['unit']}".strip(), "on (study)": r["published_hardware"],
                    "ours": f"{format_value(r['ours'])} {r['unit']}".strip(), "ours at": format_value(r.get("ours_at")),
                    "on (ours)": r["ours_hardware"], "ours / published": r.get("ratio"), "note": r.get("note") or ""})
    return _table(out, ["figure", "what", "published", "on (study)", "ours", "ours at", "on (ours)", "ours / published",
                        "note"], _TEXT)  # fmt: skip


_TEXT = frozenset({"what", "on (study)", "ours at", "on (ours)", "note"})


def _run_section(run: dict, experiment) -> str:
    started = run.get("started_at")
    when = started.strftime("%Y-%m-%d %H:%M UTC") if isinstance(started, datetime) else _e(started)
    parts = [f"<h3>{_e(run.get('size'))} run <code>{_e(run['_id'])}</code></h3>",
             f'<p class="meta">{when} &middot; {_e(run.get("seconds"))} s &middot; {_e(run.get("machine_label"))} '
             f'&middot; {_e(run.get("server_label"))}</p>']  # fmt: skip
    uri = _png_uri(run, experiment)
    if uri:
        parts.append(f'<img alt="{_e(experiment.name)} plot" src="{uri}">')
    parts.append("<h3>Beside the study</h3>" + _comparison(run.get("comparison") or []))
    points = run.get("points") or []
    cols = point_columns(points)
    text = frozenset(c for c in cols if any(isinstance(p.get(c), str) for p in points))
    parts.append(f"<h3>Points ({len(points)})</h3>" + (_table(points, cols, text) if points else
                                                       '<p class="missing">no points</p>'))  # fmt: skip
    for note in run.get("notes") or []:
        parts.append(f'<p class="note">{_e(note)}</p>')
    details = {"params": run.get("params"), "machine": run.get("machine"), "server": run.get("server"),
               "software": run.get("software")}
    parts.append("<details><summary>parameters, machine, server, software</summary><pre>"
                 + _e(json.dumps(details, indent=1, default=str)) + "</pre></details>")
    return "\n".join(parts)


def render(runs: list[dict], generated: datetime | None = None) -> str:
    """The page for ``runs`` (run documents of ``bench_runs``)."""
    experiments = all_experiments()
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["experiment"], []).append(run)
    generated = generated or datetime.now(UTC)
    nav = " ".join(f'<a href="#{_e(n)}">{_e(n)}</a>' for n in experiments)
    sections = []
    for name, exp in experiments.items():
        head = (f'<h2 id="{_e(name)}">{_e(name)}: {_e(exp.title)}</h2>'
                f'<p class="meta">Reproduces <b>{_e(exp.figures)}</b> of {_e(exp.study)}.</p>')  # fmt: skip
        if exp.differences:
            head += f'<p class="note"><b>What differs from the study:</b> {_e(exp.differences)}</p>'
        mine = sorted(by_name.get(name, []), key=lambda r: ("tiny", "quick", "full").index(r.get("size", "quick"))
                      if r.get("size") in ("tiny", "quick", "full") else 9)  # fmt: skip
        if not mine:
            head += (f'<p class="missing">No stored run: <code>sci-ingest bench {_e(name)}</code> makes one.</p>'
                     + "<h3>The study's figures</h3>" + _comparison(_published_only(exp)))  # fmt: skip
        sections.append(head + "\n".join(_run_section(r, exp) for r in mine))
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>sci-ingest bench report</title>"
            f"<style>{CSS}</style></head><body><h1>sci-ingest bench report</h1>"
            f'<p class="meta">Generated {generated:%Y-%m-%d %H:%M UTC} from {len(runs)} stored run(s). '
            "Published figures come from the five source studies (their hardware is named beside them); "
            "ratios compare, they do not claim equality.</p>"
            f"<nav>{nav}</nav>" + "\n".join(sections) + "</body></html>\n")  # fmt: skip


def _published_only(exp) -> list[dict]:
    return [{"figure": p.figure, "what": p.what, "unit": p.unit, "published": p.value,
             "published_hardware": p.hardware, "note": p.note, "ours": None, "ours_at": None,
             "ours_hardware": "-", "ratio": None} for p in exp.published]  # fmt: skip


def write_report(settings, out_dir: Path, html_path: Path | None = None,
                 log: Callable[[str], None] = print) -> Path:
    """Write the page (default ``OUT/report.html``) from every stored run; return its path."""
    with database(settings, log) as conn:
        runs = stored_runs(conn.db, latest=True)
    path = Path(html_path) if html_path else Path(out_dir) / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(render(runs), encoding="utf-8")
    tmp.replace(path)
    log(f"{len(runs)} run(s) on {path}")
    return path
