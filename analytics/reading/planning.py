"""How to read a collection in parallel: decided from the server's own query plans.

Two ways of reading a source, chosen per analysis by :func:`plan_reads`:

``ranges``
    Split points on an indexed key, one Dask task per key range, each range
    read by its own query (:mod:`analytics.reading.partitions`).  This pays only when
    the server can (a) *seek* a range of the key, so that the sum of the
    partition reads costs one read of the collection, and (b) *sample* the key
    cheaply, so that planning costs next to nothing.  MongoDB does both: a
    range on an indexed key is an ``IXSCAN`` and ``$sample`` as a first stage
    uses a pseudo-random cursor (``$sampleFromRandomCursor``) when the sample
    is under 5 % of a collection of more than 100 documents.
``stream``
    One query, read once in the driver as a stream and cut client-side into
    bounded chunks, each handed to a Dask worker as it arrives
    (:mod:`analytics.reading.streaming`).  Chunks are cut where the group key changes;
    the stream is sorted on it only when the analysis cannot mend a group
    split between chunks (``sort_groups``).  This is what a server gets that
    answers ``$sample`` with a collection scan -- the embedded server materialises the
    whole collection for a ``$sample``, a ``count`` or a sorted ``limit(1)``,
    so any split-point planning would cost a full read before the read -- or
    that cannot seek the range (a range combined with the analysis's filter is
    a ``COLLSCAN`` there), or whose index on the key is multikey (a document
    would fall in several ranges).

Both checks are ``explain`` at ``queryPlanner`` verbosity: plans, not
executions, a few milliseconds on either server.  ``mode`` (or the
``SCI_INGEST_READ_MODE`` environment variable: ``auto``, ``ranges``,
``stream``) forces one way; forced ranges on a server that cannot sample
cheaply still work, planning with a full ``$sample``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bson import MaxKey, MinKey

from analytics.changes import changes, content_selector, contents_writing, record_state
from analytics.reading.chunks import chunk_table, plan_chunk_partitions
from analytics.reading.partitions import plan_partitions, range_filter
from analytics.reading.streaming import (
    DEFAULT_CHUNK_ROWS,  # documents per streamed chunk: the unit of work and of memory
    StreamSpec,
    batch_starts,
)
from ingest.config import READ_MODE_CHOICE, Choice, setting
from ingest.errors import ConfigError
from ingest.schema import Column, Schema
from ingest.store.catalog import HITS, MATERIALS, SEARCHES, TASKS
from ingest.store.mongo import db_errors, shared_client
from ingest.store.servers import server_of, traits

__all__ = ["ReadPlan", "Capabilities", "probe", "plan_reads", "plan_stages", "READ_MODES", "DEFAULT_CHUNK_ROWS",
           "default_partitions", "MIN_ROWS_PER_PARTITION", "MAX_ROWS_PER_PARTITION", "whole_documents",
           "document_weight", "stored_bytes_per_document",
           "WHOLE_DOCUMENT_BYTES"]

READ_MODES = READ_MODE_CHOICE.choices  # SCI_INGEST_READ_MODE's
#: Default partitioning: 2 partitions per Dask thread so every worker has work,
#: none smaller than MIN_ROWS_PER_PARTITION documents (each partition costs a
#: query and a task), and none larger than MAX_ROWS_PER_PARTITION (a partition
#: must fit in a worker's memory however large the collection grows).
MIN_ROWS_PER_PARTITION = 100
MAX_ROWS_PER_PARTITION = 200_000

#: The size of the ``$sample`` asked for in the explain probe (well under 5 % of a large collection).
PROBE_SAMPLE = 1_000

#: A stream from a server that projects in Python asks for whole documents, not a projection, when the stored documents of
#: the source weigh at most this many bytes on average (see :func:`whole_documents`).
WHOLE_DOCUMENT_BYTES = 2048


@dataclass(frozen=True)
class Capabilities:
    """What the server's plans say about reading ``key`` ranges of a collection."""

    seeks: bool
    samples: bool
    multikey: bool
    evidence: str

    @property
    def partitionable(self) -> bool:
        return self.seeks and self.samples and not self.multikey


