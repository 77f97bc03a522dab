"""Documents to a pandas frame, by a suite's rules.

The rules (``fields``, ``unwind``, ``numeric``, ``derived``) are those of the
suite format, :mod:`analytics.validation.suites`, which also makes the rows
(:func:`analytics.validation.suites.document_rows`); here they become a frame,
the numeric columns converted.  pandas is imported only when a frame is built.
Reading the documents is :mod:`analytics.validation.stream`'s business.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from analytics.validation.suites import NON_NUMERIC_SUFFIX, SuiteSpec, document_rows

__all__ = ["build_frame", "short_repr"]

_REPR_LIMIT = 120


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
    import pandas as pd  # noqa: PLC0415 - lazy: importing analytics.validation must not import pandas (tests/test_validate.py); it costs 0.3 s

    rows: list[list] = []
    truncated = False
    for row in document_rows(spec, documents):
        if max_rows is not None and len(rows) >= max_rows:
            truncated = True
            break
        rows.append(row)
    frame = pd.DataFrame.from_records(rows, columns=list(spec.fields)) if rows else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in spec.fields})
    fields = list(spec.fields)
    for col in spec.numeric:
        converted: list[float] = []
        offending: list[str | None] = []
        at = fields.index(col)
        # the rows, not the frame: pandas would read a stored NaN and a missing value alike
        for value in (row[at] for row in rows):
            kind = type(value)
            if kind is float and value != value:  # NaN stored (the loader warned): not a number
                converted.append(value)
                offending.append("nan")
            elif kind is float or kind is int:
                converted.append(float(value))
                offending.append(None)
            else:
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
