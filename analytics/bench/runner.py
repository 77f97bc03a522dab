"""Run one experiment: connect, measure, store in ``bench_runs``, write the files, print."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from analytics.bench.core import RUNS, Context, Experiment, machine, new_run_id, software
from analytics.bench.output import compare, write_files
from ingest.server.connection import database
from ingest.store.mongo import close_client, connect, db_errors

__all__ = ["run_experiment", "BUDGET_S", "machine_label", "stored_runs", "BENCH_DB_SUFFIX"]

#: A run's database is ``<db>_bench_<6 hex digits>`` (the end of its run id): its shape, for the length.
BENCH_DB_SUFFIX = "_bench_" + "x" * 6
# the deadline given to an experiment's load generators, per size (--quick: the whole command
# stays under two minutes with the server's start and the files written)
BUDGET_S = {"tiny": 45.0, "quick": 95.0, "full": 6 * 3600.0}


def machine_label(m: dict) -> str:
    gb = (m.get("memory_bytes") or 0) / 2**30
    return f"{m.get('cores')} cores, {gb:.0f} GB RAM, {m.get('cpu', '?')}"


def run_experiment(experiment: Experiment, size: str, settings, out_dir: Path,
                   log: Callable[[str], None] = print, params: dict | None = None) -> dict:
    """Run ``experiment`` at ``size`` (or with ``params``) on the configured MongoDB (the
    embedded server by default); store and write its run document and return it."""
    params = experiment.params(size) if params is None else params
    started = datetime.now(UTC)
    run_id = new_run_id(experiment.name, started)
    scratch = Path(tempfile.mkdtemp(prefix=f"sci-ingest-bench-{experiment.name}-"))
    with database(settings, log) as conn:
        # a database of this run's own (two runs at once on one server must not drop each other's data)
        bench_db = f"{settings.db_name}_bench_{run_id.rsplit('-', 1)[1]}"  # as long as BENCH_DB_SUFFIX says
        ctx = Context(uri=conn.uri, db_name=bench_db, server=conn.info.as_dict(), embedded=conn.embedded is not None,
                      scratch=scratch, size=size, deadline=time.monotonic() + BUDGET_S.get(size, BUDGET_S["quick"]),
                      log=log, scheduler=getattr(settings, "dask_scheduler", None))  # fmt: skip
        log(f"{experiment.name} ({size}) on {conn.info.label()}: {experiment.title}")
        t0 = time.perf_counter()
        try:
            points = experiment.run(ctx, params)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            client = connect(conn.uri)
            try:
                with db_errors(f"dropping the bench database {bench_db}", uri=conn.uri):
                    client.drop_database(bench_db)
            finally:
                close_client(client)
        seconds = time.perf_counter() - t0
        mach = machine()
        hardware = f"{machine_label(mach)}; {conn.info.label()}"
        run = {
            "_id": run_id,
            "experiment": experiment.name,
            "study": experiment.study,
            "figures": experiment.figures,
            "title": experiment.title,
            "size": size,
            "params": params,
            "started_at": started,
            "seconds": round(seconds, 3),
            "machine": mach,
            "machine_label": machine_label(mach),
            "server": ctx.server,
            "server_label": conn.info.label(),
            "embedded": ctx.embedded,
            "software": software(),
            "points": points,
            "comparison": compare(experiment, points, hardware),
            "notes": ctx.notes,
            "differences": experiment.differences,
        }
        run["files"] = write_files(run, experiment, out_dir)
        with db_errors(f"storing the run in {RUNS}", uri=conn.uri):
            conn.db[RUNS].replace_one({"_id": run_id}, run, upsert=True)
    return run


def stored_runs(db, names: list[str] | None = None, latest: bool = True) -> list[dict]:
    """The runs in ``bench_runs`` (newest first), or only each experiment's newest with ``latest``."""
    query = {"experiment": {"$in": names}} if names else {}
    with db_errors(f"reading {RUNS}"):
        runs = list(db[RUNS].find(query).sort("started_at", -1))
    if not latest:
        return runs
    seen: dict[tuple, dict] = {}
    for r in runs:
        seen.setdefault((r["experiment"], r.get("size")), r)
    return list(seen.values())
