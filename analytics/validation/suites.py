"""The expectation suite format: ``schemas/expectations/<suite>.json``, parsed and checked.

Each suite names a MongoDB collection, says how its documents become table rows,
and lists expectations in Great Expectations 1.x form::

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

How documents become rows (:func:`document_rows` here; the frame of them,
:mod:`analytics.validation.frames`):

* ``filter`` (optional) is a MongoDB query selecting the documents to check
  (default: all), e.g. only the per-material documents of ``materials``.
* ``fields`` are dotted paths; only they are fetched (a MongoDB projection) and
  each becomes one column named by its path.  Paths are read as
  :func:`ingest.schema.get_path` reads them (the project's one dotted-path reader;
  a plain field name takes a shortcut).  A path that a document lacks gives
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

Every expectation has a severity, ``meta.severity`` (:data:`SEVERITIES`; ``meta.critical: true``
says ``critical``), by default ``error``:

* ``critical``: a true invariant; its failure is fatal (exit 1, see
  :meth:`analytics.validation.ValidationReport.raise_for_critical`);
* ``error``: its failure fails the validation (``status: validation failed (N of M suites)``,
  exit 4, a red Airflow task unless the DAG is told to warn);
* ``warning``: its failure is reported and the run goes on green.

This module is pure: it imports neither pandas, Great Expectations nor pymongo.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ingest.config import SCHEMAS_DIR
from ingest.errors import ConfigError
from ingest.schema import path_getter, projection_for

__all__ = [
    "SuiteSpec", "load_suites", "default_suites_dir", "referenced_columns", "document_rows",
    "COLUMN_KWARGS", "COLUMN_LIST_KWARGS", "NON_NUMERIC_SUFFIX", "SEVERITIES", "severity_of",
]

_SUITE_KEYS = {"name", "collection", "description", "filter", "fields", "unwind", "numeric", "derived", "expectations"}
_EXPECTATION_KEYS = {"type", "kwargs", "meta"}
#: Expectation kwargs that name one column, and those that name a list of columns.
COLUMN_KWARGS = ("column", "column_A", "column_B")
COLUMN_LIST_KWARGS = ("column_list",)
_DERIVED_OPS = {"len"}
#: The column ``<column>:non_numeric`` holds the values of a numeric column that are not numbers.
NON_NUMERIC_SUFFIX = ":non_numeric"
#: What an expectation's failure does: fatal; fails the validation; reported only.
SEVERITIES = ("critical", "error", "warning")


def severity_of(meta: dict) -> str:
    """An expectation's (or a result's) severity: ``severity``, else ``critical`` when ``critical`` is
    true, else ``error``."""
    given = meta.get("severity")
    if given in SEVERITIES:
        return given
    return "critical" if meta.get("critical") else "error"


def default_suites_dir() -> Path:
    return SCHEMAS_DIR / "expectations"


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
            + [col + NON_NUMERIC_SUFFIX for col in self.numeric]
        )

    def projection(self) -> dict[str, int]:
        """The fields and ``_id``, as a MongoDB projection."""
        return projection_for(["_id", *self.fields])

    def all_expectations(self) -> list[dict]:
        """The file's expectations, then one generated per ``numeric`` column."""
        generated = [
            {
                "type": "expect_column_values_to_be_null",
                "kwargs": {"column": col + NON_NUMERIC_SUFFIX},
                "meta": {
                    "severity": severity_of(opts),
                    "critical": severity_of(opts) == "critical",
                    "generated": True,
                    "notes": f"values of {col} that are not numbers",
                },
            }
            for col, opts in self.numeric.items()
        ]
        return [dict(e) for e in self.expectations] + generated

    def rows(self, documents: Iterable[dict]) -> Iterator[list]:
        """One list of raw field values per row, in ``fields`` order (unwinding if asked):
        :func:`document_rows`."""
        return document_rows(self, documents)


