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
  (UTC);
* ``changed_at``: the server's clock when the entry last reached a final state or had a
  dropped content's documents deleted (``$currentDate``, in the same write; a batch's
  new entries get it right after their insert, so an entry without it counts as changed);
  ``previous``: the last contents this path stood for before its current one (at most
  :data:`PREVIOUS_KEPT`).  Together they tell an analysis what changed since it last read
  (``analytics.increment``) without reading the whole ledger.

A file whose size and mtime match a ``loaded`` entry is skipped without being
read; otherwise its sha256 decides.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ingest.fileio import open_regular
from ingest.store.catalog import LEDGER
from ingest.store.mongo import durable
from ingest.store.retry import Retry
from ingest.store.servers import Traits, traits

#: Fields the planner reads to decide, per file, whether it must be loaded.
PLAN_FIELDS = {"status": 1, "size": 1, "mtime": 1, "sha256": 1, "records": 1, "format": 1, "run_id": 1}
#: Contents remembered per path in ``previous`` (the groups of a replaced content are recomputed
#: from it; a path replaced more often between two analyses is rare, and the oldest go first).
PREVIOUS_KEPT = 32


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class Ledger:
    """Reads and writes of ``ingest_files``, each through the retry policy."""

    def __init__(self, db, retry: Retry | None = None, shape: Traits | None = None):
        self.coll = db[LEDGER]
        self.retry = retry or Retry(0)
        self._shape = shape  # how lists are asked for (ingest.store.servers.traits; asked once, when first needed)

    def _chunks(self, values: list) -> list[list]:
        """``values`` in the ``$in`` lists the server answers best (ingest.store.servers.Traits)."""
        if self._shape is None:
            self._shape = self.retry("asking the server what it is", traits, self.coll.database)
        size = self._shape.in_values
        return [values[start:start + size] for start in range(0, len(values), size)]

    def get(self, key: str) -> dict | None:
        return self.retry("reading the ledger", self.coll.find_one, {"_id": key})

    def lookup(self, keys: list[str], fields: dict | None = None) -> dict[str, dict]:
        """The entries of many paths, in few round trips: {path: entry} (``$in`` lists as the server
        answers them best: linear in the paths asked for, whatever the ledger's size)."""
        found: dict[str, dict] = {}
        for chunk in self._chunks(keys):
            docs = self.retry("reading the ledger", lambda chunk=chunk: list(
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
        for chunk in self._chunks(shas):
            found.update(d["sha256"] for d in self.retry("reading the ledger", lambda chunk=chunk: list(self.coll.find(
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
            change["$push"] = {"previous": {"$each": push_drop, "$slice": -PREVIOUS_KEPT}}
        if push_drop or (set_fields and "status" in set_fields):  # a final state: what analyses follow
            change["$currentDate"] = {"changed_at": True}
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
                   {"_id": key}, {"$pull": {"drop": sha256}, "$currentDate": {"changed_at": True}})

    def stamp(self, keys: list[str]) -> None:
        """Set ``changed_at`` of entries written whole (a batch's inserts cannot take the server's clock)."""
        for chunk in self._chunks(keys):
            self.retry("stamping the ledger", self.coll.update_many, {"_id": {"$in": chunk}},
                       {"$currentDate": {"changed_at": True}})
