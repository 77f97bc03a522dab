"""The index policy: which indexes a server is given, so that every client's answer equals a
collection scan's, and which indexes a collection has.

* :func:`numeric_keys_exact`: SecantusDB 0.7 encodes a number's index key with a
  one-byte decimal exponent; beyond 1e±128 every number collapses to one key that sorts
  above all positive numbers.  E-values such as 1e-198 are common, so an index range
  ``evalue < 1e-20`` there silently loses them (measured: 129 of the samples' 152 such hits
  found).  The flaw is detected, never assumed from a version: the server's probe
  (:mod:`ingest.store.differences`, asked once per server process, on any server) writes two
  numbers (1e-200 and 1) to a scratch collection, indexes them and asks for ``< 1e-100``.
  A server the probe could not ask (a read-only user) is taken to have the flaw if it is a
  SecantusDB, not otherwise.
* :func:`exact_indexes` / :func:`ensure_exact_indexes`: where the flaw is found, each declared index
  is cut before its first float field (a range over it then scans, slower but right, for every
  client: mongosh, pymongo, DuckDB); a server without the flaw gets every index as declared.
  (`sci-ingest query` also runs a range over a float path that the server would walk through an
  index with ``hint: {$natural: 1}`` there: :mod:`ingest.query.compile`.)
* :func:`build_indexes` creates each curated index that is missing (by key pattern, so an
  index of the same keys under another name counts as present), never drops one it did not
  withhold, and reports per index ``present``, ``created`` or ``refused`` with the server's reason (a
  server that lacks a kind of index is reported, never worked around).  The data
  collections' indexes are :data:`ingest.store.catalog.QUERY_INDEXES`; the analyses' outputs get
  theirs when they are published, and here again for the outputs that exist (one never
  published is not created empty).
* :func:`index_state`: the indexes a collection has, and those declared that it has not, with why.
"""

from __future__ import annotations

from typing import Any

from ingest.errors import UnsupportedFeature
from ingest.store.curated import UnknownCollection, all_curated, get, index_name
from ingest.store.differences import FLOAT_INDEX, probe
from ingest.store.mongo import db_errors
from ingest.store.servers import drop_indexes, ensure_indexes, server_of

__all__ = ["numeric_keys_exact", "exact_indexes", "ensure_exact_indexes", "withheld_note",
           "index_state", "present_indexes", "build_indexes"]


def numeric_keys_exact(db, info) -> bool:
    """Whether a range over an index on numbers finds every number (False: SecantusDB's flaw), as the
    server's probe found (:func:`ingest.store.differences.probe`)."""
    found = probe(db)
    if found.probed:
        return not found.has(FLOAT_INDEX)
    return info.kind != "SecantusDB"  # not asked (a read-only user): the safe side where the flaw is known


# ------------------------------------------------------------------ indexes that answer exactly
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
    rows: list[dict] = []
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
            row: dict[str, Any] = {"collection": name, "index": index_name(keys), "keys": [list(k) for k in keys],
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
