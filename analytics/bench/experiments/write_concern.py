"""``write-concern``: YCSB throughput under each write concern, j=false against j=true (NVDIMM paper Table 1, NV-F3).

What is measured.  ``records`` YCSB records (1 KB, :mod:`analytics.bench.ycsb`) are loaded once;
then for each workload (YCSB A: 50 % read / 50 % update, and the paper's update-only: 100 %
update; both with YCSB's zipfian request distribution, the paper states none) and each method
(``w1j1``: w=1, j=true, the paper's baseline; ``w1j0``; ``wmajj1`` and ``wmajj0``: w="majority";
``w0``: unacknowledged, for reference) one run of ``operations`` transactions from T threads
(16 in ``full``, as the paper's YCSB 0.5.0), or fewer when its share of the time budget ends
first.  Every write of a run carries that write concern (the client's).  Per run: ``ops_per_s``
and ``update_p50_ms`` .. ``update_p99.9_ms`` (and ``read_`` for A), ``method_index`` (1-5, the
plot's x), and where the server reports it (MongoDB's ``serverStatus.wiredTiger.log``) the journal
syncs the run caused (``log_syncs``).  One ``summary`` point per workload gives the ratios the
paper reports in words: ``j0_over_j1`` (w1j0 / w1j1 ops/s), ``wmaj_over_w1`` (wmajj1 / w1j1) and
``w0_over_w1j0``.

w=0: the client does not wait for the server, so the threads finish before the server has applied
their updates; the run's time then includes the wait until ``serverStatus.opcounters.update`` has
counted them all (``drain_s``), and w0's update latencies are the client's send times.  A w0 run
sends for 40 % of its time share only, leaving the rest for that wait (the server applies
unacknowledged updates several times slower than the clients send them).

What cannot be reproduced here (each is noted in the run): the paper's NVM rows (w1j1NVM,
w1j0NVM: the journal on an NVDIMM) need the journal on another device, which a client cannot
move; w1nojournal needs a server started without a journal (``--nojournal``, gone from MongoDB's
WiredTiger since 6.1); on a one-member replica set (the embedded SecantusDB server) w="majority"
is acknowledged by the same node as w=1, so NV-F4's three-member replica set is not either.
"""

from __future__ import annotations

import time

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.ycsb import WORKLOADS, CoreWorkload, drop_table, load_phase, run_phase
from ingest.errors import DatabaseError
from ingest.store.mongo import close_client, connect, db_errors

__all__ = ["EXPERIMENTS", "METHODS"]

#: the paper's Table 1 rows this server can run, in the plot's order (x = 1..5)
METHODS: dict[str, dict[str, int | str | bool]] = {  # write concern documents
    "w1j1": {"w": 1, "j": True},
    "w1j0": {"w": 1, "j": False},
    "wmajj1": {"w": "majority", "j": True},
    "wmajj0": {"w": "majority", "j": False},
    "w0": {"w": 0},
}
METHOD_INDEX = {m: i + 1 for i, m in enumerate(METHODS)}
_RESERVE_S = 3.0
W0_SEND_SHARE = 0.4  # a w0 run sends for this share of its time: the server applies the backlog after it


def _status(ctx) -> dict:
    client = connect(ctx.uri)
    try:
        with db_errors("reading serverStatus and hello", uri=ctx.uri):
            return {"status": client.admin.command("serverStatus"), "hello": client.admin.command("hello")}
    finally:
        close_client(client)


def _counters(status: dict) -> dict:
    out = {"updates": (status.get("opcounters") or {}).get("update")}
    log = (status.get("wiredTiger") or {}).get("log") or {}
    out["log_syncs"] = log.get("log sync operations")
    return out


def _note_server(ctx, probe: dict) -> None:
    hello, status = probe["hello"], probe["status"]
    ctx.note("NV-F3's NVM rows (w1j1NVM, w1j0NVM) are not reproducible here: the journal device cannot be "
             "changed from a client (it shares the data's disk); w1nojournal needs a server started without a "
             "journal (mongod --nojournal, removed for WiredTiger in MongoDB 6.1), so it is not run")
    if hello.get("setName") and len(hello.get("hosts") or []) == 1:
        ctx.note(f"the server is a one-member replica set ({hello['setName']!r}): w='majority' is acknowledged by "
                 "the same single node as w=1, with no replication to wait for, so a wmaj row differs from its w1 "
                 "row only by the server's own handling of 'majority' (and noise); NV-F4's 3-member set is not "
                 "reproducible")
    if (status.get("storageEngine") or {}).get("persistent") is False:
        ctx.note("the storage engine is not persistent (in memory): j=true has no journal to wait for")
    if _counters(status)["log_syncs"] is None:
        ctx.note("serverStatus has no wiredTiger.log section: the journal syncs a run causes cannot be counted "
                 "(log_syncs is empty); whether j=true costs anything shows only in the latencies")
    if _counters(status)["updates"] is None:
        ctx.note("serverStatus has no opcounters: a w0 run's time is the clients' send time only, not until the "
                 "server applied its updates")


