"""What a validation run found: one :class:`SuiteResult` per suite, a :class:`ValidationReport`.

A result dict (one per expectation, in :attr:`SuiteResult.results`) is plain
JSON/BSON data: ``expectation``, ``column``, ``kwargs``, ``critical``,
``generated``, ``notes``, ``success``, ``exception`` and, where Great
Expectations reports them, counts, ``observed_value`` and samples of the
offending values (``sample``, ``sample_rows`` with their ``_id``).
:func:`run_document` is what is stored per suite in ``validation_runs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from analytics.validation.suites import COLUMN_KWARGS, COLUMN_LIST_KWARGS, severity_of
from ingest.errors import ValidationFailed

__all__ = [
    "SuiteResult", "ValidationReport", "describe_failure", "run_document", "stored_result", "DEFAULT_SAMPLE_SIZE",
    "STATUS_PASSED", "STATUS_WARNINGS", "STATUS_FAILED", "STATUS_SKIPPED", "STATUS_NOTHING", "failing",
]

#: How many offending values a failed expectation keeps as samples.
DEFAULT_SAMPLE_SIZE = 5
STATUS_PASSED = "passed"
STATUS_WARNINGS = "passed with warnings"
STATUS_FAILED = "failed"
#: A suite whose collection has no documents: neither passed nor failed, and shown as such.
STATUS_SKIPPED = "checked nothing: empty collection"
#: A suite whose filter matched none of its collection's documents: neither passed nor failed.
STATUS_NOTHING = "checked nothing: its filter matched none of the {n:,} documents"


def failing(result: dict) -> bool:
    """A failed expectation that fails the validation (severity ``critical`` or ``error``)."""
    return not result["success"] and severity_of(result) != "warning"


@dataclass
class SuiteResult:
    """The outcome of one suite: ``failures`` lists every failed expectation (critical or not)."""

    suite: str
    collection: str
    status: str
    rows: int = 0
    documents: int = 0
    truncated: bool = False
    evaluated: int = 0
    successful: int = 0
    unsuccessful: int = 0
    results: list[dict] = field(default_factory=list)
    duration_s: float = 0.0
    #: How many chunks the rows were read and checked in (see analytics.validation.stream).
    chunks: int = 0
    #: The run whose check this result repeats: nothing the suite reads changed since (``validate``
    #: following changes); empty when the rows were checked in this run.
    reused_from: str = ""
    #: Rows checked by this run when the new documents alone were, merged into kept results (``rows``:
    #: all the verdict covers); None when every row was checked now.
    rows_new: int | None = None

    @property
    def skipped(self) -> bool:
        """It checked no row (``checked nothing: ...``)."""
        return self.status.startswith("checked nothing")

    @property
    def success(self) -> bool:
        """It checked rows and no expectation of severity ``critical`` or ``error`` failed (a
        ``warning`` may have): it passed.  A suite that checked nothing did not pass."""
        return not self.skipped and not self.failed

    @property
    def failed(self) -> bool:
        """An expectation of severity ``critical`` or ``error`` failed."""
        return any(failing(r) for r in self.results)

    @property
    def failures(self) -> list[dict]:
        return [r for r in self.results if not r["success"]]

    @property
    def critical_failures(self) -> list[dict]:
        return [r for r in self.results if not r["success"] and severity_of(r) == "critical"]


@dataclass
class ValidationReport:
    run_id: str
    db_name: str
    suites: list[SuiteResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No critical expectation failed (non-critical failures are warnings)."""
        return not any(s.critical_failures for s in self.suites)

    @property
    def failed_suites(self) -> list[SuiteResult]:
        """The suites where an expectation of severity ``critical`` or ``error`` failed."""
        return [s for s in self.suites if s.failed]

    @property
    def verdict(self) -> str:
        """``passed`` or ``validation failed (N of M suites)`` (a suite that checked nothing neither
        passed nor failed: the report lists them)."""
        failed = len(self.failed_suites)
        return f"validation failed ({failed} of {len(self.suites)} suites)" if failed else "passed"

    def raise_for_failed(self) -> None:
        """Raise :class:`ValidationFailed` naming each failed expectation of severity ``error`` or
        ``critical`` (after :meth:`raise_for_critical`: those are fatal)."""
        failed = self.failed_suites
        if not failed:
            return
        failures = [{"suite": s.suite, "collection": s.collection, **f} for s in failed for f in s.results
                    if failing(f)]
        lines = [f"validation run {self.run_id}: {self.verdict}"]
        lines += [f"  - {f['suite']} [{f['collection']}]: {describe_failure(f)}" for f in failures]
        raise ValidationFailed("\n".join(lines), failures)

    @property
    def rows_checked(self) -> int:
        """Rows checked by this run (a verdict that stands because nothing changed checked none)."""
        return sum(s.rows if s.rows_new is None else s.rows_new for s in self.suites if not s.reused_from)

    @property
    def critical_failures(self) -> list[dict]:
        return [{"suite": s.suite, "collection": s.collection, **f} for s in self.suites for f in s.critical_failures]

    def summary(self) -> str:
        lines = [f"validation run {self.run_id} on {self.db_name}: "
                 f"{self.verdict if self.ok else 'CRITICAL FAILURES'}, {self.rows_checked} rows checked"]
        for s in self.suites:
            detail = "" if s.skipped else (
                f" ({s.rows} rows, {s.successful}/{s.evaluated} expectations met"
                f"{', truncated' if s.truncated else ''})")
            if s.reused_from:
                detail += f" (nothing it reads changed since run {s.reused_from}: that verdict stands)"
            lines.append(f"  {s.suite} [{s.collection}]: {s.status}{detail}")
            for f in s.failures:
                lines.append(f"    {severity_of(f).upper()}: {describe_failure(f)}")
        return "\n".join(lines)

    def raise_for_critical(self) -> None:
        """Raise :class:`ValidationFailed` naming each failed critical expectation and sample values."""
        failures = self.critical_failures
        if not failures:
            return
        lines = [f"validation run {self.run_id}: {len(failures)} critical expectation(s) failed"]
        for f in failures:
            lines.append(f"  - {f['suite']} [{f['collection']}]: {describe_failure(f)}")
        raise ValidationFailed("\n".join(lines), failures)


