"""What commands say when something stops them, as users meet it: through the CLI, against real servers.

* Ctrl-C or SIGTERM of ``run`` after its load: the report of what was finished (the stage table, the
  analyses published), the stage stopped and what it undid, the command that resumes; SIGTERM is
  named as such (it said "(Ctrl-C)"), in a load's stop too;
* every line on stderr carries its level (``error:``, ``warning:``, ``note:``, ...) and is one line:
  a server killed during ``analyze``; Dask's seven-line ``UserWarning: Sending large graph``;
* a refusal for the user's rights says which role on which database the user lacks, not only the
  write that met it (the timing of stage start-up); a client not logged in is told so;
* a load that retried through a lost server counts its retries (it said 0 after a window of them);
* a loader whose claim another loader took over and loaded reports the file as loaded by that
  one (it said "failed" for a file the ledger has loaded);
* a file that is a link named by the path the user gave (``st.json`` -> ``/proc/self/status`` was
  named ``/proc/<the loader's pid>/status``).

Each waits on its event (a line on stderr, a ledger entry), never a fixed sleep.  (issue 42, item 8)
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pymongo
import pytest

from ingest.server.embedded import EmbeddedServer, holder

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
MATERIALS = REPO / "samples" / "materials" / "materials.jsonl.gz"
#: The prefixes a line on stderr starts with: its level, or what happened to a file.
LEVEL = re.compile(r"(error|warning|note|info|failed|skipped|set aside): \S")
TIMEOUT_S = 300


def _materials(folder: Path, n: int | None, name: str = "materials.jsonl") -> Path:
    """The first ``n`` bundled sample materials (all: None) as a plain JSONL file of its own."""
    with gzip.open(MATERIALS, "rt") as src:
        lines = [line for line in src if '"material_id"' in line][:n]
    path = folder / name
    path.write_text("".join(lines))
    return path


def _env(home: Path, **extra: str) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), **extra}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _levelled(stderr: str) -> list[str]:
    """The lines of ``stderr``, each checked to carry its level."""
    lines = stderr.splitlines()
    for line in lines:
        assert LEVEL.match(line), f"a line without its level: {line!r} in\n{stderr[-3000:]}"
    return lines


def _stopped_at(argv: list[str], env: dict, marker: str, act) -> tuple[int, str, str]:
    """Run ``sci-ingest argv``; when a line of its stderr holds ``marker``, ``act(process)``; then its
    exit code, stdout and stderr."""
    proc = subprocess.Popen([str(BIN), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if marker in line:
                act(proc)
                break
        out, rest = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(seen) + rest
    assert marker in "".join(seen), f"never said {marker!r}:\n{err[-3000:]}"
    return proc.returncode, out, err


# ------------------------------------------------------------------ interrupted runs
@pytest.mark.parametrize("signum, named, marker", [
    (signal.SIGTERM, "SIGTERM", "note: best_hits: "),  # the first analysis done, the others to come
    (signal.SIGINT, "Ctrl-C", "note: validate: "),  # the analyses done, the validation to come
], ids=["sigterm-in-analyze", "ctrl-c-in-validate"])
def test_a_stopped_run_says_what_it_finished_and_how_to_resume(mongo_uri, mongo_client, tmp_path, signum, named,
                                                                 marker):
    name = f"t_msg_{uuid.uuid4().hex[:8]}"
    data = _materials(tmp_path, 20)
    argv = ["run", "-q", "--workers", "1", "--db", name, str(data)]
    try:
        code, out, err = _stopped_at(argv, _env(tmp_path / "home", MONGODB_URI=mongo_uri), marker,
                                     lambda proc: proc.send_signal(signum))
    finally:
        mongo_client.drop_database(name)
    assert code == 130, (out[-3000:], err[-3000:])
    lines = out.splitlines()
    assert any(line.startswith("stage ") for line in lines), out  # the table of what was done
    assert re.search(r"^analyze\.best_hits .* ok$", out, re.M), out
    assert "files: 1 loaded" in out and "analysis best_hits: " in out  # the load, the analyses published
    (stop,) = [line for line in lines if line.startswith(f"interrupted ({named}) ")]
    assert "the stages above finished; " in stop, stop
    assert f"resume with: sci-ingest {' '.join(argv)}" in lines and lines[-1] == "status: interrupted (exit 130)"
    assert _levelled(err)[-1] == f"error: interrupted ({named})"
    other = "Ctrl-C" if named == "SIGTERM" else "SIGTERM"
    assert other not in out + err


def test_sigterm_of_a_load_is_named(mongo_uri, mongo_client, tmp_path):
    """A load stopped by SIGTERM (what `timeout` and Airflow send) says so, not "(Ctrl-C)"."""
    name = f"t_msg_{uuid.uuid4().hex[:8]}"
    data = _materials(tmp_path, None)
    missing = tmp_path / "missing.jsonl"  # named at once as failed: the load has begun
    argv = ["load", "-q", "--workers", "1", "--db", name, str(missing), str(data)]
    try:
        code, out, err = _stopped_at(argv, _env(tmp_path / "home", MONGODB_URI=mongo_uri), "failed: ",
                                     lambda proc: proc.send_signal(signal.SIGTERM))
    finally:
        mongo_client.drop_database(name)
    assert code == 130, (out[-3000:], err[-3000:])
    assert "interrupted (SIGTERM)" in out and f"resume with: sci-ingest {' '.join(argv)}" in out.splitlines()
    assert _levelled(err)[-1] == "error: interrupted (SIGTERM)" and "Ctrl-C" not in out + err


# ------------------------------------------------------------------ one line each, with its level
def test_a_server_killed_during_analyze_leaves_one_line_each(tmp_path):
    home = tmp_path / "home"
    data = _materials(tmp_path, 20)
    env = _env(home, MONGODB_URI="", SCI_INGEST_SERVER_IDLE="0")  # a private server, dying with its command
    code, out, err = _stopped_at(["run", "-q", "--workers", "1", str(data)], env, "note: best_hits: ",
                                 lambda proc: os.kill(holder(home / "db")["pid"], signal.SIGKILL))
    assert code == 1, (out[-3000:], err[-3000:])
    lines = _levelled(err)
    assert len([line for line in lines if line.startswith("error: ")]) == 1, err
    assert "Traceback" not in err and "status: failed (exit 1)" in out


def test_dask_warnings_are_one_line(mongo_uri, mongo_client, tmp_path):
    """Dask's `UserWarning: Sending large graph ...` (seven lines, made to come here by its threshold)."""
    name = f"t_msg_{uuid.uuid4().hex[:8]}"
    files = [_materials(tmp_path, 5, "a.jsonl"), _materials(tmp_path, 6, "b.jsonl")]
    env = _env(tmp_path / "home", MONGODB_URI=mongo_uri, DASK_DISTRIBUTED__ADMIN__LARGE_GRAPH_WARNING_THRESHOLD="1B")
    try:
        proc = subprocess.run([str(BIN), "load", "-q", "--workers", "2", "--db", name, *map(str, files)],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=TIMEOUT_S)
    finally:
        mongo_client.drop_database(name)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in _levelled(proc.stderr) if "Sending large graph" in line]
    assert said and said[0].startswith("warning: UserWarning: Sending large graph of size ")
    assert "This may cause some slowdown." in said[0]  # the rest of the warning, on its line