def _drain(ctx, before: int | None, sent: int, bound_s: float) -> tuple[float, bool]:
    """Wait until the server counted ``sent`` more updates than ``before``; (seconds waited, all counted)."""
    t0 = time.monotonic()
    if before is None:
        return 0.0, False
    while True:
        now = _counters(_status(ctx)["status"])["updates"] or 0
        if now - before >= sent:
            return time.monotonic() - t0, True
        if time.monotonic() - t0 > bound_s:
            return time.monotonic() - t0, False
        time.sleep(0.02)


def run(ctx, params: dict) -> list[dict]:
    probe = _status(ctx)
    _note_server(ctx, probe)
    drop_table(ctx.uri, ctx.db_name)
    threads, records, dist = params["threads"], params["records"], params["distribution"]
    loaded = load_phase(ctx.uri, ctx.db_name, CoreWorkload(WORKLOADS["A"], records, 0), threads,
                        time.monotonic() + max(1.0, ctx.remaining() * 0.25), batch=params["load_batch"])  # fmt: skip
    n = loaded.inserted
    if loaded.cut_short:
        ctx.note(f"the load was cut short at {n:,} of {records:,} records by the time budget")
    ctx.log(f"  loaded {n:,} records ({loaded.ops_per_s:,.0f}/s)")
    points: list[dict] = []
    todo = [(wl, m) for wl in params["workloads"] for m in params["methods"]]
    for i, (wl, method) in enumerate(todo):
        seconds = min(params["max_run_s"], (ctx.remaining() - _RESERVE_S) / (len(todo) - i))
        if seconds < 0.3:
            ctx.note(f"stopped before {wl} {method}: the time budget of this size ran out ({len(todo) - i} runs "
                     "not done)")
            break
        concern = METHODS[method]
        before = _counters(_status(ctx)["status"])
        workload = CoreWorkload(WORKLOADS[wl], n, params["operations"], dist)
        drained: dict = {}

        def drain(res, before=before, drained=drained, wl=wl) -> None:  # w=0: the run lasts until the server has applied what the clients sent
            sent = res.latencies["UPDATE"].count if "UPDATE" in res.latencies else 0
            drained["s"], counted = _drain(ctx, before["updates"], sent, max(1.0, min(30.0, ctx.remaining())))
            res.seconds += drained["s"]
            if before["updates"] is not None and not counted:
                ctx.note(f"w0 on {wl}: the server had not applied all {sent:,} updates {drained['s']:.1f} s after "
                         "the clients sent them")

        try:
            send_s = seconds * W0_SEND_SHARE if concern["w"] == 0 else seconds
            res = run_phase(ctx.uri, ctx.db_name, workload, threads, params["operations"], time.monotonic() + send_s,
                            seed=100 + i, write_concern=concern, after=drain if concern["w"] == 0 else None)
        except DatabaseError as exc:
            ctx.note(f"{method} ({concern}) on {wl}: the server refused it: {exc}")
            continue
        drain_s = round(drained["s"], 3) if "s" in drained else None
        after = _counters(_status(ctx)["status"])
        syncs = None if after["log_syncs"] is None else after["log_syncs"] - before["log_syncs"]
        if res.cut_short:
            ctx.note(f"{wl} {method}: {res.ops:,} of {params['operations']:,} operations in its {send_s:.1f} s share")
        cols = res.columns()
        cols.pop("hottest_key_share", None)
        points.append({"phase": "run", "workload": wl, "method": method, "method_index": METHOD_INDEX[method],
                       "w": concern["w"], "j": concern.get("j"), "threads": threads, "records": n,
                       "distribution": dist, "cut_short": res.cut_short, **cols, "drain_s": drain_s,
                       "log_syncs": syncs})  # fmt: skip
        ctx.log(f"  {wl:11} {method:6}: {res.ops_per_s:,.0f} ops/s, update p50 {cols.get('update_p50_ms')} ms "
                f"p99 {cols.get('update_p99_ms')} ms")
    points += _summaries(ctx, points, params["workloads"])
    return points


