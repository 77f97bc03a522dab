"""The ``--where`` expression language: grammar, syntax tree, names and types.

An expression is parsed by a lark LALR grammar (:data:`GRAMMAR`) into a tree of
:class:`And`, :class:`Or`, :class:`Not` and condition nodes; every field name is
resolved through the collection's curated declaration (:mod:`ingest.store.curated`) and
every value checked against the field's kind.  Nothing is ever pasted into a filter
as text: :mod:`ingest.query.compile` turns the tree into a filter of plain query
operators.  The language (also in docs/querying.md)::

    expr      := expr or expr | expr and expr | not expr | ( expr ) | condition
                 (precedence: not, then and, then or; keywords in any case)
    condition := field OP value            OP: < <= > >= == !=
               | value OP field            (1e-20 > evalue)
               | value OP field OP value   (1 <= band_gap <= 3: both < / <=, or both > / >=)
               | field between value and value            (inclusive)
               | field in [value, ...]  | field not in [value, ...]
               | field has value  | field has all [...] | field has any [...]   (list fields)
               | elements has only [...]   (every element among these: chemsys in every sub-system)
               | field exists     | field missing
    field     := a curated name (evalue, band_gap, ...)  |  `raw.dotted.path` in backquotes
    value     := number (12, -3.5, 1e-20) | "string" (JSON escapes) | true | false | null

Types: a number field takes numbers, a string field strings, a bool field true/false
(== and != only), a list field only ``has`` / ``exists`` / ``missing``; ``null`` only
with ``==`` / ``!=`` / ``in`` (``x == null``: missing or null).  A ``date`` field takes
strings in ISO 8601 (``last_updated >= "2024-01-01"``, ``"2024-01-31T12:00:00Z"``,
``"2024-01-31 12:00:00+02:00"``), read by :func:`ingest.dates.parse_iso` into a UTC
datetime: a date alone is midnight UTC, a time without ``Z`` or offset is UTC, to the
millisecond.  A raw path (backquoted, dot-separated, no ``$``) is not type-checked (a
string stays a string there).  Errors name the 1-based column.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ingest.dates import FORMS, parse_iso
from ingest.query import QueryError

__all__ = ["GRAMMAR", "FieldRef", "Compare", "In", "Has", "Exists", "And", "Or", "Not", "Node", "parse",
           "resolve_field", "KEYWORDS"]

GRAMMAR = r"""
start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr          -> not_
         | atom
?atom: "(" or_expr ")"
     | field CMP value                         -> compare
     | value CMP field                         -> compare_rev
     | value CMP field CMP value               -> range
     | field _BETWEEN value _AND value         -> between
     | field _IN list                          -> in_
     | field _NOT _IN list                     -> not_in
     | field _HAS _ALL items                   -> has_all
     | field _HAS _ANY items                   -> has_any
     | field _HAS _ONLY items                  -> has_only
     | field _HAS value                        -> has
     | field _EXISTS                           -> exists
     | field _MISSING                          -> missing
field: NAME | RAWPATH
?value: NUMBER | STRING | TRUE | FALSE | NULL
list: "[" value ("," value)* [","] "]"
items: list | item ("," item)*
?item: value | NAME

