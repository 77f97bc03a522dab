"""``sinks``: where the analysis reads from and writes to, phase by phase (MH-F9, MH-F10).

The MH study ran one job with its input and output in HDFS or MongoDB, and a fifth way
that copies the MongoDB input to HDFS first: HDFS to HDFS was fastest; for data already in
MongoDB, reading it there and writing the output to HDFS was best, and copying it first
was slowest (no numbers).  MH-F10 added cores: the map phase sped up, the reduce phase
stayed flat.

For data in MongoDB (the case of this project), three ways, each timed phase by phase on a
Dask cluster of ``workers`` single-threaded processes (the project's
:func:`ingest.cluster.dask_client`), at growing input sizes
(:class:`analytics.bench.dataset.BenchData`):

* ``mongo-to-mongo``: ``read`` the source into the workers' memory as the runner reads it
  (the server's plan: key ranges read by the workers, or one stream the driver cuts into
  chunks that the workers decode), ``compute`` the declared per-partition function on the
  workers and the combine once, ``write`` the output documents (the runner's own document
  form) into a MongoDB collection;
* ``mongo-to-parquet``: the same read and compute, ``write`` the output as one Parquet
  file (Parquet on a local disk stands in for HDFS);
* ``copy-first``: ``export`` the source to Parquet first (the same read, then every worker
  writes its partitions, one file each), then ``read`` those files back on the workers,
  ``compute``, and ``write`` the output to Parquet.

Points: sink, analysis, scale, workers, documents read, the phases' seconds (``read_s``,
``compute_s``, ``write_s``, ``export_s``; 0 where a way has no such phase), ``total_s``,
the output rows, the rows found written (documents counted in MongoDB, rows in the
Parquet footer) and ``equal`` (the output equals ``mongo-to-mongo``'s).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.dataset import BenchData, frames_equal
from analytics.reading.partitions import read_partition
from analytics.reading.planning import plan_reads
from analytics.reading.streaming import chunk_frame, read_chunks
from analytics.registry import get_analysis
from analytics.runner import output_documents
from ingest.cluster import dask_client, thread_count, warm_up
from ingest.store.mongo import db_errors, shared_client

__all__ = ["EXPERIMENTS", "SINKS", "run"]

SINKS = ("mongo-to-mongo", "mongo-to-parquet", "copy-first")


# ------------------------------------------------------------------ worker functions (module level: picklable)
def _arrow_mapping():
    lists = pa.list_(pa.string())
    return {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), lists: pd.ArrowDtype(lists)}.get


def write_part(frame, path: str) -> int:
    """Write one partition to a Parquet file (runs on a worker); its rows."""
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return len(frame)


def read_part(path: str):
    """One Parquet partition back into the frame the reader makes (Arrow-backed lists, nullable ints)."""
    return pq.read_table(path).to_pandas(types_mapper=_arrow_mapping())


# ------------------------------------------------------------------ phases
def _wait(client, futures: list) -> None:
    """Until every future is done (``distributed.wait`` with ``client``, which is not the default one)."""
    from distributed import wait  # noqa: PLC0415 - lazy: bench list imports every experiment; distributed costs 0.5 s

    with client.as_current():
        wait(futures)


def read_source(client, analysis, uri: str, db_name: str, chunk_rows: int | None) -> list:
    """The source as futures of frames held by the workers, read as the server's plan says."""
    plan = plan_reads(uri, db_name, analysis.source, columns=analysis.columns, key=analysis.partition_key,
                      query=analysis.filter or None, group_key=analysis.group_key, threads=thread_count(client),
                      chunk_rows=chunk_rows, sort_groups=True)
    if plan.mode == "stream":
        columns = plan.stream.columns
        futures = [client.submit(chunk_frame, columns, raw, pure=False) for _, raw in read_chunks(plan.stream)]
    else:
        futures = client.map(read_partition, plan.specs, pure=False)
    _wait(client, futures)
    return futures


