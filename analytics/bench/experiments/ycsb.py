"""``ycsb``: YCSB workloads A-F x request distribution x client threads (SanDisk white paper SD-F5..F11).

What is measured.  YCSB's core workload (:mod:`analytics.bench.ycsb`, which follows YCSB's
``CoreWorkload`` and generators): ``records`` records of 10 fields x 100 bytes (1 KB) with YCSB's
hashed keys in the collection ``usertable``, loaded by T threads (the ``load`` point: records/s and
INSERT latency, per ``insertMany`` call of ``load_batch`` records when that is above 1), then one
run per (workload, distribution, threads) of ``operations`` transactions, or fewer when the run's
share of the time budget ends first (``cut_short`` = True and a note).  Per run: ``ops``,
``seconds``, ``ops_per_s`` (all the threads' operations over the phase's wall time) and per
operation type the HdrHistogram percentiles ``read_p50_ms`` .. ``read_p99.9_ms`` (``update_``,
``insert_``, ``scan_``, ``rmw_`` likewise), and ``hottest_key_share``: the share of the run's keyed
requests that went to its most requested key (1/records-ish for uniform, percents for zipfian).

Distributions.  Workload D runs with ``latest`` (as YCSB's ``workloadd`` defines it); the others
with ``uniform`` and ``zipfian`` (YCSB's scrambled zipfian, the workload files' default), the two
distributions of SD-F5..F11; ``latest`` is not run for A-C, E, F (the white paper lists it but has
no results for it).  ``--quick`` runs a subset that fits ~90 s (A, B, C with both distributions, D
latest, E and F zipfian), each run's time being the remaining budget shared among the runs left.
Runs with inserts (D, E) have their inserted records deleted afterwards, so every run starts from
the loaded records, as a fresh YCSB ``run`` process does.

Sizes (records of 1 KB): ``tiny`` 1,000; ``quick`` 20,000 (20 MB, far inside the embedded server's
512 MB WiredTiger cache: the white paper's "32 GB in RAM" case); ``full`` 100,000 (in cache) and
1,000,000 (about 1.1 GB of documents, over the embedded server's cache: the shape of its 256 GB and
1 TB "on disk" cases, scaled down) at 1, 8, 16 and 32 threads, every workload.
"""

from __future__ import annotations

import time

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.ycsb import (
    TABLE,
    WORKLOADS,
    CoreWorkload,
    build_key_name,
    drop_table,
    load_phase,
    remove_run_inserts,
    run_phase,
)
from ingest.store.mongo import close_client, connect, db_errors

__all__ = ["EXPERIMENTS"]

WORKLOAD_INDEX = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5, "F": 6}
_RESERVE_S = 4.0  # kept back from the budget for the deletes after D/E and closing up


