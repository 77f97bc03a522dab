"""The readers' commands, asked of a server by ``sci-ingest check`` (the plugin's ``CHECKS``).

The analyses read their sources through :mod:`analytics.reading`: :func:`~analytics.reading.planning.probe`
asks by ``explain`` whether a key range is an index seek and ``$sample`` a random cursor; key
ranges are planned from the smallest and largest key (``find`` sorted, ``limit 1``) and a
``$sample`` (:func:`~analytics.reading.partitions.plan_partitions`) and each read by a range
``find`` (:func:`~analytics.reading.partitions.read_partition`); a source the server cannot
partition cheaply is read as one stream (a ``find`` of raw batches sorted on the group,
:func:`~analytics.reading.streaming.read_chunks`); on a mongos, a collection sharded on a hashed
key is read chunk by chunk from ``config.chunks`` (:func:`~analytics.reading.chunks.chunk_table`).

:func:`reader_rows` runs those same functions on the check's scratch collection
(:class:`ingest.store.capabilities.Scratch`: documents with an indexed integer key) and checks
their answers (every document read once), one row each.
"""

from __future__ import annotations

from analytics.reading.partitions import plan_partitions, read_partition
from analytics.reading.planning import probe
from analytics.reading.streaming import StreamSpec, read_chunks
from ingest.errors import SciIngestError, ServerUnavailable
from ingest.schema import Column
from ingest.store.capabilities import MISSING, NA, OK, SCRATCH_DOCUMENTS, SCRATCH_KEY, SCRATCH_QUERY, WARN, Scratch, row
from ingest.store.mongo import db_errors
from ingest.store.servers import server_of

__all__ = ["reader_rows", "NEEDED_BY"]

NEEDED_BY = "analyze"
_COLUMNS = (Column(SCRATCH_KEY, SCRATCH_KEY, "int64"), Column("g", "g", "int64"))


def _failed(exc: SciIngestError) -> str:
    return str(exc).splitlines()[0]


def reader_rows(uri: str, db, made: Scratch) -> list[dict]:
    """One row per way the readers ask the server (see the module doc)."""
    rows = [_plans(db, made)]
    if not made.filled:
        why = "not asked: the user may not fill a scratch collection (analyze, which reads this way, writes too)"
        rows += [row("reads: key ranges", NA, why, NEEDED_BY), row("reads: one stream", NA, why, NEEDED_BY)]
    else:
        rows += [_ranges(uri, db, made), _stream(uri, db, made)]
    if server_of(db).sharding:
        rows.append(_chunks(db))
    return rows


def _plans(db, made: Scratch) -> dict:
    try:
        with db_errors(f"explaining reads of {made.name}"):
            found = probe(db, made.name, SCRATCH_KEY, SCRATCH_QUERY if made.filled else None)
    except ServerUnavailable:
        raise
    except SciIngestError as exc:
        return row("reads: explain", MISSING, _failed(exc), NEEDED_BY)
    if not made.filled:
        return row("reads: explain", OK, f"answered on an empty collection: {found.evidence}", NEEDED_BY)
    way = "key ranges" if found.partitionable else "one stream (the server cannot seek and sample a key cheaply)"
    return row("reads: explain", OK, f"{found.evidence}: analyses read {way}", NEEDED_BY)


def _ranges(uri: str, db, made: Scratch) -> dict:
    try:
        specs = plan_partitions(uri, db.name, made.name, 4, SCRATCH_QUERY, key=SCRATCH_KEY, columns=_COLUMNS)
        keys = [k for spec in specs for k in read_partition(spec)[SCRATCH_KEY].tolist()]
    except ServerUnavailable:
        raise
    except SciIngestError as exc:
        return row("reads: key ranges", MISSING, _failed(exc), NEEDED_BY)
    detail = (f"min/max find and $sample planned {len(specs)} range(s); their range finds read "
              f"{len(keys)} of {SCRATCH_DOCUMENTS} documents")
    whole = sorted(keys) == list(range(SCRATCH_DOCUMENTS))
    return row("reads: key ranges", OK if whole else MISSING, detail + ("" if whole else ": not each once"), NEEDED_BY)


def _stream(uri: str, db, made: Scratch) -> dict:
    spec = StreamSpec(uri=uri, db_name=db.name, collection=made.name, query=SCRATCH_QUERY, columns=_COLUMNS,
                      group_key="g", group_path="g", sorted=True, chunk_rows=100)
    try:
        counts = [n for n, _raw in read_chunks(spec)]
    except ServerUnavailable:
        raise
    except SciIngestError as exc:
        return row("reads: one stream", MISSING, _failed(exc), NEEDED_BY)
    whole = sum(counts) == SCRATCH_DOCUMENTS
    return row("reads: one stream", OK if whole else MISSING,
               f"a find of raw batches sorted on the group read {sum(counts)} of {SCRATCH_DOCUMENTS} documents "
               f"in {len(counts)} chunk(s)", NEEDED_BY)


def _chunks(db) -> dict:
    try:
        with db_errors("reading config.chunks"):
            db.client["config"]["chunks"].find_one({}, {"_id": 1})
    except ServerUnavailable:
        raise
    except SciIngestError as exc:
        return row("reads: hashed chunks", WARN, f"{_failed(exc)}: a collection sharded on a hashed key is read "
                                                 "in key ranges instead", NEEDED_BY)
    return row("reads: hashed chunks", OK, "config.chunks is readable: a collection sharded on a hashed key is "
                                           "read chunk by chunk", NEEDED_BY)
