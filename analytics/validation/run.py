"""The entry point: check a database against the suites and record every suite's outcome."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path

from analytics.validation.frames import read_frame
from analytics.validation.gx import GreatExpectations
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
from analytics.validation.suites import SuiteSpec, load_suites
from ingest.catalog import VALIDATION as RUNS_COLLECTION
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


def validate(
    uri: str,
    db_name: str,
    run_id: str,
    suites: list[str] | None = None,
    suites_dir: Path | None = None,
    max_rows: int | None = None,
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
) -> ValidationReport:
    """Check collections against expectation suites; store one document per suite in ``validation_runs``.

    ``suites`` selects suites by name (default: all).  ``max_rows`` caps the rows
    checked per suite (the first documents in natural order).  A suite whose
    collection (after its ``filter``) has no documents is skipped.  Returns the report; call :meth:`ValidationReport.raise_for_critical`
    to turn critical failures into :class:`ValidationFailed`.
    """
    from ingest.mongo import client as mongo_client, db_errors

    if max_rows is not None and max_rows < 1:
        raise ConfigError(f"max_rows must be at least 1, not {max_rows}")
    specs = _select(load_suites(suites_dir), suites)
    report = ValidationReport(run_id=run_id, db_name=db_name)
    engine: GreatExpectations | None = None
    client = mongo_client(uri)
    try:
        db = client[db_name]
        for spec in specs:
            started = datetime.now(timezone.utc)
            t0 = time.perf_counter()
            frame, n_docs, truncated = read_frame(db, spec, max_rows)
            if n_docs == 0:
                result = SuiteResult(suite=spec.name, collection=spec.collection, status=STATUS_SKIPPED)
            else:
                if engine is None:
                    engine = GreatExpectations()
                stats, results = engine.validate(spec, frame, sample_size)
                result = SuiteResult(
                    suite=spec.name, collection=spec.collection, status=STATUS_PASSED,
                    rows=len(frame), documents=n_docs, truncated=truncated,
                    evaluated=int(stats.get("evaluated_expectations", len(results))),
                    successful=int(stats.get("successful_expectations", 0)),
                    unsuccessful=int(stats.get("unsuccessful_expectations", 0)),
                    results=results,
                )
                if result.critical_failures:
                    result.status = STATUS_FAILED
                elif result.failures:
                    result.status = STATUS_WARNINGS
            result.duration_s = time.perf_counter() - t0
            report.suites.append(result)
            doc = run_document(result, run_id, db_name, started, engine.version if engine else None)
            with db_errors(f"writing {RUNS_COLLECTION} for suite {spec.name}"):
                db[RUNS_COLLECTION].replace_one({"_id": doc["_id"]}, doc, upsert=True)
            log.info("suite %s: %s (%d rows)", spec.name, result.status, result.rows)
    finally:
        client.close()
    return report
