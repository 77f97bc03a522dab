"""The names of the MongoDB collections sci-ingest owns: the bottom of :mod:`ingest.store`.

Each collection is named here once.  :mod:`ingest.store.catalog` names them all again, with
what each holds, its indexes and its shard key; the catalog derives its query indexes from the
curated declarations (:mod:`ingest.store.curated`), which take the names from here.
"""

from __future__ import annotations

__all__ = ["SEARCHES", "HITS", "MATERIALS", "TASKS", "LEDGER", "TIMINGS", "VALIDATION", "CLAIMS", "VERSIONS",
           "BATCHES", "META", "ANALYSIS_STATE", "DATA_COLLECTIONS", "HOLDING"]

SEARCHES = "searches"
HITS = "hits"
MATERIALS = "materials"
TASKS = "tasks"
LEDGER = "ingest_files"
TIMINGS = "stage_timings"
VALIDATION = "validation_runs"
CLAIMS = "ingest_claims"
VERSIONS = "ingest_versions"
BATCHES = "ingest_batches"
META = "ingest_meta"
ANALYSIS_STATE = "analysis_state"

#: The collections that hold loaded input (the rest is bookkeeping and outputs).
DATA_COLLECTIONS = (SEARCHES, HITS, MATERIALS, TASKS)

#: The ledger entries whose version's documents are in the database (``sha256`` names it): ``loaded``
#: ones, and ``failed`` ones loaded before, which keep their last good version while they fail
#: (docs/loading.md, "A file that fails"). Every reader asking what the loaded files hold asks this.
HOLDING = {"status": {"$in": ["loaded", "failed"]}, "sha256": {"$type": "string"}}
