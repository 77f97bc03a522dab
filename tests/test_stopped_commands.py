"""No work outlives its command: a command stopped by SIGTERM (Airflow, ``timeout``) ends its
operations on the server before it exits (issue 40), where the server can interrupt them.

The command runs as users run it (``sci-ingest query`` in a process of its own) over a collection
big enough to keep the server busy for seconds; the server is watched through ``currentOp``, whose
entries name each client's app: the command's is ``sci-ingest cmd <pid>-<random>``
(:func:`ingest.config.begin_command`).  On a real MongoDB (``SCI_INGEST_TEST_URI``) the command
kills its operation (``killOp``); SecantusDB cannot interrupt one (its ``killOp`` only closes the
connection, and the operation runs on), so there the command says so in one line, and its
operation ends by itself.  Every wait polls the server, up to a bound; nothing asserts a duration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingest.config import COMMAND_ENV
from ingest.store.servers import describe

BIN = Path(sys.executable).parent / "sci-ingest"
#: Documents in the collection read: a scan of them keeps the embedded server busy for seconds.
DOCUMENTS = 120_000


def _operations(client, prefix: str) -> list[dict]:
    """The entries of ``currentOp`` whose client's app name starts with ``prefix`` (SecantusDB lists
    every connection with the last command it ran; MongoDB the operations in progress)."""
    found = []
    for op in client.admin.command("currentOp")["inprog"]:
        name = op.get("appName") or ((op.get("clientMetadata") or {}).get("application") or {}).get("name") or ""
        if name.startswith(prefix) and op.get("type", "op") == "op" and op.get("active"):
            found.append(op)
    return found


def _running(op: dict) -> str:
    """The command an entry runs: MongoDB's ``command``, SecantusDB's ``op`` (its last command)."""
    command = op.get("command") or {}
    return next(iter(command), None) or op.get("op") or ""


def _poll(what: str, check, bound_s: float = 120.0):
    """``check()`` once it is true, polling the server; fails naming ``what`` past ``bound_s``."""
    end = time.monotonic() + bound_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > end:
            pytest.fail(f"{what}: not seen within {bound_s:.0f} s")
        time.sleep(0.05)


@pytest.fixture()
def busy_collection(db):
    """``hits`` of the test's database with :data:`DOCUMENTS` documents, none of which the query matches."""
    for start in range(0, DOCUMENTS, 10_000):
        db.hits.insert_many([{"_id": f"q{i:07d}:1", "query_id": f"q{i:07d}", "rank": 1, "hit_id": f"h{i}",
                              "hsps": [{"evalue": 1e-5, "identity": 0.5, "bits": 40.0}]}
                             for i in range(start, start + 10_000)])
    return db


def test_a_stopped_command_leaves_no_operation_running(mongo_uri, mongo_client, busy_collection, tmp_path):
    db = busy_collection
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.Popen([str(BIN), "query", "hits", "--filter", '{"hit_id": "none"}', "--db", db.name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    prefix = f"sci-ingest cmd {proc.pid}-"
    try:
        reading = _poll("the command's find on the server",
                        lambda: [op for op in _operations(mongo_client, prefix) if _running(op) == "find"])
        before = {op.get("connectionId") for op in _operations(mongo_client, prefix)}
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr  # interrupted
    assert reading
    secantus = describe(mongo_client).kind == "SecantusDB"
    if secantus:
        said = [line for line in stderr.splitlines() if "SecantusDB cannot interrupt an operation" in line]
        assert len(said) == 1 and "operation(s) of this command (find)" in said[0], stderr
    else:
        assert "cannot interrupt" not in stderr, stderr
    # no operation of the stopped command is left: killed (MongoDB), or run to its end (SecantusDB),
    # and none started after the stop
    left = []

    def gone():
        left[:] = _operations(mongo_client, prefix)
        assert {op.get("connectionId") for op in left} <= before, left
        return not left

    _poll("the stopped command's operations gone", gone)


def test_a_command_names_itself_to_the_server(mongo_uri, mongo_client, tmp_path):
    """Each command gets a name of its own (a pid and a random part): the app name of its clients."""
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path)}
    env.pop(COMMAND_ENV, None)
    code = ("import os, sys; from ingest.cli.main import main; "
            "main(['query', '--collections']); print(os.environ['SCI_INGEST_COMMAND_ID'])")
    names = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                            check=True).stdout.splitlines()[-1] for _ in range(2)]
    assert all(n.startswith("sci-ingest cmd ") for n in names) and names[0] != names[1]


#: An Airflow task's process (the DAG tasks call ``run_task``): its task reads ``hits`` in a thread and,
#: once the find runs on the server, raises as Airflow's execution_timeout raises in a task.
AIRFLOW_TASK = """
import sys, threading, time
import pymongo
from ingest.airflow.support import run_task
from ingest.config import command_name
from ingest.store.mongo import shared_client

uri, db_name = sys.argv[1], sys.argv[2]
watch = pymongo.MongoClient(uri)

def read():
    try:
        list(shared_client(uri)[db_name].hits.find({"hit_id": "none"}))
    except Exception:  # the client closed under it: the task is being stopped
        pass

def running(name):
    for op in watch.admin.command("currentOp")["inprog"]:
        app = op.get("appName") or ((op.get("clientMetadata") or {}).get("application") or {}).get("name")
        if app == name and op.get("active") and ("find" in (op.get("command") or {}) or op.get("op") == "find"):
            return True
    return False

def task():
    name = command_name()
    print(name, flush=True)
    threading.Thread(target=read, daemon=True).start()
    end = time.monotonic() + 120
    while not running(name) and time.monotonic() < end:
        time.sleep(0.05)
    raise TimeoutError("the task's execution_timeout")

run_task(task)
"""


def test_an_airflow_task_that_does_not_finish_ends_its_operations(mongo_uri, mongo_client, busy_collection):
    """``run_task`` (what the DAG tasks call): a task raising while its read runs (as Airflow's timeout
    raises in it) ends its operations before the error goes on to Airflow, as a stopped command does."""
    db = busy_collection
    env = {k: v for k, v in os.environ.items() if k != COMMAND_ENV}
    proc = subprocess.run([sys.executable, "-c", AIRFLOW_TASK, mongo_uri, db.name], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and "TimeoutError: the task's execution_timeout" in proc.stderr, proc.stderr
    name = proc.stdout.splitlines()[0]
    assert name.startswith("sci-ingest cmd "), proc.stdout
    if describe(mongo_client).kind == "SecantusDB":
        assert "SecantusDB cannot interrupt an operation" in proc.stderr, proc.stderr
    else:
        assert "cannot interrupt" not in proc.stderr, proc.stderr
    _poll("the task's operations gone", lambda: not _operations(mongo_client, name))
