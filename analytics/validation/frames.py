"""Documents to rows to a pandas frame, by a suite's rules, and reading them from MongoDB.

The rules (``fields``, ``unwind``, ``numeric``, ``derived``) are those of the
suite format, :mod:`analytics.validation.suites`.  Paths are read with
:func:`analytics.schema.get_path`, the project's one dotted-path reader.
pandas is imported only when a frame is built, and MongoDB is reached only
through :mod:`ingest.mongo`.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Iterator

from analytics.schema import get_path
from analytics.validation.suites import NON_NUMERIC_SUFFIX, SuiteSpec

__all__ = ["document_rows", "build_frame", "read_frame", "short_repr"]

_REPR_LIMIT = 120


def document_rows(spec: SuiteSpec, documents: Iterable[dict]) -> Iterator[list]:
    """One list of raw field values per row, in ``spec.fields`` order (unwinding if asked)."""
    if not spec.unwind:
        for doc in documents:
            yield [get_path(doc, path) for path in spec.fields]
        return
    prefix = spec.unwind + "."
    for doc in documents:
        array = get_path(doc, spec.unwind)
        if isinstance(array, list):
            elements = array or [None]
        elif array is None:
            elements = [None]
        else:  # a lone value counts as a one-element array, as in $unwind
            elements = [array]
        for element in elements:
            row = []
            for path in spec.fields:
                if path.startswith(prefix):
                    row.append(get_path(element, path[len(prefix):]))
                elif path == spec.unwind:
                    row.append(element)
                else:
                    row.append(get_path(doc, path))
            yield row


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to a readable length."""
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
    for row in document_rows(spec, documents):
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
            offending.append(short_repr(value) if bad else None)
        frame[col] = pd.Series(converted, index=frame.index, dtype="float64")
        frame[col + NON_NUMERIC_SUFFIX] = pd.Series(offending, index=frame.index, dtype=object)
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
