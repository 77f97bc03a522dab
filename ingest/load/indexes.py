"""Which indexes a load keeps up while it writes, and which it builds afterwards.

Every secondary index costs every insert: on the embedded server the five
secondary indexes of ``hits`` made raw inserts 4.0x slower, and building them
after a load instead of during it saved about a third of the time.  So:

* the indexes the loader itself needs (:data:`ingest.store.catalog.LOAD_INDEXES`:
  documents by content, the ledger) always exist;
* the analysts' and analyses' indexes (:data:`ingest.store.catalog.QUERY_INDEXES`)
  are **built after the load** when it is a *bulk* load, and kept up during
  the load otherwise.  A load is bulk when the data collections are empty, or
  when it is expected to add at least :data:`BULK_MIN_DOCUMENTS` documents and
  at least as many as they already hold (so a first load, or one that doubles
  the data, is bulk; a small incremental load into a large database is not).
  A first load of the bundled samples (9,819 documents) took 9-20 % less
  server CPU this way (docs/loading.md).  The expected
  number is estimated from the bytes to load (:data:`BYTES_PER_DOCUMENT`,
  measured on the bundled samples and real outputs).  Existing query indexes
  are dropped before a bulk load and built again after it; ``--keep-indexes``
  overrides the rule.

The documents held are never counted (a server may count by reading every document, and answers
even ``find_one`` or a ``limit(1)`` only after reading the whole collection: 1.3 s and 3.6 s on
250,000 hits, docs/loading.md): each load adds what it inserted to a tally in ``ingest_meta``
(:func:`documents_held` reads one document, :func:`add_written` writes one per load).  A database
without the tally (made by an earlier version) gets it once from the ledger's ``records`` counts.
It is an upper estimate: the documents of a replaced file's old content are not taken off, and a
record that several files hold is counted for each.

Building the indexes is a timed stage of its own (``index``).  On a server whose index keys
lose the order of numbers beyond 1e±128 (probed: ingest.store.indexes), no index holds a float field
(:func:`ingest.store.indexes.exact_indexes`): every client's answers equal a collection scan's.
"""

from __future__ import annotations

from ingest.store.catalog import DATA_COLLECTIONS, HOLDING, LEDGER, META, QUERY_INDEXES
from ingest.store.indexes import ensure_exact_indexes, exact_indexes
from ingest.store.retry import Retry
from ingest.store.servers import drop_indexes

__all__ = ["BULK_MIN_DOCUMENTS", "BYTES_PER_DOCUMENT", "expected_documents", "is_bulk", "documents_held",
           "add_written", "before_load", "after_load"]

#: A load expected to add fewer documents than this keeps the indexes up.
BULK_MIN_DOCUMENTS = 50_000
#: Input bytes per stored document, by format (uncompressed; a .gz file counts 4x its size).
BYTES_PER_DOCUMENT = {"pasta": 900, "pasta-m8": 150, "materials": 2500}
_GZIP_RATIO = 4
#: The tally of the documents the loads inserted (``ingest_meta``).
HELD = {"_id": "documents_held"}


def expected_documents(tasks) -> int:
    """An estimate of the documents ``tasks`` (:class:`ingest.load.plan.FileTask`) will add."""
    total = 0.0
    for task in tasks:
        size = task.size * (_GZIP_RATIO if task.key.endswith(".gz") else 1)
        total += size / BYTES_PER_DOCUMENT.get(task.format or "", 1500)
    return int(total)


def is_bulk(db, tasks, retry: Retry) -> bool:
    if not tasks:
        return False
    held = documents_held(db, retry)
    if held == 0:  # nothing to serve yet: one build at the end costs less than keeping them up
        return True
    expected = expected_documents(tasks)
    return expected >= BULK_MIN_DOCUMENTS and expected >= held


def documents_held(db, retry: Retry) -> int:
    """The documents the data collections hold as the loads recorded them (see the module's doc):
    the tally, else (once per database) the sum of the ledger's ``records``, kept as the tally."""
    tally = retry("reading ingest_meta", db[META].find_one, HELD)
    if tally is None:
        entries = retry("reading the ledger", lambda: list(db[LEDGER].find(
            HOLDING, {"records": 1, "_id": 0})))
        recorded = sum(n for e in entries if isinstance(e.get("records"), dict)
                       for c, n in e["records"].items() if c in DATA_COLLECTIONS and _positive(n))
        retry("writing ingest_meta", db[META].update_one, HELD, {"$setOnInsert": {"documents": recorded}}, upsert=True)
        tally = retry("reading ingest_meta", db[META].find_one, HELD) or {}
    held = tally.get("documents")
    return held if _positive(held) else 0


def add_written(db, inserted: int, retry: Retry) -> None:
    """Add the documents a load inserted to the tally, where the database has one (else its first
    :func:`documents_held` finds them in the ledger)."""
    if inserted > 0:
        retry("writing ingest_meta", db[META].update_one, HELD, {"$inc": {"documents": inserted}})


def _positive(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0


def before_load(db, bulk: bool) -> int:
    """Drop the query indexes before a bulk load, ensure them before a small one; returns the count."""
    if bulk:
        built = {c: [list(k) for k in exact_indexes(db, c, specs)[0]] for c, specs in QUERY_INDEXES.items()}
        return drop_indexes(db, {c: QUERY_INDEXES[c] + built[c] for c in QUERY_INDEXES})
    return ensure_exact_indexes(db, QUERY_INDEXES)["created"]


def after_load(db) -> int:
    """Build the query indexes that are missing (as :func:`ingest.store.indexes.exact_indexes` has them:
    on a server whose index keys lose the order of numbers, none on a float field); returns how many."""
    return ensure_exact_indexes(db, QUERY_INDEXES)["created"]
