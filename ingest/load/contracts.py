"""Contracts at the door: the declared kind of every curated field, checked as a document is loaded.

The curated collections (:mod:`ingest.store.curated`) declare each field's path and kind.  The
loader checks every document it builds against them before anything of its file is written
(:mod:`ingest.load.content`), by the rule ``sci-ingest export`` reads them with
(:data:`ingest.query.arrow.ACCEPTS`), so that nothing a load stores is set aside by an export:

* **null**, or no value, is allowed for every field: every curated field is optional (the
  Materials Project writes ``null`` for what it does not know), and a query or an export reads
  it as missing;
* ``string`` takes a string; ``float64`` a number (an integer only within ±2^53, where a double
  holds it exactly; NaN and the infinities are numbers, named by the value policy);
  ``int64`` an integer; ``bool`` true or false; ``list<string>`` a list of strings (and nulls);
  ``date`` a date (the loader makes ISO 8601 strings and ``$date`` into dates already:
  :mod:`ingest.documents.materials`);
* the values on the way to a nested field (``symmetry`` of ``symmetry.crystal_system``) are
  objects, or a list where the path has an index (``hsps.0.evalue``).

A value that reads *losslessly* as its declared kind is stored so and named in a **warning**;
its original is kept in ``_ingest.restore``, so :func:`ingest.documents.from_document` still gives
the record back as it was:

* a string written as a JSON number (``"1.25"``) under a number: the number those digits give
  unquoted (under an ``int64``: an integer; ``"8.0"`` is 8);
* a double with an integral value (``8.0``) under an ``int64``, within its range;
* a serialised enumeration (``{"@module": ..., "@class": "RunType", "value": "GGA"}``, as emmet
  writes ``run_type``) under a ``string``: its value.

Any other value is **set aside**: its field holds null in its place, the value moves to
``_ingest.set_aside`` (``{"path", "value", "reason"}``, also kept in ``_ingest.restore`` when the
record holds it as written), and it is named ``file:line: path value reason``
(:meth:`Contract.enforce`).  Its file is loaded, the rest of the record with it, and the command
exits 2.  Fields the loader writes itself (``_id``, ``_ingest``, ``_source``, ``source``) are not
checked.

Search documents (``searches``, ``hits``) are typed by their parser, which fails a file whose
numbers do not read (docs/loading.md); the loader checks them against the same contracts
(:meth:`Contract.findings`) and fails the file of one that breaks them, naming it: a defect of
the parser, never stored.

The check costs a dictionary lookup and a type test per declared field: each collection's paths
are compiled once, grouped by the type each takes (:class:`_Holder`), and only a value that breaks
its contract meets the slow path (``benchmarks/bench_contracts.py`` measures the cost).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, NamedTuple

from bson.decimal128 import Decimal128
from bson.objectid import ObjectId

from ingest.documents.aliases import LEGACY_NAMES
from ingest.store import curated

__all__ = ["Contract", "Finding", "CONTRACTS", "LOADERS_OWN", "as_written", "shown"]

#: The top-level names the loader writes itself (checked by construction, not by the contracts).
LOADERS_OWN = frozenset({"_id", "_ingest", "_source", "source"})
#: The largest integer a double holds exactly (an export's bound too).
_EXACT = 2**53
#: The Python type a stored value of each kind has (``float64`` takes integers within ±2^53 too).
_TYPES = {"string": str, "float64": float, "int64": int, "bool": bool, "list<string>": list, "date": datetime,
          "object": dict, "list": list}
#: The types of the items of a ``list<string>``.
_STRINGS = frozenset({str, type(None)})
#: What each kind is, in a reason.
_WANTED = {"string": "a string", "float64": "a number", "int64": "an integer", "bool": "a boolean",
           "list<string>": "a list of strings", "date": "a date", "object": "an object", "list": "a list"}
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_NUMBER_TEXT_MAX = 64  # a longer "number" is not read (and not worth reading)
_ENUM_KEYS = (frozenset({"@module", "@class", "value"}), frozenset({"@module", "@class", "@version", "value"}))
#: A current name the loader copies from a legacy one as it is (``formula_pretty`` from
#: ``pretty_formula``): named in a message, since the file holds the legacy name.
_COPIED_FROM = {current: legacy for legacy, current, _, how in LEGACY_NAMES if "as it is" in how}
#: Width of a value in a message (JSON, cut).
SHOWN_WIDTH = 40


class Finding(NamedTuple):
    """A value that breaks its contract: where it is (``holder[key]``), its path, what it should be."""

    holder: Any  # the object (or list) holding it
    key: Any  # its name in ``holder`` (an index in a list)
    path: str  # its dotted path in the document
    kind: str  # its declared kind, or "object" / "list" on the way to one
    value: Any

    def said(self) -> str:
        """``path value is <its type>, not <its kind>``."""
        return f"{self.path} {shown(self.value)} is {_what(self.value)}, not {_WANTED[self.kind]}"


class _Holder:
    """The declared fields held by one object of a document (or one list: its declared indexes),
    compiled for speed: the leaves grouped by the one Python type each accepts, so that a value of
    the declared type costs a lookup and a type test (a float64 also takes an integer within ±2^53,
    a list<string> a list of strings), and the objects (or lists) on the way to deeper fields."""

    indexed: bool  # its keys are a list's indexes (else an object's names)

    def __init__(self, paths: list[tuple[str, str]], prefix: str = ""):
        firsts: dict[str, list[tuple[str, str]]] = {}
        for path, kind in paths:
            head, _, rest = path.partition(".")
            firsts.setdefault(head, []).append((rest, kind))
        self.kinds: dict = {}  # key -> (path, kind), for the slow path
        exact: dict[type, list] = {}
        floats: list = []
        lists: list = []
        below: list[tuple[Any, type, _Holder]] = []
        for head, rests in firsts.items():
            key: Any = int(head) if head.isdigit() else head
            path = f"{prefix}.{head}" if prefix else head
            if len(rests) == 1 and rests[0][0] == "":
                kind = rests[0][1]
                self.kinds[key] = (path, kind)
                (floats if kind == "float64" else lists if kind == "list<string>" else
                 exact.setdefault(_TYPES[kind], [])).append(key)
                continue
            inner = _Holder(rests, path)
            self.kinds[key] = (path, "list" if inner.indexed else "object")
            below.append((key, list if inner.indexed else dict, inner))
        indexed = {type(key) is int for key in self.kinds}
        if len(indexed) != 1:
            raise ValueError(f"{prefix}: both a list (an index below it) and an object")
        self.indexed = indexed == {True}
        self.exact = tuple((typ, tuple(keys)) for typ, keys in exact.items())
        self.floats, self.lists, self.below = tuple(floats), tuple(lists), tuple(below)

    def walk(self, holder, found: list) -> None:
        """Append to ``found`` what breaks these fields in ``holder``."""
        if self.indexed:
            def get(key, size=len(holder)):  # noqa: B008 - the size read once, as the walk starts
                return holder[key] if key < size else None
        else:
            get = holder.get
        for typ, keys in self.exact:
            for key in keys:
                value = get(key)
                if value is not None and type(value) is not typ:
                    self._found(holder, key, value, found)
        for key in self.floats:
            value = get(key)
            if value is not None and type(value) is not float and not (
                    type(value) is int and -_EXACT <= value <= _EXACT):
                self._found(holder, key, value, found)
        for key in self.lists:
            value = get(key)
            if value is not None and (type(value) is not list or not _STRINGS.issuperset(map(type, value))):
                self._found(holder, key, value, found)
        for key, typ, inner in self.below:
            value = get(key)
            if value is None:
                continue
            if type(value) is typ:
                inner.walk(value, found)
            else:
                self._found(holder, key, value, found)

    def _found(self, holder, key, value, found: list) -> None:
        path, kind = self.kinds[key]
        found.append(Finding(holder, key, path, kind, value))


class Contract:
    """One collection's declared fields, compiled to check documents fast."""

    def __init__(self, collection: curated.Curated):
        self.name = collection.name
        paths = [(f.path, f.kind) for f in collection.fields if f.path.partition(".")[0] not in LOADERS_OWN]
        self.fields = _Holder(paths)
        #: Where each path (and each holder on the way) is declared: findings come in that order.
        self.order: dict[str, int] = {}
        for index, (path, _) in enumerate(paths):
            parts = path.split(".")
            for end in range(1, len(parts) + 1):
                self.order.setdefault(".".join(parts[:end]), index)

    def findings(self, doc: dict) -> list[Finding]:
        """Every value of ``doc`` that breaks the contract (none, almost always)."""
        found: list[Finding] = []
        self.fields.walk(doc, found)
        if len(found) > 1:
            found.sort(key=lambda f: self.order[f.path])
        return found

    def enforce(self, doc: dict) -> list[tuple[bool, str]]:
        """Make the record ``doc`` (:func:`ingest.documents.record_document`'s) keep the contract, in
        place: each value read losslessly is stored so, each other one set aside (see the module's
        docstring).  ``(set aside, "path value reason")`` per value, in the document's order."""
        found = self.findings(doc)
        if not found:
            return []
        meta = doc.setdefault("_ingest", {})
        restore, aside, said = [], [], []
        for f in found:
            read, value, reason = _reading(f.value, f.kind)
            if as_written(meta, f.path):
                restore.append({"path": _steps(f.path), "value": f.value})
            if read:
                f.holder[f.key] = value
            else:
                f.holder[f.key] = None
                aside.append({"path": f.path, "value": f.value, "reason": reason})
            said.append((not read, f"{_named(f.path, meta)} {shown(f.value)} {reason}"))
        if restore:  # first: a date restored inside a value set aside goes into it afterwards
            meta["restore"] = restore + meta.get("restore", [])
        if aside:
            meta["set_aside"] = aside
        return said


