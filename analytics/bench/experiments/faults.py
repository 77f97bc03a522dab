"""``faults``: the analysis stage while Dask worker processes are killed mid-stage (MH-F11).

The MH study took worker nodes away from a 32-node Hadoop cluster during a job over 37
million records: with the data in HDFS on those nodes the job failed after 8 lost nodes;
with the data in MongoDB on separate hosts (mongo-hadoop) it completed with 16 of 32 --
half -- lost, since a lost compute node holds no data (losing the MongoDB server would
have failed it).

Here the data live in MongoDB and the compute in a Dask LocalCluster of ``workers``
single-threaded worker processes (the project's :func:`ingest.cluster.dask_client`).
For each ``k`` in ``killed`` (0 ... N/2) a fresh cluster runs the stage
(:func:`analytics.bench.dataset.run_stage`: the runner's planning, reading, per-partition
function and combine, in chunks of ``chunk_rows`` documents so that there are many tasks)
in a thread; once it has handed out ``hold_after`` tasks it is held (it hands out no more
and gathers nothing) while ``k`` worker processes -- busy ones first -- are killed with
SIGKILL, their nannies told first not to start them again, so the loss is permanent like
a lost node's; then it goes on.  The hold makes the kill land mid-stage whatever the
machine's speed (an event, not a timer).  The scheduler then
runs their tasks again on the workers left, reading their partitions from MongoDB again.

Points: ``workers`` (N), ``killed`` (k), ``killed_fraction``, ``mid_stage`` (the kill
landed before the stage ended), ``completed`` (the stage returned its output),
``seconds``, ``workers_left`` and ``equal`` (the output equals the fault-free run's, with
a float tolerance).  With ``--scheduler`` the workers belong to a cluster elsewhere,
whose processes this command cannot kill: the experiment is skipped with a note.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from analytics.bench.core import Experiment, Plot, Published
from analytics.bench.dataset import BenchData, frames_equal, run_stage
from analytics.registry import get_analysis
from ingest.cluster import dask_client, warm_up

__all__ = ["EXPERIMENTS", "run", "kill_workers"]


def kill_workers(client, victims: list[str]) -> list[int]:
    """SIGKILL the worker processes at ``victims`` (addresses) of the client's LocalCluster,
    their nannies first told not to start them again; the pids killed."""
    nannies = {nanny.worker_address: nanny for nanny in client.cluster.workers.values()}
    killed = []
    for address in victims:
        nanny = nannies.get(address)
        pid = getattr(getattr(nanny, "process", None), "pid", None)
        if nanny is None or pid is None:
            continue
        nanny.close_gracefully(reason="bench faults: a lost node")  # no restart: the node stays lost
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    return killed


def _choose(client, k: int) -> list[str]:
    """``k`` worker addresses, those running a task first."""
    processing = client.processing()
    busy = [w for w, tasks in processing.items() if tasks]
    idle = [w for w in processing if w not in busy]
    return (busy + idle)[:k]


class _HeldClient:
    """The stage's Dask client, holding the stage once it has handed out ``hold_after`` tasks: before it
    hands out the next one (a stream of chunks) or before it gathers (key ranges, handed out at once),
    until ``release`` is set.  The kill then lands while the stage still has work to do, however fast
    or busy the machine: an event, not a timer (a timer let a stage end before the kill under load)."""

    def __init__(self, client, hold_after: int, release: threading.Event, timeout: float):
        self._client, self._left, self._release, self._timeout = client, hold_after, release, timeout
        self.held = threading.Event()

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def _hold(self) -> None:
        if not self.held.is_set():
            self.held.set()
            self._release.wait(self._timeout)

    def submit(self, *args, **kwargs):
        if self._left <= 0:
            self._hold()
        self._left -= 1
        return self._client.submit(*args, **kwargs)

    def compute(self, collections, *args, sync: bool = False, **kwargs):
        futures = self._client.compute(collections, *args, **kwargs)
        if not sync:
            return futures
        self._hold()
        return self._client.gather(futures)


def stage_with_kills(client, analysis, ctx, params: dict, k: int) -> dict:
    """Run the stage in a thread and kill ``k`` workers while it is held after its first
    ``hold_after`` tasks (:class:`_HeldClient`); what happened."""
    outcome: dict = {}
    release = threading.Event()
    held = _HeldClient(client, params["hold_after"], release, max(1.0, ctx.remaining())) if k else None

    def stage() -> None:
        try:
            outcome["result"] = run_stage(analysis, held or client, ctx.uri, ctx.db_name,
                                          chunk_rows=params["chunk_rows"], partitions=params.get("partitions"))
        except Exception as exc:  # noqa: BLE001 - a failed stage is a measured outcome, not an error of the bench
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=stage, name=f"bench-faults-stage-k{k}", daemon=True)
    started = time.perf_counter()
    worker.start()
    kill_at, mid_stage = None, False
    if held is not None:
        while not held.held.wait(0.05) and worker.is_alive():  # the stage holds, or ended without holding
            pass
        if held.held.is_set():
            victims = _choose(client, k)
            kill_at = time.perf_counter() - started
            mid_stage = len(kill_workers(client, victims)) == k and worker.is_alive()
        release.set()
    worker.join(max(1.0, ctx.remaining()))
    seconds = time.perf_counter() - started
    if worker.is_alive():
        outcome["error"] = f"the stage had not ended {seconds:.0f} s after it started"
    return {**outcome, "seconds": seconds, "kill_at": kill_at, "mid_stage": mid_stage,
            "workers_left": len(client.nthreads())}


def run(ctx, params: dict) -> list[dict]:
    if ctx.scheduler:
        ctx.note(f"skipped: the workers of --scheduler {ctx.scheduler} run elsewhere, and this command cannot kill "
                 "remote worker processes; run it without --scheduler (a LocalCluster) to measure it")
        return []
    analysis = get_analysis(params.get("analysis", "oxide_formation_energy"))
    data = BenchData(ctx, materials=params["materials"], pasta_copies=params.get("pasta_copies", 0))
    data.grow(params["scale"])
    n = params["workers"]
    points: list[dict] = []
    reference = None
    last = 0.0
    for k in params["killed"]:
        if points and ctx.remaining() < last * 1.5 + 3:
            ctx.note(f"cut short: {k} and more killed workers not measured ({ctx.remaining():.0f} s left)")
            break
        t0 = time.perf_counter()
        with dask_client(None, n_workers=n) as client:
            warm_up(client, "analyze", ctx.uri)
            out = stage_with_kills(client, analysis, ctx, params, k)
        last = time.perf_counter() - t0
        result = out.get("result")
        completed = result is not None
        equal = False
        if result is not None and reference is None and k == 0:
            reference, equal = result.frame, True
        elif result is not None and reference is not None:
            equal, why = frames_equal(reference, result.frame, analysis.output_id)
            if not equal:
                ctx.note(f"{k} killed: output differs from the fault-free run: {why}")
        if not completed:
            ctx.note(f"{k} of {n} workers killed: the stage failed: {out.get('error')}")
        if k and not out["mid_stage"]:
            ctx.note(f"{k} killed: the stage ended before the kill landed (it handed out at most "
                     f"{params['hold_after']} tasks); use more documents or a smaller chunk_rows")
        points.append({
            "workers": n, "killed": k, "killed_fraction": round(k / n, 3), "mid_stage": bool(out["mid_stage"]),
            "kill_at_s": None if out["kill_at"] is None else round(out["kill_at"], 3),
            "completed": completed, "seconds": round(out["seconds"], 4), "workers_left": out["workers_left"],
            "rows": None if result is None else result.rows,
            "partitions": None if result is None else result.partitions,
            "equal": bool(equal),
        })  # fmt: skip
        ctx.log(f"{k} of {n} workers killed: completed={completed} in {out['seconds']:.2f} s, "
                f"{out['workers_left']} workers left, equal={equal}")
    return points


EXPERIMENTS = (
    Experiment(
        name="faults",
        study="000 MongoDB + Hadoop (MH)",
        figures="MH-F11",
        title="the analysis stage while k of N Dask worker processes are killed mid-stage",
        run=run,
        sizes={
            "tiny": {"materials": 300, "scale": 2, "workers": 2, "killed": [0, 1], "chunk_rows": 20,
                     "hold_after": 4},
            "quick": {"materials": 3000, "scale": 2, "workers": 4, "killed": [0, 1, 2], "chunk_rows": 50,
                      "hold_after": 16},
            "full": {"materials": 25_000, "scale": 8, "workers": 32, "killed": [0, 4, 8, 12, 16], "chunk_rows": 2000,
                     "hold_after": 32},
        },
        plot=Plot(x="killed", y=("seconds",), xlabel="worker processes killed mid-stage",
                  ylabel="seconds (stage, with recovery)", title="faults: losing workers mid-stage (MH-F11)"),
        published=(
            Published("MH-F11", "share of the workers lost with the job still completing", 0.5, "of the nodes",
                      "32-node Hadoop cluster, 37M records, data in MongoDB on separate hosts", "killed_fraction",
                      {"completed": True, "equal": True, "killed": "max"},
                      note="with the data in HDFS the job failed after 8 of 32 lost nodes; with mongo-hadoop it "
                           "completed with 16 of 32 lost; ours is the largest share killed mid-stage after which "
                           "the stage still completed with the fault-free output"),
        ),
        differences="The study lost whole nodes of a 32-node Hadoop cluster; here single-threaded Dask worker "
                    "processes on one 2-core machine are SIGKILLed (not restarted) while the stage runs, the "
                    "MongoDB server on the same machine untouched. N=4 and k up to 2 at --quick.",
    ),
)