_OR.2: /or\b/i
_AND.2: /and\b/i
_NOT.2: /not\b/i
_IN.2: /in\b/i
_HAS.2: /has\b/i
_ALL.2: /all\b/i
_ANY.2: /any\b/i
_ONLY.2: /only\b/i
_BETWEEN.2: /between\b/i
_EXISTS.2: /exists\b/i
_MISSING.2: /missing\b/i
TRUE.2: /true\b/i
FALSE.2: /false\b/i
NULL.2: /null\b/i
CMP: "<=" | ">=" | "==" | "!=" | "<" | ">"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
RAWPATH: /`[^`]*`/
NUMBER: /[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/
STRING: /"(\\.|[^"\\])*"/
%import common.WS
%ignore WS
"""

#: Words that cannot be field names (write a raw path in backquotes instead).
KEYWORDS = ("and", "or", "not", "in", "has", "all", "any", "only", "between", "exists", "missing", "true", "false", "null")

_INT64 = (-(2**63), 2**63 - 1)

#: ``has only`` is answered through a field holding the list's members sorted and joined by ``-``
#: (``elements`` -> ``chemsys``): every sub-system of the values, ``$in`` on that field, which an index serves.
SYSTEMS = {"elements": "chemsys"}
#: At most this many distinct values after ``has only`` (2**12 - 1 = 4,095 sub-systems in the filter).
MAX_ONLY = 12


# ------------------------------------------------------------------ the tree
@dataclass(frozen=True)
class FieldRef:
    """A resolved field: the name written, its document path, its kind (None: a raw path), its column."""

    name: str
    path: str
    kind: str | None
    column: int


@dataclass(frozen=True)
class Compare:
    field: FieldRef
    op: str  # < <= > >= == !=
    value: Any


@dataclass(frozen=True)
class In:
    field: FieldRef
    values: tuple
    negate: bool = False


@dataclass(frozen=True)
class Has:
    field: FieldRef
    values: tuple
    mode: str = "one"  # one | all | any | only
    system: FieldRef | None = None  # mode only: the chemical-system field that answers it (chemsys)


@dataclass(frozen=True)
class Exists:
    field: FieldRef
    present: bool


@dataclass(frozen=True)
class And:
    children: tuple


@dataclass(frozen=True)
class Or:
    children: tuple


@dataclass(frozen=True)
class Not:
    child: Any


Node = Compare | In | Has | Exists | And | Or | Not

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_ORDER = ("<", "<=", ">", ">=")


# ------------------------------------------------------------------ values
@dataclass(frozen=True)
class _Value:
    value: Any
    column: int
    text: str


def _value(token, text: str) -> _Value:
    kind, raw, column = token.type, str(token), token.column
    if kind == "NUMBER":
        if any(c in raw for c in ".eE"):
            number = float(raw)
            if not math.isfinite(number):
                raise QueryError("--where", f"the number {raw} is out of range", column, text)
            return _Value(number, column, raw)
        number = int(raw)
        if not _INT64[0] <= number <= _INT64[1]:
            raise QueryError("--where", f"the integer {raw} does not fit in 64 bits", column, text)
        return _Value(number, column, raw)
    if kind == "STRING":
        try:
            value = json.loads(raw)
            value.encode("utf-8")  # a lone surrogate ("\ud800") cannot be sent to a server
            return _Value(value, column, raw)
        except UnicodeEncodeError:
            raise QueryError("--where", f"bad string {raw}: not valid Unicode (a lone surrogate)", column,
                             text) from None
        except ValueError as exc:
            raise QueryError("--where", f"bad string {raw}: {exc.args[0].split(':')[0]} (JSON escapes: \\\" \\\\ "
                             "\\n \\t \\uXXXX)", column, text) from None
    return _Value({"TRUE": True, "FALSE": False, "NULL": None}[kind], column, raw)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string"


# ------------------------------------------------------------------ names
def resolve_field(token, curated, text: str) -> FieldRef:
    """A NAME or RAWPATH token as a :class:`FieldRef` of ``curated`` (raises QueryError)."""
    raw, column = str(token), token.column
    if token.type == "RAWPATH":
        path = raw[1:-1]
        parts = path.split(".")
        if not path or any(not p for p in parts) or any(c in path for c in "$\x00 ") or path.startswith("."):
            raise QueryError("--where", f"bad raw path {raw}: dot-separated names, no empty part, no $, no spaces",
                             column, text)
        known = curated.by_path.get(path)
        return FieldRef(known.name if known else path, path, known.kind if known else None, column)
    if raw.lower() in KEYWORDS:
        raise QueryError("--where", f"{raw!r} is a keyword here; a field of that name is written `{raw}`",
                         column, text)
    try:
        found = curated.field(raw)
    except KeyError as exc:
        raise QueryError("--where", f"unknown field: {exc.args[0]}", column, text) from None
    return FieldRef(found.name, found.path, found.kind, column)


# ------------------------------------------------------------------ types
def _check(field: FieldRef, op: str, v: _Value, text: str) -> Any:
    """``v``'s value if ``field <op> v`` is well typed, else QueryError at ``v``'s column."""
    value, kind = v.value, field.kind
    if kind == "list<string>":
        raise QueryError("--where", f"{field.name} is a list: use `{field.name} has \"X\"`, `has all [...]` or "
                         f"`has any [...]`", field.column, text)
    if value is None:
        if op in ("==", "!="):
            return None
        raise QueryError("--where", f"null can only be compared with == or != (got {op})", v.column, text)
    if kind is None:
        if isinstance(value, bool) and op in _ORDER:
            raise QueryError("--where", "true and false can only be compared with == or !=", v.column, text)
        return value
    if kind in ("float64", "int64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise QueryError("--where", f"{field.name} holds numbers ({kind}); {v.text} is {_describe(value)}",
                             v.column, text)
        return value
    if kind == "string":
        if not isinstance(value, str):
            hint = f' (write "{value}" to compare as text)' if isinstance(value, (int, float)) \
                and not isinstance(value, bool) else ""
            raise QueryError("--where", f"{field.name} holds strings; {v.text} is {_describe(value)}{hint}",
                             v.column, text)
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise QueryError("--where", f"{field.name} is true or false; {v.text} is {_describe(value)}",
                             v.column, text)
        if op in _ORDER:
            raise QueryError("--where", f"{field.name} is true or false: compare it with == or !=", v.column, text)
        return value
    if kind == "date":  # an ISO 8601 string, as a UTC datetime
        if not isinstance(value, str):
            raise QueryError("--where", f"{field.name} holds dates, written as ISO 8601 strings ({FORMS}); "
                             f"{v.text} is {_describe(value)}", v.column, text)
        try:
            return parse_iso(value)
        except ValueError as exc:
            raise QueryError("--where", f"{field.name} holds dates; {v.text} {exc} (write {FORMS}; no Z or offset: "
                             "UTC)", v.column, text) from None
    raise QueryError("--where", f"{field.name}: unknown kind {kind}", field.column, text)


