"""The materials reader on the same records in its three layouts: time and peak memory.

    python benchmarks/bench_json_layouts.py [--mb 200] [--rounds 3] [--dir DIR]

Writes the same Materials-Project-style records (deterministic, ``random.Random(7)``)
as a JSON array, as JSON Lines and as concatenated objects with no newline at all
(one line of ``--mb`` megabytes), then reads each file with
``ingest.parsers.materials.read_records`` in a fresh process per round (so peak RSS
is the reader's own) and prints the median seconds, MB/s and peak RSS per layout,
and each layout's time against the array's.  Target (issue 9): every layout within
1.5x of the array, in constant memory (peak RSS independent of the file size).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Peak RSS from /proc (VmHWM: reset by exec), not ru_maxrss, which a child inherits from its parent.
READ = """
import sys, time
from ingest.parsers.materials import read_records
started = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    n = sum(1 for _ in read_records(fh, sys.argv[1]))
seconds = time.perf_counter() - started
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(n, seconds, int(hwm.split()[1]) / 1024)
"""


def records(target_bytes: int):
    rng = random.Random(7)
    size, i = 0, 0
    while size < target_bytes:
        text = json.dumps({
            "material_id": f"mp-{i}", "formula_pretty": "Fe2O3", "elements": ["Fe", "O"], "nsites": 10,
            "formation_energy_per_atom": rng.uniform(-4, 0), "band_gap": rng.uniform(0, 6),
            "structure": {"sites": [{"xyz": [rng.random() for _ in range(3)], "label": rng.choice("FeO")}
                                    for _ in range(10)]}})
        size += len(text) + 1
        i += 1
        yield text


def write_layouts(folder: Path, mb: float) -> dict[str, Path]:
    texts = list(records(int(mb * 1e6)))
    paths = {"array": folder / "array.json", "lines": folder / "lines.jsonl",
             "concatenated": folder / "concatenated.json"}
    paths["array"].write_text("[" + ",\n".join(texts) + "]\n")
    paths["lines"].write_text("\n".join(texts) + "\n")
    paths["concatenated"].write_text("".join(texts))
    return paths


def measure(path: Path, rounds: int) -> dict:
    runs = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True)
        n, seconds, rss = out.stdout.split()
        runs.append((int(n), float(seconds), float(rss)))
    seconds = statistics.median(r[1] for r in runs)
    return {"records": runs[0][0], "seconds": seconds, "mb_per_s": path.stat().st_size / 1e6 / seconds,
            "peak_rss_mb": max(r[2] for r in runs), "mb": path.stat().st_size / 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200, help="size of each file (default 200 MB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        paths = write_layouts(Path(tmp), args.mb)
        results = {name: measure(path, args.rounds) for name, path in paths.items()}
    base = results["array"]["seconds"]
    print(f"{'layout':<13} {'MB':>7} {'records':>9} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12} {'/ array':>8}")
    worst = 0.0
    for name, r in results.items():
        ratio = r["seconds"] / base
        worst = max(worst, ratio)
        print(f"{name:<13} {r['mb']:>7.1f} {r['records']:>9,} {r['seconds']:>8.2f} {r['mb_per_s']:>7.1f} "
              f"{r['peak_rss_mb']:>12.1f} {ratio:>8.2f}")
    counts = {r["records"] for r in results.values()}
    print(f"same records in every layout: {len(counts) == 1}; slowest layout / array: {worst:.2f} "
          f"(target <= 1.5: {'met' if worst <= 1.5 else 'NOT met'})")
    return 0 if len(counts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
