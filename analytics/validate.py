"""Data-quality validation of the MongoDB collections with Great Expectations 1.x.

Expectation suites are data files, ``schemas/expectations/<suite>.json``.  Each
names a MongoDB collection, says how its documents become table rows, and lists
expectations in Great Expectations 1.x form::

    {
      "name": "hits",
      "collection": "hits",
      "description": "one row per HSP (alignment) of every hit",
      "filter": {},
      "fields": ["_id", "search_id", "hsps.identity", "hsps.evalue", ...],
      "unwind": "hsps",
      "numeric": {"hsps.identity": {"critical": true}},
      "derived": {"elements.len": {"op": "len", "of": "elements"}},
      "expectations": [
        {"type": "expect_column_values_to_be_between",
         "kwargs": {"column": "hsps.identity", "min_value": 0, "max_value": 1},
         "meta": {"critical": true, "notes": "fractions"}}
      ]
    }

How documents become rows:

* ``filter`` (optional) is a MongoDB query selecting the documents to check
  (default: all), e.g. only the per-material documents of ``materials``.
* ``fields`` are dotted paths; only they are fetched (a MongoDB projection) and
  each becomes one column named by its path.  A path that a document lacks gives
  a null (fields a program does not print are absent, not 0), so a column of a
  field that no document has still exists, filled with nulls.
* ``unwind`` (optional) names an array field: each element becomes one row and
  the paths under it (``hsps.identity``) are read from the element, the other
  paths from the document.  A document whose array is missing or empty still
  gives one row, with nulls for the element's fields (like ``$unwind`` with
  ``preserveNullAndEmptyArrays``), so document-level checks see it.
* ``numeric`` columns are converted to float.  A value that is not a number (a
  string, a sub-document such as a legacy ``band_gap: {search_gap: ...}``)
  becomes null in that column and is reported by a generated expectation on the
  column ``"<column>:non_numeric"``, critical as the entry says.  Without this a
  single stray value would make every range check on the column error out.
* ``derived`` columns are computed from a fetched field: ``len`` (length of a
  list) so that ``nelements == len(elements)`` can be expressed with
  ``expect_column_pair_values_to_be_equal``.

``meta.critical`` marks true invariants: only their failure makes
:meth:`ValidationReport.raise_for_critical` raise :class:`ValidationFailed`.
Other failures are warnings, recorded but not fatal.

Great Expectations is imported only when a suite has data to check (importing it
takes seconds), inside an ephemeral Data Context with analytics and progress
bars off.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ingest.catalog import VALIDATION as RUNS_COLLECTION
from ingest.errors import AnalysisError, ConfigError, ValidationFailed

DEFAULT_SAMPLE_SIZE = 5
STATUS_PASSED = "passed"
STATUS_WARNINGS = "passed with warnings"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped: empty collection"

_SUITE_KEYS = {"name", "collection", "description", "filter", "fields", "unwind", "numeric", "derived", "expectations"}
_EXPECTATION_KEYS = {"type", "kwargs", "meta"}
_COLUMN_KWARGS = ("column", "column_A", "column_B")
_COLUMN_LIST_KWARGS = ("column_list",)
_DERIVED_OPS = {"len"}
_NON_NUMERIC_SUFFIX = ":non_numeric"
_REPR_LIMIT = 120

log = logging.getLogger(__name__)


def default_suites_dir() -> Path:
    from ingest.config import SCHEMAS_DIR

    return SCHEMAS_DIR / "expectations"


# ------------------------------------------------------------------ suite files
@dataclass(frozen=True)
class SuiteSpec:
    """One expectation suite file: which collection, how to make rows, what to expect."""

    name: str
    collection: str
    fields: tuple[str, ...]
    expectations: tuple[dict, ...]
    unwind: str | None = None
    filter: dict = field(default_factory=dict)
    numeric: dict[str, dict] = field(default_factory=dict)
    derived: dict[str, dict] = field(default_factory=dict)
    description: str = ""
    path: Path | None = None

    @property
    def columns(self) -> list[str]:
        """Every column of the frame: fields, derived columns, non-numeric markers."""
        return (
            list(self.fields)
            + list(self.derived)
            + [col + _NON_NUMERIC_SUFFIX for col in self.numeric]
        )

    def projection(self) -> dict[str, int]:
        paths = {"_id": 1}
        for path in self.fields:
            paths[path] = 1
        return _prune_projection(paths)

    def all_expectations(self) -> list[dict]:
        """The file's expectations, then one generated per ``numeric`` column."""
        generated = [
            {
                "type": "expect_column_values_to_be_null",
                "kwargs": {"column": col + _NON_NUMERIC_SUFFIX},
                "meta": {
                    "critical": bool(opts.get("critical", False)),
                    "generated": True,
                    "notes": f"values of {col} that are not numbers",
                },
            }
            for col, opts in self.numeric.items()
        ]
        return [dict(e) for e in self.expectations] + generated

    # ---------------------------------------------------------------- rows
    def rows(self, documents: Iterable[dict]) -> Iterator[list]:
        """One list of raw field values per row, in ``fields`` order (unwinding if asked)."""
        if not self.unwind:
            for doc in documents:
                yield [_get_path(doc, path) for path in self.fields]
            return
        prefix = self.unwind + "."
        for doc in documents:
            array = _get_path(doc, self.unwind)
            if isinstance(array, list):
                elements = array or [None]
            elif array is None:
                elements = [None]
            else:  # a lone value counts as a one-element array, as in $unwind
                elements = [array]
            for element in elements:
                row = []
                for path in self.fields:
                    if path.startswith(prefix):
                        row.append(_get_path(element, path[len(prefix):]))
                    elif path == self.unwind:
                        row.append(element)
                    else:
                        row.append(_get_path(doc, path))
                yield row