def _check_list(field: FieldRef, values: list[_Value], text: str) -> tuple:
    return tuple(_check(field, "==", v, text) for v in values)


def _check_has(field: FieldRef, values: list[_Value], text: str) -> tuple:
    if field.kind not in ("list<string>", None):
        raise QueryError("--where", f"has is for list fields; {field.name} is {field.kind} "
                         f"(use == or in)", field.column, text)
    out = []
    for v in values:
        if not isinstance(v.value, str) and field.kind is not None:
            raise QueryError("--where", f"{field.name} holds strings; {v.text} is {_describe(v.value)}",
                             v.column, text)
        if v.value is None:
            raise QueryError("--where", "has needs a value, not null (use missing)", v.column, text)
        out.append(v.value)
    return tuple(out)


# ------------------------------------------------------------------ parsing
_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        _PARSER = Lark(GRAMMAR, parser="lalr", maybe_placeholders=False)
    return _PARSER


class _Build:
    """Lark tree -> syntax tree, resolving fields against ``curated``."""

    def __init__(self, curated, text: str):
        self.curated, self.text = curated, text

    def field(self, tree) -> FieldRef:
        return resolve_field(tree.children[0], self.curated, self.text)

    def values(self, tree) -> list[_Value]:
        items = [_value(t, self.text) for t in tree.children if t is not None]
        return items

    def items(self, tree) -> list[_Value]:
        """After ``has all`` / ``any`` / ``only``: ``[v, ...]``, or ``v, ...`` whose bare names are strings
        (OPTIMADE's ``elements HAS ONLY "Li","Fe"``, or ``Li, Fe``)."""
        first = tree.children[0]
        if getattr(first, "data", None) == "list":
            return self.values(first)
        return [_Value(str(t), t.column, str(t)) if t.type == "NAME" else _value(t, self.text) for t in tree.children]

    def system(self, f: FieldRef, distinct: int) -> FieldRef:
        """The field that answers ``f has only [...]``: the chemical system of ``elements`` (QueryError else)."""
        name = SYSTEMS.get(f.name) if f.kind is not None else None
        if name is None or name not in self.curated.by_name:
            raise QueryError("--where", f"has only is answered through the chemical system: it is for `elements` "
                             f"of a collection with `chemsys`, not {f.name}", f.column, self.text)
        if distinct > MAX_ONLY:
            raise QueryError("--where", f"has only takes at most {MAX_ONLY} distinct values ({2**MAX_ONLY - 1:,} "
                             f"sub-systems), not {distinct}", f.column, self.text)
        found = self.curated.by_name[name]
        return FieldRef(found.name, found.path, found.kind, f.column)

    def node(self, tree):
        kind = tree.data
        c = tree.children
        if kind == "start":
            return self.node(c[0])
        if kind == "or_expr":
            return Or(tuple(self.node(x) for x in c))
        if kind == "and_expr":
            return And(tuple(self.node(x) for x in c))
        if kind == "not_":
            return Not(self.node(c[0]))
        if kind == "compare":
            f, op, v = self.field(c[0]), str(c[1]), _value(c[2], self.text)
            return Compare(f, op, _check(f, op, v, self.text))
        if kind == "compare_rev":
            v, op, f = _value(c[0], self.text), _FLIP[str(c[1])], self.field(c[2])
            return Compare(f, op, _check(f, op, v, self.text))
        if kind == "range":
            lo, op1, f, op2, hi = _value(c[0], self.text), str(c[1]), self.field(c[2]), str(c[3]), \
                _value(c[4], self.text)
            up, down = op1 in ("<", "<=") and op2 in ("<", "<="), op1 in (">", ">=") and op2 in (">", ">=")
            if not (up or down):
                raise QueryError("--where", "a range is `low < field < high` or `high > field > low` "
                                 f"(both < / <= or both > / >=), not {op1} ... {op2}", c[3].column, self.text)
            return And((Compare(f, _FLIP[op1], _check(f, op1, lo, self.text)),
                        Compare(f, op2, _check(f, op2, hi, self.text))))
        if kind == "between":
            f, lo, hi = self.field(c[0]), _value(c[1], self.text), _value(c[2], self.text)
            return And((Compare(f, ">=", _check(f, ">=", lo, self.text)),
                        Compare(f, "<=", _check(f, "<=", hi, self.text))))
        if kind in ("in_", "not_in"):
            f = self.field(c[0])
            if f.kind == "list<string>":
                raise QueryError("--where", f"{f.name} is a list: use `{f.name} has any [...]`", f.column, self.text)
            return In(f, _check_list(f, self.values(c[1]), self.text), negate=kind == "not_in")
        if kind in ("has", "has_all", "has_any", "has_only"):
            f = self.field(c[0])
            values = self.items(c[1]) if kind != "has" else [_value(c[1], self.text)]
            mode = {"has": "one", "has_all": "all", "has_any": "any", "has_only": "only"}[kind]
            checked = _check_has(f, values, self.text)
            if mode != "only":
                return Has(f, checked, mode)
            return Has(f, tuple(sorted(set(checked))), mode, self.system(f, len(set(checked))))
        if kind in ("exists", "missing"):
            return Exists(self.field(c[0]), kind == "exists")
        if isinstance(tree, Token):  # pragma: no cover - the grammar puts no bare token here
            raise QueryError("--where", f"unexpected {tree!s}", tree.column, self.text)
        raise QueryError("--where", f"unknown construct {kind}")  # pragma: no cover