@dataclass
class ReadPlan:
    """How one source will be read: key-range partitions or one stream."""

    mode: str
    reason: str
    specs: list = field(default_factory=list)  # PartitionSpec, for "ranges"
    stream: Any = None  # StreamSpec, for "stream"
    seconds: float = 0.0
    documents: int | None = None  # the server's estimate, when it was asked (ranges only)
    split_groups: int | None = None  # groups an unsorted stream split between chunks, re-read whole
    key: str | None = None  # the field the ranges are cut on, when it is not the one asked for (chunks)
    documents_read: str | None = None  # stream: whole documents or projected, and why

    def describe(self) -> dict:
        parts = len(self.specs) if self.mode == "ranges" else None
        described = {"mode": self.mode, "reason": self.reason, "partitions": parts,
                     "planning_s": round(self.seconds, 4)}
        if self.documents_read:
            described["documents"] = self.documents_read
        if self.stream is not None and self.stream.group_path:
            described["groups"] = "sorted" if self.stream.sorted else "mended"
            described["split_groups"] = self.split_groups
        return described


def _plan_facts(explain: Any, stages: set[str], flags: dict[str, bool]) -> None:
    """Collect every ``stage`` name and aggregation stage key of an explain document."""
    if isinstance(explain, dict):
        for name, value in explain.items():
            if name == "stage" and isinstance(value, str):
                stages.add(value)
            elif name.startswith("$"):
                stages.add(name)
            elif name == "isMultiKey" and value is True:
                flags["multikey"] = True
            _plan_facts(value, stages, flags)
    elif isinstance(explain, list):
        for item in explain:
            _plan_facts(item, stages, flags)


def plan_stages(explain: Any) -> set[str]:
    """Every plan stage (``IXSCAN``, ``COLLSCAN``, ``$sample`` ...) named in an explain document."""
    stages: set[str] = set()
    _plan_facts(explain, stages, {})
    return stages


def default_partitions(threads: int, count: int) -> int:
    """How many partitions to read ``count`` documents in, with ``threads`` Dask threads."""
    threads = max(1, threads)
    spread = min(2 * threads, math.ceil(count / MIN_ROWS_PER_PARTITION))
    return max(1, spread, math.ceil(count / MAX_ROWS_PER_PARTITION))


def probe(db, collection: str, key: str, query: dict | None = None) -> Capabilities:
    """Ask the server, by ``explain``, whether ``key`` ranges can be sought and sampled cheaply."""
    stages: set[str] = set()
    flags: dict[str, bool] = {}
    find = {"find": collection, "filter": range_filter(query, key, {"$gte": MinKey(), "$lte": MaxKey()})}
    _plan_facts(db.command("explain", find, verbosity="queryPlanner"), stages, flags)
    seeks = "IXSCAN" in stages and "COLLSCAN" not in stages
    sample = {"aggregate": collection, "pipeline": [{"$sample": {"size": PROBE_SAMPLE}}], "cursor": {}}
    sample_stages: set[str] = set()
    _plan_facts(db.command("explain", sample, verbosity="queryPlanner"), sample_stages, {})
    samples = bool(sample_stages & {"$sampleFromRandomCursor", "MULTI_ITERATOR", "RANDOM_CURSOR"})
    find_plan = "IXSCAN" if seeks else ("COLLSCAN" if "COLLSCAN" in stages else "/".join(sorted(stages)) or "?")
    sample_plan = "random cursor" if samples else ("COLLSCAN" if "COLLSCAN" in sample_stages else "no random cursor")
    evidence = (f"explain: a {key} range{' with the filter' if query else ''} is {find_plan}"
                f"{' (multikey index)' if flags.get('multikey') else ''}, $sample is {sample_plan}")
    return Capabilities(seeks=seeks, samples=samples, multikey=bool(flags.get("multikey")), evidence=evidence)


