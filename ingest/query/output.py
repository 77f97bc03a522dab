"""``sci-ingest query``: the matching documents, streamed as a table, CSV or JSON Lines.

The cursor is read :data:`BATCH` documents at a time and each row is written as it
comes, so memory does not grow with the result (``--format parquet`` goes through
:mod:`ingest.query.arrow`, in record batches).  Formats:

* ``table``: aligned columns, widths from the header and the first :data:`TABLE_SAMPLE`
  rows, values longer than :data:`TABLE_WIDTH` characters (or than their column) cut
  with ``…``;
* ``csv``: a header, then one line per document; missing -> empty, true/false, lists
  as JSON (``["Fe","O"]``), numbers as Python prints them (round-trip exact);
* ``jsonl``: one JSON object per document, field names as columns; NaN and infinities
  as Extended JSON (``{"$numberDouble": "NaN"}``), ids and dates as strings.

Values are data, and data may hold any character: a table (always) and CSV written to a
terminal show each value as :func:`ingest.fileio.printable` shows a path (NUL ``\\x00``, ESC
``\\x1b``, a newline ``\\n``, U+202E ``\\u202e``), so that no value moves the cursor, colours
the screen, reorders a line or forges one.  CSV to a file or a pipe keeps the values' bytes;
JSON Lines keeps the values (JSON escapes C0; DEL, C1, the bidirectional controls and
U+2028 / U+2029 are written ``\\uNNNN`` too: the same strings when read back).

Dates (in every text format) are ISO 8601 in UTC to the millisecond: ``2024-01-31T12:00:00.000Z``.

``--out FILE`` is written to a temporary file next to it and renamed when complete
(:func:`atomic_output`), so a reader never sees half a file.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from ingest.dates import format_iso
from ingest.fileio import printable
from ingest.report import json_text
from ingest.schema import path_getter
from ingest.store.mongo import db_errors

__all__ = ["BATCH", "TABLE_SAMPLE", "TABLE_WIDTH", "atomic_output", "find_cursor", "rows", "write_rows", "text_value"]

BATCH = 1000
TABLE_SAMPLE = 100
TABLE_WIDTH = 40


@contextmanager
def atomic_output(path: str | None, binary: bool = False) -> Iterator:
    """A stream for ``path`` (a temporary file renamed over it at the end) or stdout when None / ``-``."""
    if not path or path == "-":
        yield sys.stdout.buffer if binary else sys.stdout
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline="", encoding="utf-8") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def rows(cursor, fields) -> Iterator[list]:
    """Each document of ``cursor`` as the values of ``fields`` (paths read as :func:`ingest.schema.get_path`)."""
    getters = [path_getter(f.path) for f in fields]
    for doc in cursor:
        yield [get(doc) for get in getters]


def text_value(value: Any) -> str:
    """One value as CSV / table text (the value's own characters: :func:`shown_value` for a terminal)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(_json_value(value), ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, datetime):
        return format_iso(value)
    return str(value)


def shown_value(value: Any) -> str:
    """One value as a table or a terminal shows it: :func:`text_value` with control and bidirectional
    characters escaped as in paths (:func:`ingest.fileio.printable`); a list or an object is JSON
    text already (its own escapes), so only what JSON leaves raw is escaped in it, as JSON does."""
    if isinstance(value, (list, dict)):
        return printable(text_value(value), backslash=False)
    return printable(text_value(value))


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"$numberDouble": "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return format_iso(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def write_rows(out, fields, values: Iterable[list], fmt: str, *, terminal: bool = False) -> int:
    """Write ``values`` (lists in the order of ``fields``) to ``out`` as ``fmt``; returns the rows written.

    ``terminal``: ``out`` is a terminal, so CSV shows its values escaped (:func:`shown_value`), as a
    table always does; CSV to a file or a pipe keeps them as they are."""
    names = [f.name for f in fields]
    n = 0
    if fmt == "csv":
        value = shown_value if terminal else text_value
        writer = csv.writer(out, lineterminator="\n")
        # csv quotes a value holding a line feed, not one holding a lone carriage return, which a
        # reader then takes for a line's end: a row with one is written with every value quoted
        quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow([printable(name) for name in names] if terminal else names)
        for row in values:
            cells = [value(v) for v in row]
            (quoted if any("\r" in c for c in cells) else writer).writerow(cells)
            n += 1
        return n
    if fmt == "jsonl":
        for row in values:
            out.write(json_text(json.dumps({k: _json_value(v) for k, v in zip(names, row)}, ensure_ascii=False,
                                           allow_nan=False)) + "\n")
            n += 1
        return n
    if fmt == "table":
        return _table(out, names, values)
    raise ValueError(f"unknown text format {fmt!r}")


def _table(out, names: list[str], values: Iterable[list]) -> int:
    """Aligned columns; widths from the first rows, so the rest stream without being held."""
    iterator = iter(values)
    names = [printable(name) for name in names]
    head: list[list[str]] = []
    for row in iterator:
        head.append([shown_value(v) for v in row])
        if len(head) >= TABLE_SAMPLE:
            break
    widths = [min(TABLE_WIDTH, max([len(name)] + [len(r[i]) for r in head])) for i, name in enumerate(names)]

    def line(cells: list[str]) -> str:
        return "  ".join(_cut(c, w).ljust(w) for c, w in zip(cells, widths)).rstrip()

    out.write(line(names) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    n = 0
    for cells in head:
        out.write(line(cells) + "\n")
        n += 1
    for row in iterator:
        out.write(line([shown_value(v) for v in row]) + "\n")
        n += 1
    return n


def find_cursor(coll, spec, projection=None, batch_size: int = BATCH):
    """The cursor of ``spec`` (filter, sort, limit, hint) over ``coll``, with ``projection`` (the spec's by default)."""
    cursor = coll.find(spec.filter, spec.projection if projection is None else projection, batch_size=batch_size)
    if spec.sort:
        cursor = cursor.sort(spec.sort)
    if spec.limit:
        cursor = cursor.limit(spec.limit)
    if spec.hint:
        cursor = cursor.hint(list(spec.hint.items()))
    return cursor


def run_query(coll, spec, fmt: str, out_path: str | None, log) -> int:
    """Stream the documents of ``spec`` from ``coll`` to ``out_path`` (stdout when None) as ``fmt``; rows written."""
    cursor = find_cursor(coll, spec)
    with db_errors(f"querying {coll.name}"), atomic_output(out_path) as out:
        written = write_rows(out, spec.fields, rows(cursor, spec.fields), fmt, terminal=_is_terminal(out))
        out.flush()
    return written


def _is_terminal(out) -> bool:
    """Whether ``out`` is a terminal (stdout in a terminal; never a file ``--out`` names)."""
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # closed, or a stream without a descriptor
        return False
