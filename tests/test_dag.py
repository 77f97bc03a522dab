"""The Airflow DAG ``sci_ingest``: it parses, stays light at parse time, and runs end to end.

Everything that imports Airflow runs in a subprocess with its own AIRFLOW_HOME
and sqlite metadata DB in a tmp dir, so the pytest process never loads
Airflow's global configuration (and never writes ``~/airflow``).

* ``dag_facts`` (module fixture, one interpreter, 10-25 s): imports the DAG file
  in a fresh interpreter and records ``sys.modules``, parses the folder with
  ``DagBag``, and exercises ``ingest.airflow.support`` against Airflow
  connections defined by ``AIRFLOW_CONN_*`` variables.
* ``test_dag_test_end_to_end`` (marked ``slow``; 1-2 min on 2 busy cores, of which
  ~35 s are Airflow's own start-up): creates the metadata DB in-process
  (``airflow.utils.db.initdb``: tables from the ORM, faster than the
  ``airflow db migrate`` CLI), then ``dag.test()`` runs load -> analyze -> validate
  in-process (real Dask LocalCluster, real Great Expectations) against the
  session's server (fixture ``mongo_uri``), reached through the Airflow
  connection ``mongo_default``, loading a small ad-hoc ``paths`` selection.
  Deselect with ``-m "not slow"``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pymongo
import pytest
from airflow_harness import materials_sample
from pymongo.uri_parser import parse_uri

from ingest.airflow.support import paths_param, resolve_mongo_uri, run_task
from ingest.errors import ConfigError, DatabaseError

REPO_ROOT = Path(__file__).resolve().parent.parent
DAGS_DIR = REPO_ROOT / "dags"
DAG_FILE = DAGS_DIR / "sci_ingest.py"
HEAVY_MODULES = (
    "pymongo", "bson", "dask", "distributed", "pandas", "numpy", "pyarrow", "pymongoarrow",
    "great_expectations", "Bio", "ingest.pipeline", "ingest.airflow.support",
)
RESULT_MARK = "@@RESULT@@ "


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """A hermetic environment for an Airflow subprocess: nothing inherited that could redirect it."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "SCI_INGEST_", "_AIRFLOW")) and k not in ("MONGODB_URI", "DASK_SCHEDULER_ADDRESS")
    }
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS_DIR),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
        SCI_INGEST_HOME=str(home / "sci-ingest"),
        SCI_INGEST_KEEP="0",  # no kept command process outlives the test
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.update(extra)
    return env


def run_python(code: str, env: dict[str, str], timeout: float) -> tuple[dict, str]:
    """Run ``code`` in a fresh interpreter; return (the JSON it printed after RESULT_MARK, its output)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )
    output = proc.stdout + "\n" + proc.stderr
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            if proc.returncode != 0:
                break
            return json.loads(line[len(RESULT_MARK):]), output
    tail = "\n".join(output.splitlines()[-60:])
    pytest.fail(f"subprocess exited {proc.returncode} without a result; last output:\n{tail}")


def task_errors(output: str, limit: int = 50) -> str:
    """The tracebacks of failed tasks in a ``dag.test()`` output (for assertion messages)."""
    lines = output.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if "Task failed with exception" in line:
            picked.extend(lines[i:i + limit])
    return "\n".join(picked) or "\n".join(lines[-limit:])


def airflow_conn_uri(mongo_uri: str) -> str | None:
    """``mongo_uri`` as an ``AIRFLOW_CONN_*`` value (conn type ``mongo``), if it has that shape."""
    parts = urlsplit(mongo_uri)
    if parts.scheme != "mongodb" or "," in parts.netloc:
        return None  # SRV / multi-host URIs do not fit Airflow's one-host connection model
    return "mongo" + mongo_uri[len("mongodb"):]


# ------------------------------------------------------------------ parse-time facts
FACTS_SCRIPT = f"""
import importlib.util, json, os, sys
RESULT_MARK = {RESULT_MARK!r}
facts = {{}}

