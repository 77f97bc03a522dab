"""The study's shape: many one-query ``-m 10`` files, loaded, analysed, grown by 1 % (issue 40, item 1).

    .venv/bin/python benchmarks/bench_study.py [--files 20000] [--quick] [--corpus DIR] [--out FILE]
        [--workers N] [--keep-home] [--retry-for SECONDS]

The study behind this project searched 46,655 RNA fragments against human chromosomes: about
1.1 million small ``-m 10`` files, each ONE query with a handful of hits.  This benchmark
builds that shape at a smaller N and times what a user runs on it, every figure measured in
this one run.

Corpus (built once, reused when present): ``--files`` real one-query ``ssearch36 -m 10``
outputs (Debian's ``fasta3``; default 20,000, ``--quick`` 2,000), fragments of the proteins of
``samples/pasta/inputs`` (``bench_small_files._proteins``) searched against its
``prot_test.lib`` (11 sequences: 11 hits a query), 1,000 files a folder (``main/d000/``,
``main/d001/`` ...), and a "+1 %" set of N/100 more queries (``plus/d000/``), under
``${TMPDIR:-/tmp}/sci-ingest-bench/study-N/``: 20,200 searches took 70 s on 2 cores (a pool of 2
processes, about 300 files a second).

On one embedded server started for the run (``load_measure.Server``, a temporary
``SCI_INGEST_HOME``), whole ``sci-ingest`` commands in subprocesses as a user runs them (the
home's embedded server and default database; ``--json`` for the stage timings; each command
in its own cold process, ``SCI_INGEST_KEEP=0``, as ``load_measure.run_monitored`` runs them):

 1. ``load`` the N files;                    2. the same ``load`` again (nothing new);
 3. ``analyze`` (full): each analysis stage against a bare read of the fields it needs
    (``bench_analysis.measure_bare``: pymongo ``find`` with the analysis's filter and
    projection, into pandas; the materials analyses have no data here: reported empty);
 4. ``analyze --changed`` with nothing new;   5. ``validate``;
 6. ``load`` the +1 % files;                 7. ``analyze --changed`` after them (each stage
    against step 3's);                       8. ``validate`` after them;
 9. ``run`` with nothing new, given the corpus folders (without paths it loads the samples);
10. equality: the published outputs after 7 (the collections ``query_best_hits``,
    ``hit_distributions``, ``library_hits`` and their Parquet files in the home's ``out/``),
    snapshotted then, against a full ``analyze`` of the same data, rows compared by id
    without ``run_id``.

After each step the server process's RSS (``/proc/PID/status`` VmRSS of the pid in the home's
``server.json``) and its peak during the step (sampled every 0.2 s).  Then a linear projection
to 1.1 million files from the measured figures, and the targets: ``best_hits`` <= 1.25x its bare
read, ``analyze --changed`` after +1 % <= 0.15x the full ``analyze`` (wall), ``analyze
--changed`` with nothing new <= 3 s, ``run`` with nothing new <= 5 s, outputs equal.  Everything
goes to ``--out`` as JSON (default ``${TMPDIR:-/tmp}/sci-ingest-bench/bench_study.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis import measure_bare  # noqa: E402
from bench_small_files import INPUTS, STUDY_FILES, _proteins  # noqa: E402
from load_measure import CLI, ROOT, Server, run_monitored  # noqa: E402

sys.path.insert(0, str(ROOT))
try:  # for the projection's note only
    from analytics.increment import MAX_CHANGED  # noqa: E402
except Exception:  # a checkout being edited: the note goes without it
    MAX_CHANGED = None

BENCH_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
PER_FOLDER = 1000
LIB = INPUTS / "prot_test.lib"
DB = "sci_ingest"  # the commands' default database: they run as a user runs them
#: The analyses on search hits, the outputs compared in step 10.
PASTA = ("best_hits", "hit_distributions", "library_hits")
TARGETS = {"best_hits_ratio": 1.25, "changed_ratio": 0.15, "changed_nothing_s": 3.0, "run_nothing_s": 5.0}
#: Stages whose time does not grow with the data (the rest is projected linearly).
FIXED_STAGES = ("start-up", "connect", "cluster", "close")


def log(message: str = "") -> None:
    print(message, flush=True)


# ------------------------------------------------------------------ the corpus
_WORK: Path | None = None
_PROTEINS: list[str] = []


def _init_worker(proteins: list[str], base: str) -> None:
    global _WORK, _PROTEINS
    _PROTEINS = proteins
    _WORK = Path(tempfile.mkdtemp(dir=base))
    shutil.copy(LIB, _WORK / LIB.name)  # relative paths: the recorded commands do not depend on the machine


def _one_file(job: tuple[int, str]) -> int:
    """Query ``i``: a fragment of a sample protein with a few substitutions, searched; the output
    written under a temporary name and renamed (an interrupted build resumes)."""
    i, target = job
    rng = random.Random(40_000_000 + i)  # each query its own, the same in every build
    source = rng.choice(_PROTEINS)
    start = rng.randrange(0, len(source) - 60)
    frag = list(source[start:start + rng.randint(60, 120)])
    for _ in range(len(frag) // 10):
        frag[rng.randrange(len(frag))] = rng.choice("ACDEFGHIKLMNPQRSTVWY")
    query = _WORK / "q.aa"
    query.write_text(f">q{i:07d} fragment {i} of a sample protein\n{''.join(frag)}\n")
    out = subprocess.run(["ssearch36", "-q", "-m", "10", "-z", "3", "-T", "1", "-E", "10", query.name, LIB.name],
                         capture_output=True, check=True, cwd=_WORK).stdout
    path = Path(target)
    tmp = path.with_name(f"{path.name}.part")  # no .m10 suffix: never loaded
    tmp.write_bytes(out)
    os.replace(tmp, path)
    return i


def _file(folder: Path, i: int, first: int) -> Path:
    return folder / f"d{(i - first) // PER_FOLDER:03d}" / f"q{i:07d}.m10"


def study_corpus(root: Path, n: int) -> tuple[Path, Path, dict]:
    """``n`` one-query files under ``root/main`` and ``n // 100`` more under ``root/plus``."""
    main, plus, done = root / "main", root / "plus", root / "corpus.json"
    n_plus = max(1, n // 100)
    if done.is_file():
        return main, plus, json.loads(done.read_text())
    if shutil.which("ssearch36") is None:
        raise SystemExit("ssearch36 not found: apt-get install fasta3")
    wanted = [(i, _file(main, i, 0)) for i in range(n)] + [(i, _file(plus, i, n)) for i in range(n, n + n_plus)]
    for _, path in wanted:
        path.parent.mkdir(parents=True, exist_ok=True)
    for part in root.glob("*/d*/*.part"):  # an interrupted build's half-written output
        part.unlink()
    todo = [(i, str(p)) for i, p in wanted if not p.is_file()]
    log(f"building the corpus in {root}: {len(wanted) - len(todo):,} of {len(wanted):,} files present, "
        f"{len(todo):,} to search (ssearch36, a pool of 2) ...")
    t0 = time.perf_counter()
    ctx = mp.get_context("fork")
    base = tempfile.mkdtemp(prefix="bench-study-ss-")  # the pool's work folders, one a process
    try:
        with ctx.Pool(2, initializer=_init_worker, initargs=(_proteins(), base)) as pool:
            for k, _ in enumerate(pool.imap_unordered(_one_file, todo, chunksize=20), 1):
                if k % 1000 == 0 or k == len(todo):
                    rate = k / (time.perf_counter() - t0)
                    log(f"  {k:,} / {len(todo):,} files ({rate:.0f} a second, "
                        f"{(len(todo) - k) / rate / 60:.1f} min left)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    info = {"files": n, "plus_files": n_plus, "per_folder": PER_FOLDER, "library": LIB.name,
            "bytes": sum(p.stat().st_size for _, p in wanted), "build_seconds": round(time.perf_counter() - t0, 1)}
    done.write_text(json.dumps(info, indent=1))
    return main, plus, info


# ------------------------------------------------------------------ running commands
def vm_rss_mb(pid: int | None) -> float | None:
    """The resident set of ``pid`` now (VmRSS), in MB."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError, TypeError):
        pass
    return None


def _when(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _stage_row(s: dict) -> dict:
    detail = s.get("detail") or {}
    row = {k: s.get(k) for k in ("stage", "seconds", "records_in", "records_out", "started", "ended")}
    for k in ("read", "scope", "publish_s", "check_s", "scheduler", "checked"):
        if k in detail:
            row[k] = detail[k]
    return row


def scaled_seconds(stages: list[dict]) -> float:
    """The seconds of the stages that grow with the data (all but :data:`FIXED_STAGES` and the
    warm-ups), less any fixed stage that ran inside one of them (the load's cluster start)."""
    fixed = [(_when(s["started"]), _when(s["ended"])) for s in stages
             if s["stage"] in FIXED_STAGES or s["stage"].startswith("warm_up")]
    total = 0.0
    for s in stages:
        if s["stage"] in FIXED_STAGES or s["stage"].startswith("warm_up") or s["stage"] == "parse":
            continue  # parse: workers' busy seconds, inside the load stage
        a, b = _when(s["started"]), _when(s["ended"])
        inside = sum(max(0.0, min(b, f1) - max(a, f0)) for f0, f1 in fixed if None not in (a, b, f0, f1))
        total += max(0.0, (s["seconds"] or 0.0) - inside)
    return total


#: A command that fails outright (exit 1, or no JSON) is run again every :data:`RETRY_AFTER_S`
#: seconds for up to ``--retry-for`` seconds (default :data:`RETRY_FOR_S`): on a checkout being
#: edited a command can meet a module half written (an ImportError, a NameError).  Each failed
#: attempt is kept in the JSON (``failed_attempts``) and printed.
RETRY_AFTER_S, RETRY_FOR_S = 20.0, 300.0
RETRY_FOR = [RETRY_FOR_S]  # main() sets it from --retry-for


def command(server: Server, label: str, argv: list[str]) -> dict:
    """One whole command, run again while it fails outright (see :data:`RETRY_AFTER_S`)."""
    failed = []
    first = None
    while True:
        out = _command(server, label, argv)
        if out["exit_code"] in (0, 2) and "error" not in out:
            break
        failed.append({k: out.get(k) for k in ("exit_code", "wall_seconds", "error", "stderr_tail")})
        first = first or time.monotonic()
        if time.monotonic() - first + RETRY_AFTER_S > RETRY_FOR[0]:
            break
        log(f"  failed: run again in {RETRY_AFTER_S:.0f} s")
        time.sleep(RETRY_AFTER_S)
    out["failed_attempts"] = failed
    return out


def _command(server: Server, label: str, argv: list[str]) -> dict:
    """One whole command, its wall time, JSON report, stage rows and the server's RSS."""
    log(f"{label}: {' '.join(['sci-ingest', *argv[len(CLI):]])} ...")
    proc, mon, wall, stdout, stderr = run_monitored(argv, server.env, None, server.pid)
    srv = proc.also
    try:
        report = json.loads(stdout)
    except ValueError:
        report = None
    stages = [_stage_row(s) for s in (report or {}).get("stages", [])]
    own = srv.peak.get(server.pid, {}) if srv else {}
    out = {
        "label": label, "argv": " ".join(argv), "exit_code": proc.returncode, "wall_seconds": round(wall, 3),
        "stages": stages, "scaled_seconds": round(scaled_seconds(stages), 3) if stages else None,
        "files": (report or {}).get("files"), "inserted": (report or {}).get("inserted"),
        "skipped": (report or {}).get("skipped"),
        "analysis": [{k: a.get(k) for k in ("name", "seconds", "records_in", "records_out", "scope", "read")}
                     for a in (report or {}).get("analysis") or []],
        "validation": {k: v for k, v in ((report or {}).get("validation") or {}).items() if k != "suites"} or None,
        "command_peak_rss_mb": round(max((max(p["rss"], p["hwm"]) for p in mon.peak.values()), default=0) / 2**20, 1),
        "command_tree_peak_mb": round(mon.tree_peak / 2**20, 1),
        "server_peak_rss_mb": round(own.get("rss", 0) / 2**20, 1) if own else None,
        "server_tree_peak_mb": round(srv.tree_peak / 2**20, 1) if srv else None,
        "server_rss_after_mb": vm_rss_mb(server.pid),
    }
    if proc.returncode != 0 or report is None:
        out["error"] = (stderr.strip().splitlines() or ["no JSON on stdout"])[-1]
        out["stderr_tail"] = stderr.strip().splitlines()[-8:]
    log(f"  {wall:.2f} s, exit {proc.returncode}, server RSS {out['server_rss_after_mb']} MB "
        f"(peak {out['server_peak_rss_mb']} MB)" + (f"  ERROR {out['error']}" if out.get("error") else ""))
    return out


def stage(cmd: dict, name: str) -> dict | None:
    return next((s for s in cmd["stages"] if s["stage"] == name), None)


def stage_s(cmd: dict, name: str) -> float | None:
    s = stage(cmd, name)
    return s["seconds"] if s else None


def analysis_names(*cmds: dict) -> list[str]:
    """The analyses the commands ran (each once, in their order)."""
    names = [s["stage"].split(".", 1)[1] for c in cmds for s in c["stages"] if s["stage"].startswith("analyze.")]
    return list(dict.fromkeys(names))


def _ratio(a, b):
    return a / b if a is not None and b else None


# ------------------------------------------------------------------ the published outputs
def _norm(value):
    """A value comparable with ``==`` (exactly): NaN as a string, lists and dicts item by item."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    return value


_OUTPUTS = """
import json
from analytics.registry import get_analysis
print(json.dumps({n: [get_analysis(n).output, get_analysis(n).parquet_name, get_analysis(n).output_id] for n in %r}))
"""


def outputs_of(names: tuple[str, ...]) -> dict[str, list[str]]:
    """Each analysis's output collection, Parquet file name and id column, asked of a fresh
    interpreter (this one's modules may be older than the files of a checkout being edited)."""
    deadline = time.monotonic() + RETRY_FOR[0]
    while True:
        out = subprocess.run([sys.executable, "-c", _OUTPUTS % (names,)], capture_output=True, text=True, cwd=ROOT)
        if out.returncode == 0:
            return json.loads(out.stdout)
        if time.monotonic() + RETRY_AFTER_S > deadline:
            raise SystemExit(f"the analyses' outputs: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
        time.sleep(RETRY_AFTER_S)


def snapshot(db, out_dir: Path, into: Path) -> dict:
    """The output collections (rows by ``_id``, without ``run_id``) and copies of their Parquet files."""
    into.mkdir(parents=True, exist_ok=True)
    snap = {}
    for name, (output, parquet_name, output_id) in outputs_of(PASTA).items():
        rows = {}
        for doc in db[output].find({}):
            doc.pop("run_id", None)
            rows[doc["_id"]] = _norm(doc)
        parquet = out_dir / parquet_name
        copy = into / parquet_name
        if parquet.is_file():
            shutil.copy(parquet, copy)
        snap[name] = {"collection": output, "rows": rows, "parquet": copy if parquet.is_file() else None,
                      "id": output_id}
    return snap


def _parquet_rows(path: Path | None, id_column: str) -> dict | None:
    if path is None or not path.is_file():
        return None
    table = pq.read_table(path)
    if "run_id" in table.column_names:
        table = table.drop(["run_id"])
    return {row[id_column]: _norm(row) for row in table.to_pylist()}


def _first_differences(a: dict | None, b: dict | None, limit: int = 3) -> list[str]:
    if a is None or b is None:
        return [f"missing: {'after --changed' if a is None else 'full analyze'}"]
    out = []
    for key in sorted(set(a) - set(b), key=str)[:limit]:
        out.append(f"id {key!r} only after --changed")
    for key in sorted(set(b) - set(a), key=str)[:limit]:
        out.append(f"id {key!r} only in the full analyze")
    for key in sorted(set(a) & set(b), key=str):
        if len(out) >= limit * 2:
            break
        if a[key] != b[key]:
            fields = sorted(k for k in set(a[key]) | set(b[key]) if a[key].get(k) != b[key].get(k))
            out.append(f"id {key!r}: " + "; ".join(f"{f}: {a[key].get(f)!r} != {b[key].get(f)!r}" for f in fields[:4]))
    return out


def compare(changed: dict, full: dict) -> dict:
    result = {"equal": True, "outputs": {}}
    for name in PASTA:
        c, f = changed[name], full[name]
        coll_diff = [] if c["rows"] == f["rows"] else _first_differences(c["rows"], f["rows"])
        pc, pf = _parquet_rows(c["parquet"], c["id"]), _parquet_rows(f["parquet"], f["id"])
        pq_diff = [] if (pc is not None and pc == pf) else _first_differences(pc, pf)
        result["outputs"][name] = {"collection": c["collection"], "rows": len(c["rows"]),
                                   "collection_equal": not coll_diff, "parquet_equal": not pq_diff,
                                   "differences": {"collection": coll_diff, "parquet": pq_diff}}
        result["equal"] &= not coll_diff and not pq_diff
    return result


# ------------------------------------------------------------------ the run
def run_study(args, main_dir: Path, plus_dir: Path, corpus: dict) -> dict:
    home = Path(tempfile.mkdtemp(prefix="bench-study-home-"))
    server = Server(home)
    server.start()
    client = pymongo.MongoClient(server.uri)
    db = client[DB]
    workers = ["--workers", str(args.workers)] if args.workers else []
    steps: dict[str, dict] = {}
    result = {"home": str(home), "server": {"uri": server.uri, "pid": server.pid,
                                             "rss_at_start_mb": vm_rss_mb(server.pid)}, "steps": steps}
    try:
        steps["1_load"] = command(server, "(1) load", [*CLI, "load", "--json", "-q", *workers, str(main_dir)])
        counts = {c: db[c].count_documents({}) for c in ("searches", "hits")}
        result["counts_after_load"] = counts
        log(f"  loaded: {counts}")
        steps["2_load_again"] = command(server, "(2) load again", [*CLI, "load", "--json", "-q", *workers,
                                                                   str(main_dir)])
        steps["3_analyze"] = command(server, "(3) analyze", [*CLI, "analyze", "--json"])
        bare = {}
        for name in analysis_names(steps["3_analyze"]):
            row = stage(steps["3_analyze"], f"analyze.{name}")
            if not row or not row.get("records_in"):
                bare[name] = None  # no data in its source here (the materials analyses)
                continue
            bare[name] = measure_bare(server.uri, DB, name)
            log(f"  bare read for {name}: {bare[name].get('seconds', 0):.2f} s ({bare[name].get('rows')} rows)"
                + (f"  ERROR {bare[name]['error']}" if bare[name].get("error") else ""))
        result["bare_reads"] = bare
        steps["4_changed_nothing"] = command(server, "(4) analyze --changed, nothing new",
                                             [*CLI, "analyze", "--changed", "--json"])
        steps["5_validate"] = command(server, "(5) validate", [*CLI, "validate", "--json"])
        steps["6_load_plus"] = command(server, "(6) load the +1 %", [*CLI, "load", "--json", "-q", *workers,
                                                                     str(plus_dir)])
        steps["7_changed_plus"] = command(server, "(7) analyze --changed after +1 %",
                                          [*CLI, "analyze", "--changed", "--json"])
        outputs = home / "out" / "embedded" / DB  # the home's server's database (ingest/store/outputs.py)
        changed = snapshot(db, outputs, BENCH_DIR / "bench-study-snapshot")
        steps["8_validate_plus"] = command(server, "(8) validate --changed after +1 %",
                                           [*CLI, "validate", "--changed", "--json"])
        steps["8b_validate_full"] = command(server, "(8b) validate (full) after +1 %", [*CLI, "validate", "--json"])
        steps["9_run_nothing"] = command(server, "(9) run, nothing new", [*CLI, "run", "--json", "-q", *workers,
                                                                          str(main_dir), str(plus_dir)])
        steps["10_analyze_full"] = command(server, "(10) analyze (full, for the equality check)",
                                           [*CLI, "analyze", "--json"])
        full = snapshot(db, outputs, BENCH_DIR / "bench-study-snapshot-full")
        result["equality"] = compare(changed, full)
        result["counts_end"] = {c: db[c].count_documents({}) for c in
                                ("searches", "hits", "query_best_hits", "hit_distributions", "library_hits")}
        result["server"]["rss_at_end_mb"] = vm_rss_mb(server.pid)
    finally:
        client.close()
        server.stop()
        for folder in ("bench-study-snapshot", "bench-study-snapshot-full"):
            shutil.rmtree(BENCH_DIR / folder, ignore_errors=True)
        if args.keep_home:
            log(f"kept: {home} (sci-ingest server start with SCI_INGEST_HOME={home} serves it again)")
        else:
            shutil.rmtree(home, ignore_errors=True)
    return result


# ------------------------------------------------------------------ figures
def figures(result: dict, n: int) -> dict:
    st = result["steps"]
    full, changed, nothing = st["3_analyze"], st["7_changed_plus"], st["4_changed_nothing"]
    rows = []
    for name in analysis_names(full, nothing, changed):
        f = stage(full, f"analyze.{name}") or {}
        c = stage(changed, f"analyze.{name}")
        z = stage(nothing, f"analyze.{name}")
        b = result["bare_reads"].get(name)
        rows.append({"analysis": name, "full_s": f.get("seconds"), "records_in": f.get("records_in"),
                     "records_out": f.get("records_out"), "read": (f.get("read") or {}).get("mode"),
                     "documents": (f.get("read") or {}).get("documents"),
                     "bare_s": b.get("seconds") if b else None, "bare_rows": b.get("rows") if b else None,
                     "ratio": _ratio(f.get("seconds"), b.get("seconds") if b else None),
                     "empty": bool(f) and not f.get("records_in"),
                     "nothing_new_s": z["seconds"] if z else None,
                     "nothing_new_scope": (z.get("scope") or {}).get("mode") if z else None,
                     "changed_s": c["seconds"] if c else None,
                     "changed_scope": (c.get("scope") or {}).get("mode") if c else None,
                     "changed_records_in": c["records_in"] if c else None,
                     "full_publish_s": f.get("publish_s"), "changed_publish_s": c.get("publish_s") if c else None,
                     "changed_over_full": _ratio(c["seconds"] if c else None, f.get("seconds"))})
    hits = result["counts_after_load"]["hits"]
    factor = STUDY_FILES / n
    projection = {"files": STUDY_FILES, "from_files": n, "factor": factor,
                  "method": "linear: each command's stages that grow with the data (load, index, analyze.*, "
                            "validate) times 1.1 M / N, its other seconds (start-up, connect, cluster, close, "
                            "warm-ups, process exit) as measured"}
    for key, cmd in st.items():
        if cmd.get("scaled_seconds") is None:
            continue
        grow = cmd["scaled_seconds"]
        projection[key] = {"measured_s": cmd["wall_seconds"], "growing_s": grow,
                           "projected_s": cmd["wall_seconds"] - grow + grow * factor}
    projection["load_ms_per_file"] = (st["1_load"]["scaled_seconds"] or 0) / n * 1000
    projection["rerun_ms_per_file"] = (st["2_load_again"]["scaled_seconds"] or 0) / n * 1000
    analyze_grow = sum(stage_s(full, f"analyze.{a}") or 0 for a in analysis_names(full))
    projection["analyze_us_per_hit"] = analyze_grow / hits * 1e6 if hits and analyze_grow else None
    projection["hits_per_file"] = hits / n
    best_changed = stage(changed, "analyze.best_hits")
    projection["changed_plus_ms_per_new_file"] = (
        best_changed["seconds"] / max(1, n // 100) * 1000
        if best_changed and (best_changed.get("scope") or {}).get("mode") == "changed" else None)
    limit = MAX_CHANGED
    plus_files = STUDY_FILES // 100
    projection["note"] = (
        f"at 1.1 M files +1 % is {plus_files:,} files: more than analytics.increment.MAX_CHANGED ({limit:,}), so "
        "--changed would read the whole collection for best_hits too" if limit is not None and plus_files > limit
        else f"at 1.1 M files +1 % is {plus_files:,} files")
    ok = {k: c["exit_code"] == 0 and "error" not in c for k, c in st.items()}
    fa, ca, za = full["wall_seconds"], changed["wall_seconds"], nothing["wall_seconds"]
    best = next((r for r in rows if r["analysis"] == "best_hits"), None)
    best_ratio = best["ratio"] if best and ok["3_analyze"] else None
    changed_ratio = ca / fa if ok["3_analyze"] and ok["7_changed_plus"] else None
    run_s = st["9_run_nothing"]["wall_seconds"] if ok["9_run_nothing"] else None
    za = za if ok["4_changed_nothing"] else None
    eq = result["equality"]["equal"] and ok["7_changed_plus"] and ok["10_analyze_full"]
    targets = [
        ("best_hits / its bare read (step 3)", best_ratio, "<= 1.25",
         best_ratio is not None and best_ratio <= TARGETS["best_hits_ratio"]),
        ("analyze --changed after +1 % / full analyze (wall)", changed_ratio, "<= 0.15",
         changed_ratio is not None and changed_ratio <= TARGETS["changed_ratio"]),
        ("analyze --changed, nothing new (wall s)", za, "<= 3 s", za is not None and za <= TARGETS["changed_nothing_s"]),
        ("run, nothing new (wall s)", run_s, "<= 5 s", run_s is not None and run_s <= TARGETS["run_nothing_s"]),
        ("outputs equal (--changed vs full)", "yes" if eq else "no", "yes", eq),
    ]
    full_stages = sum(r["full_s"] or 0 for r in rows)
    return {"analyses": rows, "projection": projection, "steps_ok": ok,
            "changed_over_full_wall": changed_ratio,
            "changed_over_full_stages": _ratio(sum(r["changed_s"] or 0 for r in rows), full_stages),
            "targets": [{"quantity": q, "figure": f, "target": t, "met": m} for q, f, t, m in targets]}


def _f(x, digits=2) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:,.{digits}f}"


def report(result: dict) -> None:
    m = result["machine"]
    log(f"\ncommit {result['commit']}{' + uncommitted changes in ingest/ analytics/' if result['dirty'] else ''}, "
        f"{m['host']}, {m['cpus']} CPUs, load average {m['load_avg_start'][0]:.2f} -> {m['load_avg_end'][0]:.2f}")
    c = result["corpus"]
    log(f"corpus: {c['files']:,} one-query ssearch36 -m 10 files ({c['plus_files']:,} more for +1 %), "
        f"{c['bytes'] / 2**20:.0f} MB; loaded: {result['counts_after_load']}")
    log(f"server: RSS {result['server']['rss_at_start_mb']} MB at its start, {result['server'].get('rss_at_end_mb')} MB "
        f"at the end")
    log("\nstep | wall s | exit | growing s | main stages | server RSS after MB | server peak MB | command peak MB")
    for cmd in result["steps"].values():
        main = [(s["stage"], s["seconds"]) for s in cmd["stages"]
                if s["stage"] in ("load", "index", "validate", "warm_up.validate", "cluster", "start-up")]
        if any(s["stage"].startswith("analyze.") for s in cmd["stages"]):
            main.append(("analyze.*", sum(s["seconds"] or 0 for s in cmd["stages"] if s["stage"].startswith("analyze."))))
        text = ", ".join(f"{k} {v:.2f}" for k, v in main)
        log(f"{cmd['label']} | {_f(cmd['wall_seconds'])} | {cmd['exit_code']} | {_f(cmd['scaled_seconds'])} | {text} | "
            f"{_f(cmd['server_rss_after_mb'], 0)} | {_f(cmd['server_peak_rss_mb'], 0)} | {_f(cmd['command_peak_rss_mb'], 0)}"
            + (f" | ERROR {cmd['error']}" if cmd.get("error") else ""))
    fig = result["figures"]
    log("\nanalysis | full s (3) | of which publish | bare read s | ratio | rows in | rows out | read | "
        "nothing new s (4) | scope | after +1 % s (7) | of which publish | scope | rows in | (7)/(3)")
    for r in fig["analyses"]:
        if r["empty"]:
            log(f"{r['analysis']} | {_f(r['full_s'])} | | empty: no data in its source here (skipped) | | | | | "
                f"{_f(r['nothing_new_s'])} | {r['nothing_new_scope']} | {_f(r['changed_s'])} | | {r['changed_scope']} | | ")
            continue
        log(f"{r['analysis']} | {_f(r['full_s'])} | {_f(r['full_publish_s'])} | {_f(r['bare_s'])} | {_f(r['ratio'])} | "
            f"{_f(r['records_in'], 0)} | {_f(r['records_out'], 0)} | {r['read']} | {_f(r['nothing_new_s'])} | "
            f"{r['nothing_new_scope']} | {_f(r['changed_s'])} | {_f(r['changed_publish_s'])} | {r['changed_scope']} | "
            f"{_f(r['changed_records_in'], 0)} | {_f(r['changed_over_full'])}")
    log(f"analyze --changed after +1 % / full analyze: wall {_f(fig['changed_over_full_wall'])}x, "
        f"analysis stages {_f(fig['changed_over_full_stages'])}x")
    for cmd in result["steps"].values():
        failed = cmd.get("failed_attempts") or []
        if failed:
            a = failed[-1]
            log(f"{cmd['label']}: {len(failed)} attempt(s) failed (the last: exit {a['exit_code']}, "
                f"{a['wall_seconds']:.1f} s): {a['error']}")
    eq = result["equality"]
    log(f"\noutputs equal: {'yes' if eq['equal'] else 'no'}")
    for name, o in eq["outputs"].items():
        log(f"  {name} ({o['collection']}, {o['rows']:,} rows): collection {'equal' if o['collection_equal'] else 'DIFFERS'}, "
            f"Parquet {'equal' if o['parquet_equal'] else 'DIFFERS'}")
        for where, diffs in o["differences"].items():
            for d in diffs:
                log(f"    {where}: {d}")
    p = fig["projection"]
    log(f"\nLINEAR PROJECTION to {p['files']:,} files from these figures at {p['from_files']:,} (x{p['factor']:.0f}; "
        f"{p['method']}):")
    log(f"  load {p['load_ms_per_file']:.2f} ms a file, re-run {p['rerun_ms_per_file']:.3f} ms a file, "
        f"analyze {_f(p['analyze_us_per_hit'])} us a hit ({p['hits_per_file']:.1f} hits a file), "
        f"best_hits --changed {_f(p['changed_plus_ms_per_new_file'])} ms a new file")
    for key, cmd in result["steps"].items():
        if key in p:
            q = p[key]
            log(f"  {cmd['label']}: {q['measured_s']:.1f} s measured -> {q['projected_s']:,.0f} s "
                f"({q['projected_s'] / 3600:.2f} h) projected")
    log(f"  note: {p['note']}")
    log("\nquantity | figure | target | met?")
    for t in fig["targets"]:
        verdict = "met" if t["met"] else "not measured (its step failed)" if t["figure"] is None else "NOT MET"
        log(f"{t['quantity']} | {_f(t['figure'])} | {t['target']} | {verdict}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="2,000 files")
    ap.add_argument("--corpus", type=Path, help="default ${TMPDIR:-/tmp}/sci-ingest-bench/study-N")
    ap.add_argument("--workers", type=int, default=None, help="sci-ingest load/run --workers (default: its own)")
    ap.add_argument("--keep-home", action="store_true", help="keep the temporary SCI_INGEST_HOME (its database)")
    ap.add_argument("--retry-for", type=float, default=RETRY_FOR_S,
                    help=f"run a command that fails outright again for this long (default {RETRY_FOR_S:g} s; 0: never)")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "bench_study.json")
    args = ap.parse_args(argv)
    RETRY_FOR[0] = args.retry_for
    if args.quick:
        args.files = 2000
    if args.files < 100:
        raise SystemExit("--files: at least 100 (the +1 % set is N/100 files)")
    corpus_dir = args.corpus or BENCH_DIR / f"study-{args.files}"
    main_dir, plus_dir, corpus = study_corpus(corpus_dir, args.files)
    git = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    result = {"machine": {"host": platform.node(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
              "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain", "ingest",
                                                                                  "analytics")),
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "args": {k: str(v) for k, v in vars(args).items()},
              "corpus": {**corpus, "folder": str(corpus_dir)}}
    t0 = time.perf_counter()
    result.update(run_study(args, main_dir, plus_dir, corpus))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["machine"]["load_avg_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))  # the measurements, before any report error
    result["figures"] = figures(result, args.files)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    report(result)
    log(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