def whole_documents(db, collection: str) -> tuple[bool, str]:
    """Whether a stream of ``collection`` should ask for whole documents, and why.

    A server that applies a projection in Python, document by document
    (:class:`ingest.store.servers.Traits`): on the benchmark's search hits (about 1.2 kB a document)
    it is a fifth to a quarter of the read's server time there, while sending the whole document
    costs bytes, which its encoder and the client's screen
    (:meth:`ingest.query.arrow.Converter.clean`) handle at C speed.  Small documents are read whole
    there; large ones (a Materials Project task is tens of kB) through the projection.  What the stored documents weigh is measured (:func:`document_weight`), not
    guessed from the input files (a gzip-compressed file is a fifth of its documents, a JSON
    line two thirds of its BSON).  Documents loaded some other way (no ledger entry) are
    projected.  MongoDB projects in C++ and is always sent the projection.
    """
    if not traits(db).projects_in_python:
        return False, f"projected ({server_of(db).kind} projects on the server)"
    measured = document_weight(db, collection)
    if measured is None:
        return False, "projected (no loaded file on record wrote into it)"
    per_doc, documents = measured
    sample = f"{per_doc:,.0f} bytes a stored document, over {documents:,} measured"
    if per_doc > WHOLE_DOCUMENT_BYTES:
        return False, f"projected ({sample}, over {WHOLE_DOCUMENT_BYTES:,})"
    return True, f"whole documents ({server_of(db).kind} projects in Python; {sample}, at most {WHOLE_DOCUMENT_BYTES:,})"


#: How many loaded files' documents, and how many of each, :func:`stored_bytes_per_document` measures.
SAMPLE_FILES, SAMPLE_DOCUMENTS = 5, 40


def document_weight(db, collection: str) -> tuple[float, int] | None:
    """(BSON bytes per stored document, documents measured) of ``collection``: measured by
    :func:`stored_bytes_per_document` and kept in ``analysis_state`` (``weight:<collection>``)
    until a loaded file changes the collection (:mod:`analytics.changes`: an index seek)."""
    key = f"weight:{collection}"
    found = changes(db, key, {collection})
    known = found.state  # what was measured before, when it was
    if not (found.known and known is not None and known.get("bytes") and known.get("documents")):
        known = None
    if known is not None and not found.pending:
        return float(known["bytes"]), int(known["documents"])
    if known is not None:  # the changed files' documents, averaged with what was measured before (as if of 200 at most)
        contents = _fewest_first([e for e in found.pending if e.get("status") == "loaded"], collection)
        measured = stored_bytes_per_document(db, collection, contents)
        if measured is not None:
            before = min(int(known["documents"]), 200)
            total = measured[1] + before
            measured = ((measured[0] * measured[1] + float(known["bytes"]) * before) / total, total)
        else:
            measured = float(known["bytes"]), int(known["documents"])
    else:
        measured = stored_bytes_per_document(db, collection)
    if measured is not None:
        record_state(db, key, found.after, bytes=measured[0], documents=measured[1])
    return measured


def _fewest_first(entries: list[dict], collection: str) -> list[str]:
    """The contents of ``entries`` (ledger entries), those with the fewest documents in ``collection``
    first, at most :data:`SAMPLE_FILES`."""
    def count(entry: dict) -> float:
        n = (entry.get("records") or {}).get(collection) if isinstance(entry.get("records"), dict) else None
        return n if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else float("inf")

    ranked = sorted((e for e in entries if isinstance(e.get("sha256"), str) and count(e) < float("inf")), key=count)
    return [e["sha256"] for e in ranked[:SAMPLE_FILES]]


