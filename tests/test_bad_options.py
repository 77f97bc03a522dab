"""Options and settings validated at the door (issue 42, item 3; the exit codes of item 8).

Every option with a range and every ``SCI_INGEST_*`` setting is read by one declared type and range
(:data:`ingest.config.SETTINGS`, :func:`ingest.cli.options.typed`): a bad value ends the command
with exit 64 and one line naming it, before any work (no server started, the home not even made);
an unknown option is said by the command's own parser; folders holding nothing to load exit 1 with
one line; a stop (SIGTERM, Ctrl-C) ends a retry wait at once.  Every case runs the console script as
a user does, as a subprocess.
"""

from __future__ import annotations

import os
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import load_corpus
import psutil
import pymongo
import pytest
from test_load_exact import port_outside_the_ephemeral_range

from ingest.config import DEFAULT_DB, SETTINGS, Choice, DbName, Flag, Folder, Number, Size, default_workers
from ingest.server.embedded import EmbeddedServer

BIN = Path(sys.executable).parent / "sci-ingest"
REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
MATERIALS = SAMPLES / "materials" / "materials.jsonl.gz"
#: A URI nothing answers at: a command that reached for the database would fail there with exit 1,
#: so an exit 64 below is one given before any work.
NOWHERE = "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300"


def cli(*argv, env=None, home=None, timeout=120, **popen) -> subprocess.CompletedProcess:
    environ = {**os.environ, "MONGODB_URI": NOWHERE, **(env or {})}
    environ.pop("DASK_SCHEDULER_ADDRESS", None)
    if home is not None:
        environ["SCI_INGEST_HOME"] = str(home)
    return subprocess.run([str(BIN), *map(str, argv)], capture_output=True, text=True, env=environ,
                          timeout=timeout, cwd=REPO, **popen)


def refused(proc, home: Path, *words: str) -> None:
    """Exit 64, one error line naming what was wrong (the last line on stderr), nothing on
    stdout, no traceback, nothing made."""
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if "error:" in line]
    assert proc.returncode == 64, (proc.returncode, proc.stderr)
    assert len(errors) == 1 and errors == lines[-1:], proc.stderr
    assert all(w in errors[0] for w in words), (words, proc.stderr)
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr and not proc.stdout, proc.stderr
    assert not home.exists()  # no server started, nothing written


