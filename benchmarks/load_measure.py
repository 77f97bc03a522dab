"""What ``bench_load.py`` measures with: the long-lived server, index sets, the raw
``insert_many`` ceiling from N forked clients, a process-tree monitor, and one timed
``sci-ingest load`` in a subprocess.  See ``bench_load.py`` for the method."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(ROOT / ".venv" / "bin" / "sci-ingest")]  # bench_load --cli replaces it (in place)
RSS_EVERY, INDEX_EVERY = 0.2, 0.5
SAMPLE_DOCS = 400  # documents compared field for field after the first load
DATA = ("searches", "hits", "materials", "tasks")

# ------------------------------------------------------------------ the server
class Server:
    """The long-lived embedded server of this run, in its own SCI_INGEST_HOME."""

    def __init__(self, home: Path):
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if k not in ("MONGODB_URI", "SCI_INGEST_DB")}
        self.env["SCI_INGEST_HOME"] = str(home)
        self.uri: str | None = None
        self.pid: int | None = None

    def start(self) -> None:
        out = subprocess.run([*CLI, "server", "start"], env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"sci-ingest server start failed ({out.returncode}): {out.stderr.strip()}")
        state = json.loads((self.home / "server.json").read_text())
        self.uri, self.pid = state["uri"], int(state["pid"])

    def stop(self) -> None:
        if self.pid is None:
            return
        subprocess.run([*CLI, "server", "stop"], env=self.env, capture_output=True, timeout=60)
        try:  # `server stop` waits for it; make sure, without touching any other process
            os.kill(self.pid, 0)
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.pid = None


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# ------------------------------------------------------------------ indexes
def catalog_indexes() -> dict[str, list[list[tuple[str, int]]]]:
    from ingest.store.catalog import INDEXES

    return {c: [list(map(tuple, keys)) for keys in INDEXES.get(c, [])] for c in DATA}


def index_snapshot(db) -> dict[str, list[list[tuple[str, int]]]]:
    """The secondary indexes of the data collections (keys only), sorted."""
    snap = {}
    for coll in DATA:
        keys = [[(f, d) for f, d in spec["key"].items()] for spec in db[coll].list_indexes() if spec["name"] != "_id_"]
        snap[coll] = sorted(keys)
    return snap


def _frozen(snap: dict) -> tuple:
    return tuple((c, tuple(tuple(k) for k in sorted(snap.get(c, [])))) for c in DATA)


def _index_label(snap: dict) -> str:
    return "; ".join(f"{c}: " + (", ".join("+".join(f for f, _ in k) for k in snap[c]) or "-")
                     for c in DATA if c in snap)


def create_indexes(db, snap: dict) -> float:
    t0 = time.perf_counter()
    for coll, specs in snap.items():
        for keys in specs:
            db[coll].create_index([(f, d) for f, d in keys])
    return time.perf_counter() - t0


# ------------------------------------------------------------------ raw ceiling
_BATCHES: list[tuple[str, list[dict]]] = []  # set before forking the clients


def _raw_client(uri: str, db_name: str, rank: int, n: int, barrier, queue) -> None:
    import pymongo

    out = {"rank": rank, "docs": 0, "error": None}
    try:
        client = pymongo.MongoClient(uri)
        db = client[db_name]
        db.command("ping")
        mine = _BATCHES[rank::n]
    except Exception as exc:  # reported by the parent
        out["error"] = repr(exc)
        mine = []
    barrier.wait()
    t0 = time.perf_counter()
    try:
        for coll, docs in mine:
            db[coll].insert_many(docs, ordered=False)
            out["docs"] += len(docs)
    except Exception as exc:
        out["error"] = repr(exc)
    out["seconds"] = time.perf_counter() - t0
    queue.put(out)


def raw_insert(client, uri: str, db_name: str, n: int, indexes: dict, expected: dict[str, int],
               build_after: dict | None = None) -> dict:
    """N clients insert the pre-built batches into a fresh ``db_name`` with ``indexes``; then, if
    given, the ``build_after`` indexes are created on the filled collections (timed apart)."""
    client.drop_database(db_name)
    db = client[db_name]
    for coll in DATA:
        db.create_collection(coll)
    create_indexes(db, indexes)
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_raw_client, args=(uri, db_name, r, n, barrier, queue), daemon=True)
             for r in range(n)]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=120)
        t0 = time.perf_counter()
        results = [queue.get(timeout=3600) for _ in procs]
        seconds = time.perf_counter() - t0
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
    counts = {c: db[c].count_documents({}) for c in DATA}
    after = create_indexes(db, build_after) if build_after else None
    client.drop_database(db_name)
    errors = [r["error"] for r in results if r["error"]]
    docs = sum(counts.values())
    return {"processes": n, "seconds": seconds, "documents": docs, "docs_per_s": docs / seconds,
            "counts": counts, "complete": counts == expected, "errors": errors,
            "client_seconds": sorted(round(r["seconds"], 3) for r in results),
            "index_build_after_seconds": after}


# ------------------------------------------------------------------ monitor
class Monitor(threading.Thread):
    """Samples a command's process tree (RSS per process) and, optionally, the indexes of its database."""

    def __init__(self, pid: int, db=None):
        super().__init__(daemon=True)
        self.pid, self.db = pid, db
        self.done = threading.Event()
        self.peak: dict[int, dict] = {}
        self.tree_peak = 0
        self.index_sets: Counter = Counter()
        self.index_examples: dict[tuple, dict] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        next_index = 0.0
        while not self.done.is_set():
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                break
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    if p.pid not in self.peak:
                        self.peak[p.pid] = {"pid": p.pid, "cmd": " ".join(p.cmdline())[:160], "rss": 0, "hwm": 0}
                except psutil.Error:
                    continue
                total += rss
                peak = self.peak[p.pid]
                peak["rss"] = max(peak["rss"], rss)
                peak["hwm"] = max(peak["hwm"], _vm_hwm(p.pid))
            self.tree_peak = max(self.tree_peak, total)
            now = time.monotonic()
            if self.db is not None and now >= next_index:
                next_index = now + INDEX_EVERY
                try:
                    snap = index_snapshot(self.db)
                    key = _frozen(snap)
                    self.index_sets[key] += 1
                    self.index_examples.setdefault(key, snap)
                except Exception as exc:  # a sample missed is not a failure of the run
                    self.errors.append(repr(exc))
            self.done.wait(RSS_EVERY)

    def peak_mb(self, pid: int) -> float:
        p = self.peak[pid]
        return round(max(p["rss"], p["hwm"]) / 2**20, 1)

    def modal_indexes(self) -> dict | None:
        if not self.index_sets:
            return None
        return self.index_examples[self.index_sets.most_common(1)[0][0]]


