"""One CLI contract (issue 27, item 6): one table of exit codes, printed alike by every --help;
usage errors exit 64; "no runs" and an unknown run said alike by `timings` and `report`; --json
only where a command prints results, and valid JSON there; -q only where there is progress; a
--help per `server` verb; a reader that closes the pipe early ends every command quietly, exit 0.

Every command runs as a user runs it: the console script, a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ingest.cli.options import EXIT_TABLE
from ingest.cli.timings import NO_RUNS
from ingest.errors import EXIT_MEANINGS, Exit

BIN = Path(sys.executable).parent / "sci-ingest"
REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
#: A URI nothing answers at: a command that reaches for the database fails there (exit 1), so an
#: exit 64 below is one given before any work.
NOWHERE = "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300"
SERVER_VERBS = ["start", "stop", "status", "add-user"]


def cli(*argv, env=None, timeout=180, home=None) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(env or {})}
    environ.pop("DASK_SCHEDULER_ADDRESS", None)
    if home is not None:
        environ["SCI_INGEST_HOME"] = str(home)
    return subprocess.run([str(BIN), *map(str, argv)], capture_output=True, text=True, env=environ,
                          timeout=timeout, cwd=REPO)


def help_commands(help_text: str) -> list[str]:
    """The commands `sci-ingest --help` lists (as tests/test_docs.py reads them)."""
    block = help_text.split("positional arguments:", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^ {4}([a-z][a-z0-9-]*)(?: {2,}|$)", block, re.M)


MAIN_HELP = cli("--help").stdout
COMMANDS = help_commands(MAIN_HELP)
#: Every help page: each command's, each server verb's.
PAGES = [(c,) for c in COMMANDS] + [("server", verb) for verb in SERVER_VERBS]


def _help(*command) -> str:
    proc = cli(*command, "--help")
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout


def _options(page: str) -> set[str]:
    """The option strings a help page lists (``-q, --quiet`` gives both)."""
    block = page.split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    return {part.split(" ")[0] for line in block.splitlines() if line.startswith("  -")
            for part in line.strip().split("  ")[0].split(", ")}


# ------------------------------------------------------------------ one table of exit codes
def test_the_list_of_commands_is_read_from_the_help():
    assert {"run", "load", "analyze", "validate", "timings", "server", "parse", "airflow", "hash", "shard",
            "shard-plan", "query", "export", "indexes", "report", "bench"} <= set(COMMANDS), COMMANDS


def test_the_table_is_the_errors_table_once():
    codes = re.findall(r"^  (\d+) ", EXIT_TABLE, re.M)
    assert codes == [str(c.value) for c in Exit] == ["0", "1", "2", "3", "4", "64", "130"]
    assert set(EXIT_MEANINGS) == set(Exit)
    assert MAIN_HELP.count(EXIT_TABLE) == 1  # `sci-ingest --help` too


@pytest.mark.parametrize("command", PAGES, ids=" ".join)
def test_every_help_ends_with_the_same_table_and_only_its_codes(command):
    page = _help(*command)
    assert page.count(EXIT_TABLE) == 1, page
    assert page.count("exit codes") == 1, page  # no second, older table
    after = page.split(EXIT_TABLE, 1)[1]
    if after:  # what some codes mean for this command: codes of the table only, one line each
        assert after.startswith("for this command:\n"), after
        own = re.findall(r"^  (\d+) ", after, re.M)
        assert own and set(own) <= {str(c.value) for c in Exit}, after
        assert len(own) == len(set(own)), after


def test_the_pipeline_reports_its_codes_from_the_table():
    from ingest import pipeline

    assert (pipeline.EXIT_OK, pipeline.EXIT_FATAL, pipeline.EXIT_PARTIAL, pipeline.EXIT_INTERRUPTED) == \
        (Exit.OK, Exit.FATAL, Exit.PARTIAL, Exit.INTERRUPTED) == (0, 1, 2, 130)


# ------------------------------------------------------------------ usage errors: 64
@pytest.mark.parametrize("argv, words", [
    ((), "required: COMMAND"),
    (("no-such-command",), "invalid choice"),
    (("server",), "required: VERB"),
    (("server", "restart"), "invalid choice"),
    (("server", "add-user"), "NAME"),
    (("load",), "paths"),
    (("load", "--workers", "x", "a.m10"), "argument --workers: must be a whole number"),
    (("load", "--workers", "0", "a.m10"), "argument --workers: must be a whole number of worker processes, at least 1"),
    (("load", "--write-concern", "j=maybe", "a.m10"), "--write-concern"),
    (("analyze", "no_such_analysis"), "unknown analysis 'no_such_analysis'; known: best_hits"),
    (("bench", "no-such-experiment"), "unknown experiment 'no-such-experiment'; known: workers"),
    (("query", "no_such_collection"), "'no_such_collection' is not a curated collection"),
    (("query", "hits", "--fields", "no_such_field"), "no_such_field"),
    (("query", "hits", "--where", "evalue <"), "--where column"),
    (("query", "hits", "--filter", '{"$where": "1"}'), "--filter: operator $where"),
    (("query", "hits", "--json", "--format", "csv"), "--json"),
    (("query", "hits", "--format", "parquet"), "--out"),
    (("export", "hits", "--fields-list"), "unrecognized arguments: --fields-list"),
    (("export", "no_such_collection"), "not a curated collection"),
    (("export", "hits", "--batch-size", "0"), "--batch-size"),
    (("indexes", "--collections", "hits,no_such_collection"), "not a curated collection"),
    (("report", "--runs", "0"), "argument --runs: must be a whole number of runs, at least 1"),
    (("hash", "--seed", str(2**31), "1"), "32-bit"),
    (("shard-plan", "--shards", "0"), "argument --shards: must be a whole number of shards, 1 to 1024"),
    (("shard-plan", "--shards", "2", "--collection", "nope"), "no shard key for nope"),
    (("airflow", "--json"), "unrecognized arguments: --json"),
    (("validate", "-q"), "unrecognized arguments: -q"),
])
def test_usage_errors_exit_64_before_any_work(argv, words, tmp_path):
    proc = cli(*argv, env={"MONGODB_URI": NOWHERE}, home=tmp_path / "home")
    assert proc.returncode == 64, (proc.returncode, proc.stderr)
    assert words in proc.stderr and "Traceback" not in proc.stderr and not proc.stdout, proc.stderr
    assert not (tmp_path / "home").exists()  # no server started, nothing written


# ------------------------------------------------------------------ --json and -q where they mean something
#: The commands whose stdout is JSON already (parse, hash) or that print no results (airflow).
NO_JSON = {"parse", "hash", "airflow", "server"}
#: The commands with progress bars or progress messages.
QUIET = {"run", "load", "bench"}


@pytest.mark.parametrize("command", PAGES, ids=" ".join)
def test_json_and_quiet_only_where_they_mean_something(command):
    options = _options(_help(*command))
    assert ("--json" in options) == (command[0] not in NO_JSON or command[0] == "server" and len(command) == 2)
    assert ("--quiet" in options) == ("-q" in options) == (command[0] in QUIET), options


# ------------------------------------------------------------------ server: a --help per verb
def test_each_server_verb_has_its_own_help():
    pages = {verb: _help("server", verb) for verb in SERVER_VERBS}
    for verb, page in pages.items():
        assert page.startswith(f"usage: sci-ingest server {verb} "), page
    assert {"--port", "--auth"} <= _options(pages["start"])
    assert "--port" not in _options(pages["stop"]) and "--port" not in _options(pages["status"])
    assert {"--read-only", "--db"} <= _options(pages["add-user"]) and "NAME" in pages["add-user"].splitlines()[0]
    assert "3    no server runs" in pages["status"].split("for this command:", 1)[1]
    listing = _help("server")
    assert all(re.search(rf"^    {verb}\s", listing, re.M) for verb in SERVER_VERBS), listing


def test_server_status_and_stop_print_json_without_a_server(tmp_path):
    status = cli("server", "status", "--json", home=tmp_path / "home", env={"MONGODB_URI": ""})
    assert status.returncode == 3 and json.loads(status.stdout)["status"] == "not running", status.stderr
    stop = cli("server", "stop", "--json", home=tmp_path / "home", env={"MONGODB_URI": ""})
    assert stop.returncode == 0 and json.loads(stop.stdout) == {"status": "absent"}, stop.stderr


# ------------------------------------------------------------------ against a database
@pytest.fixture(scope="module")
def loaded(mongo_uri, mongo_client, tmp_path_factory):
    """The bundled -m 10 samples loaded by `sci-ingest load` (a recorded run) into a database of this module."""
    name = f"t_contract_{uuid.uuid4().hex[:8]}"
    home = tmp_path_factory.mktemp("contract-home")
    env = {"MONGODB_URI": mongo_uri, "SCI_INGEST_DB": name}
    proc = cli("load", "-q", "--workers", "1", "--json", SAMPLES / "pasta", env=env, home=home)
    assert proc.returncode == 0, proc.stderr[-2000:]
    yield {"env": env, "home": home, "run_id": json.loads(proc.stdout)["run_id"], "db": mongo_client[name]}
    mongo_client.drop_database(name)


def test_an_unknown_run_is_the_same_usage_error_in_timings_and_report(loaded, tmp_path):
    said = set()
    for argv in (("timings", "--run", "run-nope"), ("report", "--run", "run-nope", "--out", tmp_path / "r")):
        proc = cli(*argv, env=loaded["env"], home=loaded["home"])
        assert proc.returncode == 64 and not proc.stdout, (argv, proc.returncode, proc.stderr)
        said.add(proc.stderr)
    assert said == {"error: no run 'run-nope' is recorded; `sci-ingest timings --list` lists the runs\n"}, said
    assert not (tmp_path / "r").exists()


def test_no_runs_is_said_alike_by_timings_and_report(mongo_uri, mongo_client, tmp_path):
    name = f"t_noruns_{uuid.uuid4().hex[:8]}"
    env = {"MONGODB_URI": mongo_uri, "SCI_INGEST_DB": name}
    try:
        for argv in (("timings",), ("timings", "--list"), ("timings", "--list", "--json"), ("timings", "--json"),
                     ("report", "--out", tmp_path / "r")):
            proc = cli(*argv, env=env, home=tmp_path / "home")
            assert proc.returncode == 1 and not proc.stdout, (argv, proc.returncode, proc.stdout, proc.stderr)
            assert proc.stderr == f"error: {NO_RUNS}\n", (argv, proc.stderr)
    finally:
        mongo_client.drop_database(name)


def test_json_is_valid_wherever_it_is_offered(loaded, tmp_path):
    run_id = loaded["run_id"]
    objects = {
        ("timings", "--json"): lambda d: d["run_id"] == run_id and d["stages"],
        ("timings", "--list", "--json"): lambda d: [r["run_id"] for r in d["runs"]] == [run_id],
        ("timings", "--workers", "--json"): lambda d: d["workers"],
        ("analyze", "--list", "--json"): lambda d: "best_hits" in [a["name"] for a in d["analyses"]],
        ("bench", "list", "--json"): lambda d: "workers" in [e["name"] for e in d["experiments"]],
        ("query", "--collections", "--json"): lambda d: "hits" in [c["collection"] for c in d["collections"]],
        ("query", "hits", "--fields-list", "--json"): lambda d: d["fields"],
        ("query", "hits", "--where", "rank == 1", "--explain", "--json"): lambda d: d["returned"] > 0,
        ("query", "hits", "--limit", "3", "--json", "--out", tmp_path / "q.jsonl"):
            lambda d: d == {"collection": "hits", "format": "jsonl", "out": str(tmp_path / "q.jsonl"), "rows": 3},
        ("export", "searches", "--json", "--out", tmp_path / "s.parquet"):
            lambda d: d["rows"] == loaded["db"].searches.count_documents({}),
        ("indexes", "--dry-run", "--json"): lambda d: d["indexes"],
        ("shard", "--dry-run", "--server-version", "7.0", "--shards", "2", "--json"): lambda d: d["commands"],
        ("shard-plan", "--shards", "2", "--json", "--png", tmp_path / "plan.png"): lambda d: d["collections"],
        ("report", "--json", "--out", tmp_path / "report"): lambda d: d["run_id"] == run_id,
        ("load", "-q", "--workers", "1", "--json", SAMPLES / "pasta"): lambda d: d["inserted"] == 0,
    }
    for argv, check in objects.items():
        proc = cli(*argv, env=loaded["env"], home=loaded["home"], timeout=300)
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])
        assert check(json.loads(proc.stdout)), (argv, proc.stdout[:2000])


def test_query_json_prints_the_rows_as_json_lines_as_format_jsonl_does(loaded):
    argv = ("query", "hits", "--where", "evalue < 1e-20", "--sort", "-evalue,rank", "--fields", "hit_id,evalue,rank")
    as_json = cli(*argv, "--json", env=loaded["env"], home=loaded["home"])
    as_jsonl = cli(*argv, "--format", "jsonl", env=loaded["env"], home=loaded["home"])
    assert as_json.returncode == as_jsonl.returncode == 0, as_json.stderr + as_jsonl.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert as_json.stdout == as_jsonl.stdout and len(rows) == loaded["db"].hits.count_documents(
        {"hsps.0.evalue": {"$lt": 1e-20}}) > 0
    assert all(set(r) == {"hit_id", "evalue", "rank"} for r in rows)
    assert [r["evalue"] for r in rows] == sorted((r["evalue"] for r in rows), reverse=True)


# ------------------------------------------------------------------ a reader that stops early
def _into_a_closed_pipe(argv, env=None, home=None) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose reader is gone before the command writes (what `| head -c 10`
    becomes once head has its bytes): every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    environ = {**os.environ, **(env or {})}
    environ.pop("DASK_SCHEDULER_ADDRESS", None)
    if home is not None:
        environ["SCI_INGEST_HOME"] = str(home)
    try:
        return subprocess.run([str(BIN), *map(str, argv)], stdout=write_end, stderr=subprocess.PIPE, text=True,
                              env=environ, timeout=180, cwd=REPO)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [("--help",), ("query", "--help"), ("analyze", "--list"), ("bench", "list"),
                                  ("hash", "1", "2"), ("parse", SAMPLES / "pasta")], ids=str)
def test_a_closed_pipe_ends_a_command_quietly(argv):
    proc = _into_a_closed_pipe(argv)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("argv", [("timings", "--list"), ("timings",), ("query", "hits"), ("query", "hits", "--json"),
                                  ("query", "--collections"), ("indexes", "--dry-run"), ("report", "--json")],
                         ids=" ".join)
def test_a_closed_pipe_ends_a_database_command_quietly(loaded, argv, tmp_path):
    extra = ("--out", tmp_path / "report") if argv[0] == "report" else ()
    proc = _into_a_closed_pipe((*argv, *extra), env=loaded["env"], home=loaded["home"])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr
