"""The entry point: check a database against the suites and record every suite's outcome."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from analytics.validation.results import (
    DEFAULT_SAMPLE_SIZE,
    STATUS_FAILED,
    STATUS_NOTHING,
    STATUS_PASSED,
    STATUS_SKIPPED,
    STATUS_WARNINGS,
    SuiteResult,
    ValidationReport,
    run_document,
    stored_result,
)
from analytics.validation.stream import DEFAULT_CHUNK_ROWS, Accumulator, check_chunk, raw_chunks
from analytics.validation.suites import SuiteSpec, load_suites
from analytics.validation.tables import SOURCES as TABLE_SOURCES, TABLES_SUITE, check_tables
from ingest.cluster import thread_count
from ingest.errors import ConfigError
from ingest.store.catalog import VALIDATION as RUNS_COLLECTION

if TYPE_CHECKING:  # analytics.changes imports pymongo, which importing analytics.validation must not
    from analytics.changes import Changes

__all__ = ["validate", "suites_to_check", "RUNS_COLLECTION"]

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
    rows_before: int | None = None  # merged into kept results: the rows those held

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
            if result.failed:
                result.status = STATUS_FAILED
            elif result.failures:
                result.status = STATUS_WARNINGS
        result.duration_s = max(self.t1, self.t0) - self.t0
        if self.rows_before is not None:
            result.rows_new = acc.rows - self.rows_before
        return result


def _definition(spec: SuiteSpec) -> str:
    """A fingerprint of what the suite checks: a verdict stands only for the same definition."""
    what = [spec.collection, spec.fields, spec.expectations, spec.unwind, spec.filter, spec.numeric, spec.derived]
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _Follow:
    """One suite's changes since its verdict (``validate`` following changes)."""

    key: str
    changes: Changes
    published: str | None  # the run that last published the suite's collection, for an analysis's output
    definition: str
    standing: dict | None = None  # the stored result that stands: nothing the suite reads changed
    added: list[dict] | None = None  # the new files' documents alone, merged into the stored results


def _follow(db, specs: list[SuiteSpec], incremental: bool) -> dict[str, _Follow]:
    """Per suite, what changed since its last verdict; ``standing`` when nothing did (and that verdict
    was of this definition, over every row)."""
    from analytics.changes import changes  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); analytics.changes does, 0.12 s
    from ingest.store.catalog import ANALYSIS_STATE  # noqa: PLC0415 - lazy: as above

    found: dict[str, _Follow] = {}
    for spec in specs:
        key = f"suite:{spec.name}"
        output = db[ANALYSIS_STATE].find_one({"output": spec.collection}, {"published": 1})
        follow = _Follow(key, changes(db, key, {spec.collection}, follow=incremental),
                         (output or {}).get("published"), _definition(spec))
        state = follow.changes.state
        if (incremental and state is not None and follow.changes.known and state.get("verdict")
                and state.get("published") == follow.published and state.get("definition") == follow.definition):
            doc = db[RUNS_COLLECTION].find_one({"_id": state["verdict"]})
            if doc is not None and not doc.get("truncated"):
                if not follow.changes.pending:
                    follow.standing = doc
                elif state.get("results"):
                    follow.added = _additions(spec, follow.changes.pending)
        found[spec.name] = follow
    return found


def _additions(spec: SuiteSpec, pending: list[dict]) -> list[dict] | None:
    """The queries of the new files' documents in the suite's collection, when new files are all
    that changed it and each file's documents are its own (a search file's); else None."""
    from analytics.changes import content_selector  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); analytics.changes does, 0.12 s

    if any(e.get("status") != "loaded" or e.get("previous") for e in pending):
        return None
    selectors = [content_selector(spec.collection, e["sha256"]) for e in pending
                 if not e.get("duplicate_of") and isinstance(e.get("sha256"), str)]
    owned = [s for s in selectors if s is not None]
    if len(owned) < len(selectors):
        return None
    return [{"$and": [spec.filter, s]} if spec.filter else s for s in owned]


def suites_to_check(uri: str, db_name: str, suites_dir: Path | None = None) -> dict[str, int | None]:
    """The suites that ``validate(..., incremental=True)`` would read: those whose documents may have
    changed since their last verdict (the others' verdicts stand), each with the documents it would
    read when those are new files' alone (as the ledger counts them), else None (all of them)."""
    from ingest.store.mongo import db_errors, shared_client  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); it costs 0.12 s

    specs = load_suites(suites_dir)
    with db_errors("reading what changed since the suites' last verdicts", uri=uri):
        follow = _follow(shared_client(uri)[db_name], specs, True)
    todo: dict[str, int | None] = {}
    with db_errors("reading what changed since the table checks' verdict", uri=uri):
        if _tables_standing(shared_client(uri)[db_name], True)[0] is None:
            todo[TABLES_SUITE] = None
    for spec in specs:
        mine = follow[spec.name]
        if mine.standing is None:
            todo[spec.name] = None if mine.added is None else sum(
                n for e in mine.changes.pending for n in [(e.get("records") or {}).get(spec.collection)]
                if isinstance(n, int) and not isinstance(n, bool) and n > 0)
    return todo


def _tables_standing(db, incremental: bool):
    """(the stored verdict of the table checks that stands, or None; what changed)."""
    from analytics.changes import changes  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); analytics.changes does, 0.12 s

    found = changes(db, f"suite:{TABLES_SUITE}", set(TABLE_SOURCES), follow=incremental)
    verdict = (found.state or {}).get("verdict")
    if incremental and found.known and not found.pending and verdict:
        return db[RUNS_COLLECTION].find_one({"_id": verdict}), found
    return None, found


