"""Declared columns: one declaration derives the projection, the types and the checks.

An analysis reads its source collection as a flat table whose columns are
declared once as :class:`Column` ``(name, path, kind)`` triples:

* ``path`` is a dotted path into the document, where an integer component
  indexes a list (``"hsps.0.score"`` is the score of the first HSP);
* ``kind`` is one of :data:`KINDS`.

From that one declaration (as pymongoarrow derives everything from its
``Schema``) come the MongoDB projection (:meth:`Schema.projection`: only the
declared fields travel, ``hsps.0.score`` becomes ``hsps.score``), the Arrow and
pandas types (:meth:`Schema.empty`, the Dask ``meta``) and the coercion of each
value (:func:`coerce`).  A missing path, or a value of the wrong type, becomes a
missing value (NaN / <NA> / None): values are never invented.

The output side of an analysis is declared once too, one :class:`OutputColumn`
``(name, dtype, meaning, unit)`` per column (:func:`check_outputs`): the pandas
dtypes (:func:`output_dtypes`, the ``{column: dtype}`` mapping :func:`conform`
gives a frame exactly, in order), the Arrow schema of the published Parquet file
(:func:`output_arrow_schema`: a ``list<string>`` column stays a list of strings
even when every list is empty or there is no row, and each field carries its
meaning and unit as field metadata) and what ``sci-ingest query OUTPUT
--fields-list``, the manual (docs/) and the HTML report say of each column all derive
from it.

Why not pymongoarrow alone: 1.15 works against the embedded server for well-typed
documents, but (a) it aborts a whole batch on a single value of an unexpected
BSON type, which the evolving Materials Project schema makes likely; (b) it
silently truncates doubles stored in an ``int64`` column (2.5 -> 2); and (c) it
warns of a binary-size mismatch with pyarrow 25 at import.  :func:`coerce` applies one
documented rule per kind.  A streamed chunk whose raw bytes hold no value of another
type under a declared name is read by pymongoarrow all the same, to the frame these
rules give it (:func:`analytics.reading.streaming.chunk_frame`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import islice
from typing import Any, NamedTuple

from ingest.errors import AnalysisError, ConfigError

__all__ = ["KINDS", "Column", "Schema", "get_path", "path_getter", "projection_for", "coerce", "conform", "empty",
           "require_columns", "OUTPUT_DTYPES", "OutputColumn", "check_outputs", "output_dtypes", "output_arrow_schema"]

#: The kinds a field or column can have: the one list, for the curated collections, the analyses,
#: the exports and the validation.  In a frame they become the pandas dtypes ``str``, ``float64``,
#: ``Int64``, ``boolean``, ``list<item: string>[pyarrow]`` and ``datetime64[ms, UTC]``; ``date`` is a
#: BSON date (UTC), queried with ISO 8601 strings (``last_updated >= "2024-01-01"``) and exported
#: as Arrow ``timestamp[ms, tz=UTC]``.
KINDS = ("string", "float64", "int64", "bool", "list<string>", "date")


class Column(NamedTuple):
    """One input column: its name in the frame, its dotted path in the document, its kind."""

    name: str
    path: str
    kind: str


def get_path(doc: Any, path: str) -> Any:
    """Follow a dotted path; integer parts index lists.  Missing -> None."""
    value = doc
    for part in path.split("."):
        if isinstance(value, dict):
            if part not in value:
                return None
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            idx = int(part)
            if not -len(value) <= idx < len(value):
                return None
            value = value[idx]
        else:
            return None
    return value


def _path_shape(path: str) -> tuple | None:
    """The shapes of path read without :func:`get_path`: ``(key,)``, a top-level field, or
    ``(outer, index, inner)``, a field of one list element (``hsps.0.score``); else None."""
    parts = path.split(".")
    if len(parts) == 1 and not path.lstrip("-").isdigit():
        return (parts[0],)
    if len(parts) == 3 and parts[1].isdigit() and not parts[0].lstrip("-").isdigit():
        return parts[0], int(parts[1]), parts[2]
    return None


def path_getter(path: str):
    """A function reading one dotted path as :func:`get_path` does, with the path split once."""
    shape = _path_shape(path)
    if shape is not None and len(shape) == 1:
        key = shape[0]
        return lambda doc: doc.get(key) if isinstance(doc, dict) else None
    if shape is not None:
        outer, index, inner = shape

        def get(doc):
            items = doc.get(outer) if isinstance(doc, dict) else None
            if isinstance(items, list) and index < len(items) and isinstance(items[index], dict):
                return items[index].get(inner)
            return get_path(doc, path)
        return get
    return lambda doc: get_path(doc, path)


def _elements(docs: list, outer: str, index: int) -> list:
    """``doc[outer][index]`` of each document where that is a document, else None (then
    :func:`get_path` reads the path: another shape, such as a document where a list is expected)."""
    found = []
    for doc in docs:
        items = doc.get(outer) if type(doc) is dict else None
        if type(items) is list and index < len(items) and type(items[index]) is dict:
            found.append(items[index])
        else:
            found.append(None)
    return found


#: Documents :meth:`Schema.read` takes from an iterable at a time (a cursor: memory stays bounded).
READ_BLOCK = 4096

#: The Python type a value of each kind already has (kept as it is, not coerced).
_EXACT = {"string": str, "float64": float, "int64": int, "bool": bool}


def projection_for(paths: Iterable[str]) -> dict[str, int]:
    """A MongoDB inclusion projection fetching ``paths`` (dotted, as :func:`get_path` reads them).

    Integer parts (list indexes) are dropped, since a projection names a field
    of every element (``hsps.0.score`` -> ``hsps.score``), and a path inside
    another projected path is left out (MongoDB refuses ``a`` together with ``a.b``).
    """
    wanted = dict.fromkeys(".".join(p for p in path.split(".") if not p.lstrip("-").isdigit()) for path in paths)
    keep: dict[str, int] = {}
    for path in sorted(wanted, key=len):
        if not any(path.startswith(parent + ".") for parent in keep):
            keep[path] = 1
    return keep


def coerce(value: Any, kind: str) -> Any:
    """One value to ``kind``; anything of another type becomes None (missing)."""
    if value is None:
        return None
    if kind == "float64":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        to_decimal = getattr(value, "to_decimal", None)  # bson.Decimal128
        if to_decimal is not None:
            return float(to_decimal())
        return None
    if kind == "int64":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer() and -(2**63) <= value < 2**63:
            return int(value)  # an integral double an int64 holds (2**63 does not)
        return None
    if kind == "string":
        if isinstance(value, str):
            return value
        if type(value).__name__ == "ObjectId":
            return str(value)
        return None
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "list<string>":
        if isinstance(value, (list, tuple)):
            return [v for v in value if isinstance(v, str)]
        return None
    if kind == "date":  # a datetime (pymongo's are naive UTC) as an aware UTC one; a string is not parsed
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return None
    raise ConfigError(f"unknown column kind {kind!r}")


def _arrow_type(kind: str):
    import pyarrow as pa  # noqa: PLC0415 - lazy: --help reads ingest.schema; pyarrow costs 0.22 s

    return {
        "string": pa.string(),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "list<string>": pa.list_(pa.string()),
        "date": pa.timestamp("ms", tz="UTC"),
    }[kind]


class Schema:
    """An ordered, checked set of :class:`Column` s (plain triples are accepted too)."""

    __slots__ = ("columns",)

    def __init__(self, columns: Iterable[Column | tuple[str, str, str]]):
        checked: list[Column] = []
        names: set[str] = set()
        for column in columns:
            try:
                name, path, kind = column
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"a column must be (name, path, kind), got {column!r}") from exc
            if kind not in KINDS:
                raise ConfigError(f"column {name!r}: unknown kind {kind!r}; expected one of {KINDS}")
            if name in names:
                raise ConfigError(f"column {name!r} declared twice")
            names.add(name)
            checked.append(Column(str(name), str(path), kind))
        self.columns: tuple[Column, ...] = tuple(checked)

    def __iter__(self):
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def projection(self) -> dict[str, int]:
        """The MongoDB projection that fetches exactly the declared paths (list indexes dropped)."""
        return projection_for(c.path for c in self.columns)

    def read(self, docs: Iterable[dict]) -> dict[str, list]:
        """Column name -> coerced values, one per document.

        Column by column over blocks of documents (a list as it is, any other iterable, such
        as a cursor, :data:`READ_BLOCK` documents at a time): a comprehension per column, and
        the element of a list that several paths read (``hsps.0``) found once per document.
        Every value is what :func:`get_path` and :func:`coerce` give it."""
        values: dict[str, list] = {c.name: [] for c in self.columns}
        if isinstance(docs, list):
            self._read_block(docs, values)
            return values
        docs = iter(docs)
        while block := list(islice(docs, READ_BLOCK)):
            self._read_block(block, values)
        return values

    def _read_block(self, docs: list, values: dict[str, list]) -> None:
        elements: dict[tuple[str, int], list] = {}
        for column in self.columns:
            shape = _path_shape(column.path)
            if shape is not None and len(shape) == 1:
                key = shape[0]
                got = [d.get(key) if type(d) is dict else None for d in docs]
            elif shape is not None:
                place, inner, path = shape[:2], shape[2], column.path
                found = elements.get(place)
                if found is None:
                    found = elements[place] = _elements(docs, *place)
                got = [e.get(inner) if e is not None else get_path(d, path) for e, d in zip(found, docs)]
            else:
                got = [get_path(d, column.path) for d in docs]
            exact, kind = _EXACT.get(column.kind), column.kind
            # the common case (already of the column's type) without a call; the rest by coerce's rules
            if any(type(v) is not exact and v is not None for v in got):
                if kind == "float64":  # integers (SSEARCH scores) made floats here, as coerce does
                    got = [v if type(v) is float or v is None else float(v) if type(v) is int else coerce(v, kind)
                           for v in got]
                else:
                    got = [v if type(v) is exact or v is None else coerce(v, kind) for v in got]
            values[column.name].extend(got)

    def frame(self, values: dict[str, list] | None = None):
        """A pandas frame with the declared dtypes (empty when ``values`` is None)."""
        import pyarrow as pa  # noqa: PLC0415 - lazy: --help reads ingest.schema; pyarrow costs 0.22 s

        values = values or {}
        arrays = [pa.array(values.get(c.name, []), type=_arrow_type(c.kind)) for c in self.columns]
        return self.frame_of(pa.Table.from_arrays(arrays, names=self.names))

    def frame_of(self, table):
        """The pandas frame of an Arrow table with one column per declared column, of its Arrow type."""
        import pandas as pd  # noqa: PLC0415 - lazy: --help reads ingest.schema; pandas costs 0.3 s
        import pyarrow as pa  # noqa: PLC0415 - lazy: --help reads ingest.schema; pyarrow costs 0.22 s

        # Lists stay Arrow-backed: an object column of arrays would be turned into
        # strings by Dask's ``dataframe.convert-string`` option.
        list_type = pa.list_(pa.string())
        mapping = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), list_type: pd.ArrowDtype(list_type)}
        return table.to_pandas(types_mapper=mapping.get)

    def empty(self):
        """The empty frame every partition read with this schema conforms to (Dask ``meta``)."""
        return self.frame()


# ------------------------------------------------------------------ output frames
def require_columns(df, columns: Iterable[str], what: str) -> None:
    """Raise AnalysisError naming the columns ``df`` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise AnalysisError(f"{what}: input lacks column(s) {', '.join(missing)}")


