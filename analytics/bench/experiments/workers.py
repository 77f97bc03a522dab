"""``workers``: concurrent writer/reader processes against one MongoDB (SSEARCH thesis, SS-F5.1, SS-F4.1).

What is measured.  W worker **processes** (multiprocessing, ``forkserver`` start method
where the platform has it, else ``spawn``), each with its own client built from the URI,
share a fixed workload as the thesis's workers shared its 80 files: ``documents`` in all
(W-th each), written with ``insert_many(ordered=False)`` in batches of ``batch`` into the
project's ``searches`` and ``hits`` collections; then, once every worker has finished
writing (a barrier), ``reads`` random point reads by ``_id`` in all (W-th each) of
documents that were written.  Per W: ``writes_per_s`` and ``reads_per_s`` (all the
workers' operations over the wall time of the phase, the thesis's "summed over workers"),
the latency of each ``insert_many`` batch (``write_batch_p50_ms`` ...) and of each read
(``read_p50_ms`` ...) merged across processes through HdrHistogram, the documents
written and the reads done.  The collections are dropped before each W (the thesis
rebuilt its VMs for each run).

The documents are real: the bundled ``-m 10`` samples (``samples/pasta/*.m10``) parsed by
the project's parser (:func:`ingest.parsers.pasta.parse_dicts`) and shaped by its document
builder (:func:`ingest.documents.search.search_documents`), ~600 documents of ~1.2 KB.
Each worker parses them once before the timed phase and writes copies whose ``_id`` gets a
suffix naming the W, the worker and the copy, so W workers x N documents are all new.
One extra point (``phase`` = ``generate``) is the client side alone, without a database:
documents per second out of parser + document builder in one process (SS-F4.1's
21,444 documents/s generator).

Bounds: every phase stops at its share of the run's deadline (a point cut short says so,
``complete`` = False, and a note); ``--full`` runs the thesis's 4,014,329 documents and
80,000 reads at 1-80 workers (hours on a small machine, and ~5 GB per point on disk).
"""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import queue
import random
import threading
import time
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any

from analytics.bench.core import Experiment, Plot, Published, experiment_db
from analytics.bench.latency import Latency
from ingest.documents.search import search_documents
from ingest.errors import DatabaseError, InputError, SciIngestError
from ingest.parsers.pasta import parse_dicts
from ingest.store.mongo import close_client, connect, db_errors, insert_new

__all__ = ["EXPERIMENTS"]

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "pasta"
COLLECTIONS = ("searches", "hits")
_START = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
_PRELOAD = ["ingest.store.mongo", "ingest.parsers.pasta", "ingest.documents.search", "analytics.bench.latency", __name__]


# ------------------------------------------------------------------ documents
def sample_files(root: Path = SAMPLES) -> list[Path]:
    files = sorted(root.glob("*.m10"))
    if not files:
        raise InputError(f"no -m 10 samples in {root}: the workers experiment writes the project's own samples")
    return files


def sample_documents(files: list[Path]) -> list[tuple[str, dict]]:
    """``(collection, document)`` for every query and hit of ``files``, as the loader builds them."""
    out: list[tuple[str, dict]] = []
    for path in files:
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        for index, query in enumerate(parse_dicts(io.BytesIO(data), str(path)), start=1):
            doc, hits = search_documents(query, sha256=sha, path=str(path), query_index=index)
            out.append(("searches", doc))
            out.extend(("hits", h) for h in hits)
    return out


def _copy_id(template: list, workers: int, worker: int, i: int) -> tuple[str, str]:
    """The collection and ``_id`` of worker ``worker``'s ``i``-th document in a run of ``workers``."""
    coll, doc = template[i % len(template)]
    return coll, f"{doc['_id']}@{workers}.{worker}.{i // len(template)}"


def generation_rate(files: list[Path], max_docs: int, max_s: float) -> dict:
    """SS-F4.1: parse and build the samples over and over, no database: documents per second."""
    n = passes = 0
    t0 = time.perf_counter()
    while n < max_docs and (time.perf_counter() - t0) < max_s:
        n += len(sample_documents(files))
        passes += 1
    seconds = time.perf_counter() - t0
    return {"phase": "generate", "workers": 1, "documents": n, "files_parsed": passes * len(files),
            "generate_s": round(seconds, 3), "generated_per_s": round(n / seconds, 1) if seconds else None}


