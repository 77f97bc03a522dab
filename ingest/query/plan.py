"""How a query runs on the server at hand: its plan, the scan warning, SecantusDB's numeric keys.

* :func:`explain` runs ``explain`` (``executionStats``) and reads the winning plan
  whatever its shape: MongoDB's classic tree (``FETCH`` over ``IXSCAN``), its
  slot-based engine (``winningPlan.queryPlan``), the express path (``EXPRESS_IXSCAN``,
  ``IDHACK``), a sharded cluster (``winningPlan.shards[*]``) and SecantusDB's
  (which mimics the classic tree): :class:`Plan` names the index used or ``COLLSCAN``,
  and says how many documents and index keys were examined and how many returned.
* :func:`scan_warning`: a query that no index serves (a ``COLLSCAN``) on a collection of
  at least :data:`SCAN_WARN_DOCUMENTS` documents (``SCI_INGEST_SCAN_WARN``; default
  100,000) is warned about on stderr before it runs, with the indexes there are.
* :func:`build_indexes` creates each curated index that is missing (by key pattern, so an
  index of the same keys under another name counts as present), never drops one, and
  reports per index ``present``, ``created`` or ``refused`` with the server's reason (a
  server that lacks a kind of index is reported, never worked around).  The data
  collections' indexes are :data:`ingest.store.catalog.QUERY_INDEXES`; the analyses' outputs get
  theirs when they are published, and here again for the outputs that exist (one never
  published is not created empty).
* :func:`numeric_keys_exact`: SecantusDB 0.7 encodes a number's index key with a
  one-byte decimal exponent; beyond 1e±128 every number collapses to one key that sorts
  above all positive numbers.  E-values such as 1e-198 are common, so an index range
  ``evalue < 1e-20`` there silently loses them (measured: 129 of the samples' 152 such hits
  found).  The flaw is detected, never assumed from a version: the server's probe
  (:mod:`ingest.store.differences`, asked once per server process, on any server) writes two
  numbers (1e-200 and 1) to a scratch collection, indexes them and asks for ``< 1e-100``.
  Where the answer is wrong and the server would walk an index on a float
  (or raw) path for a numeric range or a sort on it, the query is run with ``hint:
  {$natural: 1}`` (a collection scan, so the answer is right) and a note says so.
  Equality (``==``, ``in``) stays on the index: the server re-checks every candidate.  A
  server the probe could not ask (a read-only user) is taken to have the flaw if it is a
  SecantusDB, not otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ingest.config import setting
from ingest.store.differences import FLOAT_INDEX, probe
from ingest.store.mongo import db_errors
from ingest.store.servers import describe, drop_indexes, ensure_indexes
from ingest.errors import UnsupportedFeature
from ingest.store.curated import UnknownCollection, get, all_curated, index_name

__all__ = ["build_indexes", "present_indexes", "SCAN_WARN_DOCUMENTS", "Plan", "explain", "read_plan", "scan_warning",
           "numeric_keys_exact", "exact_indexes", "ensure_exact_indexes", "withheld_note", "server_of",
           "numeric_paths", "unsafe_index", "paths_and_ops", "index_state"]

SCAN_WARN_DOCUMENTS = setting("SCI_INGEST_SCAN_WARN")
_RANGE = {"$lt", "$lte", "$gt", "$gte"}


@dataclass
class Plan:
    """What ``explain`` said: the index used (None: a collection scan) and the counts."""

    indexes: list[str] = field(default_factory=list)
    collscan: bool = False
    blocking_sort: bool = False
    docs_examined: int | None = None
    keys_examined: int | None = None
    returned: int | None = None
    millis: int | None = None
    stages: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.indexes:
            return "IXSCAN " + ", ".join(self.indexes) + (" (and a COLLSCAN)" if self.collscan else "")
        return "COLLSCAN" if self.collscan or not self.stages else " > ".join(self.stages)

    def as_dict(self) -> dict:
        return {"plan": self.label, "indexes": self.indexes, "collscan": self.collscan,
                "in_memory_sort": self.blocking_sort, "docs_examined": self.docs_examined,
                "keys_examined": self.keys_examined, "returned": self.returned, "millis": self.millis,
                "stages": self.stages}


def _walk(node: Any, plan: Plan) -> None:
    if isinstance(node, dict):
        stage = node.get("stage")
        if isinstance(stage, str):
            plan.stages.append(stage)
            if "IXSCAN" in stage or stage in ("COUNT_SCAN", "DISTINCT_SCAN"):
                name = node.get("indexName") or _key_name(node.get("keyPattern"))
                if name and name not in plan.indexes:
                    plan.indexes.append(name)
            elif stage in ("IDHACK", "EXPRESS_IDHACK", "EXPRESS_CLUSTERED_IXSCAN"):
                if "_id_" not in plan.indexes:
                    plan.indexes.append("_id_")
            elif stage == "COLLSCAN":
                plan.collscan = True
            elif stage == "SORT":
                plan.blocking_sort = True
        for key, value in node.items():
            if key in ("inputStage", "inputStages", "queryPlan", "winningPlan", "shards", "thenStage", "elseStage",
                       "outerStage", "innerStage"):
                _walk(value, plan)
    elif isinstance(node, list):
        for item in node:
            _walk(item, plan)


def _key_name(pattern) -> str | None:
    if not isinstance(pattern, dict) or not pattern:
        return None
    return "_".join(f"{k}_{v}" for k, v in pattern.items())


def read_plan(reply: dict) -> Plan:
    """A :class:`Plan` from an ``explain`` reply (any of the shapes in the module docstring)."""
    plan = Plan()
    planner = reply.get("queryPlanner") or {}
    _walk(planner.get("winningPlan") or {}, plan)
    stats = reply.get("executionStats") or {}
    plan.docs_examined = stats.get("totalDocsExamined")
    plan.keys_examined = stats.get("totalKeysExamined")
    plan.returned = stats.get("nReturned")
    plan.millis = stats.get("executionTimeMillis")
    return plan


def explain(coll, filter_: dict, *, projection=None, sort=None, limit: int = 0, hint=None,
            verbosity: str = "executionStats") -> Plan:
    """``explain`` of ``find(filter_)`` on ``coll`` (pymongo collection)."""
    command: dict = {"find": coll.name, "filter": filter_}
    if projection:
        command["projection"] = projection
    if sort:
        command["sort"] = dict(sort)
    if limit:
        command["limit"] = limit
    if hint is not None:
        command["hint"] = hint
    with db_errors(f"explaining the query on {coll.name}"):
        reply = coll.database.command("explain", command, verbosity=verbosity)
    return read_plan(reply)


def scan_warning(coll, filter_: dict, sort, hint, indexes: list[str], threshold: int | None = None) -> str | None:
    """The warning for a collection scan of a large collection, or None (a cheap plan-only explain)."""
    threshold = SCAN_WARN_DOCUMENTS if threshold is None else threshold
    with db_errors(f"counting {coll.name}"):
        size = coll.estimated_document_count()
    if size < threshold:
        return None
    plan = explain(coll, filter_, sort=sort, hint=hint, verbosity="queryPlanner")
    if plan.indexes:
        return None
    known = ", ".join(indexes) if indexes else "none"
    return (f"no index serves this query: all {size:,} documents of {coll.name} are read (COLLSCAN; warned from "
            f"{threshold:,} documents, SCI_INGEST_SCAN_WARN); its indexes: {known}")


# ------------------------------------------------------------------ SecantusDB's numeric index keys
def numeric_keys_exact(db, info) -> bool:
    """Whether a range over an index on numbers finds every number (False: SecantusDB's flaw), as the
    server's probe found (:func:`ingest.store.differences.probe`)."""
    found = probe(db)
    if found.probed:
        return not found.has(FLOAT_INDEX)
    return info.kind != "SecantusDB"  # not asked (a read-only user): the safe side where the flaw is known


def paths_and_ops(filter_: Any, out: list | None = None) -> list[tuple[str, str, Any]]:
    """Every (path, operator, operand) of a filter, at any depth (``{path: v}`` is ``$eq``)."""
    out = [] if out is None else out
    if isinstance(filter_, dict):
        for key, value in filter_.items():
            if key in ("$and", "$or", "$nor") and isinstance(value, list):
                for item in value:
                    paths_and_ops(item, out)
            elif not key.startswith("$"):
                _field_ops(key, value, out)
    return out


def _field_ops(path: str, cond: Any, out: list) -> None:
    if isinstance(cond, dict) and cond and all(isinstance(k, str) and k.startswith("$") for k in cond):
        for op, arg in cond.items():
            if op == "$not":
                _field_ops(path, arg, out)
            elif op == "$elemMatch" and isinstance(arg, dict):
                if all(k.startswith("$") for k in arg):
                    _field_ops(path, arg, out)
                else:
                    for sub in paths_and_ops(arg):
                        out.append((f"{path}.{sub[0]}", sub[1], sub[2]))
            else:
                out.append((path, op, arg))
    else:
        out.append((path, "$eq", cond))


def numeric_paths(filter_: dict, sort, kinds: dict[str, str]) -> list[str]:
    """The float (or raw) paths a query ranges over with a number, or sorts on.

    ``kinds`` maps document paths to kinds; a path not in it may hold anything.
    """
    def numeric_path(path: str) -> bool:
        return kinds.get(path) in (None, "float64")

    found: dict[str, None] = {}
    for path, op, arg in paths_and_ops(filter_):
        if op in _RANGE and isinstance(arg, (int, float)) and not isinstance(arg, bool) and numeric_path(path):
            found[path] = None
    for path, _direction in sort or ():
        if numeric_path(path):
            found[path] = None
    return list(found)


def unsafe_index(coll, filter_: dict, sort, paths: list[str]) -> str | None:
    """The index the server would walk for a range or sort on one of ``paths`` (None: no such index)."""
    if not paths:
        return None
    plan = explain(coll, filter_, sort=sort, verbosity="queryPlanner")
    if not plan.indexes:
        return None
    with db_errors(f"listing the indexes of {coll.name}"):
        info = coll.index_information()
    for name in plan.indexes:
        keys = [k for k, _ in (info.get(name) or {}).get("key", [])]
        if any(k in paths for k in keys):
            return name
    return None


# ------------------------------------------------------------------ indexes that answer exactly
_DESCRIBED: dict[int, object] = {}


def server_of(db):
    """The server behind ``db`` (:func:`ingest.store.servers.describe`, asked once per client)."""
    key = id(db.client)
    if key not in _DESCRIBED:
        _DESCRIBED[key] = describe(db.client)
    return _DESCRIBED[key]


def _float_paths(collection: str) -> set[str]:
    """The document paths of ``collection`` declared to hold floats (curated fields, output columns)."""
    try:
        return {f.path for f in get(collection).fields if f.kind == "float64"}
    except UnknownCollection:
        return set()


def exact_indexes(db, collection: str, indexes) -> tuple[list[tuple], list[tuple]]:
    """The indexes of ``collection`` to build so that every answer equals a collection scan's.

    Where the server's index keys keep the order of every number (MongoDB), each index as
    declared.  Where they lose it (:func:`numeric_keys_exact`: SecantusDB, probed), each is cut
    before its first field that can hold a float (``(query_id, hsps.0.evalue)`` becomes
    ``(query_id)``), kept when a prefix is left that no other index already is, and left out
    otherwise: a range over such a field is then a collection scan, slower but right, for every
    client (mongosh, pymongo, DuckDB), not only ``sci-ingest query``.  Returns (to build,
    [(declared, built instead or None)] for every index cut or left out).
    """
    declared = [tuple(tuple(k) for k in keys) for keys in indexes]
    if numeric_keys_exact(db, server_of(db)):
        return declared, []
    floats = _float_paths(collection)
    build: list[tuple] = []
    changed: list[tuple] = []
    for keys in declared:
        cut = keys
        for i, (path, _direction) in enumerate(keys):
            if path in floats:
                cut = keys[:i]
                break
        if cut == keys:
            build.append(keys)
            continue
        instead = cut if cut and cut not in declared and cut not in build else None
        if instead:
            build.append(instead)
        changed.append((keys, instead))
    return build, changed


def ensure_exact_indexes(db, indexes: dict[str, list]) -> dict:
    """Create ``indexes`` ({collection: [keys]}) as :func:`exact_indexes` has them, and drop the
    declared ones it cuts or leaves out where a database made before has them.  Returns
    {"created": n, "dropped": n, "changed": {collection: [(declared, instead)]}}."""
    plan, changed = {}, {}
    for coll, keys in indexes.items():
        plan[coll], cut = exact_indexes(db, coll, keys)
        if cut:
            changed[coll] = cut
    dropped = drop_indexes(db, {c: [list(k) for k, _ in cut] for c, cut in changed.items()}) if changed else 0
    created = ensure_indexes(db, {c: [list(k) for k in ks] for c, ks in plan.items()})
    return {"created": created, "dropped": dropped, "changed": changed}


def withheld_note(changed: dict) -> str | None:
    """One line saying which indexes are cut or left out, and why (None when none are)."""
    if not changed:
        return None
    parts = []
    for coll, cut in changed.items():
        for keys, instead in cut:
            declared = "+".join(p for p, _ in keys)
            parts.append(f"{coll}({declared})" + (f" as {coll}({'+'.join(p for p, _ in instead)})" if instead
                                                  else " left out"))
    return ("the server's index keys lose the order of numbers beyond 1e±128 (probed): indexes on float "
            "fields are built without those fields, so every client's answers equal a collection scan's "
            f"(a range over them scans): {', '.join(parts)}")


# ------------------------------------------------------------------ the indexes a collection has
def _key(pattern) -> tuple:
    return tuple((k, int(v) if isinstance(v, (int, float)) else v) for k, v in pattern)


def index_state(coll, declared) -> tuple[list[dict], list[dict]]:
    """The indexes ``coll`` really has (``index_information``), and those of ``declared`` (key lists)
    it has not, each with why.  Returns ([{index, keys, note?}], [{index, reason}]); an index here on a
    float field where the server's index keys lose numbers is noted (a range through it is not used)."""
    with db_errors(f"listing the indexes of {coll.name}"):
        info = coll.index_information()
    exact = numeric_keys_exact(coll.database, server_of(coll.database))
    floats = _float_paths(coll.name)
    here = []
    for name, spec in info.items():
        row = {"index": name, "keys": [list(k) for k in _key(spec["key"])]}
        if not exact and any(path in floats for path, _ in spec["key"]):
            row["note"] = ("on a float field: this server's index keys lose the order of numbers beyond 1e±128, "
                           "so sci-ingest does not range or sort through it")
        here.append(row)
    have = {_key(spec["key"]) for spec in info.values()}
    _build, changed = exact_indexes(coll.database, coll.name, declared)
    cut = dict(changed)
    absent = []
    for keys in declared:
        keys = _key(keys)
        if keys in have:
            continue
        if keys in cut:
            instead = cut[keys]
            reason = ("withheld: this server's index keys lose the order of numbers beyond 1e±128"
                      + (f" ({index_name(instead)} instead)" if instead else ""))
        elif not info:
            reason = "the collection does not exist here (yet)"
        else:
            reason = "not built: `sci-ingest indexes` builds it"
        absent.append({"index": index_name(keys), "reason": reason})
    return here, absent


# ------------------------------------------------------------------ building the curated indexes
def present_indexes(db) -> dict[str, set[tuple]]:
    """The key patterns of the indexes each existing collection has."""
    out: dict[str, set[tuple]] = {}
    with db_errors(f"listing the indexes of {db.name}"):
        names = set(db.list_collection_names())
        for coll in names:
            out[coll] = {_key(info["key"]) for info in db[coll].index_information().values()}
    return out


def build_indexes(db, only: list[str] | None = None, dry_run: bool = False) -> list[dict]:
    """Create the missing curated indexes (of ``only`` collections, default all); one row per index."""
    rows = []
    have = present_indexes(db)
    for name, curated in all_curated().items():
        if only and name not in only:
            continue
        if curated.source != "data" and name not in have:
            rows.append({"collection": name, "index": "-", "outcome": "skipped: the output was never published"})
            continue
        existing = have.get(name, set())
        build, changed = exact_indexes(db, name, curated.indexes)
        for keys, instead in changed:
            row = {"collection": name, "index": index_name(keys), "keys": [list(k) for k in keys],
                   "outcome": "withheld: this server's index keys lose the order of numbers beyond 1e±128"
                              + (f"; {index_name(instead)} instead" if instead else "")}
            if tuple(keys) in existing and not dry_run:
                with db_errors(f"dropping index {index_name(keys)} on {name}"):
                    db[name].drop_index(list(keys))
                row["outcome"] += "; the existing one dropped"
            rows.append(row)
        for keys in build:
            row = {"collection": name, "index": index_name(keys), "keys": [list(k) for k in keys]}
            if tuple(keys) in existing:
                row["outcome"] = "present"
            elif dry_run:
                row["outcome"] = "missing"
            else:
                try:
                    with db_errors(f"creating index {index_name(keys)} on {name}", feature="this index"):
                        db[name].create_index(list(keys))
                    row["outcome"] = "created"
                except UnsupportedFeature as exc:
                    row["outcome"] = f"refused: {exc}"
            rows.append(row)
    return rows
