"""The entry point: check a database against the suites and record every suite's outcome."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ingest.cluster import thread_count
from analytics.validation.results import (
    DEFAULT_SAMPLE_SIZE,
    STATUS_FAILED,
    STATUS_PASSED,
    STATUS_SKIPPED,
    STATUS_WARNINGS,
    SuiteResult,
    ValidationReport,
    run_document,
)
from analytics.validation.stream import DEFAULT_CHUNK_ROWS, Accumulator, check_chunk, raw_chunks
from analytics.validation.suites import SuiteSpec, load_suites
from ingest.store.catalog import VALIDATION as RUNS_COLLECTION
from ingest.errors import ConfigError

__all__ = ["validate", "RUNS_COLLECTION"]

log = logging.getLogger(__name__)


def _select(specs: list[SuiteSpec], names: list[str] | None) -> list[SuiteSpec]:
    if names is None:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ConfigError(f"unknown expectation suite(s) {unknown}; known: {sorted(by_name)}")
    return [by_name[n] for n in names]


def _known_empty(db, spec: SuiteSpec) -> bool:
    """True when an index proves that the suite's filter matches nothing (no scan is paid for it).

    Only a filter the server answers from an index (``IXSCAN`` in its plan) is
    checked ahead; any other suite finds out while streaming, in its one read.
    """
    if not spec.filter:
        return False
    from analytics.reading.planning import plan_stages  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); analytics.reading.planning does, 0.12 s

    plan = db.command("explain", {"find": spec.collection, "filter": spec.filter, "limit": 1},
                      verbosity="queryPlanner")
    stages = plan_stages(plan)
    if "IXSCAN" not in stages or "COLLSCAN" in stages:
        return False
    return db[spec.collection].find_one(spec.filter, {"_id": 1}) is None


@dataclass
class _Suite:
    """One suite's progress: its merged results and when it started and last finished a chunk."""

    spec: SuiteSpec
    accumulator: Accumulator
    started: datetime
    t0: float
    t1: float = 0.0

    def add(self, chunk) -> None:
        self.accumulator.add(chunk)
        self.t1 = time.perf_counter()

    def result(self, max_rows: int | None) -> SuiteResult:
        spec, acc = self.spec, self.accumulator
        if not acc.rows:
            result = SuiteResult(suite=spec.name, collection=spec.collection, status=STATUS_SKIPPED)
        else:
            stats, results = acc.finish()
            result = SuiteResult(
                suite=spec.name, collection=spec.collection, status=STATUS_PASSED, rows=acc.rows,
                documents=min(acc.documents, max_rows or acc.documents),
                truncated=acc.truncated or (max_rows is not None and acc.documents > max_rows),
                evaluated=int(stats["evaluated_expectations"]), successful=int(stats["successful_expectations"]),
                unsuccessful=int(stats["unsuccessful_expectations"]), results=results, chunks=acc.chunks,
            )
            if result.critical_failures:
                result.status = STATUS_FAILED
            elif result.failures:
                result.status = STATUS_WARNINGS
        result.duration_s = max(self.t1, self.t0) - self.t0
        return result


def _smallest_first(db, specs: list[SuiteSpec]) -> list[SuiteSpec]:
    """The suites in the order to read them: by the rows each checked in its last run, fewest first.

    The workers check a suite's chunks while the server reads the next suite,
    and a server may answer a large query only once it has all of it
    (SecantusDB materialises the result first): reading the small suites first
    keeps the workers busy while the large one is read, instead of leaving all
    their work for after it.  A suite never run keeps its place among the first.
    The report keeps the declared order.
    """
    names = [s.name for s in specs]
    last: dict[str, int] = {}
    recent = db[RUNS_COLLECTION].find({"suite": {"$in": names}}, {"suite": 1, "rows": 1}).sort(
        "started_at", -1).limit(20 * len(names))
    for doc in recent:
        last.setdefault(doc["suite"], int(doc.get("rows") or 0))  # the newest run of each suite wins
    return sorted(specs, key=lambda s: last.get(s.name, 0))