def conform(df, dtypes: dict[str, str]):
    """Exactly the declared columns, in order, with the declared dtypes."""
    import numpy as np  # noqa: PLC0415 - lazy: --help reads ingest.schema; numpy costs 0.1 s
    import pandas as pd  # noqa: PLC0415 - lazy: --help reads ingest.schema; pandas costs 0.3 s

    n = len(df)
    columns = {}
    for name, dtype in dtypes.items():
        if name not in df.columns:
            columns[name] = pd.Series(np.full(n, np.nan), copy=False).astype(dtype)
            continue
        column = df[name]
        if column.dtype == _pandas_dtype(dtype):  # already declared: kept as it is (copy-on-write)
            columns[name] = column.array
        else:
            columns[name] = pd.Series(column.to_numpy(), copy=False).astype(dtype).array
    return pd.DataFrame(columns, index=pd.RangeIndex(n))


@functools.cache
def _pandas_dtype(name: str):
    import pandas as pd  # noqa: PLC0415 - lazy: --help reads ingest.schema; pandas costs 0.3 s

    return pd.api.types.pandas_dtype(name)


def empty(dtypes: dict[str, str]):
    """An empty frame with ``dtypes``."""
    import pandas as pd  # noqa: PLC0415 - lazy: --help reads ingest.schema; pandas costs 0.3 s

    return conform(pd.DataFrame(), dtypes)


