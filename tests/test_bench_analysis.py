"""The analysis experiments of ``sci-ingest bench`` (MH-F4, F5, F9/F10, F11), run as users run them.

Each experiment runs at ``--size tiny`` through the CLI in a subprocess against the
session's server (a real MongoDB-wire server, never a mock), with a LocalCluster of its
own; the tests check the exit code, the points' columns and what each experiment must
show whatever the machine's speed -- not timings:

* ``engines``: the Dask runner, the aggregation pipeline and pandas give the same output
  rows at every size;
* ``split-size``: fewer partitions as the split grows, the same rows read and output;
* ``sinks``: every way writes the same output rows, to MongoDB and to Parquet alike;
* ``faults``: the stage completes with the fault-free output whichever workers are killed.

And for each: the run is stored in ``bench_runs``, its JSON, CSV and PNG files exist.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def bench(name: str, mongo_uri: str, tmp_path: Path) -> dict:
    """Run ``sci-ingest bench NAME --size tiny`` against the session's server; the run document."""
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)  # a LocalCluster: faults must be able to kill its workers
    argv = [sys.executable, "-m", "ingest.cli.main", "bench", name, "--size", "tiny", "--mongo-uri", mongo_uri,
            "--out", str(tmp_path), "--json", "-q"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    run = json.loads(proc.stdout)
    assert run["experiment"] == name and run["size"] == "tiny"
    return run


def check_stored(run: dict, mongo_client, columns: set[str]) -> list[dict]:
    """The run's points have ``columns``; the run is in ``bench_runs``; its files exist and agree."""
    points = run["points"]
    assert points, run.get("notes")
    for point in points:
        assert columns <= set(point), columns - set(point)
    db_name = os.environ.get("SCI_INGEST_DB", "sci_ingest")
    stored = mongo_client[db_name]["bench_runs"].find_one({"_id": run["_id"]})
    assert stored is not None and len(stored["points"]) == len(points)
    assert stored["experiment"] == run["experiment"]
    files = run["files"]
    for kind in ("json", "csv", "png"):
        assert Path(files[kind]).is_file() and Path(files[kind]).stat().st_size > 0, files[kind]
    assert json.loads(Path(files["json"]).read_text())["_id"] == run["_id"]
    with open(files["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(points) and columns <= set(rows[0])
    assert Path(files["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return points


def test_engines_agree_at_every_size(mongo_uri, mongo_client, tmp_path):
    run = bench("engines", mongo_uri, tmp_path)
    points = check_stored(run, mongo_client, {"engine", "analysis", "scale", "documents", "seconds", "equal",
                                              "rows_out", "mapreduce_over_dask"})
    scales = run["params"]["scales"]
    for analysis in ("oxide_formation_energy", "best_hits"):
        for scale in scales:
            here = {p["engine"]: p for p in points if p["analysis"] == analysis and p["scale"] == scale}
            assert set(here) == {"dask", "aggregation", "pandas"}, (analysis, scale, run["notes"])
            assert all(p["equal"] is True for p in here.values()), (analysis, scale, run["notes"])
            assert len({p["rows_out"] for p in here.values()}) == 1 and here["dask"]["rows_out"] > 0
            assert here["aggregation"]["mapreduce_over_dask"] > 0 and here["pandas"]["mapreduce_over_dask"] is None
        documents = [next(p["documents"] for p in points if p["analysis"] == analysis and p["scale"] == s)
                     for s in scales]
        assert documents == [documents[0] * s for s in scales]  # copies, exactly
    assert run["comparison"][0]["figure"] == "MH-F4" and run["comparison"][0]["published"] == 5.0
    # the embedded server runs no JavaScript: said, not faked
    if run["server"].get("kind") == "SecantusDB":
        assert any("native MapReduce not measured" in n for n in run["notes"])


def test_split_size_fewer_partitions_as_the_split_grows(mongo_uri, mongo_client, tmp_path):
    run = bench("split-size", mongo_uri, tmp_path)
    points = check_stored(run, mongo_client, {"split_mb", "split_kb", "mode", "partitions", "rows", "seconds",
                                              "equal"})
    assert [p["split_mb"] for p in points] == run["params"]["split_mb"]
    partitions = [p["partitions"] for p in points]
    assert all(a > b for a, b in zip(partitions, partitions[1:])), partitions
    assert len({p["rows"] for p in points}) == 1 and points[0]["rows"] > 0
    assert all(p["equal"] is True for p in points), run["notes"]
    assert any("scaled by" in n for n in run["notes"])  # the scaling is told


def test_sinks_write_the_same_output_everywhere(mongo_uri, mongo_client, tmp_path):
    run = bench("sinks", mongo_uri, tmp_path)
    points = check_stored(run, mongo_client, {"sink", "scale", "workers", "read_s", "compute_s", "write_s",
                                              "export_s", "total_s", "rows_out", "rows_written", "equal"})
    groups: dict[tuple, dict] = {}
    for p in points:
        groups.setdefault((p["analysis"], p["scale"], p["workers"]), {})[p["sink"]] = p
    assert {g[1] for g in groups} == set(run["params"]["scales"])
    for key, ways in groups.items():
        assert set(ways) == {"mongo-to-mongo", "mongo-to-parquet", "copy-first"}, key
        rows = {p["rows_out"] for p in ways.values()} | {p["rows_written"] for p in ways.values()}
        assert len(rows) == 1 and rows.pop() > 0, (key, ways)  # the same rows in MongoDB and in Parquet
        assert len({p["documents"] for p in ways.values()}) == 1
        assert all(p["equal"] is True for p in ways.values()), run["notes"]
        assert ways["copy-first"]["export_s"] > 0
        assert ways["mongo-to-mongo"]["export_s"] == ways["mongo-to-parquet"]["export_s"] == 0
        for p in ways.values():
            phases = p["read_s"] + p["compute_s"] + p["write_s"] + p["export_s"]
            assert p["total_s"] == pytest.approx(phases, abs=1e-3)


def test_faults_complete_with_the_fault_free_output(mongo_uri, mongo_client, tmp_path):
    run = bench("faults", mongo_uri, tmp_path)
    points = check_stored(run, mongo_client, {"workers", "killed", "completed", "seconds", "equal", "mid_stage",
                                              "workers_left"})
    params = run["params"]
    assert [p["killed"] for p in points] == params["killed"]
    assert max(params["killed"]) == params["workers"] // 2
    for p in points:
        assert p["completed"] is True and p["equal"] is True, (p, run["notes"])
        if p["killed"]:
            # killed while the stage ran: it is held after its first tasks until the kill is done (an event,
            # not a timer, so a busy machine cannot let the stage end first) ...
            assert p["mid_stage"] is True, (p, run["notes"])
            assert p["kill_at_s"] > 0
            assert p["workers_left"] == p["workers"] - p["killed"]  # ... and not started again
    assert run["comparison"][0]["figure"] == "MH-F11" and run["comparison"][0]["ours"] == 0.5


# ------------------------------------------------------------------ the pipelines on awkward documents
def _hit(search: str, rank, hit_id: str, **hsp) -> dict:
    doc = {"_id": f"{search}:{hit_id}", "search_id": search, "query_id": f"q-{search}", "library": "lib",
           "program": "ssearch", "hit_id": hit_id, "hsps": [hsp] if hsp else []}
    if rank is not None:
        doc["rank"] = rank
    return doc


HITS = [
    # a tie on score goes to the known (lower) E-value, a missing one sorts last
    _hit("A", 1, "a1", score=10, evalue=None, bits=30.0, identity=0.9),
    _hit("A", 2, "a2", score=10, evalue=1e-5, bits=31.0),
    _hit("A", 3, "a3", score=5.5, evalue=1e-3, bits=12.0, identity=0.5),
    _hit("A", 4, "a4", score=7, evalue=2e-3, bits=15.0, identity=0.6),
    # no scores at all: no statistics, the best hit by rank
    _hit("B", 2, "b2"),
    _hit("B", 1, "b1", evalue=1.0),
    # ties on score and E-value: the lower rank, then the smaller hit id; a missing rank last
    _hit("C", 2, "c2", score=8, evalue=0.1),
    _hit("C", 1, "c9", score=8, evalue=0.1),
    _hit("C", None, "c0", score=8, evalue=0.1),
    _hit("D", 1, "d1", score=3, evalue=5.0, bits=1.5, identity=1.0),
]

MATERIALS = [
    {"_id": "m1", "elements": ["Fe", "O"], "formation_energy_per_atom": -1.7, "band_gap": 2.0},
    {"_id": "m2", "elements": ["O", "Ti"], "formation_energy_per_atom": -1.0, "band_gap": 3.0},
    {"_id": "m3", "elements": ["Al", "O"], "formation_energy_per_atom": -1.2},  # no band gap
    {"_id": "m4", "elements": ["Cu", "O"], "formation_energy_per_atom": -0.2, "band_gap": 0.0},  # ceil -0.0
    {"_id": "m5", "elements": ["O", "Zn"], "formation_energy_per_atom": 0.0, "band_gap": 1.0},  # ceil 0.0
    {"_id": "m6", "elements": ["Mg", "O"], "formation_energy_per_atom": float("nan"), "band_gap": 7.0},
    {"_id": "m7", "elements": ["Mg", "O"], "formation_energy_per_atom": float("inf")},
    {"_id": "m8", "elements": ["Mg", "O"], "formation_energy_per_atom": "-1.5"},  # not a number: not invented
    {"_id": "m9", "elements": ["Mg", "O"]},
    {"_id": "m10", "elements": "O", "formation_energy_per_atom": -2.0},  # not a list
    {"_id": "m11", "formation_energy_per_atom": -2.0},  # no elements
    {"_id": "m12", "elements": ["Na", "Cl"], "formation_energy_per_atom": -2.1, "band_gap": 5.0},
    {"_id": "m13", "elements": ["O", "Si"], "formation_energy_per_atom": -3.0, "band_gap": 8.0,
     "_ingest": {"type": "entry"}},  # a document about a material: left out
    {"_id": "m14", "elements": ["O", "Si"], "formation_energy_per_atom": -3.0, "band_gap": True},  # not a number
]


@pytest.mark.parametrize("name, docs", [("best_hits", HITS), ("oxide_formation_energy", MATERIALS)])
def test_the_pipelines_equal_the_declared_functions_on_awkward_documents(name, docs, mongo_uri, db):
    from analytics.bench.dataset import frames_equal
    from analytics.bench.experiments.engines import by_aggregation, by_pandas
    from analytics.registry import get_analysis

    analysis = get_analysis(name)
    db[analysis.source].insert_many(docs)
    ours, theirs = by_aggregation(analysis, mongo_uri, db.name), by_pandas(analysis, mongo_uri, db.name)
    equal, why = frames_equal(theirs, ours, analysis.output_id)
    assert equal, why
    assert len(ours) == (4 if name == "best_hits" else 3)
    if name == "best_hits":
        best = dict(zip(ours["search_id"], ours["best_hit_id"]))
        assert best == {"A": "a2", "B": "b1", "C": "c9", "D": "d1"}
        assert ours.set_index("search_id").loc["A", "score_median"] == pytest.approx(8.5)
    else:
        zero = ours.set_index("formation_energy_ceil").loc[0]
        assert zero["count"] == 2  # -0.0 and 0.0 are one bin
