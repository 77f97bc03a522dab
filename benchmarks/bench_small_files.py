"""Many small files against one big one, re-runs, and a gzip bomb: the loader's bookkeeping (issue 24).

    .venv/bin/python benchmarks/bench_small_files.py [--files 2000] [--rerun-files 10000] [--rounds 3]
        [--workers N] [--corpus DIR] [--out FILE] [--quick]

Each figure is a ratio (or a peak) measured in this one run, on one embedded
server started for the run (``sci-ingest server start`` in a temporary
``SCI_INGEST_HOME``, stopped at the end), whole ``sci-ingest load`` commands in
subprocesses (start-up included), a fresh database for every load, rounds
interleaved and the median of each side taken:

(a) ``--files`` one-record ``.jsonl`` files against one ``.jsonl`` holding the same records;
(b) ``--files`` small real ``ssearch36 -m 10`` outputs (one query each; Debian's ``fasta3``)
    against one file holding the same query blocks (the outputs concatenated, as ``cat`` makes
    them: the parser reads a file of several runs);
(c) a re-run of ``--rerun-files`` unchanged files: (its wall time - a re-run of one loaded file's)
    per file, in ms;
(d) the peak RSS of every process of a load of a gzip bomb: a million tiny records in about
    70 KB (``--quick``: 200,000), and of ``--dry-run`` of it.

Targets (issue 24): (a) and (b) at most 3x, (c) under 0.5 ms a file, (d) under 300 MB a process.
Also printed: the projected bookkeeping time for 1.1 million files (the study's count) from the
per-file cost of (a) and (b).  The corpus (``--corpus``, default
``${TMPDIR:-/tmp}/sci-ingest-bench/small-files``) is built when missing: (b)'s 2,000 ssearch36
runs take about a minute.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_measure import ROOT, Server, run_load  # noqa: E402

INPUTS = ROOT / "samples" / "pasta" / "inputs"
STUDY_FILES = 1_100_000
TARGETS = {"records_ratio": 3.0, "pasta_ratio": 3.0, "rerun_ms_per_file": 0.5, "bomb_peak_mb": 300.0}


# ------------------------------------------------------------------ corpora
def record_corpus(folder: Path, n: int) -> tuple[Path, Path]:
    """``n`` one-record files (many/) and one file of the same records (one/)."""
    many, one = folder / f"records-{n}" / "many", folder / f"records-{n}" / "one"
    if not (one / "all.jsonl").exists():
        shutil.rmtree(folder / f"records-{n}", ignore_errors=True)
        many.mkdir(parents=True)
        one.mkdir(parents=True)
        rng = random.Random(24)
        lines = []
        for i in range(n):
            rec = {"material_id": f"mp-{i}", "formula_pretty": rng.choice(["Fe2O3", "LiCoO2", "SiO2", "GaAs"]),
                   "band_gap": round(rng.uniform(0, 6), 4), "nsites": rng.randint(1, 40)}
            line = json.dumps(rec) + "\n"
            (many / f"r{i:06d}.jsonl").write_text(line)
            lines.append(line)
        (one / "all.jsonl").write_text("".join(lines))
    return many, one


def _proteins() -> list[str]:
    seqs, cur = [], []
    for path in sorted(INPUTS.glob("*.aa")) + [INPUTS / "prot_test.lib"]:
        for line in path.read_text().splitlines():
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                cur = []
            elif line.strip():
                cur.append("".join(ch for ch in line.strip() if ch.isalpha()))
    if cur:
        seqs.append("".join(cur))
    return [s for s in seqs if len(s) >= 80]


def pasta_corpus(folder: Path, n: int) -> tuple[Path, Path] | None:
    """``n`` one-query ssearch36 -m 10 outputs (many/) and their concatenation (one/); None without fasta3."""
    many, one = folder / f"pasta-{n}" / "many", folder / f"pasta-{n}" / "one"
    if (one / "all.m10").exists():
        return many, one
    if shutil.which("ssearch36") is None:
        return None
    shutil.rmtree(folder / f"pasta-{n}", ignore_errors=True)
    many.mkdir(parents=True)
    one.mkdir(parents=True)
    rng = random.Random(2024)
    proteins = _proteins()
    lib = INPUTS / "prot_test.lib"
    work = Path(tempfile.mkdtemp())
    shutil.copy(lib, work / lib.name)  # relative paths: the recorded commands do not depend on the machine
    try:
        with (one / "all.m10").open("wb") as everything:
            for i in range(n):
                source = rng.choice(proteins)
                start = rng.randrange(0, len(source) - 60)
                frag = list(source[start:start + rng.randint(60, 120)])
                for _ in range(len(frag) // 10):  # a few substitutions: each query its own
                    frag[rng.randrange(len(frag))] = rng.choice("ACDEFGHIKLMNPQRSTVWY")
                query = work / "q.aa"
                query.write_text(f">q{i:05d} fragment {i} of a sample protein\n{''.join(frag)}\n")
                out = subprocess.run(["ssearch36", "-q", "-m", "10", "-z", "3", "-T", "1", "-E", "10",
                                      query.name, lib.name], capture_output=True, check=True, cwd=work).stdout
                (many / f"q{i:05d}.m10").write_bytes(out)
                everything.write(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return many, one


def bomb(folder: Path, records: int) -> Path:
    path = folder / f"bomb-{records}.jsonl.gz"
    if not path.exists():
        with gzip.open(path, "wb", 9) as fh:
            fh.write(b'{"material_id":"mp-1","x":1}\n' * records)
    return path


# ------------------------------------------------------------------ measuring
def pair(server, client, many: Path, one: Path, rounds: int, workers: int | None, label: str) -> dict:
    """Interleaved loads of the many files and the one file into fresh databases."""
    walls: dict[str, list[float]] = {"many": [], "one": []}
    loads = {}
    for r in range(rounds):
        for side, path in (("one", one), ("many", many)):
            name = f"bsf_{label}_{side}"
            load = run_load(server, client, [str(path)], name, workers=workers)
            if load["exit_code"] != 0:
                raise SystemExit(f"{label}: the load of {side} failed ({load['exit_code']}): {load['error']}")
            walls[side].append(load["wall_seconds"])
            loads[side] = load
            client.drop_database(name)
        print(f"  {label} round {r + 1}: one {walls['one'][-1]:.2f} s, many {walls['many'][-1]:.2f} s", flush=True)
    med = {side: statistics.median(v) for side, v in walls.items()}
    n = loads["many"]["files"]["files_loaded"]
    return {"walls": walls, "median": med, "ratio": med["many"] / med["one"], "files": n,
            "documents": loads["many"]["documents_present"],
            "per_file_ms": (med["many"] - med["one"]) / n * 1000 if n else None,
            "one_stages": loads["one"]["stages"], "many_stages": loads["many"]["stages"]}


def rerun(server, client, folder: Path, n: int, rounds: int, workers: int | None) -> dict:
    many, _ = record_corpus(folder, n)
    lone = folder / "rerun-one"
    lone.mkdir(exist_ok=True)
    shutil.copy(next(many.iterdir()), lone / "only.jsonl")
    walls: dict[str, list[float]] = {"many": [], "one": []}
    for side, path in (("many", many), ("one", lone)):  # loaded once, then re-run
        first = run_load(server, client, [str(path)], f"bsf_rerun_{side}", workers=workers)
        if first["exit_code"] != 0:
            raise SystemExit(f"rerun: the first load of {side} failed: {first['error']}")
    for _ in range(rounds):
        for side, path in (("one", lone), ("many", many)):
            load = run_load(server, client, [str(path)], f"bsf_rerun_{side}", workers=workers, fresh=False)
            assert load["files"]["files_skipped"] >= 1 and load["files"]["files_loaded"] == 0, load["files"]
            walls[side].append(load["wall_seconds"])
    for side in walls:
        client.drop_database(f"bsf_rerun_{side}")
    med = {side: statistics.median(v) for side, v in walls.items()}
    return {"walls": walls, "median": med, "files": n, "ms_per_file": (med["many"] - med["one"]) / (n - 1) * 1000}


def bomb_rss(server, client, path: Path, workers: int | None) -> dict:
    out = {}
    for mode, extra in (("load", ()), ("dry_run", ("--dry-run",))):
        load = run_load(server, client, [str(path)], "bsf_bomb", workers=workers, extra=extra)
        out[mode] = {"exit_code": load["exit_code"], "wall_seconds": load["wall_seconds"],
                     "peak_mb_max_process": load["peak_rss_mb_max_process"],
                     "processes": load["peak_rss_mb_per_process"][:4], "files": load["files"]}
        client.drop_database("bsf_bomb")
    out["peak_mb"] = max(out[m]["peak_mb_max_process"] or 0 for m in ("load", "dry_run"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rerun-files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="sci-ingest load --workers (default: its own)")
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
                    / "small-files")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
                    / "bench_small_files.json")
    ap.add_argument("--quick", action="store_true", help="500 files, 2,000 re-run, a 200,000-record bomb, 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.files, args.rerun_files, args.rounds = 500, 2000, 1
    args.corpus.mkdir(parents=True, exist_ok=True)
    print(f"corpus in {args.corpus} ...", flush=True)
    rec_many, rec_one = record_corpus(args.corpus, args.files)
    pasta = pasta_corpus(args.corpus, args.files)
    bomb_path = bomb(args.corpus, 200_000 if args.quick else 1_000_000)
    home = Path(tempfile.mkdtemp(prefix="bsf-home-"))
    server = Server(home)
    server.start()
    client = pymongo.MongoClient(server.uri)
    result = {"machine": {"host": platform.node(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
              "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "args": {
                  k: str(v) for k, v in vars(args).items()}}
    try:
        print(f"(a) {args.files} one-record .jsonl files against one file of the same records", flush=True)
        result["records"] = pair(server, client, rec_many, rec_one, args.rounds, args.workers, "records")
        if pasta is None:
            print("(b) skipped: ssearch36 not found (apt-get install fasta3)", flush=True)
            result["pasta"] = None
        else:
            print(f"(b) {args.files} one-query ssearch36 -m 10 files against their concatenation", flush=True)
            result["pasta"] = pair(server, client, *pasta, args.rounds, args.workers, "pasta")
        print(f"(c) a re-run of {args.rerun_files} unchanged files", flush=True)
        result["rerun"] = rerun(server, client, args.corpus, args.rerun_files, args.rounds, args.workers)
        print(f"(d) the gzip bomb {bomb_path.name} ({bomb_path.stat().st_size:,} bytes)", flush=True)
        result["bomb"] = bomb_rss(server, client, bomb_path, args.workers)
    finally:
        client.close()
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    result["machine"]["load_avg_end"] = os.getloadavg()
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nwritten: {args.out}")
    return 0


def report(result: dict) -> None:
    rows = []
    a, b, c, d = result["records"], result["pasta"], result["rerun"], result["bomb"]
    rows.append(("(a) records: many / one", f"{a['ratio']:.2f}x ({a['median']['many']:.2f} s / "
                 f"{a['median']['one']:.2f} s)", "<= 3x", a["ratio"] <= TARGETS["records_ratio"]))
    if b:
        rows.append(("(b) -m 10: many / one", f"{b['ratio']:.2f}x ({b['median']['many']:.2f} s / "
                     f"{b['median']['one']:.2f} s)", "<= 3x", b["ratio"] <= TARGETS["pasta_ratio"]))
    rows.append(("(c) re-run, per file beyond one", f"{c['ms_per_file']:.3f} ms ({c['files']} files: "
                 f"{c['median']['many']:.2f} s vs {c['median']['one']:.2f} s)", "< 0.5 ms",
                 c["ms_per_file"] < TARGETS["rerun_ms_per_file"]))
    rows.append(("(d) gzip bomb, peak RSS a process", f"{d['peak_mb']:.0f} MB (load {d['load']['wall_seconds']:.1f} s)",
                 "< 300 MB", d["peak_mb"] < TARGETS["bomb_peak_mb"]))
    print(f"\ncommit {result['commit']}, {result['machine']['host']}, {result['machine']['cpus']} CPUs, load average "
          f"{result['machine']['load_avg_start'][0]:.2f} -> {result['machine']['load_avg_end'][0]:.2f}")
    width = max(len(r[0]) for r in rows)
    for name, figure, target, met in rows:
        print(f"{name:<{width}}  {figure:<48} target {target:<9} {'met' if met else 'NOT MET'}")
    for label, side in (("(a)", a), ("(b)", b)):
        if side and side["per_file_ms"] is not None:
            hours = side["per_file_ms"] / 1000 * STUDY_FILES / 3600
            print(f"{label} per file beyond the one file: {side['per_file_ms']:.2f} ms; "
                  f"1.1 million files: {hours:.1f} h of bookkeeping on this machine")


if __name__ == "__main__":
    sys.exit(main())
