"""Run the analysis stages through Dask and publish their outputs.

Read items (``analytics.partitions``) -> pure process (``analytics.stages``) ->
write targets (here).  Importing this module is cheap: Dask, pandas, pyarrow and
pymongo are imported inside the functions that need them, so a CLI may import
it at start-up.

Stages (run all, or any subset by name with ``stages=[...]``):

``best_hits``
    ``hits`` -> ``query_best_hits`` (``_id`` = search_id) and
    ``<out_dir>/best_hits.parquet``.  Hits are partitioned on ``search_id``
    ranges (``$bucketAuto`` never splits one value across buckets), so all hits
    of a search are in one partition and :func:`analytics.stages.best_hits`
    runs per partition.  With ``hits_key="_id"`` a search may straddle
    partitions; the rows are then shuffled on ``search_id`` first.
``oxide_formation_energy``
    ``materials`` -> ``oxide_formation_energy`` (``_id`` = the ceiling, an int)
    and ``<out_dir>/oxide_formation_energy.parquet``.  Partial aggregates per
    partition, combined once.

Publishing replaces a stage's output as a whole: the documents go to a
temporary collection that is then renamed over the target with
``dropTarget=True`` (atomic for readers; SecantusDB 0.7 supports it), and the
Parquet file is written to a temporary name in ``out_dir`` and renamed over
the old one.  Missing values (NaN) are left out of the MongoDB documents,
following the project's "absent, not null" convention; Parquet keeps them as
nulls.  Every document and row carries ``run_id``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ingest.errors import AnalysisError, ConfigError, SciIngestError

log = logging.getLogger(__name__)

#: Stage names in their default order.
STAGES = ("best_hits", "oxide_formation_energy")

#: Source collection, output collection and output ``_id`` column of each stage.
SOURCES = {"best_hits": "hits", "oxide_formation_energy": "materials"}
OUTPUTS = {"best_hits": "query_best_hits", "oxide_formation_energy": "oxide_formation_energy"}
OUTPUT_IDS = {"best_hits": "search_id", "oxide_formation_energy": "formation_energy_ceil"}

# What each stage reads: (column, dotted path, kind) -- see analytics.partitions.
HITS_COLUMNS = (
    ("search_id", "search_id", "string"),
    ("query_id", "query_id", "string"),
    ("library", "library", "string"),
    ("program", "program", "string"),
    ("rank", "rank", "int64"),
    ("hit_id", "hit_id", "string"),
    ("score", "hsps.0.score", "float64"),
    ("evalue", "hsps.0.evalue", "float64"),
    ("bits", "hsps.0.bits", "float64"),
    ("identity", "hsps.0.identity", "float64"),
)
# Dotted inclusion keeps only these HSP fields (not the aligned sequences).
HITS_PROJECTION = {
    "search_id": 1, "query_id": 1, "library": 1, "program": 1, "rank": 1, "hit_id": 1,
    "hsps.score": 1, "hsps.evalue": 1, "hsps.bits": 1, "hsps.identity": 1,
}
MATERIALS_COLUMNS = (
    ("material_id", "_id", "string"),
    ("elements", "elements", "list<string>"),
    ("formation_energy_per_atom", "formation_energy_per_atom", "float64"),
    ("band_gap", "band_gap", "float64"),
)
#: The ``materials`` collection also keeps documents *about* materials (pymatgen
#: entries, XAS spectra, phonon documents; see ingest.parsers.materials): they
#: share their material's ``material_id`` and would count it twice.
MATERIALS_ONLY = {"_ingest.type": {"$nin": ["entry", "xas", "phonon"]}}
MATERIALS_PROJECTION = {"elements": 1, "formation_energy_per_atom": 1, "band_gap": 1}

#: Default partitioning: 2 partitions per Dask thread so every worker has work,
#: none smaller than MIN_ROWS_PER_PARTITION documents (each partition costs a
#: query and a task), and none larger than MAX_ROWS_PER_PARTITION (a partition
#: must fit in a worker's memory however large the collection grows).
MIN_ROWS_PER_PARTITION = 100
MAX_ROWS_PER_PARTITION = 200_000


@dataclass
class StageResult:
    """What one stage did."""

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


# ------------------------------------------------------------------ Dask client
@contextmanager
def dask_client(scheduler_address: str | None = None) -> Iterator["distributed.Client"]:  # noqa: F821
    """A Dask client for the duration of the block, closed at exit.

    With ``scheduler_address`` (e.g. the value of ``DASK_SCHEDULER_ADDRESS``),
    connect to that scheduler; its workers must be able to import sci-ingest.
    Otherwise start a private ``LocalCluster`` of 2 single-threaded worker
    processes, without dashboard and with quiet logs, and shut it down at exit.
    The client is not made the global default scheduler.
    """
    from dask.distributed import Client, LocalCluster

    if scheduler_address:
        try:
            client = Client(scheduler_address, timeout="15s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {scheduler_address}: {exc}") from exc
        try:
            yield client
        finally:
            client.close()
        return

    try:
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    except (OSError, TimeoutError) as exc:
        raise AnalysisError(f"could not start a local Dask cluster: {exc}") from exc
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def warm_up(client) -> int:
    """Import the partition readers' dependencies on every worker; returns the worker count.

    Run once after the cluster starts, so the first stage's timing measures the
    stage and not the workers' imports.
    """
    replies = client.run(_import_worker_modules)
    return len(replies)


def _import_worker_modules() -> bool:
    import analytics.partitions  # noqa: F401  (pandas, pyarrow, pymongo)
    import analytics.stages  # noqa: F401

    return True


# ------------------------------------------------------------------ helpers
def _count(uri: str, db_name: str, collection: str) -> int:
    from ingest.mongo import db_errors, shared_client

    with db_errors(f"counting {db_name}.{collection}", uri=uri):
        return shared_client(uri)[db_name][collection].estimated_document_count()


def _ensure_index(uri: str, db_name: str, collection: str, key: str) -> None:
    """Make sure some index starts with ``key`` so partition range reads use it.

    SecantusDB answers ``_id`` ranges with a collection scan, but serves ranges
    on secondary indexes; without one, every partition would scan everything.
    An existing index led by ``key`` (any name, compound or not) is reused.
    """
    if key == "_id":
        return
    from ingest.mongo import db_errors, shared_client

    with db_errors(f"indexing {db_name}.{collection}.{key}", uri=uri):
        coll = shared_client(uri)[db_name][collection]
        for info in coll.index_information().values():
            if info["key"] and info["key"][0][0] == key:
                return
        coll.create_index([(key, 1)])
    log.info("created index on %s.%s(%s) for partitioned reads", db_name, collection, key)


def default_partitions(threads: int, count: int) -> int:
    """How many partitions to read ``count`` documents in, with ``threads`` Dask threads."""
    threads = max(1, threads)
    spread = min(2 * threads, math.ceil(count / MIN_ROWS_PER_PARTITION))
    return max(1, spread, math.ceil(count / MAX_ROWS_PER_PARTITION))


def _plain(value):
    """A BSON-encodable Python scalar, or None for a missing value."""
    import numpy as np
    import pandas as pd

    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _documents(frame, id_column: str, run_id: str) -> list[dict]:
    docs = []
    columns = list(frame.columns)
    for row in frame.itertuples(index=False, name=None):
        doc = {"_id": _plain(row[columns.index(id_column)])}
        for name, value in zip(columns, row):
            value = _plain(value)
            if value is not None:
                doc[name] = value
        doc["run_id"] = run_id
        docs.append(doc)
    return docs


def _publish(uri: str, db_name: str, stage: str, frame, run_id: str, out_dir: Path,
             metadata: dict) -> tuple[str, Path]:
    """Replace the stage's MongoDB collection and Parquet file with ``frame``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ingest.mongo import db_errors, shared_client

    target = OUTPUTS[stage]
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create output directory {out_dir}: {exc}") from exc
    final = out_dir / f"{stage}.parquet"
    token = uuid.uuid4().hex[:12]
    tmp_file = out_dir / f".{stage}.{token}.parquet.tmp"
    tmp_coll = f"{target}__tmp_{token}"

    table = pa.Table.from_pandas(frame.assign(run_id=run_id), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"sci_ingest"] = json.dumps({"stage": stage, "run_id": run_id, **metadata}).encode()
    table = table.replace_schema_metadata(meta)

    client = shared_client(uri)
    try:
        try:
            pq.write_table(table, tmp_file)
        except OSError as exc:
            raise ConfigError(f"cannot write {tmp_file}: {exc}") from exc
        db = client[db_name]
        with db_errors(f"publishing {db_name}.{target}", uri=uri):
            docs = _documents(frame, OUTPUT_IDS[stage], run_id)
            if docs:
                db[tmp_coll].insert_many(docs, ordered=False)
            else:
                db.create_collection(tmp_coll)
            client.admin.command("renameCollection", f"{db_name}.{tmp_coll}",
                                 to=f"{db_name}.{target}", dropTarget=True)
        os.replace(tmp_file, final)
    except BaseException:
        tmp_file.unlink(missing_ok=True)
        try:
            client[db_name].drop_collection(tmp_coll)
        except Exception:  # best effort cleanup; the original error matters
            log.warning("could not drop temporary collection %s.%s", db_name, tmp_coll)
        raise
    return target, final


