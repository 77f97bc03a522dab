"""Validation gates the run, and checks the tables whole: through the CLI, against a real server.

* a failed expectation of severity ``error`` ends the run ``validation failed (N of M suites)``
  with exit 4 (the one table, ``ingest.errors.Exit``), the ``validate`` row failed in the timings;
  a ``warning`` alone leaves it green; a suite that checked nothing is said, never counted passed;
* the table checks (``analytics.validation.tables``): a half-size landing is flagged by the volume
  check, a hit whose search is gone and a document the ledger says is there but is not fail it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ingest.errors import Exit

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
PASTA = sorted((REPO / "samples" / "pasta").glob("*.m10"))


@pytest.fixture()
def cli(tmp_path, mongo_uri, mongo_client):
    """(sci-ingest runner -> (exit code, JSON report, stderr), the database)."""
    name = f"gates_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": name,
           "SCI_INGEST_KEEP": "0"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*args: str, text: bool = False) -> tuple[int, dict | str, str]:
        one = ["--workers", "1"] if args[0] in ("run", "load") else []
        proc = subprocess.run([str(BIN), *args, *one, *([] if text else ["--json"])], env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.stdout.strip(), proc.stderr[-3000:]
        return proc.returncode, proc.stdout if text else json.loads(proc.stdout), proc.stderr

    yield run, mongo_client[name]
    mongo_client.drop_database(name)


def _materials(path: Path, ids: range, **changes) -> Path:
    """A materials file: real records of the bundled samples under new ids (``changes`` set on each)."""
    with gzip.open(REPO / "samples" / "materials" / "materials.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for _, line in zip(range(40), fh)]
    path.write_text("".join(json.dumps({**records[i % len(records)], "material_id": f"mp-88{i:04d}", **changes}) + "\n"
                            for i in ids))
    return path


def _tables(report: dict) -> dict:
    return next(s for s in report["validation"]["suites"] if s["suite"] == "tables")


def _failed(suite: dict) -> dict[str, dict]:
    return {f["expectation"] + ":" + json.dumps(f["kwargs"], sort_keys=True): f for f in suite["failures"]}


def test_an_error_fails_the_run_a_warning_does_not(cli, tmp_path):
    run, db = cli
    land = tmp_path / "land"
    land.mkdir()
    _materials(land / "fine.json", range(0, 6))
    code, report, err = run("run", str(land))
    assert code == Exit.OK and report["status"] == "ok", err[-2000:]
    assert report["validation"]["verdict"].startswith("passed")
    nothing = [s for s in report["validation"]["suites"] if s["status"].startswith("checked nothing")]
    assert nothing and not any(s["success"] or s["failed"] for s in nothing)  # neither passed nor failed

    # an implausible formation energy is a warning: reported, the run stays green
    _materials(land / "odd.json", range(6, 8), formation_energy_per_atom=42.0)
    code, report, err = run("run", str(land))
    assert code == Exit.OK and report["status"] == "ok", err[-2000:]
    materials = next(s for s in report["validation"]["suites"] if s["suite"] == "materials")
    assert materials["success"] and not materials["failed"]
    assert [f["severity"] for f in materials["failures"]] == ["warning"]

    # nelements that is not len(elements) is an error: the run is not green, exit 4
    _materials(land / "bad.json", range(8, 10), nelements=7)
    code, report, err = run("run", str(land))
    assert code == Exit.VALIDATION == 4, (code, err[-2000:])
    suites = len(report["validation"]["suites"])
    assert report["status"] == f"validation failed (1 of {suites} suites)"
    materials = next(s for s in report["validation"]["suites"] if s["suite"] == "materials")
    assert materials["failed"] and not materials["success"]
    assert any(f["severity"] == "error" and f["column"] == "nelements, elements.len" for f in materials["failures"])
    row = db.stage_timings.find_one({"run_id": report["run_id"], "stage": "validate", "scope": "run"})
    assert row["status"] == "failed" and row["detail"]["failed"] == ["materials"], row

    # the text report says it the same way
    code, text, err = run("validate", text=True)
    assert code == 4, err[-2000:]
    assert f"status: validation failed (1 of {suites} suites) (exit 4)" in text
    assert "ERROR materials: expect_column_pair_values_to_be_equal" in text


def test_a_half_size_landing_is_flagged_by_the_volume_check(cli, tmp_path):
    run, db = cli
    first = 0
    for day in range(4):  # four usual landings of four files
        land = tmp_path / f"day{day}"
        land.mkdir()
        for k in range(4):
            _materials(land / f"m{k}.json", range(first, first + 5))
            first += 5
        code, report, err = run("load", str(land))
        assert code == Exit.OK and report["files"]["files_loaded"] == 4, err[-2000:]
    code, report, err = run("validate")
    assert code == Exit.OK, err[-2000:]
    volume = _failed(_tables(report))
    assert not any(k.startswith("expect_load_volume_to_be_usual") for k in volume), volume

    half = tmp_path / "half"
    half.mkdir()
    for k in range(2):  # half a day's files
        _materials(half / f"m{k}.json", range(first, first + 5))
        first += 5
    code, report, err = run("load", str(half))
    assert code == Exit.OK, err[-2000:]
    code, report, err = run("validate", "--changed")
    tables = _tables(report)
    flagged = [f for f in tables["failures"] if f["expectation"] == "expect_load_volume_to_be_usual"]
    assert len(flagged) == 1 and flagged[0]["severity"] == "warning", tables
    seen = flagged[0]["observed_value"]
    assert (seen["files"], seen["usual_files"], seen["documents"], seen["usual_documents"]) == (2, 4, 10, 20)
    assert code == Exit.OK  # a warning: flagged in the report, the run green


def test_a_hit_whose_search_is_gone_and_a_missing_document_fail_it(cli, tmp_path):
    run, db = cli
    land = tmp_path / "land"
    land.mkdir()
    for p in PASTA[:3]:
        shutil.copy(p, land / p.name)
    code, report, err = run("load", str(land))
    assert code == Exit.OK, err[-2000:]
    code, report, err = run("validate")
    assert code == Exit.OK and not _tables(report)["failures"], (err[-2000:], _tables(report))

    gone = db.hits.find_one({}, {"search_id": 1})["search_id"]
    db.searches.delete_one({"_id": gone})  # lost behind the loader's back
    code, report, err = run("validate")
    assert code == Exit.VALIDATION, err[-2000:]
    failed = _failed(_tables(report))
    refs = failed['expect_references_to_exist:{"collection": "hits", "field": "search_id", "in": "searches"}']
    assert refs["severity"] == "error" and refs["sample"] == [gone] and refs["unexpected_count"] == 1
    count = failed['expect_table_row_count_to_equal:{"collection": "searches", "value": '
                   f'{db.searches.count_documents({}) + 1}}}']
    assert count["observed_value"] == db.searches.count_documents({})
    assert report["status"].startswith("validation failed (")


def test_the_airflow_validate_task_fails_on_an_error_unless_told_to_warn(cli, tmp_path, monkeypatch, mongo_uri, caplog):
    from ingest.errors import ValidationFailed
    from ingest.pipeline import task_validate

    run, db = cli
    land = tmp_path / "land"
    land.mkdir()
    _materials(land / "bad.json", range(0, 4), nelements=7)
    code, report, err = run("load", str(land))
    assert code == Exit.OK, err[-2000:]
    monkeypatch.setenv("SCI_INGEST_DB", db.name)
    monkeypatch.setenv("SCI_INGEST_HOME", str(tmp_path / "home"))
    with pytest.raises(ValidationFailed) as caught:
        task_validate("manual__fail", mongo_uri=mongo_uri, on_failure="fail")
    assert "validation failed (1 of" in str(caught.value) and "nelements, elements.len" in str(caught.value)
    with caplog.at_level("WARNING", logger="ingest.pipeline"):
        result = task_validate("manual__warn", mongo_uri=mongo_uri, on_failure="warn")
    assert result["verdict"].startswith("validation failed (1 of") and result["failed_suites"] == 1
    assert any("the DAG is set to warn" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("given", ["soon", "-3", "nan", "0"])
def test_a_bad_freshness_setting_is_one_line(monkeypatch, given):
    from analytics.validation.tables import FRESH_ENV, fresh_within
    from ingest.errors import ConfigError

    monkeypatch.setenv(FRESH_ENV, given)
    with pytest.raises(ConfigError) as caught:
        fresh_within()
    assert FRESH_ENV in str(caught.value) and repr(given) in str(caught.value) and "\n" not in str(caught.value)
    monkeypatch.setenv(FRESH_ENV, "36")
    assert fresh_within() == 36.0