def run(ctx, params: dict) -> list[dict]:
    combos = [tuple(c) for c in params["runs"]]
    _note_server(ctx, params)
    points: list[dict] = []
    seed = params.get("seed", 42)
    for records in params["records"]:
        drop_table(ctx.uri, ctx.db_name)
        load_threads = max(params["threads"])
        # the load gets at most its share of the budget: a third, or what records/s allows in full
        stop_at = time.monotonic() + max(1.0, ctx.remaining() * params.get("load_share", 0.3))
        loader = CoreWorkload(WORKLOADS["A"], records, 0)
        loaded = load_phase(ctx.uri, ctx.db_name, loader, load_threads, stop_at, batch=params["load_batch"], seed=seed)
        if loaded.cut_short:
            ctx.note(f"the load of {records:,} records was cut short at {loaded.inserted:,} by the time budget; "
                     "the runs use the records loaded")
        points.append({"phase": "load", "workload": "load", "workload_index": 0, "distribution": None,
                       "threads": load_threads, "records": loaded.inserted, "load_batch": params["load_batch"],
                       "curve": None, "cut_short": loaded.cut_short, **loaded.columns()})  # fmt: skip
        ctx.log(f"  load {loaded.inserted:,} records, {load_threads} threads: {loaded.ops_per_s:,.0f} records/s")
        n = loaded.inserted
        if n < 2:
            ctx.note("no records loaded: no run")
            break
        if any(w == "E" for w, _ in combos):
            _note_scan_plan(ctx)
        todo = [(t, w, d) for t in params["threads"] for w, d in combos]
        for i, (threads, name, dist) in enumerate(todo):
            left = len(todo) - i + (len(params["records"]) - params["records"].index(records) - 1) * len(todo)
            share = (ctx.remaining() - _RESERVE_S) / left
            seconds = min(params["max_run_s"], share)
            if seconds < 0.3:
                ctx.note(f"stopped before workload {name} {dist} at {threads} threads ({records:,} records): "
                         f"the time budget of this size ran out ({len(todo) - i} runs not done)")
                return points
            workload = CoreWorkload(WORKLOADS[name], n, params["operations"], dist)
            res = run_phase(ctx.uri, ctx.db_name, workload, threads, params["operations"], time.monotonic() + seconds,
                            seed=seed + 1 + i)  # fmt: skip
            remove_run_inserts(ctx.uri, ctx.db_name, workload, res.inserted)
            if res.cut_short:
                ctx.note(f"workload {name} {dist} at {threads} threads: {res.ops:,} of {params['operations']:,} "
                         f"operations in its {seconds:.1f} s share of the budget")
            points.append({"phase": "run", "workload": name, "workload_index": WORKLOAD_INDEX[name],
                           "distribution": dist, "threads": threads, "records": n, "load_batch": None,
                           "curve": f"{dist}, {n:,} records, T={threads}", "cut_short": res.cut_short,
                           **res.columns()})  # fmt: skip
            p = points[-1]
            ctx.log(f"  {name} {dist:8} T={threads}: {res.ops_per_s:,.0f} ops/s, hottest key "
                    f"{p['hottest_key_share'] or 0:.2%}, read p99 {p.get('read_p99_ms')} ms")
    return points


def _plan_stages(plan: dict) -> list[str]:
    stages = []
    while isinstance(plan, dict) and plan:
        stages.append(str(plan.get("stage")))
        plan = plan.get("inputStage") or (plan.get("inputStages") or [None])[0]
    return stages


def _note_scan_plan(ctx) -> None:
    """Say how the server runs YCSB's scan (``_id >= k`` sorted by ``_id``, limit n): MongoDB walks the
    ``_id`` index (IXSCAN); a server that scans and sorts the whole collection makes workload E slow."""
    client = connect(ctx.uri)
    try:
        with db_errors("explaining YCSB's scan", uri=ctx.uri):
            explained = (client[ctx.db_name][TABLE].find({"_id": {"$gte": build_key_name(0)}}).sort("_id", 1)
                         .limit(100).explain())  # fmt: skip
    finally:
        close_client(client)
    planner = explained.get("queryPlanner") or {}
    stages = _plan_stages(planner.get("winningPlan") or {})
    if "COLLSCAN" in stages or "IXSCAN" not in stages and "IDHACK" not in stages:
        ctx.note(f"the server runs YCSB's scan (_id >= key, sorted by _id, limit n) as {' <- '.join(stages) or '?'}, "
                 "not as a walk of the _id index: every workload E scan reads and sorts the whole collection, "
                 "so E's throughput here measures that plan")


def _note_server(ctx, params: dict) -> None:
    if ctx.embedded or ctx.server.get("kind") == "SecantusDB":
        ctx.note("the server is SecantusDB (MongoDB wire protocol over WiredTiger, in Python) on the same machine "
                 "as the YCSB client threads: they share its cores, unlike the white paper's separate client host")
    if params["load_batch"] > 1:
        ctx.note(f"the load inserts {params['load_batch']} records per insertMany (YCSB's mongodb batchsize; "
                 "its default is 1): INSERT latencies of the load point are per batch")


_RUN_ALL = [["A", "uniform"], ["A", "zipfian"], ["B", "uniform"], ["B", "zipfian"], ["C", "uniform"],
            ["C", "zipfian"], ["D", "latest"], ["E", "uniform"], ["E", "zipfian"], ["F", "uniform"], ["F", "zipfian"]]
_HW = "Dell R720, 2x Xeon E5-2620, 96 GB RAM, 6x SSD; MongoDB version unknown; YCSB 0.1.4"
_HW_HDD = "Dell R720, 2x Xeon E5-2620, 96 GB RAM, 6x 7.2K SATA HDD; MongoDB version unknown; YCSB 0.1.4"

