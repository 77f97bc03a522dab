"""How a source is read (issue 10): the server's plans decide, the stream keeps groups whole,
sampled key ranges cover every document once, and validation merged over chunks says what
one pass over the whole table says.  Against the real server of ``conftest.py``."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import bson
import pytest
from bson.errors import InvalidBSON

from analytics.analyses import best_hits as bh
from analytics.reading.partitions import plan_partitions, read_partition
from analytics.reading.planning import WHOLE_DOCUMENT_BYTES, plan_reads, plan_stages, probe, read_mode, whole_documents
from analytics.reading.streaming import StreamSpec, batch_starts, chunk_frame, read_chunks
from analytics.validation import validate
from analytics.validation.stream import UNIQUE_TYPES, Accumulator
from ingest.errors import AnalysisError, ConfigError

PASTA = Path(__file__).resolve().parent.parent / "samples" / "pasta" / "ssearch36_full_seq.m10"
COLUMNS = (("g", "g", "string"), ("n", "n", "int64"), ("x", "x.0.v", "float64"))


def _docs(groups: dict[str, int]) -> list[dict]:
    docs = []
    for g, size in groups.items():
        docs += [{"_id": f"{g}:{i}", "g": g, "n": i, "x": [{"v": i / 2}]} for i in range(size)]
    return docs


# ------------------------------------------------------------------ what the server's plans say
def test_the_embedded_server_gets_one_stream_and_says_why(db, mongo_uri):
    db.t.insert_many(_docs({"a": 5, "b": 5}))
    db.t.create_index([("g", 1)])
    caps = probe(db, "t", "g")
    # SecantusDB seeks an indexed range, but answers $sample with a collection scan
    assert (caps.seeks, caps.samples, caps.multikey) == (True, False, False)
    assert "g range is IXSCAN" in caps.evidence and "$sample is COLLSCAN" in caps.evidence
    # with another predicate the range is a collection scan there
    assert probe(db, "t", "g", {"n": {"$gt": 1}}).seeks is False
    # a range on an unindexed field, or on a multikey index, is no good for ranges either
    assert probe(db, "t", "n").seeks is False
    db.m.insert_many([{"_id": 1, "tags": ["a", "b"]}, {"_id": 2, "tags": ["c"]}])
    db.m.create_index([("tags", 1)])
    assert probe(db, "m", "tags").multikey is True
    plan = plan_reads(mongo_uri, db.name, "t", columns=COLUMNS, key="g", group_key="g")
    assert plan.mode == "stream" and plan.reason == caps.evidence
    assert (plan.stream.group_path, plan.stream.sorted) == ("g", True)
    assert plan.documents is None  # no count was asked for (what it took is the plan's record, not a test's)
    assert plan.describe()["planning_s"] >= 0
    assert plan.describe()["groups"] == "sorted"
    unsorted = plan_reads(mongo_uri, db.name, "t", columns=COLUMNS, key="g", group_key="g", sort_groups=False)
    assert (unsorted.stream.group_path, unsorted.stream.sorted) == ("g", False)
    assert "cut where g changes" in unsorted.stream.describe()


def test_a_secantusdb_stream_of_small_documents_asks_for_them_whole(db, mongo_uri, load_files, tmp_path):
    """SecantusDB projects in Python (a quarter of a hits read's server time): documents that weigh
    little are read whole, heavy ones and unknown ones through the projection.  The weight is
    measured on stored documents, whatever the input's compression, and kept until a file changes
    the collection."""
    db.t.insert_many(_docs({"a": 5, "b": 5}))
    db.t.create_index([("g", 1)])
    spec = plan_reads(mongo_uri, db.name, "t", columns=COLUMNS, key="g", group_key="g")
    assert spec.stream.whole_documents is False  # no file on record wrote into t
    assert "no loaded file on record" in spec.describe()["documents"]
    load_files([str(PASTA)])
    stored = [len(bson.encode(d)) for d in db.hits.find()]
    whole, why = whole_documents(db, "hits")
    assert whole and f"{sum(stored) / len(stored):,.0f} bytes a stored document" in why, why
    plan = plan_reads(mongo_uri, db.name, "hits", columns=bh.COLUMNS, key="search_id", group_key="search_id")
    assert plan.stream.whole_documents and plan.describe()["documents"].startswith("whole documents")
    assert "whole documents" in plan.stream.describe()
    frames = [chunk_frame(plan.stream.columns, raw) for _, raw in read_chunks(plan.stream)]
    assert sum(len(f) for f in frames) == len(stored)

    # records in a gzip file: a few hundred bytes of file each, kilobytes stored
    heavy = tmp_path / "heavy.jsonl.gz"
    with gzip.open(heavy, "wt") as fh:
        for i in range(30):
            fh.write(json.dumps({"material_id": f"mp-{i}", "formula_pretty": "SiO2", "notes": "ab" * 1500}) + "\n")
    assert heavy.stat().st_size / 30 < WHOLE_DOCUMENT_BYTES
    load_files([str(heavy)])
    whole, why = whole_documents(db, "materials")
    assert not whole and f"over {WHOLE_DOCUMENT_BYTES:,}" in why, why
    weight = db.analysis_state.find_one({"_id": "weight:materials"})
    assert weight["bytes"] > 3000 and weight["documents"] == 30
    light = tmp_path / "light.jsonl"  # a file with fewer documents there is measured first
    light.write_text("".join(json.dumps({"material_id": f"mp-l{i}", "formula_pretty": "Si"}) + "\n"
                             for i in range(3)))
    load_files([str(light)])
    whole, why = whole_documents(db, "materials")  # the collection changed: measured again
    assert db.analysis_state.find_one({"_id": "weight:materials"})["documents"] == 33, why


def test_plan_stages_reads_nested_and_sharded_explains():
    explain = {"queryPlanner": {"winningPlan": {"stage": "SHARD_MERGE", "shards": [
        {"winningPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "isMultiKey": False}}},
        {"winningPlan": {"stage": "COLLSCAN"}}]}},
        "stages": [{"$cursor": {}}, {"$sampleFromRandomCursor": {"size": 10}}]}
    assert {"SHARD_MERGE", "FETCH", "IXSCAN", "COLLSCAN", "$cursor", "$sampleFromRandomCursor"} <= plan_stages(explain)


def test_read_mode_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv("SCI_INGEST_READ_MODE", raising=False)
    assert read_mode() == "auto" and read_mode("Stream") == "stream"
    monkeypatch.setenv("SCI_INGEST_READ_MODE", "ranges")
    assert read_mode() == "ranges"
    with pytest.raises(ConfigError, match="read mode must be one of auto, ranges, stream"):
        read_mode("fast")


# ------------------------------------------------------------------ sampled key ranges
def test_sampled_ranges_cover_every_document_once_and_keep_groups_whole(db, mongo_uri):
    groups = {f"s{i:03d}": 1 + i % 7 for i in range(120)}
    db.t.insert_many(_docs(groups))
    db.t.create_index([("g", 1)])
    specs = plan_partitions(mongo_uri, db.name, "t", 5, key="g", columns=COLUMNS)
    assert 2 <= len(specs) <= 5
    assert specs[0].lower == "s000" and specs[-1].upper == "s119" and specs[-1].upper_inclusive
    assert all(a.upper == b.lower for a, b in zip(specs, specs[1:]))  # contiguous, no gap
    frames = [read_partition(s) for s in specs]
    ids = [i for f in frames for i in zip(f["g"], f["n"])]
    assert len(ids) == len(set(ids)) == sum(groups.values())
    owners = [set(f["g"]) for f in frames]
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1:])  # no group in two
    # with the analysis's filter merged in
    some = plan_partitions(mongo_uri, db.name, "t", 3, {"n": {"$gte": 3}}, key="g", columns=COLUMNS)
    assert sum(len(read_partition(s)) for s in some) == db.t.count_documents({"n": {"$gte": 3}})


def test_sampled_ranges_refuse_missing_or_mixed_keys_and_plan_nothing_for_nothing(db, mongo_uri):
    assert plan_partitions(mongo_uri, db.name, "t", 4, key="g", columns=COLUMNS) == []
    db.t.insert_many([{"_id": 1, "g": "a"}, {"_id": 2, "g": 7}])
    with pytest.raises(AnalysisError, match="missing or of mixed types"):
        plan_partitions(mongo_uri, db.name, "t", 2, key="g", columns=COLUMNS)
    db.u.insert_many([{"_id": 1, "g": "a"}, {"_id": 2}])  # a missing key sorts first, as null
    with pytest.raises(AnalysisError, match="smallest None"):
        plan_partitions(mongo_uri, db.name, "u", 2, key="g", columns=COLUMNS)


# ------------------------------------------------------------------ the stream
@pytest.mark.parametrize("chunk_rows", [1, 4, 1000])
def test_the_stream_is_cut_between_groups_only(db, mongo_uri, chunk_rows):
    groups = {"a": 3, "b": 9, "c": 1, "d": 4}  # b is larger than a chunk of 4
    db.t.insert_many(list(reversed(_docs(groups))))  # natural order is not group order
    db.t.create_index([("g", 1)])
    spec = StreamSpec(uri=mongo_uri, db_name=db.name, collection="t", columns=COLUMNS, group_key="g",
                      group_path="g", sorted=True, chunk_rows=chunk_rows)
    chunks = list(read_chunks(spec))
    frames = [chunk_frame(spec.columns, raw) for _, raw in chunks]
    assert [n for n, _ in chunks] == [len(f) for f in frames]
    assert sum(len(f) for f in frames) == sum(groups.values())
    owners = [set(f["g"]) for f in frames]
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1:])
    assert all(len(f) >= chunk_rows for f in frames[:-1])  # only the last may be short
    if chunk_rows == 4:
        assert [sorted(o) for o in owners] == [["a", "b"], ["c", "d"]]
    # typed as declared; the list-index path reads the first element's field
    first = frames[0].sort_values(["g", "n"]).iloc[0]
    assert str(frames[0]["n"].dtype) == "Int64" and first["x"] == first["n"] / 2


def test_an_unsorted_stream_is_cut_every_chunk_rows(db, mongo_uri):
    db.t.insert_many(_docs({"a": 10}))
    spec = StreamSpec(uri=mongo_uri, db_name=db.name, collection="t", columns=COLUMNS, chunk_rows=4)
    assert [n for n, _ in read_chunks(spec)] == [4, 4, 2]
    assert list(read_chunks(StreamSpec(uri=mongo_uri, db_name=db.name, collection="none",
                                       columns=COLUMNS))) == []


def test_an_unsorted_stream_is_still_cut_only_where_the_group_changes(db, mongo_uri):
    db.t.insert_many(_docs({"a": 3, "b": 6, "c": 2}) + _docs({"z": 1}))  # natural order: a a a b b b b b b c c z
    spec = StreamSpec(uri=mongo_uri, db_name=db.name, collection="t", columns=COLUMNS, group_key="g",
                      group_path="g", chunk_rows=4)
    frames = [chunk_frame(COLUMNS, raw) for _, raw in read_chunks(spec)]
    # the chunk of 4 runs on to the end of group b; no sort was asked of the server
    assert [list(f["g"]) for f in frames] == [list("aaabbbbbb"), list("ccz")]


def test_a_raw_batch_is_walked_by_its_length_prefixes_and_a_false_length_is_refused():
    docs = [bson.encode({"g": "a" * i}) for i in range(4)]
    batch = b"".join(docs)
    assert batch_starts(batch) == [0, *itertools.accumulate(len(d) for d in docs)]
    assert batch_starts(b"") == [0]
    for bad in (b"\x00\x00\x00\x00" + batch, batch[:-1], batch + b"\x05\x00"):  # zero, truncated, torn
        with pytest.raises(InvalidBSON, match="claims"):
            batch_starts(bad)


def test_best_hits_from_a_stream_equals_best_hits_of_everything(db, mongo_uri):
    hits = []
    for s in range(30):
        for rank in range(1, 2 + s % 5):
            hits.append({"_id": f"q{s:02d}:{rank}", "search_id": f"q{s:02d}", "query_id": f"Q{s}",
                         "program": "ssearch36", "library": "lib", "rank": rank, "hit_id": f"h{rank}",
                         "hsps": [{"score": (s * 7 + rank * 13) % 50, "evalue": rank / 10, "bits": 1.0,
                                   "identity": 0.5}]})
    db.hits.insert_many(hits)
    db.hits.create_index([("search_id", 1)])
    spec = StreamSpec(uri=mongo_uri, db_name=db.name, collection="hits", columns=bh.COLUMNS,
                      group_key="search_id", group_path="search_id", sorted=True, chunk_rows=7)
    parts = [bh.best_hits(chunk_frame(spec.columns, raw)) for _, raw in read_chunks(spec)]
    assert len(parts) > 3
    import pandas as pd

    streamed = pd.concat(parts, ignore_index=True).sort_values("search_id").reset_index(drop=True)
    whole = bh.best_hits(chunk_frame(spec.columns, b"".join(bson.encode(h) for h in hits)))
    pd.testing.assert_frame_equal(streamed, whole)


# ------------------------------------------------------------------ validation, merged over chunks
def _material(i: int, **extra) -> dict:
    doc = {"_id": f"mp-{i}", "material_id": f"mp-{i}", "formula_pretty": "Si", "elements": ["Si"],
           "nelements": 1, "chemsys": "Si", "formation_energy_per_atom": -0.5, "band_gap": 1.1,
           "energy_above_hull": 0.0, "density": 2.3, "volume": 40.0, "nsites": 2,
           "symmetry": {"crystal_system": "Cubic"}}
    doc.update(extra)
    return doc


def _comparable(report):
    keep = ("expectation", "column", "success", "element_count", "unexpected_count", "missing_count",
            "unexpected_percent")
    return {s.suite: (s.status, s.rows, [{k: r.get(k) for k in keep} for r in s.results]) for s in report.suites}


def test_validation_in_chunks_says_what_one_pass_says(db, mongo_uri):
    docs = [_material(i) for i in range(40)]
    docs[3]["formation_energy_per_atom"] = 42.0           # out of range, in an early chunk
    docs[37]["band_gap"] = {"search_gap": 1.0}             # not a number, in a late chunk
    docs[38]["material_id"] = "mp-2"                       # a duplicate of a row 36 rows earlier
    docs[39]["nelements"] = 5                              # nelements != len(elements)
    db.materials.insert_many(docs)
    whole = validate(mongo_uri, db.name, "one-pass", suites=["materials"], chunk_rows=1000)
    chunked = validate(mongo_uri, db.name, "chunked", suites=["materials"], chunk_rows=3)
    assert whole.suites[0].chunks == 1 and chunked.suites[0].chunks == 14
    assert _comparable(chunked) == _comparable(whole)
    failed = {(r["expectation"], r["column"]) for r in chunked.suites[0].failures}
    assert ("expect_column_values_to_be_unique", "material_id") in failed  # across chunks: hashes
    unique = next(r for r in chunked.suites[0].results if r["expectation"] == "expect_column_values_to_be_unique"
                  and r["column"] == "material_id")
    assert unique["unexpected_count"] == 2 and unique["chunks"] == 14


def test_validation_on_dask_workers_says_what_it_says_here(db, mongo_uri):
    from ingest.cluster import dask_client, warm_up

    db.materials.insert_many([_material(i) for i in range(25)] + [_material(99, material_id="mp-1")])
    here = validate(mongo_uri, db.name, "here", suites=["materials", "tasks"], chunk_rows=4)
    with dask_client(None, 2) as client:
        warm_up(client, "validate")
        there = validate(mongo_uri, db.name, "there", suites=["materials", "tasks"], chunk_rows=4, client=client)
    assert _comparable(there) == _comparable(here)
    assert [s.status for s in there.suites] == ["failed", "checked nothing: empty collection"]


def test_a_filter_an_index_proves_empty_is_not_read(db, mongo_uri):
    from analytics.validation.run import _known_empty
    from analytics.validation.suites import load_suites

    entries = next(s for s in load_suites() if s.name == "material_entries")
    db.materials.insert_many([_material(i) for i in range(5)])
    assert _known_empty(db, entries) is False  # no index: the suite finds out by reading
    db.materials.create_index([("_ingest.type", 1)])
    assert "IXSCAN" in plan_stages(db.command("explain", {"find": "materials", "filter": entries.filter},
                                              verbosity="queryPlanner"))
    assert _known_empty(db, entries) is True
    [result] = validate(mongo_uri, db.name, "r", suites=["material_entries"]).suites
    assert result.skipped and result.rows == 0


def test_the_accumulator_merges_map_results_and_recomputes_mostly():
    exps = [{"type": "expect_column_values_to_be_between", "kwargs": {"column": "x", "mostly": 0.9}, "meta": {}},
            {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x"}, "meta": {}}]
    acc = Accumulator(exps, sample_size=2)
    from analytics.validation.stream import ChunkResult

    def chunk(unexpected, success, samples):
        return ChunkResult(10, 10, False, [
            {"expectation": exps[0]["type"], "success": success, "element_count": 10, "missing_count": 0,
             "unexpected_count": unexpected, "sample": samples},
            {"expectation": exps[1]["type"], "success": True, "observed_value": 1.0}], {}, {})

    acc.add(chunk(0, True, []))
    acc.add(chunk(2, False, [7, 8]))  # 2 of 10 fail here, but 2 of 20 overall: 90 % expected
    stats, results = acc.finish()
    assert results[0]["success"] is True and results[0]["unexpected_count"] == 2
    assert results[0]["unexpected_percent"] == pytest.approx(10.0) and results[0]["sample"] == [7, 8]
    assert results[1]["per_chunk"] is True and results[1]["success"] is True
    assert stats == {"evaluated_expectations": 2, "successful_expectations": 2, "unsuccessful_expectations": 0}
    assert set(UNIQUE_TYPES) == {"expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique"}