# ------------------------------------------------------------------ a gang of processes
def _guarded(target, barrier, results, index, args) -> None:
    """A worker process: ``target(barrier, index, *args)``; its result or its error to ``results``."""
    try:
        results.put((index, True, target(barrier, index, *args)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        results.put((index, False, (isinstance(exc, DatabaseError), f"{type(exc).__name__}: {exc}")))
        barrier.abort()


def run_gang(target, arglists: list[tuple], phases: int, timeouts: list[float], what: str, on_release=None):
    """One process per ``arglists`` entry running ``target(barrier, index, *args)``; the parent
    passes the barrier ``phases`` times with the workers (waiting at most ``timeouts[k]`` s at
    the k-th, then calling ``on_release(k)``) and returns the perf_counter time of each release
    and the results by index.
    A worker's failure (or a worker that never arrives) raises a project error naming it."""
    mp: ForkServerContext | SpawnContext
    if _START == "forkserver":
        mp = multiprocessing.get_context("forkserver")
        mp.set_forkserver_preload(_PRELOAD)
    else:
        mp = multiprocessing.get_context("spawn")
    barrier = mp.Barrier(len(arglists) + 1)
    results = mp.Queue()
    procs = [mp.Process(target=_guarded, args=(target, barrier, results, i, a), daemon=True)
             for i, a in enumerate(arglists)]  # fmt: skip
    for p in procs:
        p.start()
    times: list[float] = []
    found: dict[int, Any] = {}
    failed: list[tuple[bool, str]] = []  # (a DatabaseError, its message)
    try:
        for k in range(phases):
            try:
                barrier.wait(timeouts[k])
            except threading.BrokenBarrierError:
                break
            times.append(time.perf_counter())
            if on_release is not None:
                on_release(k)
        while len(found) + len(failed) < len(procs):
            try:
                index, ok, value = results.get(timeout=5 if len(times) < phases else max(timeouts[-1], 30))
            except queue.Empty:  # a worker died without a word
                break
            if ok:
                found[index] = value
            else:
                failed.append(value)
    finally:
        for p in procs:
            p.join(timeout=10)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    if failed or len(times) < phases or len(found) < len(procs):
        real = [f for f in failed if "BrokenBarrierError" not in f[1]] or failed
        if real:
            is_db, message = real[0]
            raise (DatabaseError if is_db else SciIngestError)(f"{what}: a worker process failed: {message}")
        codes = sorted({p.exitcode for p in procs if p.exitcode})
        raise SciIngestError(f"{what}: {len(procs) - len(found)} worker process(es) stopped without a result "
                             f"(exit codes {codes or 'none'}; a barrier timed out after {timeouts})")
    return times, [found[i] for i in range(len(procs))]


# ------------------------------------------------------------------ one worker process
def _worker(barrier, index, uri, db_name, workers, n_docs, n_reads, batch, write_until, read_until, written,
            seed) -> dict:  # fmt: skip

    template = sample_documents(sample_files())
    client = connect(uri)
    try:
        db = client[db_name]
        write_lat, read_lat = Latency(), Latency()
        buffers: dict[str, list] = {c: [] for c in COLLECTIONS}
        done = batches = 0
        barrier.wait()  # 1: everyone is ready -> writes start

        def flush(coll: str) -> None:
            nonlocal done, batches
            docs = buffers[coll]
            t = time.perf_counter()
            inserted, _dups = insert_new(db[coll], docs)
            write_lat.record_s(time.perf_counter() - t)
            done += inserted
            batches += 1
            buffers[coll] = []

        cut_writes = False
        with db_errors(f"worker {index}: inserting documents", uri=uri):
            for i in range(n_docs):
                if i % 32 == 0 and time.time() > write_until:
                    cut_writes = True
                    break
                coll, new_id = _copy_id(template, workers, index, i)
                buffers[coll].append({**template[i % len(template)][1], "_id": new_id})
                if len(buffers[coll]) >= batch:
                    flush(coll)
            for coll in COLLECTIONS:
                if buffers[coll]:
                    flush(coll)
        written[index] = done  # documents 0 .. done-1 of this worker are all stored
        barrier.wait()  # 2: every worker has written -> reads start

        counts = list(written)
        total = sum(counts)
        rng = random.Random(seed)
        reads = hits = 0
        cut_reads = False
        with db_errors(f"worker {index}: reading documents by _id", uri=uri):
            for r in range(n_reads if total else 0):
                if r % 16 == 0 and time.time() > read_until:
                    cut_reads = True
                    break
                k = rng.randrange(total)
                w = 0
                while k >= counts[w]:
                    k -= counts[w]
                    w += 1
                coll, doc_id = _copy_id(template, workers, w, k)
                t = time.perf_counter()
                found = db[coll].find_one({"_id": doc_id})
                read_lat.record_s(time.perf_counter() - t)
                reads += 1
                hits += found is not None
        barrier.wait()  # 3: reads done
        return {"written": done, "batches": batches, "write_lat": write_lat.encode(), "cut_writes": cut_writes,
                "reads": reads, "found": hits, "read_lat": read_lat.encode(), "cut_reads": cut_reads}
    finally:
        close_client(client)


def _share(total: int, parts: int, i: int) -> int:
    return total // parts + (1 if i < total % parts else 0)


# ------------------------------------------------------------------ the experiment
def run(ctx, params: dict) -> list[dict]:
    files = sample_files()
    points = [generation_rate(files, params["generate_docs"], params["generate_s"])]
    ctx.log(f"  generate (no database): {points[0]['generated_per_s']:,.0f} documents/s "
            f"({points[0]['documents']:,} in {points[0]['generate_s']} s)")
    with experiment_db(ctx, COLLECTIONS) as (client, db):
        for n, workers in enumerate(params["workers"]):
            left = len(params["workers"]) - n
            if ctx.remaining() < 3:
                ctx.note(f"stopped before {workers} workers: the time budget of this size ran out")
                break
            with db_errors("dropping the workers' collections", uri=ctx.uri):
                for coll in COLLECTIONS:
                    db.drop_collection(coll)
            share = ctx.remaining() / left
            now = time.time()
            write_until, read_until = now + share * params["write_share"], now + share
            mp = multiprocessing.get_context(_START)
            written = mp.Array("q", workers, lock=False)
            arglists = [(ctx.uri, ctx.db_name, workers, _share(params["documents"], workers, i),
                         _share(params["reads"], workers, i), params["batch"], write_until, read_until, written,
                         params.get("seed", 1) * 1000 + i) for i in range(workers)]  # fmt: skip
            grace = 60 + workers
            times, results = run_gang(_worker, arglists, 3, [grace + share, share + grace, share + grace],
                                      f"workers ({workers})")  # fmt: skip
            write_lat, read_lat = Latency(), Latency()
            for r in results:
                write_lat.add_encoded(r["write_lat"])
                read_lat.add_encoded(r["read_lat"])
            write_s, read_s = times[1] - times[0], times[2] - times[1]
            docs = sum(r["written"] for r in results)
            reads = sum(r["reads"] for r in results)
            complete = not any(r["cut_writes"] or r["cut_reads"] for r in results)
            point = {"phase": "database", "workers": workers, "documents_asked": params["documents"],
                     "documents": docs, "write_s": round(write_s, 3),
                     "writes_per_s": round(docs / write_s, 1) if write_s > 0 else None,
                     **write_lat.summary("write_batch_"),
                     "reads_asked": params["reads"], "reads": reads, "reads_found": sum(r["found"] for r in results),
                     "read_s": round(read_s, 3),
                     "reads_per_s": round(reads / read_s, 1) if read_s > 0 and reads else None,
                     **{k: v for k, v in read_lat.summary("read_").items() if k != "read_count"},
                     "complete": complete}  # fmt: skip
            if not complete:
                ctx.note(f"{workers} workers cut short by the time budget: {docs:,} of {params['documents']:,} "
                         f"documents written, {reads:,} of {params['reads']:,} reads")
            if point["reads_found"] != reads:
                ctx.note(f"{workers} workers: {reads - point['reads_found']} reads found no document")
            points.append(point)
            ctx.log(f"  {workers} workers: {point['writes_per_s'] or 0:,.0f} writes/s, "
                    f"{point['reads_per_s'] or 0:,.0f} reads/s ({docs:,} documents, {reads:,} reads)")
    _relative_to_best(points)
    return points


def _relative_to_best(points: list[dict]) -> None:
    """``writes_vs_best_pct`` / ``reads_vs_best_pct``: each W against the best W (SS-F5.1's 40 workers: -16 %)."""
    rows = [p for p in points if p["phase"] == "database"]
    for metric, column in (("writes_per_s", "writes_vs_best_pct"), ("reads_per_s", "reads_vs_best_pct")):
        best = max((p[metric] for p in rows if p.get(metric)), default=None)
        for p in rows:
            p[column] = round(100.0 * (p[metric] / best - 1.0), 1) if best and p.get(metric) else None


_THESIS_HW = "AWS EC2 m1.xlarge (4 vCPU, 15 GB), 1 MongoDB node (version n/s), 1 worker VM"
EXPERIMENTS = (
    Experiment(
        name="workers",
        table=(  # the printed columns
            "phase", "workers", "documents", "generated_per_s", "writes_per_s",
            "write_batch_p50_ms", "write_batch_p99_ms", "reads", "reads_per_s", "read_p50_ms",
            "read_p99_ms", "complete",
        ),
        study="001 SSEARCH thesis (MongoDB vs Riak)",
        figures="SS-F5.1, SS-F4.1",
        title="writes/s and reads/s of W concurrent worker processes on one MongoDB (real -m 10 documents)",
        run=run,
        sizes={
            "tiny": {"workers": [1, 2], "documents": 600, "reads": 200, "batch": 100, "write_share": 0.7,
                     "generate_docs": 1_200, "generate_s": 2.0},
            "quick": {"workers": [1, 2, 4, 8], "documents": 30_000, "reads": 6_000, "batch": 500, "write_share": 0.7,
                      "generate_docs": 20_000, "generate_s": 4.0},
            "full": {"workers": [1, 2, 4, 8, 16, 20, 32, 40, 80], "documents": 4_014_329, "reads": 80_000,
                     "batch": 1_000, "write_share": 0.85, "generate_docs": 5_017_837, "generate_s": 300.0},
        },
        plot=Plot(x="workers", y=("writes_per_s", "reads_per_s"), xlabel="worker processes (log2)",
                  ylabel="operations/s (summed over workers)", xlog=True, where={"phase": "database"},
                  title="workers: writes/s then reads/s against W concurrent workers (SS-F5.1)"),
        published=(
            Published("SS-F5.1", "best writes/s (at 20 workers)", 4_593, "writes/s", _THESIS_HW, "writes_per_s",
                      {"phase": "database", "workers": "max"}, note="ours: the best of our worker counts"),
            Published("SS-F5.1", "best reads/s (at 20 workers)", 10_126, "reads/s", _THESIS_HW, "reads_per_s",
                      {"phase": "database", "workers": "max"}, note="ours: the best of our worker counts"),
            Published("SS-F5.1", "writes at 40 workers against the best", -16, "%", _THESIS_HW, "writes_vs_best_pct",
                      {"phase": "database", "workers": 40}, note="≈16 % lost on both writes and reads; more workers "
                      "change nothing (--full runs 40)"),
            Published("SS-F4.1", "documents generated without a database", 21_444, "documents/s",
                      "AWS EC2 m1.xlarge (4 vCPU, 15 GB), Python 2 parser", "generated_per_s", {"phase": "generate"},
                      note="100 files, 5,017,837 documents in 233 s (the thesis also read >60,000/s)"),
        ),
        differences="The thesis's workers parsed 80 PASTA files of 9-12 MB while writing 4 collections (tasks, rna, "
                    "gs, align; 122-750 B documents, MMAPv1-era MongoDB, workers on their own VM); ours write the "
                    "project's searches/hits documents (~1.2 KB) built from the bundled samples once per worker before "
                    "the timed phase, so the write phase measures the database alone; workers and server share one "
                    "machine. "
                    "quick: 30,000 documents and 6,000 reads at 1-8 workers.",
    ),
)
