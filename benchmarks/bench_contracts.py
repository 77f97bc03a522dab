"""What the contracts at the door cost the loader: its checking pass with them and without.

    python benchmarks/bench_contracts.py [--rounds 7] [PATH ...]

Reads each file (default: the bundled samples, ``-m 10`` and materials) into memory once, then
times the loader's checking pass on it (``ingest.load.content.documents_of``: parse, build every
document, check it against its collection's contract) with the contracts
(:mod:`ingest.load.contracts`) and with a stand-in that checks nothing, in interleaved rounds, and
prints the fastest round of each (CPU seconds of this process), by kind of file.  No database: what a load writes is the same
either way (unless a value is set aside), so the difference is the contracts' own.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ingest.load.content as content  # noqa: E402 - the checkout's, whatever is installed
from ingest.config import SAMPLES_DIR  # noqa: E402
from ingest.load.contracts import CONTRACTS  # noqa: E402
from ingest.load.outcome import FileOutcome  # noqa: E402
from ingest.load.reading import memory_stream, read_small  # noqa: E402
from ingest.parsers import data_file_suffixes, detect_head  # noqa: E402


class _Nothing:
    """A contract that checks nothing."""

    def enforce(self, doc):
        return []

    def findings(self, doc):
        return []


def _files(paths: list[str]) -> list[Path]:
    suffixes = data_file_suffixes()
    found = []
    for given in map(Path, paths or [SAMPLES_DIR / "pasta", SAMPLES_DIR / "materials"]):
        found += [given] if given.is_file() else sorted(p for p in given.rglob("*") if p.name.endswith(suffixes))
    return found


def _pass(loaded: list, kind: str) -> tuple[float, int]:
    """Seconds and documents of one checking pass over the files of ``kind``."""
    seconds, documents = 0.0, 0
    for path, fmt, version, data in loaded:
        if fmt.kind != kind:
            continue
        outcome = FileOutcome(path=str(path), status="loading")
        started = time.process_time()  # CPU time: the machine may be shared
        docs = content.documents_of(memory_stream(data), version, fmt, outcome, 10**9)
        seconds += time.process_time() - started
        documents += len(docs)
    return seconds, documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="files or folders (default: the bundled samples)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    loaded = []
    for path in _files(args.paths):
        version, data = read_small(str(path.resolve()), path.stat().st_size)
        loaded.append((path, detect_head(path, memory_stream(data).read(4096)), version, data))
    nothing = {name: _Nothing() for name in CONTRACTS}
    for kind in ("search", "records"):
        best = {"with": float("inf"), "without": float("inf")}
        documents = 0
        for _ in range(args.rounds):
            for mode in best:
                content.CONTRACTS = CONTRACTS if mode == "with" else nothing
                seconds, documents = _pass(loaded, kind)
                best[mode] = min(best[mode], seconds)
        content.CONTRACTS = CONTRACTS
        if documents:
            print(f"{kind}: {documents:,} documents, checking pass {best['with']:.3f} s with the contracts, "
                  f"{best['without']:.3f} s without: {100 * (best['with'] / best['without'] - 1):+.1f} % "
                  f"({1e6 * (best['with'] - best['without']) / documents:.1f} µs a document)")


if __name__ == "__main__":
    main()