# ------------------------------------------------------------------ stages
def _run_best_hits(client, uri: str, db_name: str, n: int | None, hits_key: str):
    from analytics import stages
    from analytics.partitions import meta_for, plan_partitions, read_collection

    count = _count(uri, db_name, "hits")
    if n is None:
        n = default_partitions(sum(client.nthreads().values()), count)
    specs = []
    if count:
        _ensure_index(uri, db_name, "hits", hits_key)
        specs = plan_partitions(uri, db_name, "hits", n, key=hits_key,
                                projection=HITS_PROJECTION, columns=HITS_COLUMNS)
    if not specs:
        return stages.empty(stages.BEST_HITS_DTYPES), 0, 0, {}
    ddf = read_collection(specs, meta_for(HITS_COLUMNS))
    if hits_key != "search_id":
        # A search's hits may straddle partitions: bring each search together.
        ddf = ddf.shuffle(on="search_id")
    out = ddf.map_partitions(stages.best_hits, meta=stages.empty(stages.BEST_HITS_DTYPES))
    frame = client.compute(out, sync=True)
    frame = frame.sort_values("search_id", kind="mergesort").reset_index(drop=True)
    if frame["search_id"].duplicated().any():
        raise AnalysisError("best_hits: a search appeared in more than one partition")
    return frame, int(frame["n_hits"].sum()), len(specs), {}