EXPERIMENTS = (
    Experiment(
        name="ycsb",
        table=(  # the printed columns
            "phase", "workload", "distribution", "threads", "records", "ops", "ops_per_s",
            "hottest_key_share", "read_p50_ms", "read_p99_ms", "update_p50_ms", "update_p99_ms",
            "insert_p99_ms", "scan_p50_ms", "rmw_p99_ms", "cut_short",
        ),
        study="003 SanDisk white paper (SSDs for MongoDB, YCSB); 004 NVDIMM paper (YCSB 0.5.0)",
        figures="SD-F5, SD-F6, SD-F7, SD-F8, SD-F9, SD-F10, SD-F11",
        title="YCSB workloads A-F: throughput and latency percentiles per workload, distribution and threads",
        run=run,
        sizes={
            "tiny": {"records": [1_000], "threads": [2], "operations": 600, "max_run_s": 1.5, "load_batch": 100,
                     "runs": [["A", "uniform"], ["A", "zipfian"], ["D", "latest"], ["E", "zipfian"],
                              ["F", "zipfian"]]},
            "quick": {"records": [20_000], "threads": [4], "operations": 50_000, "max_run_s": 8.0, "load_batch": 100,
                      "runs": [["A", "uniform"], ["A", "zipfian"], ["B", "uniform"], ["B", "zipfian"],
                               ["C", "uniform"], ["C", "zipfian"], ["D", "latest"], ["E", "zipfian"],
                               ["F", "zipfian"]]},
            "full": {"records": [100_000, 1_000_000], "threads": [1, 8, 16, 32], "operations": 1_000_000,
                     "max_run_s": 300.0, "load_batch": 1, "load_share": 0.2, "runs": _RUN_ALL},
        },  # fmt: skip
        plot=Plot(x="workload_index", y=("ops_per_s",), series="curve", where={"phase": "run"},
                  xlabel="YCSB workload (1=A 50/50 read/update, 2=B 95/5, 3=C read, 4=D latest, 5=E scan, 6=F rmw)",
                  ylabel="operations/s (all threads)",
                  title="ycsb: throughput per workload and request distribution (SD-F5, F7, F9, F11)"),
        published=(
            Published("SD-F7", "workload A, uniform, 32 GB in RAM, SSD", 22_124, "ops/s", _HW, "ops_per_s",
                      {"phase": "run", "workload": "A", "distribution": "uniform"},
                      note="threads n/s in the paper; ours: the best of our A-uniform points"),
            Published("SD-F7", "workload A, zipfian, 32 GB in RAM, SSD", 24_732, "ops/s", _HW, "ops_per_s",
                      {"phase": "run", "workload": "A", "distribution": "zipfian"},
                      note="zipfian above uniform in every SD-F7 column"),
            Published("SD-F7", "workload A, uniform, 32 GB in RAM, HDD", 19_490, "ops/s", _HW_HDD, "ops_per_s",
                      {"phase": "run", "workload": "A", "distribution": "uniform"},
                      note="in RAM the disk hardly matters (SSD/HDD 1.1-1.2x); 95 and 66 ops/s at 256 GB and 1 TB"),
            Published("SD-F7", "workload A, zipfian, 32 GB in RAM, HDD", 20_300, "ops/s", _HW_HDD, "ops_per_s",
                      {"phase": "run", "workload": "A", "distribution": "zipfian"}),
            Published("SD-F9/F11", "workload B / C throughput", None, "ops/s", _HW, "ops_per_s",
                      {"phase": "run", "workload": "C", "distribution": "zipfian"},
                      note="figures only (B axis 0-60,000 ops/s in memory); the SSD lead grows with the data size"),
        ),
        differences="YCSB's core workload re-implemented in Python (analytics.bench.ycsb) from YCSB's source, with "
                    "client threads in one process; the white paper used YCSB 0.1.4 (Java) on a separate client host. "
                    "Sizes are scaled down (20,000 records in quick; 100,000 and 1,000,000 in full, against 32 GB / "
                    "256 GB / 1 TB); one machine and disk, no SSD/HDD comparison; the server is the embedded "
                    "SecantusDB unless --mongo-uri names a MongoDB. The paper's thread count, operation count and "
                    "run length are not stated; ours are in the parameters. latest runs only for D.",
    ),
)