def as_written(meta: dict, path: str) -> bool:
    """Whether the record holds the field at ``path`` as written (not a name the loader added
    or put in the place of a legacy one: those go back with their own metadata)."""
    top = path.partition(".")[0]
    return "added" in meta and top not in meta["added"] and top not in meta.get("displaced", ())


def _steps(path: str) -> list:
    return [int(part) if part.isdigit() else part for part in path.split(".")]


def _named(path: str, meta: dict) -> str:
    """The path, with the legacy name its value was copied from when the loader added it."""
    legacy = _COPIED_FROM.get(path)
    return f"{path} (from {legacy})" if legacy and path in meta.get("added", ()) else path


def shown(value: Any, width: int = SHOWN_WIDTH) -> str:
    """A value as a message shows it: JSON on one line (a date or an id as text), cut to ``width``."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _what(value: Any) -> str:
    """The type of a stored value, with its article, as a reason names it."""
    t = type(value)
    if t is bool:
        return "a boolean"
    if t is int:
        return "an integer"
    if t is Decimal128:
        return "an integer beyond 64 bits"
    return {float: "a number", str: "a string", dict: "an object", list: "a list", datetime: "a date",
            ObjectId: "an object id"}.get(t, f"a value of type {t.__name__}")


def _reading(value: Any, kind: str) -> tuple[bool, Any, str]:
    """(read losslessly, the value to store, the reason) of a value that breaks ``kind``."""
    t = type(value)
    if kind in ("float64", "int64") and t is str:
        number = _number(value)
        if number is not None and _fits(number, kind):
            number = int(number) if kind == "int64" else number
            return True, number, f"is a string; stored as the number {number!r}"
    if kind == "int64" and t is float and _fits(value, kind):
        return True, int(value), f"is a double; stored as the integer {int(value)}"
    if kind == "string" and t is dict and frozenset(value) in _ENUM_KEYS and type(value["value"]) is str:
        return True, value["value"], f"is a serialised enumeration; stored as its value {shown(value['value'])}"
    if kind == "float64" and t is int:
        return False, None, "is an integer beyond ±2^53, not exact as a double"
    if kind == "list<string>" and t is list:
        stray = next(item for item in value if type(item) is not str and item is not None)
        return False, None, f"is a list holding {_what(stray)}, not a list of strings"
    return False, None, f"is {_what(value)}, not {_WANTED[kind]}"


def _number(text: str) -> int | float | None:
    """The number a string written as a JSON number stands for, or None."""
    if len(text) > _NUMBER_TEXT_MAX or not _JSON_NUMBER.match(text):
        return None
    return json.loads(text)


def _fits(number: int | float, kind: str) -> bool:
    """Whether ``number`` is exactly a value of ``kind`` (float64: finite, an integer within ±2^53;
    int64: integral, within its range)."""
    if kind == "float64":
        return -_EXACT <= number <= _EXACT if type(number) is int else number - number == 0  # not inf or NaN
    if type(number) is float and not (number - number == 0 and number == int(number)):
        return False
    return -(2**63) <= number < 2**63


#: Every data collection's contract, by collection name.
CONTRACTS: dict[str, Contract] = {name: Contract(c) for name, c in curated.DATA.items()}