def _run_oxides(client, uri: str, db_name: str, n: int | None):
    from analytics import stages
    from analytics.partitions import meta_for, plan_partitions, read_collection

    count = _count(uri, db_name, "materials")
    if n is None:
        n = default_partitions(sum(client.nthreads().values()), count)
    specs = []
    if count:
        specs = plan_partitions(uri, db_name, "materials", n, query=MATERIALS_ONLY, key="_id",
                                projection=MATERIALS_PROJECTION, columns=MATERIALS_COLUMNS)
    if not specs:
        frame = stages.oxide_combine([])
        return frame, 0, 0, {"no_formation_energy": 0, "no_elements": 0}
    ddf = read_collection(specs, meta_for(MATERIALS_COLUMNS))
    partials = ddf.map_partitions(stages.oxide_partial, meta=stages.empty(stages.OXIDE_PARTIAL_DTYPES))
    tallies = ddf.map_partitions(stages.oxide_tally, meta=stages.empty(stages.OXIDE_TALLY_DTYPES))
    # One graph: each partition is read once and feeds both reductions.
    partial_frame, tally_frame = client.compute([partials, tallies], sync=True)
    frame = stages.oxide_combine(partial_frame, tally_frame)
    excluded = {
        "no_formation_energy": frame.attrs["excluded_no_formation_energy"],
        "no_elements": frame.attrs["no_elements"],
    }
    return frame, frame.attrs["records_in"], len(specs), excluded


def run_stage(name: str, client, uri: str, db_name: str, run_id: str, out_dir: Path,
              partitions: int | None = None, *, hits_key: str = "search_id") -> StageResult:
    """Run one stage on ``client`` and publish its output."""
    if name not in STAGES:
        raise ConfigError(f"unknown analysis stage {name!r}; known: {', '.join(STAGES)}")
    if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
        raise ConfigError(f"partitions must be a positive integer, got {partitions!r}")
    started = time.perf_counter()
    try:
        if name == "best_hits":
            frame, records_in, n_parts, excluded = _run_best_hits(client, uri, db_name, partitions, hits_key)
        else:
            frame, records_in, n_parts, excluded = _run_oxides(client, uri, db_name, partitions)
    except SciIngestError:
        raise
    except Exception as exc:  # Dask / pandas failures inside the stage
        raise AnalysisError(f"stage {name} failed: {type(exc).__name__}: {exc}") from exc
    frame.attrs = {}
    collection, parquet_path = _publish(
        uri, db_name, name, frame, run_id, out_dir,
        {"records_in": records_in, "partitions": n_parts, "excluded": excluded},
    )
    result = StageResult(
        name=name, records_in=records_in, records_out=len(frame), partitions=n_parts,
        collection=collection, parquet_path=parquet_path, run_id=run_id,
        seconds=time.perf_counter() - started, excluded=excluded,
    )
    log.info("stage %s: %d in, %d out, %d partitions, %.2fs", name, records_in, len(frame),
             n_parts, result.seconds)
    return result


def analyze(
    uri: str,
    db_name: str,
    run_id: str,
    out_dir: Path,
    scheduler_address: str | None = None,
    stages: Sequence[str] | None = None,
    partitions: int | None = None,
    *,
    client=None,
    hits_key: str = "search_id",
) -> list[StageResult]:
    """Run ``stages`` (default: all, in :data:`STAGES` order) and publish their outputs.

    Uses ``client`` when given (it is left open), else a client from
    :func:`dask_client` (``scheduler_address`` or a private LocalCluster).
    ``partitions`` fixes the number of partitions per stage; by default it
    follows the collection size and the number of Dask threads.
    """
    if not run_id or not isinstance(run_id, str):
        raise ConfigError("analyze needs a non-empty run_id")
    names = list(STAGES if stages is None else stages)
    unknown = [s for s in names if s not in STAGES]
    if unknown:
        raise ConfigError(f"unknown analysis stage(s) {', '.join(map(repr, unknown))}; known: {', '.join(STAGES)}")
    if client is not None:
        return [run_stage(s, client, uri, db_name, run_id, Path(out_dir), partitions, hits_key=hits_key)
                for s in names]
    with dask_client(scheduler_address) as own:
        return [run_stage(s, own, uri, db_name, run_id, Path(out_dir), partitions, hits_key=hits_key)
                for s in names]
