"""``split-size``: the Dask analysis stage at input-split sizes from 8 to 256 MB (MH-F5).

The MH study ran mongo-hadoop on about 9.3 million census records (about 4 GB) with input
splits of 8 to 256 MB: the 8 MB default made more than 500 mappers; larger splits made
about 40 and ran much faster; 128 and 256 MB were alike, and 128 MB was adopted.

Here the split is the unit of work of the project's Dask stage
(:func:`analytics.bench.dataset.run_stage`: the runner's planning, reading, per-partition
function and combine, with the split exposed): a key range read by one task where the
server can seek and sample its key (a real MongoDB), else a chunk of the one stream the
driver reads and hands to the workers (the embedded SecantusDB, whose plans say it can do
neither cheaply).  A split of ``S`` bytes is turned into ranges or rows as mongo-hadoop's
``splitVector`` does (:func:`analytics.bench.dataset.split_for`): the collection's data
size over ``S``, or ``S`` over the average document.

**Scaling.**  The nominal split sizes (``split_mb``) are the study's; the collection is
smaller, so each split is scaled by ``collection bytes / reference_mb`` (``reference_mb``
= 4,096, the study's 4 GB): the number of partitions then spans the study's range (about
512 at 8 MB down to 16 at 256 MB) whatever the collection's size.  At ``--full`` the
collection is about 4 GB and the splits are the nominal ones.  ``tiny`` (the tests) uses a
reference of 256 MB to keep the task count small.

Points: ``split_mb`` (nominal), ``split_kb`` (the split actually used), the read mode,
``partitions`` (made here) beside ``study_partitions`` (the same split over the reference
collection: what mongo-hadoop would have made of 4 GB), ``rows`` read, ``seconds`` (median
of ``repeats``, with the fastest and slowest), the speed-up over the first (8 MB) split,
and ``equal`` (the output equals the first split size's).  A streamed chunk is cut only
where the group key changes (for an analysis with one), so chunks may hold a few more rows
than the split; ``oxide_formation_energy`` (the default, no group key) is cut exactly.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.dataset import BenchData, collection_size, frames_equal, run_stage, split_for
from analytics.registry import get_analysis
from ingest.cluster import dask_client, warm_up

__all__ = ["EXPERIMENTS", "Split", "scaled_splits", "run"]

STUDY_MB = 4096  # the study's collection: about 9.3M records, 4 GB


@dataclass(frozen=True)
class Split:
    """One split size: the study's nominal size, the bytes used here, and what they make."""

    split_mb: int  # nominal (the study's axis)
    split_bytes: float  # scaled to this collection
    partitions: int  # key ranges, where the server's plans allow ranges
    chunk_rows: int  # documents per streamed chunk, where they do not
    study_partitions: int  # the splits of this size over the reference collection

    @property
    def split_kb(self) -> float:
        return round(self.split_bytes / 1024, 1)


def scaled_splits(uri: str, db_name: str, collection: str, split_mbs: list[int],
                  reference_mb: int) -> tuple[float, int, int, list[Split]]:
    """(scale factor, documents, bytes, splits): each nominal split scaled by the collection's
    size over ``reference_mb``, so it keeps its share of the input."""
    count, size = collection_size(uri, db_name, collection)
    factor = size / (reference_mb * 2**20)
    splits = []
    for split_mb in split_mbs:
        split_bytes = split_mb * 2**20 * factor
        partitions, chunk_rows = split_for(uri, db_name, collection, split_bytes)
        splits.append(Split(split_mb, split_bytes, partitions, chunk_rows, math.ceil(reference_mb / split_mb)))
    return factor, count, size, splits


