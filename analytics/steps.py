"""The pipeline's ``analyze`` and ``validate`` steps, and what prepares a Dask worker for them.

Plugged into :mod:`ingest.pipeline` through :mod:`analytics.plugin` (``STEPS``, ``WARM_UPS``):
``ingest`` runs them without knowing them.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from analytics.increment import plan_scope
from analytics.reading.streaming import chunk_frame
from analytics.registry import all_analyses, select_analyses
from analytics.runner import run_analysis
from analytics.validation import validate
from analytics.validation.run import suites_to_check
from analytics.validation.stream import engine
from analytics.validation.suites import load_suites
from ingest.config import Settings
from ingest.errors import TimeLimitExceeded
from ingest.pipeline import Cluster
from ingest.server.connection import Connection, log_to_stderr
from ingest.store.mongo import db_errors
from ingest.store.outputs import outputs_of
from ingest.store.servers import traits_of
from ingest.timing import Timings, utcnow


def analyze_step(conn: Connection, timings: Timings, settings: Settings, names: Sequence[str] | None = None,
                 *, cluster: Cluster | None = None, incremental: bool = False,
                 log: Callable[[str], None] = log_to_stderr):
    """Run the named analyses (default: all) on the run's cluster, one timed stage each.

    A cluster that no step has started yet runs in this process when the analyses' sources
    hold at most ``settings.small_work`` documents together (:func:`small_work`): the same
    tasks, without starting worker processes that would import it all again.

    ``incremental``: each analysis that allows it reads only the groups of the files loaded
    since it last ran (:mod:`analytics.increment`); every analysis says what it read.
    """
    chosen = select_analyses(names)
    results = []
    outputs = outputs_of(settings, conn)  # the Parquet files of this database on this server
    # following changes, each analysis's plan first: with nothing changed no cluster is started
    scopes = {a.name: plan_scope(a, conn.uri, settings.db_name, outputs, True)
              for a in chosen} if incremental else {}  # fmt: skip
    # a skipped analysis needs no cluster, nor one that merges new files' rows (read here)
    busy = [a for a in chosen if a.name not in scopes or scopes[a.name].mode not in ("none", "merged")]
    with ExitStack() as stack:
        started: list = []

        def client_for(analyses: list):
            if not started:
                run_cluster = cluster or Cluster(settings, timings, stack)
                deciding = utcnow()
                # the changed files' documents are what a run following changes reads: the ledger counts them
                read = [scopes[a.name].documents if a.name in scopes else None for a in analyses]
                counted = [n for n in read if n is not None]
                if (len(counted) == len(read) and not run_cluster.started and not settings.dask_scheduler
                        and settings.small_work > 0):
                    small = sum(counted) if sum(counted) <= settings.small_work else None
                else:
                    sources = {c for a in analyses for c in (a.source, a.join and a.join.source) if c}
                    small = small_work(conn, settings, run_cluster, sources)
                started.append(run_cluster.client("analyze", conn.uri, in_process=small is not None, since=deciding))
            return started[0]

        client = client_for(busy) if busy else None
        for analysis in chosen:
            with timings.stage(f"analyze.{analysis.name}") as rec:
                result = run_analysis(analysis, client, conn.uri, settings.db_name, timings.run_id,
                                      outputs, incremental=incremental, scope=scopes.get(analysis.name),
                                      client_for=lambda a=analysis: client_for([a]))
                rec.records_in, rec.records_out = result.records_in, result.records_out
                rec.detail = {"partitions": result.partitions, "collection": result.collection,
                              "parquet": str(result.parquet_path), "excluded": result.excluded,
                              "read": result.read, "scope": result.scope, "publish_s": result.publish_s,
                              "check_s": result.check_s}
                results.append(result)
            if incremental:  # once its row is recorded: a stop after this line finds the analysis done
                log(f"note: {analysis.name}: {result.scope['reason']}")
    return results


def validate_step(conn: Connection, timings: Timings, settings: Settings, *, cluster: Cluster | None = None,
                  incremental: bool = False, log: Callable[[str], None] = log_to_stderr):
    """Check the suites: on the run's cluster when there is one (chunks checked on its workers), else here.

    A cluster that no step has started yet is started for the validation only when its work is not
    small (:func:`small_work`): a few thousand documents are checked here sooner than worker
    processes start and import Great Expectations (seconds each).

    ``incremental``: a suite nothing of which changed since its last verdict keeps it (not read
    again); when every suite keeps its verdict, no cluster is started and nothing imported."""
    client = None
    deciding = utcnow()
    todo = None
    if incremental:
        todo = suites_to_check(conn.uri, settings.db_name)
        merged = [name for name, n in todo.items() if n is not None]
        log(f"note: validate: {len(todo)} suite(s) to check ({', '.join(todo)}; new files' documents alone: "
            f"{', '.join(merged) or 'none'}), the others' verdicts stand (nothing they read changed)" if todo
            else "note: validate: nothing any suite reads changed since its verdict: they stand")
    specs = [spec for spec in load_suites() if todo is None or spec.name in todo]
    whole = {spec.collection for spec in specs if todo is None or todo[spec.name] is None}
    new = sum(n for n in (todo or {}).values() if n is not None)
    small = small_work(conn, settings, cluster, whole, new) if specs else 0
    if cluster is not None and small is None:
        client = cluster.client("validate", conn.uri, since=deciding)
    elif small:  # documents to check here: Great Expectations' import, timed but not the step's
        with timings.stage("warm_up.validate", started=deciding) as rec:
            rec.records_in = rec.records_out = None
            prepare_for_validation()
    with timings.stage("validate") as rec:
        report = validate(conn.uri, settings.db_name, timings.run_id, client=client, incremental=incremental)
        rec.records_in = report.rows_checked
        rec.records_out = sum(1 for s in report.suites if s.success)
        rec.detail = {"suites": len(report.suites), "ok": report.ok, "checked": "cluster" if client else "here",
                      "verdicts_kept": sum(1 for s in report.suites if s.reused_from),
                      "failed": [s.suite for s in report.failed_suites],
                      "checked_nothing": [s.suite for s in report.suites if s.skipped],
                      "verdict": report.verdict}
        if not report.ok:
            rec.status = "failed"
            rec.error = "critical expectation failed"
        elif report.failed_suites:
            rec.status = "failed"
            rec.error = report.verdict
    return report


_log = logging.getLogger(__name__)

#: The longest the count that decides small work may take (ms), where the server counts by reading
#: every document (:class:`ingest.store.servers.Traits`: about 8 µs a document on the build machine,
#: 0.5 s for 60,000), so a count that takes longer is of more documents than small work holds.
#: MongoDB answers from metadata at once, and is asked without a budget.
COUNT_BUDGET_MS = 1500


def small_work(conn: Connection, settings: Settings, cluster: Cluster | None, collections: set[str],
               documents: int = 0) -> int | None:
    """The documents of ``collections`` together when a step would start ``cluster`` only for
    itself (none started yet, no scheduler given) and they are at most ``settings.small_work``;
    else None: not small work here.  The counts are the server's estimates, within
    :data:`COUNT_BUDGET_MS` together: past it, the work is not small (a wrong guess costs time,
    never a result: both ways compute the same).  ``documents``: more to read, known already (new
    files' documents, as the ledger counts them)."""
    if cluster is None or cluster.started or settings.dask_scheduler or settings.small_work <= 0:
        return None
    budgeted = traits_of(conn.info).counts_scan  # described when it connected: no second hello
    deadline = time.monotonic() + COUNT_BUDGET_MS / 1000
    total = documents
    if total > settings.small_work:
        return None
    for name in sorted(collections):
        left_ms = int((deadline - time.monotonic()) * 1000)
        try:
            with db_errors(f"counting the documents of {name}", uri=conn.uri):
                total += conn.db[name].estimated_document_count(**({"maxTimeMS": max(left_ms, 1)} if budgeted else {}))
        except TimeLimitExceeded:
            _log.info("counting %s took over %d ms: not small work", name, COUNT_BUDGET_MS)
            return None
        if total > settings.small_work:
            return None
    return total


#: Whether this process has walked the analyses' code (a child of a kept command process inherits it).
_PREPARED: list = []


def prepare_for_analyses() -> bool:
    """Import what the analyses need and walk each one's code once (on every worker, and here):
    once per process (0.1 s of walking even when everything is imported)."""
    if _PREPARED:
        return True
    import bson  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import pandas  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import pyarrow  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose

    # pyarrow.pandas_compat: first used by Table.from_pandas when an output is published
    import pyarrow.pandas_compat  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import pyarrow.parquet  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose

    for analysis in all_analyses():  # imports every analysis module
        try:  # and walks its code once on an empty frame: pandas and pyarrow import and compile lazily
            analysis.run_frames([analysis.schema.empty()])  # with its side input, regroup and combine
        except Exception:  # noqa: BLE001 - an analysis need not accept an empty frame; this is only a warm-up
            pass
        # the chunk readers of its columns (pymongoarrow's import, 0.1 s, and each reader's screen)
        for columns in (analysis.schema.columns, *((analysis.join.columns,) if analysis.join else ())):
            chunk_frame(tuple(columns), b"")
    # What is imported now lives as long as the process: the collector's full passes, which the
    # documents of every chunk set off, need not walk it again (in the analyze stage of best_hits
    # on 28,600 hits, 0.04 s of collection went to under 0.01 s).
    gc.freeze()
    _PREPARED.append(True)
    return True


def prepare_for_validation() -> bool:
    """Import Great Expectations and make this process's context (seconds: once per worker)."""
    engine()
    return True
