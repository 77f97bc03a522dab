"""Data-quality validation of the MongoDB collections with Great Expectations 1.x.

Expectation suites are data files, ``schemas/expectations/<suite>.json``; each
names a collection, says how its documents become table rows and lists
expectations.  :func:`validate` checks a database against them and stores one
document per suite in ``validation_runs``::

    from analytics.validation import validate
    report = validate(uri, "sci_ingest", run_id="r1")
    print(report.summary())
    report.raise_for_critical()  # ValidationFailed if a critical expectation failed

One module per reason to change:

* :mod:`~analytics.validation.suites` — the suite format: :class:`SuiteSpec`,
  parsing and checking the files, documents to rows (pure: no pandas, Great
  Expectations or pymongo);
* :mod:`~analytics.validation.frames` — rows to a pandas frame;
* :mod:`~analytics.validation.stream` — reading a suite's documents from MongoDB
  in chunks and checking each;
* :mod:`~analytics.validation.gx` — the only module that imports Great
  Expectations, and only when a suite has data to check (importing it takes seconds);
* :mod:`~analytics.validation.results` — :class:`SuiteResult`,
  :class:`ValidationReport`, the statuses and the stored form of a result;
* :mod:`~analytics.validation.run` — :func:`validate`, the entry point.

Importing this package imports none of pandas, Great Expectations or pymongo.
"""

from __future__ import annotations

from analytics.validation.frames import build_frame
from analytics.validation.results import (
    DEFAULT_SAMPLE_SIZE,
    STATUS_FAILED,
    STATUS_PASSED,
    STATUS_SKIPPED,
    STATUS_WARNINGS,
    SuiteResult,
    ValidationReport,
    describe_failure,
)
from analytics.validation.run import RUNS_COLLECTION, validate
from analytics.validation.suites import SuiteSpec, load_suites

__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "RUNS_COLLECTION",
    "STATUS_FAILED",
    "STATUS_PASSED",
    "STATUS_SKIPPED",
    "STATUS_WARNINGS",
    "SuiteResult",
    "SuiteSpec",
    "ValidationReport",
    "build_frame",
    "describe_failure",
    "load_suites",
    "validate",
]