# 1. Import the DAG file alone, as the dag-processor does, and see what it pulled in.
spec = importlib.util.spec_from_file_location("sci_ingest_dagfile", {str(DAG_FILE)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
facts["heavy_loaded"] = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)

# 2. Parse the folder with DagBag (examples are off via AIRFLOW__CORE__LOAD_EXAMPLES).
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={str(DAGS_DIR)!r})
facts["import_errors"] = {{k: str(v) for k, v in bag.import_errors.items()}}
facts["dag_ids"] = sorted(bag.dag_ids)
dag = bag.dags["sci_ingest"]  # get_dag() would query the metadata DB
facts["tasks"] = {{
    t.task_id: {{"upstream": sorted(t.upstream_task_ids), "downstream": sorted(t.downstream_task_ids),
                 "retries": t.retries, "retry_delay_s": t.retry_delay.total_seconds()}}
    for t in dag.tasks
}}
facts["schedule"] = str(dag.schedule)
facts["catchup"] = dag.catchup
facts["max_active_runs"] = dag.max_active_runs
facts["params"] = dag.params.dump()

# A backfill conf with paths validates; a wrong type is rejected by the param schema.
import copy
good = copy.deepcopy(dag.params); good.update({{"paths": ["/data/a.m10", "/data/mp"]}})
facts["good_conf"] = good.validate()
bad = copy.deepcopy(dag.params)
try:
    bad.update({{"paths": 5}}); bad.validate(); facts["bad_conf_rejected"] = False
except Exception as exc:
    facts["bad_conf_rejected"] = type(exc).__name__

# 3. ingest.airflow.support against AIRFLOW_CONN_* connections (env secrets backend).
from ingest.airflow.support import resolve_mongo_uri, run_task
from ingest.errors import ConfigError, ValidationFailed
conn = {{}}
conn["undefined"] = resolve_mongo_uri("sci_ingest_no_such_conn")
conn["mongo_default"] = resolve_mongo_uri()
os.environ["AIRFLOW_CONN_MONGO_TLS"] = json.dumps({{
    "conn_type": "mongo", "host": "db.example.org", "port": 27017, "login": "u s", "password": "p@ss",
    "schema": "admin", "extra": {{"ssl": True, "allow_insecure": True, "replicaSet": "rs0"}}}})
conn["tls"] = resolve_mongo_uri("mongo_tls")
def outcome(call):
    try:
        return call()
    except Exception as exc:
        return [type(exc).__module__ + "." + type(exc).__name__, str(exc), type(exc.__cause__).__name__]

os.environ["AIRFLOW_CONN_MONGO_WRONG"] = "mongodb://db.example.org:27017/"
conn["wrong_type"] = outcome(lambda: resolve_mongo_uri("mongo_wrong"))
os.environ["MONGODB_URI"] = "mongodb://from-env:1/"
conn["env_wins"] = resolve_mongo_uri()
del os.environ["MONGODB_URI"]
# production: the Variable forbids the embedded server; no connection is then a failure at once
os.environ["AIRFLOW_VAR_SCI_INGEST_NO_EMBEDDED"] = "true"
conn["no_embedded"] = outcome(lambda: resolve_mongo_uri("sci_ingest_no_such_conn"))
conn["no_embedded_with_conn"] = outcome(lambda: resolve_mongo_uri("mongo_tls"))
os.environ["AIRFLOW_VAR_SCI_INGEST_NO_EMBEDDED"] = "perhaps"
conn["no_embedded_bad"] = outcome(lambda: resolve_mongo_uri("sci_ingest_no_such_conn"))
del os.environ["AIRFLOW_VAR_SCI_INGEST_NO_EMBEDDED"]
facts["conn"] = conn

