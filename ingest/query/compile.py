"""The syntax tree as a MongoDB filter, and as a Python predicate (the reference semantics).

:func:`to_filter` emits only the operators of :data:`ingest.query.safety.COMPILED_OPERATORS`
(``$and $or $nor $eq $ne $lt $lte $gt $gte $in $nin $exists $all``):

=================================  ==========================================
``f == v``                         ``{path: v}``
``f != v`` / ``< <= > >=``         ``{path: {$ne|$lt|$lte|$gt|$gte: v}}``
``f in [..]`` / ``f not in [..]``  ``{path: {$in: [..]}}`` / ``{path: {$nin: [..]}}``
``f has v``                        ``{path: v}`` (a list holding ``v``)
``f has all [..]`` / ``any [..]``  ``{path: {$all: [..]}}`` / ``{path: {$in: [..]}}``
``elements has only [..]``         ``{chemsys: {$in: [every sub-system]}}`` (an index on
                                   ``chemsys`` serves it; ``Li, O`` -> ``Li``, ``O``, ``Li-O``)
``f exists`` / ``f missing``       ``{path: {$exists: true|false}}``
``a and b``                        one document ``{pa: .., pb: ..}`` (conditions on one
                                   field merged: ``{band_gap: {$gte: 1, $lte: 3}}``), with
                                   ``$and`` only for what cannot be merged
``a or b`` / ``not a``             ``{$or: [a, b]}`` / ``{$nor: [a]}``
=================================  ==========================================

A plain document rather than nested ``$and`` keeps the filter in the shape query planners
match to compound indexes (the embedded server uses an index only for such documents).

:func:`evaluate` decides the same tree on a Python document as MongoDB decides the
filter (the rules mongod 8.2 follows, as the embedded server's authors measured and wrote them down): a
path that meets a list looks into its element documents (and, for a numeric part, takes
the element at that index too); a value matches when it, or any element of a list
value, does; comparisons hold only between values of one type bracket (numbers with
numbers, strings with strings, booleans with booleans, dates with dates, so ``evalue < 1``
never matches a string E-value nor ``last_updated >= "2024-01-01"`` a date kept as a string); ``== null`` matches a field missing on any branch of the path;
``!=`` and ``not in`` are the negations of ``==`` and ``in``.  ``tests/test_query.py``
holds the server to it on random documents.

:func:`build` turns a command line's strings (``--where`` / ``--filter``, ``--fields``,
``--sort``, ``--limit``) into a :class:`Spec`, raising QueryError for anything wrong before
a server is asked anything; :meth:`Spec.settle` then decides, on the server at hand,
whether the query must avoid an index walk over numbers (:mod:`ingest.query.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from typing import Any, TypeGuard

from ingest.query import QueryError
from ingest.query.language import And, Compare, Exists, Has, In, Node, Not, Or, parse
from ingest.query.plan import numeric_paths, unsafe_index
from ingest.query.safety import COMPILED_OPERATORS, check_filter, parse_filter
from ingest.schema import projection_for
from ingest.store.curated import Curated, Field
from ingest.store.indexes import numeric_keys_exact

__all__ = ["to_filter", "evaluate", "subsystems", "Spec", "build", "parse_fields", "parse_sort", "MAX_LIMIT"]

_OPS = {"!=": "$ne", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}


def to_filter(node: Node) -> dict:
    """The MongoDB filter of ``node``."""
    if isinstance(node, Compare):
        path = node.field.path
        if node.op == "==":
            return {path: node.value}
        return {path: {_OPS[node.op]: node.value}}
    if isinstance(node, In):
        return {node.field.path: {"$nin" if node.negate else "$in": list(node.values)}}
    if isinstance(node, Has):
        path = node.field.path
        if node.mode == "one":
            return {path: node.values[0]}
        if node.mode == "only":
            assert node.system is not None  # the parser names it (language.SYSTEMS)
            return {node.system.path: {"$in": subsystems(node.values)}}
        return {path: {"$all" if node.mode == "all" else "$in": list(node.values)}}
    if isinstance(node, Exists):
        return {node.field.path: {"$exists": node.present}}
    if isinstance(node, Not):
        return {"$nor": [to_filter(node.child)]}
    if isinstance(node, Or):
        parts: list[dict] = []
        for child in node.children:
            compiled = to_filter(child)
            parts.extend(compiled["$or"] if list(compiled) == ["$or"] else [compiled])
        return {"$or": parts}
    if isinstance(node, And):
        return _merge([to_filter(c) for c in node.children])
    raise TypeError(f"not a query node: {node!r}")


def subsystems(values) -> list[str]:
    """Every non-empty subset of ``values`` as a chemical system: its members sorted, joined by ``-``
    (``["Fe", "Li", "O"]`` -> ``Fe, Li, O, Fe-Li, Fe-O, Li-O, Fe-Li-O``): what ``has only`` asks ``chemsys``."""
    members = sorted(set(values))
    return ["-".join(c) for size in range(1, len(members) + 1) for c in combinations(members, size)]


def _is_ops(cond: Any) -> bool:
    return isinstance(cond, dict) and bool(cond) and all(k.startswith("$") for k in cond)


def _merge(filters: list[dict]) -> dict:
    """The conjunction of ``filters`` as one document where they do not collide."""
    merged: dict = {}
    rest: list[dict] = []
    for f in filters:
        if any(k.startswith("$") for k in f):
            rest.extend(f["$and"] if list(f) == ["$and"] else [f])
            continue
        for path, cond in f.items():
            if path not in merged:
                merged[path] = cond
                continue
            a = merged[path] if _is_ops(merged[path]) else {"$eq": merged[path]}
            b = cond if _is_ops(cond) else {"$eq": cond}
            if set(a) & set(b):
                rest.append({path: cond})
            else:
                merged[path] = {**a, **b}
    if not rest:
        return merged
    if not merged and len(rest) == 1:
        return rest[0]
    return {**merged, "$and": rest}


# ------------------------------------------------------------------ the reference semantics
class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


class _Positional(list):
    """A list reached by its index (``a.0`` over ``{a: [[1, 2]]}``): not looked into for membership."""

    __slots__ = ()


def _values(doc: Any, parts: list[str]) -> list:
    """Every value a dotted path reaches, as MongoDB's matcher sees them.

    A dict gives the field (or MISSING); a list gives, for a numeric part, the element at
    that index (or MISSING) *and* each element document's field of that name, for any
    other part each element document's field (elements that are not documents give
    nothing); a scalar where a document is needed gives MISSING.
    """
    current = [doc]
    for part in parts:
        found: list = []
        for value in current:
            if isinstance(value, dict):
                found.append(value.get(part, _MISSING))
            elif isinstance(value, list):
                if part.isdigit():
                    index = int(part)
                    if index < len(value):
                        item = value[index]
                        found.append(_Positional(item) if type(item) is list else item)
                    else:
                        found.append(_MISSING)
                found.extend(item.get(part, _MISSING) for item in value if isinstance(item, dict))
            else:
                found.append(_MISSING)
        current = found
    return current


def _bracket(v: Any) -> str | None:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, datetime):
        return "date"
    return None


def _utc(v: Any) -> Any:
    """A datetime as an aware UTC one (pymongo decodes BSON dates as naive UTC); anything else as it is."""
    if isinstance(v, datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    return v


def _same(a: Any, b: Any) -> bool:
    """MongoDB equality of two scalars: numbers across int/float, never a bool with a number, dates with dates."""
    return _bracket(a) == _bracket(b) is not None and _utc(a) == _utc(b)


def _order(a: Any, op: str, b: Any) -> bool:
    if _bracket(a) != _bracket(b) or _bracket(a) in (None, "null"):
        return False
    a, b = _utc(a), _utc(b)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _looked_into(v: Any) -> TypeGuard[list]:
    return type(v) is list  # a _Positional list is not


def _eq(values: list, expected: Any) -> bool:
    """``{path: expected}``: a value equal to it, or an element of a list value; null also matches MISSING."""
    for v in values:
        if v is _MISSING:
            if expected is None:
                return True
            continue
        if _same(v, expected) or (_looked_into(v) and any(_same(e, expected) for e in v)):
            return True
    return False


def _compare(values: list, op: str, bound: Any) -> bool:
    for v in values:
        v = None if v is _MISSING else v
        if _order(v, op, bound) or (_looked_into(v) and any(_order(e, op, bound) for e in v)):
            return True
    return False


def evaluate(node: Node, doc: dict) -> bool:
    """Whether ``doc`` matches ``node`` (what the filter of :func:`to_filter` selects on MongoDB)."""
    if isinstance(node, And):
        return all(evaluate(c, doc) for c in node.children)
    if isinstance(node, Or):
        return any(evaluate(c, doc) for c in node.children)
    if isinstance(node, Not):
        return not evaluate(node.child, doc)
    if isinstance(node, Has) and node.mode == "only":  # as its filter asks: the chemical system among the subsets
        assert node.system is not None
        systems = _values(doc, node.system.path.split("."))
        return any(_eq(systems, v) for v in subsystems(node.values))
    values = _values(doc, node.field.path.split("."))
    if isinstance(node, Exists):
        return any(v is not _MISSING for v in values) == node.present
    if isinstance(node, In):
        hit = any(_eq(values, v) for v in node.values)
        return not hit if node.negate else hit
    if isinstance(node, Has):
        if node.mode == "all":
            return all(_eq(values, v) for v in node.values)
        return any(_eq(values, v) for v in node.values)
    if isinstance(node, Compare):
        if node.op == "==":
            return _eq(values, node.value)
        if node.op == "!=":
            return not _eq(values, node.value)
        return _compare(values, node.op, node.value)
    raise TypeError(f"not a query node: {node!r}")


# ------------------------------------------------------------------ a whole query: Spec
MAX_LIMIT = 2**62


@dataclass
class Spec:
    curated: Curated
    fields: list[Field]
    filter: dict
    sort: list[tuple[str, int]] | None = None
    limit: int = 0
    hint: dict | None = None
    notes: list[str] = field(default_factory=list)
    where: str | None = None

    @property
    def collection(self) -> str:
        return self.curated.name

    @property
    def projection(self) -> dict:
        """The inclusion projection of the columns (list indexes dropped: ``hsps.0.evalue`` -> ``hsps.evalue``);
        ``_id`` always comes (it names a document set aside by an export)."""
        projection = projection_for(f.path for f in self.fields)
        projection.pop("_id", None)
        return {"_id": 1, **projection}

    def find_options(self, batch_size: int) -> dict[str, Any]:
        """The keyword arguments of ``find`` / ``find_raw_batches`` for this query's order, limit and hint."""
        options: dict[str, Any] = {"batch_size": batch_size}
        if self.sort:
            options["sort"] = self.sort
        if self.limit:
            options["limit"] = self.limit
        if self.hint:
            options["hint"] = list(self.hint.items())
        return options

    @property
    def kinds(self) -> dict[str, str]:
        return {f.path: f.kind for f in self.curated.fields}

    def settle(self, coll, info) -> None:
        """Run a numeric range or sort as a collection scan where the server's index keys lose numbers
        and it would otherwise walk an index for it (:mod:`ingest.query.plan`)."""
        paths = numeric_paths(self.filter, self.sort, self.kinds)
        if not paths or numeric_keys_exact(coll.database, info):
            return
        index = unsafe_index(coll, self.filter, self.sort, paths)
        if index is None:
            return
        self.hint = {"$natural": 1}
        self.notes.append(f"{info.kind} {info.engine_version or ''}".rstrip() + "'s index keys lose the order of "
                          f"numbers beyond 1e±128 (E-values like 1e-198), so this query on {', '.join(paths)} "
                          f"does not walk index {index}: a collection scan answers it (hint $natural); a real "
                          "MongoDB uses the index")

    def describe(self) -> dict:
        return {"collection": self.collection, "where": self.where, "filter": self.filter,
                "fields": [f.name for f in self.fields], "sort": self.sort, "limit": self.limit or None,
                "hint": self.hint}


