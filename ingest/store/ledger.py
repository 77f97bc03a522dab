"""The ingestion ledger: one ``ingest_files`` document per input file, and what its content is.

Fields of an entry (``_id`` = the resolved path):

* ``status``: ``loading`` while a loader holds it, then ``loaded`` | ``failed``;
* ``sha256``, ``size``, ``mtime``, ``format``, ``records`` (counts by kind): the
  version of the file whose documents are in the database (a ``failed`` entry
  keeps the last loaded version's, if there was one; ``failed_sha256`` is the
  content that failed);
* ``pending`` {sha256, size, mtime, format}: the version being written (partial
  until the entry says ``loaded``);
* ``drop``: contents this path no longer stands for (an old version, an
  abandoned attempt); their documents are deleted unless another loaded path
  has the same content;
* ``owner`` {id, run_id, host, pid, started} and ``lease_until``: the loader
  holding the file (``ingest.load.claims``);
* ``duplicate_of``: the path whose identical content is already loaded;
* inserted, existing, updated, error, errors (a sample of every bad record:
  line and reason), warnings, seconds (parse / load / total), run_id, finished
  (UTC).

A file whose size and mtime match a ``loaded`` entry is skipped without being
read; otherwise its sha256 decides.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pymongo import UpdateOne

from ingest.store.catalog import LEDGER
from ingest.fileio import open_regular
from ingest.store.mongo import Retry, durable

#: Fields the planner reads to decide, per file, whether it must be loaded.
PLAN_FIELDS = {"status": 1, "size": 1, "mtime": 1, "sha256": 1, "records": 1, "format": 1, "run_id": 1}
#: Paths per ``$in`` query: the embedded server's cost per element grows with the list (measured on
#: a ledger of 2,000 entries: 0.11 ms per element at 50, 0.16 at 100, 1 ms at 1,000, 4.4 at 5,000).
_LOOKUP_CHUNK = 50
_MARK_CHUNK = 1000


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class Ledger:
    """Reads and writes of ``ingest_files``, each through the retry policy."""

    def __init__(self, db, retry: Retry | None = None):
        self.coll = db[LEDGER]
        self.retry = retry or Retry(0)

    def get(self, key: str) -> dict | None:
        return self.retry("reading the ledger", self.coll.find_one, {"_id": key})

    def lookup(self, keys: list[str], fields: dict | None = None) -> dict[str, dict]:
        """The entries of many paths, in few round trips: {path: entry} (``$in`` in chunks of
        50: linear in the paths asked for, whatever the ledger's size)."""
        found: dict[str, dict] = {}
        for start in range(0, len(keys), _LOOKUP_CHUNK):
            chunk = keys[start:start + _LOOKUP_CHUNK]
            docs = self.retry("reading the ledger", lambda: list(
                self.coll.find({"_id": {"$in": chunk}}, fields or PLAN_FIELDS)))
            found.update((d["_id"], d) for d in docs)
        return found

    def loaded_with_sha(self, sha256: str, exclude: str | None = None) -> dict | None:
        """Another path already loaded with this content, if any (its records too)."""
        query: dict = {"sha256": sha256, "status": "loaded"}
        if exclude:
            query["_id"] = {"$ne": exclude}
        return self.retry("reading the ledger", self.coll.find_one, query,
                          {"_id": 1, "records": 1, "format": 1})

    def holds_content(self, sha256: str, exclude: str | None = None) -> bool:
        """Whether another path's entry stands for this content (``loaded``, or ``failed`` after
        a later version failed: its loaded version stays in the database)."""
        query: dict = {"sha256": sha256}
        if exclude:
            query["_id"] = {"$ne": exclude}
        return self.retry("reading the ledger", self.coll.find_one, query, {"_id": 1}) is not None

    def contents_loaded(self, shas: list[str]) -> set[str]:
        """Which of ``shas`` some path is loaded with."""
        found: set[str] = set()
        for start in range(0, len(shas), _LOOKUP_CHUNK):
            chunk = shas[start:start + _LOOKUP_CHUNK]
            found.update(d["sha256"] for d in self.retry("reading the ledger", lambda: list(self.coll.find(
                {"sha256": {"$in": chunk}, "status": "loaded"}, {"sha256": 1, "_id": 0}))))
        return found

    def held(self, query: dict) -> list[dict]:
        """Entries a loader holds (or held when it stopped), that also match ``query``
        (by the ``owner.id`` index: owner ids are non-empty strings)."""
        return self.retry("reading the ledger", lambda: list(self.coll.find({"owner.id": {"$gt": ""}, **query})))

    def dropping(self) -> list[dict]:
        """Entries nobody holds that still list contents to drop (by the ``drop`` index)."""
        return [e for e in self.retry("reading the ledger", lambda: list(self.coll.find({"drop": {"$gt": ""}})))
                if not e.get("owner")]

    def update(self, key: str, owner_id: str | None, set_fields: dict | None = None,
               unset: tuple[str, ...] = (), push_drop: list[str] | None = None, journaled: bool = False) -> bool:
        """Update the entry of ``key`` if ``owner_id`` still holds it (any entry when None).

        ``journaled``: acknowledged only once the journal holds it and every write
        before it (see :func:`ingest.store.mongo.durable`): for the entry's final state.
        """
        query: dict = {"_id": key}
        if owner_id is not None:
            query["owner.id"] = owner_id
        change: dict = {}
        if set_fields:
            change["$set"] = set_fields
        if unset:
            change["$unset"] = {name: "" for name in unset}
        if push_drop:
            change["$addToSet"] = {"drop": {"$each": push_drop}}
        coll = durable(self.coll) if journaled else self.coll
        result = self.retry(f"writing the ledger entry of {key}", coll.update_one, query, change)
        return result.matched_count == 1

    def remove(self, key: str, owner_id: str) -> None:
        """Delete an entry that never got further than its claim (it stands for nothing)."""
        self.retry(f"removing the ledger entry of {key}", self.coll.delete_one,
                   {"_id": key, "owner.id": owner_id, "status": {"$exists": False}})

    def pull_drop(self, key: str, sha256: str) -> None:
        """The documents of ``sha256`` are gone: journaled, so the deletion is durable first."""
        self.retry(f"writing the ledger entry of {key}", durable(self.coll).update_one,
                   {"_id": key}, {"$pull": {"drop": sha256}})

    # ---------------------------------------------------------------- what analyses have seen
    # ``analysed.<analysis>`` of an entry: the content (sha256) of the path that the analysis's
    # published output covers.  An entry whose ``sha256`` differs from it (new, or replaced)
    # is pending for that analysis.  Entries without ``sha256`` (a first load that failed)
    # stand for no documents and are never pending.

    def analysis_pending(self, name: str, source: str, limit: int) -> list[dict]:
        """Up to ``limit`` entries whose content ``name`` has not seen: {_id, sha256, analysed}.

        Only files that wrote into ``source`` (the analysis's input collection), or whose
        earlier content the analysis saw (it may have had documents there).
        """
        query = {"status": {"$in": ["loaded", "failed"]}, "sha256": {"$exists": True},
                 "$or": [{f"records.{source}": {"$gt": 0}}, {f"analysed.{name}": {"$exists": True}}],
                 "$expr": {"$ne": [f"$analysed.{name}", "$sha256"]}}  # fmt: skip
        return self.retry("reading the ledger", lambda: list(
            self.coll.find(query, {"sha256": 1, f"analysed.{name}": 1}).limit(limit)))

    def count_loaded(self, source: str) -> int:
        """How many loaded files wrote into ``source``."""
        return self.retry("reading the ledger", self.coll.count_documents, {
            "status": {"$in": ["loaded", "failed"]}, "sha256": {"$exists": True}, f"records.{source}": {"$gt": 0}})

    def input_bytes_per_document(self, collection: str, sample: int = 200) -> float | None:
        """Bytes of input file per document written, over up to ``sample`` loaded files that wrote
        into ``collection`` (all their documents counted); None when no such file is on record."""
        entries = self.retry("reading the ledger", lambda: list(self.coll.find(
            {"status": "loaded", f"records.{collection}": {"$gt": 0}, "size": {"$gt": 0}},
            {"size": 1, "records": 1, "_id": 0}).limit(sample)))
        entries = [e for e in entries if isinstance(e.get("records"), dict)
                   and isinstance(e.get("size"), (int, float)) and not isinstance(e.get("size"), bool)]
        documents = sum(n for e in entries for n in e["records"].values()
                        if isinstance(n, int) and not isinstance(n, bool) and n > 0)
        size = sum(e["size"] for e in entries)
        return size / documents if documents else None

    def loaded_contents(self) -> list[str]:
        """The contents (sha256) whose documents are in the database now."""
        return self.retry("reading the ledger", lambda: [d["sha256"] for d in self.coll.find(
            {"status": {"$in": ["loaded", "failed"]}, "sha256": {"$exists": True}}, {"sha256": 1, "_id": 0})])

    def mark_analysed(self, name: str, entries: list[tuple[str, str]]) -> None:
        """``name`` has seen these (path, sha256): each marked only if the path still has that content."""
        for start in range(0, len(entries), _MARK_CHUNK):
            ops = [UpdateOne({"_id": path, "sha256": sha}, {"$set": {f"analysed.{name}": sha}})
                   for path, sha in entries[start:start + _MARK_CHUNK]]
            self.retry("marking the ledger", self.coll.bulk_write, ops, ordered=False)

    def mark_contents_analysed(self, name: str, contents: list[str]) -> None:
        """``name`` has seen every path whose content is one of ``contents`` (a whole-collection run)."""
        for start in range(0, len(contents), 5 * _MARK_CHUNK):
            chunk = contents[start:start + 5 * _MARK_CHUNK]
            self.retry("marking the ledger", self.coll.update_many, {"sha256": {"$in": chunk}},
                       [{"$set": {f"analysed.{name}": "$sha256"}}])
