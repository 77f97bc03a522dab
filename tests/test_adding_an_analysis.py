"""Adding an analysis touches one module and one suite: the example diff of docs/development.md, applied and run.

The diff under "Adding an analysis" in docs/development.md is applied to a copy of the
project; the copy's ``sci-ingest`` (the same console script, with the copy first
on ``PYTHONPATH``) must list the new analysis, run it alone on loaded samples,
publish its output, and validate it with the new suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"


def example_diff() -> str:
    text = (REPO / "docs" / "development.md").read_text()
    section = text.split("## Adding an analysis", 1)[1]
    match = re.search(r"```diff\n(.*?)```", section, re.S)
    assert match, "docs/development.md has no diff under 'Adding an analysis'"
    return match.group(1)


def test_the_example_diff_adds_one_module_and_one_suite():
    files = re.findall(r"^\+\+\+ b/(\S+)$", example_diff(), re.M)
    assert len(files) == 2, files
    module, suite = sorted(files)
    assert re.fullmatch(r"analytics/analyses/[a-z_]+\.py", module), module
    assert re.fullmatch(r"schemas/expectations/[a-z_]+\.json", suite), suite
    assert not (REPO / module).exists() and not (REPO / suite).exists(), "the example is not shipped"
    assert re.findall(r"^--- (\S+)$", example_diff(), re.M) == ["/dev/null", "/dev/null"]


@pytest.fixture()
def project_copy(tmp_path) -> Path:
    copy = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("ingest", "analytics", "schemas", "samples"):
        shutil.copytree(REPO / part, copy / part, ignore=ignore)
    patch = tmp_path / "example.diff"
    patch.write_text(example_diff())
    done = subprocess.run(["git", "apply", "--verbose", str(patch)], cwd=copy, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return copy


def test_the_example_analysis_runs_and_validates(project_copy, mongo_uri, mongo_client, tmp_path):
    db_name = f"t_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(project_copy), "SCI_INGEST_HOME": str(tmp_path / "state"),
           "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": db_name}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def cli(*args):
        proc = subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=600)
        assert proc.returncode == 0, (args, proc.stderr[-3000:])
        return json.loads(proc.stdout) if "--json" in args else proc.stdout

    try:
        listed = {a["name"]: a for a in cli("analyze", "--list", "--json")["analyses"]}
        assert listed["library_summary"]["output"] == "library_summary"
        assert {"best_hits", "oxide_formation_energy"} <= set(listed)

        cli("load", "-q", str(project_copy / "samples" / "pasta"))
        report = cli("analyze", "library_summary", "--json")
        (result,) = report["analysis"]
        assert result["name"] == "library_summary" and result["records_out"] > 0
        assert [s["stage"] for s in report["stages"]] == ["start-up", "connect", "cluster", "analyze.library_summary",
                                                          "close"]
        assert report["stages"][2]["detail"]["scheduler"] == "in-process"  # small work: no worker processes

        db = mongo_client[db_name]
        rows = list(db.library_summary.find())
        assert len(rows) == result["records_out"]
        assert sum(r["n_hits"] for r in rows) == db.hits.count_documents({"library": {"$exists": True}})
        assert sum(r["n_searches"] for r in rows) == len(db.hits.distinct("search_id"))
        assert not db.list_collection_names(filter={"name": "query_best_hits"})  # only what was named ran

        text = cli("analyze", "library_summary")  # again, as a person reads it
        assert f"analysis library_summary: {result['records_in']:,} in -> {result['records_out']:,} out" in text
        assert "files:" not in text and "documents:" not in text  # no load step ran

        validation = cli("validate", "--json")["validation"]
        suites = {s["suite"]: s for s in validation["suites"]}
        assert suites["library_summary"]["success"] and suites["library_summary"]["rows"] == len(rows)
    finally:
        mongo_client.drop_database(db_name)
