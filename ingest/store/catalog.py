"""The catalog: every MongoDB collection sci-ingest owns, its indexes and its shard key.

Each collection is named once, in :mod:`ingest.store.names` (the bottom of
:mod:`ingest.store`, so that :mod:`ingest.store.curated` can name them); every
other module takes the name from here.  The only collections not listed are the
outputs of the analyses, which each analysis declares itself (``analytics.registry``;
``sci-ingest analyze --list`` shows them), so that adding an analysis touches one module.

========================  ==============================================================
collection                one document per
========================  ==============================================================
``searches``              query block of a ``-m 10`` file
``hits``                  hit of a query
``materials``             material (and entries, spectra, phonon documents about one)
``tasks``                 calculation task
``ingest_files``          input file: the ledger (``ingest.store.ledger``)
``stage_timings``         timed stage of a run (``ingest.timing``)
``validation_runs``       expectation suite of a run (``analytics.validation``)
``ingest_claims``         content (sha256) being written by one loader (``ingest.load.claims``)
``ingest_versions``       version of a record held by one loaded content (``ingest.load.records``)
``ingest_batches``        batch of small files whose documents are journaled (``ingest.load.batch``)
``ingest_meta``           fact about the database's own layout (``ingest.load.records``)
``analysis_state``        analysis or suite: when it last read its sources (``analytics.increment``)
========================  ==============================================================

Indexes come in two kinds.  :data:`LOAD_INDEXES` are what the loader itself
needs while it writes (rolling a file's documents back by content, the ledger)
and exist before any load.  :data:`QUERY_INDEXES` serve analysts and analyses;
every index slows inserts (on the embedded server the five secondary indexes of
``hits`` made its inserts 4x slower), so a bulk load (a first one, or a large
one) builds them after it has written (see ``ingest.load.indexes`` for the rule),
and a small incremental load keeps them.
"""

from __future__ import annotations

from ingest.store.curated import query_indexes
from ingest.store.names import (
                                ANALYSIS_STATE,
                                BATCHES,
                                CLAIMS,
                                DATA_COLLECTIONS,
                                HITS,
                                HOLDING,
                                LEDGER,
                                MATERIALS,
                                META,
                                SEARCHES,
                                TASKS,
                                TIMINGS,
                                VALIDATION,
                                VERSIONS,
)

__all__ = [
    "SEARCHES", "HITS", "MATERIALS", "TASKS", "LEDGER", "TIMINGS", "VALIDATION", "CLAIMS", "VERSIONS", "BATCHES", "META", "ANALYSIS_STATE",
    "DATA_COLLECTIONS", "HOLDING", "LOAD_INDEXES", "QUERY_INDEXES", "INDEXES", "SHARD_KEYS",
]

Index = list[tuple[str, int]]

#: What the loader needs while it writes: records and their versions by content (rollback, old
#: versions) and by key (the next holder's version), the ledger by content and its entries held
#: or with contents to drop (what a load recovers first: a scan of a large ledger otherwise).
#: A search file's documents need none: their ``_id`` s start with their content's
#: sha256 (``ingest.documents.search``), so the ``_id`` index finds them by prefix.
LOAD_INDEXES: dict[str, list[Index]] = {
    MATERIALS: [[("_source.sha256", 1)]],
    TASKS: [[("_source.sha256", 1)]],
    VERSIONS: [[("_id.s", 1)], [("_id.k", 1)]],
    LEDGER: [[("sha256", 1)], [("status", 1)], [("owner.id", 1)], [("drop", 1)], [("changed_at", 1)]],
    TIMINGS: [[("run_id", 1), ("stage", 1)]],
    VALIDATION: [[("run_id", 1)]],
}

#: What analysts' questions and the analyses need (built after a bulk load), derived from the
#: curated declarations of :mod:`ingest.store.curated` (each index next to the questions it answers).
QUERY_INDEXES: dict[str, list[Index]] = query_indexes()
#: Every secondary index, by collection.
INDEXES: dict[str, list[Index]] = {coll: LOAD_INDEXES.get(coll, []) + QUERY_INDEXES.get(coll, [])
                                   for coll in {**LOAD_INDEXES, **QUERY_INDEXES}}


#: Hashed shard keys for a sharded cluster: searches and their hits spread evenly,
#: and the hits of one search stay together on one shard.
SHARD_KEYS: dict[str, str] = {SEARCHES: "_id", HITS: "search_id", MATERIALS: "_id", TASKS: "_id"}
