"""Incremental analysis (analytics/increment.py) against the session's real server and a real
LocalCluster: files land, an analysis runs on only the searches of the new files, and its
published output (collection and Parquet file) is exactly what a whole-collection run gives;
files replaced, nothing new, a missing Parquet file; the Airflow task says which it read."""

from __future__ import annotations

import gzip
import json
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pymongo.monitoring
import pytest

from analytics.registry import Analysis, get_analysis
from analytics.runner import analyze
from ingest.cluster import dask_client
from ingest.documents import search_id_prefix
from ingest.errors import ConfigError
from ingest.store.servers import describe

REPO = Path(__file__).resolve().parent.parent
PASTA = sorted((REPO / "samples" / "pasta").glob("*.m10"))


@pytest.fixture(scope="module")
def dclient():
    with dask_client(None, n_workers=1) as client:
        yield client


@pytest.fixture()
def place(tmp_path, mongo_client, mongo_uri, load_files, db):
    """(load(paths), run(incremental) -> {name: result}, out_dir, db)."""
    out = tmp_path / "out"

    def run(dclient, incremental=True, names=("best_hits",)):
        results = analyze(mongo_uri, db.name, f"r-{uuid.uuid4().hex[:6]}", out, names=list(names), client=dclient,
                          incremental=incremental)  # fmt: skip
        return {r.name: r for r in results}

    return load_files, run, out, db


def _published(db, out: Path) -> tuple[list[dict], pd.DataFrame]:
    docs = [{k: v for k, v in d.items() if k != "run_id"} for d in db["query_best_hits"].find().sort("_id")]
    frame = pq.read_table(out / "best_hits.parquet").to_pandas().drop(columns="run_id")
    return docs, frame


def _same_as_whole(db, out: Path, run, dclient) -> None:
    """The incremental output equals a whole-collection run's, in MongoDB and in Parquet."""
    docs, frame = _published(db, out)
    whole = run(dclient, incremental=False)["best_hits"]
    assert whole.scope["mode"] == "whole"
    docs_whole, frame_whole = _published(db, out)
    assert docs == docs_whole and len(docs) == whole.records_out
    pd.testing.assert_frame_equal(frame, frame_whole)


def test_new_files_are_analysed_alone_and_the_output_matches_a_whole_run(place, dclient, tmp_path):
    load, run, out, db = place
    load([str(p) for p in PASTA[:3]])
    first = run(dclient)["best_hits"]
    assert first.scope["mode"] == "whole" and "never published" in first.scope["reason"]
    loaded = {(e["_id"], e["sha256"]) for e in db["ingest_files"].find({"status": "loaded"}, {"sha256": 1})}
    state = db["analysis_state"].find_one({"_id": "best_hits"})  # what the output covers: read just now
    assert len(loaded) == 3 and {tuple(s) for s in state["seen"]} == loaded and state["mode"] == "whole"
    assert all(e["changed_at"] <= state["since"] for e in db["ingest_files"].find({}, {"changed_at": 1}))

    load([str(p) for p in PASTA[3:5]])
    new_shas = {d["sha256"] for d in db["ingest_files"].find({"_id": {"$in": [str(p.resolve()) for p in PASTA[3:5]]}})}
    withheld = _assert_exact_indexes(db)
    for declared, _instead in withheld:  # as an earlier version's changed run left them
        db["query_best_hits"].create_index(list(declared))
    second = run(dclient)["best_hits"]
    assert second.scope["mode"] == "changed" and second.scope["files"] == 2, second.scope
    _assert_exact_indexes(db)  # the changed run's indexes are the whole run's; those left are dropped
    new_hits = sum(db["hits"].count_documents({"search_id": {"$regex": f"^{search_id_prefix(s)}"}}) for s in new_shas)
    assert second.records_in == new_hits < db["hits"].count_documents({})  # only the new files' hits were read
    rows = list(db["query_best_hits"].find({"run_id": second.run_id}, {"_id": 1}))
    assert rows and {r["_id"][:21] for r in rows} == {search_id_prefix(s) for s in new_shas}
    _same_as_whole(db, out, run, dclient)

    again = run(dclient)["best_hits"]
    assert again.scope["mode"] == "none" and again.records_in == 0 and "current" in again.scope["reason"]
    load([str(REPO / "samples" / "materials" / "materials.jsonl.gz")])  # nothing for hits
    assert run(dclient)["best_hits"].scope["mode"] == "none"
    _assert_exact_indexes(db)


