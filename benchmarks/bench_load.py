"""Benchmark ``sci-ingest load`` against the raw insert ceiling of the same server (issue 8).

    .venv/bin/python benchmarks/bench_load.py [--corpus DIR] [--workers 1,2,4] [--quick]
        [--corpus-10x DIR | --build-10x] [--raw-indexes FILE.json] [--out FILE] [--keep]
        [--cli "COMMAND"]

``--quick``: every fifth ``-m 10`` file and two materials and two tasks files of the corpus
(about 22,000 documents), workers 1,2, about a minute.  ``--cli`` measures another
``sci-ingest`` command (default: the checkout's ``.venv/bin/sci-ingest``).

Depends only on the loader's command line and on what MongoDB holds afterwards, so it runs
on today's loader and, unchanged, on the parallel one of issue 8.  The corpus (default
``${TMPDIR:-/tmp}/sci-ingest-bench/load-corpus``) is built by ``make_load_corpus.sh`` when
missing.  One embedded server is started for the whole run (``sci-ingest server start``
with ``SCI_INGEST_HOME`` a temporary directory) and stopped at the end, also after an
error or Ctrl-C; its data directory is then removed (``--keep`` keeps it).  Every
measurement uses a fresh database, dropped once measured.

For each N of ``--workers`` (default 1,2,4; ``--quick``: 1,2 on a fifth of the corpus):

1. **load** ``sci-ingest load [--workers N] --json -q --mongo-uri URI --db DB CORPUS`` in a
   subprocess: its wall time (start-up included), documents/s from the documents present
   in DB afterwards (searches + hits + materials + tasks), the ``stages`` rows of its JSON,
   and, sampled while it runs: the peak RSS of every process of its tree (every 0.2 s, psutil
   for the tree and each process's ``VmHWM``, the kernel's high-water mark since its exec,
   so a peak between two samples still counts) and the secondary indexes of the data
   collections (every 0.5 s; the set seen for most of the run is "the loader's indexes
   during its load").  The first load is checked
   against the pre-built documents: the same ``_id`` sets, and a sample of documents equal
   field for field.  Then **load + index build**: the ``index`` stage of its JSON if it has
   one (already inside the wall time), else the time of creating ``ingest.catalog.INDEXES``
   after it (idempotent: about 0 when the loader kept them during the load).  Then a
   **second load** of the unchanged corpus into the same database.
2. **raw** ceiling: the documents the loader stores, pre-built once by the project's own
   parser and document builders (``load_corpus.documents``), split in batches of 1000 per
   collection dealt round-robin to N forked client processes, each doing bare
   ``insert_many(ordered=False)`` (its own ``MongoClient``, the server's default write
   concern, like the loader's), timed from a barrier after every client has connected to
   the last batch acknowledged.  BSON encoding happens in the clients, as in the loader.
   Index sets: ``none`` (``_id`` only), ``catalog`` (``ingest.catalog.INDEXES``) and
   ``loader`` (the set sampled during the load at N, or ``--raw-indexes FILE.json``:
   ``{"hits": [[["search_id", 1], ["rank", 1]], ...], ...}``) when it differs from catalog.
   After the ``none`` run, the catalog's indexes are built on the filled collections and
   timed: insert-then-build, the reference for a load that builds its indexes after writing.

Then, if the loader has ``--dry-run`` (and ``--workers``): ``--dry-run`` at 1 and 2 workers.
With ``--corpus-10x DIR`` (or ``--build-10x``: ``make_load_corpus.sh`` with SCALE 10): the
10x corpus loaded at the largest N the loader accepts, against the 1x load at that N.
Flags the loader lacks (read from ``sci-ingest load --help``) skip their parts with a note.

Printed: every figure, then the table quantity | figure | target | met? (targets of issue
8), and the whole result as JSON in ``--out`` (default
``${TMPDIR:-/tmp}/sci-ingest-bench/bench_load.json``).  Figures only, no timed asserts:
the machine may be shared, so every result also records the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import load_corpus

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
DEFAULT_CORPUS = BENCH_DIR / "load-corpus"
DEFAULT_10X = BENCH_DIR / "load-corpus-x10"
DEFAULT_OUT = BENCH_DIR / "bench_load.json"
CLI = [str(ROOT / ".venv" / "bin" / "sci-ingest")]  # --cli replaces it
BATCH = 1000
RSS_EVERY, INDEX_EVERY = 0.2, 0.5
SAMPLE_DOCS = 400  # documents compared field for field after the first load
DATA = ("searches", "hits", "materials", "tasks")
# (key, quantity, target text, test)
TARGETS = {
    "load_vs_raw": ("load / raw, same documents and indexes", ">= 0.90", lambda x: x >= 0.90),
    "load_index_vs_raw_none": ("(load + index build) / raw with no secondary index", "<= 1.5", lambda x: x <= 1.5),
    "dry_run_speedup": ("--dry-run: 2 workers / 1 worker speed", ">= 1.7", lambda x: x >= 1.7),
    "rerun_speedup": ("first load / second load (unchanged) time", ">= 20", lambda x: x >= 20),
    "scale_10x": ("10x corpus / 1x corpus load time", "<= 11", lambda x: x <= 11),
    "peak_rss_mb": ("peak RSS of a load process (MB)", "< 300", lambda x: x < 300),
}


def log(message: str = "") -> None:
    print(message, flush=True)


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
    from ingest.catalog import INDEXES

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
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=server.env)
        monitor = Monitor(proc.pid, db if watch_indexes else None)
        monitor.start()
        try:
            _, status = os.waitpid(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            monitor.done.set()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        monitor.join()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
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


# ------------------------------------------------------------------ helpers
def ensure_corpus(path: Path, scale: int) -> None:
    if (path / ".corpus.json").exists():
        return
    log(f"building the corpus {path} (SCALE {scale}) with make_load_corpus.sh ...")
    subprocess.run(["bash", str(ROOT / "benchmarks" / "make_load_corpus.sh"), str(path), str(scale)], check=True)


def quick_inputs(corpus: Path) -> list[str]:
    """A fifth of the corpus: every fifth -m 10 file and two materials files, as paths."""
    files = load_corpus.corpus_files([corpus])
    search = [p for p in files if load_corpus.is_search_file(p)][::5]
    records = [p for p in files if not load_corpus.is_search_file(p)]
    mats = [p for p in records if p.name.startswith("materials_")][:2]
    tasks = [p for p in records if p.name.startswith("tasks_")][:2]
    return [str(p) for p in search + mats + tasks]


def prebuild(inputs: list[str]) -> tuple[dict[str, list[dict]], dict]:
    import bson

    docs: dict[str, list[dict]] = {c: [] for c in DATA}
    t0 = time.perf_counter()
    files = load_corpus.corpus_files(inputs)
    for path in files:
        for coll, doc in load_corpus.documents(path):
            docs[coll].append(doc)
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    size = sum(len(bson.encode(d)) for v in docs.values() for d in v)
    encoded = time.perf_counter() - t0
    n = sum(len(v) for v in docs.values())
    return docs, {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "documents": n,
                  "counts": {c: len(v) for c, v in docs.items()}, "parse_build_seconds": built,
                  "bson_bytes": size, "bson_encode_seconds": encoded}


def _fmt(x, digits=2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _print_load(label: str, r: dict) -> None:
    log(f"  {label}: exit {r['exit_code']}, wall {r['wall_seconds']:.2f} s, {r['documents_present']:,} documents "
        f"present -> {_fmt(r['docs_per_s'], 0)} docs/s; files {r['files']}; peak RSS: largest process "
        f"{_fmt(r['peak_rss_mb_max_process'], 1)} MB, whole tree {_fmt(r['peak_rss_mb_tree_sampled'], 1)} MB "
        f"(sampled), {r['processes_seen']} process(es)")
    for s in r["stages"]:
        log(f"      stage {s.get('stage')!s:<14} in {_fmt(s.get('records_in'))!s:>9}  out "
            f"{_fmt(s.get('records_out'))!s:>9}  {_fmt(s.get('seconds'), 3)!s:>8} s  "
            f"{_fmt(s.get('records_per_s'), 0)!s:>8}/s")
    if r["error"] or r["exit_code"] not in (0,):
        log(f"      error: {r['error']}; stderr: {' | '.join(r['stderr_tail'])}")


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, help=f"the 1x corpus (default {DEFAULT_CORPUS}, built when missing)")
    ap.add_argument("--workers", default=None, help="worker counts, e.g. 1,2,4 (default; --quick: 1,2)")
    ap.add_argument("--quick", action="store_true", help="a fifth of the corpus, workers 1,2")
    ap.add_argument("--corpus-10x", type=Path, help="a 10x corpus to load against the 1x one")
    ap.add_argument("--build-10x", action="store_true", help=f"build (if missing) and use {DEFAULT_10X}")
    ap.add_argument("--raw-indexes", type=Path, help="JSON {collection: [[[field, 1], ...], ...]}: the indexes of "
                    "the 'same indexes' raw ceiling (default: those sampled during the load)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results as JSON (default {DEFAULT_OUT})")
    ap.add_argument("--keep", action="store_true", help="keep the server's data directory")
    ap.add_argument("--cli", help="the sci-ingest command to measure, split on spaces (default: %(default)s)",
                    default=" ".join(CLI))
    args = ap.parse_args(argv)
    CLI[:] = args.cli.split()
    workers = [int(x) for x in (args.workers or ("1,2" if args.quick else "1,2,4")).split(",")]
    corpus = (args.corpus or DEFAULT_CORPUS).resolve()
    if args.corpus is None:
        ensure_corpus(corpus, 1)
    corpus_10x = args.corpus_10x or (DEFAULT_10X if args.build_10x else None)
    if args.build_10x:
        ensure_corpus(DEFAULT_10X, 10)
    inputs = quick_inputs(corpus) if args.quick else [str(corpus)]
    explicit_indexes = None
    if args.raw_indexes:
        explicit_indexes = {c: [[tuple(k) for k in keys] for keys in specs]
                            for c, specs in json.loads(args.raw_indexes.read_text()).items()}

    result: dict = {"started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "git": _git_head(), "corpus": str(corpus), "quick": args.quick, "workers": workers,
                    "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "notes": []}
    notes = result["notes"]

    def note(message: str) -> None:
        notes.append(message)
        log(f"note: {message}")

    flags = loader_flags()
    result["loader_flags"] = flags
    if not flags["workers"]:
        note("`sci-ingest load` has no --workers: loads run without it (one process), only at N=1; "
             "the raw ceiling is still measured at every N")
    if not flags["dry-run"]:
        note("`sci-ingest load` has no --dry-run: the dry-run scaling is skipped")
    load_ns = [n for n in workers if flags["workers"] or n == 1]

    log(f"corpus: {corpus}{' (quick: a fifth of it)' if args.quick else ''}")
    docs, built = prebuild(inputs)
    expected = built["counts"]
    result["prebuilt"] = built
    log(f"  {built['files']} files, {built['bytes']:,} bytes, {built['documents']:,} documents {expected}; "
        f"parse + build {built['parse_build_seconds']:.2f} s, BSON {built['bson_bytes']:,} bytes "
        f"(encode {built['bson_encode_seconds']:.2f} s), one process")
    _BATCHES.clear()
    for coll in DATA:
        _BATCHES.extend((coll, docs[coll][i:i + BATCH]) for i in range(0, len(docs[coll]), BATCH))

    home = Path(tempfile.mkdtemp(prefix="bench-load-", dir=BENCH_DIR))
    server = Server(home)
    old_handlers = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    client = None
    try:
        server.start()
        import pymongo

        client = pymongo.MongoClient(server.uri)
        hello, build = client.admin.command("hello"), client.admin.command("buildInfo")
        result["server"] = {"uri": server.uri, "version": build.get("version"),
                            "secantus": build.get("secantusVersion"), "set": hello.get("setName")}
        log(f"server: SecantusDB {build.get('secantusVersion')} (MongoDB {build.get('version')}) at {server.uri}, "
            f"home {home}")
        result["loads"], result["raw"], result["reruns"] = {}, {}, {}
        catalog = catalog_indexes()
        checked = False
        for n in workers:
            log(f"\n== N = {n}")
            if n in load_ns:
                db_name = f"bench_load_w{n}"
                r = run_load(server, client, inputs, db_name, workers=n if flags["workers"] else None,
                             watch_indexes=True)
                r["indexes_after"] = index_snapshot(client[db_name])
                r["indexes_during_source"] = "sampled during the load" if r["indexes_during"] else "after the load"
                during = r["indexes_during"] = r["indexes_during"] or r["indexes_after"]
                stage = index_stage(r)
                if stage:
                    r["index_build_seconds"], r["index_build_source"] = stage.get("seconds") or 0.0, "its JSON stage"
                    r["load_plus_index_seconds"] = r["wall_seconds"]
                else:
                    r["index_build_seconds"] = create_indexes(client[db_name], catalog)
                    r["index_build_source"] = "catalog INDEXES created after the load"
                    r["load_plus_index_seconds"] = r["wall_seconds"] + r["index_build_seconds"]
                result["loads"][n] = r
                _print_load(f"load --workers {n}" if flags["workers"] else "load (no --workers)", r)
                if r["exit_code"] != 0 or r["counts"] != expected:
                    note(f"the load at N={n} exited {r['exit_code']} with {r['counts']} "
                         f"(pre-built: {expected}): its figures are not those of a clean load")
                log(f"    indexes during the load ({r['index_samples']} samples, {r['index_sets_seen']} set(s)): "
                    f"{_index_label(during)}{' = catalog' if _frozen(during) == _frozen(catalog) else ''}")
                log(f"    index build: {r['index_build_seconds']:.3f} s ({r['index_build_source']}); load + index "
                    f"{r['load_plus_index_seconds']:.2f} s")
                if not checked:
                    t0 = time.perf_counter()
                    r["document_check"] = chk = check_documents(client[db_name], docs)
                    checked = True
                    ids = "equal" if all(v["equal"] for v in chk["ids"].values()) else chk["ids"]
                    first = f" (first difference: {chk['first_difference']})" if chk["differ"] else ""
                    log(f"    documents vs pre-built: _id sets {ids}; {chk['sampled'] - chk['differ']}/"
                        f"{chk['sampled']} sampled documents identical{first} ({time.perf_counter() - t0:.1f} s)")
                second = run_load(server, client, inputs, db_name, workers=n if flags["workers"] else None,
                                  fresh=False)
                second["speedup"] = r["wall_seconds"] / second["wall_seconds"]
                _print_load("second load, unchanged corpus, same database", second)
                log(f"    first / second: {second['speedup']:.1f}x")
                result["reruns"][n] = second
                client.drop_database(db_name)
            else:
                log("  load: skipped (no --workers)")
            same = explicit_indexes or next((result["loads"][m]["indexes_during"] for m in [n] + load_ns
                                             if m in result["loads"] and result["loads"][m]["indexes_during"]),
                                            None)
            sets = {"none": {c: [] for c in DATA}, "catalog": catalog}
            if same is not None and _frozen(same) != _frozen(catalog):
                sets["loader"] = same
            raws = result["raw"].setdefault(n, {})
            for name, spec in sets.items():
                raws[name] = raw = raw_insert(client, server.uri, f"bench_raw_{name}_n{n}", n, spec, expected,
                                              build_after=catalog if name == "none" else None)
                raw["indexes"] = _index_label(spec)
                incomplete = "" if raw["complete"] else f" INCOMPLETE: {raw['counts']}"
                errors = f" errors: {raw['errors'][0]}" if raw["errors"] else ""
                log(f"  raw insert_many, {n} client process(es), indexes {name} ({raw['indexes']}): "
                    f"{raw['seconds']:.2f} s, {raw['docs_per_s']:,.0f} docs/s{incomplete}{errors}")
                if raw["index_build_after_seconds"] is not None:
                    total = raw["seconds"] + raw["index_build_after_seconds"]
                    log(f"    then the catalog's indexes built on the filled collections: "
                        f"{raw['index_build_after_seconds']:.2f} s; insert + build {total:.2f} s = "
                        f"{total / raw['seconds']:.2f}x the bare insert")
            raws["same_as_loader"] = "loader" if "loader" in sets else "catalog"

        # ---- dry runs
        result["dry_run"] = {}
        if flags["dry-run"] and flags["workers"]:
            log("\n== --dry-run")
            for n in (1, 2):
                r = run_load(server, client, inputs, f"bench_dry_w{n}", workers=n, extra=("--dry-run",))
                result["dry_run"][n] = r
                _print_load(f"load --dry-run --workers {n}", r)
                if r["documents_present"]:
                    note(f"--dry-run --workers {n} left {r['documents_present']:,} documents in its database")
                client.drop_database(f"bench_dry_w{n}")
            result["dry_run"]["speedup"] = result["dry_run"][1]["wall_seconds"] / result["dry_run"][2]["wall_seconds"]
            log(f"  speed 2 workers / 1 worker: {result['dry_run']['speedup']:.2f}x")

        # ---- 10x
        result["scale"] = None
        if corpus_10x and not result["loads"]:
            note("no 1x load ran: the 10x comparison is skipped")
        elif corpus_10x:
            n = max(result["loads"])  # the largest N loaded at 1x
            log(f"\n== 10x corpus {corpus_10x}, N = {n}")
            base = result["loads"][n]
            r = run_load(server, client, [str(corpus_10x)], "bench_load_x10",
                         workers=n if flags["workers"] else None)
            client.drop_database("bench_load_x10")
            r["ratio_time"] = r["wall_seconds"] / base["wall_seconds"]
            r["ratio_documents"] = r["documents_present"] / base["documents_present"]
            manifest = corpus_10x / ".corpus.json"
            if manifest.exists():
                r["expected_documents"] = json.loads(manifest.read_text())["documents"]
                if r["expected_documents"] != r["documents_present"] or r["exit_code"] != 0:
                    note(f"the 10x load exited {r['exit_code']} with {r['documents_present']:,} documents "
                         f"({r['expected_documents']:,} in the corpus)")
            result["scale"] = r
            _print_load("load of the 10x corpus", r)
            log(f"  10x / 1x: time {r['ratio_time']:.2f}x for {r['ratio_documents']:.2f}x the documents")
        elif not args.quick:
            note("no --corpus-10x/--build-10x: the 10x comparison is skipped")
    except KeyboardInterrupt:
        note("interrupted: the results so far are written")
        result["interrupted"] = True
    finally:
        if client is not None:
            client.close()
        server.stop()
        for s, h in old_handlers.items():
            signal.signal(s, h)
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    result["loadavg_end"] = os.getloadavg()
    result["table"] = table = summary_rows(result)
    print_table(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    log(f"\nresults: {args.out}")
    return 130 if result.get("interrupted") else 0


def summary_rows(result: dict) -> list[dict]:
    rows = []

    def row(key: str, label: str, figure) -> None:
        quantity, target, test = TARGETS[key]
        rows.append({"key": key, "quantity": f"{quantity}{label}", "figure": figure, "target": target,
                     "met": None if figure is None else bool(test(figure))})

    for n in result.get("workers", []):
        raws = result.get("raw", {}).get(n, {})
        load = result.get("loads", {}).get(n)
        same = raws.get(raws.get("same_as_loader", "catalog"))
        row("load_vs_raw", f", N={n}", load and same and load["docs_per_s"] / same["docs_per_s"])
    for n in result.get("workers", []):
        raws = result.get("raw", {}).get(n, {})
        load = result.get("loads", {}).get(n)
        none = raws.get("none")
        row("load_index_vs_raw_none", f", N={n}", load and none and load["load_plus_index_seconds"] / none["seconds"])
    row("dry_run_speedup", "", result.get("dry_run", {}).get("speedup"))
    for n, r in result.get("reruns", {}).items():
        row("rerun_speedup", f", N={n}", r["speedup"])
    if not result.get("reruns"):
        row("rerun_speedup", "", None)
    row("scale_10x", "", (result.get("scale") or {}).get("ratio_time"))
    runs = list(result.get("loads", {}).values()) + list(result.get("dry_run", {}).values())
    runs += [result["scale"]] if result.get("scale") else []
    peaks = [r["peak_rss_mb_max_process"] for r in runs if isinstance(r, dict) and r.get("peak_rss_mb_max_process")]
    row("peak_rss_mb", "", max(peaks) if peaks else None)
    return rows


def print_table(rows: list[dict]) -> None:
    width = max(len(r["quantity"]) for r in rows)
    log(f"\n{'quantity':<{width}}  {'figure':>8}  {'target':>7}  met?")
    log(f"{'-' * width}  {'-' * 8}  {'-' * 7}  ----")
    for r in rows:
        met = {None: "n/a", True: "yes", False: "no"}[r["met"]]
        log(f"{r['quantity']:<{width}}  {_fmt(r['figure'])!s:>8}  {r['target']:>7}  {met}")


def _git_head() -> str | None:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


if __name__ == "__main__":
    raise SystemExit(main())
