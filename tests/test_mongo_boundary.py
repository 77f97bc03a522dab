"""The MongoDB boundary: one place builds clients, one context manager maps driver errors.

The entry points are run as users run them (the console script, a subprocess)
against a server that has been started and stopped again, so nothing answers
at its address.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.errors import ConfigError, DatabaseError, UnsupportedFeature
from ingest.server.embedded import EmbeddedServer
from ingest.store.mongo import client, db_errors, ping, shared_client
from ingest.timing import Timings

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
SOURCES = sorted(p for d in ("ingest", "analytics", "dags") for p in (REPO / d).rglob("*.py"))


@pytest.fixture(scope="module")
def stopped_uri(tmp_path_factory) -> str:
    """The URI of a real server that was started and then stopped (a short selection timeout)."""
    state = tmp_path_factory.mktemp("stopped")
    server = EmbeddedServer(state / "db", log_path=state / "server.log")
    server.start()
    uri = server.uri
    server.stop()
    assert ping(uri) is None
    return uri.replace("?directConnection=true", "?directConnection=true&serverSelectionTimeoutMS=1500")


@pytest.mark.parametrize("argv", [
    ["load", "samples/pasta/ssearch36_prot.m10"],
    ["analyze"],
    ["validate"],
    ["timings"],
    ["shard"],
    ["run"],
])
def test_every_entry_point_reports_a_stopped_server_in_one_line(argv, stopped_uri, tmp_path):
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path), "MONGODB_URI": stopped_uri}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([str(BIN), *argv], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    port = stopped_uri.split(":")[2].split("/")[0]
    assert lines[0].startswith("error: ") and "cannot reach MongoDB at mongodb://127.0.0.1:" + port in lines[0]
    assert "Topology Description" not in lines[0] and "refused" in lines[0].lower(), lines[0]


def test_a_malformed_uri_is_a_config_error():
    with pytest.raises(ConfigError, match="bad MongoDB URI"):
        client("mongodb://host:notaport/")
    with pytest.raises(ConfigError, match="bad MongoDB URI .mongodb://u:\\*\\*\\*@h:99999/"):
        client("mongodb://u:secret@h:99999/")


def test_uri_options_win_over_the_defaults():
    assert client("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1234").options.server_selection_timeout == 1.234
    built = client("mongodb://127.0.0.1:1/", write_concern={"w": 2, "j": True})
    assert built.options.pool_options.max_pool_size == 16
    assert built.write_concern.document == {"w": 2, "j": True}
    # fail fast on a server that is not there, but let a busy one take its time to answer the
    # heartbeat: a late heartbeat cancels every read in flight (the embedded server answered
    # nothing for 7.4 s while it sorted 600,000 hits, and a 3 s wait cancelled the analysis)
    assert built.options.server_selection_timeout == 3.0
    assert built.options.pool_options.connect_timeout == 60.0
    assert client("mongodb://127.0.0.1:1/?connectTimeoutMS=5000").options.pool_options.connect_timeout == 5.0
    # a server on another host: pymongo's own 20 s, so that a silent one (a link down) is given up
    # sooner (tests/test_hosts.py measures it); selection waits 10 s for it
    remote = client("mongodb://db.example.org:27017/")
    assert remote.options.pool_options.connect_timeout == 20.0 and remote.options.server_selection_timeout == 10.0
    assert client("mongodb://db.example.org/?connectTimeoutMS=5000").options.pool_options.connect_timeout == 5.0


def test_driver_errors_become_project_errors_with_the_cause_kept(mongo_uri, db):
    db.things.insert_one({"_id": 1})
    with pytest.raises(DatabaseError, match="adding a thing: .*duplicate key") as info:
        with db_errors("adding a thing"):
            db.things.insert_one({"_id": 1})
    assert type(info.value.__cause__).__module__.startswith("pymongo")
    with pytest.raises(UnsupportedFeature, match="a made-up command: the server does not support"):
        with db_errors("a made-up command"):
            db.command("sciIngestNoSuchCommand")
    with pytest.raises(ValueError):  # not a driver error: passes through untouched
        with db_errors("nothing"):
            raise ValueError("mine")


def test_shared_client_is_one_per_process_and_uri(mongo_uri):
    assert shared_client(mongo_uri) is shared_client(mongo_uri)
    assert shared_client(mongo_uri) is not shared_client(mongo_uri + "&appname=other")


def test_a_retried_stage_replaces_its_timing_rows(db):
    for attempt in range(2):  # the same run id, as when Airflow retries a task
        timings = Timings("run-retry", "SecantusDB", db.stage_timings)
        with timings.stage("load") as rec:
            rec.records_in = rec.records_out = 10 + attempt
        with timings.stage("load", file="/data/a.m10"):
            pass
    rows = list(db.stage_timings.find({"run_id": "run-retry"}))
    assert sorted(r["_id"] for r in rows) == ["run-retry:load", "run-retry:load:/data/a.m10"]
    assert next(r for r in rows if r["_id"] == "run-retry:load")["records_in"] == 11


def _calls_and_handlers(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "MongoClient":
                yield "constructs MongoClient", node.lineno
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = ast.unparse(node.type)
            if any(n in caught for n in ("PyMongoError", "BulkWriteError", "OperationFailure", "ConnectionFailure")):
                yield f"catches {caught}", node.lineno
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pymongo.errors"):
            yield "imports pymongo.errors", node.lineno


def test_only_the_boundary_builds_clients_and_catches_driver_errors():
    offenders = [f"{p.relative_to(REPO)}:{line}: {what}"
                 for p in SOURCES if p != REPO / "ingest" / "store" / "mongo.py"
                 for what, line in _calls_and_handlers(p)]
    assert offenders == []
    sites = [line for what, line in _calls_and_handlers(REPO / "ingest" / "store" / "mongo.py") if what == "constructs MongoClient"]
    assert len(sites) == 1, f"ingest/store/mongo.py builds clients at lines {sites}: one place, client()"