def _assert_exact_indexes(db) -> list:
    """The output's indexes are the declared ones this server keeps exact, none withheld is there,
    and every range over best_evalue (a float) counts what a collection scan counts; the withheld."""
    from analytics.registry import get_analysis
    from ingest.store.indexes import exact_indexes

    indexes = {tuple(v["key"]) for v in db["query_best_hits"].index_information().values()}
    built, withheld = exact_indexes(db, "query_best_hits", get_analysis("best_hits").indexes)
    assert {tuple(k) for k in built} <= indexes  # declared, built (on a float field only where keys keep numbers)
    assert (("query_id", 1),) in indexes and (("best_hit_id", 1),) in indexes
    assert ((("best_evalue", 1),), None) in withheld or (("best_evalue", 1),) in indexes
    assert not {tuple(declared) for declared, _ in withheld} & indexes, indexes
    coll = db["query_best_hits"]
    for below in (1e-300, 1e-100, 1e-50, 1e-10, 1e-3, 1.0, 10.0):
        query = {"best_evalue": {"$lt": below}}
        assert coll.count_documents(query) == coll.count_documents(query, hint=[("$natural", 1)]), below
        assert len(list(coll.find(query, {"_id": 1}))) == coll.count_documents(query, hint=[("$natural", 1)]), below
    return withheld


def test_a_replaced_file_drops_its_old_searches(place, dclient, tmp_path):
    load, run, out, db = place
    work = tmp_path / "in"
    work.mkdir()
    for p in PASTA[:4]:
        shutil.copy(p, work / p.name)
    load([str(work)])
    run(dclient)
    victim = work / PASTA[0].name
    old_sha = db["ingest_files"].find_one({"_id": str(victim.resolve())})["sha256"]
    assert db["query_best_hits"].count_documents({"_id": {"$regex": f"^{search_id_prefix(old_sha)}"}}) > 0
    shutil.copy(PASTA[6], victim)  # the same path, another content
    load([str(work)])
    result = run(dclient)["best_hits"]
    assert result.scope["mode"] == "changed" and "1 replaced" in result.scope["reason"], result.scope
    assert db["query_best_hits"].count_documents({"_id": {"$regex": f"^{search_id_prefix(old_sha)}"}}) == 0
    frame = pq.read_table(out / "best_hits.parquet").to_pandas()
    assert not frame["search_id"].str.startswith(search_id_prefix(old_sha)).any()
    _same_as_whole(db, out, run, dclient)


def test_whole_collection_when_the_parquet_file_is_gone_or_most_files_changed(place, dclient, monkeypatch):
    load, run, out, db = place
    monkeypatch.setattr("analytics.increment.COUNT_ABOVE", 3)  # the share is asked from 4 changed files
    load([str(PASTA[0])])
    run(dclient)
    (out / "best_hits.parquet").unlink()
    load([str(PASTA[1])])
    missing = run(dclient)["best_hits"]
    assert missing.scope["mode"] == "whole" and "missing or of another layout" in missing.scope["reason"]
    load([str(p) for p in PASTA[2:6]])  # 4 new of 6 loaded
    most = run(dclient)["best_hits"]
    assert most.scope["mode"] == "whole" and "4 of 6 loaded files changed" in most.scope["reason"], most.scope


def test_an_aggregate_analysis_is_recomputed_whole_only_when_its_source_changed(place, dclient, tmp_path):
    load, run, out, db = place
    materials = REPO / "samples" / "materials"
    load([str(materials / "materials.jsonl.gz")])
    first = run(dclient, names=("oxide_formation_energy",))["oxide_formation_energy"]
    assert first.scope["mode"] == "whole" and "never published" in first.scope["reason"] and first.records_in > 0
    load([str(PASTA[0])])  # nothing for materials
    idle = run(dclient, names=("oxide_formation_energy",))["oxide_formation_energy"]
    assert idle.scope["mode"] == "none" and idle.records_in == 0, idle.scope
    more = tmp_path / "more.jsonl"  # five oxides more: copies under new ids
    with gzip.open(materials / "materials.jsonl.gz", "rt") as fh:
        oxides = [r for r in map(json.loads, fh) if "O" in r.get("elements", [])][:5]
    more.write_text("".join(json.dumps({**r, "material_id": f"mp-99{i:05d}"}) + "\n" for i, r in enumerate(oxides)))
    load([str(more)])
    result = run(dclient, names=("oxide_formation_energy",))["oxide_formation_energy"]
    assert result.scope["mode"] == "whole" and "no incremental form" in result.scope["reason"], result.scope
    assert result.records_in > first.records_in


