"""The one runner: any declared analysis, planned, read, applied, combined and published.

For an :class:`analytics.registry.Analysis` the runner

1. makes sure an index leads with the partition key and asks the server, by
   ``explain``, how to read the source (:mod:`analytics.reading.planning`): in key
   ranges planned from the index's bounds and a ``$sample``
   (:mod:`analytics.reading.partitions`; the number follows the server's document
   estimate and the Dask threads, :func:`default_partitions`, unless fixed),
   or as one stream cut into chunks between groups (:mod:`analytics.reading.streaming`),
   sorted on the group key only when the analysis cannot mend a split group
   (:attr:`analytics.registry.Analysis.mends_groups`: then groups that reached
   several chunks are read again whole by an ``$in`` on their keys);
2. reads the ranges on the Dask workers with the projection and types derived
   from the declared columns, shuffling on the group key when the partition
   key is another field -- or reads the stream in the driver and hands each
   raw chunk to a worker as it arrives (at most four per thread in flight), which
   decodes it;
3. applies the declared per-partition function to each partition or chunk,
   counting the rows read, then the declared combine once.  An analysis with a
   side input (``join``) first has the side collection read on the workers the
   same way (ranges of its key, or a stream), each part prepared where it was
   read, into one frame that stays on the cluster (a future) and is given to
   every partition; one with a ``regroup``
   stage has its units of work (made in the driver from the partials) run one
   Dask task each before the combine;
4. publishes the output as a whole: the documents go to a temporary collection
   that is then renamed over the target with ``dropTarget=True`` (atomic for
   readers; the embedded server supports it), and the Parquet file is written to a
   temporary name in the database's outputs folder (:mod:`ingest.store.outputs`, or a
   folder the caller names), checked against the collection (its rows' ids;
   :mod:`analytics.published`) and renamed over the old one.  Missing values
   (NaN) are left out of the MongoDB documents, following the project's "absent,
   not null" convention; Parquet keeps them as nulls.  Every document and row
   carries ``run_id``, and the file's metadata the database and server.  The
   Parquet file's schema is the declared one (:func:`analytics.registry.output_table`),
   never inferred from the values: a list column stays ``list<string>`` when every
   list is empty, and each field carries its declared meaning and unit as field metadata.

Importing it costs pymongo (the module talks to MongoDB throughout), not Dask, pandas, numpy or
pyarrow: those are imported inside the functions that need them (tests/test_analytics.py).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pymongo import IndexModel

from analytics.increment import merge_new, plan_scope, publish_changes, record_scope, scoped_queries
from analytics.published import check_published
from analytics.reading.partitions import range_filter, read_collection, read_partition
from analytics.reading.planning import plan_reads
from analytics.reading.streaming import chunk_frame, read_chunks
from analytics.registry import Analysis, Side, output_table, select_analyses
from ingest.cluster import dask_client, thread_count
from ingest.errors import AnalysisError, ConfigError, SciIngestError
from ingest.store.indexes import exact_indexes
from ingest.store.mongo import db_errors, shared_client
from ingest.store.outputs import Outputs, as_outputs
from ingest.store.servers import traits

__all__ = ["AnalysisResult", "analyze", "run_analysis", "apply_partition", "stream_chunks", "output_documents"]
log = logging.getLogger(__name__)



@dataclass
class AnalysisResult:
    """What one analysis did."""

    name: str
    records_in: int
    records_out: int
    partitions: int
    collection: str
    parquet_path: Path
    run_id: str = ""
    seconds: float = 0.0
    #: Counts of input records left out, by reason (e.g. ``no_formation_energy``).
    excluded: dict[str, int] = field(default_factory=dict)
    #: How the source was read (``ranges`` or ``stream``), why, and how long deciding and planning took.
    read: dict = field(default_factory=dict)
    #: What was read: the whole source, the groups of changed files, or nothing (``mode``), and why.
    scope: dict = field(default_factory=dict)
    #: The analysis's own numbers about its output as a whole (``Analysis.summary``), if it declares them.
    summary: dict = field(default_factory=dict)
    #: Seconds spent publishing the output (the Parquet file and the collection), part of ``seconds``.
    publish_s: float = 0.0
    #: Seconds of ``publish_s`` spent checking the Parquet file against the collection (their ids).
    check_s: float = 0.0


# ------------------------------------------------------------------ reading
def _ensure_index(uri: str, db_name: str, collection: str, key: str) -> None:
    """Make sure some index starts with ``key``: range reads seek it, sorted streams walk it.

    An existing index led by ``key`` (any name, compound or not) is reused.
    """
    if key == "_id":
        return

    with db_errors(f"indexing {db_name}.{collection}.{key}", uri=uri):
        coll = shared_client(uri)[db_name][collection]
        for info in coll.index_information().values():
            if info["key"] and info["key"][0][0] == key:
                return
        coll.create_index([(key, 1)])
    log.info("created index on %s.%s(%s) for partitioned reads", db_name, collection, key)


def apply_partition(function, frame, side: tuple = ()) -> tuple[int, object]:
    """(rows read, the analysis's partial result) for one partition (runs on a worker).

    ``side`` is ``()``, or ``(side frame,)`` for an analysis with a side input.
    """
    return len(frame), function(frame, *side)


def _apply_chunk(function, columns, raw: bytes, group_key: str | None = None,
                 side: tuple = ()) -> tuple[int, object, list]:
    """(rows, partial result, the chunk's group keys) of one raw streamed chunk, decoded where it runs."""
    frame = chunk_frame(columns, raw)
    keys = frame[group_key].dropna().unique().tolist() if group_key else []
    return len(frame), function(frame, *side), keys


def _side_chunk(side, raw: bytes):
    """One streamed chunk of a side input, decoded and prepared (runs on a worker)."""
    return side.prepared(chunk_frame(side.columns, raw))


def _side_range(side, spec):
    """One key range of a side input, read and prepared (runs on a worker)."""
    return side.prepared(read_partition(spec))


def _side_frame(side, parts: list):
    """The side input's frame: its prepared parts end to end (runs on a worker)."""
    import pandas as pd  # noqa: PLC0415 - lazy: this module must import light (tests/test_analytics.py); pandas costs 0.3 s

    parts = [p for p in parts if len(p)]
    if not parts:
        return side.prepared(side.schema.empty())
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)


def _read_side(analysis: Analysis, side: Side, client, uri: str, db_name: str) -> tuple[object, dict]:
    """(a future of the side input's whole frame, how it was read): read on the workers, kept there.

    The side is planned like a source (ranges of its key where the server can
    seek and sample it, else one stream whose chunks the workers decode), each
    part is prepared where it was read (``Side.prepare``), and the parts are
    concatenated on a worker; the partitions get the future, so the frame never
    passes through this process.
    """
    key = side.key_path
    if key != "_id":
        _ensure_index(uri, db_name, side.source, key)
    plan = plan_reads(uri, db_name, side.source, columns=side.columns, key=key, query=side.filter or None,
                      threads=thread_count(client))
    if plan.mode == "stream":
        parts = [client.submit(_side_chunk, side, raw, pure=False) for _, raw in read_chunks(plan.stream)]
    else:
        parts = [client.submit(_side_range, side, spec, pure=False) for spec in plan.specs]
    future = client.submit(_side_frame, side, parts, pure=False)
    rows = client.submit(len, future, pure=False).result()
    log.info("analysis %s: side input %s read (%s), %d rows", analysis.name, side.source, plan.mode, rows)
    return future, {"source": side.source, "key": side.key, "rows": rows, **plan.describe()}


def stream_chunks(analysis: Analysis, client, stream, side: tuple = ()) -> list[tuple[int, object, list]]:
    """Hand each chunk of the stream to a worker as it arrives; at most four chunks per thread in flight."""
    window = 4 * thread_count(client)
    running: deque = deque()
    done: list[tuple[int, object, list]] = []
    args = (analysis.partition, stream.columns)
    keys_of = None if stream.sorted else stream.group_key  # a group's chunks are known only to an unsorted stream
    for count, raw in read_chunks(stream):
        if count < stream.chunk_rows and not running and not done and not side:
            return [_apply_chunk(*args, raw, keys_of)]  # the only chunk: no round trip
        running.append(client.submit(_apply_chunk, *args, raw, keys_of, side, pure=False))
        if len(running) >= window:  # chunks are alike: waiting for the oldest keeps the window full
            done.append(running.popleft().result())
    done.extend(future.result() for future in running)
    return done


#: Split groups re-read per query (keeps the ``$in`` list far below the 16 MB command limit).
MEND_BATCH = 10_000


def _mend_groups(analysis: Analysis, client, stream, done: list, side: tuple = ()) -> tuple[list, int]:
    """(partials, groups mended): groups an unsorted stream split between chunks, re-read whole.

    A group met in more than one chunk has a partial row in each; those rows
    are dropped and the group's documents are read again with
    ``{group: {$in: [...]}}`` (an index seek), sorted, so each arrives whole.
    """
    seen = Counter(key for _, _, keys in done for key in keys)
    split = sorted(key for key, chunks in seen.items() if chunks > 1)
    partials = [partial for _, partial, _ in done]
    if not split:
        return partials, 0
    log.info("analysis %s: %d %s group(s) reached more than one chunk; reading them again whole",
             analysis.name, len(split), stream.group_key)
    column = analysis.output_id
    partials = [partial[~partial[column].isin(split)] for partial in partials]
    for start in range(0, len(split), MEND_BATCH):
        batch = split[start:start + MEND_BATCH]
        again = replace(stream, sorted=True, queries=(),
                        query=range_filter(stream.query, stream.group_path, {"$in": batch}))
        partials.extend(partial for _, partial, _ in stream_chunks(analysis, client, again, side))
    return partials, len(split)


def _column_path(analysis: Analysis, name: str) -> str:
    """The document path of the declared column ``name``."""
    return next((c.path for c in analysis.columns if c.name == name), name)


def _compute(analysis: Analysis, client, uri: str, db_name: str, n: int | None, key: str, mode: str | None,
             queries: tuple[dict, ...] = ()):
    """(partial results, records read, partitions, read plan, how the side input was read or None)
    of ``analysis`` over its source: the documents its declared filter selects, or, for the groups
    of changed files, those of ``queries`` read one after the other in one stream (each a key
    range, an index seek)."""
    from dask import delayed  # noqa: PLC0415 - lazy: this module must import light (tests/test_analytics.py); dask costs 0.1 s

    side: tuple = ()
    joined = None
    if analysis.join is not None:
        future, joined = _read_side(analysis, analysis.join, client, uri, db_name)
        side = (future,)
    if key != "_id":
        _ensure_index(uri, db_name, analysis.source, key)  # before planning: the plans depend on it
    plan = plan_reads(uri, db_name, analysis.source, columns=analysis.columns, key=key,
                      query=analysis.filter or None, group_key=analysis.group_key, partitions=n,
                      threads=thread_count(client), mode="stream" if queries else mode,
                      sort_groups=not analysis.mends_groups)
    if queries:
        plan.stream = replace(plan.stream, query=None, queries=queries)
        plan.reason = f"the changed groups: {len(queries)} key range(s), one index seek each"
    log.info("analysis %s reads %s: %s", analysis.name, plan.mode, plan.reason)
    if plan.mode == "stream":
        stream = plan.stream
        if stream.group_path and stream.group_path != key:
            _ensure_index(uri, db_name, analysis.source, stream.group_path)  # sorted walks, or mending seeks
        done = stream_chunks(analysis, client, stream, side)
        partials = [partial for _, partial, _ in done]
        if stream.group_path and not stream.sorted:
            partials, plan.split_groups = _mend_groups(analysis, client, stream, done, side)
        return partials, sum(rows for rows, _, _ in done), len(done), plan, joined
    if not plan.specs:
        return [], 0, 0, plan, joined
    ddf = read_collection(plan.specs, analysis.schema.empty())
    key = plan.key or key  # on a mongos: the hashed shard key's field, cut along the chunks
    if analysis.group_key and _column_path(analysis, analysis.group_key) != key:
        ddf = ddf.shuffle(on=analysis.group_key)  # a group may straddle key ranges: bring it together
    tasks = [delayed(apply_partition)(analysis.partition, part, side) for part in ddf.to_delayed()]
    done = client.compute(tasks, sync=True)
    return [partial for _, partial in done], sum(rows for rows, _ in done), len(plan.specs), plan, joined


def _map_units(client):
    """How the runner runs a regroup stage's units: one Dask task each, results in order."""
    def run(function, units: list) -> list:
        return client.gather(client.map(function, units, pure=False))
    return run


# ------------------------------------------------------------------ publishing
def _bson_value(value):
    """A BSON-encodable Python scalar, or None for a missing value."""
    import numpy as np  # noqa: PLC0415 - lazy: this module must import light (tests/test_analytics.py); numpy costs 0.1 s
    import pandas as pd  # noqa: PLC0415 - lazy: this module must import light (tests/test_analytics.py); pandas costs 0.3 s

    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def output_documents(frame, id_column: str, run_id: str) -> list[dict]:
    docs = []
    columns = list(frame.columns)
    id_index = columns.index(id_column)
    for row in frame.itertuples(index=False, name=None):
        doc = {"_id": _bson_value(row[id_index])}
        for name, value in zip(columns, row):
            value = _bson_value(value)
            if value is not None:
                doc[name] = value
        doc["run_id"] = run_id
        docs.append(doc)
    return docs


def _publish(uri: str, db_name: str, analysis: Analysis, frame, run_id: str, outputs: Outputs,
             metadata: dict) -> tuple[str, Path, float]:
    """Replace the analysis's MongoDB collection and Parquet file with ``frame``, and check the file
    against the collection (:func:`analytics.published.check_published`): (the collection, the file,
    the seconds the check took)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - lazy: this module must import light (tests/test_analytics.py); pyarrow costs 0.22 s

    target = analysis.output
    out_dir = outputs.folder
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create output directory {out_dir}: {exc}") from exc
    final = out_dir / analysis.parquet_name
    token = uuid.uuid4().hex[:12]
    tmp_file = out_dir / f".{analysis.name}.{token}.parquet.tmp"
    tmp_coll = f"{target}__tmp_{token}"

    table = output_table(analysis, frame, run_id)
    meta = dict(table.schema.metadata or {})
    meta[b"sci_ingest"] = json.dumps({"analysis": analysis.name, "run_id": run_id, **metadata,
                                      **outputs.origin()}).encode()  # fmt: skip
    table = table.replace_schema_metadata(meta)

    client = shared_client(uri)
    try:
        try:
            pq.write_table(table, tmp_file)
        except OSError as exc:
            raise ConfigError(f"cannot write {tmp_file}: {exc}") from exc
        db = client[db_name]
        with db_errors(f"publishing {db_name}.{target}", uri=uri):
            docs = output_documents(frame, analysis.output_id, run_id)
            if docs:
                db[tmp_coll].insert_many(docs, ordered=False)
            else:
                db.create_collection(tmp_coll)
            # none on a float where the server's index keys lose the order of numbers: every
            # client's answers stay exact.  One command: the server reads the documents once.
            build = [IndexModel(list(keys)) for keys in exact_indexes(db, target, analysis.indexes)[0]]
            # MongoDB renames by changing a name, so the output appears with its indexes.  A server
            # whose rename copies every row and index entry (ingest.store.servers.Traits) gets the
            # rows renamed bare and indexed in place, a reader meanwhile getting the same answers,
            # only slower.
            after = bool(build) and traits(db).renames_by_copying
            if build and not after:
                db[tmp_coll].create_indexes(build)
            client.admin.command("renameCollection", f"{db_name}.{tmp_coll}",
                                 to=f"{db_name}.{target}", dropTarget=True)
            if after:
                db[target].create_indexes(build)
        checked = check_published(uri, db_name, analysis, tmp_file, final)
        os.replace(tmp_file, final)
    except BaseException:
        tmp_file.unlink(missing_ok=True)
        try:
            client[db_name].drop_collection(tmp_coll)
        except Exception:  # best effort cleanup; the original error matters
            log.warning("could not drop temporary collection %s.%s", db_name, tmp_coll)
        raise
    return target, final, checked


# ------------------------------------------------------------------ running
def run_analysis(analysis: Analysis, client, uri: str, db_name: str, run_id: str, out_dir: Path | Outputs,
                 partitions: int | None = None, *, partition_key: str | None = None,
                 read_mode: str | None = None, incremental: bool = False, scope=None,
                 client_for=None) -> AnalysisResult:
    """Run one analysis on the Dask ``client`` and publish its output.

    ``partition_key`` overrides the declared one (the runner then shuffles on
    the declared group key); ``partitions`` fixes the number of key ranges;
    ``read_mode`` forces ``ranges`` or ``stream`` (default: ``auto``, see
    :mod:`analytics.reading.planning`).  ``incremental``: only the groups of the files
    loaded since the analysis last ran, where it allows that (see
    :mod:`analytics.increment`; the result's ``scope`` says what was read and why); ``scope``: that
    plan, made already (:func:`analytics.increment.plan_scope`; ``client`` may then be None when its
    mode is ``none`` or ``merged``, and ``client_for()`` gives one should the merge fall back to a
    whole read).  ``out_dir``: the database's outputs (:func:`ingest.store.outputs.outputs_of`), or a
    folder the caller chose (its files record the server of ``uri``).
    """
    if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
        raise ConfigError(f"partitions must be a positive integer, got {partitions!r}")
    started = time.perf_counter()
    outputs = as_outputs(out_dir, uri, db_name)
    scope = scope or plan_scope(analysis, uri, db_name, outputs, incremental)
    scope.run_id = run_id
    log.info("analysis %s scope: %s", analysis.name, scope.reason)
    if scope.mode == "none":
        record_scope(uri, db_name, analysis, scope)
        return AnalysisResult(name=analysis.name, records_in=0, records_out=0, partitions=0,
                              collection=analysis.output, parquet_path=outputs.path(analysis),
                              run_id=run_id, seconds=time.perf_counter() - started, scope=scope.describe())  # fmt: skip
    merged = None
    if scope.mode == "merged":
        try:
            with db_errors(f"reading what is new for {analysis.name}", uri=uri):
                merged = merge_new(analysis, uri, db_name, outputs, scope)
        except SciIngestError:
            raise
        except Exception as exc:  # pandas failures inside the merge
            raise AnalysisError(f"analysis {analysis.name} failed: {type(exc).__name__}: {exc}") from exc
        if merged is None:
            scope = replace(scope, mode="whole", reason=f"whole collection: {analysis.name} could not merge the new "
                                                        "files into its table")  # fmt: skip
    if merged is not None:
        frame, excluded, records_in, read = merged
        summary = dict(analysis.summary(frame)) if analysis.summary is not None else {}
        metadata = {"records_in": records_in, "partitions": 1, "excluded": excluded, "read": read}
        publishing = time.perf_counter()
        published = _publish(uri, db_name, analysis, frame, run_id, outputs, {**metadata, "scope": scope.describe()})
        return _done(analysis, scope, uri, db_name, started, publishing, records_in, frame, 1, published, run_id,
                     excluded, read, summary)
    if client is None and client_for is not None:
        client = client_for()
    try:
        partials, records_in, n_parts, plan, joined = _compute(analysis, client, uri, db_name, partitions,
                                                               partition_key or analysis.partition_key, read_mode,
                                                               scoped_queries(analysis, scope)
                                                               if scope.mode == "changed" else ())  # fmt: skip
        frame, excluded = analysis.finish(partials, _map_units(client))
        summary = dict(analysis.summary(frame)) if analysis.summary is not None else {}
    except SciIngestError:
        raise
    except Exception as exc:  # Dask / pandas failures inside the analysis
        raise AnalysisError(f"analysis {analysis.name} failed: {type(exc).__name__}: {exc}") from exc
    read = plan.describe()
    if joined:
        read["join"] = joined
    metadata = {"records_in": records_in, "partitions": n_parts, "excluded": excluded, "read": read}
    if summary:
        metadata["summary"] = summary
    publishing = time.perf_counter()
    if scope.mode == "changed":
        published = publish_changes(uri, db_name, analysis, frame, run_id, outputs, scope, metadata, output_documents)
    else:
        published = _publish(uri, db_name, analysis, frame, run_id, outputs, {**metadata, "scope": scope.describe()})
    return _done(analysis, scope, uri, db_name, started, publishing, records_in, frame, n_parts, published, run_id,
                 excluded, read, summary)


def _done(analysis: Analysis, scope, uri: str, db_name: str, started: float, publishing: float, records_in: int,
          frame, n_parts: int, published: tuple[str, Path, float], run_id: str, excluded: dict, read: dict,
          summary: dict) -> AnalysisResult:
    """The published run's state recorded, and its result (``published``: the collection, the Parquet
    file and the seconds its check took)."""
    publish_s = time.perf_counter() - publishing
    collection, parquet_path, check_s = published
    record_scope(uri, db_name, analysis, scope)
    result = AnalysisResult(
        name=analysis.name, records_in=records_in, records_out=len(frame), partitions=n_parts,
        collection=collection, parquet_path=parquet_path, run_id=run_id,
        seconds=time.perf_counter() - started, excluded=excluded, read=read, scope=scope.describe(),
        summary=summary, publish_s=round(publish_s, 6), check_s=round(check_s, 6),
    )
    log.info("analysis %s: %d in, %d out, %d partitions (%s), %.2fs", analysis.name, records_in, len(frame),
             n_parts, read.get("mode"), result.seconds)
    return result


def analyze(
    uri: str,
    db_name: str,
    run_id: str,
    out_dir: Path | Outputs,
    scheduler_address: str | None = None,
    names: Sequence[str] | None = None,
    partitions: int | None = None,
    *,
    client=None,
    partition_keys: dict[str, str] | None = None,
    read_mode: str | None = None,
    incremental: bool = False,
) -> list[AnalysisResult]:
    """Run the ``names`` analyses (default: all, by name) and publish their outputs.

    Uses ``client`` when given (it is left open), else a client from
    :func:`ingest.cluster.dask_client` (``scheduler_address`` or a private
    LocalCluster).  ``partitions`` fixes the number of partitions per analysis;
    by default it follows the collection size and the number of Dask threads.
    ``partition_keys`` maps an analysis name to a partition key other than its
    declared one.  ``incremental``: see :func:`run_analysis`.  An unknown name raises
    :class:`analytics.registry.UnknownAnalysis`.
    """
    if not run_id or not isinstance(run_id, str):
        raise ConfigError("analyze needs a non-empty run_id")
    chosen = select_analyses(list(names) if names is not None else None)

    def run_all(dask) -> list[AnalysisResult]:
        return [run_analysis(a, dask, uri, db_name, run_id, out_dir, partitions,
                             partition_key=(partition_keys or {}).get(a.name), read_mode=read_mode,
                             incremental=incremental)
                for a in chosen]

    if client is not None:
        return run_all(client)
    with dask_client(scheduler_address) as own:
        return run_all(own)
