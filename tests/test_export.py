"""``sci-ingest export``: pymongoarrow with the declared schema, nothing coerced, every row accounted for.

The command runs as a subprocess against the bundled samples; the files it writes are
read back with pandas and compared with what pymongo reads.  Documents with a field of
another type are set aside, named and counted, and never appear converted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from ingest.query.arrow import Converter
from ingest.query.compile import build
from ingest.query.export import export
from ingest.store import curated

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
HITS = curated.get("hits")


@pytest.fixture(scope="module")
def samples(mongo_uri, mongo_client):
    from ingest.load import LoadOptions, load_paths

    name = f"t_export_{uuid.uuid4().hex[:8]}"
    paths = [str(REPO / "samples" / "pasta"), str(REPO / "samples" / "materials")]
    load_paths(mongo_uri, name, paths, "test-run", LoadOptions(workers=1, progress=False), server_kind="test")
    yield mongo_client[name]
    mongo_client.drop_database(name)


def cli(mongo_uri, db_name, *argv, cwd):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(cwd)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db_name], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180)


def test_acceptance_export_hits_to_parquet_has_every_document(mongo_uri, samples, tmp_path):
    proc = cli(mongo_uri, samples.name, "export", "hits", "--format", "parquet", "--out", "x.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    n = samples.hits.count_documents({})  # every hit of the bundled samples (hundreds)
    assert n > 500 and f"exported {n} rows of hits to x.parquet" in proc.stderr
    frame = pd.read_parquet(tmp_path / "x.parquet")
    assert len(frame) == n
    assert list(frame.columns) == [f.name for f in HITS.fields]
    assert str(frame["evalue"].dtype) == "float64" and str(frame["rank"].dtype) == "int64"
    stored = {d["_id"]: d for d in samples.hits.find()}
    for row in frame.itertuples(index=False):
        doc = stored[row.id]
        hsp = (doc.get("hsps") or [{}])[0]
        assert row.query_id == doc["query_id"] and row.rank == doc["rank"] and row.aligned == doc["aligned"]
        for name in ("evalue", "identity", "bits", "z_score"):
            value = getattr(row, name)
            assert (math.isnan(value) and hsp.get(name) is None) or value == hsp.get(name), (row.id, name)
        assert row.source_path == doc["source"]["path"]
    assert not (tmp_path / "x.parquet.rejects.jsonl").exists()
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*.part"))  # renamed when complete


@pytest.mark.parametrize("collection, fmt", [("materials", "arrow"), ("tasks", "csv"), ("searches", "parquet")])
def test_other_collections_and_formats_have_every_row(mongo_uri, samples, tmp_path, collection, fmt):
    out = tmp_path / f"out.{fmt}"
    proc = cli(mongo_uri, samples.name, "export", collection, "--format", fmt, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    read = {"arrow": pd.read_feather, "csv": pd.read_csv, "parquet": pd.read_parquet}[fmt]
    frame = read(out)
    assert len(frame) == samples[collection].count_documents({}) > 0
    assert list(frame.columns) == [f.name for f in curated.get(collection).fields]
    if collection == "materials":  # a list<string> column stays a list
        first = samples.materials.find_one({"_id": frame["id"][0]})
        assert list(frame["elements"][0]) == first["elements"]
    if collection == "tasks":  # lists as JSON text in CSV
        assert json.loads(frame["elements"][0]) == samples.tasks.find_one({"_id": frame["task_id"][0]})["elements"]


def test_a_document_of_another_type_is_named_counted_and_never_coerced(mongo_uri, samples, mongo_client, tmp_path):
    db = mongo_client[f"t_export_bad_{uuid.uuid4().hex[:8]}"]
    try:
        docs = list(samples.hits.find().limit(200))
        bad = {docs[3]["_id"]: ("evalue", "string"), docs[50]["_id"]: ("rank", "double"),
               docs[120]["_id"]: ("identity", "bool"), docs[160]["_id"]: ("query_id", "array")}
        docs[3]["hsps"][0]["evalue"] = "1e-5"
        docs[50]["rank"] = 2.5  # pymongoarrow alone writes 2
        docs[120]["hsps"][0]["identity"] = True  # ... and 1.0
        docs[160]["query_id"] = ["a", "b"]
        docs[180]["hsps"][0]["z_score"] = float("nan")
        db.hits.insert_many(docs)
        proc = cli(mongo_uri, db.name, "export", "hits", "--out", "bad.parquet", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "4 of 200 documents set aside" in proc.stderr
        assert "evalue (hsps.0.evalue): string x1" in proc.stderr and "rank (rank): double x1" in proc.stderr
        assert "NaN values written as null: z_score x1" in proc.stderr
        rejects = [json.loads(line) for line in (tmp_path / "bad.parquet.rejects.jsonl").read_text().splitlines()]
        named = {r["_id"]: (r["problems"][0]["field"], r["problems"][0]["found"]) for r in rejects}
        assert named == bad
        assert [r for r in rejects if r["_id"] == docs[3]["_id"]][0]["problems"][0]["value"] == "1e-5"
        frame = pd.read_parquet(tmp_path / "bad.parquet")
        assert len(frame) == 196 and not set(frame["id"]) & set(bad)
        assert 2 not in set(frame.loc[frame["id"] == docs[50]["_id"], "rank"])
        assert frame.loc[frame["id"] == docs[180]["_id"], "z_score"].isna().all()
        # fixed, exported again: the stale rejects file goes
        db.hits.delete_many({"_id": {"$in": list(bad)}})
        again = cli(mongo_uri, db.name, "export", "hits", "--out", "bad.parquet", cwd=tmp_path)
        assert again.returncode == 0 and not (tmp_path / "bad.parquet.rejects.jsonl").exists()
    finally:
        mongo_client.drop_database(db.name)


def _batches(coll, spec, size=100):
    return [bytes(b) for b in coll.find_raw_batches(spec.filter, spec.projection, batch_size=size)]


@pytest.mark.parametrize("collection", ["hits", "materials"])
def test_the_fast_and_exact_ways_write_the_same_table(samples, collection):
    spec = build(curated.get(collection), fields="*")
    converter = Converter(spec.fields, samples[collection].codec_options)
    for batch in _batches(samples[collection], spec):
        fast = converter.fast(batch)
        exact, rejects = converter.exact(batch)
        assert rejects == [] and fast.equals(exact), collection


def test_the_screen_catches_what_pymongoarrow_would_coerce_quietly(samples, mongo_client):
    spec = build(HITS, fields="*")
    converter = Converter(spec.fields, samples.hits.codec_options)
    db = mongo_client[f"t_export_screen_{uuid.uuid4().hex[:8]}"]
    try:
        clean = samples.hits.find_one({"hsps.0.evalue": {"$exists": True}})
        cases = {"rank": 2.5, "aligned": 1}
        for field, value in cases.items():
            db.hits.delete_many({})
            db.hits.insert_one({**clean, field: value})
            [batch] = _batches(db.hits, spec)
            assert converter.suspicious(batch), field
            if field == "rank":  # pymongoarrow alone would have written the truncated 2
                assert converter.fast(batch).column("rank").to_pylist() == [2]
            table, rejects = converter.convert(batch)
            assert table.num_rows == 0 and rejects[0].problems[0]["field"] == field
        db.hits.delete_many({})
        db.hits.insert_one(clean)
        [batch] = _batches(db.hits, spec)
        assert not converter.suspicious(batch)
    finally:
        mongo_client.drop_database(db.name)


def test_batches_stream_and_an_empty_result_is_a_valid_file(samples, tmp_path):
    spec = build(HITS, fields="query_id,evalue,rank", sort="rank")
    small = export(samples.hits, spec, "parquet", str(tmp_path / "small.parquet"), batch_size=7, ahead=2)
    whole = export(samples.hits, spec, "parquet", str(tmp_path / "whole.parquet"), batch_size=5000)
    n = samples.hits.count_documents({})
    assert small.rows == whole.rows == n and n > 500 and small.fast_batches >= n // 7
    assert pd.read_parquet(tmp_path / "small.parquet").equals(pd.read_parquet(tmp_path / "whole.parquet"))
    none = build(HITS, where='query_id == "nothing"')
    empty = export(samples.hits, none, "parquet", str(tmp_path / "empty.parquet"))
    frame = pd.read_parquet(tmp_path / "empty.parquet")
    assert empty.rows == 0 and len(frame) == 0 and list(frame.columns) == [f.name for f in none.fields]


def test_query_writes_parquet_through_the_export(mongo_uri, samples, tmp_path):
    oxides = 'elements has "O" and band_gap between 1 and 3'
    proc = cli(mongo_uri, samples.name, "query", "materials", "--where", oxides, "--format", "parquet", "--out",
               "oxides.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_parquet(tmp_path / "oxides.parquet")
    expected = samples.materials.count_documents({"elements": "O", "band_gap": {"$gte": 1, "$lte": 3}})
    assert len(frame) == expected > 0 and list(frame.columns) == list(curated.get("materials").defaults)
    assert pa.types.is_floating(pa.Schema.from_pandas(frame).field("band_gap").type)
