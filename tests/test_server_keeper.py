"""The per-home embedded server (ingest.server.keeper): started by a command, shared by the next ones,
stopped when idle, by `sci-ingest server stop`, or with its keeper.  The CLI as a subprocess,
real processes, no mocks.  (The rest of the suite runs with SCI_INGEST_SERVER_IDLE=0; kill -9
of a command and a server that dies under a command: test_server_lifecycle.py, for both kinds.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pymongo
import pytest
from test_server_lifecycle import _wait

from ingest.server.embedded import holder
from ingest.server.state import using

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
STARTING = "starting the embedded SecantusDB server"


def _env(home: Path, idle: str) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": "", "SCI_INGEST_SERVER_IDLE": idle}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _cli(home: Path, *args, idle: str = "600", timeout: float = 300):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=_env(home, idle), timeout=timeout)


def _spawn(home: Path, *args, idle: str = "600", **kwargs):
    return subprocess.Popen([str(BIN), *args], env=_env(home, idle), text=True, **kwargs)


def _record(home: Path) -> dict | None:
    try:
        return json.loads((home / "server.json").read_text())
    except FileNotFoundError:
        return None


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _servers(home: Path) -> list[int]:
    """The SecantusDB processes (zombies left out) started on this home's data."""
    return [p.pid for p in psutil.process_iter(["cmdline", "status"])
            if str(home / "db") in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]


@pytest.fixture()
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    _cli(home, "server", "stop", timeout=60)
    _wait(lambda: not _servers(home), 30, "a server of the test's home outlived it")


def test_the_next_command_reuses_the_server_until_server_stop(home):
    first = _cli(home, "timings")
    assert first.returncode == 1 and "no runs recorded yet" in first.stderr, first.stderr
    said = [line for line in first.stderr.splitlines() if line.startswith(f"note: {STARTING}")]
    assert len(said) == 1 and "600 s" in said[0] and "sci-ingest server stop" in said[0], first.stderr
    record = _record(home)
    server, keeper = record["pid"], record["keeper"]["pid"]
    assert record["idle_s"] == 600 and not _gone(server) and not _gone(keeper)

    second = _cli(home, "load", "--workers", "1", "--json", "-q", str(SAMPLES / "pasta"))
    assert second.returncode == 0, second.stderr[-2000:]
    assert STARTING not in second.stderr
    assert json.loads(second.stdout)["server"]["uri"] == record["uri"]
    assert _record(home)["pid"] == server and _servers(home) == [server]

    status = _cli(home, "server", "status")
    assert status.returncode == 0 and f"pid {server}" in status.stdout, status.stdout
    assert "per-home" in status.stdout and "600 s" in status.stdout

    stop = _cli(home, "server", "stop", timeout=60)
    assert stop.returncode == 0 and stop.stdout.strip() == "stopped", stop.stdout + stop.stderr
    assert _gone(server) and _gone(keeper) and _record(home) is None and holder(home / "db") is None
    assert _cli(home, "server", "status").returncode == 3


def test_the_server_stops_by_itself_after_the_idle_timeout(home):
    ran = _cli(home, "timings", idle="2")
    assert STARTING in ran.stderr and "2 s" in ran.stderr
    record = _record(home)
    _wait(lambda: _gone(record["pid"]) and _gone(record["keeper"]["pid"]), 20, "the idle server did not stop")
    assert _record(home) is None and holder(home / "db") is None
    # stopped for being idle, as its keeper says (how soon is not asserted: that it does not stop early while
    # a command or a client is there is the next tests')
    assert "no client for 2 s" in (home / "server.log").read_text()


def _stays_up(pid: int, idle_s: float, why: str) -> None:
    """The server ``pid`` does not stop through twice its idle timeout, looked at every 0.1 s.  The wait is
    what is tested (the keeper stops a server ``idle_s`` after its last client; nothing announces that it
    looked and kept it), not a hope that something happened meanwhile: a premature stop fails at once."""
    end = time.monotonic() + 2 * idle_s
    while time.monotonic() < end:
        assert not _gone(pid), why
        time.sleep(0.1)


def test_a_command_or_a_client_in_progress_keeps_the_server_up(home):
    """A command holds the home's use lock while it runs; another client shows in serverStatus."""
    _cli(home, "timings", idle="2")
    record = _record(home)
    with using(home):  # what a running command holds, however quiet it is
        _stays_up(record["pid"], record["idle_s"], "the server stopped under a command")
    client = pymongo.MongoClient(record["uri"], serverSelectionTimeoutMS=3000)
    try:
        client.admin.command("ping")
        _stays_up(record["pid"], record["idle_s"], "the server stopped under a connected client")
    finally:
        client.close()
    _wait(lambda: _gone(record["pid"]), 20, "the server did not stop once its clients left")


def test_kill_9_of_the_keeper_leaves_no_server(home):
    _cli(home, "timings")
    record = _record(home)
    os.kill(record["keeper"]["pid"], signal.SIGKILL)
    _wait(lambda: _gone(record["pid"]), 15, "the server outlived its keeper killed with SIGKILL")
    assert holder(home / "db") is None
    again = _cli(home, "load", "--workers", "1", "--json", "-q", str(SAMPLES / "pasta"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert STARTING in again.stderr and _record(home)["pid"] != record["pid"]


def test_commands_started_at_once_share_one_server(home):
    procs = [_spawn(home, "timings", stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [1, 1, 1]
    assert all("no runs recorded yet" in err and "in use" not in err for err in errs), errs
    assert sum(err.count(STARTING) for err in errs) == 1, errs
    assert _servers(home) == [_record(home)["pid"]]


def test_server_start_keeps_a_per_home_server_for_good(home):
    _cli(home, "timings", idle="2")
    record = _record(home)
    adopted = _cli(home, "server", "start")
    assert adopted.returncode == 0 and "already running" in adopted.stdout, adopted.stdout + adopted.stderr
    assert "until `sci-ingest server stop`" in adopted.stdout
    assert _record(home)["idle_s"] is None  # adopted: its keeper no longer stops it when idle ...
    _stays_up(record["pid"], record["idle_s"], "the adopted server stopped when idle")  # ... past the old timeout
    assert _record(home)["pid"] == record["pid"]
    status = _cli(home, "server", "status")
    assert status.returncode == 0 and "long-lived" in status.stdout, status.stdout


def test_a_home_with_auth_gets_its_per_home_server_with_auth(home):
    assert _cli(home, "server", "start", "--auth").returncode == 0
    assert _cli(home, "server", "stop").returncode == 0
    loaded = _cli(home, "load", "--workers", "1", "--json", "-q", str(SAMPLES / "pasta"))
    assert loaded.returncode == 0 and STARTING in loaded.stderr, loaded.stderr[-2000:]
    record = _record(home)
    assert record["auth"] is True and "--auth" in psutil.Process(record["pid"]).cmdline()
    secret = json.loads((home / "credentials.json").read_text())["password"]
    assert secret not in loaded.stdout + loaded.stderr + (home / "server.json").read_text()
    anonymous = pymongo.MongoClient(record["uri"], serverSelectionTimeoutMS=3000)
    with pytest.raises(pymongo.errors.OperationFailure):
        anonymous.sci_ingest.searches.count_documents({})
    again = _cli(home, "timings")
    assert again.returncode == 0 and STARTING not in again.stderr, again.stderr