def _prune_projection(paths: dict[str, int]) -> dict[str, int]:
    """Drop paths inside another projected path (MongoDB rejects ``a`` with ``a.b``)."""
    keep = {}
    for path in sorted(paths, key=len):
        if not any(path.startswith(parent + ".") for parent in keep):
            keep[path] = 1
    return keep


def _get_path(doc: Any, path: str) -> Any:
    current = doc
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        else:
            return None
    return current


def _referenced_columns(kwargs: dict) -> list[str]:
    columns = [kwargs[k] for k in _COLUMN_KWARGS if k in kwargs]
    for key in _COLUMN_LIST_KWARGS:
        columns.extend(kwargs.get(key) or [])
    return columns


def _parse_suite(path: Path) -> SuiteSpec:
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read expectation suite {path}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"expectation suite {path} is not valid JSON: {exc}") from exc

    def bad(reason: str) -> ConfigError:
        return ConfigError(f"expectation suite {path}: {reason}")

    if not isinstance(raw, dict):
        raise bad("top level must be a JSON object")
    unknown = set(raw) - _SUITE_KEYS
    if unknown:
        raise bad(f"unknown keys {sorted(unknown)} (allowed: {sorted(_SUITE_KEYS)})")
    name = raw.get("name", path.stem)
    collection = raw.get("collection")
    if not isinstance(name, str) or not name:
        raise bad("'name' must be a non-empty string")
    if not isinstance(collection, str) or not collection:
        raise bad("'collection' must be a non-empty string")
    fields = raw.get("fields")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise bad("'fields' must be a non-empty list of dotted field paths")
    if len(set(fields)) != len(fields):
        raise bad("'fields' lists a path twice")
    if "_id" not in fields:
        fields = ["_id", *fields]
    query = raw.get("filter", {})
    if not isinstance(query, dict):
        raise bad("'filter' must be a MongoDB query object")
    unwind = raw.get("unwind")
    if unwind is not None and (not isinstance(unwind, str) or not unwind):
        raise bad("'unwind' must be a field name")
    if unwind and not any(f == unwind or f.startswith(unwind + ".") for f in fields):
        raise bad(f"'unwind' is {unwind!r} but no field is under it (list e.g. {unwind + '.x'!r})")

    numeric = raw.get("numeric", {})
    if not isinstance(numeric, dict):
        raise bad("'numeric' must map column names to {\"critical\": bool}")
    for col, opts in numeric.items():
        if col not in fields:
            raise bad(f"numeric column {col!r} is not in 'fields'")
        if not isinstance(opts, dict) or set(opts) - {"critical"}:
            raise bad(f"numeric column {col!r}: options must be {{\"critical\": true|false}}")

    derived = raw.get("derived", {})
    if not isinstance(derived, dict):
        raise bad("'derived' must map new column names to {\"op\": ..., \"of\": field}")
    for col, spec in derived.items():
        if col in fields:
            raise bad(f"derived column {col!r} clashes with a field")
        if not isinstance(spec, dict) or spec.get("op") not in _DERIVED_OPS or spec.get("of") not in fields:
            raise bad(f"derived column {col!r}: need op in {sorted(_DERIVED_OPS)} and 'of' naming a field")

    expectations = raw.get("expectations")
    if not isinstance(expectations, list) or not expectations:
        raise bad("'expectations' must be a non-empty list")
    spec = SuiteSpec(
        name=name, collection=collection, fields=tuple(fields), expectations=(),
        unwind=unwind, filter=query, numeric={k: dict(v) for k, v in numeric.items()},
        derived={k: dict(v) for k, v in derived.items()},
        description=str(raw.get("description", "")), path=path,
    )
    columns = set(spec.columns)
    checked = []
    for i, exp in enumerate(expectations):
        where = f"expectation #{i}"
        if not isinstance(exp, dict):
            raise bad(f"{where} must be an object")
        unknown = set(exp) - _EXPECTATION_KEYS
        if unknown:
            raise bad(f"{where}: unknown keys {sorted(unknown)}")
        etype, kwargs, meta = exp.get("type"), exp.get("kwargs", {}), exp.get("meta", {})
        if not isinstance(etype, str) or not etype.startswith("expect_"):
            raise bad(f"{where}: 'type' must name a Great Expectations expectation (expect_...)")
        if not isinstance(kwargs, dict) or not isinstance(meta, dict):
            raise bad(f"{where} ({etype}): 'kwargs' and 'meta' must be objects")
        if not isinstance(meta.get("critical", False), bool):
            raise bad(f"{where} ({etype}): meta.critical must be true or false")
        for col in _referenced_columns(kwargs):
            if col not in columns:
                raise bad(f"{where} ({etype}): column {col!r} is not a field or derived column")
        checked.append({"type": etype, "kwargs": dict(kwargs), "meta": dict(meta)})
    return replace(spec, expectations=tuple(checked))