def measure(ctx, client, analysis, split: Split, repeats: int):
    """(median seconds, fastest, slowest, the last stage's result) of ``repeats`` stages at ``split``."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run_stage(analysis, client, ctx.uri, ctx.db_name, partitions=split.partitions,
                           chunk_rows=split.chunk_rows)
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times), max(times), result


def run(ctx, params: dict) -> list[dict]:
    analysis = get_analysis(params.get("analysis", "oxide_formation_energy"))
    data = BenchData(ctx, materials=params["materials"], pasta_copies=params.get("pasta_copies", 0))
    data.grow(params["scale"])
    reference_mb = params["reference_mb"]
    factor, count, size, splits = scaled_splits(ctx.uri, ctx.db_name, analysis.source, params["split_mb"],
                                                reference_mb)
    ctx.log(f"{analysis.source}: {count:,} documents, {size / 2**20:.1f} MB; splits scaled by {factor:.3g} "
            f"(reference {reference_mb:,} MB)")
    if not 0.999 <= factor <= 1.001:
        span = " (the partition counts span the study's: 4 GB in 8-256 MB splits)" if reference_mb == STUDY_MB else ""
        ctx.note(f"split sizes scaled by {factor:.4g}: the collection is {size / 2**20:.1f} MB against a "
                 f"reference of {reference_mb:,} MB, so each nominal split keeps its share of the input{span}")
    repeats = max(1, int(params.get("repeats", 1)))
    points: list[dict] = []
    reference = None
    with dask_client(ctx.scheduler) as client:
        warm_up(client, "analyze", ctx.uri)
        run_stage(analysis, client, ctx.uri, ctx.db_name)  # a first read: every later one finds the same cache
        last = 0.0
        for split in splits:
            if points and ctx.remaining() < last * repeats * 1.5 + 2:
                ctx.note(f"cut short: split {split.split_mb} MB and larger not measured "
                         f"({ctx.remaining():.0f} s left)")
                break
            last, fastest, slowest, result = measure(ctx, client, analysis, split, repeats)
            if reference is None:
                reference, equal = result.frame, True
            else:
                equal, why = frames_equal(reference, result.frame, analysis.output_id)
                if not equal:
                    ctx.note(f"split {split.split_mb} MB: output differs from the first split size's: {why}")
            points.append({
                "split_mb": split.split_mb, "split_kb": split.split_kb, "mode": result.mode,
                "partitions": result.partitions, "study_partitions": split.study_partitions, "rows": result.rows,
                "rows_per_partition": round(result.rows / max(result.partitions, 1), 1),
                "seconds": round(last, 4), "seconds_min": round(fastest, 4), "seconds_max": round(slowest, 4),
                "equal": bool(equal),
            })  # fmt: skip
            ctx.log(f"split {split.split_mb} MB ({split.split_kb} KB): {result.partitions} {result.mode} "
                    f"partitions, {result.rows:,} rows, {last:.3f} s")
    base = next((p["seconds"] for p in points if p["split_mb"] == params["split_mb"][0]), None)
    for p in points:
        p["speedup_vs_first"] = round(base / p["seconds"], 3) if base and p["seconds"] else None
    return points


EXPERIMENTS = (
    Experiment(
        name="split-size",
        study="000 MongoDB + Hadoop (MH)",
        figures="MH-F5",
        title="the Dask analysis stage against the input-split (partition) size, 8-256 MB",
        run=run,
        sizes={
            "tiny": {"materials": 300, "scale": 2, "split_mb": [8, 32, 128], "reference_mb": 256, "repeats": 1},
            "quick": {"materials": 3000, "scale": 4, "split_mb": [8, 16, 32, 64, 128, 256],
                      "reference_mb": STUDY_MB, "repeats": 1},
            "full": {"materials": 30_000, "scale": 48, "split_mb": [8, 16, 32, 64, 128, 256],
                     "reference_mb": STUDY_MB, "repeats": 3},
        },
        plot=Plot(x="split_mb", y=("seconds",), xlabel="split size (MB, nominal: the study's)", ylabel="seconds",
                  title="split-size: the stage against the split size (MH-F5)", xlog=True),
        published=(
            Published("MH-F5", "mappers (partitions) at the 8 MB default split", 500.0, "partitions",
                      "Hadoop over mongo-hadoop, ~9.3M census records (4 GB); nodes n/s", "partitions",
                      {"split_mb": 8}, note="more than 500 mappers at 8 MB; about 40 with larger splits"),
            Published("MH-F5", "speed-up of 128 MB splits over 8 MB", None, "x",
                      "Hadoop over mongo-hadoop, ~9.3M census records (4 GB); nodes n/s", "speedup_vs_first",
                      {"split_mb": 128}, note="much faster with larger splits, flat from 128 to 256 MB; no numbers "
                                              "(the study adopted 128 MB)"),
        ),
        differences="The study varied mongo-hadoop's split size over a 4 GB census collection on Hadoop; here the "
                    "split is the project's Dask partition (a key range, or a streamed chunk on a server without "
                    "cheap seeks and samples) over generated materials, with split sizes scaled to the "
                    "collection so the partition counts match the study's (see the notes); 2 Dask workers share "
                    "the machine with the server.",
    ),
)