def stored_bytes_per_document(db, collection: str, contents: list[str] | None = None) -> tuple[float, int] | None:
    """(BSON bytes per stored document, documents measured) over up to :data:`SAMPLE_DOCUMENTS`
    documents of each of :data:`SAMPLE_FILES` loaded files that wrote into ``collection``, the
    files with the fewest such documents first, each file's found by an index on its content (a
    hit's search id prefix, a search's ``source.sha256``, a record's ``_source.sha256``: the embedded server
    scans for a range of ``_id`` and sends a result only once it has all of it); None when no
    loaded file wrote into it, or its documents cannot be found that way.  ``contents``: the files
    to measure (default: from the ledger)."""
    if collection not in (HITS, SEARCHES, MATERIALS, TASKS):
        return None
    size = documents = 0
    if contents is None:
        contents = contents_writing(db, collection, SAMPLE_FILES)
    for sha in contents:
        selector = content_selector(collection, sha) or {"_source.sha256": sha}  # a record's current holder
        for batch in db[collection].find_raw_batches(selector, limit=SAMPLE_DOCUMENTS, batch_size=SAMPLE_DOCUMENTS):
            documents += len(batch_starts(batch)) - 1
            size += len(batch)
    return (size / documents, documents) if documents else None


def read_mode(mode: str | None = None) -> str:
    if not mode:
        return setting("SCI_INGEST_READ_MODE")
    try:
        return Choice(READ_MODES).parse(mode)
    except ValueError as exc:
        raise ConfigError(f"read mode must be {exc}, not {mode!r}") from None


def plan_reads(
    uri: str,
    db_name: str,
    collection: str,
    *,
    columns: Iterable[Column],
    key: str,
    query: dict | None = None,
    group_key: str | None = None,
    partitions: int | None = None,
    threads: int = 1,
    mode: str | None = None,
    chunk_rows: int | None = None,
    sort_groups: bool = True,
) -> ReadPlan:
    """Decide how to read ``collection`` (see the module docstring) and plan it.

    ``key`` is the field ranges are cut on; ``group_key`` a declared column
    whose equal values must meet in one chunk (the stream is then sorted on its
    path unless ``sort_groups`` is false: then chunks are still cut where the
    group changes, but a group whose documents are not contiguous may reach
    several chunks).  ``partitions`` fixes the number of key ranges; by default
    it follows the server's document estimate and ``threads``.
    """
    chunk_rows = DEFAULT_CHUNK_ROWS if chunk_rows is None else chunk_rows
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    started = time.perf_counter()
    schema = Schema(columns)
    wanted = read_mode(mode)
    db = shared_client(uri)[db_name]
    if wanted == "auto":
        with db_errors(f"asking the server how to read {db_name}.{collection}", uri=uri):
            caps = probe(db, collection, key, query or None)
        chosen = "ranges" if caps.partitionable else "stream"
        reason = caps.evidence
    else:
        chosen, reason = wanted, f"read mode {wanted} was asked for"
    plan = ReadPlan(mode=chosen, reason=reason)
    if wanted != "stream":
        with db_errors(f"reading the chunk table of {db_name}.{collection}", uri=uri):
            table = chunk_table(db.client, db_name, collection)
        if table is not None:  # a mongos and a hashed shard key: one partition per chunk
            plan.mode, plan.key = "ranges", table.field
            plan.reason = (f"mongos: {len(table.chunks)} chunks of {{{table.field}: hashed}} on "
                           f"{len(table.shards)} shards, one partition per chunk, interleaved across shards")
            plan.specs = plan_chunk_partitions(uri, db_name, collection, table, query=query or None,
                                               columns=schema.columns)
            plan.seconds = time.perf_counter() - started
            return plan
    if chosen == "ranges":
        n = partitions
        if n is None:
            with db_errors(f"estimating the size of {db_name}.{collection}", uri=uri):
                plan.documents = db[collection].estimated_document_count()
            n = default_partitions(threads, plan.documents)
        plan.specs = plan_partitions(uri, db_name, collection, n, query=query or None, key=key,
                                     columns=schema.columns)
    else:
        group_path = None
        if group_key is not None:
            group_path = next(c.path for c in schema.columns if c.name == group_key)
        with db_errors(f"reading the ledger of {db_name}", uri=uri):
            whole, plan.documents_read = whole_documents(db, collection)
        plan.stream = StreamSpec(uri=uri, db_name=db_name, collection=collection, query=query or None,
                                 columns=schema.columns, group_key=group_key, group_path=group_path,
                                 sorted=bool(group_path and sort_groups), chunk_rows=chunk_rows,
                                 whole_documents=whole)
    plan.seconds = time.perf_counter() - started
    return plan
