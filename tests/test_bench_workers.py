"""``sci-ingest bench workers`` and ``bench checkpoint`` at ``--size tiny``, run as users run them:
the CLI in a subprocess against the session's real server, its run stored and its files written."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def dbname(mongo_client):
    name = f"bench_{uuid.uuid4().hex[:8]}"
    yield name
    mongo_client.drop_database(name)
    mongo_client.drop_database(f"{name}_bench")


def bench(name: str, mongo_uri: str, dbname: str, tmp_path: Path) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-m", "ingest.cli.main", "bench", name, "--size", "tiny",
                           "--mongo-uri", mongo_uri, "--db", dbname, "--out", str(tmp_path / "out"), "--json", "-q"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


def ordered(point: dict, prefix: str) -> bool:
    values = [point[f"{prefix}p{p}_ms"] for p in ("50", "95", "99", "99.9")]
    return all(isinstance(v, (int, float)) for v in values) and 0 < values[0] <= values[1] <= values[2] <= values[3]


def stored_and_written(run: dict, mongo_client, dbname: str, tmp_path: Path) -> None:
    stored = mongo_client[dbname].bench_runs.find_one({"_id": run["_id"]})
    assert stored is not None and stored["experiment"] == run["experiment"] and stored["size"] == "tiny"
    assert len(stored["points"]) == len(run["points"]) and stored["comparison"] == run["comparison"]
    assert not [n for n in mongo_client.list_database_names() if n.startswith(f"{dbname}_bench")]  # the runner dropped the experiment's data
    for kind in ("json", "csv", "png"):
        path = Path(run["files"][kind])
        assert path.parent == tmp_path / "out" / run["experiment"] and path.stat().st_size > 0, path
    assert json.loads(Path(run["files"]["json"]).read_text())["_id"] == run["_id"]


def test_both_are_registered(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ingest.cli.main", "bench", "list", "--json"], capture_output=True,
                          text=True, cwd=REPO, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)["experiments"]}
    assert rows["workers"]["figures"] == "SS-F5.1, SS-F4.1"
    assert rows["checkpoint"]["figures"] == "MH-F2, MH-F3"


def test_workers_write_then_read_real_documents(mongo_uri, mongo_client, dbname, tmp_path):
    run = bench("workers", mongo_uri, dbname, tmp_path)
    assert run["experiment"] == "workers" and run["size"] == "tiny"
    points = run["points"]
    generate = [p for p in points if p["phase"] == "generate"]
    assert len(generate) == 1 and generate[0]["documents"] > 0 and generate[0]["generated_per_s"] > 0
    database = [p for p in points if p["phase"] == "database"]
    assert [p["workers"] for p in database] == run["params"]["workers"] == [1, 2]
    for p in database:
        assert p["complete"] is True, run["notes"]
        assert p["documents"] == p["documents_asked"] == run["params"]["documents"]
        assert p["writes_per_s"] > 0 and p["reads_per_s"] > 0
        assert p["reads"] == p["reads_asked"] == run["params"]["reads"] and p["reads_found"] == p["reads"]
        assert p["write_batch_count"] >= p["documents"] // run["params"]["batch"]
        assert ordered(p, "write_batch_") and ordered(p, "read_"), p
        assert max(p["writes_vs_best_pct"], p["reads_vs_best_pct"]) <= 0
    assert max(p["writes_vs_best_pct"] for p in database) == 0
    figures = {(r["figure"], r["what"]): r for r in run["comparison"]}
    best = figures[("SS-F5.1", "best writes/s (at 20 workers)")]
    assert best["published"] == 4_593 and best["ours"] == max(p["writes_per_s"] for p in database)
    assert figures[("SS-F4.1", "documents generated without a database")]["ours"] == generate[0]["generated_per_s"]
    stored_and_written(run, mongo_client, dbname, tmp_path)


def test_checkpoint_overhead_and_connections(mongo_uri, mongo_client, dbname, tmp_path):
    run = bench("checkpoint", mongo_uri, dbname, tmp_path)
    assert run["experiment"] == "checkpoint"
    points = run["points"]
    assert [(p["tasks"], p["interval_s"], p["checkpoint_kb"]) for p in points] == [(4, 0.5, 64), (4, 0.25, 64)]
    for p in points:
        assert p["complete"] is True and p["checkpoint_failures"] == 0, run["notes"]
        # how long the run took is the benchmark's figure (printed), not a test's: the columns agree with each other
        assert all(math.isfinite(p[c]) for c in ("runtime_s", "overhead_s", "overhead_pct")) and p["runtime_s"] > 0
        assert p["overhead_s"] == pytest.approx(p["runtime_s"] - p["work_s"], abs=2e-3)
        assert p["overhead_pct"] == pytest.approx(100 * p["overhead_s"] / p["work_s"], abs=0.2)
        per_task = round(p["work_s"] / p["interval_s"])
        assert p["checkpoints_written"] == p["checkpoints_expected"] == p["tasks"] * per_task
        assert ordered(p, "checkpoint_"), p
        if p["connections_per_s"] is None:  # a server without serverStatus connections: said in a note
            assert any("connections" in n for n in run["notes"])
        else:  # a new client for every checkpoint: at least one connection each
            assert p["connections_created"] >= p["checkpoints_written"] and p["connections_per_s"] > 0
    slow, fast = points
    assert slow["checkpoints_written"] < fast["checkpoints_written"]  # a longer interval writes fewer checkpoints
    assert {r["figure"] for r in run["comparison"]} == {"MH-F2", "MH-F3"}
    stored_and_written(run, mongo_client, dbname, tmp_path)


def test_sample_documents_are_the_loaders_and_copies_are_distinct():
    from analytics.bench.experiments.workers import _copy_id, sample_documents, sample_files

    template = sample_documents(sample_files())
    assert {c for c, _ in template} == {"searches", "hits"} and len(template) > 100
    assert len({d["_id"] for _, d in template}) == len(template)
    ids = {_copy_id(template, w, i, k)[1] for w in (1, 2) for i in range(w) for k in range(2 * len(template))}
    assert len(ids) == 3 * 2 * len(template)