def document_rows(spec: SuiteSpec, documents: Iterable[dict]) -> Iterator[list]:
    """One list of raw field values per row, in ``spec.fields`` order (unwinding if asked)."""
    if not spec.unwind:
        getters = [path_getter(path) for path in spec.fields]
        for doc in documents:
            yield [get(doc) for get in getters]
        return
    prefix = spec.unwind + "."
    unwound = path_getter(spec.unwind)
    # per field: (read from the element?, getter); the array itself is read as the element
    plan = [(True, (lambda e: e)) if path == spec.unwind
            else (True, path_getter(path[len(prefix):])) if path.startswith(prefix)
            else (False, path_getter(path)) for path in spec.fields]
    for doc in documents:
        array = unwound(doc)
        if isinstance(array, list):
            elements = array or [None]
        elif array is None:
            elements = [None]
        else:  # a lone value counts as a one-element array, as in $unwind
            elements = [array]
        outer = [None if inner else get(doc) for inner, get in plan]
        for element in elements:
            yield [get(element) if inner else value for (inner, get), value in zip(plan, outer)]


def referenced_columns(kwargs: dict) -> list[str]:
    """The columns an expectation's kwargs name."""
    columns = [kwargs[k] for k in COLUMN_KWARGS if k in kwargs]
    for key in COLUMN_LIST_KWARGS:
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
    fields = _checked_fields(raw.get("fields"), bad)
    query = raw.get("filter", {})
    if not isinstance(query, dict):
        raise bad("'filter' must be a MongoDB query object")
    unwind = raw.get("unwind")
    if unwind is not None and (not isinstance(unwind, str) or not unwind):
        raise bad("'unwind' must be a field name")
    if unwind and not any(f == unwind or f.startswith(unwind + ".") for f in fields):
        raise bad(f"'unwind' is {unwind!r} but no field is under it (list e.g. {unwind + '.x'!r})")
    numeric = _checked_numeric(raw.get("numeric", {}), fields, bad)
    derived = _checked_derived(raw.get("derived", {}), fields, bad)

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
    checked = [_checked_expectation(f"expectation #{i}", exp, columns, bad) for i, exp in enumerate(expectations)]
    return replace(spec, expectations=tuple(checked))


def _checked_fields(fields: Any, bad: Callable[[str], ConfigError]) -> list[str]:
    """The field paths, ``_id`` first if the file leaves it out."""
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise bad("'fields' must be a non-empty list of dotted field paths")
    if len(set(fields)) != len(fields):
        raise bad("'fields' lists a path twice")
    if "_id" not in fields:
        fields = ["_id", *fields]
    return fields


def _checked_numeric(numeric: Any, fields: list[str], bad: Callable[[str], ConfigError]) -> dict:
    if not isinstance(numeric, dict):
        raise bad("'numeric' must map column names to {\"critical\": bool}")
    for col, opts in numeric.items():
        if col not in fields:
            raise bad(f"numeric column {col!r} is not in 'fields'")
        if (not isinstance(opts, dict) or set(opts) - {"critical", "severity"}
                or not isinstance(opts.get("critical", False), bool) or opts.get("severity", "error") not in SEVERITIES):
            raise bad(f"numeric column {col!r}: options must be {{\"critical\": true|false}} or "
                      f"{{\"severity\": {'|'.join(SEVERITIES)}}}")
    return numeric


def _checked_derived(derived: Any, fields: list[str], bad: Callable[[str], ConfigError]) -> dict:
    if not isinstance(derived, dict):
        raise bad("'derived' must map new column names to {\"op\": ..., \"of\": field}")
    for col, spec in derived.items():
        if col in fields:
            raise bad(f"derived column {col!r} clashes with a field")
        if not isinstance(spec, dict) or spec.get("op") not in _DERIVED_OPS or spec.get("of") not in fields:
            raise bad(f"derived column {col!r}: need op in {sorted(_DERIVED_OPS)} and 'of' naming a field")
    return derived


def _checked_expectation(where: str, exp: Any, columns: set[str], bad: Callable[[str], ConfigError]) -> dict:
    """One expectation as ``{"type", "kwargs", "meta"}``, its columns checked against the frame's."""
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
    if meta.get("severity", "error") not in SEVERITIES:
        raise bad(f"{where} ({etype}): meta.severity must be one of {', '.join(SEVERITIES)}, not {meta['severity']!r}")
    if meta.get("critical") and meta.get("severity", "critical") != "critical":
        raise bad(f"{where} ({etype}): meta.critical is true but meta.severity is {meta['severity']!r}")
    for col in referenced_columns(kwargs):
        if col not in columns:
            raise bad(f"{where} ({etype}): column {col!r} is not a field or derived column")
    return {"type": etype, "kwargs": dict(kwargs), "meta": dict(meta)}


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
