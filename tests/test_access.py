"""Access to the embedded server: `server start --auth`, read-only analysts, private files.

The CLI as a subprocess against real server processes; clients log in over a socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pymongo
import pytest

from ingest.server.embedded import holder

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _cli(home: Path, *args, timeout: float = 300):
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": ""}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=timeout)


def _host(home: Path) -> str:
    return json.loads((home / "server.json").read_text())["uri"].split("://", 1)[1].split("/")[0]


@pytest.fixture()
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    _cli(home, "server", "stop")


def test_auth_on_admin_and_read_only_analyst(home):
    started = _cli(home, "server", "start", "--auth")
    assert started.returncode == 0, started.stderr[-2000:]
    creds = json.loads((home / "credentials.json").read_text())
    assert (home / "credentials.json").stat().st_mode & 0o077 == 0
    secret = creds["password"]
    host = _host(home)

    anonymous = pymongo.MongoClient(f"mongodb://{host}/?directConnection=true", serverSelectionTimeoutMS=3000)
    with pytest.raises(pymongo.errors.OperationFailure):
        anonymous.sci_ingest.searches.count_documents({})
    with pytest.raises(pymongo.errors.OperationFailure):
        anonymous.sci_ingest.searches.insert_one({"x": 1})

    loaded = _cli(home, "load", "--workers", "2", "--json", "-q", str(SAMPLES / "pasta"))
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert json.loads(loaded.stdout)["files"]["files_loaded"] > 0
    for out in (started, loaded):
        assert secret not in out.stdout + out.stderr

    added = _cli(home, "server", "add-user", "alice", "--read-only")
    assert added.returncode == 0, added.stderr[-2000:]
    user_file = home / "users" / "alice.json"
    assert user_file.stat().st_mode & 0o077 == 0
    alice = json.loads(user_file.read_text())
    assert alice["password"] not in added.stdout + added.stderr
    analyst = pymongo.MongoClient(f"mongodb://alice:{alice['password']}@{host}/?authSource=admin"
                                  "&directConnection=true", serverSelectionTimeoutMS=3000)
    assert analyst.sci_ingest.searches.count_documents({}) > 0
    with pytest.raises(pymongo.errors.OperationFailure, match="not authorized"):
        analyst.sci_ingest.searches.insert_one({"x": 1})
    again = _cli(home, "server", "add-user", "alice", "--read-only")
    assert again.returncode == 1 and "exists already" in again.stderr
    bad = _cli(home, "server", "add-user", "../evil")
    assert bad.returncode == 1 and "user name" in bad.stderr

    status = _cli(home, "server", "status")
    assert status.returncode == 0 and "running" in status.stdout and secret not in status.stdout


def test_a_home_with_auth_runs_every_server_with_it(home):
    assert _cli(home, "server", "start", "--auth").returncode == 0
    assert _cli(home, "server", "stop").returncode == 0
    # no shared server: the command's private server must require authentication too
    proc = subprocess.Popen([str(BIN), "load", "--workers", "1", "-q", str(SAMPLES / "pasta")],
                            env={**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": ""},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = None
    try:
        import time

        deadline = time.monotonic() + 60
        while seen is None and time.monotonic() < deadline and proc.poll() is None:
            seen = holder(home / "db")
            time.sleep(0.05)
    finally:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert seen is not None and "--auth" in seen["cmdline"]
    # `server start` without --auth on that home still starts it with authentication
    restarted = _cli(home, "server", "start")
    assert restarted.returncode == 0 and "authentication on" in restarted.stdout
    assert json.loads((home / "server.json").read_text())["auth"] is True
