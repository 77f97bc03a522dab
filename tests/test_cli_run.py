"""End to end: the `sci-ingest` console script against a real server process."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_docs import quickstart_counts

from ingest.store.outputs import uri_server

BIN = Path(sys.executable).parent / "sci-ingest"


def sci_ingest(*args, env_extra=None, check_json=True):
    env = {**os.environ, **(env_extra or {})}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=600)
    data = json.loads(proc.stdout) if check_json and "--json" in args else None
    return proc, data


@pytest.fixture()
def dbname(mongo_client):
    name = f"e2e_{uuid.uuid4().hex[:8]}"
    yield name
    mongo_client.drop_database(name)


def test_run_twice_json(mongo_uri, mongo_client, dbname, tmp_path):
    env = {"SCI_INGEST_HOME": str(tmp_path / "state")}
    before = dt.datetime.now(dt.UTC)
    proc, first = sci_ingest("run", "--json", "--mongo-uri", mongo_uri, "--db", dbname, env_extra=env)
    after = dt.datetime.now(dt.UTC)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert_timings_mean_what_they_say(mongo_client[dbname], first["run_id"], before, after)
    for key in ("run_id", "server", "stages", "inserted", "skipped", "failed"):
        assert key in first
    assert set(first["server"]) >= {"kind", "version", "topology"}
    stages = {s["stage"]: s for s in first["stages"]}
    for stage in first["stages"]:
        assert set(stage).issuperset({"stage", "records_in", "records_out", "seconds"}), stage
    for name in ("parse", "load", "analyze.best_hits", "analyze.oxide_formation_energy", "validate"):
        assert name in stages, list(stages)
        assert stages[name]["records_in"] > 0 and stages[name]["records_out"] > 0, stages[name]
        assert stages[name]["seconds"] > 0
    assert first["inserted"] > 0 and first["failed"] == []
    db = mongo_client[dbname]
    assert db.searches.count_documents({}) > 0 and db.hits.count_documents({}) > 0
    assert db.materials.count_documents({}) > 0 and db.tasks.count_documents({}) > 0
    assert db.query_best_hits.count_documents({}) == db.searches.count_documents({"n_hits": {"$gt": 0}})
    assert db.oxide_formation_energy.count_documents({}) > 0
    assert db.validation_runs.count_documents({"run_id": first["run_id"]}) > 0
    # the database's own outputs folder: <home>/out/<the server's hosts>/<database>/ (ingest/store/outputs.py)
    best = next(a for a in first["analysis"] if a["name"] == "best_hits")
    assert best["parquet_path"] == str(tmp_path / "state" / "out" / uri_server(mongo_uri)[0] / dbname / "best_hits.parquet")
    assert Path(best["parquet_path"]).exists()
    assert_exact_answers(db, first)
    assert_the_readme_quickstart_is_this_run(first)
    totals = {c: db[c].count_documents({}) for c in ("searches", "hits", "materials", "tasks")}

    # again, everything (--full), with one worker: nothing loaded, so the analyses and the validation
    # are small work, done in the command's own process (docs/pipeline.md, "Small work")
    proc, second = sci_ingest("run", "--json", "--full", "--workers", "1", "--mongo-uri", mongo_uri, "--db", dbname,
                              env_extra=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    cluster = next(s for s in second["stages"] if s["stage"] == "cluster")
    assert cluster["detail"]["scheduler"] == "in-process"
    assert second["inserted"] == 0
    assert second["skipped"] == sum(totals.values())
    assert {c: db[c].count_documents({}) for c in totals} == totals

    # and as `make run` runs it again: nothing changed, so no cluster, no analysis, no check
    proc = subprocess.run([str(BIN), "run", "--mongo-uri", mongo_uri, "--db", dbname], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nothing changed: every analysis output is current and every verdict stands" in proc.stdout
    stages = [line.split()[0] for line in proc.stdout.splitlines() if line[:1].isalpha() and "  " in line]
    assert "cluster" not in stages and "warm_up.validate" not in stages, stages
    assert "0 rows checked (12 verdict(s) kept" in proc.stdout, proc.stdout

    proc, _ = sci_ingest("timings", "--mongo-uri", mongo_uri, "--db", dbname, "--run", first["run_id"])
    assert proc.returncode == 0 and "analyze.best_hits" in proc.stdout


def assert_the_readme_quickstart_is_this_run(report: dict) -> None:
    """The README's Quickstart shows the output of this run of the bundled samples: the same files,
    documents, analyses and suites (one whole-pipeline run serves this test and the README's)."""
    readme = quickstart_counts()
    suites = report["validation"]["suites"]
    assert {
        "files": report["files"]["files_loaded"],
        "documents": report["inserted"],
        "analyses": [a["name"] for a in report["analysis"]],
        "suites": (sum(1 for s in suites if s["success"]), len(suites)),
    } == readme, "the README's Quickstart output is stale: run `make run` and paste its output"


def assert_timings_mean_what_they_say(db, run_id: str, before, after) -> None:
    """Every row: wall-clock started/ended, seconds = ended - started; run rows inside the command's
    own wall clock; one filter (scope) per level; the parallel parse keeps its busy time apart."""
    rows = list(db.stage_timings.find({"run_id": run_id}))
    assert {r["scope"] for r in rows} == {"run", "worker", "file"}
    naive = (before.replace(tzinfo=None), after.replace(tzinfo=None))  # BSON dates come back naive UTC
    for r in rows:
        assert r["seconds"] == pytest.approx((r["ended"] - r["started"]).total_seconds(), abs=1e-3), r
    run = {r["stage"]: r for r in rows if r["scope"] == "run"}
    window = (naive[0] - dt.timedelta(seconds=1), naive[1])  # the command's own wall clock: an order, not a duration
    for r in run.values():
        assert window[0] <= r["started"] <= r["ended"] <= window[1], r
    assert run["load"]["ended"] - run["load"]["started"] <= after - before  # the load inside the command
    assert run["parse"]["busy_seconds"] > 0 and run["load"]["started"] <= run["parse"]["started"]
    files = [r for r in rows if r["scope"] == "file" and r["stage"] == "load"]
    workers = [r for r in rows if r["scope"] == "worker" and r["stage"] == "load"]
    assert sum(r["detail"]["files"] for r in workers) == len(files) == run["load"]["detail"]["loaded"]
    assert all(run["load"]["started"] <= r["started"] <= r["ended"] <= run["load"]["ended"] for r in files)


def assert_exact_answers(db, report: dict) -> None:
    """What any client (plain pymongo here, as mongosh sends it) gets equals a count over every
    document, for E-value ranges down to 1e-200, on hits and on best_hits' output; on a server
    whose index keys lose the order of numbers, the run's notes say which indexes were cut."""
    from ingest.store.indexes import numeric_keys_exact
    from ingest.store.servers import describe

    for coll, path in (("hits", ("hsps", 0, "evalue")), ("query_best_hits", ("best_evalue",))):
        values = []
        for doc in db[coll].find({}, {path[0]: 1}):
            value = doc.get(path[0])
            if len(path) == 3:
                value = (value or [{}])[0].get(path[2]) if isinstance(value, list) and value else None
            values.append(value)
        for t in (1e-5, 1e-10, 1e-50, 1e-100, 1e-150, 1e-200):
            wanted = sum(1 for v in values if isinstance(v, float) and v < t)
            assert db[coll].count_documents({".".join(map(str, path)): {"$lt": t}}) == wanted, (coll, t)
        assert any(v is not None and v < 1e-128 for v in values), coll  # the samples reach past 1e-128
    info = describe(db.client)
    if not numeric_keys_exact(db, info):
        keys = [k for coll in ("hits", "query_best_hits") for ix in db[coll].index_information().values()
                for k, _ in ix["key"]]
        assert "hsps.0.evalue" not in keys and "best_evalue" not in keys, keys
        assert any("lose the order of numbers beyond 1e±128" in n for n in report["notes"]), report["notes"]


def test_run_with_bad_input_exits_2_and_names_the_file(mongo_uri, dbname, tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"material_id": "mp-1", "elements": ["O"]}\n{"material_id": \n')
    good = tmp_path / "good.jsonl"
    good.write_text('{"material_id": "mp-2", "formula_pretty": "MgO", "elements": ["Mg", "O"], '
                    '"formation_energy_per_atom": -3.0, "band_gap": 4.5}\n')
    proc, data = sci_ingest("load", "--json", str(bad), str(good), "--mongo-uri", mongo_uri, "--db", dbname,
                            env_extra={"SCI_INGEST_HOME": str(tmp_path / "state")})
    assert proc.returncode == 2, proc.stderr
    assert data["failed"][0]["path"].endswith("broken.jsonl")
    assert ":2" in data["failed"][0]["reason"]
    assert data["inserted"] == 1


def test_fatal_error_exits_1(tmp_path):
    data = tmp_path / "one.m10"  # a data file: an empty folder is refused before any server is asked
    data.write_bytes((Path(__file__).resolve().parent.parent / "samples" / "pasta" / "fasta36_prot.m10").read_bytes())
    proc, _ = sci_ingest("load", str(tmp_path), "--mongo-uri", "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300",
                         check_json=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert "cannot reach MongoDB" in lines[-1] and lines[-1].startswith("error: "), proc.stderr
    assert "Error:" not in lines[-1] and "Unavailable:" not in lines[-1], lines[-1]  # no class name


def test_critical_expectation_failure_fails_the_run_naming_it(mongo_uri, mongo_client, dbname, tmp_path):
    db = mongo_client[dbname]
    db.searches.insert_one({"_id": "s:1", "query_id": "q1", "query_length": 100, "program": "ssearch36",
                            "n_hits": 1, "source": {"path": "x.m10", "sha256": "0" * 64}})
    db.hits.insert_one({"_id": "s:1:1", "search_id": "s:1", "query_id": "q1", "hit_id": "h1", "rank": 1,
                        "aligned": True, "hsps": [{"score": 50, "evalue": 0.1, "identity": 1.7,
                                                   "similarity": 0.9, "query_start": 1, "query_end": 40,
                                                   "hit_start": 3, "hit_end": 42}]})
    proc, data = sci_ingest("validate", "--json", "--mongo-uri", mongo_uri, "--db", dbname,
                            env_extra={"SCI_INGEST_HOME": str(tmp_path / "state")})
    assert proc.returncode == 1, proc.stderr
    assert data["status"] == "failed"
    assert "hsps.identity" in data["error"] and "1.7" in data["error"]
    assert db.validation_runs.count_documents({"run_id": data["run_id"]}) > 0
    # small work (two documents): checked here, no worker processes started for it
    # (tests/test_values_at_the_door.py runs the validation on workers with SCI_INGEST_SMALL_WORK=0)
    stages = [s["stage"] for s in data["stages"]]
    assert stages == ["start-up", "connect", "warm_up.validate", "validate", "close"]
    assert data["stages"][3]["detail"]["checked"] == "here"


def test_small_work_must_be_a_count(tmp_path):
    proc, _ = sci_ingest("validate", env_extra={"SCI_INGEST_HOME": str(tmp_path / "state"),
                                                 "SCI_INGEST_SMALL_WORK": "lots"}, check_json=False)
    assert proc.returncode == 64  # a bad setting: before any work (issue 42)
    assert proc.stderr.strip().splitlines() == ["error: SCI_INGEST_SMALL_WORK must be a whole number of documents, "
                                                "0 or more, not 'lots'"]


def test_server_subcommand_shares_one_embedded_server(tmp_path):
    env = {"SCI_INGEST_HOME": str(tmp_path / "state"), "MONGODB_URI": ""}
    proc, _ = sci_ingest("server", "status", env_extra=env, check_json=False)
    assert proc.returncode == 3 and "not running" in proc.stdout
    proc, _ = sci_ingest("server", "start", env_extra=env, check_json=False)
    try:
        assert proc.returncode == 0, proc.stderr
        assert "SecantusDB started" in proc.stdout
        uri = proc.stdout.split(", ")[1]
        proc, _ = sci_ingest("server", "status", env_extra=env, check_json=False)
        assert proc.returncode == 0 and uri in proc.stdout and "SecantusDB" in proc.stdout
        # a command without a URI uses the running server instead of starting its own
        proc, data = sci_ingest("load", "--json", str(tmp_path / "missing.m10"), env_extra=env)
        assert proc.returncode == 2
        assert data["server"]["uri"] == uri
        assert "starting the embedded" not in proc.stderr
    finally:
        proc, _ = sci_ingest("server", "stop", env_extra=env, check_json=False)
    assert proc.returncode == 0 and "stopped" in proc.stdout
    proc, _ = sci_ingest("server", "status", env_extra=env, check_json=False)
    assert proc.returncode == 3
