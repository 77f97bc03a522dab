"""Loading is exact whatever stops it: kill -9, a dead worker, the server killed, Ctrl-C, a rival load.

Every test runs ``sci-ingest load`` as a user does (the console script, a
subprocess) against a server of its own (so the server can be killed), on a
corpus of 116 distinct real files (``tests/load_corpus.py``; six of them share
records, in other versions), and compares the database with one clean load:
the same ``_id`` sets and counts in searches, hits, materials and tasks, the
same holder's version of every record and the same versions kept, every file
``loaded`` in the ledger, nothing doubled, no claim or batch left.  Kills happen when the ledger
shows a given share of the files loaded, with the load's processes stopped (SIGSTOP) for the
moment it takes to send them, so they land in the middle of the load.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import load_corpus
import psutil
import pymongo
import pytest

from ingest.server.embedded import EmbeddedServer
from ingest.store.ledger import sha256_of

BIN = Path(sys.executable).parent / "sci-ingest"
N_FILES = 116
# Under pytest-xdist (make test) the tests go to two workers, halves of about four minutes each (measured
# with -n 3), each with its own corpus, server and clean load: ``xdist_group`` load_exact_1 and load_exact_2.
pytestmark = pytest.mark.skipif(os.environ.get("SCI_INGEST_TEST_URI") is not None,
                                reason="these tests kill and restart a server of their own")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    files = load_corpus.build(folder, shared_files=6)
    assert len(files) == N_FILES
    return folder


def port_outside_the_ephemeral_range() -> int:
    """A free port below Linux's ephemeral range: while the server is down, no other process
    (a Dask worker's connection, say) can be given its port by the kernel and answer in its place."""
    import random
    import socket

    for port in random.Random().sample(range(20000, 32000), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


class Server:
    """A SecantusDB server process on a fixed port and data directory, to kill and start again."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.server = EmbeddedServer(folder / "db", port=port_outside_the_ephemeral_range(),
                                     log_path=folder / "server.log")
        self.uri = self.server.start()
        self.port = self.server.port
        self.client = pymongo.MongoClient(self.uri)

    def kill(self) -> None:
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait(10)

    def start(self) -> None:
        self.server = EmbeddedServer(self.folder / "db", port=self.port, log_path=self.folder / "server.log")
        self.server.start()

    def stop(self) -> None:
        self.client.close()
        self.server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("exact-server"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def clean(server, corpus) -> dict:
    """The state after one clean load with one worker."""
    name = f"clean_{uuid.uuid4().hex[:6]}"
    proc, report = run_load(server, name, corpus, "--workers", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["files"]["files_loaded"] == N_FILES and report["failed"] == []
    return load_corpus.snapshot(server.client[name])


def run_load(server, db_name, *paths, extra_env=None, **popen):
    proc = start_load(server, db_name, *paths, extra_env=extra_env, **popen)
    out, err = proc.communicate(timeout=600)
    proc.stdout, proc.stderr = out, err
    return proc, (json.loads(out) if out.strip().startswith("{") else None)


def start_load(server, db_name, *args, extra_env=None, **popen):
    env = {**os.environ, "MONGODB_URI": server.uri, "SCI_INGEST_HOME": str(server.folder / "home"),
           **(extra_env or {})}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    argv = [str(BIN), "load", "--json", "-q", "--db", db_name, *map(str, args)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@contextmanager
def stopped_mid_load(client, db_name: str, share: float, proc, total: int = N_FILES):
    """Block until ``share`` of the files are loaded (while ``proc`` still runs), then stop the load's
    processes (SIGSTOP) for the block, so that what the test does in it lands in the middle of the
    load however busy the machine is (a batch of small files loads in a fraction of a second: a kill
    sent after the count could otherwise meet a finished load); they go on (SIGCONT) after it, also
    when it fails.  Gives the count, taken again once they are stopped."""
    deadline = time.monotonic() + 300
    while True:
        n = client[db_name].ingest_files.count_documents({"status": "loaded"})
        if n >= share * total:
            break
        assert proc.poll() is None, "the load ended before it could be interrupted"
        assert time.monotonic() < deadline, "the load made no progress"
        time.sleep(0.05)
    stopped = [psutil.Process(proc.pid)]
    stopped += stopped[0].children(recursive=True)
    for p in stopped:
        p.suspend()
    try:
        n = client[db_name].ingest_files.count_documents({"status": "loaded"})
        assert proc.poll() is None and n < total, f"the load ended before it could be interrupted ({n} loaded)"
        yield n
    finally:
        for p in stopped:
            try:
                p.resume()
            except psutil.NoSuchProcess:
                pass


class StderrWatch:
    """Reads ``proc``'s stderr as it comes (a thread), so that a test can wait for the line holding ``marker``."""

    def __init__(self, proc, marker: str):
        self.proc, self.marker, self.lines, self.out = proc, marker, [], []
        self.seen = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.out_reader = threading.Thread(target=lambda: self.out.append(proc.stdout.read()), daemon=True)
        self.out_reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if self.marker in line:
                self.seen.set()

    def wait(self, timeout: float) -> bool:
        """Whether the marker came before ``timeout`` seconds (a safety net) or the end of the process."""
        deadline = time.monotonic() + timeout
        while not self.seen.wait(0.1):
            if not self.reader.is_alive() or time.monotonic() > deadline:
                return self.seen.is_set()
        return True

    def text(self) -> str:
        return "".join(self.lines)

    def communicate(self, timeout: float) -> tuple[str, str]:
        """(stdout, stderr) once the process has ended."""
        self.proc.wait(timeout)
        self.reader.join(timeout)
        self.out_reader.join(timeout)
        return "".join(self.out), self.text()


def assert_exact(server, db_name: str, clean: dict) -> None:
    load_corpus.assert_exact(server.client[db_name], clean)


@pytest.mark.xdist_group("load_exact_2")
def test_four_workers_give_exactly_what_one_gives_and_reprocessing_all_changes_nothing(server, corpus, clean):
    name = f"w4_{uuid.uuid4().hex[:6]}"
    proc, report = run_load(server, name, corpus, "--workers", "4")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["load"]["workers"] == 4 and report["files"]["files_loaded"] == N_FILES
    assert_exact(server, name, clean)
    workers = {r["worker"] for r in server.client[name].stage_timings.find({"stage": "load", "file": {"$exists": 1}})}
    assert len(workers) >= 2, workers  # the files really were spread over worker processes
    # --force (the backfill's reprocess=all) writes every file again: the same database
    proc, report = run_load(server, name, corpus, "--workers", "2", "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["files"]["files_loaded"] == N_FILES and report["inserted"] == 0
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_2")
def test_a_running_dask_cluster_with_threaded_workers_gives_the_same_set(server, corpus, clean):
    """`--scheduler ADDRESS`: the files go to the workers of a running cluster (here two worker
    processes of two threads each, so two loaders share a process) and the result is exact."""
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        name = f"sched_{uuid.uuid4().hex[:6]}"
        proc, report = run_load(server, name, corpus, "--scheduler", cluster.scheduler_address)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert report["load"]["workers"] == 2 and report["files"]["files_loaded"] == N_FILES
        assert_exact(server, name, clean)
        rows = server.client[name].stage_timings.find({"stage": "load", "file": {"$exists": 1}})
        worker_pids = {r["worker"] for r in rows}
        assert len(worker_pids) == 2, worker_pids  # the cluster's two processes, not the command


@pytest.mark.xdist_group("load_exact_2")
def test_kill_9_at_three_moments_then_the_same_command_finishes_exactly(server, corpus, clean):
    name = f"kill_{uuid.uuid4().hex[:6]}"
    seen = []
    for share in (0.1, 0.4, 0.7):
        proc = start_load(server, name, corpus, "--workers", "2")
        with stopped_mid_load(server.client, name, share, proc) as n:
            seen.append(n)
            proc.kill()  # the command; its worker processes die with it
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
    assert seen == sorted(seen) and seen[-1] < N_FILES
    proc, report = run_load(server, name, corpus, "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = report["files"]
    assert files["files_loaded"] + files["files_skipped"] == N_FILES and files["files_skipped"] >= seen[-1]
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_2")
def test_a_killed_worker_loses_nothing(server, corpus, clean):
    name = f"worker_{uuid.uuid4().hex[:6]}"
    proc = start_load(server, name, corpus, "--workers", "2")
    with stopped_mid_load(server.client, name, 0.2, proc):
        workers = [c for c in psutil.Process(proc.pid).children(recursive=True)
                   if "dask worker" in " ".join(c.cmdline()) or c.name().startswith("dask worker")]
        assert workers, [c.cmdline() for c in psutil.Process(proc.pid).children(recursive=True)]
        workers[0].kill()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    report = json.loads(out)
    assert report["files"]["files_loaded"] == N_FILES  # every file counted once, by whoever finished it
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_2")
def test_server_killed_and_restarted_mid_load_is_retried_through(server, corpus, clean):
    """Down for longer than pymongo waits for a server (1 s here): the loader's own retries carry it.
    The claims whose release the restart lost are let go of at once at the end, not after their
    lease (10 minutes here: the load used to sit out a whole lease after its last file)."""
    name = f"restart_{uuid.uuid4().hex[:6]}"
    impatient = {"MONGODB_URI": server.uri + "&serverSelectionTimeoutMS=1000", "SCI_INGEST_LEASE_SECONDS": "600"}
    proc = start_load(server, name, corpus, "--workers", "2", extra_env=impatient)
    said = StderrWatch(proc, "retrying for up to")
    with stopped_mid_load(server.client, name, 0.3, proc):
        server.kill()
    # down until the load has met the outage: its first retry is said on stderr (ingest/store/retry.py) and
    # counted with it.  A fixed outage (4 s, then 8 s) could end before any of the load's operations met it
    # (its workers busy parsing on a loaded machine): then there was nothing to retry and none was counted.
    assert said.wait(300), f"the load never retried through the outage: {proc.poll()=}, {said.text()[-2000:]}"
    server.start()
    out, err = said.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    report = json.loads(out)
    assert report["load"]["retries"] > 0
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_1")
def test_server_gone_for_good_exits_1_and_the_rerun_finishes(server, corpus, clean):
    name = f"gone_{uuid.uuid4().hex[:6]}"
    proc = start_load(server, name, corpus, "--workers", "2", "--retry-for", "3")
    with stopped_mid_load(server.client, name, 0.3, proc):
        server.kill()
    killed = time.monotonic()
    try:
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - killed
    finally:
        server.start()
    assert proc.returncode == 1, (out[-1000:], err[-2000:])
    # its 3-s window, then no second one for a rollback the server cannot answer (that took 24 s)
    assert took < 20, f"{took:.1f} s from the server's death to the command's exit"
    report = json.loads(out)
    assert "cannot reach MongoDB" in report["error"] and "Traceback" not in err
    proc, report = run_load(server, name, corpus, "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_1")
def test_ctrl_c_rolls_back_what_was_in_flight_and_says_how_to_resume(server, corpus, clean):
    name = f"sigint_{uuid.uuid4().hex[:6]}"
    # SIGINT as a terminal has it: a suite started in the background of a shell (`make test &`) runs with
    # SIGINT ignored, which every child inherits and Python keeps (the load then rightly ignored Ctrl-C)
    proc = start_load(server, name, corpus, "--workers", "2", start_new_session=True,
                      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with stopped_mid_load(server.client, name, 0.3, proc):
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    report = json.loads(out)
    assert report["status"] == "interrupted" and report["resume"].startswith("sci-ingest load")
    assert 0 < report["files"]["files_loaded"] < N_FILES
    db = server.client[name]
    assert db.ingest_files.count_documents({"status": "loading"}) == 0
    assert db.ingest_files.count_documents({"owner": {"$exists": True}}) == 0
    proc, report = run_load(server, name, corpus, "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_1")
def test_two_loads_of_overlapping_inputs_end_exact_and_their_reports_add_up(server, corpus, clean):
    files = sorted(p for folder in ("pasta", "records", "shared") for p in (corpus / folder).iterdir())
    third = len(files) // 3
    first, second = files[: 2 * third], files[third:]
    name = f"rivals_{uuid.uuid4().hex[:6]}"
    a = start_load(server, name, *first, "--workers", "2")
    b = start_load(server, name, *second, "--workers", "2")
    reports = []
    for proc in (a, b):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    loaded = sum(r["files"]["files_loaded"] for r in reports)
    skipped = sum(r["files"]["files_skipped"] for r in reports)
    assert loaded == N_FILES and loaded + skipped == len(first) + len(second)
    assert sum(r["inserted"] for r in reports) == sum(clean["counts"].values())  # each record inserted once
    assert_exact(server, name, clean)


@pytest.mark.xdist_group("load_exact_1")
def test_an_interrupted_reload_of_changed_files_leaves_no_old_version(server, corpus, clean, tmp_path):
    """The files change after a load; the reload is killed half-way; the rerun ends as a clean load of the new files."""
    changed = tmp_path / "changed"
    shutil.copytree(corpus, changed)
    name = f"changed_{uuid.uuid4().hex[:6]}"
    proc, _ = run_load(server, name, changed, "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    pasta = sorted((changed / "pasta").iterdir())
    for i, path in enumerate(pasta[:60]):  # new content: another real pair (and touched)
        path.write_bytes(pasta[-1 - i].read_bytes() + pasta[i].read_bytes())
    expected_name = f"expected_{uuid.uuid4().hex[:6]}"
    proc, _ = run_load(server, expected_name, changed, "--workers", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = load_corpus.snapshot(server.client[expected_name])

    new_versions = {str(p.resolve()): sha256_of(p) for p in pasta[:60]}
    ledger = server.client[name].ingest_files
    proc = start_load(server, name, changed, "--workers", "2")
    deadline = time.monotonic() + 300
    while sum(1 for e in ledger.find({"_id": {"$in": list(new_versions)}, "status": "loaded"})
              if e["sha256"] == new_versions[e["_id"]]) < 20:
        assert proc.poll() is None, "the reload ended before it could be interrupted"
        assert time.monotonic() < deadline, "the reload made no progress"
        time.sleep(0.05)
    proc.kill()
    proc.wait(30)
    proc, _ = run_load(server, name, changed, "--workers", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_exact(server, name, expected)


@pytest.mark.xdist_group("load_exact_1")
def test_unacknowledged_writes_are_refused_and_the_write_concern_is_recorded(server, corpus):
    name = f"wc_{uuid.uuid4().hex[:6]}"
    one = sorted((corpus / "pasta").iterdir())[0]
    proc, report = run_load(server, name, one, "--write-concern", "w=0")
    assert proc.returncode == 1 and "w=0" in (report or {}).get("error", proc.stderr)
    assert server.client[name].hits.count_documents({}) == 0
    refused = server.client[name].stage_timings.find_one({"stage": "load", "scope": "run", "run_id": report["run_id"]})
    assert refused["status"] == "failed" and "w=0" in refused["error"]  # the refusal is recorded, as failed
    proc, report = run_load(server, name, one, "--write-concern", "w=1,j=true", "--workers", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["load"]["write_concern"] == {"w": 1, "j": True}
    row = server.client[name].stage_timings.find_one({"stage": "load", "scope": "run", "run_id": report["run_id"]})
    assert row["detail"]["write_concern"] == {"w": 1, "j": True}
