"""Records shared between files: every holder's version kept, the newest one in the collection.

Materials and tasks are keyed by their natural ids (``material_id``, ``task_id``, ...),
so several loaded files can hold the same record, in the same or in different
versions.  The rule, which every path of the loader keeps (a first load, a reload
of a changed file, a rollback, ``--force``, the recovery after a crash, two loads
at once):

* a record stays in its collection as long as at least one loaded content holds it;
* the version stored is the *newest* holder's: the one whose file has the latest
  modification time, ties (files unpacked from one archive, ``cp -p``) broken by the
  content's sha256, then the path (:func:`version_order`);
* when that content goes (its file changed, failed, was rolled back, or its
  ledger entry removed), the record falls back to the next holder's version; it
  is deleted only when no holder is left.

The stored version is thus a function of the loaded files alone, not of the
order or the timing of the loads that brought them: a database after any crash,
retry or concurrent load equals the one a clean load of the same files gives.

How: every holder's version of a record is kept in ``ingest_versions`` (``_id``
``{c: collection, k: key, s: sha256}``, ``o``: its order, ``z``: the document as
zlib-compressed BSON, a fraction of its size).  Writers insert their versions,
then insert the record, or replace it only where the stored version's order is
not newer (``_source.order``), in one conditional write that races safely with
any other writer.  A content that goes deletes its versions, then *settles*
the records it was the stored version of: each is compared with the newest
version left and replaced or deleted with a compare-and-set on the stored
version's sha256, then read again until it agrees.  Writes and settles that
overlap converge on the newest version whatever their interleaving.
"""

from __future__ import annotations

import datetime as dt
import zlib

import bson
from pymongo import DeleteOne, InsertOne, ReplaceOne

from ingest.sharding.collections import key_filter
from ingest.store.catalog import MATERIALS, META, TASKS, VERSIONS
from ingest.store.mongo import compressed_bson, conditional_writes, insert_new
from ingest.store.retry import Retry

__all__ = ["RECORD_COLLECTIONS", "version_order", "write_records", "write_versions", "replace_older", "drop_records",
           "settle", "ensure_versions"]

#: The collections whose documents are records keyed by a natural id.
RECORD_COLLECTIONS = (MATERIALS, TASKS)
#: Keys read per query (the embedded server's ``$in`` costs grow with the list's square).
_CHUNK = 50
#: Rounds of compare-and-set before a record that keeps changing is reported.
_MAX_ROUNDS = 50


def version_order(mtime_ns: int, sha256: str, path: str) -> str:
    """The order of a content's versions: its file's mtime (UTC, ns), then sha256, then path.

    A string that sorts like the tuple, so that the server compares it (``$lte``).
    """
    seconds, nanos = divmod(int(mtime_ns), 1_000_000_000)
    try:
        when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
        stamp = (f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when.hour:02d}:{when.minute:02d}:"
                 f"{when.second:02d}.{nanos:09d}Z")
    except OverflowError:  # beyond year 9999 (or before year 1): a clock that cannot be true
        stamp = "9999-12-31T23:59:59.999999999Z" if seconds > 0 else "0001-01-01T00:00:00.000000000Z"
    return f"{stamp} {sha256[:16]} {path}"


def version_entry(coll: str, doc: dict) -> dict:
    source = doc["_source"]
    return {"_id": {"c": coll, "k": doc["_id"], "s": source["sha256"]}, "o": source["order"],
            "z": compressed_bson(doc)}


def document_of(version: dict) -> dict:
    return bson.decode(zlib.decompress(version["z"]))


def write_records(db, coll: str, docs: list[dict], retry: Retry) -> tuple[int, int, int]:
    """Write the records ``docs`` (each naming its content and order in ``_source``).

    Returns (inserted, updated, existing): records new to the collection, records
    whose stored version this one replaced, and records whose stored version is
    this one already or a newer holder's.  Idempotent.
    """
    unique = list({doc["_id"]: doc for doc in docs}.values())  # a key twice in a batch: the later line
    write_versions(db, coll, unique, retry)
    inserted, held = retry(f"writing {coll}", insert_new, db[coll], unique)
    new = modified = unchanged = 0
    if held:
        new, modified, unchanged = replace_older(db, coll, [unique[i] for i in held], retry)
    return inserted + new, modified, unchanged + len(docs) - len(unique)


def write_versions(db, coll: str, docs: list[dict], retry: Retry) -> None:
    """Keep each record's version of its content (before the record itself is written)."""
    versions = [version_entry(coll, doc) for doc in docs]
    _, again = retry(f"writing versions of {coll}", insert_new, db[VERSIONS], versions)
    if again:  # this content written before (a retry), or a key twice in one file: the later one
        # "_id.k" adds nothing to the match but lets the embedded server use its index: it scans the
        # collection for a subdocument _id (measured: 97 ms a replace among 3,000 versions, 3 ms so)
        retry(f"writing versions of {coll}", db[VERSIONS].bulk_write,
              [ReplaceOne({"_id": versions[i]["_id"], "_id.k": versions[i]["_id"]["k"]}, versions[i])
               for i in again], ordered=True)  # fmt: skip