# ------------------------------------------------------------------ what the user lacks
def test_a_refusal_says_which_role_the_user_lacks(tmp_path):
    home = tmp_path / "home"
    data = _materials(tmp_path, 3)
    env = _env(home, MONGODB_URI="")
    try:
        for argv in (["server", "start", "--auth"], ["server", "add-user", "alice", "--read-only"]):
            done = subprocess.run([str(BIN), *argv], capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
            assert done.returncode == 0, done.stderr[-2000:]
        host = json.loads((home / "server.json").read_text())["uri"].split("://", 1)[1].split("/")[0]
        alice = json.loads((home / "users" / "alice.json").read_text())
        for uri, said in (
                (f"mongodb://alice:{alice['password']}@{host}/?authSource=admin&directConnection=true",
                 "error: user alice (roles: read on sci_ingest) may not update in database sci_ingest: this command "
                 "writes there and needs the readWrite role on sci_ingest; "),
                (f"mongodb://{host}/?directConnection=true", "error: not logged in: the server requires a user ")):
            proc = subprocess.run([str(BIN), "load", "-q", "--workers", "1", str(data)], capture_output=True,
                                  text=True, env=_env(home, MONGODB_URI=uri), timeout=TIMEOUT_S)
            assert proc.returncode == 1, proc.stderr[-2000:]
            errors = [line for line in _levelled(proc.stderr) if line.startswith("error: ")]
            assert len(errors) == 1 and errors[0].startswith(said), errors
            assert errors[0].endswith("(refused: recording the timing of stage start-up)"), errors
            assert alice["password"] not in proc.stdout + proc.stderr
    finally:
        subprocess.run([str(BIN), "server", "stop"], capture_output=True, env=env, timeout=TIMEOUT_S)


# ------------------------------------------------------------------ counts that tell the truth
@pytest.fixture()
def own_server(tmp_path):
    """A server of the test's own (the session's is not to be killed)."""
    server = EmbeddedServer(tmp_path / "db", log_path=tmp_path / "server.log")
    uri = server.start()
    yield server, uri
    server.stop()


def _wait_for(what: str, predicate, proc: subprocess.Popen) -> None:
    """Until ``predicate()`` (a state of the database the command reaches), while the command runs."""
    while not predicate():
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        time.sleep(0.02)


def test_retries_through_a_lost_server_are_counted(own_server, tmp_path):
    server, uri = own_server
    files = [_materials(tmp_path, 200, f"m{i}.jsonl") for i in range(6)]
    env = _env(tmp_path / "home", MONGODB_URI=uri)
    proc = subprocess.Popen([str(BIN), "load", "--workers", "1", "--retry-for", "2", *map(str, files)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        with pymongo.MongoClient(uri) as watcher:
            _wait_for("a file was loaded", lambda: watcher.sci_ingest.ingest_files.find_one({"status": "loaded"}), proc)
        server.process.kill()  # the server is gone: each operation is retried for 2 s, then the load stops
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (out[-3000:], err[-3000:])
    (load,) = [line for line in out.splitlines() if line.startswith("load: ")]
    retries = int(re.search(r"(\d+) retried operation", load).group(1))
    # the count says what happened (it said 0 after a whole window of retries): the first retry is announced
    # on stderr; an error that is not worth a retry (the server killed mid-reply, at times) stops at once
    retried = any("retrying for up to 2 s" in line for line in err.splitlines())
    assert (retries >= 1) == retried, (load, err[-3000:])
    assert "resume with: sci-ingest load" in out and _levelled(err)


def test_a_file_another_loader_took_over_and_loaded_is_reported_so(mongo_uri, mongo_client, tmp_path):
    """Loader A holds the file's claim and is stopped (SIGSTOP) past its lease; loader B takes the claim
    over and loads the file; A, let go on, finds its claim gone: the file is loaded by B, not failed."""
    name = f"t_msg_{uuid.uuid4().hex[:8]}"
    data = _materials(tmp_path, None)
    env = _env(tmp_path / "home", MONGODB_URI=mongo_uri, SCI_INGEST_LEASE_SECONDS="1")
    argv = [str(BIN), "load", "-q", "--workers", "1", "--db", name, str(data)]
    a = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ledger = mongo_client[name].ingest_files
        _wait_for("A claimed the file", lambda: ledger.find_one({"owner.pid": a.pid}), a)
        a.send_signal(signal.SIGSTOP)
        b = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
        a.send_signal(signal.SIGCONT)
        out, err = a.communicate(timeout=TIMEOUT_S)
        entry = ledger.find_one({"_id": str(data)})
    finally:
        if a.poll() is None:
            a.send_signal(signal.SIGCONT)
            a.kill()
            a.wait()
        mongo_client.drop_database(name)
    assert b.returncode == 0 and "files: 1 loaded" in b.stdout, (b.stdout[-2000:], b.stderr[-2000:])
    assert entry["status"] == "loaded" and entry["run_id"] != _run_of(a.pid, out)
    assert entry["records"] == {"materials": len(data.read_text().splitlines())}  # all of it, by B
    assert a.returncode == 0, (out[-2000:], err[-2000:])  # not "partial": nothing failed
    assert "files: 0 loaded, 1 skipped (0 unchanged, 1 loaded by another loader), 0 failed" in out, out
    (note,) = _levelled(err)
    assert note == f"note: {data}: loaded by another loader (run {entry['run_id']}), which took this one's claim over"


def _run_of(pid: int, out: str) -> str:
    """The run id the report ``out`` names."""
    return re.search(r"^run (\S+)", out, re.M).group(1)


def test_a_link_is_named_by_the_path_given(mongo_uri, mongo_client, tmp_path):
    """``st.json`` -> ``/proc/self/status``: resolved by the loader, it was named ``/proc/<its pid>/status``."""
    name = f"t_msg_{uuid.uuid4().hex[:8]}"
    (tmp_path / "data").mkdir()
    link = tmp_path / "data" / "st.json"
    link.symlink_to("/proc/self/status")
    try:
        proc = subprocess.run([str(BIN), "load", "-q", "--workers", "1", "--db", name, str(link.parent)],
                              capture_output=True, text=True, env=_env(tmp_path / "home", MONGODB_URI=mongo_uri),
                              timeout=TIMEOUT_S)
    finally:
        mongo_client.drop_database(name)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = _levelled(proc.stderr)
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"failed: {link}: ") and "/proc/" not in line, line