def describe_failure(result: dict) -> str:
    """``expect_x on column (k=v): 2 of 10 rows unexpected, e.g. [..] at _id ..`` for one result."""
    args = ", ".join(f"{k}={v!r}" for k, v in result["kwargs"].items()
                     if k not in COLUMN_KWARGS + COLUMN_LIST_KWARGS)
    text = result["expectation"]
    if result.get("column"):
        text += f" on {result['column']}"
    if args:
        text += f" ({args})"
    if result.get("exception"):
        return f"{text}: error: {result['exception']}"
    if result.get("unexpected_count") is not None:
        text += f": {result['unexpected_count']} of {result.get('element_count')} rows unexpected"
        if result.get("sample") is not None:
            text += f", e.g. {result['sample']!r}"
        ids = [r["_id"] for r in result.get("sample_rows") or [] if r.get("_id") is not None]
        if ids:
            text += f" (_id {', '.join(repr(i) for i in ids)})"
    elif "observed_value" in result:
        text += f": observed {result['observed_value']!r}"
    return text


def run_document(result: SuiteResult, run_id: str, db_name: str, started: datetime, ge_version: str | None) -> dict:
    """The document stored in ``validation_runs`` for one suite of a run."""
    return {
        "_id": f"{run_id}:{result.suite}",
        "run_id": run_id,
        "db_name": db_name,
        "suite": result.suite,
        "collection": result.collection,
        "status": result.status,
        "success": result.success,
        "critical_ok": not result.critical_failures,
        "rows": result.rows,
        "documents": result.documents,
        "truncated": result.truncated,
        "chunks": result.chunks,
        "statistics": {
            "evaluated": result.evaluated,
            "successful": result.successful,
            "unsuccessful": result.unsuccessful,
        },
        "results": result.results,
        "started_at": started,
        "duration_s": round(result.duration_s, 4),
        "great_expectations_version": ge_version,
        **({"reused_from": result.reused_from} if result.reused_from else {}),
        **({"rows_new": result.rows_new} if result.rows_new is not None else {}),
    }


def stored_result(doc: dict) -> SuiteResult:
    """The :class:`SuiteResult` of a stored run document (:func:`run_document`'s inverse)."""
    stats = doc.get("statistics") or {}
    return SuiteResult(suite=doc["suite"], collection=doc["collection"], status=doc["status"],
                       rows=int(doc.get("rows") or 0), documents=int(doc.get("documents") or 0),
                       truncated=bool(doc.get("truncated")), evaluated=int(stats.get("evaluated") or 0),
                       successful=int(stats.get("successful") or 0), unsuccessful=int(stats.get("unsuccessful") or 0),
                       results=list(doc.get("results") or []), chunks=int(doc.get("chunks") or 0),
                       reused_from=doc.get("reused_from") or doc["run_id"])
