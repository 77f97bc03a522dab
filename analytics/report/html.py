"""``sci-ingest report``: one run on a self-contained HTML page.

What the page shows, all of it read from the database (``stage_timings``,
``validation_runs``, the collections) and the Parquet outputs, never from "now":

* a header with the run's id, status, server and dates (its first and last stage);
* the run's stage table (the rows ``sci-ingest timings`` prints) and its files;
* throughput (records/s) per stage across the last ``runs`` runs up to this one, as a plot;
* documents per collection: the loaded data, the analysis outputs with their Parquet files'
  sizes, and the bookkeeping;
* validation: one row per suite, every failed expectation named, critical ones first, with
  the offending values as the validation stored them;
* one section per declared analysis: its description, questions, its output columns as
  declared (type, unit, meaning), this run's counts
  (records in/out, excluded by reason) and its plot (``analysis.plot(frame)``) of the output
  now published (the Parquet file when this database's runs wrote it, else the collection).

The page needs nothing but itself (:mod:`analytics.report.page`): styles inline, plots as PNG
``data:`` URIs, no script, no external URL.  Every string from the database is escaped:
file names, formulas and ids are data, and data can be hostile.  Escaped twice: control
characters (a newline, ESC, the bidirectional controls) are shown as ``\\n``, ``\\x1b``,
``\\u202e`` (:func:`ingest.fileio.printable`, file names with their backslashes made
unambiguous), then the text is HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from analytics.registry import all_analyses
from analytics.report import runs as past
from analytics.report.page import CSS, esc as _html_esc, figure_uri, html_table
from analytics.validation.suites import COLUMN_KWARGS, COLUMN_LIST_KWARGS
from ingest.config import SYNTHETIC_SAMPLES
from ingest.errors import ConfigError, SciIngestError, UsageError
from ingest.fileio import printable, stderr_line
from ingest.report import cell
from ingest.schema import conform
from ingest.server.connection import database
from ingest.store.catalog import DATA_COLLECTIONS, HOLDING, LEDGER, TIMINGS, VALIDATION
from ingest.store.mongo import db_errors, redact
from ingest.store.outputs import outputs_of
from ingest.timing import level_filter, run_status

__all__ = ["NoRun", "UnknownRun", "collect", "render", "write_report", "DEFAULT_RUNS"]

#: How many runs the throughput plot spans by default.
DEFAULT_RUNS = 10
#: At most this many rows of an output collection are read for its plot (the Parquet file has no limit).
MAX_PLOT_ROWS = 500_000
#: At most this many files are listed.
MAX_FILES = 200

_CSS_RUN = """
header{border-bottom:2px solid #ddd;padding-bottom:.6rem}header h1{margin-bottom:.3rem}
.badge{display:inline-block;padding:.1rem .65rem;border-radius:1rem;color:#fff;font-weight:600;font-size:.9rem}
.badge{vertical-align:middle}.b-ok{background:#1a7f37}.b-partial{background:#9a6700}.b-failed{background:#c62828}
.synthetic{background:#fdecea;border-left-color:#c62828}
tr.failed td{background:#fdecea}tr.partial td{background:#fff8e1}
.crit{color:#c62828;font-weight:600}.warn{color:#9a6700;font-weight:600}
ul.failures{padding-left:1.2rem}ul.failures li{margin:.3rem 0}section.analysis{margin-top:1rem}
"""


def esc(value) -> str:
    """``value`` as HTML text, its control characters shown as escapes (``printable``)."""
    return _html_esc(printable(str(value), backslash=False))


class NoRun(SciIngestError):
    """No run is recorded in the database (exit 1)."""


class UnknownRun(UsageError):
    """``--run`` names a run the database has no record of (exit 64)."""


def _fmt(value) -> str:
    if isinstance(value, dt.datetime):
        return _when(value)
    if isinstance(value, dict):
        return printable(", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()), backslash=False) or "-"
    return cell(value)


def _when(moment: dt.datetime | None) -> str:
    if moment is None:
        return "-"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


# ------------------------------------------------------------------ reading
def _pick(coll, run_id: str | None) -> tuple[str, str]:
    """(the run, why that one): the one asked for, else the last full run (:mod:`analytics.report.runs`)."""
    chosen, why = past.pick(coll, run_id)
    if chosen is None:
        if run_id:
            raise UnknownRun(f"no run {run_id!r} is recorded; `sci-ingest timings --list` lists the runs")
        raise NoRun(f"{why}: `sci-ingest run` makes one")
    return chosen, why


def _synthetic(db, collections: list[dict]) -> list[dict]:
    """Per loaded collection holding the bundled synthetic samples (:data:`ingest.config.SYNTHETIC_SAMPLES`,
    found in the ledger by sha256): its documents from them and its documents now."""
    from_samples: dict[str, int] = {}
    files: set[str] = set()
    for entry in db[LEDGER].find({**HOLDING, "sha256": {"$in": list(SYNTHETIC_SAMPLES)}},
                                 {"sha256": 1, "records": 1}):
        files.add(SYNTHETIC_SAMPLES[entry["sha256"]])
        for coll, n in (entry.get("records") or {}).items():
            from_samples[coll] = from_samples.get(coll, 0) + int(n or 0)
    now = {r["collection"]: r["documents"] for r in collections if r["kind"] == "loaded data"}
    return [{"collection": c, "documents": n, "of": now.get(c), "files": sorted(files)}
            for c, n in sorted(from_samples.items()) if n]


def _collections(db, analyses, stages: list[dict], out_dir: Path) -> list[dict]:
    present = set(db.list_collection_names())

    def count(name):
        return db[name].estimated_document_count() if name in present else None

    rows = [{"collection": c, "kind": "loaded data", "documents": count(c)} for c in DATA_COLLECTIONS]
    for a in analyses:
        path = _parquet_path(a, stages, out_dir)
        rows.append({"collection": a.output, "kind": f"output of {a.name}", "documents": count(a.output),
                     "parquet": printable(path.name), "folder": printable(path.parent),
                     "parquet_size": _size(path.stat().st_size) if path.is_file() else "absent"})
    rows += [{"collection": c, "kind": "bookkeeping", "documents": count(c)} for c in (LEDGER, TIMINGS, VALIDATION)]
    for r in rows:
        if r["documents"] is None:
            r["documents"] = "absent"
    return rows


def _parquet_path(analysis, stages: list[dict], out_dir: Path) -> Path:
    row = _stage(stages, f"analyze.{analysis.name}")
    recorded = ((row or {}).get("detail") or {}).get("parquet")
    return Path(recorded) if recorded else Path(out_dir) / analysis.parquet_name


def _stage(stages: list[dict], name: str) -> dict | None:
    return next((r for r in stages if r.get("stage") == name), None)


def _output_frame(db, analysis, path: Path, timings) -> tuple[object | None, str]:
    """(the analysis's published output as a frame, or None; where it was read from)."""
    if path.is_file():
        try:
            table = pq.read_table(path)
            meta = json.loads((table.schema.metadata or {}).get(b"sci_ingest", b"{}"))
        except (OSError, ValueError) as exc:
            stderr_line(f"warning: {printable(path)}: {exc}")
        else:  # only a file this database's runs wrote (the home's out/ may hold another database's)
            if meta.get("run_id") and timings.find_one({"run_id": meta["run_id"], "stage": f"analyze.{analysis.name}"},
                                                       {"_id": 1}):
                return table.to_pandas(), f"the Parquet file {path.name} (run {meta['run_id']})"
    docs = list(db[analysis.output].find({}, {"_id": 0}).limit(MAX_PLOT_ROWS + 1))
    if not docs:
        return None, f"the collection {analysis.output}"
    where = f"the collection {analysis.output}"
    if len(docs) > MAX_PLOT_ROWS:
        docs, where = docs[:MAX_PLOT_ROWS], f"the first {MAX_PLOT_ROWS:,} documents of the collection {analysis.output}"
    frame = pd.DataFrame(docs)
    runs = frame["run_id"] if "run_id" in frame else None
    frame = conform(frame, analysis.output_types)
    if runs is not None:
        frame["run_id"] = runs.to_numpy()
    return frame, where


def collect(conn, settings, run_id: str | None = None, runs: int = DEFAULT_RUNS) -> dict:
    """Everything the page shows, read from ``conn`` (a :class:`ingest.server.connection.Connection`)."""
    db = conn.db
    with db_errors("reading the run for the report"):
        timings = db[TIMINGS]
        run_id, why = _pick(timings, run_id)
        stages = list(timings.find({"run_id": run_id, **level_filter("run")}, {"_id": 0}).sort("started", 1))
        files = list(timings.find({"run_id": run_id, "stage": "load", **level_filter("file")},
                                  {"_id": 0, "file": 1, "records_in": 1, "records_out": 1, "bytes": 1, "seconds": 1,
                                   "status": 1, "error": 1}))  # fmt: skip
        # a run stopped before its stages ended has per-file rows only: its times come from those
        timed = stages or list(timings.find({"run_id": run_id}, {"started": 1, "ended": 1}))
        last = max((r.get("ended") or r.get("started") for r in timed), default=None)
        first = min((s for s in (past.real_start(r.get("started")) for r in timed) if s), default=last)
        # no row of the run has a time (first None): no run started by then, as the server would answer
        history, history_rows = past.history(timings, first, runs) if first is not None else ([], [])
        validation = list(db[VALIDATION].find({"run_id": run_id}, {"_id": 0}).sort("suite", 1))
        analyses = all_analyses()
        folder = outputs_of(settings, conn).folder  # this database's Parquet files, unless the run recorded others
        collections = _collections(db, analyses, stages, folder)
        synthetic = _synthetic(db, collections)
        outputs = {}
        for a in analyses:
            outputs[a.name] = _output_frame(db, a, _parquet_path(a, stages, folder), timings)
    files.sort(key=lambda f: (f.get("status") == "ok", str(f.get("file"))))
    for f in files:  # file names are data: shown escaped (the cells' text is escaped again, idempotently)
        if isinstance(f.get("file"), str):
            f["file"] = printable(f["file"])
    return {"run_id": run_id, "why": why, "server": f"{conn.info.label()} at {redact(conn.uri)}",
            "server_kind": sorted({r["server_kind"] for r in stages if r.get("server_kind")}),
            "db_name": db.name, "first": first, "last": last, "synthetic": synthetic,
            "status": run_status(stages) if stages else "unfinished",
            "stages": stages, "files": files, "history": history, "history_rows": history_rows, "runs": runs,
            "validation": validation, "collections": collections, "analyses": analyses, "outputs": outputs}


# ------------------------------------------------------------------ plots
def figures(data: dict):
    """Every plot the page draws, as (name, matplotlib figure), or (name, the exception) for a plot
    that failed: ``throughput`` and each analysis's with an output to plot."""
    yield "throughput", past.throughput_figure(data["history"], data["history_rows"], data["run_id"], _when)
    for analysis in data["analyses"]:
        frame, _ = data["outputs"].get(analysis.name, (None, ""))
        if analysis.plot is None or frame is None or not len(frame):
            continue
        try:
            yield analysis.name, analysis.plot(frame)
        except Exception as exc:  # one analysis's broken plot does not take the report down
            stderr_line(f"warning: the plot of {analysis.name} failed: {type(exc).__name__}: {exc}")
            yield analysis.name, exc


def describe(fig) -> str:
    """What a figure shows, as its image's alt text: per panel its title, axis labels and annotations."""
    panels = []
    for ax in fig.axes:
        words = [ax.get_title(), f"x: {ax.get_xlabel()}" if ax.get_xlabel() else "",
                 f"y: {ax.get_ylabel()}" if ax.get_ylabel() else ""] + [t.get_text() for t in ax.texts]
        panels.append("; ".join(" ".join(w.split()) for w in words if w.strip()))
    return " | ".join(p for p in panels if p)


def _plot_img(fig, name: str) -> str:
    alt = f"{name}: {describe(fig)}"
    return f'<img class="plot" alt="{esc(alt)}" src="{figure_uri(fig)}">'


# ------------------------------------------------------------------ rendering
STAGE_COLUMNS = [("stage", "stage"), ("records_in", "records in"), ("records_out", "records out"),
                 ("seconds", "seconds"), ("records_per_s", "records/s"), ("mb_per_s", "MB/s"),
                 ("workers", "workers"), ("peak_rss_mb", "peak RSS MB"), ("status", "status"), ("error", "error")]


def _row_class(row: dict) -> str:
    status = row.get("status")
    return status if status in ("failed", "partial") else ""


def _badge(status: str) -> str:
    """The badge's colour of a run's status: green ok, red failed or refused, amber the rest."""
    if status == "ok":
        return "ok"
    return "failed" if status.startswith(("failed", "refused", "validation failed")) else "partial"


def _stages_section(data: dict) -> str:
    stages = data["stages"]
    columns = STAGE_COLUMNS if any(r.get("error") for r in stages) else STAGE_COLUMNS[:-1]
    out = ['<h2 id="stages">Stages</h2>', html_table(stages, columns, text={"status", "error"}, fmt=_fmt,
                                                     row_class=_row_class, table_id="stage-table")]
    if not stages:
        out.append('<p class="note">No stage of this run ended: it stopped while loading (its files are below).</p>')
    files = data["files"]
    if files:
        failed = sum(1 for f in files if f.get("status") != "ok")
        out.append(f"<h3>Files loaded ({len(files):,}; {failed:,} not ok)</h3>")
        shown = html_table(files[:MAX_FILES], [("file", "file"), ("records_in", "documents"),
                                               ("records_out", "written"), ("bytes", "bytes"), ("seconds", "seconds"),
                                               ("status", "status"), ("error", "error")],
                           text={"status", "error"}, fmt=_fmt, row_class=_row_class, table_id="file-table")  # fmt: skip
        out.append(f"<details{' open' if failed else ''}><summary>every file of the run, failed first</summary>"
                   + shown
                   + (f'<p class="meta">and {len(files) - MAX_FILES:,} more</p>' if len(files) > MAX_FILES else "")
                   + "</details>")
    return "\n".join(out)


def _throughput_section(data: dict, fig) -> str:
    out = [f'<h2 id="throughput">Throughput (last {len(data["history"])} run(s))</h2>']
    out.append(_plot_img(fig, "throughput across runs") if fig else
               '<p class="missing">No stage of these runs processed records: no rate to plot.</p>')
    out.append(f'<p class="meta" id="throughput-note">{esc(past.THROUGHPUT_NOTE)}</p>')
    out.append("<details><summary>the runs</summary>"
               + html_table(data["history"][::-1], [("run", "run"), ("started", "started"), ("stages", "stages"),
                                                    ("records_out", "records out"), ("status", "status")],
                            text={"started", "status"}, fmt=_fmt, row_class=_row_class)  # fmt: skip
               + "</details>")
    return "\n".join(out)


def _collections_section(data: dict) -> str:
    folders = sorted({r["folder"] for r in data["collections"] if r.get("folder")})
    return ('<h2 id="collections">Documents per collection</h2>'
            f'<p class="meta">Database <code>{esc(data["db_name"])}</code>, now (documents: the server\'s '
            "collection statistics); the Parquet files are the analyses' outputs on this machine, in "
            + ", ".join(f"<code>{esc(f)}</code>" for f in folders) + ".</p>"
            + html_table(data["collections"], [("collection", "collection"), ("kind", "kind"), ("documents", "documents"),
                                               ("parquet", "Parquet file"), ("parquet_size", "size")],
                         text={"kind", "parquet"}, fmt=_fmt, table_id="collection-table"))


def _failure(suite: dict, result: dict) -> str:
    crit = '<span class="crit">CRITICAL</span>' if result.get("critical") else '<span class="warn">warning</span>'
    text = f"{crit} {esc(suite.get('suite'))}: <code>{esc(result.get('expectation'))}</code>"
    if result.get("column"):
        text += f" on <code>{esc(result['column'])}</code>"
    args = {k: v for k, v in (result.get("kwargs") or {}).items() if k not in COLUMN_KWARGS + COLUMN_LIST_KWARGS}
    if args:
        text += " (" + esc(", ".join(f"{k}={v!r}" for k, v in args.items())) + ")"
    if result.get("exception"):
        return text + f": error: {esc(result['exception'])}"
    if result.get("unexpected_count") is not None:
        text += f": {esc(_fmt(result['unexpected_count']))} of {esc(_fmt(result.get('element_count')))} rows unexpected"
        if result.get("sample"):
            text += f"; offending values: <code>{esc(repr(result['sample']))}</code>"
        ids = [r.get("_id") for r in result.get("sample_rows") or [] if r.get("_id") is not None]
        if ids:
            text += f" at _id <code>{esc(', '.join(repr(i) for i in ids))}</code>"
    elif "observed_value" in result:
        text += f": observed <code>{esc(repr(result['observed_value']))}</code>"
    if result.get("notes"):
        text += f' <span class="meta">({esc(result["notes"])})</span>'
    return text


def _validation_section(data: dict) -> str:
    out = ['<h2 id="validation">Validation</h2>']
    suites = data["validation"]
    if not suites:
        return out[0] + '<p class="missing">This run did not validate (`sci-ingest validate` does).</p>'
    rows = []
    for s in suites:  # each suite's status as the validation gave it: a skipped one is not "passed"
        stats = s.get("statistics") or {}
        results = s.get("results") or []
        crit = sum(1 for r in results if not r.get("success") and r.get("critical"))
        rows.append({"suite": s.get("suite"), "collection": s.get("collection"), "status": s.get("status") or "-",
                     "rows": s.get("rows"),
                     "expectations": f"{_fmt(stats.get('successful'))} / {_fmt(stats.get('evaluated'))}",
                     "critical failures": crit, "seconds": s.get("duration_s"),
                     "_class": "failed" if crit else "partial" if not s.get("success") else ""})
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    out.append(f'<p id="validation-summary">{len(rows)} suite(s): '
               + esc(", ".join(f"{n} {status}" for status, n in counts.items())) + ".</p>")
    out.append(html_table(rows, ["suite", "collection", "status", "rows", "expectations",
                                 "critical failures", "seconds"], text={"collection", "status"},
                          fmt=_fmt, row_class=lambda r: r["_class"], table_id="validation-table"))
    failures = [(s, r) for s in suites for r in s.get("results") or [] if not r.get("success")]
    failures.sort(key=lambda f: not f[1].get("critical"))
    if failures:
        out.append("<h3>Failed expectations</h3><ul class=\"failures\">"
                   + "".join(f"<li>{_failure(s, r)}</li>" for s, r in failures) + "</ul>")
    return "\n".join(out)


def _analysis_section(data: dict, analysis, drawn: dict) -> str:
    name = analysis.name
    out = [f'<section class="analysis" id="analysis-{esc(name)}" data-analysis="{esc(name)}">',
           f"<h2>Analysis <code>{esc(name)}</code></h2>", f"<p>{esc(analysis.description)}</p>",
           f'<p class="meta">{esc(analysis.source)} &rarr; collection <code>{esc(analysis.output)}</code> and '
           f"<code>{esc(analysis.parquet_name)}</code></p>"]
    if analysis.questions:
        out.append("<p>Questions it answers:</p><ul>" + "".join(f"<li>{esc(q)}</li>" for q in analysis.questions)
                   + "</ul>")
    out.append(_output_columns(analysis))
    row = _stage(data["stages"], f"analyze.{name}")
    if row is None:
        out.append('<p class="missing">This run did not run this analysis.</p>')
    else:
        detail = row.get("detail") or {}
        counts = {"records in": row.get("records_in"), "records out": row.get("records_out"),
                  "seconds": row.get("seconds"), "status": row.get("status"),
                  **{f"excluded: {k}": v for k, v in (detail.get("excluded") or {}).items()}}
        out.append(html_table([counts], list(counts), text={"status"}, fmt=_fmt, row_class=_row_class))
        scope = detail.get("scope") or {}
        if scope.get("reason"):
            out.append(f'<p class="meta">read: {esc(scope.get("mode"))} ({esc(scope["reason"])})</p>')
    frame, where = data["outputs"].get(name, (None, ""))
    if frame is None or not len(frame):
        out.append(f'<p class="missing">No output to plot: {esc(where or analysis.output)} is empty or absent '
                   f"(<code>sci-ingest analyze {esc(name)}</code> makes it).</p>")
    elif analysis.plot is None:
        out.append(f'<p class="missing">This analysis declares no plot; its output has {len(frame):,} row(s) '
                   f"in {esc(where)}.</p>")
    else:
        out.append(_analysis_plot(analysis, drawn.get(name), frame, where, data["run_id"]))
    if analysis.source in {s["collection"] for s in data["synthetic"]}:
        out.append(f'<p class="note synthetic">Its source, <code>{esc(analysis.source)}</code>, holds the bundled '
                   "synthetic samples (see the top of the page): these figures describe generated data.</p>")
    return "\n".join(out) + "</section>"


def _output_columns(analysis) -> str:
    """The output's columns as the analysis declares them: name, type, unit (— : none), meaning."""
    rows = [{"column": c.name, "type": c.kind, "unit": c.unit or "—", "meaning": c.meaning} for c in analysis.outputs]
    table = html_table(rows, ["column", "type", "unit", "meaning"], text={"type", "unit", "meaning"},
                       table_id=f"outputs-{analysis.name}")
    return (f"<details open><summary>Output columns ({len(rows)}) of <code>{esc(analysis.output)}</code>: "
            f"what each means, in which unit</summary>{table}</details>")


def _analysis_plot(analysis, fig, frame, where: str, run_id: str) -> str:
    if isinstance(fig, Exception) or fig is None:
        return f'<p class="missing">The plot failed: {esc(type(fig).__name__)}: {esc(fig)}</p>'
    img = _plot_img(fig, f"{analysis.name} plot")
    published = sorted({str(r) for r in frame["run_id"].dropna()}) if "run_id" in frame else []
    note = ""
    if published and published != [run_id]:
        note = (f'<p class="note">The output now published comes from run(s) {esc(", ".join(published[-3:]))}, '
                "not (only) this one.</p>")
    return f'{img}<p class="meta">{len(frame):,} output row(s), read from {esc(where)}.</p>{note}'


def render(data: dict, title: str = "sci-ingest run report") -> str:
    """The page for ``data`` (:func:`collect`)."""
    status = data["status"]
    crit = any(not s.get("critical_ok", True) for s in data["validation"])
    badge = "failed" if crit else _badge(status)
    label = status + (", critical validation failures" if crit else "")
    nav = ['<a href="#stages">stages</a>', '<a href="#throughput">throughput</a>',
           '<a href="#collections">collections</a>', '<a href="#validation">validation</a>']
    nav += [f'<a href="#analysis-{esc(a.name)}">{esc(a.name)}</a>' for a in data["analyses"]]
    seconds = (data["last"] - data["first"]).total_seconds() if data["last"] and data["first"] else None
    header = (f'<header><h1>{esc(title)} <span class="badge b-{esc(badge)}" id="run-status">{esc(label)}</span></h1>'
              f'<p>Run <code id="run-id">{esc(data["run_id"])}</code> ({esc(data["why"])}), '
              f"{esc(_when(data['first']))} to {esc(_when(data['last']))}"
              + (f" ({esc(_fmt(round(seconds, 1)))} s)" if seconds is not None else "") + ".</p>"
              f'<p class="meta">Database <code>{esc(data["db_name"])}</code> on {esc(data["server"])}'
              + (f"; the run's rows name {esc(', '.join(data['server_kind']))}" if data["server_kind"] else "")
              + f".</p>{_synthetic_note(data['synthetic'])}<nav>{' '.join(nav)}</nav></header>")  # fmt: skip
    drawn = dict(figures(data))
    body = [header, _stages_section(data), _throughput_section(data, drawn.get("throughput")),
            _collections_section(data), _validation_section(data)]
    body += [_analysis_section(data, a, drawn) for a in data["analyses"]]
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}: {esc(data['run_id'])}</title><style>{CSS}{_CSS_RUN}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def _synthetic_note(synthetic: list[dict]) -> str:
    """The page's note when the database holds the bundled synthetic samples; else nothing."""
    if not synthetic:
        return ""
    counts = "; ".join(f"{s['documents']:,} of the {_fmt(s['of'])} {s['collection']} documents" for s in synthetic)
    files = ", ".join(sorted({f for s in synthetic for f in s["files"]}))
    return (f'<p class="note synthetic" id="synthetic-samples"><b>Synthetic samples.</b> {esc(counts)} come from the '
            f"bundled synthetic samples ({esc(files)}): generated by <code>samples/materials/generate.py</code>, "
            "physically plausible but not real Materials Project records. Their stored energies above hull are "
            "drawn at random, so <code>hull_energy</code>'s recomputation disagrees with most of them; the analyses "
            "of them describe made-up materials.</p>")


def write_report(settings, run_id: str | None = None, out_dir: Path | None = None, runs: int = DEFAULT_RUNS,
                 log: Callable[[str], None] | None = None) -> tuple[Path, str]:
    """Write ``OUT/index.html`` (OUT: default ``<home>/out/report``); (its path, the run shown)."""
    with database(settings, log or stderr_line) as conn:
        data = collect(conn, settings, run_id, runs)
    page = render(data)
    out = Path(out_dir) if out_dir else settings.out_dir / "report"
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "index.html"
        tmp = out / f".index.html.{os.getpid()}.part"
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise ConfigError(f"cannot write the report in {out}: {exc.strerror or exc}") from exc
    return path, data["run_id"]
