"""One ``-m 10`` query block of hundreds of thousands of hits, in bounded memory, through the CLI.

The block is made from a real small output (``samples/pasta/ssearch36_table_only.m10``: its first
query's alignments and table-only rows repeated under new ids): 5,000 alignments and 300,000 more
rows of the best-scores table, 30 MB.  Before its hits were spilled (``ingest/parsers/pasta/spool.py``)
``sci-ingest parse`` held the whole block (about 340 MB at its peak here) and a loader more (about
500 MB); the promise is 300 MB a process whatever one block holds.  Each command runs as a user runs
it (a subprocess; the load with ``--workers 1`` and a home of its own) under a wrapper that reports
the largest resident set of its descendants (``getrusage``).  A smaller block (8,000 hits: still past
the bound of 4,096) is loaded for real, and the database then holds exactly the documents the
block's hits held in memory make.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.documents import search_documents
from ingest.parsers.pasta import parse_dicts

BIN = Path(sys.executable).parent / "sci-ingest"
REAL = Path(__file__).resolve().parent.parent / "samples" / "pasta" / "ssearch36_table_only.m10"
LIMIT_MB = 300
ALIGNED, TABLE_ONLY = 5_000, 300_000
# argv: the file for the command's stdout, then the command; prints its exit code, the peak RSS (KB)
# of the largest descendant, then its stderr
PEAK = ("import resource, subprocess, sys; out = open(sys.argv[1], 'wb'); "
        "p = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, text=True); "
        "print(p.returncode); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.stdout.write(p.stderr)")


def big_block(real: bytes, aligned: int, table_only: int) -> bytes:
    """The first query block of ``real`` grown to ``aligned`` alignments (its own, repeated) and
    ``table_only`` more rows of its best-scores table (its rows after the aligned ones, repeated),
    each under a new id (``_N`` appended to the first word of its ``>>`` line and row), in one run."""
    head, sep, rest = real.partition(b"The best scores are:")
    title, _, rest = rest.partition(b"\n")
    rows_text, _, rest = rest.partition(b"\n\n")
    rows = rows_text.split(b"\n")
    summary = rest.index(b">>>")  # the query's summary line, then its parameters
    first = rest.index(b"\n>>", summary + 3) + 1
    end = rest.index(b"\n>>><<<", first) + 1
    blocks = [b">>" + b + b"\n" for b in rest[first + 2 : end - 1].split(b"\n>>")]
    n_al = len(blocks)
    extra = rows[n_al:]
    out = [head, sep, title, b"\n"]
    out += [rows[j % n_al].replace(b" ", b"_%d " % j, 1) + b"\n" for j in range(aligned)]
    out += [extra[j % len(extra)].replace(b" ", b"_t%d " % j, 1) + b"\n" for j in range(table_only)]
    out += [b"\n", rest[:first]]
    out += [blocks[j % n_al].replace(b" ", b"_%d " % j, 1) for j in range(aligned)]
    out.append(b">>><<<\n>>>///\n")
    return b"".join(out)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.m10"
    path.write_bytes(big_block(REAL.read_bytes(), ALIGNED, TABLE_ONLY))
    return path


@pytest.fixture()
def run(mongo_uri, tmp_path):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*args, stdout: Path):
        """(exit code, peak RSS in MB of the command, its stderr); its stdout goes to ``stdout``."""
        out = subprocess.run([sys.executable, "-c", PEAK, str(stdout), str(BIN), *map(str, args)], env=env,
                             capture_output=True, text=True, timeout=600)
        code, peak_kb, err = out.stdout.split("\n", 2)
        return int(code), int(peak_kb) / 1024, err + out.stderr

    return run


def _count(path: Path, *needles: bytes) -> list[int]:
    """How many times each of ``needles`` occurs in the file, read 1 MiB at a time (a line here is 90 MB)."""
    counts, tail = [0] * len(needles), b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            data = tail + chunk
            for i, needle in enumerate(needles):
                counts[i] += data.count(needle) - tail.count(needle)
            tail = data[-64:]
    return counts


def test_parse_writes_a_block_of_300000_hits_in_bounded_memory(big, run, tmp_path):
    out = tmp_path / "out.jsonl"
    code, peak, err = run("parse", big, stdout=out)
    assert code == 0, err
    assert peak < LIMIT_MB, f"sci-ingest parse: {peak:.0f} MB"
    lines, hits, table_only, query = _count(out, b"\n", b'"hit_id":', b'"aligned":false', b'"query_id":"GTT1_DROME"')
    assert (lines, query) == (1, 1)  # one query, one JSON line
    assert (hits, table_only) == (ALIGNED + TABLE_ONLY, TABLE_ONLY)
    with open(out, "rb") as fh:  # the line ends as a query's does: its last hit, the last table row
        fh.seek(-300, os.SEEK_END)
        end = fh.read()
    last = end[end.rindex(b'{"hit_id":'):]
    assert last.startswith(b'{"hit_id":"K1HUAG_t%d",' % (TABLE_ONLY - 1)) and last.endswith(b"}]}]}\n")
    assert b'"rank":%d,"aligned":false,' % (ALIGNED + TABLE_ONLY) in last


def test_a_dry_run_load_builds_the_documents_of_the_block_in_bounded_memory(big, run, tmp_path):
    code, peak, err = run("load", "--json", "-q", "--workers", "1", "--dry-run", big, stdout=tmp_path / "report.json")
    assert code == 0, err
    assert peak < LIMIT_MB, f"sci-ingest load --dry-run: {peak:.0f} MB"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["files"]["files_loaded"] == 1
    stages = {s["stage"]: s for s in report["stages"]}
    assert stages["parse"]["records_out"] == 1 + ALIGNED + TABLE_ONLY  # the search and its hits


def test_a_loaded_block_past_the_bound_is_what_the_held_block_makes(run, db, tmp_path):
    """8,000 hits (their chunks spilled) loaded with --workers 1: the search document and every hit
    document equal those made from the block's hits held in memory (the loader's result before)."""
    path = tmp_path / "medium.m10"
    data = big_block(REAL.read_bytes(), 5_000, 3_000)
    path.write_bytes(data)
    code, peak, err = run("load", "--json", "-q", "--workers", "1", "--db", db.name, path,
                          stdout=tmp_path / "report.json")
    assert code == 0, err
    assert peak < LIMIT_MB, f"sci-ingest load: {peak:.0f} MB"
    (query,) = parse_dicts(io.BytesIO(data), str(path), spill=None)
    stored = db.searches.find_one()
    search, hits = search_documents(query, sha256=hashlib.sha256(data).hexdigest(), path=stored["source"]["path"],
                                    query_index=1)
    assert stored == search and stored["n_hits"] == 8_000
    loaded = {h["_id"]: h for h in db.hits.find()}
    assert len(loaded) == len(hits) == 8_000
    assert all(loaded[h["_id"]] == h for h in hits)
    # and `sci-ingest parse` writes the same query as the held block
    out = tmp_path / "medium.jsonl"
    assert run("parse", path, stdout=out)[0] == 0
    assert json.loads(out.read_bytes()) == query