def test_file_prefix_needs_one_row_per_group():
    best = get_analysis("best_hits")
    oxide = get_analysis("oxide_formation_energy")
    fields = {f: getattr(oxide, f) for f in oxide.__dataclass_fields__}
    with pytest.raises(ConfigError, match="one output row per group"):
        Analysis(**{**fields, "file_prefix": search_id_prefix})
    assert best.file_prefix is search_id_prefix


def test_the_airflow_task_logs_which_it_read(tmp_path, monkeypatch, mongo_uri, mongo_client, capfd):
    from ingest.pipeline import task_analyze, task_load_landing

    name = f"inc_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("SCI_INGEST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SCI_INGEST_DB", name)
    day = tmp_path / "home" / "landing" / "2026-11-02"
    day.mkdir(parents=True)
    try:
        shutil.copy(PASTA[0], day)
        task_load_landing("l1", "2026-11-02", mongo_uri=mongo_uri)
        task_analyze("a1", mongo_uri=mongo_uri, incremental=True)
        shutil.copy(PASTA[1], day)
        task_load_landing("l2", "2026-11-02", mongo_uri=mongo_uri)
        result = task_analyze("a2", mongo_uri=mongo_uri, incremental=True)
        scopes = {a["name"]: a["scope"] for a in result["analyses"]}
        assert scopes["best_hits"]["mode"] == "changed" and scopes["best_hits"]["files"] == 1
        assert scopes["oxide_formation_energy"]["mode"] == "none"  # nothing for materials
        err = capfd.readouterr().err
        assert "best_hits: only the groups of the 1 file(s) changed hits since best_hits last ran" in err
        assert "oxide_formation_energy: nothing loaded into materials since" in err
        row = mongo_client[name]["stage_timings"].find_one({"run_id": "a2", "stage": "analyze.best_hits"})
        assert row["detail"]["scope"]["mode"] == "changed"
    finally:
        mongo_client.drop_database(name)


def test_the_cli_flag_reads_only_what_changed(tmp_path, mongo_uri, mongo_client):
    import json
    import os
    import subprocess

    name = f"inc_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": name}
    cli = str(REPO / ".venv" / "bin" / "sci-ingest")

    def changed() -> dict:
        proc = subprocess.run([cli, "analyze", "best_hits", "--changed", "--json"], env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["analysis"][0]

    try:
        for path in PASTA[:2]:
            subprocess.run([cli, "load", str(path)], env=env, capture_output=True, timeout=300, check=True)
            result = changed()
        assert result["scope"]["mode"] == "changed" and result["scope"]["files"] == 1
        assert changed()["scope"]["mode"] == "none"
    finally:
        mongo_client.drop_database(name)


class _Commands(pymongo.monitoring.CommandListener):
    """The commands a client built after registration sends (only while ``on``)."""

    def __init__(self):
        self.on, self.seen = False, []

    def started(self, event):
        if self.on:
            cmd = event.command
            self.seen.append((event.command_name, cmd.get(event.command_name), cmd.get("autocommit"),
                              event.connection_id))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def test_a_changed_publish_writes_its_rows_in_one_transaction(place, dclient, mongo_uri, mongo_client):
    """The changed rows' replaces and deletes go in one transaction (this server has them), so a
    reader sees the old rows or the new ones: seen on the wire, from a client of its own."""
    load, run, out, db = place
    load([str(p) for p in PASTA[:3]])
    run(dclient)
    load([str(p) for p in PASTA[3:5]])
    if describe(mongo_client).topology == "standalone":
        pytest.skip("a standalone MongoDB has no transactions: the changed rows go in batches (and the run says so)")
    commands = _Commands()
    pymongo.monitoring.register(commands)  # the clients built from now on, in this process
    own = mongo_uri + ("&" if "?" in mongo_uri else "/?") + f"appname=txn-{uuid.uuid4().hex[:6]}"
    commands.on = True
    try:
        result = analyze(own, db.name, "r-txn", out, names=["best_hits"], client=dclient, incremental=True)[0]
    finally:
        commands.on = False
    assert result.scope["mode"] == "changed"
    writes = [c for c in commands.seen if c[0] in ("update", "delete") and c[1] == "query_best_hits"]
    assert writes and all(autocommit is False for _, _, autocommit, _ in writes), writes
    assert [c[0] for c in commands.seen].count("commitTransaction") == 1, commands.seen
    _same_as_whole(db, out, run, dclient)