def _summaries(ctx, points: list[dict], workloads: list[str]) -> list[dict]:
    out = []
    for wl in workloads:
        by = {p["method"]: p for p in points if p["workload"] == wl and p["phase"] == "run"}

        def ratio(a: str, b: str, by=by):
            if a in by and b in by and by[b]["ops_per_s"]:
                return round(by[a]["ops_per_s"] / by[b]["ops_per_s"], 3)
            return None

        summary = {"phase": "summary", "workload": wl, "method": "ratios", "j0_over_j1": ratio("w1j0", "w1j1"),
                   "wmaj_over_w1": ratio("wmajj1", "w1j1"), "w0_over_w1j0": ratio("w0", "w1j0")}  # fmt: skip
        out.append(summary)
        j1, j0 = by.get("w1j1", {}).get("update_p50_ms"), by.get("w1j0", {}).get("update_p50_ms")
        if j1 is not None and j0 is not None and j1 <= 1.05 * j0:
            ctx.note(f"{wl}: j=true costs nothing measurable here (update p50 {j1} ms with j=true, {j0} ms "
                     "without): the server may not wait for a journal flush, the device may flush for free, or "
                     "other load on this machine hides it")
        ctx.log(f"  {wl}: w1j0/w1j1 = {summary['j0_over_j1']}, wmajj1/w1j1 = {summary['wmaj_over_w1']}")
    return out


_HW = ("standalone: 16 GB NVDIMM-N, Xeon E5-2640 (32 cores), 32 GB DRAM, Samsung 850 Pro SSD; MongoDB 3.2 "
       "WiredTiger; YCSB 0.5.0, 16 threads")
_SIZES: dict[str, dict[str, object]] = {
    "tiny": {"records": 500, "threads": 2, "operations": 300, "max_run_s": 1.0, "load_batch": 100},
    "quick": {"records": 10_000, "threads": 4, "operations": 30_000, "max_run_s": 6.0, "load_batch": 100},
    "full": {"records": 1_000_000, "threads": 16, "operations": 1_000_000, "max_run_s": 300.0, "load_batch": 100},
}
for _p in _SIZES.values():
    _p.update({"workloads": ["A", "update-only"], "methods": list(METHODS), "distribution": "zipfian"})

EXPERIMENTS = (
    Experiment(
        name="write-concern",
        table=(  # the printed columns
            "phase", "workload", "method", "ops", "ops_per_s", "read_p50_ms", "read_p99_ms",
            "update_p50_ms", "update_p99_ms", "update_p99.9_ms", "drain_s", "j0_over_j1",
            "wmaj_over_w1", "w0_over_w1j0",
        ),
        study="004 NVDIMM as the MongoDB journal device (YCSB)",
        figures="NV-T1, NV-F3, NV-F4",
        title="YCSB A and update-only throughput per write concern: w=1/majority x j=true/false, and w=0",
        run=run,
        sizes=_SIZES,
        plot=Plot(x="method_index", y=("ops_per_s",), series="workload", where={"phase": "run"},
                  xlabel="method (1=w1j1 baseline, 2=w1j0, 3=wmajj1, 4=wmajj0, 5=w0)", ylabel="operations/s",
                  title="write-concern: throughput per method (NV-F3: j=false beats j=true)"),
        published=(
            Published("NV-F3", "j=false over j=true, workload A (w1j0 / w1j1)", None, "x", _HW, "j0_over_j1",
                      {"phase": "summary", "workload": "A"}, note="the paper: j=false beats j=true (ratio > 1); "
                      "no value printed"),
            Published("NV-F3", "j=false over j=true, update-only (w1j0 / w1j1)", None, "x", _HW, "j0_over_j1",
                      {"phase": "summary", "workload": "update-only"}, note="j=false beats j=true; no value printed"),
            Published("NV-F3", "journal on NVDIMM over the baseline w1j1, workload A", None, "x", _HW, "j0_over_j1",
                      {"phase": "summary", "workload": "A"},
                      note="+50 % (1.5x); not reproducible without an NVDIMM; w1j1NVM ~ w1j0 on A, so ours is "
                           "w1j0/w1j1"),
            Published("NV-F3", "journal on NVDIMM over the baseline w1j1, update-only", None, "x", _HW, "j0_over_j1",
                      {"phase": "summary", "workload": "update-only"},
                      note="+250 % (3.5x; the abstract: up to 2.5x); not reproducible here; ours is w1j0/w1j1"),
            Published("NV-F4", "replica set, w=majority over w=1 (3 members)", None, "x", _HW, "wmaj_over_w1",
                      {"phase": "summary", "workload": "A"},
                      note="the paper's replica set had 3 members; a 1-member set acknowledges majority like w=1"),
        ),
        differences="YCSB re-implemented in Python with client threads (analytics.bench.ycsb); the paper used YCSB "
                    "0.5.0 with 16 threads on 20M documents of 1 KB (ours: 10,000 in quick, 1,000,000 in full, 4 "
                    "threads in quick). The journal shares the data's device (no NVDIMM), w1nojournal is not run, "
                    "and w=majority on the embedded 1-member replica set equals w=1. Request distribution zipfian "
                    "(YCSB's workloada default; the paper states none).",
    ),
)
