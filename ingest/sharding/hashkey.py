"""MongoDB's hashed-index value, bit-exact: what ``{field: "hashed"}`` stores for a value.

A hashed index (and so a hashed shard key) keeps, for each document, a signed
64-bit number computed from the field's value (MongoDB's
``BSONElementHasher::hash64``, ``src/mongo/db/hasher.cpp``):

1. MD5 over the seed as a little-endian int32 (0 for indexes and shard keys);
2. then the element: its *canonical* BSON type as a little-endian int32, and
   its value -- numbers of every type as one little-endian int64
   (:func:`number_for_hash`), documents and arrays element by element *with*
   their field names (NUL-terminated; an array's are ``"0"``, ``"1"``, ...) and
   a closing int32 0, code with scope as its code and NUL then its scope's
   elements, anything else as its BSON value bytes;
3. the first 8 bytes of the digest, read as a little-endian signed int64.

The top-level field name is not hashed, so a value hashes the same whatever
field holds it.  Strings and symbols share a canonical type (and so a hash),
and so do int32, int64, double and decimal128 values that truncate (decimal:
round half to even) to the same int64.  :func:`parse_value` reads MongoDB
Extended JSON (canonical or relaxed) into the Python values :func:`hash64`
takes, keeping the legacy types (``$undefined``, ``$dbPointer``) that pymongo
would otherwise turn into others.

Checked against every literal in MongoDB's own ``hasher_test.cpp`` and
``jstests/core/testing/hash.js`` (``tests/data/mongodb_hash_vectors.json``).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, InvalidOperation
from functools import cache
from typing import Any

import bson
from bson import json_util
from bson.binary import UuidRepresentation
from bson.code import Code
from bson.codec_options import CodecOptions
from bson.datetime_ms import DatetimeConversion
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.json_util import JSONMode, JSONOptions
from bson.max_key import MaxKey
from bson.min_key import MinKey

__all__ = ["hash64", "number_for_hash", "parse_value", "Undefined", "DBPointer", "UNDEFINED", "INT64_MIN",
           "INT64_MAX"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_TWO_63 = 2.0**63

#: Canonical type of a BSON type byte (``canonicalizeBSONType``), for the types
#: whose value bytes are hashed as they are encoded.
_CANONICAL = {0x02: 15, 0x05: 30, 0x07: 35, 0x08: 40, 0x09: 45, 0x0B: 50, 0x0D: 60, 0x0E: 15, 0x11: 47}
_NUMBER, _STRING, _OBJECT, _ARRAY, _NULL = 10, 15, 20, 25, 5
_UNDEFINED, _MINKEY, _MAXKEY, _DBPOINTER, _CODE_W_SCOPE = 0, -1, 127, 55, 65


@dataclass(frozen=True)
class Undefined:
    """BSON's deprecated *undefined* (type 6): canonical type 0, unlike null's 5."""


UNDEFINED = Undefined()


@dataclass(frozen=True)
class DBPointer:
    """BSON's deprecated DBPointer (type 12): a namespace and an ObjectId (not a ``$ref`` document)."""

    namespace: str
    oid: Any  # bson.ObjectId


def number_for_hash(value) -> int:
    """The int64 a number is hashed as (``BSONElement::safeNumberLongForHash``).

    Doubles truncate toward zero; NaN is 0; exactly 2^63 is -2^63 (MongoDB keeps
    an old undefined conversion's result, SERVER-37183); beyond the int64 range
    (infinities included) the nearest end.  Decimal128 rounds half to even,
    NaN is 0 and out-of-range values clamp.  Python ints outside int64 (which
    BSON cannot hold) are taken as the double they would be in JSON.
    """
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number here")
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else number_for_hash(float(value))
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if value == _TWO_63:
            return INT64_MIN
        if not value < _TWO_63:
            return INT64_MAX
        if value < -_TWO_63:
            return INT64_MIN
        return int(value)
    if isinstance(value, Decimal128):
        d = value.to_decimal()
        if d.is_nan():
            return 0
        if d > INT64_MAX:
            return INT64_MAX
        if d < INT64_MIN:
            return INT64_MIN
        return int(d.to_integral_value(rounding=ROUND_HALF_EVEN))
    raise TypeError(f"not a number: {value!r}")


#: MongoDB stores no document nested deeper than this (documents and arrays, the top one counted).
MAX_DEPTH = 100