def load_suites(suites_dir: Path | None = None) -> list[SuiteSpec]:
    """Read every ``*.json`` suite in ``suites_dir`` (default ``schemas/expectations``), sorted by name."""
    directory = Path(suites_dir) if suites_dir is not None else default_suites_dir()
    if not directory.is_dir():
        raise ConfigError(f"expectation suite directory {directory} does not exist")
    specs = [_parse_suite(path) for path in sorted(directory.glob("*.json"))]
    if not specs:
        raise ConfigError(f"no expectation suites (*.json) in {directory}")
    seen: dict[str, Path | None] = {}
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"expectation suite name {spec.name!r} used by {seen[spec.name]} and {spec.path}")
        seen[spec.name] = spec.path
    return sorted(specs, key=lambda s: s.name)


# ------------------------------------------------------------------ results
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

    @property
    def skipped(self) -> bool:
        return self.status == STATUS_SKIPPED

    @property
    def success(self) -> bool:
        """True when every expectation passed (a skipped suite has nothing that failed)."""
        return self.unsuccessful == 0

    @property
    def failures(self) -> list[dict]:
        return [r for r in self.results if not r["success"]]

    @property
    def critical_failures(self) -> list[dict]:
        return [r for r in self.results if not r["success"] and r["critical"]]


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
    def rows_checked(self) -> int:
        return sum(s.rows for s in self.suites)

    @property
    def critical_failures(self) -> list[dict]:
        return [{"suite": s.suite, "collection": s.collection, **f} for s in self.suites for f in s.critical_failures]

    def summary(self) -> str:
        lines = [f"validation run {self.run_id} on {self.db_name}: "
                 f"{'ok' if self.ok else 'CRITICAL FAILURES'}, {self.rows_checked} rows checked"]
        for s in self.suites:
            detail = "" if s.skipped else (
                f" ({s.rows} rows, {s.successful}/{s.evaluated} expectations passed"
                f"{', truncated' if s.truncated else ''})")
            lines.append(f"  {s.suite} [{s.collection}]: {s.status}{detail}")
            for f in s.failures:
                lines.append(f"    {'CRITICAL' if f['critical'] else 'warning'}: {describe_failure(f)}")
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
                     if k not in _COLUMN_KWARGS + _COLUMN_LIST_KWARGS)
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


