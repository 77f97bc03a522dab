"""Which runs ``sci-ingest report`` shows: the default run (the last *full* run), the runs before
it, and their load throughput across runs, as a plot.

**A full run** is one that loaded documents (its run-level ``load`` row wrote some) or computed an
analysis (an ``analyze.<name>`` row that read records; one skipped because nothing changed read
none): what the page's analysis sections and plots are made of.  A validate-only run, a run that
found nothing new, a run refused before it loaded are not full runs; ``--run ID`` shows any run.
When no run is full, the page shows the most recent run that did work, saying so.

**Throughput** is measured on the load alone: files per second and documents per second over the
load stage's own time, that is its seconds less the start-ups inside it (the Dask cluster started
for it, its workers' imports: :func:`ingest.timing.own_seconds`); a command's ``start-up`` and
``connect`` are stages of their own, outside it.  So a small load is not a collapse because its
cluster took 2 s to start.  The analyses and the validation are plotted apart, in records per
second of each stage (the larger of its records in and out, over its seconds).
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from ingest.cli.timings import chosen_run
from ingest.timing import NEVER_SET, level_filter, own_seconds, run_status

__all__ = ["FULL_RUN", "pick", "history", "load_throughput", "real_start", "throughput_figure", "THROUGHPUT_NOTE"]

#: The filter of the rows that make a run full (see the module's text).
FULL_RUN = {**level_filter("run"),
            "$or": [{"stage": "load", "records_out": {"$gt": 0}},
                    {"stage": {"$regex": r"^analyze\."}, "records_in": {"$gt": 0}}]}

#: What the page says under the throughput plot.
THROUGHPUT_NOTE = ("Load throughput: files loaded (read or refused, not those skipped as unchanged) and documents "
                   "written per second of the load stage's own time: the Dask cluster started for it and its "
                   "workers' imports are left out, and so are the command's start-up and connect (stages of their "
                   "own). Analyses and validation: records per second of each stage (the larger of records in and "
                   "out, over the stage's seconds).")


def pick(coll, run_id: str | None) -> tuple[str | None, str]:
    """(the run to show, why that one): ``run_id`` when given and recorded, else the last full run,
    else the most recent run that did work; (None, why not) when there is none."""
    if run_id:
        return chosen_run(coll, SimpleNamespace(run=run_id, last=False))
    full = coll.find_one(FULL_RUN, {"run_id": 1}, sort=[("started", -1)])
    if full:
        return full["run_id"], "the last full run: it loaded or analysed"
    chosen, why = chosen_run(coll, SimpleNamespace(run=None, last=False))
    return chosen, (f"{why}; no run loaded or analysed" if chosen else why)


def real_start(moment: dt.datetime | None) -> dt.datetime | None:
    """``moment``, or None for a start that was never set (a 1970 date of a row written before)."""
    if moment is None:
        return None
    naive = moment.replace(tzinfo=None) if moment.tzinfo is None else \
        moment.astimezone(dt.UTC).replace(tzinfo=None)
    return None if naive < NEVER_SET else moment


def history(coll, first: dt.datetime, runs: int) -> tuple[list[dict], list[dict]]:
    """(the last ``runs`` runs that started by ``first``, oldest first; all their run-level rows)."""
    pipeline = [
        {"$match": {**level_filter("run"), "started": {"$gte": NEVER_SET}}},
        {"$group": {"_id": "$run_id", "started": {"$min": "$started"}}},
        {"$match": {"started": {"$lte": first}}},
        {"$sort": {"started": -1}},
        {"$limit": runs},
    ]
    found = list(coll.aggregate(pipeline))[::-1]
    rows = list(coll.find({"run_id": {"$in": [r["_id"] for r in found]}, **level_filter("run")},
                          {"_id": 0, "run_id": 1, "stage": 1, "records_in": 1, "records_out": 1, "records_per_s": 1,
                           "seconds": 1, "started": 1, "ended": 1, "status": 1, "detail.run_status": 1,
                           "detail.exit_code": 1}).sort("started", 1))  # fmt: skip
    by_run: dict[str, list[dict]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    out = []
    for r in found:
        mine = by_run.get(r["_id"], [])
        out.append({"run": r["_id"], "started": r["started"], "stages": len(mine),
                    "records_out": sum(x.get("records_out") or 0 for x in mine), "status": run_status(mine)})
    return out, rows


def load_throughput(rows: list[dict]) -> dict | None:
    """The load throughput of one run's run-level ``rows``: files/s and documents/s over the load's
    own seconds (:func:`ingest.timing.own_seconds`), and those seconds; None when it loaded nothing."""
    load = next((r for r in rows if r.get("stage") == "load"), None)
    parse = next((r for r in rows if r.get("stage") == "parse"), None)
    if load is None or not (load.get("records_out") or 0):
        return None
    seconds = own_seconds(load, rows)
    if seconds <= 0:
        return None
    files = (parse or {}).get("records_in") or 0
    return {"files_per_s": files / seconds if files else None, "documents_per_s": load["records_out"] / seconds,
            "seconds": seconds}


def throughput_figure(runs: list[dict], rows: list[dict], run_id: str, when):
    """Two panels across ``runs`` (oldest first): the load's files/s and documents/s, and each
    analysis's and the validation's records/s; None when no run has a rate.  ``when``: a run's
    start as text."""
    import matplotlib  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    index = {r["run"]: i for i, r in enumerate(runs)}
    by_run: dict[str, list[dict]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    load: dict[str, list[tuple[int, float]]] = {"files/s": [], "documents/s": []}
    stages: dict[str, list[tuple[int, float]]] = {}
    for run, mine in by_run.items():
        if run not in index:
            continue
        rates = load_throughput(mine)
        for key, label in (("files_per_s", "files/s"), ("documents_per_s", "documents/s")):
            if rates and rates[key]:
                load[label].append((index[run], rates[key]))
        for row in mine:
            rate = row.get("records_per_s")
            if (row["stage"].startswith("analyze.") or row["stage"] == "validate") and isinstance(rate, (int, float)) \
                    and rate > 0:
                stages.setdefault(row["stage"], []).append((index[run], float(rate)))
    if not any(load.values()) and not stages:
        return None
    fig = Figure(figsize=(11.0, 4.4))
    left, right = fig.subplots(1, 2)
    for ax, series, title, ylabel in (
            (left, load, "load: files and documents per second of its own time\n(cluster start, start-up "
                         "and connect excluded)", "per second of the load (log)"),
            (right, stages, "analyses and validation: records per second", "records/s (log)")):
        drawn = False
        for name, points in series.items():
            if points:
                points.sort()
                ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
                drawn = True
        if drawn:
            ax.set_yscale("log")
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no rate in these runs", transform=ax.transAxes, ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([f"{when(r['started'])[5:19]}\n{r['run'][-6:]}" for r in runs], fontsize=7,
                           rotation=30 if len(runs) > 4 else 0, ha="right" if len(runs) > 4 else "center")
        ax.set_xlim(-0.5, len(runs) - 0.5)
        if run_id in index:
            ax.axvline(index[run_id], color="#888", linestyle="--", linewidth=1)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("run (started, UTC; id ends in); dashed: this run", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig
