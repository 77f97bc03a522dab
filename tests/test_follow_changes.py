"""`sci-ingest run` follows changes (issue 40): the CLI as a subprocess against a real server.

After each kind of change -- new files, a file replaced in place, a file that fails (new, or a
loaded one turned bad), a record shared between two files and then left in one -- a `run` that
follows changes publishes exactly what a whole `analyze` of the same data publishes (every output
collection and Parquet file, row for row, `run_id` aside), skips the analyses whose sources did
not change, and keeps only the verdicts of suites nothing of which changed.  With nothing new, it
starts no cluster, reads nothing and says so; a failed verdict that stands still fails the run.
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

import pyarrow.parquet as pq
import pytest

from ingest.store.outputs import uri_server

REPO = Path(__file__).resolve().parent.parent
PASTA = sorted((REPO / "samples" / "pasta").glob("*.m10"))
BIN = Path(sys.executable).parent / "sci-ingest"
OUTPUTS = ("best_hits", "formula_consistency", "hit_distributions", "hull_energy", "library_hits",
           "oxide_formation_energy")


@pytest.fixture()
def cli(tmp_path, mongo_uri, mongo_client):
    """(sci-ingest runner -> (exit code, JSON report, stderr), the database, the output folder)."""
    name = f"follow_{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": name,
           "SCI_INGEST_KEEP": "0"}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*args: str) -> tuple[int, dict, str]:
        one = ["--workers", "1"] if args[0] == "run" else []  # loads of a few files: no cluster for them
        proc = subprocess.run([str(BIN), *args, *one, "--json"], env=env, capture_output=True, text=True, timeout=600)
        assert proc.stdout.strip(), proc.stderr[-3000:]
        return proc.returncode, json.loads(proc.stdout), proc.stderr

    # the database's outputs: <home>/out/<the server's hosts>/<database>/ (ingest/store/outputs.py)
    yield run, mongo_client[name], home / "out" / uri_server(mongo_uri)[0] / name
    mongo_client.drop_database(name)


def _materials(path: Path, ids: range, band_gap: float | None = None) -> Path:
    """A small materials file: real records of the bundled samples (oxides among them) under new ids."""
    with gzip.open(REPO / "samples" / "materials" / "materials.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for _, line in zip(range(60), fh)]
    lines = []
    for i in ids:
        record = {**records[i % len(records)], "material_id": f"mp-77{i:04d}"}
        if band_gap is not None:
            record["band_gap"] = band_gap
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines))
    return path


def _published(db, out: Path) -> dict:
    """Every output, as a whole analysis would publish it: documents and Parquet rows, run ids aside."""
    found = {}
    for name in OUTPUTS:
        table = pq.read_table(out / f"{name}.parquet")
        rows = table.drop(["run_id"]).to_pylist()
        collection = json.loads(table.schema.metadata[b"sci_ingest"])["analysis"]
        assert collection == name
        docs = [{k: v for k, v in d.items() if k != "run_id"} for d in db[_collection(name)].find().sort("_id")]
        found[name] = (rows, docs)
    return found


def _collection(analysis: str) -> str:
    return "query_best_hits" if analysis == "best_hits" else analysis


def _scopes(report: dict) -> dict[str, dict]:
    return {a["name"]: a["scope"] for a in report["analysis"]}


def _same_as_full(run, db, out: Path, land: Path, code: int = 0) -> None:
    """What the run following changes published equals a whole analysis of the same data, and its
    verdicts (kept, merged or checked) equal a whole validation's: ``run --full`` of the same files
    (nothing new to load) analyses and checks everything again."""
    followed = _published(db, out)
    verdicts = _verdicts(db)
    got, full, err = run("run", "--full", str(land))
    assert got == code and full["inserted"] == 0, err[-3000:]
    assert all(s["mode"] == "whole" for s in _scopes(full).values()), _scopes(full)
    assert not any(s.get("verdict_of") or s.get("rows_new") is not None for s in full["validation"]["suites"])
    assert _published(db, out) == followed
    assert _verdicts(db) == verdicts


def _verdicts(db) -> dict:
    """Each suite's newest result: its status, rows and every expectation's counts and success."""
    found = {}
    for doc in db.validation_runs.find().sort("started_at", 1):
        found[doc["suite"]] = (doc["status"], doc["rows"], [
            (r["expectation"], r.get("element_count"), r.get("unexpected_count"), r.get("missing_count"),
             r["success"]) for r in doc["results"]])
    return found


def _landed(run, tmp_path: Path, searches: list[Path], materials: dict[str, range]) -> tuple[Path, dict]:
    """(the landing folder, the first run's report): ``searches`` copied and ``materials`` files made
    there, then run once, whole."""
    land = tmp_path / "land"
    land.mkdir()
    for p in searches:
        shutil.copy(p, land / p.name)
    for name, ids in materials.items():
        _materials(land / name, ids)
    code, first, err = run("run", str(land))
    assert code == 0, err[-3000:]
    return land, first


@pytest.mark.xdist_group("follow_changes_1")
def test_new_and_replaced_files_are_followed_exactly(cli, tmp_path):
    run, db, out = cli
    land, first = _landed(run, tmp_path, PASTA[:3], {"m1.jsonl": range(0, 30)})
    assert all(s["mode"] == "whole" for s in _scopes(first).values())

    # nothing new: no cluster, nothing read, every verdict kept
    code, idle, err = run("run", str(land))
    assert code == 0, err[-3000:]
    assert all(s["mode"] == "none" for s in _scopes(idle).values()), _scopes(idle)
    assert "cluster" not in {s["stage"] for s in idle["stages"]}
    assert idle["validation"]["rows_checked"] == 0
    assert all(s["verdict_of"] == first["run_id"] for s in idle["validation"]["suites"])
    assert "validate: nothing any suite reads changed since its verdict" in err

    # new files: a search file (hits) and a materials file
    shutil.copy(PASTA[3], land / PASTA[3].name)
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    scopes = _scopes(report)
    assert scopes["best_hits"] == {**scopes["best_hits"], "mode": "changed", "files": 1}
    assert scopes["hit_distributions"]["mode"] == "merged" and scopes["hull_energy"]["mode"] == "none"
    suites = {s["suite"]: s for s in report["validation"]["suites"]}
    assert suites["materials"]["verdict_of"] and suites["hits"]["rows_new"] < suites["hits"]["rows"], suites["hits"]
    assert not suites["searches"].get("verdict_of")  # a uniqueness check: the whole collection again
    _same_as_full(run, db, out, land)

    _materials(land / "m2.jsonl", range(30, 45))
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    scopes = _scopes(report)
    assert scopes["best_hits"]["mode"] == "none" and scopes["oxide_formation_energy"]["mode"] == "whole", scopes
    _same_as_full(run, db, out, land)

    # a file replaced in place: its old searches go, its new ones come
    shutil.copy(PASTA[4], land / PASTA[0].name)
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    assert _scopes(report)["best_hits"]["mode"] == "changed" and "replaced" in _scopes(report)["best_hits"]["reason"]
    _same_as_full(run, db, out, land)



@pytest.mark.xdist_group("follow_changes_2")
def test_shared_records_and_failed_files_are_followed_exactly(cli, tmp_path):
    run, db, out = cli
    land, _ = _landed(run, tmp_path, PASTA[:2], {"m1.jsonl": range(0, 30), "m2.jsonl": range(30, 45)})
    # a record shared by two files, then left in one: it stays, as the other file holds it
    _materials(land / "m3.jsonl", range(40, 50))  # 40-44 are m2's too
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    _same_as_full(run, db, out, land)
    _materials(land / "m2.jsonl", range(30, 42))  # m2 no longer holds 42-44: m3 still does
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    assert db.materials.count_documents({"material_id": {"$in": ["mp-770042", "mp-770044"]}}) == 2
    _same_as_full(run, db, out, land)

    # files that fail: a new one, and a loaded one turned bad (its loaded version stays)
    (land / "broken.m10").write_bytes(PASTA[1].read_bytes()[:700])
    (land / "m1.jsonl").write_text((land / "m1.jsonl").read_text() + "{not json\n")
    code, report, err = run("run", str(land))
    assert code == 2 and report["status"] == "partial", (code, report.get("status"), err[-2000:])
    assert {Path(f["path"]).name for f in report["failed"]} == {"broken.m10", "m1.jsonl"}
    assert _scopes(report)["best_hits"]["mode"] == "none"  # broken.m10 never had documents
    # m1's loaded version stays, but its failed reload may have written and rolled back: read again
    assert _scopes(report)["oxide_formation_energy"]["mode"] == "whole"
    _same_as_full(run, db, out, land, code=2)


@pytest.mark.xdist_group("follow_changes_3")
def test_a_failed_verdict_stands_and_still_fails_the_run(cli, tmp_path):
    run, db, out = cli
    land = tmp_path / "land"
    land.mkdir()
    shutil.copy(PASTA[0], land / PASTA[0].name)
    _materials(land / "bad.jsonl", range(0, 5), band_gap=-3.0)  # a band gap below zero: a critical failure
    code, first, err = run("run", str(land))
    assert code == 1 and first["status"] == "failed", (code, first.get("status"), err[-2000:])
    assert "band_gap" in first["error"]
    code, again, err = run("run", str(land))
    assert code == 1 and again["status"] == "failed" and "band_gap" in again["error"], err[-2000:]
    failed = [s for s in again["validation"]["suites"] if not s["success"]]
    assert failed and all(s["verdict_of"] == first["run_id"] for s in failed)
    code, full, err = run("run", "--full", str(land))  # checked again, with the same verdict
    assert code == 1 and not any(s.get("verdict_of") for s in full["validation"]["suites"])


def test_new_files_are_merged_into_the_aggregates_exactly(cli, tmp_path):
    """hit_distributions and library_hits take new files in without reading the others: copies of
    searches loaded before count once, a (sequence, query) pair held before is no new query."""
    run, db, out = cli
    land = tmp_path / "land"
    land.mkdir()
    samples = REPO / "samples" / "pasta"
    for name in ("ssearch36_full_seq.m10", "fasta36_dna.m10", "fasta36_prot.m10"):
        shutil.copy(samples / name, land / name)
    code, first, err = run("run", str(land))
    assert code == 0, err[-3000:]
    # the same queries again (other programs, the same libraries), and a concatenation of runs
    for name in ("ssearch36_m9c.m10", "glsearch36.m10", "concatenated_runs.m10", "ssearch36_F10_file.m10"):
        shutil.copy(samples / name, land / name)
    code, report, err = run("run", str(land))
    assert code == 0, err[-3000:]
    scopes = _scopes(report)
    for name in ("hit_distributions", "library_hits"):
        assert scopes[name]["mode"] == "merged" and scopes[name]["files"] == 4, scopes[name]
    merged = {a["name"]: a for a in report["analysis"]}
    excluded = {name: _excluded(out, name) for name in ("hit_distributions", "library_hits")}
    assert excluded["library_hits"]["copies"] > 0  # the concatenation holds searches loaded before
    _same_as_full(run, db, out, land)
    assert {name: _excluded(out, name) for name in excluded} == excluded  # the left-out counts too
    assert merged["library_hits"]["records_in"] < sum(db.hits.count_documents({}) for _ in [0])


def _excluded(out: Path, name: str) -> dict:
    return json.loads(pq.read_schema(out / f"{name}.parquet").metadata[b"sci_ingest"])["excluded"]