def hash64(value, seed: int = 0) -> int:
    """The signed 64-bit value MongoDB's hashed index keeps for ``value`` (any BSON value).

    A value nested deeper than MongoDB stores (:data:`MAX_DEPTH`) raises ``ValueError``.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**31) <= seed < 2**31:
        raise ValueError(f"the seed is a 32-bit signed integer, not {seed!r}")
    md5 = hashlib.md5(struct.pack("<i", seed), usedforsecurity=False)
    _feed(md5, value, None)
    return struct.unpack("<q", md5.digest()[:8])[0]


def _feed(md5, value, name: str | None, depth: int = 0) -> None:
    def head(canonical: int) -> None:
        md5.update(struct.pack("<i", canonical))
        if name is not None:
            md5.update(name.encode("utf-8") + b"\0")

    if isinstance(value, bool):
        head(40)
        md5.update(b"\x01" if value else b"\x00")
    elif isinstance(value, (int, float, Decimal128)):
        head(_NUMBER)
        md5.update(struct.pack("<q", number_for_hash(value)))
    elif value is None:
        head(_NULL)
    elif isinstance(value, Undefined):
        head(_UNDEFINED)
    elif isinstance(value, MinKey):
        head(_MINKEY)
    elif isinstance(value, MaxKey):
        head(_MAXKEY)
    elif isinstance(value, Code):  # a str subclass: before str
        if value.scope is None:
            kind, raw = _encoded(value)
            head(_CANONICAL[kind])
            md5.update(raw)
        else:
            head(_CODE_W_SCOPE)
            md5.update(str(value).encode("utf-8") + b"\0")
            _feed_elements(md5, value.scope.items(), depth + 1)
    elif isinstance(value, str):
        head(_STRING)
        raw = value.encode("utf-8")
        md5.update(struct.pack("<i", len(raw) + 1) + raw + b"\0")
    elif isinstance(value, DBRef):  # a DBRef is an ordinary document {$ref, $id[, $db], ...}
        _feed(md5, value.as_doc(), name, depth)
    elif isinstance(value, Mapping):
        head(_OBJECT)
        _feed_elements(md5, value.items(), depth + 1)
    elif isinstance(value, (list, tuple)):
        head(_ARRAY)
        _feed_elements(md5, ((str(i), v) for i, v in enumerate(value)), depth + 1)
    elif isinstance(value, DBPointer):
        head(_DBPOINTER)
        ns = value.namespace.encode("utf-8")
        md5.update(struct.pack("<i", len(ns) + 1) + ns + b"\0" + value.oid.binary)
    else:
        kind, raw = _encoded(value)
        head(_CANONICAL[kind])
        md5.update(raw)


def _feed_elements(md5, items, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels, which MongoDB does not store")
    for key, item in items:
        if not isinstance(key, str):
            raise TypeError(f"a document's field names are strings, not {key!r}")
        _feed(md5, item, key, depth)
    md5.update(struct.pack("<i", 0))  # the EOO element: canonical type 0, no name, no value


def _encoded(value) -> tuple[int, bytes]:
    """(BSON type byte, value bytes) of a scalar, exactly as BSON encodes it."""
    try:
        raw = bson.encode({"": value}, codec_options=_codec_options())
    except (bson.errors.InvalidDocument, TypeError, OverflowError) as exc:
        raise TypeError(f"not a BSON value: {value!r} ({exc})") from None
    kind = raw[4]
    if kind not in _CANONICAL:  # every other type is handled by _feed
        raise TypeError(f"no canonical type for BSON type {kind:#04x} ({value!r})")
    return kind, raw[6:-1]  # after: int32 length, type byte, empty name's NUL; before: the document's NUL


@cache
def _codec_options():
    return CodecOptions(uuid_representation=UuidRepresentation.STANDARD)


# ------------------------------------------------------------------ Extended JSON
def parse_value(text: str):
    """One MongoDB Extended JSON value (canonical or relaxed) as the Python value :func:`hash64` takes.

    ``{"$numberLong": "42"}``, ``{"$oid": ...}``, ``{"$date": ...}`` (any
    date, as milliseconds), documents (field order kept), arrays, null,
    booleans, strings; ``$undefined`` and ``$dbPointer`` stay themselves.  A
    bare JSON integer outside the int64 range is a double, as in the shell.
    Raises ``ValueError`` with the reason for anything else.
    """
    options = _json_options()

    def hook(pairs):
        keys = [k for k, _ in pairs]
        if keys == ["$undefined"]:
            return UNDEFINED
        if keys == ["$symbol"]:
            return str(pairs[0][1])
        if keys == ["$dbPointer"]:
            inner = pairs[0][1]
            if not (hasattr(inner, "collection") and hasattr(inner, "id")):
                raise ValueError("$dbPointer needs {$ref: namespace, $id: {$oid: ...}}")
            return DBPointer(inner.collection, inner.id)
        try:
            value = json_util.object_pairs_hook(pairs, options)
        except Exception as exc:  # noqa: BLE001 - bson's own errors for a malformed $-form
            raise ValueError(f"bad {keys[0]}: {_reason(exc)}" if keys and keys[0].startswith("$")
                             else _reason(exc)) from None
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{keys[0]} {value} is outside the int64 range")
        return value

    def big_int(digits: str):
        number = int(digits)
        return number if INT64_MIN <= number <= INT64_MAX else float(number)

    try:
        return json.loads(text, object_pairs_hook=hook, parse_int=big_int)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise ValueError(_reason(exc)) from None
    except Exception as exc:  # bson's own errors for malformed $-forms (InvalidId, ...)
        raise ValueError(_reason(exc)) from None


@cache
def _json_options():
    return JSONOptions(json_mode=JSONMode.CANONICAL, tz_aware=True, uuid_representation=UuidRepresentation.STANDARD,
                       datetime_conversion=DatetimeConversion.DATETIME_MS)


def _reason(exc: Exception) -> str:
    if isinstance(exc, InvalidOperation):
        return "not a decimal number"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
