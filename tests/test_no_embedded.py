"""Production: the embedded server forbidden (``--no-embedded``, ``SCI_INGEST_NO_EMBEDDED=1``).

A host whose database is not configured must fail at once, naming what to set, instead of
starting a private SecantusDB server in its home and writing there.  The commands run as a
user runs them, as subprocesses; the Airflow side is in tests/test_dag.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
ONE_SEARCH = SAMPLES / "pasta" / "fasta36_prot.m10"


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("SCI_INGEST_") and k not in ("MONGODB_URI", "DASK_SCHEDULER_ADDRESS")}
    environ.update(SCI_INGEST_HOME=str(home), SCI_INGEST_KEEP="0", **env)  # no kept process outlives the test
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=environ, timeout=120)


def servers_of(home: Path) -> list[int]:
    """The pids of SecantusDB processes whose command line names ``home``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "secantus" in cmdline and str(home) in cmdline:
            found.append(proc.info["pid"])
    return found


def assert_refused_at_once(proc: subprocess.CompletedProcess, home: Path) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr  # one line, nothing started first
    for named in ("embedded server is off", "--mongo-uri", "MONGODB_URI", "mongo_default"):
        assert named in lines[0], lines[0]
    assert not (home / "db").exists() and not (home / "server.json").exists(), sorted(os.listdir(home))
    assert servers_of(home) == []


def test_the_airflow_page_quotes_the_message_a_task_fails_with(tmp_path):
    proc = cli(tmp_path / "home", "run", "--no-embedded")
    message = proc.stderr.strip().removeprefix("error: ")
    page = " ".join((Path(__file__).resolve().parent.parent / "docs" / "airflow.md").read_text().split())
    assert f"`ConfigError: {message}`" in page


@pytest.mark.parametrize("argv, env", [
    (["run", "--no-embedded"], {}),
    (["load", str(ONE_SEARCH)], {"SCI_INGEST_NO_EMBEDDED": "1"}),
    (["analyze", "--json"], {"SCI_INGEST_NO_EMBEDDED": "true"}),
    (["query", "hits", "--limit", "1"], {"SCI_INGEST_NO_EMBEDDED": "yes"}),
    (["airflow", "--no-embedded", "--port", "1"], {}),
], ids=["run-flag", "load-env", "analyze-env", "query-env", "airflow-flag"])
def test_without_a_database_a_command_fails_at_once_naming_what_to_set(tmp_path, argv, env):
    home = tmp_path / "home"
    proc = cli(home, *argv, **env)
    assert_refused_at_once(proc, home)


def test_with_a_uri_the_setting_changes_nothing(tmp_path, mongo_uri, mongo_client):
    home, db = tmp_path / "home", f"noemb_{uuid.uuid4().hex[:8]}"
    try:
        proc = cli(home, "load", "--json", "-q", "--workers", "1", "--no-embedded", "--mongo-uri", mongo_uri,
                   "--db", db, str(ONE_SEARCH), SCI_INGEST_NO_EMBEDDED="1")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout)["files"]["files_loaded"] == 1
        assert mongo_client[db].searches.count_documents({}) > 0
        assert not (home / "db").exists() and servers_of(home) == []
    finally:
        mongo_client.drop_database(db)


def test_server_start_is_refused_and_a_value_that_is_no_boolean_is_named(tmp_path):
    home = tmp_path / "home"
    proc = cli(home, "server", "start", SCI_INGEST_NO_EMBEDDED="1")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "embedded server is off" in proc.stderr and "SCI_INGEST_NO_EMBEDDED" in proc.stderr
    assert not (home / "db").exists() and servers_of(home) == []

    proc = cli(home, "load", str(ONE_SEARCH), SCI_INGEST_NO_EMBEDDED="perhaps")
    assert proc.returncode == 64 and proc.stderr.count("\n") == 1, proc.stderr  # a bad setting (issue 42)
    assert "SCI_INGEST_NO_EMBEDDED must be 1 or 0" in proc.stderr and "'perhaps'" in proc.stderr
    assert not (home / "db").exists() and servers_of(home) == []


def test_the_help_names_the_option_and_its_variable():
    proc = subprocess.run([str(BIN), "load", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "--no-embedded" in proc.stdout and "SCI_INGEST_NO_EMBEDDED" in proc.stdout