# ------------------------------------------------------------------ options: argv -> 64, naming the option
TWO_64 = str(2**31)
MOST_WORKERS = 4 * default_workers()
BAD_OPTIONS = [
    (("load", "--workers", "0", "a.m10"), ("--workers", "at least 1", "'0'")),
    (("load", "--workers", "x", "a.m10"), ("--workers", "'x'")),
    (("load", "--workers", str(MOST_WORKERS + 1), "a.m10"), ("--workers", f"at most {MOST_WORKERS}", "per core")),
    (("run", "--workers", "10000", "a.m10"), ("--workers 10000", "at most")),
    (("load", "--retry-for", "nan", "a.m10"), ("--retry-for", "finite", "'nan'")),
    (("load", "--retry-for", "inf", "a.m10"), ("--retry-for", "'inf'")),
    (("load", "--retry-for", "-5", "a.m10"), ("--retry-for", "0 or more", "'-5'")),
    (("run", "--retry-for", "soon"), ("--retry-for", "'soon'")),
    (("load", "--db", "a.b", "a.m10"), ("--db", "MongoDB database name", "'a.b'")),
    (("load", "--db", "", "a.m10"), ("--db", "not empty", "''")),
    (("load", "--db", "x y", "a.m10"), ("--db", "'x y'")),
    (("query", "hits", "--db", "a$b"), ("--db", "'a$b'")),
    (("timings", "--db", "d" * 64), ("--db", "at most 63 bytes")),
    (("analyze", "--db", "a/b"), ("--db",)),
    (("bench", "workers", "--db", "d" * 51), ("too long for bench", "<db>_bench_xxxxxx", "at most 50")),
    (("server", "add-user", "bob", "--db", 'a"b'), ("--db",)),
    (("server", "start", "--port", "70000"), ("--port", "1 to 65535", "'70000'")),
    (("server", "start", "--port", "0"), ("--port", "'0'")),
    (("airflow", "--port", "-1"), ("--port", "'-1'")),
    (("shard-plan", "--shards", "2", "--chunk-mb", "0"), ("--chunk-mb", "1 to 1024", "'0'")),
    (("shard-plan", "--shards", "2", "--chunk-mb", "-5"), ("--chunk-mb", "'-5'")),
    (("shard-plan", "--shards", "2", "--chunk-mb", "nan"), ("--chunk-mb", "'nan'")),
    (("shard-plan", "--shards", "2", "--generate", "0"), ("--generate", "'0'")),
    (("shard-plan", "--shards", "2", "--generate", "2000000"), ("--generate", "1,000,000")),
    (("shard-plan", "--shards", "0"), ("--shards", "'0'")),
    (("shard", "--dry-run", "--shards", "5000"), ("--shards", "1 to 1024")),
    (("hash", "--seed", TWO_64, "1"), ("--seed", "32-bit", TWO_64)),
    (("certs", "DIR", "--days", "0"), ("--days", "'0'")),
    (("certs", "DIR", "--days", "3000000"), ("--days", "1 to 36500")),
    (("report", "--runs", "0"), ("--runs", "at least 1")),
    (("export", "hits", "--batch-size", "0"), ("--batch-size", "'0'")),
    (("export", "hits", "--batch-size", "1000000"), ("--batch-size", "100,000")),
    (("query", "hits", "--limit", "0"), ("--limit",)),
    (("analyze", "--list", "nosuch"), ("unknown analysis 'nosuch'",)),
    (("analyze", "nosuch"), ("unknown analysis 'nosuch'",)),
]


