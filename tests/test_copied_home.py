"""A home owns its server: a copy of a home whose server runs (``cp -a``) uses and stops its own.

Through the CLI, as a user copies a home: home A's long-lived server runs; ``cp -a A B``; in B,
a load goes to B's own server (A's database keeps what it had) and ``server stop`` leaves A's
server running.  (issue 42, item 5)
"""

from __future__ import annotations

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
PASTA = sorted((REPO / "samples" / "pasta").glob("*.m10"))


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "SCI_INGEST_KEEP": "0"}
    for name in ("MONGODB_URI", "SCI_INGEST_DB", "DASK_SCHEDULER_ADDRESS"):
        env.pop(name, None)
    return subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=600)


def _status(home: Path) -> dict:
    proc = _cli(home, "server", "status", "--json")
    return json.loads(proc.stdout) if proc.stdout.strip() else {"exit": proc.returncode, "stderr": proc.stderr}


@pytest.fixture()
def homes(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    yield a, b
    for home in (b, a):
        _cli(home, "server", "stop")


def test_a_copied_home_uses_and_stops_its_own_server(homes):
    a, b = homes
    started = _cli(a, "server", "start")
    assert started.returncode == 0, started.stderr
    loaded = _cli(a, "load", "-q", "--workers", "1", str(PASTA[0]))
    assert loaded.returncode == 0, loaded.stderr
    a_uri = json.loads((a / "server.json").read_text())["uri"]
    with pymongo.MongoClient(a_uri) as client:
        held = client.sci_ingest.searches.count_documents({})
    assert held > 0

    shutil.copytree(a, b, symlinks=True)  # cp -a while A's server runs: B holds A's record
    loaded = _cli(b, "load", "-q", "--workers", "1", str(PASTA[1]))
    assert loaded.returncode == 0, loaded.stderr
    assert "starting the embedded SecantusDB server (data in " + str(b / "db") in loaded.stderr, loaded.stderr
    with pymongo.MongoClient(a_uri) as client:  # A's database untouched
        assert client.sci_ingest.searches.count_documents({}) == held
        assert client.sci_ingest.ingest_files.count_documents({}) == 1

    stopped = _cli(b, "server", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _status(a).get("status") == "running", _status(a)  # B's stop left A's server alone
    with pymongo.MongoClient(a_uri, serverSelectionTimeoutMS=5000) as client:
        assert client.admin.command("ping")["ok"] == 1
