"""Raw BSON batches to Arrow tables of a declared schema, with documents of other types set aside.

An export's columns are curated fields (:mod:`ingest.store.curated`): a name, a document path
(``hsps.0.evalue``) and a kind.  From them come

* the projection (the same fields a bare ``find`` would ask for: ``hsps.evalue``);
* a **pymongoarrow schema** of the projected documents' shape: ``hsps`` a list of structs
  (``evalue``, ``identity``, ...), ``source`` a struct, ``elements`` a list of strings;
* the **flattening** of that shape to one column per field, in Arrow (``list_element`` /
  ``struct_field``: ``hsps.0.evalue`` is the first struct's ``evalue``).  Measured against
  the alternative, an aggregation ``$project`` with ``$arrayElemAt`` that makes the server
  flatten: 59.6 s for 200,000 hits on the embedded server against 13 s for the ``find``;
* the **type rules** of each kind (:data:`ACCEPTS`).  A field may be missing or null; a
  ``float64`` takes BSON doubles and integers (an int64 only within ±2⁵³, where a double
  holds it exactly), an ``int64`` only integers (a double, even 2.0, is not an int), a
  ``string`` strings, a ``bool`` booleans, a ``list<string>`` an array of strings (and nulls),
  a ``date`` BSON dates (Arrow ``timestamp[ms, tz=UTC]``; a date kept as a string is set aside).

A batch goes one of two ways (:class:`Converter`):

* **fast**: pymongoarrow reads it with the schema and ``allow_invalid=False``.  pymongoarrow
  alone is not enough: it *silently* truncates a double in an int64 column (2.5 -> 2),
  turns booleans into numbers, reads a string where a list is expected as an empty list,
  and a scalar where a document is expected as a document of nulls.  So first a
  **screen** looks for exactly those cases in the raw bytes: every BSON element is its
  type byte, its name and a NUL, so ``\\x01rank\\x00`` is a double named ``rank``.  One
  RE2 regular expression (Arrow's ``match_substring_regex``, one pass over the batch;
  0.5 s for 130 MB) lists, per name, the type bytes its kind must not get quietly.  A
  match (or a false one: the bytes inside a string) and any pymongoarrow error send the
  batch the exact way; a clean batch cannot hold a document of another type.
* **exact**: the batch is decoded by the ``bson`` module; each document's fields are
  checked by the rules above; a document with any field of another type is **set aside**
  (named by ``_id``, field, path, the type found and the value: :class:`Reject`) and
  counted, the others become the same Arrow columns the fast way gives.

Either way a NaN double becomes an Arrow null (pymongoarrow's rule, kept on both ways so
they agree), and is counted: a batch holding the bytes of the usual NaN (what Python, JSON
parsers and MongoDB write) goes the exact way; a NaN of other bits is nulled uncounted.  A document with a document where a list is expected, or a
list where a document is expected, is checked the exact way too.  What the server stores
is never changed, and nothing is written that the schema does not hold.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import bson
import pyarrow as pa
import pyarrow.compute as pc

with warnings.catch_warnings():  # pymongoarrow 1.15 warns of pyarrow 25's binary size at import
    warnings.simplefilter("ignore")
    from pymongoarrow.context import PyMongoArrowContext
    from pymongoarrow.schema import Schema

__all__ = ["ACCEPTS", "Reject", "Converter", "arrow_type", "bson_type_name"]

#: The BSON types each kind takes (names as MongoDB's ``$type`` spells them); null and missing: null.
ACCEPTS = {
    "string": {"string"},
    "float64": {"double", "int", "long"},
    "int64": {"int", "long"},
    "bool": {"bool"},
    "list<string>": {"array"},
    "date": {"date"},
}
_CODES = {"double": 0x01, "string": 0x02, "object": 0x03, "array": 0x04, "binData": 0x05, "undefined": 0x06,
          "objectId": 0x07, "bool": 0x08, "date": 0x09, "null": 0x0A, "regex": 0x0B, "dbPointer": 0x0C,
          "javascript": 0x0D, "symbol": 0x0E, "javascriptWithScope": 0x0F, "int": 0x10, "timestamp": 0x11,
          "long": 0x12, "decimal": 0x13, "maxKey": 0x7F, "minKey": 0xFF}
#: Type bytes a batch may hold under a name of each kind without leaving the fast way.
_QUIET = {"string": {0x02}, "float64": {0x01, 0x10}, "int64": {0x10, 0x12}, "bool": {0x08},
          "list<string>": {0x04}, "date": {0x09}, "struct": {0x03}, "list": {0x04}}
_EXACT_DOUBLE = 2**53


def arrow_type(kind: str):
    return {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_(),
            "list<string>": pa.list_(pa.string()), "date": pa.timestamp("ms", tz="UTC")}[kind]


def bson_type_name(value: Any) -> str:
    """The BSON type of a decoded value, as ``$type`` names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "long" if type(value).__name__ == "Int64" or not -(2**31) <= value < 2**31 else "int"
    names = {float: "double", str: "string", dict: "object", list: "array", bytes: "binData"}
    for cls, name in names.items():
        if isinstance(value, cls):
            return name
    return {"datetime": "date", "ObjectId": "objectId", "Decimal128": "decimal", "Binary": "binData",
            "Regex": "regex", "Code": "javascript", "Timestamp": "timestamp", "MinKey": "minKey",
            "MaxKey": "maxKey", "DBRef": "object", "SON": "object"}.get(type(value).__name__, type(value).__name__)


