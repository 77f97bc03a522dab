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
   one (already inside the wall time), else the time of creating ``ingest.store.catalog.INDEXES``
   after it (idempotent: about 0 when the loader kept them during the load).  Then a
   **second load** of the unchanged corpus into the same database.
2. **raw** ceiling: the documents the loader stores, pre-built once by the project's own
   parser and document builders (``load_corpus.documents``), split in batches of 1000 per
   collection dealt round-robin to N forked client processes, each doing bare
   ``insert_many(ordered=False)`` (its own ``MongoClient``, the server's default write
   concern, like the loader's), timed from a barrier after every client has connected to
   the last batch acknowledged.  BSON encoding happens in the clients, as in the loader.
   Index sets: ``none`` (``_id`` only), ``catalog`` (``ingest.store.catalog.INDEXES``) and
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
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import load_corpus
from load_measure import (
    _BATCHES,
    CLI,
    DATA,
    ROOT,
    Server,
    _frozen,
    _index_label,
    _raise_interrupt,
    catalog_indexes,
    check_documents,
    create_indexes,
    index_snapshot,
    index_stage,
    load_docs_per_s,
    loader_flags,
    raw_insert,
    run_load,
    stage_seconds,
)

BENCH_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
DEFAULT_CORPUS = BENCH_DIR / "load-corpus"
DEFAULT_10X = BENCH_DIR / "load-corpus-x10"
DEFAULT_OUT = BENCH_DIR / "bench_load.json"
BATCH = 1000
# (key, quantity, target text, test)
TARGETS = {
    "load_vs_raw": ("load stage / raw, same documents and indexes", ">= 0.90", lambda x: x >= 0.90),
    "load_index_vs_raw_none": ("(load + index build) / raw with no secondary index", "<= 1.5", lambda x: x <= 1.5),
    "dry_run_speedup": ("--dry-run: 2 workers / 1 worker, load stage", ">= 1.7", lambda x: x >= 1.7),
    "rerun_speedup": ("first load / second load (unchanged) time", ">= 20", lambda x: x >= 20),
    "scale_10x": ("10x corpus / 1x corpus load time", "<= 11", lambda x: x <= 11),
    "peak_rss_mb": ("peak RSS of a load process (MB)", "< 300", lambda x: x < 300),
}


def log(message: str = "") -> None:
    print(message, flush=True)


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
def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
    return ap.parse_args(argv)


@dataclass
class Bench:
    """One benchmark run: its inputs, the server and client, and the result being filled."""

    args: argparse.Namespace
    inputs: list[str]
    corpus_10x: Path | None
    workers: list[int]
    result: dict
    explicit_indexes: dict | None = None
    flags: dict = field(default_factory=dict)
    load_ns: list[int] = field(default_factory=list)
    docs: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)
    server: Server | None = None
    client: object = None
    catalog: dict = field(default_factory=dict)

    def note(self, message: str) -> None:
        self.result["notes"].append(message)
        log(f"note: {message}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    CLI[:] = args.cli.split()
    workers = [int(x) for x in (args.workers or ("1,2" if args.quick else "1,2,4")).split(",")]
    corpus = (args.corpus or DEFAULT_CORPUS).resolve()
    if args.corpus is None:
        ensure_corpus(corpus, 1)
    if args.build_10x:
        ensure_corpus(DEFAULT_10X, 10)
    bench = Bench(args=args, inputs=quick_inputs(corpus) if args.quick else [str(corpus)],
                  corpus_10x=args.corpus_10x or (DEFAULT_10X if args.build_10x else None), workers=workers,
                  result={"started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                          "git": _git_head(), "corpus": str(corpus), "quick": args.quick, "workers": workers,
                          "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "notes": []})
    if args.raw_indexes:
        bench.explicit_indexes = {c: [[tuple(k) for k in keys] for keys in specs]
                                  for c, specs in json.loads(args.raw_indexes.read_text()).items()}
    result = bench.result
    check_flags(bench)
    log(f"corpus: {corpus}{' (quick: a fifth of it)' if args.quick else ''}")
    prepare_documents(bench)

    home = Path(tempfile.mkdtemp(prefix="bench-load-", dir=BENCH_DIR))
    bench.server = Server(home)
    old_handlers = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        start_server(bench, home)
        result["loads"], result["raw"], result["reruns"] = {}, {}, {}
        bench.catalog = catalog_indexes()
        for n in workers:
            measure_loads(bench, n)
            measure_raw(bench, n)
        measure_dry_runs(bench)
        measure_10x(bench)
    except KeyboardInterrupt:
        bench.note("interrupted: the results so far are written")
        result["interrupted"] = True
    finally:
        if bench.client is not None:
            bench.client.close()
        bench.server.stop()
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


def check_flags(bench: Bench) -> None:
    """What the measured loader can do (read from its --help): parts it cannot do are skipped."""
    bench.flags = flags = loader_flags()
    bench.result["loader_flags"] = flags
    if not flags["workers"]:
        bench.note("`sci-ingest load` has no --workers: loads run without it (one process), only at N=1; "
                   "the raw ceiling is still measured at every N")
    if not flags["dry-run"]:
        bench.note("`sci-ingest load` has no --dry-run: the dry-run scaling is skipped")
    bench.load_ns = [n for n in bench.workers if flags["workers"] or n == 1]


def prepare_documents(bench: Bench) -> None:
    """Pre-build the corpus's documents once (the raw clients insert them in batches)."""
    bench.docs, built = prebuild(bench.inputs)
    bench.expected = built["counts"]
    bench.result["prebuilt"] = built
    log(f"  {built['files']} files, {built['bytes']:,} bytes, {built['documents']:,} documents {bench.expected}; "
        f"parse + build {built['parse_build_seconds']:.2f} s, BSON {built['bson_bytes']:,} bytes "
        f"(encode {built['bson_encode_seconds']:.2f} s), one process")
    _BATCHES.clear()
    for coll in DATA:
        docs = bench.docs[coll]
        _BATCHES.extend((coll, docs[i:i + BATCH]) for i in range(0, len(docs), BATCH))


def start_server(bench: Bench, home: Path) -> None:
    import pymongo

    bench.server.start()
    bench.client = client = pymongo.MongoClient(bench.server.uri)
    hello, build = client.admin.command("hello"), client.admin.command("buildInfo")
    bench.result["server"] = {"uri": bench.server.uri, "version": build.get("version"),
                              "secantus": build.get("secantusVersion"), "set": hello.get("setName")}
    log(f"server: SecantusDB {build.get('secantusVersion')} (MongoDB {build.get('version')}) at {bench.server.uri}, "
        f"home {home}")


def measure_loads(bench: Bench, n: int) -> None:
    """The first load at N workers (checked against the pre-built documents once), then a second one."""
    log(f"\n== N = {n}")
    if n not in bench.load_ns:
        log("  load: skipped (no --workers)")
        return
    client, flags, result = bench.client, bench.flags, bench.result
    db_name = f"bench_load_w{n}"
    w = n if flags["workers"] else None
    r = run_load(bench.server, client, bench.inputs, db_name, workers=w, watch_indexes=True)
    r["indexes_after"] = index_snapshot(client[db_name])
    r["indexes_during_source"] = "sampled during the load" if r["indexes_during"] else "after the load"
    during = r["indexes_during"] = r["indexes_during"] or r["indexes_after"]
    stage = index_stage(r)
    if stage:
        r["index_build_seconds"], r["index_build_source"] = stage.get("seconds") or 0.0, "its JSON stage"
        r["load_plus_index_seconds"] = r["wall_seconds"]
    else:
        r["index_build_seconds"] = create_indexes(client[db_name], bench.catalog)
        r["index_build_source"] = "catalog INDEXES created after the load"
        r["load_plus_index_seconds"] = r["wall_seconds"] + r["index_build_seconds"]
    result["loads"][n] = r
    _print_load(f"load --workers {n}" if flags["workers"] else "load (no --workers)", r)
    if r["exit_code"] != 0 or r["counts"] != bench.expected:
        bench.note(f"the load at N={n} exited {r['exit_code']} with {r['counts']} "
                   f"(pre-built: {bench.expected}): its figures are not those of a clean load")
    log(f"    indexes during the load ({r['index_samples']} samples, {r['index_sets_seen']} set(s)): "
        f"{_index_label(during)}{' = catalog' if _frozen(during) == _frozen(bench.catalog) else ''}")
    log(f"    index build: {r['index_build_seconds']:.3f} s ({r['index_build_source']}); load + index "
        f"{r['load_plus_index_seconds']:.2f} s")
    if not any("document_check" in x for x in result["loads"].values()):
        t0 = time.perf_counter()
        r["document_check"] = chk = check_documents(client[db_name], bench.docs)
        ids = "equal" if all(v["equal"] for v in chk["ids"].values()) else chk["ids"]
        first = f" (first difference: {chk['first_difference']})" if chk["differ"] else ""
        log(f"    documents vs pre-built: _id sets {ids}; {chk['sampled'] - chk['differ']}/"
            f"{chk['sampled']} sampled documents identical{first} ({time.perf_counter() - t0:.1f} s)")
    second = run_load(bench.server, client, bench.inputs, db_name, workers=w, fresh=False)
    second["speedup"] = r["wall_seconds"] / second["wall_seconds"]
    _print_load("second load, unchanged corpus, same database", second)
    log(f"    first / second: {second['speedup']:.1f}x")
    result["reruns"][n] = second
    client.drop_database(db_name)


def measure_raw(bench: Bench, n: int) -> None:
    """The raw ceiling at N client processes: no index, the catalog's, and the loader's set."""
    loads = bench.result["loads"]
    same = bench.explicit_indexes or next((loads[m]["indexes_during"] for m in [n] + bench.load_ns
                                           if m in loads and loads[m]["indexes_during"]), None)
    sets = {"none": {c: [] for c in DATA}, "catalog": bench.catalog}
    if same is not None and _frozen(same) != _frozen(bench.catalog):
        sets["loader"] = same
    raws = bench.result["raw"].setdefault(n, {})
    for name, spec in sets.items():
        raws[name] = raw = raw_insert(bench.client, bench.server.uri, f"bench_raw_{name}_n{n}", n, spec,
                                      bench.expected, build_after=bench.catalog if name == "none" else None)
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


def measure_dry_runs(bench: Bench) -> None:
    """--dry-run at 1 and 2 workers, on the 10x corpus when given (start-up is then small)."""
    result = bench.result
    result["dry_run"] = {}
    if not (bench.flags["dry-run"] and bench.flags["workers"]):
        return
    log("\n== --dry-run")
    dry_inputs = [str(bench.corpus_10x)] if bench.corpus_10x else bench.inputs
    log(f"  on {'the 10x corpus' if bench.corpus_10x else 'the corpus'} (a larger corpus makes start-up small)")
    for n in (1, 2):
        r = run_load(bench.server, bench.client, dry_inputs, f"bench_dry_w{n}", workers=n, extra=("--dry-run",))
        result["dry_run"][n] = r
        _print_load(f"load --dry-run --workers {n}", r)
        if r["documents_present"]:
            bench.note(f"--dry-run --workers {n} left {r['documents_present']:,} documents in its database")
        bench.client.drop_database(f"bench_dry_w{n}")
    one, two = result["dry_run"][1], result["dry_run"][2]
    result["dry_run"]["speedup_wall"] = one["wall_seconds"] / two["wall_seconds"]
    stage1, stage2 = stage_seconds(one, "load"), stage_seconds(two, "load")
    result["dry_run"]["speedup"] = (stage1 / stage2) if stage1 and stage2 else result["dry_run"]["speedup_wall"]
    log(f"  speed 2 workers / 1 worker: {result['dry_run']['speedup']:.2f}x of the load stage "
        f"({result['dry_run']['speedup_wall']:.2f}x of the whole command, start-up included)")


def measure_10x(bench: Bench) -> None:
    """The 10x corpus at the largest N loaded, against the 1x load at that N."""
    result, corpus_10x = bench.result, bench.corpus_10x
    result["scale"] = None
    if corpus_10x is None:
        if not bench.args.quick:
            bench.note("no --corpus-10x/--build-10x: the 10x comparison is skipped")
        return
    if not result["loads"]:
        bench.note("no 1x load ran: the 10x comparison is skipped")
        return
    n = max(result["loads"])
    log(f"\n== 10x corpus {corpus_10x}, N = {n}")
    base = result["loads"][n]
    r = run_load(bench.server, bench.client, [str(corpus_10x)], "bench_load_x10",
                 workers=n if bench.flags["workers"] else None)
    bench.client.drop_database("bench_load_x10")
    r["ratio_time"] = r["wall_seconds"] / base["wall_seconds"]
    r["ratio_documents"] = r["documents_present"] / base["documents_present"]
    manifest = corpus_10x / ".corpus.json"
    if manifest.exists():
        r["expected_documents"] = json.loads(manifest.read_text())["documents"]
        if r["expected_documents"] != r["documents_present"] or r["exit_code"] != 0:
            bench.note(f"the 10x load exited {r['exit_code']} with {r['documents_present']:,} documents "
                       f"({r['expected_documents']:,} in the corpus)")
    result["scale"] = r
    _print_load("load of the 10x corpus", r)
    log(f"  10x / 1x: time {r['ratio_time']:.2f}x for {r['ratio_documents']:.2f}x the documents")


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
        row("load_vs_raw", f", N={n}", load and same and load_docs_per_s(load) / same["docs_per_s"])
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
