"""The operator allow-list, and ``--filter`` raw filters checked against it.

Nothing that reaches server-side JavaScript or arbitrary aggregation can be sent:

* the ``--where`` language compiles to :data:`COMPILED_OPERATORS` only;
* a ``--filter`` raw filter is parsed as JSON (MongoDB Extended JSON for values: the
  type wrappers of :data:`VALUE_WRAPPERS`), every key at every depth is walked, and any
  ``$`` key outside :data:`FILTER_OPERATORS` is refused, naming the operator, its place
  and why (:data:`REFUSED` says why for the dangerous ones).  ``$expr`` is refused
  whatever it holds: JavaScript hides in it through ``$function``.

Both filters pass :func:`check_filter` before they are sent.
"""

from __future__ import annotations

import json
from typing import Any

from bson import json_util

from ingest.query import QueryError

__all__ = ["COMPILED_OPERATORS", "FILTER_OPERATORS", "LOGICAL", "VALUE_WRAPPERS", "REFUSED", "check_filter",
           "parse_filter"]

#: The operators the ``--where`` language emits.
COMPILED_OPERATORS = frozenset({"$and", "$or", "$nor", "$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin",
                                "$exists", "$all"})
#: Operators that join query documents.
LOGICAL = frozenset({"$and", "$or", "$nor"})
#: What a ``--filter`` may use: the compiled ones, ``$not`` (around an operator document) and ``$elemMatch``.
FILTER_OPERATORS = COMPILED_OPERATORS | {"$not", "$elemMatch"}
#: Extended JSON type wrappers accepted as values (``{"$oid": "..."}``, ``{"$date": ...}``, numbers).
VALUE_WRAPPERS = frozenset({"$oid", "$date", "$numberInt", "$numberLong", "$numberDouble", "$numberDecimal"})
#: Why the dangerous operators are refused.
REFUSED = {
    "$where": "it runs server-side JavaScript",
    "$function": "it runs server-side JavaScript",
    "$accumulator": "it runs server-side JavaScript",
    "$expr": "aggregation expressions can run JavaScript through $function",
    "$jsonSchema": "not a plain query operator",
    "$code": "JavaScript code is not a filter value",
    "$regex": "regular expressions are not on the allow-list",
    "$regularExpression": "regular expressions are not on the allow-list",
    "$text": "not a plain query operator",
}


def _refuse(option: str, op: str, where: str) -> QueryError:
    why = REFUSED.get(op, f"it is not on the allow-list ({', '.join(sorted(FILTER_OPERATORS))})")
    return QueryError(option, f"operator {op} at {where} is refused: {why}")


def check_filter(filter_: Any, option: str = "--filter", allowed: frozenset = FILTER_OPERATORS) -> None:
    """Raise QueryError unless every ``$`` key of ``filter_``, at any depth, is allowed in its place."""
    if not isinstance(filter_, dict):
        raise QueryError(option, f"a filter is a JSON object, not {type(filter_).__name__}")
    _query(filter_, option, allowed, "the top")
    try:  # a lone surrogate ("\ud800") decodes from JSON but cannot be sent to a server
        json.dumps(filter_, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QueryError(option, f"a string is not valid Unicode: {exc.object[exc.start:exc.end]!r} "
                                 f"({exc.reason})") from None


def _query(doc: dict, option: str, allowed: frozenset, where: str) -> None:
    """A query document: field paths, and $and / $or / $nor."""
    for key, value in doc.items():
        here = key if where == "the top" else f"{where}.{key}"
        if not isinstance(key, str):
            raise QueryError(option, f"key {key!r} at {where} is not a string")
        if key.startswith("$"):
            if key not in LOGICAL or key not in allowed:
                raise _refuse(option, key, here)
            if not isinstance(value, list) or not value:
                raise QueryError(option, f"{key} at {here} takes a non-empty list of filters")
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    raise QueryError(option, f"{key}[{i}] at {here} is not a filter object")
                _query(item, option, allowed, f"{here}[{i}]")
            continue
        if "$" in key or "\x00" in key or not key:
            raise QueryError(option, f"field name {key!r} at {where} is refused: no $ or NUL in a field path")
        _condition(value, option, allowed, here)


def _condition(value: Any, option: str, allowed: frozenset, where: str) -> None:
    """What a field is compared with: an operator document or a literal."""
    if isinstance(value, dict) and value and any(k.startswith("$") for k in value):
        if not all(isinstance(k, str) and k.startswith("$") for k in value):
            raise QueryError(option, f"{where} mixes operators and field names")
        for op, arg in value.items():
            here = f"{where}.{op}"
            if op not in allowed or op in LOGICAL:
                raise _refuse(option, op, here)
            if op == "$not":
                if not (isinstance(arg, dict) and arg and all(k.startswith("$") for k in arg)):
                    raise QueryError(option, f"$not at {here} takes an operator object")
                _condition(arg, option, allowed, here)
            elif op == "$elemMatch":
                if not isinstance(arg, dict):
                    raise QueryError(option, f"$elemMatch at {here} takes an object")
                if arg and all(k.startswith("$") for k in arg) and not set(arg) & LOGICAL:
                    _condition(arg, option, allowed, here)
                else:
                    _query(arg, option, allowed, here)
            else:
                _literal(arg, option, here)
        return
    _literal(value, option, where)


def _literal(value: Any, option: str, where: str) -> None:
    """A value: no ``$`` key anywhere inside it."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or key.startswith("$") or "\x00" in key:
                raise _refuse(option, str(key), f"{where}.{key}")
            _literal(item, option, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _literal(item, option, f"{where}[{i}]")


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object, refusing duplicate keys (the last would silently win)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_filter(text: str, option: str = "--filter") -> dict:
    """A raw filter from JSON text: checked against the allow-list, then its Extended JSON
    type wrappers (``{"$oid": ...}``, ``{"$date": ...}``, ``{"$numberLong": ...}``) made values."""
    try:
        raw = json.loads(text, object_pairs_hook=_pairs)
    except ValueError as exc:
        raise QueryError(option, f"not JSON: {exc}") from None
    wrapped = _unwrap(raw, option, "the top")
    check_filter(wrapped, option)
    return wrapped


def _unwrap(value: Any, option: str, where: str) -> Any:
    """``value`` with each Extended JSON type wrapper replaced by its value (json_util's rules)."""
    if isinstance(value, dict):
        if value and set(value) <= VALUE_WRAPPERS:
            if len(value) != 1:
                raise QueryError(option, f"{where}: one type wrapper per object, not {sorted(value)}")
            try:
                return json_util.loads(json.dumps(value))
            except (ValueError, TypeError, KeyError) as exc:
                raise QueryError(option, f"{where}: bad {next(iter(value))} value: {exc}") from None
        return {k: _unwrap(v, option, f"{where}.{k}" if where != "the top" else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, option, f"{where}[{i}]") for i, v in enumerate(value)]
    return value
