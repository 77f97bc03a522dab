"""Memory bounded by the work, not by the compression ratio: gzip and JSON bombs.

Each test runs ``sci-ingest load`` as a user does (a subprocess, against the session's
server, ``--workers 1`` so the whole load is that one process) under a small wrapper
that reports the largest resident set of its descendants (``getrusage``), and checks
it stays under 300 MB whatever the file inflates to.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "sci-ingest"
LIMIT_MB = 300
PEAK = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(p.returncode); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.stderr.write(p.stderr); print(p.stdout)")


@pytest.fixture()
def load(mongo_uri, db, tmp_path):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*args):
        """(exit code, peak RSS in MB of the command, its JSON report, stderr)."""
        argv = [str(BIN), "load", "--json", "-q", "--workers", "1", "--db", db.name, *map(str, args)]
        out = subprocess.run([sys.executable, "-c", PEAK, *argv], env=env, capture_output=True, text=True,
                             timeout=600)
        code, peak_kb, stdout = out.stdout.split("\n", 2)
        return int(code), int(peak_kb) / 1024, json.loads(stdout), out.stderr

    return run


def test_a_gzip_of_tiny_records_loads_in_bounded_memory(db, tmp_path, load):
    """The issue's bomb: one short record a million times (70 KB); a dry run held every document
    at once (904 MB).  Here 100,000 (a tenth of the time, the same bound: documents are kept only
    up to 20,000 or 8 MiB of decompressed input)."""
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", 9) as fh:
        fh.write(b'{"material_id":"mp-1","x":1}\n' * 100_000)
    assert bomb.stat().st_size < 10_000
    code, peak, report, err = load("--dry-run", bomb)
    assert code == 0 and report["files"]["files_loaded"] == 1, err
    assert peak < LIMIT_MB, f"dry run: {peak:.0f} MB"
    code, peak, report, err = load(bomb)
    assert code == 0, err
    assert peak < LIMIT_MB, f"load: {peak:.0f} MB"
    assert db.materials.count_documents({}) == 1  # the same record, the later line kept
    assert db.ingest_files.find_one()["records"] == {"materials": 100_000}


def test_gigabytes_of_nothing_fail_early_and_small(tmp_path, load):
    """A 1 MB gzip of 1 GiB of blanks (JSON), and of a 1 GiB line (-m 10): each fails with its
    reason after a bounded read, never held whole."""
    blank, line = tmp_path / "blank.jsonl.gz", tmp_path / "line.m10.gz"
    for path, byte in ((blank, b" "), (line, b"A")):  # 1,024 gzip members of 1 MiB each
        path.write_bytes(gzip.compress(byte * (1 << 20), 9) * 1024)
    code, peak, report, err = load(blank, line)
    assert code == 2 and peak < LIMIT_MB, (peak, err)
    reasons = {Path(f["path"]).name: f["reason"] for f in report["failed"]}
    assert "nothing but whitespace in the first 16,777,216 bytes" in reasons["blank.jsonl.gz"]
    assert "line longer than 1048576 bytes" in reasons["line.m10.gz"]
