"""Table-level checks: what no expectation on a column can see, checked on the collections whole.

The suites (:mod:`analytics.validation.suites`) check documents row by row; these check the
loaded collections as tables, one result each, in the form of an expectation's result (so they
are stored, reported and gated like them, in a suite of their own, ``tables``):

* ``expect_table_row_count_to_equal`` -- **presence**: every document the ledger says the loaded
  files hold is there.  ``searches`` and ``hits`` hold one document per record of each loaded file
  (a copy of a file, ``duplicate_of``, holds none of its own); ``materials`` and ``tasks`` one per
  key held by any loaded file (the versions kept in ``ingest_versions``: a record shared by two
  files is one document).  The count is the server's (Great Expectations' expectation of that
  name, evaluated by the server instead of over a frame).  Severity ``error``.
* ``expect_references_to_exist`` -- **referential integrity**: every hit's ``search_id`` names a
  search; every search's ``source.sha256`` a loaded file (severity ``error``); every material's
  ``task_ids`` a task, where tasks are loaded (severity ``warning``: partial data links to tasks
  not loaded).  Great Expectations has no expectation across two tables.
* ``expect_newest_document_to_be_recent`` -- **freshness**: the newest load (the ledger's clock)
  and the newest ``last_updated`` of the materials; a ``last_updated`` more than a day after the
  server's clock cannot be true (``error``); with ``SCI_INGEST_FRESH_WITHIN_HOURS``, a newest load
  older than that is flagged (``warning``).
* ``expect_load_volume_to_be_usual`` -- **volume**: the files and documents the latest load wrote
  against the median of the :data:`VOLUME_HISTORY` loads before it (those that wrote any): less
  than :data:`VOLUME_SHARE` of it is flagged (``warning``: a half-day landing).  Needs
  :data:`VOLUME_MIN_HISTORY` earlier loads.
* ``expect_table_columns_to_match_set`` -- **schema drift** of the record collections: their
  top-level fields against those the last check saw (kept in ``analysis_state``), new ones named
  with the documents that have them, vanished ones named (``warning``).  The first check records
  the set.

Costs on the embedded server: a count and a ``distinct`` are scans (about 1-2 s for 220,000 hits); the
suite follows changes like the others (no file loaded since its verdict: the verdict stands).
"""

from __future__ import annotations

import datetime as dt
import statistics

from analytics.validation.results import STATUS_FAILED, STATUS_PASSED, STATUS_WARNINGS, SuiteResult, failing
from ingest.config import setting
from ingest.store.catalog import ANALYSIS_STATE, HITS, HOLDING, LEDGER, MATERIALS, SEARCHES, TASKS, TIMINGS, VERSIONS

__all__ = ["TABLES_SUITE", "TABLES_COLLECTION", "SOURCES", "check_tables", "fresh_within", "VOLUME_SHARE", "VOLUME_HISTORY",
           "VOLUME_MIN_HISTORY", "FRESH_ENV"]

TABLES_SUITE = "tables"
TABLES_COLLECTION = "(the loaded collections)"
#: The collections whose changes make the suite check again.
SOURCES = frozenset({SEARCHES, HITS, MATERIALS, TASKS})
#: A load that wrote less than this share of the usual (median) files or documents is flagged.
VOLUME_SHARE = 0.75
VOLUME_HISTORY = 7
VOLUME_MIN_HISTORY = 3
FRESH_ENV = "SCI_INGEST_FRESH_WITHIN_HOURS"
#: Samples of missing references kept in a result.
SAMPLE = 5


def _result(expectation: str, kwargs: dict, severity: str, success: bool, notes: str, **found) -> dict:
    return {"expectation": expectation, "column": None, "kwargs": kwargs, "severity": severity,
            "critical": severity == "critical", "generated": False, "notes": notes, "success": bool(success),
            "exception": None, **found}


def _loaded(db) -> list[dict]:
    return list(db[LEDGER].find(HOLDING, {"records": 1, "duplicate_of": 1, "sha256": 1}))


def presence(db, entries: list[dict]) -> list[dict]:
    """One row count per loaded collection against what the ledger says its files hold."""
    out = []
    held: dict[str, int] = {}
    for e in entries:
        if e.get("duplicate_of") or not isinstance(e.get("records"), dict):
            continue
        for coll, n in e["records"].items():
            if coll in (SEARCHES, HITS) and isinstance(n, int) and not isinstance(n, bool):
                held[coll] = held.get(coll, 0) + n
    for coll in (MATERIALS, TASKS):
        if any(coll in (e.get("records") or {}) for e in entries):
            held[coll] = len(db[VERSIONS].distinct("_id.k", {"_id.c": coll}))
    for coll in sorted(held):
        count = db[coll].count_documents({})
        out.append(_result("expect_table_row_count_to_equal", {"collection": coll, "value": held[coll]}, "error",
                           count == held[coll], "the documents the ledger says the loaded files hold",
                           observed_value=count))
    return out


def _references(db, source: str, field: str, target: str, known: set, severity: str, notes: str) -> dict:
    named = {v for v in db[source].distinct(field) if v is not None}
    missing = sorted((v for v in named - known), key=str)
    return _result("expect_references_to_exist", {"collection": source, "field": field, "in": target}, severity,
                   not missing, notes, observed_value=len(missing), element_count=len(named),
                   unexpected_count=len(missing), sample=[str(v) for v in missing[:SAMPLE]])