@dataclass
class Reject:
    """A document set aside: its ``_id`` and, per field of another type, what was found."""

    id: Any
    problems: list[dict] = field(default_factory=list)


# ------------------------------------------------------------------ the shape
class _Node:
    """A node of the projected documents' shape: a struct (named children), a list (an item), or a leaf kind."""

    def __init__(self, kind: str):
        self.kind = kind  # "struct" | "list" | a field kind
        self.children: dict[str, _Node] = {}
        self.item: _Node | None = None
        self.indexes: set[int] = set()

    def child(self, name: str, kind: str, where: str) -> _Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = _Node(kind)
        elif node.kind != kind:
            raise ValueError(f"{where}: {name} is both a {node.kind} and a {kind}")
        return node

    def arrow(self):
        if self.kind == "struct":
            return pa.struct([(name, node.arrow()) for name, node in self.children.items()])
        if self.kind == "list":
            return pa.list_(self.item.arrow())
        return arrow_type(self.kind)


def _shape(fields) -> tuple[_Node, list[list[tuple[str, Any]]]]:
    """The root struct of ``fields``' paths, and each field's steps through it (``("field", name)`` /
    ``("index", i)``)."""
    root = _Node("struct")
    steps_of = []
    for f in fields:
        parts = f.path.split(".")
        node, steps = root, []
        i = 0
        while i < len(parts):
            name, last = parts[i], i == len(parts) - 1
            if name.isdigit():
                raise ValueError(f"{f.name}: path {f.path} indexes something that is not a list")
            if last:
                node.child(name, f.kind, f.path)
                steps.append(("field", name))
                break
            nxt = parts[i + 1]
            if nxt.isdigit():  # name is a list; take element nxt
                lst = node.child(name, "list", f.path)
                lst.indexes.add(int(nxt))
                steps += [("field", name), ("index", int(nxt))]
                if i + 2 == len(parts):
                    raise ValueError(f"{f.name}: path {f.path} ends in a list index (declare the list itself)")
                if lst.item is None:
                    lst.item = _Node("struct")
                node, i = lst.item, i + 2
                continue
            node = node.child(name, "struct", f.path)
            steps.append(("field", name))
            i += 1
        steps_of.append(steps)
    return root, steps_of


