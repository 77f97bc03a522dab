"""One rule for a loaded file that fails on a later load: its last good version stays.

docs/loading.md, "A file that fails": while a file fails, the records its last loaded version held
stay (and keep their place among the holders of a shared record) until the file loads again with
another content; the load says how many it kept ("N record(s) kept from the last good version of
failed files"), in its text and in ``--json``; validation counts them as held.  Every way a loaded
file can fail (bad bytes, empty, gone) keeps them the same.  Through the CLI, against the embedded
server.  (issue 42, item 7)
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pymongo
import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
M10 = REPO / "samples" / "pasta" / "fasta36_prot.m10"
MATERIALS = REPO / "samples" / "materials" / "materials.jsonl.gz"
DATA = ("searches", "hits", "materials", "ingest_versions")


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "SCI_INGEST_KEEP": "0"}
    for name in ("MONGODB_URI", "SCI_INGEST_DB", "DASK_SCHEDULER_ADDRESS"):
        env.pop(name, None)
    return subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=600)


def _load(home: Path, folder: Path) -> tuple[subprocess.CompletedProcess, dict]:
    proc = _cli(home, "load", "-q", "--json", "--workers", "1", str(folder))
    return proc, json.loads(proc.stdout)


def _contents(home: Path) -> dict:
    """Every data collection's documents, by _id (what analysts read)."""
    uri = json.loads((home / "server.json").read_text())["uri"]
    with pymongo.MongoClient(uri) as client:
        db = client.sci_ingest
        return {c: {str(d["_id"]): d for d in db[c].find()} for c in DATA}


def _materials(lines: list[str]) -> set[str]:
    return {json.loads(line)["material_id"] for line in lines}


@pytest.fixture()
def home(tmp_path):
    home = tmp_path / "home"
    started = _cli(home, "server", "start")  # one server for the test: its database read between commands
    assert started.returncode == 0, started.stderr
    yield home
    _cli(home, "server", "stop")


@pytest.fixture()
def inputs(tmp_path):
    """a.m10, a.jsonl (materials 0-9, newest) and b.jsonl (materials 5-14, older): 5 shared."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(M10, folder / "a.m10")
    with gzip.open(MATERIALS, "rt") as fh:
        lines = [line for line in fh if '"material_id"' in line[:20]][:15]
    (folder / "b.jsonl").write_text("".join(lines[5:15]))
    os.utime(folder / "b.jsonl", (1_600_000_000, 1_600_000_000))
    (folder / "a.jsonl").write_text("".join(lines[:10]))
    os.utime(folder / "a.jsonl", (1_700_000_000, 1_700_000_000))
    return folder, lines


def _break(folder: Path, how: str) -> None:
    if how == "bad":  # one file of bad bytes, one empty
        (folder / "a.m10").write_bytes(b"not a FASTA report\x00\n")
        (folder / "a.jsonl").write_bytes(b"")
    elif how == "bad the other way":
        (folder / "a.m10").write_bytes(b"")
        (folder / "a.jsonl").write_text('{"material_id": "mp-1"\n')
    else:  # gone: deleted after it was loaded
        for name in ("a.m10", "a.jsonl"):
            (folder / name).unlink()
        return
    for name in ("a.m10", "a.jsonl"):
        os.utime(folder / name, (1_800_000_000, 1_800_000_000))  # newer than every holder


def test_a_failed_reload_keeps_the_last_good_version(home, inputs):
    folder, lines = inputs
    proc, first = _load(home, folder)
    assert proc.returncode == 0, proc.stderr
    before = _contents(home)
    assert set(before["materials"]) == _materials(lines[:15])
    shared = sorted(_materials(lines[5:10]))
    assert all(before["materials"][m]["_source"]["path"].endswith("a.jsonl") for m in shared)

    _break(folder, "bad")
    proc, report = _load(home, folder)
    assert proc.returncode == 2, proc.stderr  # failed files: partial
    assert report["files"]["files_failed"] == 2, report["files"]
    held = sum(len([d for d in before[c].values() if Path(d["source"]["path"] if c != "materials"
                                                          else d["_source"]["path"]).name.startswith("a.")])
               for c in ("searches", "hits", "materials"))
    assert report["files"]["kept_from_last_good"] == held > 0, report["files"]
    assert all(f["kept"] > 0 for f in report["failed"]), report["failed"]
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2 and all("kept from its last good version" in line for line in failed), proc.stderr
    _break(folder, "bad the other way")  # failed again, the other way: the same versions kept
    assert f"{held} record(s) kept from the last good version of failed files" in _cli(
        home, "load", "--workers", "1", str(folder)).stdout
    # the database is what it was: the last good versions stand, shared records keep a.jsonl's version
    assert _contents(home) == before

    checked = _cli(home, "validate", "--json")
    verdicts = {s["suite"]: s for s in json.loads(checked.stdout)["validation"]["suites"]}
    assert verdicts["tables"]["success"], verdicts["tables"]  # the kept records count as held

    # a.jsonl loads again with other content: its old version goes, shared records fall back to b's
    (folder / "a.jsonl").write_text("".join(lines[:3]))
    os.utime(folder / "a.jsonl", (1_800_000_001, 1_800_000_001))
    proc, report = _load(home, folder)
    after = _contents(home)["materials"]
    assert set(after) == _materials(lines[:3]) | _materials(lines[5:15])
    assert all(after[m]["_source"]["path"].endswith("b.jsonl") for m in shared)


def test_a_file_that_is_gone_keeps_its_last_good_version(home, inputs):
    folder, _ = inputs
    proc, _ = _load(home, folder)
    assert proc.returncode == 0, proc.stderr
    before = _contents(home)
    _break(folder, "gone")
    proc = _cli(home, "load", "-q", "--json", "--workers", "1", str(folder / "a.m10"), str(folder / "a.jsonl"))
    report = json.loads(proc.stdout)
    assert proc.returncode == 2, proc.stderr
    assert report["files"]["files_failed"] == 2 and report["files"]["kept_from_last_good"] > 0, report["files"]
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2, proc.stderr
    assert all("no such file" in line and "kept from its last good version" in line for line in failed), failed
    assert _contents(home) == before
