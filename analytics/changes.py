"""What changed since a reader last read: the ledger's stamps against the reader's state.

A *reader* is an analysis (its name) or an expectation suite (``suite:<name>``).  Every final
write of a ledger entry (a file loaded, failed, replaced, rolled back, its old content's
documents deleted) stamps it with the server's clock (``changed_at``, in the same write) and keeps
the contents the path stood for before (``previous``): :mod:`ingest.store.ledger`.  Each reader
keeps one document in ``analysis_state``:

* ``since``: the server's clock when it last began reading its sources;
* ``seen``: the entries (path, content) stamped within :data:`MARGIN` before that, and visible
  then (so read then);
* what the reader adds: an analysis the run that last published its output (``published``) and
  the output's name, a suite the run whose verdict stands (``verdict``) and what it read.

:func:`changes` asks the ledger for the entries stamped since ``since - MARGIN`` (an index seek:
in proportion to what changed, not to the ledger) and keeps the ones not seen that touch the
reader's sources (they wrote into one, or they replaced a content whose documents may have been
there).  Entries not stamped yet (a batch's, between its insert and its stamp; a ledger from
before the stamps) count as changed, and the old ones are stamped then.  The margin covers a
write stamped just before ``since`` but visible only after the reader's first read, and a server
clock stepped back by less than that.  Writes made to the collections by anything but
``sci-ingest load`` are not in the ledger: a whole run reads everything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ingest.documents import prefix_range, search_id_prefix
from ingest.store.catalog import ANALYSIS_STATE, HITS, HOLDING, LEDGER, SEARCHES
from ingest.store.ledger import Ledger
from ingest.store.retry import Retry

__all__ = ["Changes", "changes", "record_state", "read_state", "content_selector", "count_loaded",
           "contents_writing", "MARGIN", "SEEN_MAX"]
#: The fields of a ledger entry :func:`changes` reads.
CHANGE_FIELDS = {"sha256": 1, "status": 1, "records": 1, "previous": 1, "changed_at": 1, "owner": 1,
                 "duplicate_of": 1}

#: Entries stamped this long before a reader's read are looked at again by its next run (unless it
#: saw them with the same content).
MARGIN = timedelta(seconds=10)
#: At most this many entries of the margin are remembered as seen (more: they are looked at again).
SEEN_MAX = 20_000


@dataclass
class Changes:
    """What changed for one reader since its state was recorded."""

    #: the server's clock when this run began (before it read anything)
    now: datetime
    #: the reader's recorded state (None: it has none, or a whole run did not ask)
    state: dict | None
    #: the ledger entries not seen that touch the sources (empty when ``state`` is None)
    pending: list[dict] = field(default_factory=list)
    #: the state to record once this run's result is published
    after: dict = field(default_factory=dict)

    @property
    def known(self) -> bool:
        """Whether the reader has a state: without one, everything counts as changed."""
        return self.state is not None and self.state.get("since") is not None


def read_state(db, key: str) -> dict | None:
    return db[ANALYSIS_STATE].find_one({"_id": key})


def changes(db, key: str, sources: set[str], *, follow: bool = True) -> Changes:
    """What changed in ``sources`` for the reader ``key`` (``follow``: False for a whole run, which
    needs only the clock and the state to record)."""
    now = _server_now(db)  # first: whatever is visible from here on is read
    state = read_state(db, key) if follow else None
    since = state.get("since") if state else None
    entries = _changed_since(db, min(since, now) - MARGIN if since is not None else now - MARGIN)
    unstamped = [e["_id"] for e in entries if e.get("changed_at") is None and not e.get("owner")
                 and e.get("status") in ("loaded", "failed")]
    if unstamped:  # a ledger from before stamps (or a batch's stamp lost): stamped now, seen by this run
        Ledger(db).stamp(unstamped)
    recent = [e for e in entries if e.get("changed_at") is None or e["changed_at"] >= now - MARGIN]
    after = {"since": now, "seen": [[e["_id"], e.get("sha256")] for e in recent] if len(recent) <= SEEN_MAX
             else None}
    found = Changes(now=now, state=state, after=after)
    if state is not None and found.known:
        seen = {(path, sha) for path, sha in state.get("seen") or ()}
        found.pending = [e for e in entries if (e["_id"], e.get("sha256")) not in seen and _touches(e, sources)]
    return found


# ------------------------------------------------------------------ what the ingest ledger says
_RETRY = Retry(0)


def _server_now(db):
    """The server's clock (what ``changed_at`` is stamped with): a naive UTC datetime."""
    return _RETRY("asking the server's time", db.command, "hello")["localTime"]


def _changed_since(db, since) -> list[dict]:
    """Ledger entries stamped at or after ``since`` (every entry when None), and entries not stamped
    yet (a batch's, between its insert and its stamp; a ledger written before stamps existed): two
    index seeks on ``changed_at``, in proportion to what changed."""
    ledger = db[LEDGER]
    stamped = {"changed_at": {"$gte": since}} if since is not None else {"changed_at": {"$ne": None}}
    found = _RETRY("reading the ledger", lambda: list(ledger.find(stamped, CHANGE_FIELDS)))
    return found + _RETRY("reading the ledger", lambda: list(ledger.find({"changed_at": None}, CHANGE_FIELDS)))


def count_loaded(db, source: str) -> int:
    """How many loaded files wrote into ``source`` (a scan of the ledger: asked only when many changed)."""
    return _RETRY("reading the ledger", db[LEDGER].count_documents, {**HOLDING, f"records.{source}": {"$gt": 0}})


def contents_writing(db, collection: str, limit: int) -> list[str]:
    """Up to ``limit`` contents (sha256) of loaded files that wrote into ``collection``, those with
    the fewest documents there first, among the first ``4 * limit`` found."""
    entries = _RETRY("reading the ledger", lambda: list(db[LEDGER].find(
        {"status": "loaded", f"records.{collection}": {"$gt": 0}, "sha256": {"$type": "string"}},
        {"sha256": 1, f"records.{collection}": 1, "_id": 0}).limit(4 * limit)))

    def count(entry: dict) -> float:
        n = entry["records"][collection]
        return n if isinstance(n, (int, float)) else 0

    return [e["sha256"] for e in sorted(entries, key=count)[:limit]]


# ------------------------------------------------------------------ the readers' state
def record_state(db, key: str, after: dict, **fields) -> None:
    """Record the reader's state once its result is published (fields not given are kept)."""
    db[ANALYSIS_STATE].update_one({"_id": key}, {"$set": {**after, **fields}}, upsert=True)


def _touches(entry: dict, sources: set[str]) -> bool:
    """Whether the entry's file wrote into one of ``sources``, or replaced a content (whose
    documents may have been there)."""
    records = entry.get("records")
    if not isinstance(records, dict):
        records = {}
    return any(isinstance(records.get(s), int) and records[s] > 0 for s in sources) or bool(entry.get("previous"))


def content_selector(collection: str, sha: str) -> dict | None:
    """The documents of one loaded content in ``collection`` by an index (the embedded server scans a range of
    ``_id``): a search file's hits by their search id prefix, its searches by ``source.sha256``;
    None for a collection whose documents a content does not own alone (records: versions)."""
    if collection == HITS:
        return {"search_id": prefix_range(search_id_prefix(sha))}
    if collection == SEARCHES:
        return {"source.sha256": sha}
    return None

