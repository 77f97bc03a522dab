"""``sci-ingest timings``: the stage timings of a run, the runs recorded, the load per worker.

:func:`chosen_run` is also how ``sci-ingest report`` picks its run.
"""

from __future__ import annotations

from ingest.cli.common import settings_from
from ingest.errors import Exit
from ingest.fileio import printable, stderr_line
from ingest.report import dumps, iso_utc, table, timing_table, worker_table
from ingest.server.connection import database
from ingest.store.catalog import TIMINGS
from ingest.store.mongo import db_errors
from ingest.timing import NEVER_SET, level_filter, run_status

__all__ = ["cmd_timings", "chosen_run", "run_rows", "worker_rows", "NO_RUNS", "unknown_run"]

#: What ``timings``, ``timings --list`` and ``report`` say on stderr when no run is recorded (exit 1).
NO_RUNS = "no runs recorded yet: `sci-ingest run` makes one"


def unknown_run(run_id: str) -> str:
    """What ``timings`` and ``report`` say of a --run that is not recorded (exit 64)."""
    return f"no run {run_id!r} is recorded; `sci-ingest timings --list` lists the runs"


def cmd_timings(args) -> int:
    with database(settings_from(args)) as conn, db_errors("reading the timings"):
        coll = conn.db[TIMINGS]
        if args.list:
            runs = run_rows(coll)
            if not runs:
                stderr_line(f"error: {NO_RUNS}")
                return Exit.FATAL
            if args.json:
                print(dumps({"runs": runs}))
            else:
                print(table(runs, [("run_id", "run"), ("started", "started (UTC)"), ("ended", "ended (UTC)"),
                                   ("stages", "stages"), ("records_out", "records out"), ("status", "status")],
                            left=3))
            return Exit.OK
        run_id, why = chosen_run(coll, args)
        if run_id is None:
            stderr_line(f"error: {unknown_run(args.run) if args.run else NO_RUNS}")
            return Exit.USAGE if args.run else Exit.FATAL
        level = "worker" if args.workers else "file" if args.files else "run"
        query = {"run_id": run_id, **level_filter(level)}
        if args.workers:
            query["stage"] = "load"
        rows = list(coll.find(query, {"_id": 0}).sort("started", 1))
        if args.workers and not rows:  # a run recorded before worker rows: summed from its file rows
            rows = worker_rows(list(coll.find({"run_id": run_id, "stage": "load", **level_filter("file")},
                                              {"_id": 0})))
    if args.workers:
        rows = [{**r, "files": r.get("files", (r.get("detail") or {}).get("files"))} for r in rows]
    if args.json:
        print(dumps({"run_id": run_id, "workers" if args.workers else "stages": rows}))
    else:
        print(f"run {printable(run_id)} ({why}; `sci-ingest timings --list` lists the others)")
        print(worker_table(rows) if args.workers else timing_table(rows, with_file=args.files))
    return Exit.OK


def chosen_run(coll, args) -> tuple[str | None, str]:
    """(the run to show, why that one) or (None, the error)."""
    if args.run:
        if coll.find_one({"run_id": args.run}, {"_id": 1}) is None:
            return None, unknown_run(args.run)
        return args.run, "asked for"
    if args.last:
        last = coll.find_one({}, {"run_id": 1}, sort=[("started", -1)])
        return (last["run_id"], "the most recent run") if last else (None, "no runs recorded yet")
    worked = coll.find_one({"file": {"$exists": False}, "worker": {"$exists": False}, "stage": {"$ne": "cluster"},
                            "$or": [{"records_in": {"$gt": 0}}, {"records_out": {"$gt": 0}}]},
                           {"run_id": 1}, sort=[("started", -1)])
    if worked:
        return worked["run_id"], "the most recent run that did work"
    last = coll.find_one({}, {"run_id": 1}, sort=[("started", -1)])
    return (last["run_id"], "the most recent run; none did any work") if last else (None, "no runs recorded yet")


def run_rows(coll, limit: int = 50) -> list[dict]:
    """One row per recorded run, newest first: when it started, its stages, what it wrote, its status."""
    pipeline = [
        {"$match": level_filter("run")},
        {"$group": {"_id": "$run_id", "ended": {"$max": "$ended"},  # a start never set (1970, old rows) left out
                    "started": {"$min": {"$cond": [{"$gte": ["$started", NEVER_SET]}, "$started", None]}},
                    "stages": {"$push": {"stage": "$stage", "status": "$status", "detail": {
                        "run_status": "$detail.run_status", "exit_code": "$detail.exit_code"}}},
                    "records_out": {"$sum": {"$ifNull": ["$records_out", 0]}}}},
        {"$sort": {"started": -1}},
        {"$limit": limit},
    ]
    rows = []
    for r in coll.aggregate(pipeline):
        close: dict = next((s["detail"] for s in r["stages"] if s.get("stage") == "close"), {})
        rows.append({"run_id": r["_id"], "started": iso_utc(r["started"]) if r["started"] else None,
                     "ended": iso_utc(r["ended"]) if r.get("ended") else None,
                     "stages": len(r["stages"]), "records_out": r["records_out"], "status": run_status(r["stages"]),
                     **({"exit_code": close["exit_code"]} if close.get("exit_code") is not None else {})})
    return rows


def worker_rows(file_rows: list[dict]) -> list[dict]:
    """The load's per-file rows summed per worker: files, documents, bytes, seconds, rates."""
    by_worker: dict[str, dict] = {}
    for row in file_rows:
        w = by_worker.setdefault(row.get("worker") or "-", {"worker": row.get("worker") or "-", "files": 0,
                                                            "records_in": 0, "records_out": 0, "bytes": 0,
                                                            "seconds": 0.0})
        w["files"] += 1
        for key in ("records_in", "records_out", "bytes", "seconds"):
            w[key] += row.get(key) or 0
    for w in by_worker.values():
        w["records_per_s"] = round(w["records_out"] / w["seconds"], 1) if w["seconds"] else None
        w["mb_per_s"] = round(w["bytes"] / 1e6 / w["seconds"], 2) if w["seconds"] else None
        w["seconds"] = round(w["seconds"], 3)
    return sorted(by_worker.values(), key=lambda w: w["worker"])