def compute(client, analysis, futures: list):
    """The declared function on every partition (on the workers), then the combine here."""
    partials = client.gather(client.map(analysis.partition, futures, pure=False))
    return analysis.combine_partials(partials)[0]


def write_mongo(uri: str, db_name: str, collection: str, frame, id_column: str, run_id: str) -> int:
    """Replace ``collection`` with the output documents (the runner's form); documents found."""
    db = shared_client(uri)[db_name]
    with db_errors(f"writing {db_name}.{collection}", uri=uri):
        db.drop_collection(collection)
        docs = output_documents(frame, id_column, run_id)
        for start in range(0, len(docs), 1000):
            db[collection].insert_many(docs[start:start + 1000], ordered=False)
        return db[collection].count_documents({})


def write_parquet(path: Path, frame, run_id: str) -> int:
    """The output as one Parquet file (written to a temporary name, then renamed); rows in its footer."""
    tmp = path.with_name(path.name + ".part")
    pq.write_table(pa.Table.from_pandas(frame.assign(run_id=run_id), preserve_index=False), tmp)
    tmp.replace(path)
    return pq.read_metadata(path).num_rows


def one_way(sink: str, client, analysis, ctx, chunk_rows: int | None, folder: Path, run_id: str) -> dict:
    """Run ``sink`` once: the output frame, the rows written and the phases' seconds."""
    phases = {"read_s": 0.0, "compute_s": 0.0, "write_s": 0.0, "export_s": 0.0}
    folder.mkdir(parents=True, exist_ok=True)
    clock = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[phase] += now - clock
        clock = now

    if sink == "copy-first":
        parts = read_source(client, analysis, ctx.uri, ctx.db_name, chunk_rows)
        paths = [str(folder / f"part-{i:05d}.parquet") for i in range(len(parts))]
        written = client.map(write_part, parts, paths, pure=False)
        _wait(client, written)
        client.cancel(parts)
        lap("export_s")
        futures = client.map(read_part, paths, pure=False)
        _wait(client, futures)
    else:
        futures = read_source(client, analysis, ctx.uri, ctx.db_name, chunk_rows)
    lap("read_s")
    rows_in = sum(client.gather(client.map(len, futures, pure=False)))
    clock = time.perf_counter()  # counting the rows is not a phase
    frame = compute(client, analysis, futures)
    lap("compute_s")
    if sink == "mongo-to-mongo":
        rows_written = write_mongo(ctx.uri, ctx.db_name, f"{analysis.output}_sink", frame, analysis.output_id, run_id)
    else:
        rows_written = write_parquet(folder / f"{analysis.name}.parquet", frame, run_id)
    lap("write_s")
    client.cancel(futures)
    return {"frame": frame, "rows_in": rows_in, "rows_written": rows_written, **phases}


# ------------------------------------------------------------------ the experiment
def _measure(ctx, client, analysis, scale: int, chunk_rows: int | None) -> list[dict]:
    """The three ways at one size on one cluster: one point each."""
    workers = len(client.nthreads())
    points, reference = [], None
    for sink in SINKS:
        folder = ctx.scratch / "sinks" / f"{scale}x-{workers}w" / analysis.name / sink
        out = one_way(sink, client, analysis, ctx, chunk_rows, folder, f"bench-sinks-{scale}x-{workers}w-{sink}")
        if reference is None:
            reference, equal = out["frame"], True
        else:
            equal, why = frames_equal(reference, out["frame"], analysis.output_id)
            if not equal:
                ctx.note(f"{sink} differs from mongo-to-mongo ({analysis.name}, {scale}x, {workers} workers): {why}")
        total = out["read_s"] + out["compute_s"] + out["write_s"] + out["export_s"]
        points.append({
            "sink": sink, "analysis": analysis.name, "scale": scale, "workers": workers,
            "documents": out["rows_in"], "read_s": round(out["read_s"], 4), "compute_s": round(out["compute_s"], 4),
            "write_s": round(out["write_s"], 4), "export_s": round(out["export_s"], 4), "total_s": round(total, 4),
            "rows_out": len(out["frame"]), "rows_written": out["rows_written"], "equal": bool(equal),
        })  # fmt: skip
        ctx.log(f"{analysis.name} {scale}x {workers} workers {sink}: {total:.3f} s (read {out['read_s']:.3f}, "
                f"compute {out['compute_s']:.3f}, write {out['write_s']:.3f}, export {out['export_s']:.3f})")
    return points


