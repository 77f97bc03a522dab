"""How a query runs on the server at hand: its plan, the scan warning, the paths that need an exact scan.

* :func:`explain` runs ``explain`` (``executionStats``) and reads the winning plan
  whatever its shape: MongoDB's classic tree (``FETCH`` over ``IXSCAN``), its
  slot-based engine (``winningPlan.queryPlan``), the express path (``EXPRESS_IXSCAN``,
  ``IDHACK``), a sharded cluster (``winningPlan.shards[*]``) and the embedded server's
  (which mimics the classic tree): :class:`Plan` names the index used or ``COLLSCAN``,
  and says how many documents and index keys were examined and how many returned.
* :func:`scan_warning`: a query that no index serves (a ``COLLSCAN``) on a collection of
  at least :data:`SCAN_WARN_DOCUMENTS` documents (``SCI_INGEST_SCAN_WARN``; default
  100,000) is warned about on stderr before it runs, with the indexes there are.
* :func:`numeric_paths` and :func:`unsafe_index`: where the server's index keys lose the order of
  numbers (:func:`ingest.store.indexes.numeric_keys_exact`), the float (or raw) paths a query ranges
  over or sorts on, and the index the server would walk for them; :mod:`ingest.query.compile` then
  runs the query with ``hint: {$natural: 1}`` (a collection scan, so the answer is right) and a note
  says so.  Equality (``==``, ``in``) stays on the index: the server re-checks every candidate.
  The indexes themselves (which are built, withheld, present) are :mod:`ingest.store.indexes`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ingest.config import setting
from ingest.store.mongo import db_errors

__all__ = ["SCAN_WARN_DOCUMENTS", "Plan", "explain", "read_plan", "scan_warning", "numeric_paths", "unsafe_index",
           "paths_and_ops"]

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
