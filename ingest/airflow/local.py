"""``sci-ingest airflow`` (``make airflow``): Airflow 3 on this machine, in one command.

Runs Airflow's components from the project's virtualenv: ``db migrate`` once, then the
API server (the UI), the scheduler (LocalExecutor), the DAG processor and the triggerer,
each its own process, until Ctrl-C.  Everything stays on this machine:

* ``AIRFLOW_HOME`` is ``<home>/airflow`` (``<home>``: ``$SCI_INGEST_HOME``, default
  ``.sci-ingest`` in the project); its SQLite metadata database, logs and the generated
  admin password live there;
* the DAGs are the project's ``dags/`` folder, without Airflow's example DAGs;
* the UI and API listen on 127.0.0.1 only (``--port``, default 8080), and the tasks are
  told that address (``AIRFLOW__API__BASE_URL``: they find the execution API there);
* the SQLite metadata database waits up to a minute for a lock (``SQLITE_CONNECT_ARGS``);
* the scheduler and the triggerer run with ``--skip-serve-logs``: their log server would
  listen on every interface, and with LocalExecutor the API server reads the logs from
  disk anyway;
* the pool ``sci_ingest_load`` (2 slots) that bounds ``sci_ingest_backfill``'s batches;
* MongoDB: ``--mongo-uri`` / ``$MONGODB_URI`` if given, else the home's embedded
  server, started once (as ``sci-ingest server start`` does) and handed to
  every task as the ``mongo_default`` connection (``AIRFLOW_CONN_MONGO_DEFAULT``).

The virtualenv's ``bin`` goes first on ``PATH`` (Airflow starts its own commands by name).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ingest.config import DAGS_DIR, require_uri
from ingest.errors import ConfigError
from ingest.server.access import load_credentials, with_credentials
from ingest.server.embedded import ENGINE, start_background

__all__ = ["airflow_env", "run_local", "admin_password", "COMPONENTS"]

DEFAULT_PORT = 8080
# (name, arguments): the long-running components, each one process
COMPONENTS = (
    ("api-server", ["api-server"]),
    ("scheduler", ["scheduler", "--skip-serve-logs"]),
    ("dag-processor", ["dag-processor"]),
    ("triggerer", ["triggerer", "--skip-serve-logs"]),
)
PASSWORDS = "simple_auth_manager_passwords.json.generated"
#: SQLite waits this long for a lock before "database is locked": the scheduler, the API server and
#: an `airflow backfill create` all write the one SQLite metadata database (5 s by default was too
#: short on a loaded 2-core machine)
SQLITE_CONNECT_ARGS = {"timeout": 60}
LOAD_POOL = "sci_ingest_load"  # bounds the mapped loads of sci_ingest_backfill (2 slots: this machine's scale)


def _mongo_conn_uri(uri: str) -> str:
    """An Airflow ``mongo`` connection URI for a MongoDB URI (the connection type is ``mongo``)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("mongodb", "mongodb+srv"):
        raise ValueError(f"not a MongoDB URI: {uri!r}")
    query = "&".join(q for q in (parts.query, "srv=true" if parts.scheme == "mongodb+srv" else "") if q)
    return urlunsplit(("mongo", parts.netloc, parts.path or "/", query, ""))


def airflow_env(state_dir: Path, port: int, mongo_uri: str | None, base: dict | None = None) -> dict:
    """The environment Airflow's components and tasks run with (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    home = Path(state_dir) / "airflow"
    venv_bin = str(Path(sys.executable).parent)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),  # the checkout's, or an install's share/sci-ingest/dags
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / PASSWORDS),
        "AIRFLOW__SCHEDULER__STANDALONE_DAG_PROCESSOR": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "ingest.airflow.local.SQLITE_CONNECT_ARGS",
        "SCI_INGEST_HOME": str(Path(state_dir)),
        "PATH": venv_bin + os.pathsep + env.get("PATH", ""),
    })  # fmt: skip
    if mongo_uri:
        env["AIRFLOW_CONN_MONGO_DEFAULT"] = _mongo_conn_uri(mongo_uri)
    return env


def admin_password(state_dir: Path, timeout: float = 0.0) -> str | None:
    """The generated password of the UI's ``admin`` (written by the API server at its first start)."""
    path = Path(state_dir) / "airflow" / PASSWORDS
    end = time.monotonic() + timeout
    while True:
        try:
            return json.loads(path.read_text()).get("admin")
        except (OSError, ValueError):
            if time.monotonic() >= end:
                return None
            time.sleep(0.5)


def _embedded_uri(settings, log) -> str:
    require_uri(settings)
    state = start_background(settings.state_dir)
    log(f"MongoDB: the embedded {ENGINE} server, pid {state['pid']}, {state['uri']} "
        "(`sci-ingest server stop` stops it)")
    return with_credentials(state["uri"], load_credentials(settings.state_dir))


def run_local(settings, port: int = DEFAULT_PORT, log=print) -> int:
    """Run Airflow until Ctrl-C (or SIGTERM), which stops its components and goes on (the command
    exits 130, as every command so stopped); returns the exit code of a component that ended first."""
    mongo_uri = settings.mongo_uri or _embedded_uri(settings, log)
    env = airflow_env(settings.state_dir, port, mongo_uri)
    airflow = str(Path(sys.executable).parent / "airflow")
    if not Path(airflow).exists():
        raise ConfigError(f"{airflow} not found: `make install` installs Airflow into the project's virtualenv")
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    log(f"AIRFLOW_HOME={env['AIRFLOW_HOME']}; migrating its metadata database ...")
    migrated = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True)
    if migrated.returncode != 0:
        raise ConfigError(f"airflow db migrate failed: {migrated.stderr.strip()[-500:]}")
    pool = subprocess.run([airflow, "pools", "set", LOAD_POOL, "2", "sci-ingest loads at once (sci_ingest_backfill)"],
                          env=env, capture_output=True, text=True)  # fmt: skip
    if pool.returncode != 0:
        raise ConfigError(f"airflow pools set {LOAD_POOL} failed: {pool.stderr.strip()[-500:]}")
    logs = Path(env["AIRFLOW_HOME"]) / "logs"
    logs.mkdir(exist_ok=True)
    procs: list[tuple[str, subprocess.Popen]] = []
    try:
        for name, args in COMPONENTS:
            with open(logs / f"{name}.out", "ab") as out:
                procs.append((name, subprocess.Popen([airflow, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                                     start_new_session=True)))  # fmt: skip
        password = admin_password(settings.state_dir, timeout=120)
        log(f"Airflow UI: http://127.0.0.1:{port}/  user admin, password {password or '(not written yet)'} "
            f"(in {Path(env['AIRFLOW_HOME']) / PASSWORDS}); component logs in {logs}; Ctrl-C stops it")
        while True:
            for name, proc in procs:
                if proc.poll() is not None:
                    log(f"error: airflow {name} exited with {proc.returncode} (see {logs / (name + '.out')})")
                    return 1
            time.sleep(1)
    except KeyboardInterrupt:
        log("stopping Airflow ...")
        raise
    finally:
        _stop(procs)


def _stop(procs: list[tuple[str, subprocess.Popen]], timeout: float = 20.0) -> None:
    for _, proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    end = time.monotonic() + timeout
    for _, proc in procs:
        try:
            proc.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