# ... and so does SCI_INGEST_NO_EMBEDDED in the workers' environment, at the task's first step
from ingest.pipeline import task_load
os.environ["SCI_INGEST_NO_EMBEDDED"] = "1"
home = os.environ["SCI_INGEST_HOME"]
facts["no_embedded_task"] = outcome(lambda: run_task(task_load, "manual__1", mongo_uri=None))
facts["no_embedded_home"] = sorted(os.listdir(home)) if os.path.isdir(home) else []
del os.environ["SCI_INGEST_NO_EMBEDDED"]

def fails():
    raise ValidationFailed("2 critical expectations failed", [{{"expectation": "hits.evalue >= 0"}}])
try:
    run_task(fails)
except Exception as exc:
    facts["fail_exc"] = [type(exc).__module__ + "." + type(exc).__name__, str(exc),
                         type(exc.__cause__).__name__]

print(RESULT_MARK + json.dumps(facts, default=str))
"""


@pytest.fixture(scope="module")
def dag_facts(tmp_path_factory, mongo_uri) -> dict:
    home = tmp_path_factory.mktemp("airflow_facts")
    conn = airflow_conn_uri(mongo_uri)
    extra = {"AIRFLOW_CONN_MONGO_DEFAULT": conn} if conn else {}
    facts, _ = run_python(FACTS_SCRIPT, airflow_env(home, **extra), timeout=180)
    facts["conn_given"] = conn
    return facts


def test_dag_file_imports_without_errors(dag_facts):
    assert dag_facts["import_errors"] == {}
    assert dag_facts["dag_ids"] == ["sci_ingest", "sci_ingest_backfill", "sci_ingest_curated", "sci_ingest_landing"]


def test_dag_shape(dag_facts):
    tasks = dag_facts["tasks"]
    assert set(tasks) == {"load", "analyze", "validate"}
    assert tasks["load"]["upstream"] == [] and tasks["load"]["downstream"] == ["analyze"]
    assert tasks["analyze"]["upstream"] == ["load"] and tasks["analyze"]["downstream"] == ["validate"]
    assert tasks["validate"]["upstream"] == ["analyze"] and tasks["validate"]["downstream"] == []
    for task_id, info in tasks.items():
        assert info["retries"] >= 1, task_id
        assert 0 < info["retry_delay_s"], task_id  # a setting: retries wait
    assert dag_facts["schedule"] == "@daily"
    assert dag_facts["catchup"] is False
    assert dag_facts["max_active_runs"] == 1
    assert dag_facts["params"] == {"paths": [], "full": False, "on_validation_failure": "fail"}


def test_paths_param_schema(dag_facts):
    assert dag_facts["good_conf"] == {"paths": ["/data/a.m10", "/data/mp"], "full": False, "on_validation_failure": "fail"}
    assert dag_facts["bad_conf_rejected"] == "ParamValidationError"


def test_dag_file_top_level_is_light(dag_facts):
    assert dag_facts["heavy_loaded"] == [], (
        f"importing {DAG_FILE.name} loaded {dag_facts['heavy_loaded']}: move those imports into the task functions"
    )


def test_resolve_mongo_uri_from_airflow_connections(dag_facts, mongo_uri):
    conn = dag_facts["conn"]
    assert conn["undefined"] is None
    assert conn["env_wins"] == "mongodb://from-env:1/"
    assert conn["tls"] == (
        "mongodb://u+s:p%40ss@db.example.org:27017/admin?replicaSet=rs0&tls=true&tlsAllowInvalidCertificates=true"
    )
    parsed = parse_uri(conn["tls"])  # pymongo reads it back as the connection meant it
    assert (parsed["username"], parsed["password"], parsed["database"]) == ("u s", "p@ss", "admin")
    assert dict(parsed["options"]) == {"replicaSet": "rs0", "tls": True, "tlsAllowInvalidCertificates": True}
    # a connection that cannot work fails the task at once (Airflow does not retry it)
    exc_type, message, cause = conn["wrong_type"]
    assert exc_type == "airflow.sdk.exceptions.AirflowFailException" and cause == "ConfigError"
    assert message.startswith("ConfigError: ") and "must be 'mongo'" in message
    if dag_facts["conn_given"] is None:
        pytest.skip(f"test server URI {mongo_uri!r} cannot be expressed as a one-host Airflow connection")
    # The URI built from AIRFLOW_CONN_MONGO_DEFAULT reaches the real test server.
    client = pymongo.MongoClient(conn["mongo_default"], serverSelectionTimeoutMS=5000)
    try:
        assert client.admin.command("ping")["ok"] == 1
    finally:
        client.close()


def test_a_task_without_a_database_fails_at_once_where_the_embedded_server_is_forbidden(dag_facts):
    """The Variable sci_ingest_no_embedded (or SCI_INGEST_NO_EMBEDDED in the workers' environment):
    no mongo_default connection fails the task without retries, naming what to set, and starts no
    server; a configured connection is used as before; a value that is not a boolean is refused."""
    conn = dag_facts["conn"]
    for outcome in (conn["no_embedded"], dag_facts["no_embedded_task"]):
        exc_type, message, cause = outcome
        assert exc_type == "airflow.sdk.exceptions.AirflowFailException" and cause == "ConfigError", outcome
        assert "\n" not in message and "embedded server is off" in message, message
        assert "MONGODB_URI" in message and "mongo_default" in message, message
    assert conn["no_embedded_with_conn"].startswith("mongodb://u+s:p%40ss@db.example.org:27017/admin")
    assert conn["no_embedded_bad"][0].endswith("AirflowFailException") and "'perhaps'" in conn["no_embedded_bad"][1]
    assert "db" not in dag_facts["no_embedded_home"] and "server.json" not in dag_facts["no_embedded_home"]


def test_run_task_fails_fast_on_deterministic_errors(dag_facts):
    exc_type, message, cause = dag_facts["fail_exc"]
    assert exc_type == "airflow.sdk.exceptions.AirflowFailException"
    assert message.startswith("ValidationFailed: 2 critical expectations failed")
    assert "hits.evalue >= 0" in message
    assert cause == "ValidationFailed"


# ------------------------------------------------------------------ no Airflow needed
def test_run_task_passes_results_and_transient_errors():
    assert run_task(lambda run_id, mongo_uri=None: {"run_id": run_id, "uri": mongo_uri}, "r1", mongo_uri="m") == {
        "run_id": "r1", "uri": "m",
    }

    def transient(run_id):
        raise DatabaseError("connection refused")

    with pytest.raises(DatabaseError):  # left to Airflow's retries
        run_task(transient, "r1")


def test_paths_param():
    assert paths_param(None) is None
    assert paths_param({}) is None
    assert paths_param({"paths": []}) is None
    assert paths_param({"paths": ["a.m10", " b.json ", ""]}) == ["a.m10", "b.json"]
    assert paths_param({"paths": "a.m10, b.json\nc"}) == ["a.m10", "b.json", "c"]
    with pytest.raises(ConfigError):
        paths_param({"paths": 5})


def test_resolve_mongo_uri_prefers_env(monkeypatch):
    monkeypatch.setenv("MONGODB_URI", "  mongodb://db.example:27017/  ")
    assert resolve_mongo_uri() == "mongodb://db.example:27017/"
    assert resolve_mongo_uri(use_airflow=True) == "mongodb://db.example:27017/"


def test_resolve_mongo_uri_outside_airflow_leaves_airflow_alone(tmp_path):
    """A plain (non-Airflow) process neither imports Airflow nor reads its connections by default."""
    code = f"""
        import json, sys
        from ingest.airflow.support import resolve_mongo_uri
        auto = resolve_mongo_uri()
        loaded = "airflow" in sys.modules
        print({RESULT_MARK!r} + json.dumps({{"auto": auto, "airflow_loaded": loaded,
                                             "never": resolve_mongo_uri(use_airflow=False)}}))
    """
    env = airflow_env(tmp_path / "home", AIRFLOW_CONN_MONGO_DEFAULT="mongo://db.example.org:27017/")
    result, _ = run_python(code, env, timeout=60)
    assert result == {"auto": None, "airflow_loaded": False, "never": None}
    assert not (tmp_path / "home" / "logs").exists()


# ------------------------------------------------------------------ end to end (SLOW)
def _pipeline_missing() -> str | None:
    if importlib.util.find_spec("ingest.pipeline") is None:
        return "ingest/pipeline.py does not exist yet (the lead writes it)"
    import ingest.pipeline as pipeline

    missing = [name for name in ("task_load", "task_analyze", "task_validate") if not hasattr(pipeline, name)]
    if missing:
        return f"ingest.pipeline lacks {', '.join(missing)}"
    return None


E2E_SEARCH = REPO_ROOT / "samples" / "pasta" / "ssearch36_prot.m10"

DAG_TEST_SCRIPT = f"""
import json, os
RESULT_MARK = {RESULT_MARK!r}
from airflow.utils.db import initdb
initdb()  # fresh sqlite metadata DB: tables from the ORM, stamped at head

from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={str(DAGS_DIR)!r})
assert not bag.import_errors, bag.import_errors
dag = bag.dags["sci_ingest"]  # get_dag() would query the metadata DB
# A failing task would otherwise sit in up_for_retry for minutes; the retry policy
# itself is asserted by test_dag_shape.
for t in dag.tasks:
    t.retries = 0
