"""`sci-ingest check`: the table of what a deployment can do and the exit code, the CLI as a subprocess
against real servers: the embedded server without authentication (and the example of docs/cluster.md),
with `--auth` as its administrator and as a read-only user, and a server and a scheduler nobody
answers at.  A scheduler on another host (a network namespace) is tests/test_hosts.py's.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "sci-ingest"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "cluster.md"
#: Every row a check of a reachable server has (the plugin's readers' included).
ROWS = {"server", "user", "rights: load", "rights: analyze", "rights: validate", "rights: query/export",
        "journaled writes", "transactions", "hashed indexes", "sharding (mongos)", "reads: explain",
        "reads: key ranges", "reads: one stream", "known differences", "dask scheduler"}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": ""}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.pop("SCI_INGEST_DASK_TLS", None)
    return subprocess.run([str(BIN), "check", *args], capture_output=True, text=True, env=env, timeout=300)


def _rows(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    report = json.loads(proc.stdout)
    rows = {r["check"]: r for r in report["checks"]}
    assert report["ok"] == (proc.returncode == 0)
    assert report["missing"] == [r["check"] for r in report["checks"] if r["status"] == "missing"]
    return rows


def _table(text: str) -> list[tuple[str, str, str]]:
    """(check, status, needed by) of each row of a printed table."""
    lines = text.strip().splitlines()
    assert set(lines[1].replace(" ", "")) == {"-"}, lines[:2]
    out = []
    for line in lines[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        out.append((cells[0], cells[1], cells[-1]))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    subprocess.run([str(BIN), "server", "stop"], env={**os.environ, "SCI_INGEST_HOME": str(home)},
                   capture_output=True, timeout=120)


def test_the_embedded_server_has_what_the_pipeline_needs_as_docs_show(mongo_uri, mongo_client, tmp_path):
    name = f"t_check_{uuid.uuid4().hex[:8]}"
    try:
        proc = _cli(tmp_path, "--mongo-uri", mongo_uri, "--db", name)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        printed = _table(proc.stdout)
        assert {check for check, _, _ in printed} == ROWS
        statuses = {check: status for check, status, _ in printed}
        assert all(s == "ok" for c, s in statuses.items() if c.startswith(("rights:", "reads:")) or c == "server")
        assert statuses["dask scheduler"] == "n/a"  # none configured: a private cluster
        # every row asked for real: what it found is the server's answer, whatever the server
        assert statuses["journaled writes"] == "ok"
        assert statuses["transactions"] in ("ok", "n/a")  # n/a only on a standalone
        assert statuses["hashed indexes"] in ("ok", "warn")
        # the scratch collections are gone, and nothing else was written
        assert [c for c in mongo_client[name].list_collection_names() if c.startswith("_sci_ingest_")] == []
        # docs/cluster.md shows this table for the embedded server: the same rows, statuses, needs
        shown = re.search(r"^```\n(check +status .*?)^```", DOCS.read_text(), re.M | re.S)
        assert shown, "docs/cluster.md shows the table of `sci-ingest check`"
        assert _table(shown.group(1)) == printed
    finally:
        mongo_client.drop_database(name)


def test_auth_the_administrator_has_everything_a_read_only_user_lacks_the_writes(home):
    started = subprocess.run([str(BIN), "server", "start", "--auth"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": ""})
    assert started.returncode == 0, started.stderr
    added = subprocess.run([str(BIN), "server", "add-user", "reader", "--read-only"], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": ""})
    assert added.returncode == 0, added.stderr

    admin = _cli(home, "--json")  # the home's credentials: its administrator
    assert admin.returncode == 0, admin.stdout + admin.stderr
    rows = _rows(admin)
    assert set(rows) == ROWS
    assert "roles: root on admin" in rows["user"]["detail"]
    assert all(rows[c]["status"] == "ok" for c in rows if c.startswith("rights:"))

    reader = json.loads((home / "users" / "reader.json").read_text())
    host = json.loads((home / "server.json").read_text())["uri"].split("://", 1)[1].split("/")[0]
    uri = f"mongodb://reader:{reader['password']}@{host}/?authSource=admin&directConnection=true"
    proc = _cli(home, "--mongo-uri", uri, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows(proc)
    assert "roles: read on sci_ingest" in rows["user"]["detail"]
    for command in ("load", "analyze", "validate"):
        assert rows[f"rights: {command}"]["status"] == "missing"
        assert "may not insert" in rows[f"rights: {command}"]["detail"]
        assert "readWrite" in rows[f"rights: {command}"]["detail"]
    assert "dropIndex" in rows["rights: load"]["detail"]
    assert "renameCollectionSameDB" in rows["rights: analyze"]["detail"]
    assert rows["rights: query/export"]["status"] == "ok"
    assert rows["journaled writes"]["status"] == "n/a"  # not asked: the user may not insert
    assert rows["reads: key ranges"]["status"] == "n/a"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: missing what the pipeline needs: rights: load ("), lines
    assert "rights: query/export" not in lines[0] and reader["password"] not in proc.stdout + proc.stderr
    assert lines[0] in DOCS.read_text()  # docs/cluster.md shows this line


def test_a_server_and_a_scheduler_nobody_answers_at_are_named(tmp_path):
    uri = f"mongodb://127.0.0.1:{_free_port()}/?serverSelectionTimeoutMS=500"
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    proc = _cli(tmp_path, "--mongo-uri", uri, "--scheduler", nobody)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [c for c, s, _ in _table(proc.stdout) if s == "missing"] == ["server", "dask scheduler"]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "server (connecting: cannot reach MongoDB" in lines[0], lines
    assert f"dask scheduler (cannot reach {nobody})" in lines[0]

    tls = _cli(tmp_path, "--mongo-uri", uri, "--scheduler", f"tls://127.0.0.1:{_free_port()}", "--json")
    rows = _rows(tls)  # a tls:// scheduler with no certificate to show it: said, not tried
    assert tls.returncode == 1 and rows["dask TLS"]["status"] == "missing"
    assert "SCI_INGEST_DASK_TLS" in rows["dask TLS"]["detail"] and rows["dask scheduler"]["status"] == "n/a"