def parse_fields(curated, text: str | None, default: tuple[str, ...]) -> list:
    """``"a,b"`` (curated names; ``*`` every field) -> fields; QueryError names the unknown ones."""
    if not text:
        names = list(default)
    elif text.strip() == "*":
        names = [f.name for f in curated.fields]
    else:
        names = [n.strip() for n in text.split(",")]
    out, seen = [], set()
    for position, name in enumerate(names, 1):
        if not name:
            raise QueryError("--fields", f"field {position} is empty")
        try:
            found = curated.field(name)
        except KeyError as exc:
            raise QueryError("--fields", exc.args[0]) from None
        if found.name not in seen:
            seen.add(found.name)
            out.append(found)
    return out


def parse_sort(curated, text: str | None) -> list[tuple[str, int]] | None:
    """``"-evalue,rank"`` -> ``[("hsps.0.evalue", -1), ("rank", 1)]`` (a leading ``-``: descending)."""
    if not text:
        return None
    out: list[tuple[str, int]] = []
    for part in (p.strip() for p in text.split(",")):
        direction = -1 if part.startswith("-") else 1
        name = part.lstrip("+-").strip()
        if not name:
            raise QueryError("--sort", f"empty field in {text!r} (e.g. -evalue,rank)")
        try:
            path = curated.field(name).path
        except KeyError as exc:
            raise QueryError("--sort", exc.args[0]) from None
        if any(p == path for p, _ in out):
            raise QueryError("--sort", f"{name} is named twice")
        out.append((path, direction))
    return out


def build(curated, *, where: str | None = None, raw_filter: str | None = None, fields: str | None = None,
          sort: str | None = None, limit: int | None = None, default_fields: tuple[str, ...] | None = None) -> Spec:
    """The :class:`Spec` of a command line (nothing is sent to a server)."""
    if where is not None and raw_filter is not None:
        raise QueryError("--filter", "give --where or --filter, not both")
    if where is not None:
        filter_ = to_filter(parse(where, curated))
        check_filter(filter_, "--where", COMPILED_OPERATORS)  # the compiler's own output, checked all the same
    elif raw_filter is not None:
        filter_ = parse_filter(raw_filter)
    else:
        filter_ = {}
    if limit is not None and not 0 < limit <= MAX_LIMIT:
        raise QueryError("--limit", f"must be a positive number, not {limit}")
    columns = parse_fields(curated, fields, default_fields or curated.defaults)
    return Spec(curated=curated, fields=columns, filter=filter_, sort=parse_sort(curated, sort), limit=limit or 0,
                where=where)