def _screen_pattern(root: _Node) -> str | None:
    """The RE2 pattern matching any element the fast way would read quietly wrong (see the module)."""
    bad_by_name: dict[str, set[int]] = {}
    every = set(_CODES.values()) - {0x0A}

    def visit(node: _Node) -> None:
        for name, child in node.children.items():
            bad_by_name.setdefault(name, set()).update(every - _QUIET[child.kind])
            if child.kind == "struct":
                visit(child)
            elif child.kind == "list" and child.item is not None:
                for index in child.indexes:  # an array where the indexed document should be
                    bad_by_name.setdefault(str(index), set()).add(0x04)
                visit(child.item)

    visit(root)
    groups: dict[frozenset[int], list[str]] = {}
    for name, bad in bad_by_name.items():
        if bad:
            groups.setdefault(frozenset(bad), []).append(name)
    if not groups:
        return None
    parts = []
    for codes, names in groups.items():
        cls = "".join(f"\\x{b:02x}" for b in sorted(codes))
        alts = "|".join(re.escape(n) for n in sorted(names))
        parts.append(f"[{cls}](?:{alts})\\x00")
    return "|".join(parts)


# ------------------------------------------------------------------ conversion
class Converter:
    """Raw BSON batches of projected documents -> Arrow tables of ``fields`` (one column each)."""

    def __init__(self, fields, codec_options=None) -> None:
        self.fields = list(fields)
        self.root, self.steps = _shape(self.fields)
        self.schema = pa.schema([(f.name, arrow_type(f.kind)) for f in self.fields])
        self.pma_schema = Schema({name: node.arrow() for name, node in self.root.children.items()})
        self.pattern = _screen_pattern(self.root)
        self.codec_options = codec_options
        self.fast_batches = self.exact_batches = 0
        self.nan_nulls: dict[str, int] = {}
        self.floats = any(f.kind == "float64" for f in self.fields)
        self._getters = [self._getter(f) for f in self.fields]

    # -- the fast way
    def suspicious(self, batch: bytes, nans: bool = True) -> bool:
        """Whether the screen finds an element the fast way would read quietly wrong (or, with
        ``nans``, a NaN: the exact way counts them)."""
        if nans and self.floats and (b"\x00\x00\x00\x00\x00\x00\xf8\x7f" in batch
                                     or b"\x00\x00\x00\x00\x00\x00\xf8\xff" in batch):
            return True  # a NaN (canonical bits, as Python and JSON parsers write it) is counted the exact way
        if self.pattern is None:
            return False
        return bool(pc.match_substring_regex(pa.array([batch], pa.binary()), self.pattern)[0].as_py())

    def clean(self, batch: bytes):
        """The batch's table the fast way when it holds nothing of another type, else None.

        For a reader that takes a NaN as a missing value (a pandas ``float64`` column cannot
        tell them apart), so NaNs are not screened; a batch with a null inside a list of
        strings, a string that is not UTF-8, or any type pymongoarrow refuses answers None:
        the caller reads it its exact way."""
        if self.suspicious(batch, nans=False):
            return None
        try:
            table = self.fast(batch)
            table.validate(full=True)  # strings are UTF-8
        except (TypeError, ValueError, OverflowError, pa.ArrowException):
            return None
        for f, column in zip(self.fields, table.columns):
            if f.kind == "list<string>" and pc.list_flatten(column).null_count:
                return None
        return table

    def fast(self, batch: bytes):
        """The batch through pymongoarrow, flattened; raises TypeError/ValueError/OverflowError on a stray type."""
        context = PyMongoArrowContext(self.pma_schema, codec_options=self.codec_options, allow_invalid=False)
        context.process_bson_stream(batch)
        nested = context.finish()
        cache: dict = {}
        columns = [self._extract(nested, steps, cache) for steps in self.steps]
        return pa.Table.from_arrays(columns, schema=self.schema)

    @staticmethod
    def _extract(table, steps, cache: dict):
        """The column at ``steps`` in ``table``; arrays on the way are shared through ``cache`` (the
        first HSP is taken once for all its fields)."""
        for depth in range(len(steps), 0, -1):
            if tuple(steps[:depth]) in cache:
                array = cache[tuple(steps[:depth])]
                break
        else:
            depth, array = 1, table.column(steps[0][1])
            cache[tuple(steps[:1])] = array
        for n in range(depth, len(steps)):
            kind, key = steps[n]
            if kind == "field":
                array = pc.struct_field(array, [key])
            else:  # element ``key`` of each list; null where the list is null or shorter
                long_enough = pc.greater(pc.list_value_length(array), key)
                array = pc.list_element(pc.if_else(long_enough, array, pa.scalar(None, array.type)), key)
            cache[tuple(steps[:n + 1])] = array
        return array

    # -- the exact way
    def _getter(self, f):
        parts = f.path.split(".")
        kind = f.kind

        def get(doc) -> tuple[Any, dict | None]:
            value: Any = doc
            for i, part in enumerate(parts):
                if isinstance(value, dict):
                    if part not in value:
                        return None, None
                    value = value[part]
                elif isinstance(value, list):
                    if not part.isdigit():  # MongoDB would look through the list: not one value
                        return None, {"found": "array", "at": ".".join(parts[:i])}
                    index = int(part)
                    if index >= len(value):
                        return None, None
                    value = value[index]
                else:  # a scalar where a document is expected: nothing there
                    return None, None
            return _check(value, kind)

        return get

    def exact(self, batch: bytes):
        """(table of the documents whose fields have their kinds, rejects) of one raw batch."""
        options = self.codec_options or bson.DEFAULT_CODEC_OPTIONS
        docs = bson.decode_all(batch, options)
        columns: list[list] = [[] for _ in self.fields]
        rejects: list[Reject] = []
        for doc in docs:
            values, problems = [], []
            for f, get in zip(self.fields, self._getters):
                value, problem = get(doc)
                if problem is not None:
                    problems.append({"field": f.name, "path": f.path, "expected": f.kind, **problem})
                values.append(value)
            if problems:
                rejects.append(Reject(doc.get("_id"), problems))
                continue
            for f, column, value in zip(self.fields, columns, values):
                if value is _NAN:
                    self.nan_nulls[f.name] = self.nan_nulls.get(f.name, 0) + 1
                    value = None
                column.append(value)
        arrays = [pa.array(column, type=arrow_type(f.kind)) for f, column in zip(self.fields, columns)]
        return pa.Table.from_arrays(arrays, schema=self.schema), rejects

    def convert(self, batch: bytes):
        """(table, rejects) of one raw batch, the fast way when it is safe."""
        if not self.suspicious(batch):
            try:
                table = self.fast(batch)
                self.fast_batches += 1
                return table, []
            except (TypeError, ValueError, OverflowError):
                pass  # a type pymongoarrow refused: the exact way names it
        self.exact_batches += 1
        return self.exact(batch)


_NAN = object()


def _check(value: Any, kind: str) -> tuple[Any, dict | None]:
    """(the value to write, or None with a problem) of one field's value under ``kind``."""
    if value is None:
        return None, None
    found = bson_type_name(value)
    if kind == "float64":
        if found == "double":
            return (_NAN if math.isnan(value) else value), None
        if found in ("int", "long") and abs(value) <= _EXACT_DOUBLE:
            return float(value), None
        if found in ("int", "long"):
            return None, {"found": found, "value": value, "why": "an integer beyond 2^53 is not exact as a double"}
    elif found in ACCEPTS[kind]:
        if kind == "list<string>":
            stray = next((v for v in value if v is not None and not isinstance(v, str)), _NAN)
            if stray is not _NAN:
                return None, {"found": f"array holding {bson_type_name(stray)}", "value": _shown(value)}
        return value, None
    return None, {"found": found, "value": _shown(value)}


def _shown(value: Any, width: int = 80) -> Any:
    """The value as the rejects file shows it (long texts and containers cut)."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