def _syntax_error(exc, text: str) -> QueryError:
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        expected = _expected(getattr(exc, "expected", None) or getattr(exc, "accepts", None) or ())
        return QueryError("--where", f"the expression ends too early{expected}", len(text) + 1, text)
    if isinstance(exc, UnexpectedToken):
        expected = _expected(exc.accepts or exc.expected)
        return QueryError("--where", f"unexpected {str(exc.token)!r}{expected}", exc.column, text)
    if isinstance(exc, UnexpectedCharacters):
        char = exc.char  # text[exc.pos_in_stream]: lark reads it from the text it parsed
        hint = {"=": " (equality is ==)", "'": " (strings are in double quotes)", '"': " (a string that does not end)",
                "`": " (a raw path that does not end)"}.get(char, "")
        return QueryError("--where", f"unexpected character {char!r}{hint}", exc.column, text)
    return QueryError("--where", str(exc).splitlines()[0])


_TERMINALS = {"CMP": "a comparison", "NAME": "a field", "RAWPATH": "a field", "NUMBER": "a number",
              "STRING": "a string", "TRUE": "true", "FALSE": "false", "NULL": "null", "LPAR": "(",
              "RPAR": ")", "LSQB": "[", "RSQB": "]", "COMMA": ",", "_AND": "and", "_OR": "or", "_NOT": "not",
              "_IN": "in", "_HAS": "has", "_ALL": "all", "_ANY": "any", "_ONLY": "only", "_BETWEEN": "between",
              "_EXISTS": "exists", "_MISSING": "missing"}


def _expected(names) -> str:
    words = sorted({_TERMINALS.get(n, n.lower()) for n in names if n != "$END"})
    if not words:
        return ""
    if len(words) > 6:
        words = words[:6] + ["..."]
    return f" (expected {', '.join(words)})"


def parse(text: str, curated) -> Node:
    """The syntax tree of ``text`` with its fields resolved in ``curated``; raises QueryError."""
    if not text or not text.strip():
        raise QueryError("--where", "the expression is empty", 1, text or "")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text) from None
    return _flatten(_Build(curated, text).node(tree))


def _flatten(node):
    """Nested and/or of the same kind as one node."""
    if isinstance(node, (And, Or)):
        kids = []
        for child in (_flatten(c) for c in node.children):
            kids.extend(child.children if type(child) is type(node) else (child,))
        return type(node)(tuple(kids))
    if isinstance(node, Not):
        return Not(_flatten(node.child))
    return node
