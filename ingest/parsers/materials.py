"""Materials-Project-style JSON records: reading, classifying, and the stored form.

``read_records(handle, source)`` reads a JSON array, one JSON object (possibly
pretty-printed over many lines, or several concatenated), or JSON Lines (the
caller gunzips ``.gz``) and yields one :class:`Record` per good record and one
:class:`~ingest.errors.ParseError` per bad one, then carries on, so the caller
can report every bad record.  JSON Lines and arrays are streamed: memory is
bounded by the largest single record, not by the file.

Input layout (decided from the first bytes, after an optional UTF-8 BOM):

* only whitespace                -> one ``ParseError("empty file")``;
* ``[``                          -> a JSON array; ``line`` is the 1-based record
  (element) number, and the physical line is named in error reasons;
* ``{`` and one of the first five non-blank lines is a complete JSON object on its
  own -> JSON Lines; ``line`` is the 1-based physical line;
* ``{`` otherwise                -> one pretty-printed object or several
  concatenated ones; ``line`` is the record number;
* anything else                  -> JSON Lines, so every line is reported.

Classification (first rule that matches; ``key`` is always a non-empty ``str``,
an integer id is turned into its decimal string; a record without the id its
rule needs is a ParseError):

=========  ===============  ==================================================  =======================
kind       doc_type         rule                                                key
=========  ===============  ==================================================  =======================
task       vasp_task /      has ``calcs_reversed`` or ``orig_inputs``, or both  ``task_id``
           qchem_task       ``input`` and ``output`` objects (qchem when the
                            input holds ``initial_molecule`` or ``orig`` holds
                            a Q-Chem ``rem`` section)
material   entry            pymatgen ``Computed(Structure)Entry`` dict          ``"entry:" + entry_id``
                            (``@class``) or ``entry_id`` + ``energy`` +
                            ``composition``
material   xas              has ``spectrum_id`` (XAS spectrum documents)         ``"xas:" + spectrum_id``
material   phonon           has ``ph_bs`` or ``ph_dos``                          ``"phonon:" + material_id``
material   summary          has ``material_id`` (summary / API records)          ``material_id``
material   legacy_material  has ``task_id`` and none of the task markers        ``task_id``
                            (legacy ``materials`` collection, where the
                            material id was called task_id; emmet magnetism
                            docs)
=========  ===============  ==================================================  =======================

Entries, spectra and phonon documents get a typed key because they share their
material's mp-id with the material's own document (the real data has summary
``mp-20`` and entry ``mp-20``, and GGA / GGA+U entries of one material): keyed by
the bare mp-id one would overwrite the other in the ``materials`` collection.
Their ``material_id`` alias still names the material.

The stored document (``to_document``) keeps every original field and adds, at
the top level and only where the original lacks the name, the canonical fields
of the current MP summary schema: ``material_id`` (materials only),
``formula_pretty`` (from ``pretty_formula``), ``composition`` (from
``unit_cell_formula``), ``energy_above_hull`` (from
``e_above_hull``), ``formation_energy_per_atom`` (from ``e_form_per_atom``),
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
  (non-millisecond forms are kept verbatim in ``_ingest.restore``).  Other
  ``$`` wrappers and pymatgen/monty ``{"@module": ...}`` dicts stay as they are.
* Keys MongoDB cannot store or query (``$`` first, containing ``.`` or NUL) are
  percent-escaped (``%24``, ``%2E``, ``%00``; a literal ``%`` becomes ``%25``),
  as are the top-level names the pipeline uses itself (``_ingest``,
  ``_source``) (``%5F``).
* Integers beyond int64 become ``Decimal128`` (exact up to 34 digits) or
  ``{"%int": "<digits>"}`` beyond that.
* The source ``_id`` (whatever its type, even ``null``) moves to
  ``_ingest.source_id``: the stored document has no ``_id``, the loader sets it
  (``ingest.documents.record_document`` uses ``Record.key``).

``from_document`` drops ``_id``, ``_source`` and anything else the loader put
under ``_ingest``, and returns the original record, key order included.
A record nested more than 100 levels deep (MongoDB's limit) or holding a string
that is not valid Unicode (a lone surrogate) is a ParseError.
"""