def _tables(db, run_id: str, db_name: str, incremental: bool) -> SuiteResult:
    """The table-level checks (:mod:`analytics.validation.tables`), stored as a suite's outcome; their
    verdict stands while no file was loaded into the collections they check."""
    from analytics.changes import record_state  # noqa: PLC0415 - lazy: as _tables_standing
    from ingest.store.mongo import db_errors  # noqa: PLC0415 - lazy: as _tables_standing

    with db_errors("checking the loaded collections as tables"):
        standing, found = _tables_standing(db, incremental)
        started = datetime.now(UTC)
        if standing is not None:
            result = stored_result(standing)
            doc = run_document(result, run_id, db_name, started, None)
        else:
            t0 = time.perf_counter()
            result = check_tables(db, found.now)
            result.duration_s = time.perf_counter() - t0
            doc = run_document(result, run_id, db_name, started, None)
        db[RUNS_COLLECTION].replace_one({"_id": doc["_id"]}, doc, upsert=True)
        record_state(db, f"suite:{TABLES_SUITE}", found.after,
                     verdict=standing["_id"] if standing is not None else doc["_id"])
    log.info("suite %s: %s", result.suite, result.status)
    return result


def _smallest_first(db, specs: list[SuiteSpec]) -> list[SuiteSpec]:
    """The suites in the order to read them: by the rows each checked in its last run, fewest first.

    The workers check a suite's chunks while the server reads the next suite,
    and a server may answer a large query only once it has all of it
    (the embedded server materialises the result first): reading the small suites first
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
               client, follow: dict[str, _Follow] | None = None) -> list[_Suite]:
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
        mine = (follow or {}).get(spec.name)
        accumulator = Accumulator(spec.all_expectations(), sample_size)
        query: dict | list[dict] = spec.filter or {}
        if mine is not None and mine.added is not None:  # the new documents, merged into the results kept
            # added is set only from a state that has results (_follow)
            accumulator.restore(cast(dict, mine.changes.state)["results"])
            query = mine.added
        suite = _Suite(spec, accumulator, datetime.now(UTC), time.perf_counter(),
                       rows_before=accumulator.rows if mine is not None and mine.added is not None else None)
        suites.append(suite)
        with db_errors(f"reading {spec.collection} for suite {spec.name}"):
            if suite.rows_before is None and _known_empty(db, spec):
                continue
            stream = raw_chunks(db[spec.collection], query, spec.projection(), chunk_rows, limit)
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
    incremental: bool = False,
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

    ``incremental``: a suite none of whose documents changed since its last verdict (no file loaded
    into its collection, or no new output of the analysis that writes it; the same suite
    definition) is not read again: that verdict stands, and the result says which run gave it.
    Every other suite is checked whole.
    """
    from analytics.changes import record_state  # noqa: PLC0415 - lazy: as above
    from ingest.store.mongo import client as mongo_client, db_errors  # noqa: PLC0415 - lazy: importing analytics.validation must not import pymongo (tests/test_validate.py); it costs 0.12 s

    if max_rows is not None and max_rows < 1:
        raise ConfigError(f"max_rows must be at least 1, not {max_rows}")
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be a positive integer, not {chunk_rows!r}")
    with_tables = suites is None or TABLES_SUITE in suites
    specs = _select(load_suites(suites_dir), None if suites is None else [n for n in suites if n != TABLES_SUITE])
    report = ValidationReport(run_id=run_id, db_name=db_name)
    mongo = mongo_client(uri)
    try:
        db = mongo[db_name]
        with db_errors("reading what changed since the suites' last verdicts"):
            follow = _follow(db, specs, incremental and max_rows is None)
        todo = [spec for spec in specs if follow[spec.name].standing is None]
        checked = {s.spec.name: s for s in _check_all(db, todo, max_rows, sample_size, chunk_rows, client, follow)}
        for spec in specs:
            mine = follow[spec.name]
            if mine.standing is not None:
                result = stored_result(mine.standing)
                doc = run_document(result, run_id, db_name, datetime.now(UTC),
                                   mine.standing.get("great_expectations_version"))
            else:
                suite = checked[spec.name]
                result = suite.result(max_rows)
                if result.skipped and spec.filter:  # the filter, not the collection, may be what is empty
                    with db_errors(f"counting {spec.collection}"):
                        held = db[spec.collection].estimated_document_count()
                    if held:
                        result.status = STATUS_NOTHING.format(n=held)
                doc = run_document(result, run_id, db_name, suite.started, suite.accumulator.gx_version)
            report.suites.append(result)
            with db_errors(f"writing {RUNS_COLLECTION} for suite {spec.name}"):
                db[RUNS_COLLECTION].replace_one({"_id": doc["_id"]}, doc, upsert=True)
                if max_rows is None:  # a verdict over every row: it stands until something changes
                    kept = checked[spec.name].accumulator if spec.name in checked else None
                    record_state(db, mine.key, mine.changes.after, published=mine.published,
                                 definition=mine.definition, collection=spec.collection,
                                 verdict=mine.standing["_id"] if mine.standing else doc["_id"],
                                 **({} if mine.standing else
                                    {"results": kept.state() if kept is not None and kept.mergeable else None}))
            log.info("suite %s: %s (%d rows in %d chunk(s)%s)", result.suite, result.status, result.rows,
                     result.chunks, f"; verdict of {result.reused_from}" if result.reused_from else "")
        if with_tables and max_rows is None:
            report.suites.append(_tables(db, run_id, db_name, incremental))
    finally:
        mongo.close()
    return report