# ------------------------------------------------------------------ output columns, declared
#: The dtypes an output column is declared with -> (its pandas dtype, its query kind).  ``list<string>``
#: declares a list column and its element type: a pandas ``object`` column of lists of strings, an
#: Arrow (Parquet) ``list<string>`` even when every list is empty, a ``list<string>`` field to query.
#: There is no bare ``object``: every output column has a type a reader can rely on.
OUTPUT_DTYPES: dict[str, tuple[str, str]] = {
    "str": ("str", "string"), "string": ("string", "string"),
    "float64": ("float64", "float64"), "Float64": ("Float64", "float64"),
    "int64": ("int64", "int64"), "Int64": ("Int64", "int64"),
    "bool": ("bool", "bool"), "boolean": ("boolean", "bool"),
    "list<string>": ("object", "list<string>"),
}


class OutputColumn(NamedTuple):
    """One output column of an analysis, declared once: its name, its dtype (one of
    :data:`OUTPUT_DTYPES`), what it means and its unit.

    All four are given explicitly: ``unit`` is ``""`` for identifiers, labels, flags and
    other dimensionless values, else what the number counts or measures (``"eV/atom"``,
    ``"count"``, ``"fraction (0-1)"``, ``"E-value"``, ``"bits"``).
    """

    name: str
    dtype: str
    meaning: str
    unit: str

    @property
    def kind(self) -> str:
        """The query kind (:data:`KINDS`): ``sci-ingest query`` / ``export`` type the field by it."""
        return OUTPUT_DTYPES[self.dtype][1]

    @property
    def pandas_dtype(self) -> str:
        return OUTPUT_DTYPES[self.dtype][0]


