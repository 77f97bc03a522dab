"""The keys of the ``materials`` collection, and moving a database that holds the old ones.

One namespace per kind of key (:mod:`ingest.parsers.materials`, key scheme 2): a typed record's
key is ``<kind>:<id>`` (``entry:mp-1``, ``xas:mp-1-K``, ``phonon:mp-1``) and always holds a ``:``;
a plain material's key is its id with ``%`` written ``%25`` and ``:`` written ``%3A``
(:func:`~ingest.parsers.materials.plain_key`), so it never holds one.  Before (key scheme 1) a
plain id was its own key whatever its text: ``{"material_id": "entry:mp-1"}`` took the key of
the entry ``entry:mp-1`` and replaced it, and only one of the two was stored.

:func:`ensure_key_scheme` runs at each load, before any file is written.  It reads one
document (``ingest_meta`` ``{_id: "key_scheme"}``) once the database is on scheme 2; a database
without that marker is looked at once: none of its collections of records (a new database)
costs one listing of collection names; otherwise the plain versions and records stored under a
key that holds ``:`` or ``%`` are found (one query on ``ingest_versions``, the versions whose key
starts with a typed prefix decoded to tell a typed record from a plain one, and one on
``materials``) and moved to their scheme-2 key:

1. a plain record stored under an old key whose version is missing gets one (as
   :func:`ingest.load.records.ensure_versions` would);
2. each plain version under an old key is written again under its new key (the same
   content, order and document, re-keyed), then the old version is deleted;
3. every old and new key is *settled* (:func:`ingest.load.records.settle`): the new key gets its
   newest plain version, and the old one goes back to its typed record when a loaded file
   holds one, or goes.

Each step can be run again (a crash half-way, two loads at once): the marker is written last.
What the database never held cannot be brought back: under scheme 1 a file that held both a typed
record and a plain id of the same text kept only the later line's; ``sci-ingest load --force``
on that file loads both.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import bson
from pymongo import DeleteOne

from ingest.documents import from_document
from ingest.load.records import document_of, settle, version_entry
from ingest.parsers.materials import PLAIN_TYPES, TYPED_KINDS, classify
from ingest.store.catalog import MATERIALS, META, VERSIONS
from ingest.store.mongo import insert_new
from ingest.store.retry import Retry
from ingest.timing import utcnow

__all__ = ["KEY_SCHEME", "Rekeyed", "ensure_key_scheme", "old_keys_held"]

#: The scheme the loader writes: 2 is one namespace per kind of key.
KEY_SCHEME = 2
_MARKER = {"_id": "key_scheme"}
_OLD_KEY = {"$regex": "[:%]"}  # a plain key of scheme 1 that scheme 2 writes otherwise
_TYPED_PREFIXES = tuple(kind + ":" for kind in TYPED_KINDS)
_CHUNK = 500  # versions moved per round trip
_PATHS_KEPT = 50  # files named in the marker


@dataclass
class Rekeyed:
    """What moving a database to scheme 2 did: plain records re-keyed (old key -> new key, the
    first few) and the files that held them."""

    moved: dict[str, str] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)

    def note(self) -> str:
        first = next(iter(self.moved.items()))
        return (f"note: materials moved to key scheme {KEY_SCHEME} (one namespace per kind of key): "
                f"{len(self.moved):,} plain material id(s) holding ':' or '%' re-keyed, such as "
                f"{first[0]!r} -> {first[1]!r}, held by {len(self.paths):,} file(s) (named in ingest_meta "
                f"key_scheme); a file that held a typed record and a plain id of the same text kept only one "
                f"of them: `sci-ingest load --force FILE` loads both (docs/loading.md)")


def ensure_key_scheme(db, retry: Retry) -> Rekeyed | None:
    """Once per database: move plain records stored under a scheme-1 key to their scheme-2 key.

    None when the database is on scheme 2 already (one read by ``_id``); else what was moved
    (nothing for a new database) after writing the marker."""
    held = retry("reading ingest_meta", db[META].find_one, _MARKER)
    if held is not None and held.get("version", 0) >= KEY_SCHEME:
        return None
    names = retry("listing collections", db.list_collection_names,
                  filter={"name": {"$in": [MATERIALS, VERSIONS]}})
    done = _rekey(db, retry) if names else Rekeyed()
    retry("writing ingest_meta", db[META].replace_one, _MARKER, {
        **_MARKER, "version": KEY_SCHEME, "rekeyed": len(done.moved), "files": done.paths[:_PATHS_KEPT],
        "at": utcnow()}, upsert=True)
    return done


def old_keys_held(db, retry: Retry) -> int:
    """How many plain records and versions the database holds under a scheme-1 key (a full look:
    for tests and checks, never on the load's path)."""
    return len(_stored_old(db, retry)) + len(_old_versions(db, retry))


def _new_key(doc: dict) -> str:
    """The scheme-2 key of a stored plain document: the loader's own classification of its record."""
    return classify(from_document(doc))[2]


def _stored_old(db, retry: Retry) -> list[dict]:
    """Plain records in ``materials`` whose key is not their scheme-2 key."""
    found = retry("reading materials", lambda: list(db[MATERIALS].find(
        {"_id": _OLD_KEY, "_ingest.type": {"$in": list(PLAIN_TYPES)}})))
    return [doc for doc in found if _new_key(doc) != doc["_id"]]


def _old_versions(db, retry: Retry) -> list[tuple[dict, dict]]:
    """(version, its document) of every plain version whose key is not its scheme-2 key."""
    out = []
    cursor = retry("reading ingest_versions", lambda: list(db[VERSIONS].find(
        {"_id.c": MATERIALS, "_id.k": _OLD_KEY})))
    for version in cursor:
        key = version["_id"]["k"]
        if key.startswith(_TYPED_PREFIXES):  # a typed record's, or a plain one that took its key
            meta = bson.decode(zlib.decompress(version["z"])).get("_ingest") or {}
            if meta.get("type") not in PLAIN_TYPES:
                continue
        doc = document_of(version)
        if _new_key(doc) != key:
            out.append((version, doc))
    return out


def _rekey(db, retry: Retry) -> Rekeyed:
    done = Rekeyed()
    # 1. a stored plain record under an old key keeps a version (insert only: never replaces one)
    stored = _stored_old(db, retry)
    if stored:
        retry("writing ingest_versions", insert_new, db[VERSIONS], [version_entry(MATERIALS, doc) for doc in stored])
    # 2. each plain version under an old key (those of step 1 too) is written under its new key,
    #    then the old one goes
    olds: list[str] = []
    news: list[str] = []
    moves = _old_versions(db, retry)
    for start in range(0, len(moves), _CHUNK):
        part = moves[start:start + _CHUNK]
        again = []
        for version, doc in part:
            old = version["_id"]["k"]
            new = _new_key(doc)
            doc["_id"] = new
            doc["_ingest"]["key"] = new
            again.append({"_id": {**version["_id"], "k": new}, "o": version["o"],
                          "z": version_entry(MATERIALS, doc)["z"]})
            olds.append(old)
            news.append(new)
            done.moved.setdefault(old, new)
            path = (doc.get("_source") or {}).get("path")
            if path and path not in done.paths:
                done.paths.append(path)
        retry("writing ingest_versions", insert_new, db[VERSIONS], again)  # one there already: kept
        # "_id.k" lets the embedded server use its index (it scans for a subdocument _id)
        retry("removing old versions", db[VERSIONS].bulk_write,
              [DeleteOne({"_id": version["_id"], "_id.k": version["_id"]["k"]}) for version, _ in part])
    # 3. each key is made its newest holder's version (the old key's typed record comes back)
    settle(db, MATERIALS, list(dict.fromkeys(olds + news)), retry)
    return done
