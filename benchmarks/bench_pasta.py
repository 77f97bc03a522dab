"""Benchmark the PASTA (-m 10) parser against Biopython's ``fasta-m10`` parser.

    .venv/bin/python benchmarks/bench_pasta.py [FILE ...] [--repeat N] [--no-bio]
        [--large FILE | --no-large] [--commands N | --no-commands]

Without FILE it parses ``${TMPDIR:-/tmp}/sci-ingest-bench/large_ssearch36.m10`` (one
real ssearch36 protein run, ~24 MB) and ``large_ssearch36_dna.m10`` (one real ssearch36
DNA run: 900 RNA-fragment-like queries against genes with ``gi|NNN|ref|NM_...|`` ids,
36,000 alignments, 43 MB), building them first with ``benchmarks/make_large_pasta.sh``
when they are missing.  Three parts:

1. **Parser** (each FILE): ours with sequences (``parse``: Query objects), ours without
   (``--no-sequences``), ours as dicts (``parse_dicts``: what the CLI and the loader
   use) and Biopython, each in its own subprocess, ``--repeat`` times (default 5),
   interleaved so that a change of machine load hits all of them.  Each worker times only the
   parsing loop (imports done before): CPU time from ``resource.getrusage``
   (user + system) and wall time.  Printed: medians of CPU and wall time, hits/s and
   MB/s from the medians, peak RSS, and the speed ratio ours/Biopython in hits/s -
   as the ratio of the medians and as the median of the per-round ratios (both on
   CPU time, which the load of other processes disturbs less than wall time).
2. **Peak RSS on a large input** (``--large``, default: a >= 200 MB concatenation of
   the default file, ``large_ssearch36_200mb.m10``, built when missing): ours only
   (Biopython takes minutes there); the parser streams, so peak RSS stays flat.
3. **Whole commands** (``--commands N`` rounds, default 5, each FILE): the CLI
   ``sci-ingest parse FILE > out.jsonl`` (and ``--no-sequences``) against Python
   one-liners running Biopython on the same file - one that only parses (the
   cheapest Biopython command there is) and one that writes comparable JSON lines.
   Every command is a fresh process measured from the outside (``os.wait4``: its CPU
   time and peak RSS, interpreter start-up and imports included).  Ratios: of the
   medians, and the median (and range) of each round's pair.

Biopython drops the hits shown only in the best-scores table, so hits are counted
like it: aligned hits only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "sci-ingest-bench"
DEFAULT_FILE = DEFAULT_DIR / "large_ssearch36.m10"
DEFAULT_DNA = DEFAULT_DIR / "large_ssearch36_dna.m10"
LARGE_MB = 200
DEFAULT_LARGE = DEFAULT_DIR / f"large_ssearch36_{LARGE_MB}mb.m10"
CLI = ROOT / ".venv" / "bin" / "sci-ingest"
# the project's targets for the whole `sci-ingest parse` command against Biopython's parse-only one-liner
TARGET_SEQUENCES = 9
TARGET_NO_SEQUENCES = 11

# the Biopython commands of part 3 (argv[1] is the file)
BIO_COUNT = (
    "import sys,warnings;from Bio import SearchIO;warnings.simplefilter('ignore');"
    "print(sum(len(q) for q in SearchIO.parse(sys.argv[1],'fasta-m10')))"
)
BIO_JSON = (
    "import sys,json,warnings;from Bio import SearchIO;warnings.simplefilter('ignore');g=getattr\n"
    "for q in SearchIO.parse(sys.argv[1],'fasta-m10'):"
    "sys.stdout.write(json.dumps({'query_id':q.id,'query_description':q.description,'query_length':q.seq_len,"
    "'program':q.program,'version':q.version,'hits':[{'hit_id':h.id,'hit_description':h.description,"
    "'hit_length':h.seq_len,'hsps':[{'score':g(x,'sw_score',None),'opt_score':g(x,'opt_score',None),"
    "'initn_score':g(x,'initn_score',None),'init1_score':g(x,'init1_score',None),'z_score':g(x,'z_score',None),"
    "'bits':g(x,'bitscore',None),'evalue':g(x,'evalue',None),'identity':g(x,'ident_pct',None),"
    "'similarity':g(x,'pos_pct',None),'overlap':x.aln_span,'query_start':x.query_start+1,"
    "'query_end':x.query_end,'hit_start':x.hit_start+1,'hit_end':x.hit_end,'query_strand':x.query_strand,"
    "'hit_strand':x.hit_strand,'query_seq':str(x.query.seq),'hit_seq':str(x.hit.seq),"
    "'consensus':x.aln_annotation.get('similarity')} for x in h.hsps]} for h in q]})+'\\n')"
)


# --------------------------------------------------------------------------- worker


def _cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _worker(kind: str, path: str) -> None:
    """Parse ``path`` with ``kind`` and print one JSON line of measurements."""
    import resource

    queries = hits = hsps = 0
    # imports happen before the clock starts, for both parsers
    if kind == "ours-dicts":  # what the CLI and the loader use: one dict per query
        sys.path.insert(0, str(ROOT))
        from ingest.parsers.pasta import parse_dicts

        t0, c0 = time.perf_counter(), _cpu()
        with _opener(path)() as fh:
            for d in parse_dicts(fh, path):
                queries += 1
                for h in d["hits"]:
                    if h["aligned"]:
                        hits += 1
                        hsps += len(h["hsps"])
    elif kind.startswith("ours"):
        sys.path.insert(0, str(ROOT))
        from ingest.parsers.pasta import parse

        t0, c0 = time.perf_counter(), _cpu()
        with _opener(path)() as fh:
            for q in parse(fh, path, sequences=(kind == "ours")):
                queries += 1
                for h in q.hits:
                    if h.aligned:  # Biopython drops table-only hits: count like it
                        hits += 1
                        hsps += len(h.hsps)
    elif kind == "biopython":
        import warnings

        from Bio import SearchIO

        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), _cpu()
        with _opener(path, text=True)() as fh:
            for qr in SearchIO.parse(fh, "fasta-m10"):
                queries += 1
                hits += len(qr)
                hsps += sum(len(h.hsps) for h in qr)
    else:
        raise SystemExit(f"unknown parser {kind!r}")
    seconds = time.perf_counter() - t0
    cpu = _cpu() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"queries": queries, "hits": hits, "hsps": hsps, "seconds": seconds, "cpu": cpu, "rss_mb": rss_mb}))


def _opener(path: str, text: bool = False):
    import gzip

    if path.endswith(".gz"):
        return lambda: gzip.open(path, "rt" if text else "rb")
    return lambda: open(path, "r" if text else "rb")


# --------------------------------------------------------------------------- parent


def _run_worker(kind: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, str(path)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def bench_parsers(path: Path, kinds: list[str], repeat: int) -> None:
    mb = path.stat().st_size / 1e6
    print(f"{path} ({mb:.1f} MB): parsers, {repeat} interleaved rounds, medians")
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    for _ in range(repeat):  # interleaved, so load changes hit every parser
        for kind in kinds:
            runs[kind].append(_run_worker(kind, path))
    for kind in kinds:
        rs = runs[kind]
        cpu, wall = _median(rs, "cpu"), _median(rs, "seconds")
        r = rs[0]
        print(
            f"  {kind:<11} {r['queries']:>6} queries {r['hits']:>8} hits {r['hsps']:>8} hsps  "
            f"CPU {cpu:6.2f} s (min {min(x['cpu'] for x in rs):.2f})  wall {wall:6.2f} s  "
            f"{r['hits'] / cpu:>8.0f} hits/s  {mb / cpu:6.1f} MB/s (CPU)  "
            f"peak RSS {max(x['rss_mb'] for x in rs):6.1f} MB"
        )
    if "biopython" in runs:
        bio = runs["biopython"]
        for kind in (k for k in kinds if k != "biopython"):
            rs = runs[kind]
            if bio[0]["hits"] != rs[0]["hits"]:
                print(f"  note: {kind} counted {rs[0]['hits']} hits, Biopython {bio[0]['hits']}")
            rate = lambda r: r["hits"] / r["cpu"]  # noqa: E731
            med = (rs[0]["hits"] / _median(rs, "cpu")) / (bio[0]["hits"] / _median(bio, "cpu"))
            per_round = sorted(rate(a) / rate(b) for a, b in zip(rs, bio))
            wall = (rs[0]["hits"] / _median(rs, "seconds")) / (bio[0]["hits"] / _median(bio, "seconds"))
            print(
                f"  speed ratio {kind}/biopython (hits/s): {med:.1f}x CPU (median of rounds "
                f"{statistics.median(per_round):.1f}x, range {per_round[0]:.1f}-{per_round[-1]:.1f}x), "
                f"{wall:.1f}x wall"
            )


def _measure_command(argv: list[str], out_path: Path) -> dict:
    """Run ``argv`` with stdout to ``out_path``; its wall time, CPU time, peak RSS."""
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} ... exited {proc.returncode}")
    return {"seconds": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}


def bench_commands(path: Path, repeat: int, bio: bool) -> dict[str, float]:
    """Part 3 for ``path``; returns the median of the per-round CPU ratios of each
    sci-ingest command to the Biopython parse-only command."""
    mb = path.stat().st_size / 1e6
    # measure the CLI as installed: `make install` (like pip) byte-compiles the project;
    # sources edited since would be recompiled in every process (PYTHONDONTWRITEBYTECODE)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "ingest")], check=True)
    out_dir = DEFAULT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    commands = {
        "sci-ingest parse": [str(CLI), "parse", str(path)],
        "sci-ingest parse --no-sequences": [str(CLI), "parse", "--no-sequences", str(path)],
    }
    if bio:
        commands["biopython one-liner (parse only)"] = [sys.executable, "-c", BIO_COUNT, str(path)]
        commands["biopython one-liner (JSON lines)"] = [sys.executable, "-c", BIO_JSON, str(path)]
    print(f"{path} ({mb:.1f} MB): whole commands, stdout to a file, {repeat} interleaved rounds, medians")
    runs: dict[str, list[dict]] = {k: [] for k in commands}
    summary: dict[str, float] = {}
    for _ in range(repeat):
        for name, argv in commands.items():
            runs[name].append(_measure_command(argv, out_dir / "bench_out.jsonl"))
    for name, rs in runs.items():
        print(
            f"  {name:<34} CPU {_median(rs, 'cpu'):6.2f} s  wall {_median(rs, 'seconds'):6.2f} s  "
            f"{mb / _median(rs, 'cpu'):6.1f} MB/s (CPU)  peak RSS {max(r['rss_mb'] for r in rs):6.1f} MB"
        )
    for name in (n for n in commands if n.startswith("sci-ingest")):
        for other in (n for n in commands if n.startswith("biopython")):
            ratio_cpu = _median(runs[other], "cpu") / _median(runs[name], "cpu")
            ratio_wall = _median(runs[other], "seconds") / _median(runs[name], "seconds")
            # each round's pair of runs, close in time: less disturbed by the machine's load drifting
            per_round = sorted(b["cpu"] / a["cpu"] for a, b in zip(runs[name], runs[other]))
            if "parse only" in other:
                summary[name] = statistics.median(per_round)
            print(
                f"  {name} vs {other}: {ratio_cpu:.1f}x CPU (median of rounds {statistics.median(per_round):.1f}x, "
                f"range {per_round[0]:.1f}-{per_round[-1]:.1f}x), {ratio_wall:.1f}x wall"
            )
    (out_dir / "bench_out.jsonl").unlink(missing_ok=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--no-bio", action="store_true", help="skip Biopython")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of the parser comparison (default 5)")
    ap.add_argument("--large", type=Path, help=f"input for the peak-RSS check (default: >= {LARGE_MB} MB, built)")
    ap.add_argument("--no-large", action="store_true", help="skip the peak-RSS check on a large input")
    ap.add_argument("--commands", type=int, default=5, help="rounds of the whole-command comparison (default 5)")
    ap.add_argument("--no-commands", action="store_true", help="skip the whole-command comparison")
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    files = args.files or [DEFAULT_FILE, DEFAULT_DNA]
    if not args.files and not (DEFAULT_FILE.exists() and DEFAULT_DNA.exists()) \
            or not args.no_large and not args.large and not DEFAULT_LARGE.exists():
        make = ["bash", str(ROOT / "benchmarks" / "make_large_pasta.sh"), str(DEFAULT_DIR)]
        subprocess.run(make + ([] if args.no_large or args.large else [str(LARGE_MB)]), check=True)
    kinds = ["ours", "ours-noseq", "ours-dicts"] + ([] if args.no_bio else ["biopython"])
    for path in files:
        bench_parsers(path, kinds, args.repeat)
    if not args.no_large:
        bench_parsers(args.large or DEFAULT_LARGE, ["ours", "ours-noseq"], 1)
    if not args.no_commands:
        ratios = {}
        for path in files:
            for name, ratio in bench_commands(path, args.commands, not args.no_bio).items():
                ratios[f"{path.name}: {name}"] = ratio
        if ratios:
            print("whole commands vs Biopython's parse-only one-liner (median of the rounds' CPU ratios; targets "
                  f"{TARGET_SEQUENCES:g}x with sequences, {TARGET_NO_SEQUENCES:g}x without):")
            for name, ratio in ratios.items():
                target = TARGET_NO_SEQUENCES if name.endswith("--no-sequences") else TARGET_SEQUENCES
                print(f"  {name:<58} {ratio:5.1f}x  {'meets' if ratio >= target else 'BELOW'} {target:g}x")
            print(f"  lowest {min(ratios.values()):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
