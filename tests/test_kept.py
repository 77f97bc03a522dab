"""The kept command process (ingest/cli/kept.py, ingest/cli/kept_process.py), as users meet it:
``sci-ingest`` run as a subprocess twice, the second time served by the process the first one
left; the same outputs, the same exit codes and messages, and Ctrl-C reaching the command.

Each test has its own TMPDIR, so its kept processes have sockets of their own; they are killed
at the end.  The rest of the suite runs with SCI_INGEST_KEEP=0 (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent / "sci-ingest"
#: An analysis that takes a second, where the outputs are not compared.
CHEAP = ("analyze", "oxide_formation_energy", "--json")
SAMPLES = [REPO / "samples" / "materials" / "materials.jsonl.gz", REPO / "samples" / "pasta" / "fasta36_prot.m10"]


@pytest.fixture(scope="module")
def loaded(mongo_uri, mongo_client, tmp_path_factory):
    """A database holding two sample files (one PASTA output, the materials), loaded once, cold."""
    dbname = f"kept_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SCI_INGEST_KEEP": "0", "SCI_INGEST_HOME": str(tmp_path_factory.mktemp("home")),
           "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": dbname}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([str(BIN), "load", *map(str, SAMPLES), "--json"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    yield env
    mongo_client.drop_database(dbname)


@pytest.fixture(scope="module")
def keep(loaded, tmp_path_factory):
    """A user's environment with kept processes on, a TMPDIR (so their sockets) of its own, and the
    kept process that a first command started (as `make run` starts one: with make's variables);
    the kept processes killed at the end."""
    tmp = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))  # short: a Unix socket's path takes 107 bytes
    env = {**loaded, "SCI_INGEST_KEEP": "1", "SCI_INGEST_KEEP_IDLE": "300", "TMPDIR": str(tmp),
           "SCI_INGEST_HOME": str(tmp_path_factory.mktemp("home"))}
    first, _ = _run({**env, "MAKEFLAGS": "s", "MFLAGS": "-s", "MAKELEVEL": "1"}, *CHEAP)
    assert first.returncode == 0, first.stderr
    assert _stages(json.loads(first.stdout))["start-up"]["detail"]["process"] == "its own"
    _kept_process(tmp)
    yield env, tmp
    for p in psutil.process_iter(["cmdline"]):
        if any(str(tmp) in part for part in p.info["cmdline"] or ()):
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def _run(env, *args, timeout=300):
    began = time.time()
    proc = subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.time() - began


def _kept_process(tmp: Path, wait_s: float = 120) -> Path:
    """The socket of the kept process the last cold command started, once it listens."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = list((tmp / f"sci-ingest-{os.getuid()}").glob("*.sock"))
        if found:
            return found[0]
        time.sleep(0.2)
    logs = [p.read_text() for p in (tmp / f"sci-ingest-{os.getuid()}").glob("*.log")]
    raise AssertionError(f"no kept process listened within {wait_s} s; its log: {logs}")


def _stages(data) -> dict:
    return {s["stage"]: s for s in data["stages"]}


def _rows(path) -> list[str]:
    table = pq.read_table(path)
    return sorted(map(repr, table.drop_columns(["run_id"]).to_pylist()))


def test_a_kept_process_runs_the_next_command_with_the_same_results(keep):
    env, tmp = keep
    args = ("analyze", "best_hits", "hull_energy", "--json")
    sock = _kept_process(tmp)
    assert sock.stat().st_mode & 0o777 == 0o600 and sock.parent.stat().st_mode & 0o777 == 0o700
    first, wall_1 = _run({**env, "SCI_INGEST_KEEP": "0"}, *args)
    assert first.returncode == 0, first.stderr
    second, wall_2 = _run(env, *args)  # a command typed after `make run` is served by the one it started
    assert second.returncode == 0, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert _stages(one)["start-up"]["detail"]["process"] == "its own"
    assert _stages(two)["start-up"]["detail"]["process"] == "forked by a kept process"
    for data, wall in ((one, wall_1), (two, wall_2)):
        # the rows say where the command's time went: start-up, connect, cluster, the analyses, close
        assert [s["stage"] for s in data["stages"]] == ["start-up", "connect", "cluster", "analyze.best_hits",
                                                        "analyze.hull_energy", "close"]
        total = sum(s["seconds"] for s in data["stages"])
        assert abs(total - wall) <= 0.05 * wall, (total, wall, data["stages"])
    assert [a["name"] for a in one["analysis"]] == [a["name"] for a in two["analysis"]] == ["best_hits",
                                                                                          "hull_energy"]
    for a, b in zip(one["analysis"], two["analysis"]):  # the same outputs, row for row
        assert a["records_out"] == b["records_out"] > 0
        assert _rows(a["parquet_path"]) == _rows(b["parquet_path"]), a["name"]


def test_exit_codes_messages_and_a_changed_environment(keep):
    env, tmp = keep
    kept, _ = _run(env, "analyze", "nosuch")
    cold, _ = _run({**env, "SCI_INGEST_KEEP": "0"}, "analyze", "nosuch")
    assert kept.returncode == cold.returncode == 64
    assert kept.stderr == cold.stderr and kept.stderr.startswith("error: unknown analysis 'nosuch'")
    # hostile callers of the same user: garbage, a length with nothing after it, a hang-up; the
    # process serves the next command all the same
    for junk in (b"\xff" * 64, b"\x00\x00\x10\x00", b""):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(_kept_process(tmp)))
            s.sendall(junk)
    # another environment (a variable modules may read at import) is not served by this process
    other, _ = _run({**env, "SCI_INGEST_TEST_OTHER": "1"}, *CHEAP)
    assert _stages(json.loads(other.stdout))["start-up"]["detail"]["process"] == "its own"
    served, _ = _run(env, *CHEAP)
    assert _stages(json.loads(served.stdout))["start-up"]["detail"]["process"] == "forked by a kept process"


def test_ctrl_c_reaches_the_command(keep):
    env, tmp = keep
    _run(env, "analyze", "oxide_formation_energy", "--json")
    _kept_process(tmp)
    server = next(p for p in psutil.process_iter(["cmdline"])
                  if "ingest.cli.kept_process" in (p.info["cmdline"] or ()) and str(tmp) in p.info["cmdline"][-1])
    before = {c.pid for c in server.children()}  # the last command's, ending, or the next one's, ready
    proc = subprocess.Popen([str(BIN), "analyze", "hull_energy", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    children, deadline = [], time.monotonic() + 120
    while not children and time.monotonic() < deadline:  # this command's process, forked for it
        time.sleep(0.05)
        children = [c for c in server.children() if c.pid not in before]
    assert children, "no command process was forked"
    proc.send_signal(signal.SIGINT)  # forwarded, whether the client has read the pid yet or not
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    psutil.wait_procs(children, timeout=10)
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