def _vm_hwm(pid: int) -> int:
    """The kernel's peak RSS of a process since its exec (VmHWM), in bytes; 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_monitored(argv: list[str], env: dict | None, db=None, also: int | None = None):
    """Run ``argv`` to its end while a :class:`Monitor` samples its process tree (and ``db``'s
    indexes); ``also``: a second pid sampled the same way (returned as ``proc.also``).

    Returns (process, monitor, wall seconds, stdout, stderr).  The command runs in its own process
    (``SCI_INGEST_KEEP=0``): one forked by a kept command process would run outside the tree sampled."""
    env = {**(os.environ if env is None else env), "SCI_INGEST_KEEP": "0"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        monitors = [Monitor(proc.pid, db)] + ([Monitor(also, None)] if also else [])
        for m in monitors:
            m.start()
        try:
            _, status = os.waitpid(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            for m in monitors:
                m.done.set()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        for m in monitors:
            m.join()
        proc.also = monitors[1] if also else None
        out.seek(0)
        err.seek(0)
        return proc, monitors[0], wall, out.read().decode(errors="replace"), err.read().decode(errors="replace")


# ------------------------------------------------------------------ the loader
def loader_flags() -> dict[str, bool]:
    text = subprocess.run([*CLI, "load", "--help"], capture_output=True, text=True).stdout
    return {flag: f"--{flag}" in text for flag in ("workers", "dry-run")}


def run_load(server: Server, client, inputs: list[str], db_name: str, *, workers: int | None,
             extra: tuple[str, ...] = (), fresh: bool = True, watch_indexes: bool = False) -> dict:
    if fresh:
        client.drop_database(db_name)
    argv = [*CLI, "load", *(["--workers", str(workers)] if workers else []), *extra,
            "--json", "-q", "--mongo-uri", server.uri, "--db", db_name, *inputs]
    db = client[db_name]
    proc, monitor, wall, stdout, stderr = run_monitored(argv, server.env, db if watch_indexes else None)
    try:
        report = json.loads(stdout)
    except ValueError:
        report = None
    counts = {c: db[c].count_documents({}) for c in DATA}
    docs = sum(counts.values())
    stages = [{k: r.get(k) for k in ("stage", "records_in", "records_out", "seconds", "records_per_s",
                                      "peak_rss_mb", "status", "detail") if k in r}
              for r in (report or {}).get("stages", [])]
    procs = sorted(({"pid": p, "rss_mb": monitor.peak_mb(p), "cmd": monitor.peak[p]["cmd"]} for p in monitor.peak),
                   key=lambda p: -p["rss_mb"])
    return {
        "argv": " ".join(argv),
        "workers": workers, "exit_code": proc.returncode, "wall_seconds": wall,
        "documents_present": docs, "counts": counts, "docs_per_s": docs / wall if wall else None,
        "stages": stages, "files": (report or {}).get("files"), "inserted": (report or {}).get("inserted"),
        "skipped": (report or {}).get("skipped"), "failed": (report or {}).get("failed"),
        "error": None if report else (stderr.strip().splitlines() or ["no JSON on stdout"])[-1],
        "stderr_tail": stderr.strip().splitlines()[-5:] if proc.returncode not in (0,) else [],
        "peak_rss_mb_per_process": procs,
        "peak_rss_mb_max_process": procs[0]["rss_mb"] if procs else None,
        "peak_rss_mb_tree_sampled": round(monitor.tree_peak / 2**20, 1),
        "processes_seen": len(procs),
        "indexes_during": monitor.modal_indexes(),
        "index_samples": sum(monitor.index_sets.values()),
        "index_sets_seen": len(monitor.index_sets),
    }


def index_stage(load: dict) -> dict | None:
    return next((s for s in load["stages"] if "index" in str(s.get("stage", "")).lower()), None)


def stage_seconds(load: dict, name: str) -> float | None:
    """The seconds of the loader's own stage ``name`` (its JSON report), if it has one."""
    return next((s.get("seconds") for s in load["stages"] if s.get("stage") == name), None)


