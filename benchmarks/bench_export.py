"""Benchmark of ``sci-ingest export hits --format parquet`` against a bare read and pymongo + pandas.

    python benchmarks/bench_export.py [--hits 200000] [--rounds 3] [--out results.json]

Builds (once, reused) an embedded SecantusDB server under
``$TMPDIR/sci-ingest-bench/export`` holding ``--hits`` hits of the real stored form: the
bundled ``samples/pasta/*.m10`` parsed by the project's parser and turned into the
loader's documents (``ingest.documents.search_documents``), copy after copy with the
file's sha256 shifted per copy (new ``_id`` s and ``search_id`` s, the samples' content), as
``analytics/bench/dataset.py`` grows its data.  Then, interleaved over ``--rounds`` rounds
(after one untimed warm-up read), times on the same server:

a. **bare read**: draining ``find_raw_batches`` of exactly the export's projection (the
   curated fields of ``hits``) as raw BSON batches, nothing decoded; both with the driver's
   default batch size and with the export's (2,000); the faster of the two is *a*;
b. **export**: ``ingest.query.export.export`` in this process (pymongoarrow with the
   declared schema, the type screen, Parquet written), and the whole command
   ``sci-ingest export hits --format parquet --out FILE`` as a subprocess (interpreter
   start, imports, connecting included);
c. **pymongo + pandas**: ``pd.DataFrame(list(find(filter, projection)))`` then
   ``to_parquet`` (nested ``hsps`` / ``source`` columns as pandas gets them).

Prints the medians, the ratios b/a (target <= 1.25) and b/c (target <= 1), the load
average before and after each round (the machine may be shared), and the peak RSS of the
export command, of the bare read and of the pandas way, each measured in a fresh process
(``VmHWM``: the kernel's high-water mark of the process's own memory).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HOME = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "sci-ingest-bench" / "export"
DB = "bench_export"
BIN = Path(sys.executable).parent / "sci-ingest"


def build_hits(coll, target: int, log) -> None:
    """Insert ``target`` hits of the real stored form (nothing when they are there)."""
    from ingest.documents import search_documents
    from ingest.fileio import open_binary
    from ingest.parsers.pasta import parse_dicts
    from ingest.store.mongo import db_errors

    with db_errors("counting the bench hits"):
        if coll.estimated_document_count() == target:
            log(f"reusing {target:,} hits in {coll.full_name}")
            return
        coll.drop()
    sources = []
    for path in sorted((ROOT / "samples" / "pasta").glob("*.m10")):
        with open_binary(path) as handle:
            queries = list(parse_dicts(handle, str(path)))
        sources.append((hashlib.sha256(path.read_bytes()).hexdigest(), str(path.resolve()), queries))
    started, written, copy = time.perf_counter(), 0, 0
    while written < target:
        docs = []
        for sha, path, queries in sources:
            shifted = hashlib.sha256(f"{sha}:copy{copy}".encode()).hexdigest()
            for index, query in enumerate(queries, start=1):
                docs.extend(search_documents(query, sha256=shifted, path=f"{path}#copy{copy}", query_index=index)[1])
        docs = docs[: target - written]
        with db_errors("inserting the bench hits"):
            coll.insert_many(docs, ordered=False)
        written += len(docs)
        copy += 1
    log(f"built {written:,} hits ({copy} copies of the samples' hits) in {time.perf_counter() - started:.1f} s")


def _spec():
    from ingest.query.compile import build
    from ingest.store import curated

    return build(curated.get("hits"), fields="*")


def drain(coll, batch_size: int | None) -> float:
    spec = _spec()
    started = time.perf_counter()
    kwargs = {"batch_size": batch_size} if batch_size else {}
    n = sum(len(b) for b in coll.find_raw_batches(spec.filter, spec.projection, **kwargs))
    assert n > 0
    return time.perf_counter() - started


def export_function(coll, out: Path) -> float:
    from ingest.query.export import export

    started = time.perf_counter()
    result = export(coll, _spec(), "parquet", str(out))
    assert result.rejected == 0 and result.rows > 0
    return time.perf_counter() - started


def export_command(uri: str, out: Path) -> float:
    env = {**os.environ, "MONGODB_URI": uri, "SCI_INGEST_KEEP": "0"}  # every run cold, as the figures were
    started = time.perf_counter()
    subprocess.run([str(BIN), "export", "hits", "--db", DB, "--format", "parquet", "--out", str(out)],
                   check=True, env=env, capture_output=True)
    return time.perf_counter() - started


def pandas_way(coll, out: Path) -> float:
    import pandas as pd

    spec = _spec()
    started = time.perf_counter()
    frame = pd.DataFrame(list(coll.find(spec.filter, spec.projection)))
    frame.to_parquet(out)
    return time.perf_counter() - started


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent at fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, uri: str, out: str) -> None:
    """One measurement in a fresh process; prints {"seconds", "peak_rss_mb"}."""
    from ingest.store.mongo import client

    if mode == "command":  # the whole command, in this process (its peak RSS is this process's)
        from ingest.cli.main import main as cli_main

        os.environ["MONGODB_URI"] = uri
        started = time.perf_counter()
        code = cli_main(["export", "hits", "--db", DB, "--format", "parquet", "--out", out])
        assert code == 0
        print(json.dumps({"seconds": time.perf_counter() - started, "peak_rss_mb": _peak_rss_mb()}))
        return
    coll = client(uri)[DB]["hits"]
    seconds = {"export": lambda: export_function(coll, Path(out)), "pandas": lambda: pandas_way(coll, Path(out)),
               "drain": lambda: drain(coll, 2000)}[mode]()
    print(json.dumps({"seconds": seconds, "peak_rss_mb": _peak_rss_mb()}))


def in_child(mode: str, uri: str, out: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, "--uri", uri, "--file", str(out)],
                          check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hits", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="write the results as JSON here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.uri, args.file)
        return 0

    from ingest.server.embedded import EmbeddedServer
    from ingest.store.mongo import client

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    server = EmbeddedServer(HOME / "db", log_path=HOME / "server.log", cache_size="1G")
    uri = server.start()
    work = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        coll = client(uri)[DB]["hits"]
        build_hits(coll, args.hits, log)
        drain(coll, None)  # warm-up, untimed: the server's cache, and the export's imports
        export_function(coll, work / "warm.parquet")
        import pandas  # noqa: F401  (imported before the clock runs, as the export's modules are)
        times: dict[str, list[float]] = {k: [] for k in ("drain_default", "drain_2000", "export", "command",
                                                         "pandas")}
        loads = []
        for r in range(args.rounds):
            before = os.getloadavg()[0]
            times["drain_default"].append(drain(coll, None))
            times["export"].append(export_function(coll, work / "b.parquet"))
            times["drain_2000"].append(drain(coll, 2000))
            times["pandas"].append(pandas_way(coll, work / "c.parquet"))
            times["command"].append(export_command(uri, work / "cmd.parquet"))
            loads.append((round(before, 2), round(os.getloadavg()[0], 2)))
            log(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
                + f"; load average {loads[-1][0]} -> {loads[-1][1]}")
        import pandas as pd

        rows = len(pd.read_parquet(work / "b.parquet", columns=["id"]))
        rss = {mode: in_child(mode, uri, work / f"rss-{mode}.parquet") for mode in ("command", "drain", "pandas")}
    finally:
        server.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    a = min(med["drain_default"], med["drain_2000"])
    result = {
        "hits": args.hits, "rows_written": rows, "rounds": args.rounds, "seconds": times, "median": med,
        "a_bare_read": a, "b_over_a": med["export"] / a, "b_over_c": med["export"] / med["pandas"],
        "command_over_a": med["command"] / a, "command_over_c": med["command"] / med["pandas"],
        "peak_rss_mb": {k: round(v["peak_rss_mb"], 1) for k, v in rss.items()}, "load_average": loads,
        "cpus": os.cpu_count(),
    }
    print(f"{args.hits:,} hits, {rows:,} rows written; medians of {args.rounds} interleaved rounds (s):")
    for key, label in (("drain_default", "a  bare find_raw_batches, default batches"),
                       ("drain_2000", "a  bare find_raw_batches, 2,000 a batch"),
                       ("export", "b  export() to Parquet, in process"),
                       ("command", "b  sci-ingest export (whole command)"),
                       ("pandas", "c  pymongo + pandas -> to_parquet")):
        print(f"  {label:<45} {med[key]:7.2f}   ({', '.join(f'{t:.2f}' for t in times[key])})")
    print(f"  b/a = {result['b_over_a']:.3f} (target <= 1.25)   b/c = {result['b_over_c']:.3f} (target <= 1)")
    print(f"  whole command: /a = {result['command_over_a']:.3f}, /c = {result['command_over_c']:.3f}")
    print(f"  peak RSS (VmHWM, a fresh process each): sci-ingest export {result['peak_rss_mb']['command']} MB, "
          f"bare read {result['peak_rss_mb']['drain']} MB, pymongo + pandas {result['peak_rss_mb']['pandas']} MB")
    print(f"  load average (1 min) before -> after each round: {loads} on {os.cpu_count()} cores")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