from __future__ import annotations

import io
import json
import math
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, BinaryIO, Iterator

from bson.decimal128 import Decimal128
from bson.objectid import ObjectId

from ingest.errors import InputError, ParseError

__all__ = [
    "Record",
    "classify",
    "to_document",
    "from_document",
    "read_records",
    "ELEMENTS",
]

ENCODING_VERSION = 1
MAX_DEPTH = 100  # MongoDB refuses documents nested deeper than this
CHUNK = 1 << 16
SNIFF_LINES = 5

# fmt: off
ELEMENTS = frozenset("""
H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr
Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm
Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No
Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og
""".split())
# fmt: on

_ENTRY_CLASSES = {"ComputedStructureEntry", "ComputedEntry", "GibbsComputedStructureEntry"}
_RESERVED_TOP = {"_ingest", "_source"}  # top-level names the pipeline writes itself
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_OID_RE = re.compile(r"[0-9a-fA-F]{24}\Z")
_NEEDS_ESCAPE = re.compile(r"[%.\x00]|^\$")
_UNESCAPE = re.compile(r"%([0-9A-F]{2})")
_SYMBOL_RE = re.compile(r"[A-Z][a-z]?")
_LEAD_SYMBOL_RE = re.compile(r"\s*([A-Z][a-z]?)")
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]")  # undecodable bytes under surrogateescape
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BIGINT = "%int"  # marker key; an original "%int" is stored as "%25int"


@dataclass(frozen=True)
class Record:
    """One good record: where it was, what it is, its natural key and its stored document."""

    line: int  # 1-based line (JSON Lines) or record number (array / object stream)
    kind: str  # "material" | "task"
    key: str  # natural key, unique within ``kind`` (see the module docstring)
    doc: dict  # the document to store (no ``_id``)
    doc_type: str = ""  # summary | legacy_material | entry | xas | phonon | vasp_task | qchem_task


# --------------------------------------------------------------------------- classification
class _Unclassifiable(Exception):
    pass


def _key_value(raw: dict, field: str, what: str) -> str:
    if field not in raw:
        raise _Unclassifiable(f"{what} without {field}")
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _Unclassifiable(f"{what} whose {field} is {_type_name(value)}, not a string")
    key = str(value)
    if not key.strip():
        raise _Unclassifiable(f"{what} with an empty {field}")
    return key


def _type_name(value: Any) -> str:
    """The JSON type of ``value`` with its article, for messages."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _is_task(raw: dict) -> bool:
    return (
        "calcs_reversed" in raw
        or "orig_inputs" in raw
        or (isinstance(raw.get("input"), dict) and isinstance(raw.get("output"), dict))
    )


def _task_code(raw: dict) -> str:
    inp, orig = raw.get("input"), raw.get("orig")
    if (isinstance(inp, dict) and "initial_molecule" in inp) or (isinstance(orig, dict) and "rem" in orig):
        return "qchem_task"
    return "vasp_task"


def _is_entry(raw: dict) -> bool:
    cls = raw.get("@class")
    return (isinstance(cls, str) and cls in _ENTRY_CLASSES) or (
        "entry_id" in raw and "energy" in raw and "composition" in raw
    )


def _classify(raw: dict) -> tuple[str, str, str]:
    """(kind, doc_type, key) or raise _Unclassifiable with the reason."""
    if _is_task(raw):
        return "task", _task_code(raw), _key_value(raw, "task_id", "a task document (calcs_reversed/input+output)")
    if _is_entry(raw):
        return "material", "entry", "entry:" + _key_value(raw, "entry_id", "a ComputedStructureEntry")
    if "spectrum_id" in raw:
        return "material", "xas", "xas:" + _key_value(raw, "spectrum_id", "a spectrum document")
    if "ph_bs" in raw or "ph_dos" in raw:
        return "material", "phonon", "phonon:" + _key_value(raw, "material_id", "a phonon document")
    if "material_id" in raw:
        return "material", "summary", _key_value(raw, "material_id", "a material document")
    if "task_id" in raw:
        return "material", "legacy_material", _key_value(raw, "task_id", "a legacy material document")
    raise _Unclassifiable(
        "cannot classify: no task fields (calcs_reversed, orig_inputs, input+output) and no "
        "natural key (material_id, task_id, entry_id, spectrum_id); keys: " + _key_list(raw)
    )


def _key_list(raw: dict, limit: int = 8) -> str:
    names = list(raw)
    shown = ", ".join(repr(k)[:40] for k in names[:limit])
    return (shown + f", ... ({len(names)} keys)") if len(names) > limit else (shown or "(none)")


def classify(raw: dict) -> tuple[str, str, str]:
    """``(kind, doc_type, key)`` of a raw record; raises :class:`ParseError` if it has no natural key."""
    if not isinstance(raw, dict):
        raise ParseError(f"a record must be a JSON object, not {_type_name(raw)}")
    try:
        return _classify(raw)
    except _Unclassifiable as exc:
        raise ParseError(str(exc)) from None


# --------------------------------------------------------------------------- aliases
def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _elements_from(raw: dict) -> list[str] | None:
    comp = raw.get("composition")
    if not isinstance(comp, dict):
        comp = raw.get("unit_cell_formula")
    if isinstance(comp, dict) and comp:
        found = set()
        for species, amount in comp.items():
            m = _LEAD_SYMBOL_RE.match(species)
            if not m or m.group(1) not in ELEMENTS or not _number(amount):
                return None
            if amount > 0:
                found.add(m.group(1))
        return sorted(found) or None
    for name in ("formula_pretty", "pretty_formula"):
        formula = raw.get(name)
        if isinstance(formula, str) and formula:
            symbols = _SYMBOL_RE.findall(formula)
            if symbols and all(s in ELEMENTS for s in symbols) and re.fullmatch(r"[A-Za-z0-9.()\[\]]+", formula):
                return sorted(set(symbols))
            return None
    structure = raw.get("structure")
    if isinstance(structure, dict) and isinstance(structure.get("sites"), list) and structure["sites"]:
        found = set()
        for site in structure["sites"]:
            species = site.get("species") if isinstance(site, dict) else None
            if not isinstance(species, list) or not species:
                return None
            for sp in species:
                element = sp.get("element") if isinstance(sp, dict) else None
                m = _LEAD_SYMBOL_RE.match(element) if isinstance(element, str) else None
                if not m or m.group(1) not in ELEMENTS:
                    return None
                found.add(m.group(1))
        return sorted(found)
    return None


def _legacy_band_gap(value: Any) -> tuple[float, Any] | None:
    """(gap, is_direct or None) from the legacy ``band_gap`` object."""
    if not isinstance(value, dict):
        return None
    search = value.get("search_gap")
    if isinstance(search, dict) and _number(search.get("band_gap")):
        return search["band_gap"], search.get("is_direct")
    if _number(value.get("band_gap")):
        return value["band_gap"], value.get("is_direct")
    return None


def _aliases(raw: dict, kind: str, doc_type: str) -> tuple[dict, dict]:
    """(added fields, displaced originals), both keyed by top-level name."""
    added: dict[str, Any] = {}
    displaced: dict[str, Any] = {}

    def add(name: str, value: Any) -> None:
        if name not in raw and name not in added:
            added[name] = value

    if kind == "material":
        mid = None
        if doc_type == "entry":
            data = raw.get("data")
            if isinstance(data, dict) and isinstance(data.get("material_id"), str):
                mid = data["material_id"]
            elif isinstance(raw.get("entry_id"), str):
                mid = re.sub(r"-(GGA\+U|GGA|r2SCAN|R2SCAN|SCAN|PBEsol)$", "", raw["entry_id"])
        elif doc_type in ("legacy_material", "xas"):
            tid = raw.get("task_id")
            mid = str(tid) if isinstance(tid, (str, int)) and not isinstance(tid, bool) else None
        if mid:
            add("material_id", mid)

    if isinstance(raw.get("pretty_formula"), str):
        add("formula_pretty", raw["pretty_formula"])
    if isinstance(raw.get("unit_cell_formula"), dict):
        add("composition", raw["unit_cell_formula"])
    if _number(raw.get("e_above_hull")):
        add("energy_above_hull", raw["e_above_hull"])
    if _number(raw.get("e_form_per_atom")):
        add("formation_energy_per_atom", raw["e_form_per_atom"])

    if kind == "material":
        legacy_gap = _legacy_band_gap(raw.get("band_gap"))
        if legacy_gap is not None:
            displaced["band_gap"] = raw["band_gap"]
            added["band_gap"] = legacy_gap[0]
            if isinstance(legacy_gap[1], bool):
                add("is_gap_direct", legacy_gap[1])
        spacegroup = raw.get("spacegroup")
        if isinstance(spacegroup, dict):
            sym = {k: spacegroup[k] for k in ("crystal_system", "symbol", "number", "point_group") if k in spacegroup}
            if sym:
                add("symmetry", sym)
        if doc_type == "entry":
            structure = raw.get("structure")
            if isinstance(structure, dict):
                if isinstance(structure.get("sites"), list):
                    add("nsites", len(structure["sites"]))
                lattice = structure.get("lattice")
                if isinstance(lattice, dict) and _number(lattice.get("volume")):
                    add("volume", lattice["volume"])

    if "elements" in raw:  # the original's own list, if it is one; never second-guessed
        elements = raw["elements"]
        if not (isinstance(elements, list) and elements and all(isinstance(e, str) for e in elements)):
            elements = None
    else:
        elements = _elements_from(raw)
        if elements:
            add("elements", elements)
    if elements:
        add("nelements", len(set(elements)))
        add("chemsys", "-".join(sorted(set(elements))))
    return added, displaced


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
        dt = dt.replace(tzinfo=timezone.utc)
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
            dt = datetime.fromisoformat(inner)
            dt = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
        except (ValueError, OverflowError):  # not ISO 8601, or out of range once in UTC
            return None
        return dt.replace(microsecond=dt.microsecond // 1000 * 1000), False
    return None


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

    def __init__(self) -> None:
        self.restore: list[dict] = []

    def enc(self, value: Any, path: tuple | None, depth: int, convert: bool = True) -> Any:
        t = type(value)
        if t is dict:
            return self._dict(value, path, depth, convert)
        if t is list:
            return self._list(value, path, depth, convert)
        return _scalar(value)

    def _list(self, value: list, path: tuple | None, depth: int, convert: bool) -> list:
        if depth >= MAX_DEPTH:
            raise ParseError(f"nested more than {MAX_DEPTH} levels deep; MongoDB cannot store it")
        if _PLAIN.issuperset(map(type, value)):
            return list(value)
        out = []
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
        out = {}
        cached = _KEY_CACHE.get
        for k, v in value.items():
            sk = cached(k) or _stored_key(k)
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


def to_document(raw: dict) -> dict:
    """The document to store for ``raw`` (see the module docstring); raises :class:`ParseError`."""
    return _to_document(raw, *classify(raw))


def _to_document(raw: dict, kind: str, doc_type: str, key: str) -> dict:
    added, displaced = _aliases(raw, kind, doc_type)
    encoder = _Encoder()
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
        raise InputError("not a document written by ingest.parsers.materials.to_document (no _ingest)")
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


# --------------------------------------------------------------------------- reading
def _record(raw: Any, number: int, source: str, where: str = "") -> Record | ParseError:
    try:
        if not isinstance(raw, dict):
            raise ParseError(f"a record must be a JSON object, not {_type_name(raw)}")
        kind, doc_type, key = classify(raw)
        doc = _to_document(raw, kind, doc_type, key)
    except ParseError as exc:
        return ParseError(exc.reason + where, source=source, line=number)
    except RecursionError:
        return ParseError("record nested too deeply" + where, source=source, line=number)
    return Record(line=number, kind=kind, key=key, doc=doc, doc_type=doc_type)


def _loads(text: str) -> Any:
    """json.loads, with every failure as a ParseError."""
    bad = _ESCAPED_BYTES.search(text)
    if bad:
        raise ParseError("not valid UTF-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg} at column {exc.colno}" + (
            f" of line {exc.lineno} of the record" if exc.lineno > 1 else "")) from None
    except RecursionError:
        raise ParseError("invalid JSON: nested too deeply") from None


class _Prefixed(io.RawIOBase):
    """Bytes already read from ``handle``, then the rest of ``handle``."""

    def __init__(self, prefix: bytes, handle: BinaryIO):
        self._prefix = prefix
        self._handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._handle.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n


def _read_lines(lines, source: str, first_line: int = 1) -> Iterator[Record | ParseError]:
    for number, raw_line in enumerate(lines, start=first_line):
        text = raw_line.strip()
        if not text:
            continue
        try:
            text = text.decode("utf-8")
            value = _loads(text)
        except UnicodeDecodeError as exc:
            yield ParseError(f"not valid UTF-8 (byte {exc.start + 1})", source=source, line=number)
            continue
        except ParseError as exc:
            yield ParseError(exc.reason, source=source, line=number)
            continue
        yield _record(value, number, source)


def _scan_values(text: io.TextIOBase, source: str, array: bool) -> Iterator[tuple[int, int, str] | ParseError]:
    """Split a JSON array (``array``) or a stream of top-level objects into element texts.

    Yields ``(record_number, physical_line, text)`` per element, or a ParseError for what
    cannot be split (end of file inside a record, data after the array).  Brackets are
    counted outside strings only; only the current element is kept in memory.
    """
    sig = re.compile(r'[\[\]{},"]')
    in_string = re.compile(r'["\\]')
    buf = ""
    lines_before = 0  # newlines in text already dropped from buf
    eof = False

    def refill(keep_from: int) -> int:
        """Drop buf[:keep_from], append a chunk; returns how much was dropped (0 at the end)."""
        nonlocal buf, lines_before, eof
        chunk = text.read(CHUNK)
        if not chunk:
            eof = True
            return 0
        lines_before += buf.count("\n", 0, keep_from)
        buf = buf[keep_from:] + chunk
        return keep_from

    def line_of(index: int) -> int:
        return lines_before + buf.count("\n", 0, index) + 1

    def first_line_of(begin: int, end: int) -> int:
        piece = buf[begin:end]
        return line_of(begin + len(piece) - len(piece.lstrip()))

    pos = 0
    if array:  # just after the opening bracket (only whitespace precedes it)
        while "[" not in buf and not eof:
            refill(len(buf))
        pos = buf.index("[") + 1
    start, depth, quoted, number, closed = pos, (1 if array else 0), False, 0, False
    while not closed:
        if quoted:
            m = in_string.search(buf, pos)
            if m is not None and m.group() == '"':
                quoted, pos = False, m.end()
                continue
            if m is not None and m.end() < len(buf):  # a backslash and the character it escapes
                pos = m.end() + 1
                continue
            pos = m.start() if m is not None else len(buf)
        else:
            m = sig.search(buf, pos)
            if m is not None:
                ch, at = m.group(), m.start()
                pos = m.end()
                if ch == '"':
                    quoted = True
                elif ch in "[{":
                    depth += 1
                elif array and depth == 1:
                    if ch in ",]":
                        if buf[start:at].strip():
                            number += 1
                            yield number, first_line_of(start, at), buf[start:at]
                        elif ch == "," or number > 0:
                            number += 1
                            what = "empty array element" if ch == "," else "trailing comma before ']'"
                            yield ParseError(f"{what} (line {line_of(at)})", source=source, line=number)
                        start = pos
                        closed = ch == "]"
                    # a stray '}' at array level stays in its element, for json.loads to report
                elif ch != ",":
                    depth = max(depth - 1, 0)
                    if not array and depth == 0:
                        number += 1
                        yield number, first_line_of(start, pos), buf[start:pos]
                        start = pos
                continue
            pos = len(buf)
        if eof:
            break
        dropped = refill(start)
        pos, start = pos - dropped, start - dropped
    if closed:  # only whitespace may follow the array
        while not buf[pos:].strip() and not eof:
            dropped = refill(pos)
            pos -= dropped
        if buf[pos:].strip():
            yield ParseError(f"data after the closing ']' (line {first_line_of(pos, len(buf))})",
                             source=source, line=number + 1)
        return
    if array:
        yield ParseError(f"unexpected end of file inside the array, in record {number + 1} "
                         f"(starting line {first_line_of(start, len(buf))})", source=source, line=number + 1)
    elif buf[start:].strip():
        reason = "unexpected end of file inside a record" if (depth or quoted) else "data that is not a JSON object"
        yield ParseError(f"{reason} (line {first_line_of(start, len(buf))})", source=source, line=number + 1)


def _balanced(line: bytes) -> bool:
    """True if ``line`` closes every bracket it opens (strings skipped)."""
    depth, quoted, escaped = 0, False, False
    for byte in line:
        if quoted:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                quoted = False
        elif byte == 0x22:
            quoted = True
        elif byte in b"[{":
            depth += 1
        elif byte in b"]}":
            depth -= 1
    return depth <= 0 and not quoted


def _is_object_line(text: bytes) -> bool:
    if not (text.startswith(b"{") and text.endswith(b"}")):
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and bool(value)


def read_records(handle: BinaryIO, source: str) -> Iterator[Record | ParseError]:
    """Every record of ``handle`` as a :class:`Record`, every bad one as a ParseError (yielded, not raised).

    Errors of the handle itself propagate (``OSError``, ``EOFError``), except ``zlib.error``
    from a corrupt gzip stream, which becomes an :class:`~ingest.errors.InputError`.
    """
    try:
        yield from _read_records(handle, source)
    except zlib.error as exc:
        raise InputError(f"{source}: cannot read: corrupt compressed data ({exc})") from exc


def _read_records(handle: BinaryIO, source: str) -> Iterator[Record | ParseError]:
    head = b""
    while True:  # read until the first significant byte (or the end)
        chunk = handle.read(CHUNK)
        head += chunk
        if head.startswith(b"\xef\xbb\xbf"):
            significant = head[3:].lstrip()
        else:
            significant = head.lstrip()
        if significant or not chunk:
            break
    if not significant:
        yield ParseError("empty file", source=source)
        return
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    stream = io.BufferedReader(_Prefixed(head, handle), buffer_size=CHUNK)
    first = significant[:1]

    if first == b"{":
        # JSON Lines if the first line is one complete object, or if it is at least
        # bracket-balanced (a bad record) and one of the next lines is a complete object.
        # The first line of a pretty-printed object always leaves a bracket open.
        peeked: list[bytes] = []
        jsonl = False
        first_balanced = None
        while len([p for p in peeked if p.strip()]) < SNIFF_LINES:
            line = stream.readline()
            if not line:
                break
            peeked.append(line)
            text = line.strip()
            if not text:
                continue
            if _is_object_line(text):
                jsonl = True
                break
            if first_balanced is None:
                first_balanced = _balanced(text)
                if not first_balanced:
                    break
        replay = io.BufferedReader(_Prefixed(b"".join(peeked), stream), buffer_size=CHUNK)
        if jsonl:
            yield from _read_lines(replay, source)
        else:
            yield from _read_scanned(replay, source, array=False)
    elif first == b"[":
        yield from _read_scanned(stream, source, array=True)
    else:
        yield from _read_lines(stream, source)


def _read_scanned(stream: BinaryIO, source: str, *, array: bool) -> Iterator[Record | ParseError]:
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="")
    for item in _scan_values(text, source, array):
        if isinstance(item, ParseError):
            yield item
            continue
        number, line, element = item
        where = f" (line {line})"
        try:
            value = _loads(element)
        except ParseError as exc:
            yield ParseError(exc.reason + where, source=source, line=number)
            continue
        yield _record(value, number, source, where)