def load_docs_per_s(load: dict) -> float | None:
    """Documents per second of the load itself: the loader's ``load`` stage (from finding the files
    to the last one written: no process start-up, cluster start or index build), else the wall time."""
    seconds = stage_seconds(load, "load") or load["wall_seconds"]
    return load["documents_present"] / seconds if seconds else None


def check_documents(db, expected_docs: dict[str, list[dict]]) -> dict:
    """The loader's documents against the pre-built ones: _id sets, and a sample field for field."""
    import bson

    ids_equal = {}
    for coll in DATA:
        have = {d["_id"] for d in db[coll].find({}, {"_id": 1})}
        want = {d["_id"] for d in expected_docs[coll]}
        ids_equal[coll] = {"equal": have == want, "missing": len(want - have), "extra": len(have - want)}
    total = sum(len(v) for v in expected_docs.values())
    sampled = differ = 0
    first_difference = None
    for coll in DATA:
        docs = expected_docs[coll]
        share = max(1, SAMPLE_DOCS * len(docs) // max(1, total))
        step = max(1, len(docs) // share)
        picked = docs[::step][:share]
        stored = {d["_id"]: d for d in db[coll].find({"_id": {"$in": [d["_id"] for d in picked]}})}
        for doc in picked:
            sampled += 1
            want = bson.decode(bson.encode(doc))
            got = stored.get(doc["_id"])
            if got != want:
                differ += 1
                if first_difference is None:
                    keys = sorted(k for k in set(want) | set(got or {}) if (got or {}).get(k) != want.get(k))
                    first_difference = {"collection": coll, "_id": doc["_id"], "fields": keys[:10]}
    return {"ids": ids_equal, "sampled": sampled, "differ": differ, "first_difference": first_difference}