# ------------------------------------------------------------------ reading
def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _as_number(value: Any) -> tuple[float, bool]:
    """(float value or NaN, whether the value was present but not a number)."""
    if value is None:
        return math.nan, False
    if isinstance(value, bool):
        return math.nan, True
    if isinstance(value, (int, float)):
        return float(value), False
    to_decimal = getattr(value, "to_decimal", None)  # bson Decimal128
    if callable(to_decimal):
        return float(to_decimal()), False
    if hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:  # numpy scalar
        try:
            return float(value), False
        except (TypeError, ValueError):
            return math.nan, True
    return math.nan, True


def build_frame(spec: SuiteSpec, documents: Iterable[dict], max_rows: int | None = None):
    """The suite's DataFrame from raw documents, and whether ``max_rows`` cut it short."""
    import pandas as pd

    rows: list[list] = []
    truncated = False
    for row in spec.rows(documents):
        if max_rows is not None and len(rows) >= max_rows:
            truncated = True
            break
        rows.append(row)
    frame = pd.DataFrame.from_records(rows, columns=list(spec.fields)) if rows else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in spec.fields})
    for col in spec.numeric:
        converted, offending = [], []
        for value in frame[col].tolist():
            number, bad = _as_number(value)
            converted.append(number)
            offending.append(_short_repr(value) if bad else None)
        frame[col] = pd.Series(converted, index=frame.index, dtype="float64")
        frame[col + _NON_NUMERIC_SUFFIX] = pd.Series(offending, index=frame.index, dtype=object)
    for col, how in spec.derived.items():
        source = frame[how["of"]]
        if how["op"] == "len":
            frame[col] = pd.Series(
                [float(len(v)) if isinstance(v, (list, tuple)) else math.nan for v in source.tolist()],
                index=frame.index, dtype="float64")
    return frame, truncated


def read_frame(db, spec: SuiteSpec, max_rows: int | None = None):
    """(DataFrame, documents read, truncated) for one suite; raises DatabaseError."""
    from ingest.mongo import db_errors

    with db_errors(f"reading {spec.collection} for suite {spec.name}"):
        cursor = db[spec.collection].find(spec.filter, spec.projection(), batch_size=1000)
        if max_rows is not None:
            cursor = cursor.limit(max_rows + 1)
        documents: list[dict] = []
        for doc in cursor:
            documents.append(doc)
    truncated = max_rows is not None and len(documents) > max_rows
    if truncated:
        documents = documents[:max_rows]
    frame, cut = build_frame(spec, documents, max_rows)
    return frame, len(documents), truncated or cut


