"""What a newcomer meets on a first try: --version, --help, timings, failures, parse, formats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ingest.report import timing_table

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
COMMANDS = ["run", "load", "analyze", "validate", "timings", "server", "parse", "shard"]


def cli(*args, env=None, timeout=300):
    environ = {**os.environ, **(env or {})}
    environ.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=environ, timeout=timeout)


@pytest.fixture()
def dbname(mongo_client):
    name = f"newcomer_{uuid.uuid4().hex[:8]}"
    yield name
    mongo_client.drop_database(name)


def test_version():
    from importlib.metadata import version

    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"sci-ingest {version('sci-ingest')}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_documents_its_exit_codes(command):
    proc = cli(command, "--help")
    assert proc.returncode == 0
    codes = proc.stdout.split("exit codes (the same for every command):")[1]
    for code in (0, 1, 2, 64, 130):  # the whole table: tests/test_cli_contract.py
        assert re.search(rf"^\s+{code}\s", codes, re.M), proc.stdout


def test_timings_choose_and_explain_the_run(mongo_uri, dbname, tmp_path):
    env = {"SCI_INGEST_HOME": str(tmp_path / "home"), "MONGODB_URI": mongo_uri}
    proc = cli("timings", "--db", dbname, env=env)
    assert proc.returncode == 1 and "no runs recorded yet" in proc.stderr
    loaded = cli("load", "--workers", "1", "-q", "--json", "--db", dbname, str(SAMPLES / "pasta"), env=env)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    worked = json.loads(loaded.stdout)["run_id"]
    again = cli("load", "--workers", "1", "-q", "--json", "--db", dbname, str(SAMPLES / "pasta"), env=env)
    idle = json.loads(again.stdout)["run_id"]  # everything skipped: a run that did nothing
    shown = cli("timings", "--db", dbname, env=env)
    assert shown.returncode == 0
    first = shown.stdout.splitlines()[0]
    assert worked in first and "did work" in first and "--list" in first
    assert idle in cli("timings", "--last", "--db", dbname, env=env).stdout.splitlines()[0]
    listed = cli("timings", "--list", "--json", "--db", dbname, env=env)
    runs = json.loads(listed.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [idle, worked]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["started"]) for r in runs)
    unknown = cli("timings", "--run", "run-nope", "--db", dbname, env=env)
    assert unknown.returncode == 64 and "no run 'run-nope'" in unknown.stderr and not unknown.stdout  # usage
    stages = json.loads(cli("timings", "--json", "--db", dbname, env=env).stdout)["stages"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s["started"]) for s in stages), stages


def test_each_failure_is_named_once_without_the_path_twice(mongo_uri, dbname, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    bad = inbox / "bad.json"
    bad.write_text('[{"material_id": "mp-1"}, {"material_id": ')
    (inbox / "good.json").write_text(json.dumps([{"material_id": "mp-2", "formula_pretty": "X"}]))
    env = {"SCI_INGEST_HOME": str(tmp_path / "home"), "MONGODB_URI": mongo_uri}
    proc = cli("load", "--workers", "1", "-q", "--db", dbname, str(inbox), env=env)
    assert proc.returncode == 2
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if str(bad) in line]
    assert len(lines) == 1, lines
    assert lines[0].count(str(bad)) == 1 and re.search(re.escape(str(bad)) + r":\d+: ", lines[0]), lines
    assert "1 failed" in proc.stdout


def test_parse_reads_directories_and_says_what_it_reads(tmp_path):
    proc = cli("parse", str(SAMPLES / "pasta"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    n = sum(1 for f in (SAMPLES / "pasta").glob("*.m10") for _ in [0])
    assert len(proc.stdout.splitlines()) >= n
    other = tmp_path / "materials.json"
    other.write_text('[{"material_id": "mp-1"}]')
    proc = cli("parse", str(other))
    assert proc.returncode == 2 and "-m 10 and tabular output only" in proc.stderr and "sci-ingest load" in proc.stderr


def test_numbers_in_tables_are_formatted_for_reading():
    text = timing_table([{"stage": "load", "records_in": 209840, "records_out": 209840, "seconds": 12.3456,
                          "records_per_s": 18297.8, "mb_per_s": 7.456, "peak_rss_mb": 95.5, "status": "ok"}])
    row = text.splitlines()[2]
    assert "18,298" in row and "209,840" in row and "12.3" in row and "7.46" in row and "95.5" in row
    assert "18,297.800" not in row and ".800" not in row


def test_parse_into_a_pipe_closed_early_stops_quietly():
    """`sci-ingest parse DIR | head -1`: no error per file, exit 0."""
    proc = subprocess.Popen([str(BIN), "parse", str(SAMPLES / "pasta")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 0 and "Broken pipe" not in err and "Traceback" not in err, err
