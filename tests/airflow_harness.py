"""The pieces the tests that run the local Airflow share (tests/test_airflow_scheduler.py,
tests/test_airflow_ui.py): ``sci-ingest airflow`` started in a temporary home (the
``local_airflow`` fixture: import it into the test module), its REST API logged in as
``admin``, the runs of a DAG and the states of their tasks, and a landing day's folder.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DAG_IDS = {"sci_ingest", "sci_ingest_landing", "sci_ingest_curated", "sci_ingest_backfill"}
AIRFLOW_INSTALLED = (REPO / ".venv" / "bin" / "airflow").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base: str, password: str):
        self.base = base
        self.token = self.call("POST", "/auth/token", {"username": "admin", "password": password},
                               auth=False)["access_token"]  # fmt: skip

    def call(self, method: str, path: str, body=None, auth: bool = True):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())  # fmt: skip
        req.add_header("Content-Type", "application/json")
        if auth:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")


def _wait(what: str, fn, timeout: float, every: float = 2.0, describe=None):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(every)
    detail = describe() if describe else repr(last)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} ({detail})")


@pytest.fixture()
def local_airflow(tmp_path, request):
    """``sci-ingest airflow`` in a temporary home: (process, port, home, path of its output); a test
    module's ``AIRFLOW_EXTRA_ENV`` is added to its environment."""
    home = tmp_path / "home"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MONGODB_URI", "DASK_"))}
    # the curated DAG's daily catch-up off (Asset events alone): unpaused, it would run its latest tick at
    # once, an extra run on an empty database the tests' counts of runs and first reads do not expect
    env.update({"SCI_INGEST_HOME": str(home), "SCI_INGEST_SERVER_IDLE": "0",
                "AIRFLOW__SCI_INGEST__CURATED_CATCH_UP": "none",
                **getattr(request.module, "AIRFLOW_EXTRA_ENV", {})})  # fmt: skip
    log = open(tmp_path / "airflow.log", "wb")
    proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "sci-ingest"), "airflow", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        yield proc, port, home, tmp_path / "airflow.log"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        subprocess.run([str(REPO / ".venv" / "bin" / "sci-ingest"), "server", "stop"], env=env, capture_output=True,
                       timeout=60)  # fmt: skip


def wait_healthy(base: str, timeout: float = 180) -> None:
    """Until the metadata database, the scheduler and the DAG processor report healthy."""

    def healthy():
        with urllib.request.urlopen(base + "/api/v2/monitor/health", timeout=5) as resp:
            health = json.loads(resp.read())
        return all(health.get(c, {}).get("status") == "healthy" for c in ("metadatabase", "scheduler", "dag_processor"))

    _wait("Airflow to be healthy", healthy, timeout, every=1)


def admin_and_mongo(log_path: Path) -> tuple[str, str]:
    """The ``admin`` password and the embedded server's URI, as ``sci-ingest airflow`` printed them."""
    log_text = log_path.read_text()
    password = re.search(r"user admin, password (\S+)", log_text).group(1)
    mongo_uri = re.search(r"MongoDB: the embedded SecantusDB server, pid \d+, (\S+)", log_text).group(1)
    return password, mongo_uri


def _runs(api, dag_id: str) -> list[dict]:
    return api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]


def _tasks(api, dag_id: str, run_id: str) -> dict:
    tis = api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {t["task_id"]: t["state"] for t in tis}


def _all_done(api, dag_id: str, count: int):
    runs = _runs(api, dag_id)
    assert not [r for r in runs if r["state"] == "failed"], [(r["dag_run_id"], _tasks(api, dag_id, r["dag_run_id"]))
                                                             for r in runs if r["state"] == "failed"]  # fmt: skip
    done = [r for r in runs if r["state"] == "success"]
    return done if len(done) >= count and len(done) == len(runs) else None


def materials_sample(folder: Path, records: int = 300) -> Path:
    """``<folder>/materials.jsonl.gz``: the first ``records`` lines of the bundled materials sample
    (3,000 in all), for the runs that check the wiring, not the analyses' numbers (its hull
    diagrams and formula checks took 13 s of each run that analysed all of them)."""
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(REPO / "samples" / "materials" / "materials.jsonl.gz", "rt", encoding="utf-8") as src:
        lines = [line for _, line in zip(range(records), src)]
    path = folder / "materials.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(lines)
    return path


def land_day(home: Path, day: str, files) -> Path:
    """Copy files into the landing folder of a day (``<home>/landing/YYYY-MM-DD/``)."""
    folder = Path(home) / "landing" / day
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, folder / Path(f).name)
    return folder