def replace_older(db, coll: str, docs: list[dict], retry: Retry) -> tuple[int, int, int]:
    """Records already in the collection: each replaces the stored version unless that one is
    newer (or the same); (inserted: gone meanwhile, replaced, kept)."""
    # not newer: an order not greater than this one's, or none (loaded before versions were kept)
    ops = [ReplaceOne({**key_filter(coll, doc), "_source.order": {"$not": {"$gt": doc["_source"]["order"]}}},
                      doc, upsert=True) for doc in docs]
    new, modified, unchanged, _deleted, newer = retry(f"writing {coll}", conditional_writes, db[coll], ops)
    return new, modified, unchanged + newer


def drop_records(db, sha256: str, retry: Retry) -> int:
    """Content ``sha256`` no longer holds its records: forget its versions, and let the records
    it was the stored version of fall back to their next holder (or go).  The records deleted.

    Idempotent: after a crash half-way, running it again finishes it (the records still
    stored in this content's version are found by ``_source.sha256``).
    """
    deleted = 0
    for coll in RECORD_COLLECTIONS:
        stored = retry(f"reading {coll}", lambda coll=coll: [d["_id"] for d in db[coll].find(
            {"_source.sha256": sha256}, {"_id": 1})])
        retry(f"removing versions of {sha256[:12]}", db[VERSIONS].delete_many, {"_id.s": sha256, "_id.c": coll})
        deleted += settle(db, coll, stored, retry)
    return deleted


def settle(db, coll: str, keys: list, retry: Retry) -> int:
    """Make each record of ``keys`` its newest holder's version, or delete it when none is left.

    Compare-and-set on the stored version's sha256, then read again, until the
    collection agrees with the versions; returns the records deleted.
    """
    deleted = 0
    pending = list(dict.fromkeys(keys))
    for _ in range(_MAX_ROUNDS):
        if not pending:
            return deleted
        changed: list = []
        for start in range(0, len(pending), _CHUNK):
            chunk = pending[start:start + _CHUNK]
            ops, keys_changed = _settle_ops(db, coll, chunk, retry)
            if ops:
                deleted += retry(f"settling {coll}", conditional_writes, db[coll], ops)[3]
                changed += keys_changed
        pending = changed  # what was changed is read again: another writer may have moved meanwhile
    raise RuntimeError(f"{coll}: {len(pending)} record(s) kept changing while they were settled")


def _settle_ops(db, coll: str, keys: list, retry: Retry) -> tuple[list, list]:
    newest: dict = {}
    for version in retry(f"reading versions of {coll}", lambda: list(db[VERSIONS].find(
            {"_id.k": {"$in": keys}, "_id.c": coll}))):
        key = version["_id"]["k"]
        if key not in newest or version["o"] > newest[key]["o"]:
            newest[key] = version
    stored = {d["_id"]: (d.get("_source") or {}).get("sha256") for d in retry(f"reading {coll}", lambda: list(
        db[coll].find({"_id": {"$in": keys}}, {"_source.sha256": 1})))}
    ops: list[DeleteOne | InsertOne | ReplaceOne] = []
    changed = []
    for key in keys:
        target = newest.get(key)
        want = target["_id"]["s"] if target else None
        have = stored.get(key)
        if key not in stored and target is None or key in stored and have == want:
            continue
        changed.append(key)
        if target is None:
            ops.append(DeleteOne({"_id": key, "_source.sha256": have}))
        elif key not in stored:
            ops.append(InsertOne(document_of(target)))
        else:
            doc = document_of(target)
            ops.append(ReplaceOne({**key_filter(coll, doc), "_source.sha256": have}, doc))
    return ops, changed


#: The order given to the records of a database loaded before versions were kept: older than any
#: file's, so that the next holder loaded replaces them.
_UPGRADED = "0000-00-00T00:00:00.000000000Z"


def ensure_versions(db, retry: Retry) -> int:
    """Once per database: give every record stored before versions were kept its version.

    Such a database kept one version per record (the last loaded); the other
    holders' versions were never stored, so each record gets the version it
    has, ordered before every file's (``sci-ingest load --force`` on the folders
    records every holder).  A marker in ``ingest_meta`` makes this a single
    read afterwards.  Returns how many records were given a version.
    """
    marker = {"_id": "record_versions"}
    if retry("reading ingest_meta", db[META].find_one, marker) is not None:
        return 0
    given = 0
    unversioned = {"_source.order": {"$exists": False}, "_source.sha256": {"$exists": True}}
    for coll in RECORD_COLLECTIONS:
        while part := retry(f"reading {coll}", lambda coll=coll: list(db[coll].find(unversioned).limit(1000))):
            for doc in part:
                source = doc["_source"]
                source["order"] = f"{_UPGRADED} {str(source['sha256'])[:16]} {source.get('path', '')}"
            write_versions(db, coll, part, retry)
            retry(f"writing {coll}", conditional_writes, db[coll], [
                ReplaceOne({**key_filter(coll, doc), "_source.order": {"$exists": False}}, doc) for doc in part])
            given += len(part)
    retry("writing ingest_meta", db[META].replace_one, marker, {**marker, "records_given_a_version": given},
          upsert=True)
    return given