def run(ctx, params: dict) -> list[dict]:
    analyses = [get_analysis(n) for n in params.get("analyses", ["best_hits"])]
    data = BenchData(ctx, materials=params["materials"], pasta_copies=params["pasta_copies"])
    chunk_rows = params.get("chunk_rows")
    worker_counts = params["workers"]
    if ctx.scheduler:
        worker_counts = worker_counts[:1]
        ctx.note(f"--scheduler {ctx.scheduler}: the remote cluster's own workers, one pass (worker counts are "
                 "chosen only for a LocalCluster); the Parquet files are written on the workers' own disks, so "
                 "copy-first needs a folder they share")
    points: list[dict] = []
    with ExitStack() as stack:
        clients = {}
        for workers in worker_counts:  # every cluster started once, kept for all the sizes
            clients[workers] = stack.enter_context(dask_client(ctx.scheduler, n_workers=workers))
            warm_up(clients[workers], "analyze", ctx.uri)
        last = 0.0
        for scale in params["scales"]:
            need = data.seconds_per_copy() * (scale - data.scale) + last * scale / max(data.scale, 1)
            if points and ctx.remaining() < need:
                ctx.note(f"cut short: {scale}x not measured ({ctx.remaining():.0f} s left, about {need:.0f} s "
                         "needed)")
                break
            data.grow(scale)
            started = time.perf_counter()
            for client in clients.values():
                for analysis in analyses:
                    points.extend(_measure(ctx, client, analysis, scale, chunk_rows))
            last = time.perf_counter() - started
    return points


EXPERIMENTS = (
    Experiment(
        name="sinks",
        study="000 MongoDB + Hadoop (MH)",
        figures="MH-F9, MH-F10",
        title="read from MongoDB, write to MongoDB or Parquet, or copy to Parquet first: time per phase",
        run=run,
        sizes={
            "tiny": {"materials": 0, "pasta_copies": 1, "scales": [1, 2], "workers": [1], "chunk_rows": 200},
            "quick": {"materials": 0, "pasta_copies": 20, "scales": [1, 2], "workers": [1, 2], "chunk_rows": 1000},
            "full": {"materials": 25_000, "pasta_copies": 200, "scales": [1, 2, 4, 8], "workers": [1, 2, 4, 8],
                     "chunk_rows": 5000, "analyses": ["best_hits", "oxide_formation_energy"]},
        },
        plot=Plot(x="scale", y=("total_s",), series="sink", xlabel="input size (copies of the base input)",
                  ylabel="seconds (all phases)", title="sinks: where the input and the output live (MH-F9)",
                  where={"analysis": "best_hits"}),
        published=(
            Published("MH-F9", "Mongo in, HDFS (here Parquet) out: total time", None, "s",
                      "Hadoop cluster over mongo-hadoop; nodes n/s", "total_s",
                      {"sink": "mongo-to-parquet", "analysis": "best_hits", "scale": "max"},
                      note="for data in MongoDB, reading it there and writing the output to HDFS was best and "
                           "copying the input to HDFS first slowest; the study gives no numbers (MH-F10: more "
                           "cores sped the map phase up, the reduce phase stayed flat)"),
        ),
        differences="The study's Hadoop job read from and wrote to HDFS or MongoDB on a cluster; here a Dask "
                    "LocalCluster (1-2 workers at --quick) on the machine that also runs the server, Parquet files "
                    "on the local disk for HDFS, and best_hits over copies of the sample -m 10 files. The output "
                    "is combined in the driver and written once (the study's reducers wrote in parallel).",
    ),
)
