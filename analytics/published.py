"""A published output's Parquet file against where it came from and against its collection.

Two checks keep a Parquet file from quietly disagreeing with the collection it mirrors (issue 41):

* **before extending it** (:func:`unfit_reason`, asked by :func:`analytics.increment.plan_scope`): an
  incremental run extends, or merges into, only a file of the declared layout that records the
  database and server of this run (:meth:`ingest.store.outputs.Outputs.origin`, in its ``sci_ingest``
  metadata) and the run whose output the collection holds (``published`` in the analysis's state:
  another home, or a caller's own folder, may have published since); any other is recomputed
  whole, and the run says why;
* **after publishing it** (:func:`check_published`, by the whole publish and the incremental one):
  the file's ids against the collection's, read as ``_id`` alone in raw batches (no count: the embedded server
  counts by scanning; no ``$in``: its cost grows with the list).  The same number of rows and the same
  ids, or :class:`ingest.errors.AnalysisError`, one line with both counts: the new file is then set
  aside (``<name>.mismatch``) and the old one removed, so no file disagrees quietly and the next
  run, finding none, computes the output whole.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import bson

from ingest.errors import AnalysisError
from ingest.store.mongo import db_errors, shared_client

__all__ = ["recorded", "unfit_reason", "check_published", "collection_ids"]
log = logging.getLogger(__name__)


def recorded(schema) -> dict:
    """The ``sci_ingest`` metadata of a Parquet schema ({} when it has none or it is not JSON)."""
    try:
        meta = json.loads((schema.metadata or {}).get(b"sci_ingest", b"{}"))
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def unfit_reason(path: Path, analysis, outputs, published: str | None = None) -> str | None:
    """Why the Parquet file at ``path`` cannot be extended by a run of ``analysis`` into ``outputs``
    (an :class:`ingest.store.outputs.Outputs`), or None when it can.  ``published``: the run whose
    output the collection holds (the analysis's state), which the file must hold too."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pyarrow costs 0.22 s

    try:
        found = pq.read_schema(path)
    except (OSError, ValueError):
        found = None
    # the declared columns with their declared types: a file written before a column was declared
    # (or a list column typed list<null> by inference) is rewritten whole
    if found is None or not found.equals(analysis.arrow_schema, check_metadata=False):
        return f"{path} is missing or of another layout"
    meta = recorded(found)
    if "db" not in meta or "server" not in meta:
        return f"{path} does not record the database and server it was computed from"
    if (meta["db"], meta["server"]) != (outputs.db, outputs.server):
        return (f"{path} was computed from database {meta['db']!r} on {meta['server']}, not from "
                f"{outputs.db!r} on {outputs.server}")
    if published and meta.get("run_id") != published:
        return (f"{path} holds the output of run {meta.get('run_id')}, {analysis.output} that of run {published} "
                "(published since into another folder)")
    return None


def collection_ids(uri: str, db_name: str, collection: str) -> list:
    """Every ``_id`` of ``collection``: a projection of ``_id`` read in raw batches, decoded at once."""
    ids: list = []
    coll = shared_client(uri)[db_name][collection]
    for batch in coll.find_raw_batches({}, {"_id": 1}, batch_size=10_000):
        ids.extend(doc["_id"] for doc in bson.decode_all(batch))
    return ids


def check_published(uri: str, db_name: str, analysis, written: Path, final: Path) -> float:
    """The Parquet file ``written`` (about to become ``final``) against ``analysis``'s collection:
    the same number of rows and the same ids, else :class:`AnalysisError` (``written`` set aside as
    ``<final>.mismatch``, ``final`` removed).  Returns the seconds it took."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: as above; pyarrow costs 0.22 s

    started = time.perf_counter()
    rows = pq.read_table(written, columns=[analysis.output_id]).column(0).to_pylist()
    with db_errors(f"reading the ids of {db_name}.{analysis.output}", uri=uri):
        ids = collection_ids(uri, db_name, analysis.output)
    if len(rows) == len(ids) and set(rows) == set(ids):
        return time.perf_counter() - started
    mine, theirs = set(rows), set(ids)
    aside = final.with_name(final.name + ".mismatch")
    try:
        os.replace(written, aside)
        final.unlink(missing_ok=True)
    except OSError as exc:  # the error below matters more; the next run checks again
        log.warning("could not set %s aside: %s", written, exc)
    raise AnalysisError(
        f"analysis {analysis.name}: the Parquet file {final} would hold {len(rows):,} rows but {db_name}."
        f"{analysis.output} holds {len(ids):,} documents ({len(theirs - mine):,} ids only in the collection, "
        f"{len(mine - theirs):,} only in the file{', some twice' if len(mine) < len(rows) else ''}); "
        f"the file is set aside as {aside.name}: the next run computes {analysis.name} whole")
