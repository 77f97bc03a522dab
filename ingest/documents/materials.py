"""The stored form of Materials-Project-style records (``materials`` and ``tasks``).

:func:`record_document` turns a :class:`~ingest.parsers.materials.Record` (the parser's
neutral record: kind, type, natural key and the JSON object as read) into the document
the loader writes: ``_id`` is the natural key, ``_source`` names the file, its sha256 and
the record's line.  :func:`to_document` makes the same document without ``_id`` and
``_source`` from a raw JSON object; :func:`from_document` gives the original back.

The canonical-name aliases are made for this form (``aliases.py``), not in the parser: they exist so that
MongoDB queries by the current field names find old records too, and they are only
reversible through the ``_ingest`` metadata of this form.

The stored document (``to_document``) keeps every original field and adds, at
the top level and only where the original lacks the name, the canonical fields
of the current MP summary schema: ``material_id`` (materials only),
``formula_pretty`` (from ``pretty_formula``), ``composition`` (from
``unit_cell_formula``), ``energy_above_hull`` (from
``e_above_hull``), ``formation_energy_per_atom`` (from ``e_form_per_atom``),
``energy_per_atom`` (materials; from ``final_energy_per_atom``), ``formula_anonymous``
(materials; from ``anonymous_formula``, a string or the legacy ``{"A": 1.0, "B": 2.0}``
object, written as pymatgen does: amounts reduced, ascending, ``AB2``),
``band_gap`` / ``is_gap_direct`` (from the legacy ``band_gap.search_gap``),
``symmetry`` (from the legacy ``spacegroup``), ``elements`` (sorted; from
``composition``, the formula or the structure's sites), ``nelements``,
``chemsys``, and for entries ``nsites`` / ``volume`` from their structure.
``formula_pretty`` is *not* derived for entries: pymatgen's reduced-formula
ordering (electronegativity, polyanions, special formulas) is not reimplemented.
Every added name is listed in ``_ingest.added``.  The legacy ``band_gap`` object
is the one collision: the number takes its place and the original object is
kept in ``_ingest.displaced.band_gap``.

Other changes, all undone by ``from_document``:

* Mongo extended-JSON ``{"$oid": hex}`` becomes an ``ObjectId`` and
  ``{"$date": ms | iso-string | {"$numberLong": ms}}`` a UTC ``datetime``
  (non-millisecond forms are kept verbatim in ``_ingest.restore``).  Other ``$``
  wrappers and pymatgen/monty ``{"@module": ...}`` dicts stay as they are (but see
  the dates below).
* **Dates are BSON dates.**  A field named in :data:`DATE_FIELDS` (``last_updated``,
  ``completed_at``, ``created_at``, ``last_modified``, ``build_date``, ``_bt``), at any
  depth and in lists of objects (``calcs_reversed.N.completed_at``,
  ``origins.N.last_updated``, ``builder_meta.build_date``, ``data.last_updated``), that
  holds an ISO 8601 string or a monty-serialised datetime (``{"@module": "datetime",
  "@class": "datetime", "string": ...}``, as pymatgen entries' ``data.last_updated``)
  becomes a UTC ``datetime`` (read by :func:`ingest.dates.parse_iso`: with ``T`` or a
  space, with or without fractional seconds, ``Z``/offset or naive; a naive time is UTC,
  as the Materials Project writes it; an offset is converted to UTC; truncated to the
  millisecond).  The string (or the monty object) itself goes to ``_ingest.restore``,
  so the original comes back exactly.  A value there that cannot be read as a date (and
  a ``{"$date": ...}`` anywhere that cannot) is kept as found and reported through the
  ``warn`` callback of :func:`to_document` / :func:`record_document` as one line
  ``path: value reason`` (``completed_at: "yesterday" is not an ISO 8601 date or
  date-time``); ``null`` is kept silently.
* Keys MongoDB cannot store or query (``$`` first, containing ``.`` or NUL) are
  percent-escaped (``%24``, ``%2E``, ``%00``; a literal ``%`` becomes ``%25``),
  as are the top-level names the pipeline uses itself (``_ingest``,
  ``_source``) (``%5F``).
* Integers beyond int64 become ``Decimal128`` (exact up to 34 digits) or
  ``{"%int": "<digits>"}`` beyond that.
* The source ``_id`` (whatever its type, even ``null``) moves to
  ``_ingest.source_id``: the document of :func:`to_document` has no ``_id``;
  :func:`record_document` sets it to ``Record.key``.

``from_document`` drops ``_id``, ``_source`` and anything else the loader put
under ``_ingest``, and returns the original record, key order included.

A record nested more than 100 levels deep (MongoDB's limit) or holding a string
that is not valid Unicode (a lone surrogate) cannot be stored: :func:`to_document`
raises a ParseError, :func:`record_document` one naming the file and the record
number.  The loader builds every document of a file in its checking pass, so such a
record sets the file aside before anything of it is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from bson.decimal128 import Decimal128
from bson.objectid import ObjectId

from ingest.dates import parse_iso
from ingest.documents.aliases import ELEMENTS, LEGACY_NAMES, aliases, legacy_names_markdown
from ingest.errors import InputError, ParseError
from ingest.parsers.materials import Record, classify

# ELEMENTS, LEGACY_NAMES and legacy_names_markdown are aliases.py's, named here too (the
# stored form's vocabulary, imported from here by the analyses and the tests)
__all__ = ["ELEMENTS", "DATE_FIELDS", "LEGACY_NAMES", "to_document", "from_document", "record_document",
           "legacy_names_markdown"]

#: Field names that hold a date wherever they occur (found in the real Materials Project documents
#: and in emmet's schemas: ``builder_meta.build_date``, ``origins[].last_updated``).
DATE_FIELDS = frozenset({"last_updated", "completed_at", "created_at", "last_modified", "build_date", "_bt"})

ENCODING_VERSION = 1
MAX_DEPTH = 100  # MongoDB refuses documents nested deeper than this


_RESERVED_TOP = {"_ingest", "_source"}  # top-level names the pipeline writes itself
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_OID_RE = re.compile(r"[0-9a-fA-F]{24}\Z")
_NEEDS_ESCAPE = re.compile(r"[%.\x00]|^\$")
_UNESCAPE = re.compile(r"%([0-9A-F]{2})")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BIGINT = "%int"  # marker key; an original "%int" is stored as "%25int"


# --------------------------------------------------------------------------- encoding
def _escape_key(key: str, top: bool) -> str:
    if top and key in _RESERVED_TOP:
        return "%5F" + key[1:]
    if not _NEEDS_ESCAPE.search(key):
        return key
    out = key.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")
    return "%24" + out[1:] if out.startswith("$") else out


def _unescape_key(key: str) -> str:
    if "%" not in key:
        return key
    return _UNESCAPE.sub(lambda m: chr(int(m.group(1), 16)), key)


def _check_str(s: str) -> None:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("a string is not valid Unicode (lone surrogate); BSON cannot hold it") from None


def _to_datetime_ms(ms: int) -> datetime | None:
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None


def _ms_of(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def _wrapper(d: dict) -> tuple[Any, bool] | None:
    """(BSON value, round-trips by default) for an extended-JSON wrapper, else None."""
    (name, inner), = d.items()
    if name == "$oid":
        if isinstance(inner, str) and _OID_RE.match(inner):
            return ObjectId(inner), inner == inner.lower()
        return None
    if name != "$date":
        return None
    if isinstance(inner, int) and not isinstance(inner, bool):
        dt = _to_datetime_ms(inner)
        return (dt, True) if dt is not None else None
    if isinstance(inner, dict) and len(inner) == 1 and isinstance(inner.get("$numberLong"), str):
        try:
            dt = _to_datetime_ms(int(inner["$numberLong"]))
        except ValueError:
            return None
        return (dt, False) if dt is not None else None
    if isinstance(inner, str):
        try:
            return parse_iso(inner), False
        except ValueError:  # not ISO 8601, or out of range once in UTC
            return None
    return None


_MONTY_DATETIME = ({"@module", "@class", "string"}, {"@module", "@class", "string", "@version"})


def _monty_datetime(d: dict) -> bool:
    """Whether ``d`` is a monty-serialised ``datetime`` (``{"@module": "datetime", "@class": "datetime", ...}``)."""
    return d.get("@class") == "datetime" and d.get("@module") == "datetime" and set(d) in _MONTY_DATETIME


def _date_wrapper(d: dict) -> bool:
    """Whether ``d`` is written as a date (``{"$date": ...}`` or a monty datetime), readable or not."""
    return (len(d) == 1 and "$date" in d) or _monty_datetime(d)


def _shown(value: Any, width: int = 80) -> str:
    """A value as a warning shows it: JSON, cut to ``width`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _CONTAINERS.get(type(value), type(value).__name__)


_CONTAINERS: dict[type, str] = {dict: "an object", list: "a list"}
_PLAIN = frozenset({float, bool, type(None)})  # stored as they are, no check needed
_KEY_CACHE: dict[str, str] = {}  # original key -> stored key (keys repeat a lot)


def _stored_key(key: str) -> str:
    stored = _KEY_CACHE.get(key)
    if stored is None:
        _check_str(key)
        stored = _escape_key(key, top=False)
        if len(_KEY_CACHE) < 100_000:
            _KEY_CACHE[key] = stored
    return stored


def _encode_int(value: int) -> Any:
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    if abs(value) < 10**34:
        return Decimal128(Decimal(value))  # exact: 34 significant digits
    return {_BIGINT: str(value)}


def _unwind(path: tuple | None) -> list:
    """A linked path ``(parent, step)`` as a list of steps from the root."""
    steps = []
    while path is not None:
        path, step = path
        steps.append(step)
    return steps[::-1]


class _Encoder:
    """Original JSON value -> stored value; collects the ``restore`` list on the way.

    Paths are linked tuples ``(parent_path, key_or_index)`` so that descending costs O(1).
    """

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self.restore: list[dict] = []
        self.warn = warn

    def enc(self, value: Any, path: tuple | None, depth: int, convert: bool = True) -> Any:
        t = type(value)
        if t is dict:
            return self._dict(value, path, depth, convert)
        if t is list:
            return self._list(value, path, depth, convert)
        return _scalar(value)

    def _warn(self, path: tuple | None, value: Any, reason: str) -> None:
        if self.warn is not None:
            where = ".".join(str(step) for step in _unwind(path))
            self.warn(f"{where}: {_shown(value)} {reason}")

    def date(self, value: Any, path: tuple, depth: int) -> Any:
        """The value of a field named in DATE_FIELDS: a UTC datetime where it holds a date (the string kept
        in ``restore``), else the value as found (and a warning, unless it is null)."""
        t = type(value)
        if t is str:
            try:
                when = parse_iso(value)
            except ValueError as exc:
                self._warn(path, value, str(exc))
                return _scalar(value)
            self.restore.append({"path": _unwind(path), "value": value})
            return when
        if value is None:
            return None
        if t is dict:
            if _monty_datetime(value):
                try:
                    when = parse_iso(value["string"])
                except ValueError as exc:
                    self._warn(path, value, f"is a datetime whose string {exc}")
                else:
                    self.restore.append({"path": _unwind(path), "value": self._dict(value, None, depth, convert=False)})
                    return when
            stored = self._dict(value, path, depth, True)
            if type(stored) is not datetime and not _date_wrapper(value):  # an unreadable wrapper warned already
                self._warn(path, value, "is an object, not a date")
            return stored
        self._warn(path, value, f"is {_kind_of(value)}, not a date")
        return self.enc(value, path, depth)

    def _list(self, value: list, path: tuple | None, depth: int, convert: bool) -> list:
        if depth >= MAX_DEPTH:
            raise ParseError(f"nested more than {MAX_DEPTH} levels deep; MongoDB cannot store it")
        if _PLAIN.issuperset(map(type, value)):
            return list(value)
        out: list = []
        append = out.append
        for i, v in enumerate(value):
            t = type(v)
            if t is float or t is bool or v is None:
                append(v)
            elif t is int:
                append(v if _INT64_MIN <= v <= _INT64_MAX else _encode_int(v))
            elif t is str:
                if not v.isascii():
                    _check_str(v)
                append(v)
            elif t is list:
                append(self._list(v, (path, i), depth + 1, convert))
            elif t is dict:
                append(self._dict(v, (path, i), depth + 1, convert))
            else:
                append(_scalar(v))
        return out

    def _dict(self, value: dict, path: tuple | None, depth: int, convert: bool) -> Any:
        if depth >= MAX_DEPTH:
            raise ParseError(f"nested more than {MAX_DEPTH} levels deep; MongoDB cannot store it")
        if convert and len(value) == 1:
            converted = _wrapper(value)
            if converted is not None:
                bson_value, default = converted
                if not default:
                    original = self._dict(value, None, depth, convert=False)
                    self.restore.append({"path": _unwind(path), "value": original})
                return bson_value
            if "$date" in value:
                self._warn(path, value, "is not a date this reads ($date: milliseconds, ISO 8601 or $numberLong)")
        out = {}
        cached = _KEY_CACHE.get
        for k, v in value.items():
            sk = cached(k) or _stored_key(k)
            if convert and k in DATE_FIELDS:
                out[sk] = self.date(v, (path, k), depth + 1)
                continue
            t = type(v)
            if t is float or t is bool or v is None:
                out[sk] = v
            elif t is str:
                if not v.isascii():
                    _check_str(v)
                out[sk] = v
            elif t is int:
                out[sk] = v if _INT64_MIN <= v <= _INT64_MAX else _encode_int(v)
            elif t is list:
                out[sk] = self._list(v, (path, k), depth + 1, convert)
            elif t is dict:
                out[sk] = self._dict(v, (path, k), depth + 1, convert)
            else:
                out[sk] = _scalar(v)
        return out


def _scalar(value: Any) -> Any:
    t = type(value)
    if t is str:
        _check_str(value)
        return value
    if t is int:
        return _encode_int(value)
    if t is float or t is bool or value is None:
        return value
    raise ParseError(f"unsupported value of type {t.__name__}")  # json never produces one


_SIMPLE = frozenset({float, str, bool, int, type(None)})  # come back from BSON as they went in


def _dec(value: Any) -> Any:
    """Stored value -> original JSON value (accepts what pymongo decodes: Int64, naive datetimes)."""
    t = type(value)
    if t is dict:
        if len(value) == 1 and _BIGINT in value:
            return int(value[_BIGINT])
        out = {}
        for k, v in value.items():
            if "%" in k:
                k = _unescape_key(k)
            tv = type(v)
            if tv is float or tv is str or tv is int or tv is bool or v is None:
                out[k] = v
            elif tv is list and _SIMPLE.issuperset(map(type, v)):
                out[k] = list(v)
            else:
                out[k] = _dec(v)
        return out
    if t is list:
        if _SIMPLE.issuperset(map(type, value)):
            return list(value)
        return [v if type(v) in _SIMPLE else _dec(v) for v in value]
    if t is str or t is float or t is bool or value is None:
        return value
    if isinstance(value, int):  # int, bson.int64.Int64
        return int(value)
    if isinstance(value, ObjectId):
        return {"$oid": str(value)}
    if isinstance(value, datetime):
        return {"$date": _ms_of(value)}
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return int(number) if number == number.to_integral_value() else float(number)
    return value


def to_document(raw: dict, warn: Callable[[str], None] | None = None) -> dict:
    """The document to store for ``raw`` (see the module docstring); raises :class:`ParseError`.

    ``warn`` (optional) is called with one line ``path: value reason`` per date value that cannot
    be read as a date (kept as found)."""
    return _to_document(raw, *classify(raw), warn=warn)


def _to_document(raw: dict, kind: str, doc_type: str, key: str, warn: Callable[[str], None] | None = None) -> dict:
    added, displaced = aliases(raw, kind, doc_type)
    encoder = _Encoder(warn)
    doc: dict[str, Any] = {}
    meta: dict[str, Any] = {"v": ENCODING_VERSION, "kind": kind, "type": doc_type, "key": key}
    for index, (name, value) in enumerate(raw.items()):
        if name == "_id":
            meta["source_id"] = encoder.enc(value, (None, "_id"), 1)
            meta["source_id_index"] = index
            continue
        stored_name = _escape_key(name, top=True)
        _check_str(name)
        if name in displaced:
            doc[stored_name] = encoder.enc(added[name], None, 1, convert=False)
            continue
        if name in DATE_FIELDS:
            doc[stored_name] = encoder.date(value, (None, name), 1)
            continue
        doc[stored_name] = encoder.enc(value, (None, name), 1)
    for name, value in added.items():
        if name not in displaced:
            doc[name] = encoder.enc(value, None, 1, convert=False)
    meta["added"] = [name for name in added if name not in displaced]
    if displaced:
        meta["displaced"] = {name: encoder.enc(value, None, 3, convert=False) for name, value in displaced.items()}
    if encoder.restore:
        meta["restore"] = encoder.restore
    doc["_ingest"] = meta
    return doc


def _set_path(obj: Any, path: list, value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return obj


def from_document(doc: dict) -> dict:
    """The original record of a document made by :func:`to_document` (read back from MongoDB or not)."""
    meta = doc.get("_ingest")
    if not isinstance(meta, dict) or "added" not in meta:
        raise InputError("not a document written by ingest.documents.materials (no _ingest)")
    added = set(meta.get("added", []))
    displaced = meta.get("displaced", {})
    original: dict[str, Any] = {}
    for name, value in doc.items():
        if name in ("_id", "_ingest", "_source") or name in added:
            continue
        if name in displaced:
            original[name] = _dec(displaced[name])
            continue
        original[_unescape_key(name)] = _dec(value)
    if "source_id" in meta:
        items = list(original.items())
        items.insert(int(meta.get("source_id_index", 0)), ("_id", _dec(meta["source_id"])))
        original = dict(items)
    for entry in meta.get("restore", []):
        original = _set_path(original, list(entry["path"]), _dec(entry["value"]))
    return original


def record_document(record: Record, *, sha256: str, path: str, warn: Callable[[str], None] | None = None) -> dict:
    """The document the loader writes for ``record``, keyed by its natural key.

    Raises a :class:`ParseError` naming ``path`` and the record if it cannot be stored.
    ``warn`` (optional) gets one line ``path: value reason`` per date value kept as found
    (the loader prefixes the file and line).
    """
    try:
        doc = _to_document(record.raw, record.kind, record.doc_type, record.key, warn=warn)
    except ParseError as exc:
        raise record.error(exc.reason, path) from None
    except RecursionError:
        raise record.error("record nested too deeply", path) from None
    doc["_id"] = record.key
    doc["_source"] = {"path": path, "sha256": sha256, "line": record.line}
    return doc