def check_outputs(owner: str, columns: Iterable) -> tuple[OutputColumn, ...]:
    """The output declaration of ``owner`` (e.g. ``analysis best_hits``) as checked
    :class:`OutputColumn` s; a :class:`ConfigError` names the owner and the column otherwise.

    Each column needs a name, a dtype of :data:`OUTPUT_DTYPES`, a meaning (non-blank text) and a
    unit (text; ``""`` when it has none), each declared once.
    """
    if isinstance(columns, (str, bytes, dict)):
        raise ConfigError(f"{owner}: outputs must be a sequence of OutputColumn(name, dtype, meaning, unit), "
                          f"not a {type(columns).__name__}")
    checked: list[OutputColumn] = []
    for column in columns:
        label = repr(column[0]) if isinstance(column, tuple) and column and isinstance(column[0], str) else repr(column)
        if not isinstance(column, tuple) or len(column) != 4:
            raise ConfigError(f"{owner}: output column {label} must be declared as OutputColumn(name, dtype, "
                              f"meaning, unit), got {column!r}")
        name, dtype, meaning, unit = column
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{owner}: an output column has no name: {column!r}")
        if any(c.name == name for c in checked):
            raise ConfigError(f"{owner}: output column {name!r} declared twice")
        if dtype not in OUTPUT_DTYPES:
            raise ConfigError(f"{owner}: output column {name!r} has dtype {dtype!r}; expected one of "
                              f"{', '.join(OUTPUT_DTYPES)} (a list column declares its element type: list<string>)")
        if not isinstance(meaning, str) or not meaning.strip():
            raise ConfigError(f"{owner}: output column {name!r} has no meaning: say what the column holds")
        if not isinstance(unit, str):
            raise ConfigError(f"{owner}: output column {name!r} has no unit: declare one (\"\" when it has none, "
                              f"e.g. an identifier), got {unit!r}")
        checked.append(OutputColumn(name, dtype, meaning.strip(), unit.strip()))
    if not checked:
        raise ConfigError(f"{owner}: declares no output column")
    return tuple(checked)


def output_dtypes(columns: Iterable[OutputColumn]) -> dict[str, str]:
    """``{column: pandas dtype}`` of an output declaration (what :func:`conform` and :func:`empty` take)."""
    return {c.name: OUTPUT_DTYPES[c.dtype][0] for c in columns}


def output_arrow_schema(columns: Iterable[OutputColumn], extra: Iterable[tuple[str, str, str, str]] = ()):
    """The Arrow schema of an output declaration (and ``extra`` columns declared the same way, e.g.
    ``run_id``): one field per column of its kind's type, with ``meaning`` and ``unit`` as field metadata."""
    import pyarrow as pa  # noqa: PLC0415 - lazy: --help reads ingest.schema; pyarrow costs 0.22 s

    return pa.schema([pa.field(name, _arrow_type(OUTPUT_DTYPES[dtype][1]),
                               metadata={"meaning": meaning, "unit": unit})
                      for name, dtype, meaning, unit in [*columns, *extra]])
