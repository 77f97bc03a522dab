"""A command's fixed costs: `sci-ingest analyze --json` on the bundled samples, the time outside
its analysis stages, in its own process and forked by a kept command process.

    .venv/bin/python benchmarks/bench_fixed_costs.py [--runs 3] [--home DIR]

In a home of its own (a new one by default, the samples loaded into it once, cold), it runs
the command ``--runs`` times with SCI_INGEST_KEEP=0 and ``--runs`` times served by a kept
process (started by one more cold command, then waited for), interleaved, and prints per run:
the wall time (this script's clock around the subprocess), the sum of the ``analyze.*`` rows,
the time outside them (wall minus that sum), and the sum of all the rows over the wall time.
The targets (docs/pipeline.md, issue 29): at most 0.5 s outside the analyses when a kept
process serves the command, and every run's rows within 5 % of its wall time.  Exits 1 when a
target is missed.  The kept process and the home's server are stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent / "sci-ingest"
OUTSIDE_TARGET_S = 0.5
ROWS_WITHIN = 0.05


def run(env: dict, *args: str) -> tuple[float, dict]:
    began = time.time()
    proc = subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=900)
    wall = time.time() - began
    if proc.returncode != 0:
        sys.exit(f"error: sci-ingest {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return wall, json.loads(proc.stdout)


def measure(env: dict) -> dict:
    wall, data = run(env, "analyze", "--json")
    stages = data["stages"]
    analyses = sum(s["seconds"] for s in stages if s["stage"].startswith("analyze."))
    process = next((s.get("detail", {}).get("process") for s in stages if s["stage"] == "start-up"), "?")
    return {"process": process, "wall": wall, "analyses": analyses, "outside": wall - analyses,
            "rows_over_wall": sum(s["seconds"] for s in stages) / wall,
            "fixed": {s["stage"]: s["seconds"] for s in stages if not s["stage"].startswith("analyze.")}}


def wait_for_kept(tmp: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if list((tmp / f"sci-ingest-{os.getuid()}").glob("*.sock")):
            return
        time.sleep(0.2)
    sys.exit(f"error: no kept process listened within {timeout_s:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--home", help="a sci-ingest home with the samples loaded (default: a new one)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))  # short: a Unix socket's path takes 107 bytes
    home = Path(args.home) if args.home else tmp / "home"
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "TMPDIR": str(tmp), "SCI_INGEST_KEEP": "1"}
    for name in ("DASK_SCHEDULER_ADDRESS", "MONGODB_URI", "SCI_INGEST_DB"):
        env.pop(name, None)
    cold = {**env, "SCI_INGEST_KEEP": "0"}
    try:
        if not args.home:
            print(f"loading the samples into {home} ...", flush=True)
            run(cold, "load", str(REPO / "samples"), "--json")
        run(env, "timings", "--json")  # a cold command: it starts a kept process as it begins
        wait_for_kept(tmp)
        rows = []
        for _ in range(args.runs):
            rows.append(measure(cold))
            rows.append(measure(env))
    finally:
        for p in psutil.process_iter(["cmdline"]):
            if any(str(tmp) in part for part in p.info["cmdline"] or ()) and "kept_process" in " ".join(
                    p.info["cmdline"]):
                p.terminate()
        if not args.home:
            subprocess.run([str(BIN), "server", "stop"], env=cold, capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "?"
    print(f"\n`sci-ingest analyze --json` on the bundled samples, {args.runs} runs each, interleaved; "
          f"commit {commit}, {os.uname().nodename}, {os.cpu_count()} cores\n")
    print(f"{'process':<26} {'wall s':>7} {'analyses s':>10} {'outside s':>9} {'rows/wall':>9}  fixed rows (s)")
    for r in rows:
        fixed = ", ".join(f"{k} {v:.3f}" for k, v in r["fixed"].items())
        print(f"{r['process']:<26} {r['wall']:>7.2f} {r['analyses']:>10.2f} {r['outside']:>9.3f} "
              f"{r['rows_over_wall']:>9.3f}  {fixed}")
    kept = [r["outside"] for r in rows if r["process"] == "forked by a kept process"]
    own = [r["outside"] for r in rows if r["process"] == "its own"]
    ok = bool(kept) and len(kept) == args.runs and max(kept) <= OUTSIDE_TARGET_S
    ok_rows = all(abs(1 - r["rows_over_wall"]) <= ROWS_WITHIN for r in rows)
    print(f"\noutside the analyses: kept process median {statistics.median(kept) if kept else float('nan'):.3f} s, "
          f"max {max(kept) if kept else float('nan'):.3f} s (target <= {OUTSIDE_TARGET_S} s): "
          f"{'met' if ok else 'MISSED'}; its own process median {statistics.median(own):.3f} s")
    print(f"rows within {ROWS_WITHIN:.0%} of the wall time in every run: {'met' if ok_rows else 'MISSED'}")
    return 0 if ok and ok_rows else 1


if __name__ == "__main__":
    sys.exit(main())