@pytest.mark.parametrize("argv, words", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_a_bad_option_exits_64_naming_it_before_any_work(argv, words, tmp_path):
    home = tmp_path / "home"
    proc = cli(*argv, home=home)
    refused(proc, home, *words)


@pytest.mark.parametrize("argv", [("load", "--nosuch", "a.m10"), ("run", "--nosuch"), ("server", "start", "--nosuch"),
                                  ("query", "hits", "--nosuch")], ids=" ".join)
def test_an_unknown_option_is_said_by_the_command_s_own_parser(argv, tmp_path):
    home = tmp_path / "home"
    proc = cli(*argv, home=home)
    command = " ".join(a for a in argv if not a.startswith("-") and a not in ("a.m10", "hits"))
    refused(proc, home, f"error: sci-ingest {command}: unrecognized arguments: --nosuch",
            f"(`sci-ingest {command} --help` shows the usage)")
    assert len(proc.stderr.splitlines()) == 1, proc.stderr  # one line, as every error


def test_the_workers_are_capped_by_the_open_files_limit(tmp_path):
    """With ``ulimit -n 300``, 4 workers fit (10 files each, 256 for the command): 5 are refused, naming it."""
    home = tmp_path / "home"

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    if MOST_WORKERS < 5:
        pytest.skip("this machine's cores cap the workers below the open-files limit's 4")
    proc = cli("load", "--workers", "5", "a.m10", home=home, preexec_fn=limit)
    refused(proc, home, "--workers 5", "at most 4", "open-files limit", "ulimit -n 300")


# ------------------------------------------------------------------ settings: env -> 64, naming the setting
def bad_value(kind) -> str:
    """A value outside ``kind`` (a declared type of ingest.config)."""
    if isinstance(kind, Number):
        return "nan" if not kind.integer else str(int(kind.least) - 1)
    return {Flag: "perhaps", Choice: "fast", Size: "lots", DbName: "a.b"}[type(kind)]


CHECKED = [s for s in SETTINGS.values() if not isinstance(s.type, Folder)]  # any path is a path


def test_every_setting_but_a_path_is_checked():
    assert {s.name for s in SETTINGS.values()} - {s.name for s in CHECKED} == {
        "SCI_INGEST_HOME", "SCI_INGEST_LANDING", "SCI_INGEST_DASK_TLS"}
    used = set()  # every SCI_INGEST_* the code reads is declared (tests' own and the command's id aside)
    for folder in ("ingest", "analytics", "dags"):
        for path in (REPO / folder).rglob("*.py"):
            used |= set(re.findall(r"(?<![A-Z_])SCI_INGEST_[A-Z_]+[A-Z]", path.read_text()))  # not inside AIRFLOW__SCI_INGEST__...
    assert used - set(SETTINGS) == {"SCI_INGEST_COMMAND_ID"}, used - set(SETTINGS)


def test_the_manual_s_table_is_the_declared_one():
    """docs/configuration.md's table of settings, row for row, is ingest.config.SETTINGS."""
    text = (REPO / "docs" / "configuration.md").read_text()
    rows = re.findall(r"^\| `SCI_INGEST_[A-Z_]+` \|.*\|$", text, re.M)
    assert rows == [f"| `{s.name}` | {s.meaning} | {s.type.describe().replace('|', chr(92) + '|')} | "
                    f"{s.shown_default()} |" for s in SETTINGS.values()]


@pytest.mark.parametrize("name", [s.name for s in CHECKED])
def test_a_bad_setting_exits_64_naming_it_before_any_work(name, tmp_path):
    home = tmp_path / "home"
    value = bad_value(SETTINGS[name].type)
    proc = cli("timings", env={name: value}, home=home)
    refused(proc, home, f"error: {name} must be ", repr(value))


@pytest.mark.parametrize("name, value, words", [
    ("SCI_INGEST_MAX_RECORD_BYTES", "-1", "1,048,576 to 16,777,216"),
    ("SCI_INGEST_MAX_RECORD_BYTES", "lots", "whole number of bytes"),
    ("SCI_INGEST_SERVER_IDLE", "inf", "finite"),
    ("SCI_INGEST_TIMEOUT_MS", "abc", "milliseconds"),
    ("SCI_INGEST_LEASE_SECONDS", "0", "at least 1"),
    ("SCI_INGEST_KEEP_IDLE", "0", "more than 0"),
    ("SCI_INGEST_DB", "", None),  # empty: the default, not an error
])
def test_settings_read_by_their_declared_range(name, value, words, tmp_path):
    home = tmp_path / "home"
    proc = cli("load", "--dry-run", str(MATERIALS), env={name: value}, home=home)
    if words is None:
        assert proc.returncode == 1 and "cannot reach MongoDB" in proc.stderr, proc.stderr  # it went to work
        return
    refused(proc, home, name, words, repr(value))


def test_two_bad_settings_are_each_named():
    proc = cli("parse", str(SAMPLES / "pasta"), env={"SCI_INGEST_DB": "a.b", "SCI_INGEST_KEEP": "maybe"})
    assert proc.returncode == 64 and not proc.stdout, proc.stderr
    assert proc.stderr.splitlines() == [
        "error: SCI_INGEST_DB must be a MongoDB database name: not empty, at most 63 bytes, without / \\ . space "
        "\" $ * < > : | ? or NUL, not 'a.b'",
        "error: SCI_INGEST_KEEP must be 1 or 0 (true or false), not 'maybe'"]


def test_a_bad_setting_cannot_make_a_load_drop_data(mongo_uri, mongo_client, tmp_path):
    """The probe's case: ``SCI_INGEST_MAX_RECORD_BYTES=-1 sci-ingest load --force`` failed every record
    and dropped the file's materials; now it is refused at the door and the database is untouched."""
    db = f"t_bad_{uuid.uuid4().hex[:8]}"
    env = {"MONGODB_URI": mongo_uri}
    try:
        first = cli("load", "-q", "--workers", "1", "--db", db, str(MATERIALS), env=env, home=tmp_path / "home")
        assert first.returncode == 0, first.stderr
        before = mongo_client[db].materials.count_documents({})
        assert before > 0
        again = cli("load", "-q", "--force", "--workers", "1", "--db", db, str(MATERIALS),
                    env={**env, "SCI_INGEST_MAX_RECORD_BYTES": "-1"}, home=tmp_path / "home")
        assert again.returncode == 64 and again.stderr.startswith("error: SCI_INGEST_MAX_RECORD_BYTES must be"), \
            again.stderr
        assert mongo_client[db].materials.count_documents({}) == before
    finally:
        mongo_client.drop_database(db)


def test_the_database_of_the_setting_is_checked_too(tmp_path):
    home = tmp_path / "home"
    for value in ("a.b", "x y", "d" * 64):
        refused(cli("query", "hits", env={"SCI_INGEST_DB": value}, home=home), home, "SCI_INGEST_DB", repr(value))
    assert SETTINGS["SCI_INGEST_DB"].read({}) == DEFAULT_DB


# ------------------------------------------------------------------ nothing to work on: exit 1, one line
@pytest.mark.parametrize("command", ["load", "run", "parse"])
def test_a_folder_without_input_exits_1_with_one_line(command, tmp_path):
    home = tmp_path / "home"
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("no data here\n")
    proc = cli(command, empty, home=home)
    assert proc.returncode == 1, proc.stderr
    said = "error: nothing to parse" if command == "parse" else "error: nothing to load"
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(said), proc.stderr
    assert str(empty) in proc.stderr and not proc.stdout and not home.exists()


# ------------------------------------------------------------------ a stop ends a retry wait at once
def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


@pytest.mark.skipif(os.environ.get("SCI_INGEST_TEST_URI") is not None, reason="kills a server of its own")
@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_a_stop_ends_the_retry_wait_at_once(stop, tmp_path):
    """A load whose server died retries (``--retry-for 600``) and says so on stderr; SIGTERM (or
    Ctrl-C) then ends it at once: exit 130, the stop named, the resume command given.  (The wait
    went on to the end of the window: 35 s late with 60 s, for ever with nan.)  The subprocess
    timeout is only a safety net; no duration is asserted."""
    corpus = tmp_path / "corpus"
    files = load_corpus.build(corpus)
    server = EmbeddedServer(tmp_path / "db", port=port_outside_the_ephemeral_range(), log_path=tmp_path / "server.log")
    uri = server.start()
    client = pymongo.MongoClient(uri)
    env = {**os.environ, "MONGODB_URI": uri + "&serverSelectionTimeoutMS=1000", "SCI_INGEST_HOME": str(tmp_path / "h")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    terminal = stop == "Ctrl-C"  # as a terminal sends it: to the whole group, SIGINT not ignored
    proc = subprocess.Popen([str(BIN), "load", "--json", "-q", "--workers", "1", "--retry-for", "600", "--db", "x",
                             str(corpus)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=terminal,
                            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if terminal else None)
    try:
        while client.x.ingest_files.count_documents({"status": "loaded"}) < 1:  # loading: then stop it, kill
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        loader = psutil.Process(proc.pid)
        loader.suspend()
        assert client.x.ingest_files.count_documents({"status": "loaded"}) < len(files)
        client.close()
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
        loader.resume()
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
        said = []
        while not any("retrying for up to 600 s" in line for line in said):
            said.append(lines.get(timeout=120))
            assert said[-1] is not None, "".join(said[:-1])
        if terminal:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        out = proc.stdout.read()
        proc.wait(timeout=30)  # a safety net: the window has 10 minutes left
        while said[-1] is not None:
            said.append(lines.get(timeout=30))
        err = "".join(said[:-1])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
    assert proc.returncode == 130, err
    warning = next(line for line in err.splitlines() if "retrying for up to" in line)
    assert warning.startswith("warning: ") and "cannot reach MongoDB" in warning, warning
    assert f"error: interrupted ({stop})" in err.splitlines(), err  # the signal named
    assert '"resume": "sci-ingest load' in out and "Traceback" not in err, (out[-2000:], err)