# ------------------------------------------------------------------ Great Expectations
def _quiet_great_expectations() -> None:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    for name in ("great_expectations", "posthog", "backoff"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _plain(value: Any) -> Any:
    """A BSON/JSON-safe copy: numpy scalars to Python, tuples to lists, NaN to None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return None if math.isnan(value) else float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return _plain(item())
        except (TypeError, ValueError):
            pass
    if isinstance(value, datetime):
        return value
    return _short_repr(value)


class _GreatExpectations:
    """An ephemeral GX Data Context that validates pandas frames against suites."""

    def __init__(self) -> None:
        _quiet_great_expectations()
        with warnings.catch_warnings():
            # GX 1.24 imports the deprecated sre_constants / sre_parse modules
            warnings.simplefilter("ignore", DeprecationWarning)
            import great_expectations as gx
            from great_expectations.data_context.types.base import (
                DataContextConfig,
                InMemoryStoreBackendDefaults,
                ProgressBarsConfig,
            )

        self.gx = gx
        self.version = gx.__version__
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
        )
        self.context = gx.get_context(mode="ephemeral", project_config=config)
        self.source = self.context.data_sources.add_pandas(name=f"sci_ingest_{uuid.uuid4().hex[:8]}")

    def build_suite(self, spec: SuiteSpec):
        from great_expectations.exceptions import GreatExpectationsError
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

        expectations = []
        for i, exp in enumerate(spec.all_expectations()):
            try:
                config = ExpectationConfiguration(
                    type=exp["type"], kwargs=copy.deepcopy(exp["kwargs"]),
                    meta={**copy.deepcopy(exp["meta"]), "sci_ingest_index": i})
                expectations.append(config.to_domain_obj())
            except (GreatExpectationsError, ValueError, TypeError) as exc:
                raise ConfigError(
                    f"expectation suite {spec.path or spec.name}: expectation #{i} ({exp['type']}) "
                    f"is not valid for Great Expectations {self.version}: {exc}") from exc
        return self.gx.ExpectationSuite(name=spec.name, expectations=expectations)

    def validate(self, spec: SuiteSpec, frame, sample_size: int = DEFAULT_SAMPLE_SIZE):
        """(statistics dict, per-expectation result dicts) for ``frame``."""
        from great_expectations.exceptions import GreatExpectationsError

        suite = self.build_suite(spec)
        result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": sample_size}
        if "_id" in frame.columns:
            result_format["unexpected_index_column_names"] = ["_id"]
        try:
            asset = self.source.add_dataframe_asset(name=f"{spec.name}_{uuid.uuid4().hex[:8]}")
            batch_definition = asset.add_batch_definition_whole_dataframe("whole")
            batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
            outcome = batch.validate(suite, result_format=result_format)
        except GreatExpectationsError as exc:
            raise AnalysisError(f"Great Expectations could not validate suite {spec.name}: {exc}") from exc
        expectations = spec.all_expectations()
        results = [None] * len(expectations)
        for r in outcome.results:
            index = r.expectation_config.meta.get("sci_ingest_index")
            results[index] = _result_dict(expectations[index], r, sample_size)
        missing = [expectations[i]["type"] for i, r in enumerate(results) if r is None]
        if missing:
            raise AnalysisError(f"suite {spec.name}: Great Expectations returned no result for {missing}")
        return dict(outcome.statistics), results


def _result_dict(exp: dict, r, sample_size: int) -> dict:
    kwargs = exp["kwargs"]
    columns = _referenced_columns(kwargs)
    res = dict(r.result or {})
    exception = None
    for info in _exception_infos(r.exception_info):
        if info.get("raised_exception"):
            exception = info.get("exception_message") or "raised an exception"
            break
    out = {
        "expectation": exp["type"],
        "column": ", ".join(columns) if columns else None,
        "kwargs": _plain(kwargs),
        "critical": bool(exp["meta"].get("critical", False)),
        "generated": bool(exp["meta"].get("generated", False)),
        "notes": exp["meta"].get("notes"),
        "success": bool(r.success),
        "exception": exception,
    }
    for key in ("element_count", "unexpected_count", "unexpected_percent", "missing_count"):
        if key in res:
            out[key] = _plain(res[key])
    if "observed_value" in res:
        out["observed_value"] = _plain(res["observed_value"])
    if "partial_unexpected_list" in res:
        out["sample"] = _plain(list(res["partial_unexpected_list"])[:sample_size])
        rows = []
        for entry in res.get("partial_unexpected_index_list") or []:
            if isinstance(entry, dict):
                values = [entry.get(c) for c in columns]
                rows.append({"_id": _plain(entry.get("_id")),
                             "value": _plain(values[0] if len(values) == 1 else values)})
        out["sample_rows"] = rows[:sample_size]
    return out


def _exception_infos(info: Any) -> list[dict]:
    if not isinstance(info, dict):
        return []
    if "raised_exception" in info:
        return [info]
    return [v for v in info.values() if isinstance(v, dict)]


# ------------------------------------------------------------------ entry point
def _select(specs: list[SuiteSpec], names: list[str] | None) -> list[SuiteSpec]:
    if names is None:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ConfigError(f"unknown expectation suite(s) {unknown}; known: {sorted(by_name)}")
    return [by_name[n] for n in names]


def _run_document(result: SuiteResult, run_id: str, db_name: str, started: datetime, ge_version: str | None) -> dict:
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
        "statistics": {
            "evaluated": result.evaluated,
            "successful": result.successful,
            "unsuccessful": result.unsuccessful,
        },
        "results": result.results,
        "started_at": started,
        "duration_s": round(result.duration_s, 4),
        "great_expectations_version": ge_version,
    }


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
    engine: _GreatExpectations | None = None
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
                    engine = _GreatExpectations()
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
            doc = _run_document(result, run_id, db_name, started, engine.version if engine else None)
            with db_errors(f"writing {RUNS_COLLECTION} for suite {spec.name}"):
                db[RUNS_COLLECTION].replace_one({"_id": doc["_id"]}, doc, upsert=True)
            log.info("suite %s: %s (%d rows)", spec.name, result.status, result.rows)
    finally:
        client.close()
    return report