dr = dag.test(run_conf=json.loads(os.environ["DAG_RUN_CONF"]))

from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
with create_session() as session:
    tis = session.query(TaskInstance).filter_by(dag_id=dag.dag_id, run_id=dr.run_id).all()
    states = {{ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in tis}}
    xcoms = session.query(XComModel).filter_by(dag_id=dag.dag_id, run_id=dr.run_id, key="return_value").all()
    returned = {{x.task_id: XComModel.deserialize_value(x) for x in xcoms}}
print(RESULT_MARK + json.dumps({{"run_id": dr.run_id, "state": str(dr.state), "tis": states,
                                  "returned": returned}}, default=str))
"""


@pytest.mark.slow
def test_dag_test_end_to_end(tmp_path, mongo_uri, mongo_client):
    reason = _pipeline_missing()
    if reason:
        pytest.skip(reason)
    inputs = [E2E_SEARCH, materials_sample(tmp_path / "in")]
    db_name = f"t_dag_{uuid.uuid4().hex[:10]}"
    conn = airflow_conn_uri(mongo_uri)
    # Prefer the Airflow-connection route (exercises resolve_mongo_uri inside a real task);
    # fall back to MONGODB_URI for URIs an Airflow connection cannot express.
    target = {"AIRFLOW_CONN_MONGO_DEFAULT": conn} if conn else {"MONGODB_URI": mongo_uri}
    # A small ad-hoc load through the ``paths`` param (the bundled samples in full take minutes
    # on 2 cores): one FASTA -m 10 file and 300 records of the Materials-Project sample.
    conf = {"paths": [str(p) for p in inputs]}
    env = airflow_env(tmp_path / "airflow", SCI_INGEST_DB=db_name, DAG_RUN_CONF=json.dumps(conf), **target)
    try:
        result, output = run_python(DAG_TEST_SCRIPT, env, timeout=420)
        expected = {"load": "success", "analyze": "success", "validate": "success"}
        assert result["tis"] == expected, f"task states {result['tis']}; failures:\n{task_errors(output)}"
        assert result["state"].endswith("success"), result
        run_id = result["run_id"]
        load_summary = result["returned"]["load"]
        assert load_summary["run_id"] == run_id  # the Airflow run id is the ingest run id
        assert load_summary["files_loaded"] == len(inputs), load_summary  # the paths param was honoured
        db = mongo_client[db_name]
        for name in ("searches", "hits", "materials"):
            assert db[name].estimated_document_count() > 0, f"no documents in {db_name}.{name}"
    finally:
        mongo_client.drop_database(db_name)