def references(db, entries: list[dict]) -> list[dict]:
    out = []
    searches = set(db[SEARCHES].distinct("_id"))
    if searches or any((e.get("records") or {}).get(HITS) for e in entries):
        out.append(_references(db, HITS, "search_id", SEARCHES, searches, "error", "every hit names a search"))
    shas = {e.get("sha256") for e in entries if isinstance(e.get("sha256"), str)}
    if searches:
        out.append(_references(db, SEARCHES, "source.sha256", f"{LEDGER} (loaded)", shas, "error",
                               "every search comes from a loaded file"))
    tasks = set(db[TASKS].distinct("_id"))
    if tasks:
        out.append(_references(db, MATERIALS, "task_ids", TASKS, tasks, "warning",
                               "every task a material links to is loaded (partial data may lack some)"))
    return out


def fresh_within() -> float | None:
    """``SCI_INGEST_FRESH_WITHIN_HOURS`` as hours (None when unset); ConfigError, one line, for a bad value."""
    return setting(FRESH_ENV)


def freshness(db, now: dt.datetime) -> list[dict]:
    out = []
    latest = next(iter(db[LEDGER].find({"status": "loaded", "changed_at": {"$ne": None}}, {"changed_at": 1})
                       .sort("changed_at", -1).limit(1)), None)
    newest = None if latest is None else latest.get("changed_at")
    hours = fresh_within()
    if newest is not None and hours is not None:
        limit = now - dt.timedelta(hours=hours)
        out.append(_result("expect_newest_document_to_be_recent", {"collection": LEDGER, "within_hours": hours},
                           "warning", newest >= limit, f"the newest load is within {FRESH_ENV}",
                           observed_value=newest.isoformat()))
    updated = [d.get("last_updated") for d in db[MATERIALS].find({"last_updated": {"$type": "date"}},
                                                                 {"last_updated": 1}).sort("last_updated", -1).limit(1)]
    if updated:
        late = now + dt.timedelta(days=1)
        out.append(_result("expect_newest_document_to_be_recent", {"collection": MATERIALS, "field": "last_updated",
                                                                  "at_most": late.isoformat()}, "error",
                           updated[0] <= late, "a last_updated after the server's clock (plus a day) cannot be true",
                           observed_value=updated[0].isoformat()))
    return out


def volume(db) -> list[dict]:
    """The latest load that wrote anything against the ones before it."""
    rows = list(db[TIMINGS].find({"stage": "load", "scope": "run", "detail.loaded": {"$gt": 0}},
                                 {"run_id": 1, "detail.loaded": 1, "records_out": 1, "started": 1})
                .sort("started", -1).limit(VOLUME_HISTORY + 1))
    if not rows:
        return []
    latest, before = rows[0], rows[1:]
    files, docs = int(latest["detail"]["loaded"]), int(latest.get("records_out") or 0)
    if len(before) < VOLUME_MIN_HISTORY:
        return [_result("expect_load_volume_to_be_usual", {"run_id": latest["run_id"], "share": VOLUME_SHARE}, "warning",
                        True, f"not judged: {len(before)} earlier load(s), {VOLUME_MIN_HISTORY} needed",
                        observed_value={"files": files, "documents": docs})]
    usual_files = statistics.median(int(r["detail"]["loaded"]) for r in before)
    usual_docs = statistics.median(int(r.get("records_out") or 0) for r in before)
    low = files < VOLUME_SHARE * usual_files or docs < VOLUME_SHARE * usual_docs
    return [_result("expect_load_volume_to_be_usual", {"run_id": latest["run_id"], "share": VOLUME_SHARE}, "warning",
                    not low, f"the latest load against the median of the {len(before)} before it",
                    observed_value={"files": files, "documents": docs, "usual_files": usual_files,
                                    "usual_documents": usual_docs})]


def drift(db) -> list[dict]:
    """The record collections' top-level fields against the set the last check saw."""
    out = []
    for coll in (MATERIALS, TASKS):
        fields = {row["_id"]: row["n"] for row in db[coll].aggregate([
            {"$project": {"f": {"$objectToArray": "$$ROOT"}}}, {"$unwind": "$f"},
            {"$group": {"_id": "$f.k", "n": {"$sum": 1}}}])}
        if not fields:
            continue
        key = f"fields:{coll}"
        before = (db[ANALYSIS_STATE].find_one({"_id": key}) or {}).get("fields")
        db[ANALYSIS_STATE].update_one({"_id": key}, {"$set": {"fields": sorted(fields)}}, upsert=True)
        if before is None:
            out.append(_result("expect_table_columns_to_match_set", {"collection": coll}, "warning", True,
                               f"first check: {len(fields)} top-level fields recorded", observed_value=sorted(fields)))
            continue
        new = {f: fields[f] for f in sorted(set(fields) - set(before))}
        gone = sorted(set(before) - set(fields))
        out.append(_result("expect_table_columns_to_match_set", {"collection": coll, "column_set": list(before)},
                           "warning", not new and not gone, "top-level fields new (with their documents) or vanished",
                           observed_value={"new": new, "vanished": gone}))
    return out


def check_tables(db, now: dt.datetime) -> SuiteResult:
    """Every table-level check, as one suite's result (``now``: the server's clock)."""
    entries = _loaded(db)
    results = [*presence(db, entries), *references(db, entries), *freshness(db, now), *volume(db), *drift(db)]
    if not results:
        return SuiteResult(suite=TABLES_SUITE, collection=TABLES_COLLECTION, status="checked nothing: empty collection")
    unsuccessful = sum(1 for r in results if not r["success"])
    status = (STATUS_FAILED if any(failing(r) for r in results) else STATUS_WARNINGS if unsuccessful
              else STATUS_PASSED)
    return SuiteResult(suite=TABLES_SUITE, collection=TABLES_COLLECTION, status=status, rows=0,  # no rows: tables
                       documents=len(entries), evaluated=len(results), successful=len(results) - unsuccessful,
                       unsuccessful=unsuccessful, results=results, chunks=1)
