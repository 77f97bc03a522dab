"""The embedded server's lifecycle as an operator meets it: the CLI as a subprocess, real processes.

These run with ``SCI_INGEST_SERVER_IDLE=0`` (conftest): each command's private server.
The per-home server that outlives its command is tested in test_server_keeper.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pymongo
import pytest

from ingest.server.embedded import holder

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _env(home: Path, idle: str = "0") -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": "", "SCI_INGEST_SERVER_IDLE": idle}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _cli(home: Path, *args, timeout: float = 300, idle: str = "0"):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=_env(home, idle), timeout=timeout)


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def _answer(ask):
    """``ask()``, or None while the server does not answer yet (starting)."""
    try:
        return ask()
    except pymongo.errors.ConnectionFailure:
        return None


@pytest.mark.parametrize("idle", ["0", "600"], ids=["private", "per-home"])
def test_kill_9_of_a_load_and_the_next_command(tmp_path, idle):
    """A private server dies with its command killed by SIGKILL; the per-home server goes on
    serving the next command.  Either way the next load completes."""
    home = tmp_path / "home"
    proc = subprocess.Popen([str(BIN), "load", "--workers", "1", "-q", str(SAMPLES / "pasta")], env=_env(home, idle),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        server = _wait(lambda: holder(home / "db") if (holder(home / "db") or {}).get("port") else None, 60,
                       "the server did not start")
        with pymongo.MongoClient(f"mongodb://127.0.0.1:{server['port']}/", directConnection=True,
                                 serverSelectionTimeoutMS=500) as client:
            ledger = client[os.environ.get("SCI_INGEST_DB", "sci_ingest")].ingest_files  # into the load: a file taken
            _wait(lambda: proc.poll() is not None or _answer(ledger.find_one), 120, "the load took no file")
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        if idle == "0":
            _wait(lambda: not psutil.pid_exists(server["pid"]) or
                  psutil.Process(server["pid"]).status() == psutil.STATUS_ZOMBIE, 30,
                  "the private server outlived the command killed with SIGKILL")
            assert holder(home / "db") is None
        again = _cli(home, "load", "--workers", "1", "--json", "-q", str(SAMPLES / "pasta"), idle=idle)
        assert again.returncode == 0, again.stderr[-2000:]
        assert json.loads(again.stdout)["files"]["files_failed"] == 0
        if idle != "0":
            assert "starting the embedded" not in again.stderr and holder(home / "db")["pid"] == server["pid"]
    finally:
        _cli(home, "server", "stop")


def _under(pid: int, marker: str) -> list[psutil.Process]:
    """The live descendants of ``pid`` whose command line has ``marker``."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for child in found:
        try:
            if any(marker in part for part in child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.Error:
            pass
    return out


def _on_data(home: Path) -> list[int]:
    """The SecantusDB processes (zombies left out) on this home's data."""
    return [p.pid for p in psutil.process_iter(["cmdline", "status"])
            if str(home / "db") in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("moment", ["keeper-starting", "server-starting", "keeper-killed-too"])
def test_kill_9_while_the_per_home_server_starts_and_the_next_command(tmp_path, moment):
    """SIGKILL of a command while the per-home server it started is not yet recorded: its keeper
    (a session of its own) lives on and holds the start lock until its server is recorded, so the
    next command waits and shares that server instead of starting a second keeper, whose server
    found the data directory open ("in use by SecantusDB pid N, the private server of another
    command", seen once in 1 on a loaded 2-core machine).  A keeper killed too takes its server with
    it, and the next command starts a new one.  Never two servers on the data, none left running."""
    home = tmp_path / "home"
    first = subprocess.Popen([str(BIN), "load", "--workers", "1", "-q", str(SAMPLES / "pasta")],
                             env=_env(home, "600"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        marker = "ingest.server.keeper" if moment == "keeper-starting" else "secantusd-py"
        # polled, not slept for: the moment is the same on an idle and on a loaded machine
        found = _wait(lambda: _under(first.pid, marker) or first.poll() is not None, 60, f"no {marker} process")
        keeper = _under(first.pid, "ingest.server.keeper")
        assert keeper and found is not True and not (home / "server.json").exists(), "the record came before the kill"
        first.kill()
        if moment == "keeper-killed-too":
            for proc in keeper:
                proc.kill()
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    try:
        again = _cli(home, "load", "--workers", "1", "--json", "-q", str(SAMPLES / "pasta"), idle="600", timeout=180)
        assert again.returncode == 0, again.stderr[-2000:]
        assert json.loads(again.stdout)["files"]["files_failed"] == 0
        servers = _on_data(home)
        assert len(servers) == 1, servers
        record = json.loads((home / "server.json").read_text())
        assert record["pid"] == servers[0]
        if moment == "keeper-killed-too":
            assert "starting the embedded" in again.stderr
        else:  # the server the killed command's keeper started, adopted
            assert "starting the embedded" not in again.stderr, again.stderr[-2000:]
            assert record["keeper"]["pid"] == keeper[0].pid
            if moment == "server-starting":
                assert servers == [found[0].pid]
    finally:
        stop = _cli(home, "server", "stop", idle="600")
        _wait(lambda: not _on_data(home), 30, "a server on the data outlived `sci-ingest server stop`")
    assert stop.returncode == 0 and stop.stdout.strip() == "stopped", stop.stdout + stop.stderr


def test_server_stop_never_signals_a_process_it_did_not_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    bystander = subprocess.Popen(["sleep", "60"])
    try:  # a record whose pid now belongs to another process (pid reuse)
        (home / "server.json").write_text(json.dumps({
            "pid": bystander.pid, "uri": "mongodb://127.0.0.1:1/?directConnection=true",
            "data_dir": str(home / "db"), "started": psutil.Process(bystander.pid).create_time()}))
        status = _cli(home, "server", "status")
        assert status.returncode == 3 and "died" in status.stdout
        stop = _cli(home, "server", "stop")
        assert stop.returncode == 0 and "no longer running" in stop.stdout, stop.stdout
        assert bystander.poll() is None  # untouched
        assert not (home / "server.json").exists()
        assert "no server was running" in _cli(home, "server", "stop").stdout
    finally:
        bystander.kill()
        bystander.wait()


def test_a_frozen_server_is_reported_and_never_doubled(tmp_path):
    home = tmp_path / "home"
    started = _cli(home, "server", "start")
    assert started.returncode == 0, started.stderr
    pid = json.loads((home / "server.json").read_text())["pid"]
    try:
        os.kill(pid, signal.SIGSTOP)
        status = _cli(home, "server", "status", timeout=60)
        assert status.returncode == 1 and "unresponsive" in status.stdout, status.stdout + status.stderr
        load = _cli(home, "load", "--workers", "1", str(SAMPLES / "pasta"), timeout=60)
        assert load.returncode == 1 and "does not answer" in load.stderr and "Traceback" not in load.stderr
        servers = [p for p in psutil.process_iter(["cmdline"])
                   if str(home / "db") in (p.info["cmdline"] or [])]
        assert [p.pid for p in servers] == [pid]  # no second server on the same data
    finally:
        os.kill(pid, signal.SIGCONT)
        stop = _cli(home, "server", "stop")
    assert stop.returncode == 0 and stop.stdout.strip() == "stopped"
    _wait(lambda: not psutil.pid_exists(pid), 30, "the server did not stop")


def test_a_second_command_on_a_busy_home_gets_a_hint_not_a_lock_traceback(tmp_path):
    home = tmp_path / "home"
    first = subprocess.Popen([str(BIN), "load", "--workers", "1", "-q", str(SAMPLES)], env=_env(home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server = _wait(lambda: holder(home / "db"), 60, "the first command's server did not start")
        second = _cli(home, "load", "--workers", "1", str(SAMPLES / "pasta"), timeout=120)
        if first.poll() is None or second.returncode != 0:
            assert second.returncode == 1, second.stderr[-2000:]
            assert f"in use by SecantusDB pid {server['pid']}" in second.stderr
            assert "Traceback" not in second.stderr and "WiredTiger" not in second.stderr
    finally:
        first.wait(300)
    assert first.returncode == 0


@pytest.mark.parametrize("action", ["status", "stop"])
def test_server_commands_without_any_record(tmp_path, action):
    result = _cli(tmp_path / "home", "server", action)
    assert result.returncode == (3 if action == "status" else 0)
    assert "not running" in result.stdout or "no server was running" in result.stdout


def test_the_server_ignores_config_files_and_keeps_its_files_private(tmp_path):
    """A secantusd.toml in the working directory (or home, or /etc) must not change the server;
    its data, log and state files are readable by their owner only."""
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "secantusd.toml").write_text("[server]\nauth = true\nport = 1\n")
    started = subprocess.run([str(BIN), "server", "start"], capture_output=True, text=True, env=_env(home),
                             cwd=cwd, timeout=120)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        loaded = subprocess.run([str(BIN), "load", "--workers", "1", "-q", str(SAMPLES / "pasta")],
                                capture_output=True, text=True, env=_env(home), cwd=cwd, timeout=300)
        assert loaded.returncode == 0, loaded.stderr[-2000:]  # no auth was switched on
        assert (home / "db").stat().st_mode & 0o777 == 0o700
        private = [home / "server.json", home / "server.log", *(p for p in (home / "db").iterdir() if p.is_file())]
        assert len(private) > 3
        for path in private:
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
    finally:
        subprocess.run([str(BIN), "server", "stop"], capture_output=True, env=_env(home), timeout=60)


@pytest.mark.parametrize("idle", ["0", "600"], ids=["private", "per-home"])
def test_an_embedded_server_that_dies_mid_load_is_reported_within_seconds(tmp_path, idle):
    """Not three selection timeouts and a timing error: one line naming the failed write, exit 1,
    and a summary that does not claim every file was accounted for.  The per-home server's keeper
    exits with it and removes its record."""
    import pymongo

    sys.path.insert(0, str(Path(__file__).parent))
    import load_corpus

    corpus = tmp_path / "corpus"
    load_corpus.build(corpus)
    home = tmp_path / "home"
    proc = subprocess.Popen([str(BIN), "load", "--workers", "2", "--db", "dies", str(corpus)],
                            env=_env(home, idle), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server = _wait(lambda: holder(home / "db"), 60, "the server did not start")
        watcher = pymongo.MongoClient(f"mongodb://127.0.0.1:{server['port']}/?directConnection=true")
        _wait(lambda: watcher.dies.ingest_files.count_documents({"status": "loaded"}) >= 20, 120,
              "the load did not get going")
        os.kill(server["pid"], signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (out[-1500:], err[-1500:])
    assert took < 15, f"{took:.1f} s from the server's death to the command's exit"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "has exited" in errors[0] and "Traceback" not in err, err[-2000:]
    # the files the tasks reported before the death, and the rest said not reached (or named)
    (summary,) = [line for line in out.splitlines() if line.startswith("files:")]
    numbers = [int(n) for n in re.findall(r"(\d+) (?:loaded|skipped|failed|not reached)", summary)]
    assert sum(numbers) == len(list(corpus.rglob("*.*"))) and "timing" not in errors[0], summary
    _wait(lambda: not (home / "server.json").exists(), 15, "the dead server's record outlived it")


def test_sigterm_of_a_load_stops_like_ctrl_c_and_stops_its_server(tmp_path):
    """What Airflow and `timeout` send: the load rolls back what was in flight, says how to resume,
    and its private server stops with it."""
    sys.path.insert(0, str(Path(__file__).parent))
    import load_corpus
    import pymongo

    corpus = tmp_path / "corpus"
    load_corpus.build(corpus)
    home = tmp_path / "home"
    proc = subprocess.Popen([str(BIN), "load", "--workers", "2", "--json", str(corpus)], env=_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server = _wait(lambda: holder(home / "db"), 60, "the private server did not start")
        watcher = pymongo.MongoClient(f"mongodb://127.0.0.1:{server['port']}/?directConnection=true")
        _wait(lambda: watcher.sci_ingest.ingest_files.count_documents({"status": "loaded"}) >= 5, 120,
              "the load did not get going")  # not a fixed sleep: a busy machine starts Dask slower
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    report = json.loads(out)
    assert report["status"] == "interrupted" and report["resume"].startswith("sci-ingest load")
    assert not psutil.pid_exists(server["pid"]) or psutil.Process(server["pid"]).status() == psutil.STATUS_ZOMBIE
    again = _cli(home, "load", "--workers", "2", "--json", "-q", str(corpus))
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["files"]["files_failed"] == 0
