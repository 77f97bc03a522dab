"""docs/install.md, done as a data engineer does it: the built wheel goes into a virtualenv of its own
that already runs Airflow, its DAG files into a DAGs folder, and Airflow parses them there.

``make test-install`` runs it (``make test`` does not: it builds a virtualenv, about a minute with
uv's cache).  Nothing of the checkout is on the new environment's path: its commands run in a
temporary folder, without PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).with_name("uv")
AIRFLOW_PIN = next(line.strip() for line in (REPO / "requirements.lock").read_text().splitlines()
                   if line.startswith("apache-airflow=="))
DAG_IDS = sorted(p.stem for p in (REPO / "dags").glob("*.py"))

PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"import_errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dag_ids": sorted(bag.dag_ids)}))
"""


def run(argv: list, *, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv}: {proc.stderr[-3000:]}"
    return proc


def plain_env(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCI_INGEST_", "MONGODB_", "AIRFLOW", "PYTHON",
                                                                    "DASK_", "VIRTUAL_ENV"))}
    env.update({"HOME": str(home), "AIRFLOW_HOME": str(home / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "SCI_INGEST_KEEP": "0"})  # no kept command process outlives the test
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """An Airflow virtualenv (Airflow first, as a deployment has it), then the wheel, then the DAGs."""
    top = tmp_path_factory.mktemp("install")
    work, home, dags = top / "work", top / "home", top / "dags"
    for folder in (work, home, dags):
        folder.mkdir()
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", top / "dist",
         REPO], cwd=work, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    wheel = next((top / "dist").glob("sci_ingest-*.whl"))
    venv = top / "airflow-venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", Path(sys._base_executable).resolve(), venv], cwd=work)  # noqa: SLF001
    lock = REPO / "requirements.lock"
    run([UV, "pip", "install", "--quiet", "--python", python, AIRFLOW_PIN, "-c", lock], cwd=work)
    run([UV, "pip", "install", "--quiet", "--python", python, wheel, "-c", lock], cwd=work)
    for dag in (venv / "share" / "sci-ingest" / "dags").glob("*.py"):
        shutil.copy(dag, dags)
    return {"venv": venv, "python": python, "work": work, "home": home, "dags": dags, "wheel": wheel}


def test_the_wheel_holds_the_packages_the_schemas_and_the_dags_and_no_checkout_is_used(deployment):
    d = deployment
    found = run([d["python"], "-c", "import ingest, analytics, ingest.config as c; "
                 "print(ingest.__file__); print(c.SCHEMAS_DIR); print(c.DAGS_DIR); print(c.IN_CHECKOUT)"],
                cwd=d["work"], env=plain_env(d["home"])).stdout.split()
    assert str(d["venv"]) in found[0] and str(REPO) not in found[0], found
    assert found[1] == str(d["venv"] / "share" / "sci-ingest" / "schemas") and found[3] == "False", found
    assert sorted(p.stem for p in d["dags"].glob("*.py")) == DAG_IDS
    suites = run([d["python"], "-c", "from analytics.validation.suites import load_suites; "
                  "print(len(load_suites()))"], cwd=d["work"], env=plain_env(d["home"])).stdout
    assert int(suites) == len(list((REPO / "schemas" / "expectations").glob("*.json")))


def test_airflow_parses_the_installed_dags_without_errors(deployment):
    d = deployment
    out = run([d["python"], "-c", PARSE, d["dags"]], cwd=d["work"], env=plain_env(d["home"])).stdout
    facts = json.loads(out.strip().splitlines()[-1])
    assert facts["import_errors"] == {} and facts["dag_ids"] == DAG_IDS, facts


def test_the_installed_command_with_the_production_setting_fails_at_once_naming_what_to_set(deployment):
    d = deployment
    cli = d["venv"] / "bin" / "sci-ingest"
    assert run([cli, "--version"], cwd=d["work"], env=plain_env(d["home"])).stdout.strip()
    proc = subprocess.run([cli, "run"], cwd=d["work"], capture_output=True, text=True, timeout=120,
                          env=plain_env(d["home"], SCI_INGEST_NO_EMBEDDED="1"))
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "MONGODB_URI" in proc.stderr, proc.stderr
    try:  # without the setting: the embedded server, in the home folder (not in site-packages)
        proc = subprocess.run([cli, "run"], cwd=d["work"], capture_output=True, text=True, timeout=300,
                              env=plain_env(d["home"]))
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode != 0 and len(errors) == 1 and "no bundled samples" in errors[0], proc.stderr
        assert (d["home"] / ".sci-ingest" / "db").is_dir()
    finally:
        subprocess.run([cli, "server", "stop"], cwd=d["work"], capture_output=True, timeout=120, env=plain_env(d["home"]))
    assert not list((d["venv"] / "lib").glob("python3.11/site-packages/.sci-ingest"))
