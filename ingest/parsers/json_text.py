"""One JSON record's text decoded, or refused with the reason: what :mod:`ingest.parsers.materials`
calls for every record, whatever the file's layout.

Three refusals besides JSON that does not parse (each a :class:`~ingest.errors.ParseError`, which
the reader names ``file:line: reason``, the record's file then failing as any bad record's does):

* **Bytes that are not UTF-8** (kept by the reader as lone surrogates).
* **A record too large to decode in memory.**  The decoded form of a record costs far more than
  its text: an empty object is 2 bytes of JSON and about 150 bytes once decoded, copied into
  its document and encoded as BSON, so 16 MB of ``{},{},...`` took a loader to 899 MB.  Before
  it is decoded, a record's cost is estimated from its text (:func:`estimated_bytes`: 64 bytes
  a value, 90 more an object or array, 140 a key, the weights measured on the worst shapes:
  empty objects and arrays, floats, small integers, empty strings, distinct keys) and a record
  estimated over :data:`RECORD_MEMORY_BUDGET` is refused before anything of it is built.  The
  counts are of the characters ``,`` ``{`` ``[`` ``:`` (an upper bound: they may stand in
  strings), taken only for a text long enough to pass the budget at all (over 1 MiB), and
  taken again outside strings when the first count passes it.  A record of the real Materials
  Project data costs 6-14 bytes of text a value: records up to about 13 MB of such text pass.
* **Duplicate keys.**  ``{"a": 1, "a": 2}`` is read by every JSON reader, each keeping one of
  the values (Python's the last): which value the writer meant cannot be known, so the record
  is refused, naming the key and the object's path (``key "a" twice in the object at sites.3``).

And what was read but not as written: a number that is not finite (:func:`non_finite`), stored with a warning.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ingest.errors import ParseError

__all__ = ["decode", "estimated_bytes", "non_finite", "outside_strings", "over_budget", "RECORD_MEMORY_BUDGET"]

#: The most memory one record may take once decoded, estimated before it is (see the module's text).
RECORD_MEMORY_BUDGET = 128 << 20
#: The estimate's weights, bytes a value, an object or array (besides being a value), and a key.
VALUE_BYTES, CONTAINER_BYTES, KEY_BYTES = 64, 90, 140
#: No text shorter than this can pass the budget (each character adds at most 154 bytes).
_COUNTED_FROM = RECORD_MEMORY_BUDGET // (VALUE_BYTES + CONTAINER_BYTES)
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]")  # undecodable bytes under surrogateescape
_WINDOW = 1 << 18  # characters of text split at a time
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class _Duplicate(Exception):
    """A key twice in one object (raised by the decoder's object hook)."""


def _unique(pairs: list) -> dict:
    """The object of ``pairs``, unless a key comes twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate
    return obj


_DECODE = json.JSONDecoder(object_pairs_hook=_unique).decode


def estimated_bytes(text: str) -> tuple[int, int, int, int]:
    """(bytes, values, objects and arrays, keys): what decoding ``text`` would take, estimated from its
    characters ``,`` ``{`` ``[`` ``:`` (an upper bound where they also stand in strings)."""
    containers = text.count("{") + text.count("[")
    values = 1 + text.count(",") + containers
    keys = text.count(":")
    return VALUE_BYTES * values + CONTAINER_BYTES * containers + KEY_BYTES * keys, values, containers, keys


def outside_strings(text: str, chars: str) -> tuple[dict[str, int], bool]:
    """How often each of ``chars`` stands in ``text`` outside its strings, and whether a string is left
    open at its end: a window at a time, in memory bounded whatever the number of strings (a regular
    expression's ``sub`` over the millions of a 16 MB record took 900 MB)."""
    counts = dict.fromkeys(chars, 0)

    def add(piece: str) -> None:
        for ch in chars:
            counts[ch] += piece.count(ch)

    if '\\"' in text:  # an escaped quote: each string matched whole, one at a time
        end = 0
        for m in _STRING.finditer(text):
            add(text[end:m.start()])
            end = m.end()
        add(text[end:])
        return counts, '"' in text[end:]
    outside = True  # without escaped quotes, every quote opens or closes a string
    for start in range(0, len(text), _WINDOW):
        pieces = text[start:start + _WINDOW].split('"')
        add("".join(pieces[0 if outside else 1::2]))
        if len(pieces) % 2 == 0:  # an odd number of quotes: the next window starts on the other side
            outside = not outside
    return counts, not outside


def over_budget(text: str, *, begun: bool = False) -> str | None:
    """Why ``text`` may not be decoded (its estimated memory over the budget), or None; ``begun``: the
    text is the beginning of a record, whose cost is then at least the one said."""
    if len(text) <= _COUNTED_FROM:
        return None
    estimate = estimated_bytes(text)
    if estimate[0] > RECORD_MEMORY_BUDGET:  # counted again without the characters in strings
        counts, _ = outside_strings(text, ",{[:")
        containers = counts["{"] + counts["["]
        values = 1 + counts[","] + containers
        estimate = (VALUE_BYTES * values + CONTAINER_BYTES * containers + KEY_BYTES * counts[":"], values,
                    containers, counts[":"])
    cost, values, containers, keys = estimate
    if cost <= RECORD_MEMORY_BUDGET:
        return None
    about = "at least" if begun else "about"
    return (f"record too large to decode in memory: {about} {cost / (1 << 20):,.0f} MiB once read ({about} {values:,} "
            f"values, {containers:,} objects and arrays, {keys:,} keys), over the {RECORD_MEMORY_BUDGET >> 20} MiB a "
            "record may take (docs/loading.md, 'Limits of a file')")


def decode(text: str) -> Any:
    """The JSON value of ``text``, every failure as a ParseError (see the module's text)."""
    if _ESCAPED_BYTES.search(text):
        raise ParseError("not valid UTF-8")
    refused = over_budget(text)
    if refused:
        raise ParseError(refused)
    try:
        return _DECODE(text)
    except _Duplicate:
        raise ParseError(_duplicate(text)) from None
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg} at column {exc.colno}" + (
            f" of line {exc.lineno} of the record" if exc.lineno > 1 else "")) from None
    except RecursionError:
        raise ParseError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer literal over Python's digit limit (sys.get_int_max_str_digits)
        raise ParseError(f"a number too long to read: {str(exc).split(':')[0].lower()}") from None


class _Pairs(list):
    """An object as its (key, value) pairs, duplicates kept (to find where one is)."""


def _duplicate(text: str) -> str:
    """The reason for a record holding a key twice in one object: the first such key and where."""
    try:
        found = _first_duplicate(json.loads(text, object_pairs_hook=_Pairs), "")
    except RecursionError:  # nested too deeply to walk: the key is named without its place
        found = None
    key, path = found if found else ("?", "")
    where = f"the object at {path}" if path else "the record's top-level object"
    return (f"key {json.dumps(key)[:60]} twice in {where}: which of its values was meant cannot be known "
            "(JSON readers keep one), so the record is refused")


def _first_duplicate(node: Any, path: str) -> tuple[str, str] | None:
    if isinstance(node, _Pairs):
        seen = set()
        for key, _ in node:
            if key in seen:
                return key, path
            seen.add(key)
        items = ((key, value) for key, value in node)
    elif isinstance(node, list):
        items = ((str(i), value) for i, value in enumerate(node))
    else:
        return None
    for key, value in items:
        found = _first_duplicate(value, f"{path}.{key}" if path else key)
        if found:
            return found
    return None


#: Text that may have become a number that is not finite: the literals Python's json reads
#: (NaN, Infinity, -Infinity) and exponents of three digits or more (1e400 overflows to inf).
_NON_FINITE_TEXT = re.compile(r"NaN|Infinity|[eE][+-]?0*[1-9]\d{2}")
_MAX_WARNINGS_A_RECORD = 5


def non_finite(text: str, value: Any) -> tuple[str, ...]:
    """Where a record holds a number that is not finite, as ``path: what`` lines.

    The policy (docs/loading.md, "Values checked at the door"): such a number is stored as the BSON
    double it became (NaN, Infinity, -Infinity: JSON has none, but Python's reader and
    MongoDB's extended JSON do) and named in a warning; numbers over a double's range
    (``1e400``) become infinities and are named as overflowing.  Only records whose text holds
    such a literal or a three-digit exponent are walked.
    """
    if not _NON_FINITE_TEXT.search(text):
        return ()
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if len(found) > _MAX_WARNINGS_A_RECORD:
            return
        if isinstance(node, float):
            if node != node:
                found.append(f"{path}: NaN is not a number (stored as NaN)")
            elif node in (math.inf, -math.inf):
                found.append(f"{path}: {'-' if node < 0 else ''}Infinity, or a number beyond a double's range "
                             "(stored as an infinity)")
        elif isinstance(node, dict):
            for key, item in node.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}.{i}")

    walk(value, "")
    if len(found) > _MAX_WARNINGS_A_RECORD:
        found[_MAX_WARNINGS_A_RECORD:] = ["and more numbers that are not finite"]
    return tuple(found)