def _check_serially(suite: _Suite, stream, sample_size: int, max_rows: int | None) -> None:
    """Check one suite's chunks here, in order; with ``max_rows``, each with the rows still allowed."""
    left = max_rows
    for raw in stream:
        chunk = check_chunk(suite.spec, raw, sample_size, left)
        suite.add(chunk)
        if left is not None:
            left -= chunk.rows
            if left <= 0 or chunk.truncated:
                return


def _check_all(db, specs: list[SuiteSpec], max_rows: int | None, sample_size: int, chunk_rows: int,
               client) -> list[_Suite]:
    """Every suite, read one after the other; with a Dask client, checked on its workers meanwhile.

    The reads are the critical path (the server's), so the next suite's read
    starts as soon as the last one's chunks are handed out: its checks run on
    the workers while the server reads on (smallest suites first, see
    :func:`_smallest_first`).  At most two chunks per worker thread are in
    flight, whichever suites they belong to.
    """
    from ingest.store.mongo import db_errors  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); it costs 0.12 s

    serial = client is None or max_rows is not None
    window = 2 * thread_count(client) if not serial else 0
    running: deque = deque()
    suites: list[_Suite] = []
    limit = max_rows + 1 if max_rows is not None else 0
    for spec in (specs if serial else _smallest_first(db, specs)):
        suite = _Suite(spec, Accumulator(spec.all_expectations(), sample_size), datetime.now(timezone.utc),
                       time.perf_counter())
        suites.append(suite)
        with db_errors(f"reading {spec.collection} for suite {spec.name}"):
            if _known_empty(db, spec):
                continue
            stream = raw_chunks(db[spec.collection], spec.filter or {}, spec.projection(), chunk_rows, limit)
            if serial:
                _check_serially(suite, stream, sample_size, max_rows)
                continue
            for raw in stream:
                running.append((suite, client.submit(check_chunk, spec, raw, sample_size, pure=False)))
                if len(running) >= window:
                    done, future = running.popleft()
                    done.add(future.result())
    while running:
        done, future = running.popleft()
        done.add(future.result())
    return suites


def validate(
    uri: str,
    db_name: str,
    run_id: str,
    suites: list[str] | None = None,
    suites_dir: Path | None = None,
    max_rows: int | None = None,
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    client=None,
) -> ValidationReport:
    """Check collections against expectation suites; store one document per suite in ``validation_runs``.

    ``suites`` selects suites by name (default: all).  Each suite's documents
    are read once, ``chunk_rows`` at a time, and every chunk is checked by Great
    Expectations, the results merged (:mod:`analytics.validation.stream`), so
    memory stays bounded whatever the collection's size.  With a Dask
    ``client`` the chunks are checked on its workers while the next ones (of
    this suite or the next) are read; without, here, one after the other.  ``max_rows`` caps the
    rows checked per suite (the first documents in natural order).  A suite
    whose collection (after its ``filter``) has no documents is skipped; when
    an index serves the filter, that costs one index lookup.  Great
    Expectations is imported only when a suite has rows to check.  Returns the
    report; call :meth:`ValidationReport.raise_for_critical` to turn critical
    failures into :class:`ValidationFailed`.
    """
    from ingest.store.mongo import client as mongo_client, db_errors  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); it costs 0.12 s

    if max_rows is not None and max_rows < 1:
        raise ConfigError(f"max_rows must be at least 1, not {max_rows}")
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be a positive integer, not {chunk_rows!r}")
    specs = _select(load_suites(suites_dir), suites)
    report = ValidationReport(run_id=run_id, db_name=db_name)
    mongo = mongo_client(uri)
    try:
        db = mongo[db_name]
        checked = {s.spec.name: s for s in _check_all(db, specs, max_rows, sample_size, chunk_rows, client)}
        for suite in (checked[spec.name] for spec in specs):
            result = suite.result(max_rows)
            report.suites.append(result)
            doc = run_document(result, run_id, db_name, suite.started, suite.accumulator.gx_version)
            with db_errors(f"writing {RUNS_COLLECTION} for suite {suite.spec.name}"):
                db[RUNS_COLLECTION].replace_one({"_id": doc["_id"]}, doc, upsert=True)
            log.info("suite %s: %s (%d rows in %d chunk(s))", result.suite, result.status, result.rows, result.chunks)
    finally:
        mongo.close()
    return report
