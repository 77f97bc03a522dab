"""Analyses: pure pandas arithmetic, partition planning and the Dask runner.

Expected values are computed by hand in the comments next to them.  The
database tests use the real server from ``conftest.py``; one LocalCluster
(2 worker processes) is started for the whole module.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from analytics.analyses import best_hits as bh, oxide_formation_energy as ox
from analytics.reading.partitions import (
    PartitionSpec,
    meta_for,
    plan_partitions,
    read_collection,
    read_partition,
)
from analytics.registry import UnknownAnalysis, analysis_names
from analytics.runner import analyze
from ingest.cluster import dask_client
from ingest.errors import AnalysisError, ConfigError, UsageError
from ingest.schema import empty

HITS_COLUMNS = bh.COLUMNS

NaN = float("nan")


# ------------------------------------------------------------------ helpers
def hit_rows(rows):
    """A best_hits input frame from (search_id, rank, hit_id, score, evalue, bits, identity)."""
    frame = pd.DataFrame(rows, columns=["search_id", "rank", "hit_id", "score", "evalue", "bits", "identity"])
    frame["query_id"] = frame["search_id"].map(lambda s: "Q-" + s)
    frame["library"] = "lib.fa"
    frame["program"] = "ssearch36"
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


def assert_record(actual: dict, expected: dict):
    """Equal keys; floats compared with a relative tolerance; NaN equals NaN."""
    assert set(actual) == set(expected), (sorted(actual), sorted(expected))
    for key, value in expected.items():
        got = actual[key]
        if isinstance(value, float) and math.isnan(value):
            assert got is None or (isinstance(got, float) and math.isnan(got)), (key, got)
        elif isinstance(value, float):
            assert got == pytest.approx(value, rel=1e-12), (key, got, value)
        else:
            assert got == value, (key, got, value)


def frame_records(frame: pd.DataFrame) -> list[dict]:
    out = []
    for row in frame.to_dict("records"):
        out.append({k: (None if v is pd.NA else (v.item() if isinstance(v, np.generic) else v))
                    for k, v in row.items()})
    return out


# ------------------------------------------------------------------ best_hits (pure)
HITS = hit_rows([
    # search A: scores 50, 80, 80, 20 -- tie at 80 broken by the lower E-value (rank 3)
    ("A", 1, "a1", 50.0, 1e-3, 20.0, 0.50),
    ("A", 2, "a2", 80.0, 1e-5, 31.0, 0.70),
    ("A", 3, "a3", 80.0, 1e-6, 30.5, NaN),   # best; it has no identity
    ("A", 4, "a4", 20.0, 2e-1, 9.0, NaN),
    # search B: equal score and E-value: the lower rank wins
    ("B", 2, "b2", 40.0, 0.01, 18.0, 0.40),
    ("B", 1, "b1", 40.0, 0.01, 18.0, 0.45),
    # search C: one hit without a score (an unaligned best-scores-table entry with evalue only)
    ("C", 1, "c1", NaN, 5.0, NaN, NaN),
    ("C", 2, "c2", 12.0, 9.0, 7.5, NaN),
])

EXPECTED_BEST = {
    # A: sorted scores 20, 50, 80, 80 -> p25 at 0.75: 20 + .75*30 = 42.5;
    #    median (50+80)/2 = 65; p75 at 2.25: 80; mean 230/4 = 57.5
    "A": dict(n_hits=4, n_scored=4, score_min=20.0, score_p25=42.5, score_median=65.0,
              score_p75=80.0, score_max=80.0, score_mean=57.5, best_hit_id="a3", best_rank=3,
              best_score=80.0, best_evalue=1e-6, best_bits=30.5, best_identity=NaN),
    "B": dict(n_hits=2, n_scored=2, score_min=40.0, score_p25=40.0, score_median=40.0,
              score_p75=40.0, score_max=40.0, score_mean=40.0, best_hit_id="b1", best_rank=1,
              best_score=40.0, best_evalue=0.01, best_bits=18.0, best_identity=0.45),
    # C: only c2 has a score; c1 sorts after it (missing scores sort last)
    "C": dict(n_hits=2, n_scored=1, score_min=12.0, score_p25=12.0, score_median=12.0,
              score_p75=12.0, score_max=12.0, score_mean=12.0, best_hit_id="c2", best_rank=2,
              best_score=12.0, best_evalue=9.0, best_bits=7.5, best_identity=NaN),
}


def expected_best_record(search_id: str) -> dict:
    return {"search_id": search_id, "query_id": "Q-" + search_id, "library": "lib.fa",
            "program": "ssearch36", **EXPECTED_BEST[search_id]}


def test_best_hits_hand_computed():
    result = bh.best_hits(HITS)
    assert list(result.columns) == list(bh.OUTPUT_TYPES)
    assert list(result["search_id"]) == ["A", "B", "C"]
    for record in frame_records(result):
        assert_record(record, expected_best_record(record["search_id"]))


def test_best_hits_ignores_row_order():
    shuffled = HITS.sample(frac=1.0, random_state=7).reset_index(drop=True)
    pd.testing.assert_frame_equal(bh.best_hits(shuffled), bh.best_hits(HITS))


def test_best_hits_search_straddling_partitions_needs_grouping():
    # Split A's hits over two "partitions": per-partition results are wrong and
    # duplicated, grouping by search_id first (what the runner does) is exact.
    part1, part2 = HITS.iloc[:2], HITS.iloc[2:]
    naive = pd.concat([bh.best_hits(part1), bh.best_hits(part2)])
    assert naive["search_id"].tolist().count("A") == 2
    naive_a = naive[naive["search_id"] == "A"]
    assert set(naive_a["best_hit_id"]) == {"a2", "a3"}  # each half has its own "best"
    regrouped = pd.concat([part1, part2]).groupby("search_id", group_keys=False)
    combined = pd.concat(bh.best_hits(g) for _, g in regrouped).reset_index(drop=True)
    pd.testing.assert_frame_equal(combined, bh.best_hits(HITS))


def test_best_hits_empty_and_missing_columns():
    none = bh.best_hits(HITS.iloc[:0])
    assert len(none) == 0
    assert none.dtypes.to_dict() == empty(bh.OUTPUT_TYPES).dtypes.to_dict()
    with pytest.raises(AnalysisError, match="evalue"):
        bh.best_hits(HITS.drop(columns=["evalue"]))


# ------------------------------------------------------------------ oxides (pure)
MATERIALS = pd.DataFrame({
    "material_id": ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"],
    "elements": [["Fe", "O"], ["O", "Zn"], ["O", "Si"], ["Si"], ["O", "Ti"], None,
                 ["Mg", "O"], ["Mg", "O"], np.array(["O"])],
    "formation_energy_per_atom": [-1.5, -1.2, -2.0, -0.5, NaN, -1.0, 0.25, 0.75, -0.0],
    "band_gap": [2.0, NaN, 5.0, 1.1, 3.0, 4.0, 7.5, 6.5, NaN],
})
# ceil: m1 -1.5 -> -1, m2 -1.2 -> -1, m3 -2.0 -> -2, m7 .25 -> 1, m8 .75 -> 1, m9 -0.0 -> 0
# m4 is not an oxide; m5 is an oxide without formation energy; m6 has no elements list.
EXPECTED_OXIDES = [
    dict(formation_energy_ceil=-2, count=1, mean_band_gap=5.0, n_band_gap=1,
         min_formation_energy=-2.0, max_formation_energy=-2.0),
    dict(formation_energy_ceil=-1, count=2, mean_band_gap=2.0, n_band_gap=1,
         min_formation_energy=-1.5, max_formation_energy=-1.2),
    dict(formation_energy_ceil=0, count=1, mean_band_gap=NaN, n_band_gap=0,
         min_formation_energy=0.0, max_formation_energy=0.0),
    dict(formation_energy_ceil=1, count=2, mean_band_gap=7.0, n_band_gap=2,
         min_formation_energy=0.25, max_formation_energy=0.75),
]


def test_oxide_formation_energy_hand_computed():
    result, excluded = ox.oxide_formation_energy(MATERIALS)
    assert list(result.columns) == list(ox.OUTPUT_TYPES)
    records = frame_records(result)
    assert len(records) == len(EXPECTED_OXIDES)
    for got, want in zip(records, EXPECTED_OXIDES):
        assert_record(got, want)
    assert excluded == {"no_formation_energy": 1, "no_elements": 1}
    assert result["count"].sum() + excluded["no_formation_energy"] == 7  # the oxides


@pytest.mark.parametrize("cuts", [(1,), (3, 5), (2, 4, 6, 8), (9,)])
def test_oxide_partials_combine_to_whole(cuts):
    bounds = [0, *cuts, len(MATERIALS)]
    parts = [MATERIALS.iloc[a:b] for a, b in zip(bounds, bounds[1:])]
    combined, combined_excluded = ox.oxide_combine([ox.oxide_partial(p) for p in parts])
    whole, whole_excluded = ox.oxide_formation_energy(MATERIALS)
    pd.testing.assert_frame_equal(combined, whole)
    assert combined_excluded == whole_excluded


def test_oxide_no_oxides_gives_empty_table():
    result, excluded = ox.oxide_formation_energy(MATERIALS[MATERIALS["material_id"] == "m4"])
    assert len(result) == 0
    assert excluded == {"no_formation_energy": 0, "no_elements": 0}


# ------------------------------------------------------------------ partitions
def _insert_hits(coll, searches: dict[str, int]):
    docs = []
    for search_id, n in searches.items():
        for rank in range(1, n + 1):
            docs.append({"_id": f"{search_id}:{rank}", "search_id": search_id, "rank": rank,
                         "hit_id": f"{search_id}-h{rank}", "hsps": [{"score": 100 - rank}]})
    coll.insert_many(docs)
    return docs


SEARCHES = {f"{'ab' * 10}:{i}": n for i, n in enumerate([5, 1, 7, 3, 4, 2, 6, 1, 3, 8, 2, 5])}


@pytest.mark.parametrize("key", ["_id", "search_id"])
def test_plan_partitions_covers_every_document_once(mongo_uri, db, key):
    docs = _insert_hits(db.hits, SEARCHES)
    specs = plan_partitions(mongo_uri, db.name, "hits", 4, key=key, columns=HITS_COLUMNS)
    assert specs[0].projection == {"rank": 1, "hit_id": 1, "library": 1, "program": 1, "query_id": 1,
                                   "search_id": 1, "hsps.bits": 1, "hsps.score": 1, "hsps.evalue": 1,
                                   "hsps.identity": 1}
    assert 1 < len(specs) <= 4
    assert [s.upper_inclusive for s in specs] == [False] * (len(specs) - 1) + [True]
    frames = [read_partition(s) for s in specs]
    assert sum(len(f) for f in frames) == len(docs) == db.hits.count_documents({})
    seen = [(r["search_id"], int(r["rank"])) for f in frames for _, r in f.iterrows()]
    assert len(seen) == len(set(seen))  # no overlap
    assert set(seen) == {(d["search_id"], d["rank"]) for d in docs}
    if key == "search_id":  # grouping key: every search lies in exactly one partition
        owners = {}
        for i, frame in enumerate(frames):
            for sid in set(frame["search_id"]):
                assert owners.setdefault(sid, i) == i


def test_plan_partitions_with_query_and_single_partition(mongo_uri, db):
    _insert_hits(db.hits, SEARCHES)
    query = {"rank": {"$lte": 2}}
    specs = plan_partitions(mongo_uri, db.name, "hits", 3, query=query, columns=HITS_COLUMNS)
    rows = sum(len(read_partition(s)) for s in specs)
    assert rows == db.hits.count_documents(query) == sum(min(n, 2) for n in SEARCHES.values())
    one = plan_partitions(mongo_uri, db.name, "hits", 1, columns=HITS_COLUMNS)
    assert len(one) == 1 and len(read_partition(one[0])) == db.hits.count_documents({})


def test_plan_partitions_empty_collection(mongo_uri, db, dclient):
    specs = plan_partitions(mongo_uri, db.name, "hits", 4, columns=HITS_COLUMNS)
    assert specs == []
    meta = meta_for(HITS_COLUMNS)
    ddf = read_collection(specs, meta)
    assert ddf.npartitions == 1
    frame = dclient.compute(ddf, sync=True)
    assert len(frame) == 0 and list(frame.columns) == list(meta.columns)
    assert frame.dtypes.to_dict() == ddf._meta.dtypes.to_dict()


def test_plan_partitions_rejects_missing_or_mixed_keys(mongo_uri, db):
    db.things.insert_many([{"_id": i, "k": f"v{i}"} for i in range(6)] + [{"_id": 99}])
    with pytest.raises(AnalysisError, match="missing or of mixed types"):
        plan_partitions(mongo_uri, db.name, "things", 3, key="k", columns=[("k", "k", "string")])
    with pytest.raises(ConfigError):
        plan_partitions(mongo_uri, db.name, "things", 0, columns=[("k", "k", "string")])


def test_read_partition_types_and_missing_values(mongo_uri, db):
    db.m.insert_many([
        {"_id": "mp-1", "elements": ["Fe", "O"], "fe": -1, "gap": 2.5, "n": 4, "sym": {"number": 225}},
        {"_id": "mp-2", "elements": "O", "fe": "n/a", "gap": True, "n": 2.5},  # wrong types
        {"_id": "mp-3", "hsps": [{"score": 7}, {"score": 1}]},  # absent fields
    ])
    columns = (("id", "_id", "string"), ("elements", "elements", "list<string>"),
               ("fe", "fe", "float64"), ("gap", "gap", "float64"), ("n", "n", "int64"),
               ("number", "sym.number", "int64"), ("first", "hsps.0.score", "float64"))
    (spec,) = plan_partitions(mongo_uri, db.name, "m", 1, columns=columns)
    frame = read_partition(spec).set_index("id")
    assert frame.reset_index().dtypes.to_dict() == meta_for(columns).dtypes.to_dict()
    assert list(frame.loc["mp-1", "elements"]) == ["Fe", "O"]
    assert frame.loc["mp-1", "fe"] == -1.0 and frame.loc["mp-1", "n"] == 4
    assert frame.loc["mp-1", "number"] == 225
    # a value of the wrong type is missing, never guessed
    assert frame.loc["mp-2", "elements"] is pd.NA
    assert math.isnan(frame.loc["mp-2", "fe"]) and math.isnan(frame.loc["mp-2", "gap"])
    assert frame.loc["mp-2", "n"] is pd.NA
    assert frame.loc["mp-3", "first"] == 7.0 and math.isnan(frame.loc["mp-1", "first"])

    # Without declared columns: nested fields flattened to dotted names.
    (plain,) = plan_partitions(mongo_uri, db.name, "m", 1, query={"sym": {"$exists": True}})
    flat = read_partition(plain)
    assert flat.loc[0, "_id"] == "mp-1" and flat.loc[0, "sym.number"] == 225


def test_partition_spec_is_small_and_picklable():
    import pickle

    spec = PartitionSpec("mongodb://h:1/", "d", "c", "a", "b", False, {"x": 1}, {"y": 1},
                         columns=(("y", "y", "float64"),))
    assert pickle.loads(pickle.dumps(spec)) == spec
    # one filter, not an $and: SecantusDB (and older planners) read an $and with a range as a collection scan
    assert spec.filter() == {"x": 1, "_id": {"$gte": "a", "$lt": "b"}}
    clash = PartitionSpec("mongodb://h:1/", "d", "c", "a", "b", True, {"_id": {"$ne": "q"}})
    assert clash.filter() == {"$and": [{"_id": {"$ne": "q"}}, {"_id": {"$gte": "a", "$lte": "b"}}]}


# ------------------------------------------------------------------ runner (Dask + MongoDB)
@pytest.fixture(scope="module")
def dclient():
    with dask_client(None) as client:
        yield client


def _hit(search_id, rank, hit_id, **hsp):
    return {"_id": f"{search_id}:{rank}", "search_id": search_id, "query_id": "Q-" + search_id,
            "program": "ssearch36", "library": "lib.fa", "rank": rank, "hit_id": hit_id,
            "aligned": True, "hsps": [{**hsp, "query_seq": "MKV", "hit_seq": "MKI"}] if hsp else []}


def _e2e_hits(prefix):
    # search ids "<p>:0", "<p>:1", "<p>:10": "<p>:10:*" sorts between "<p>:0:*" and "<p>:1:*"
    a, b, c = f"{prefix}:0", f"{prefix}:1", f"{prefix}:10"
    return [
        _hit(a, 1, "A1", score=120, evalue=1e-20, bits=55.0, identity=0.9),
        _hit(a, 2, "A2", score=100, evalue=1e-15, bits=47.5, identity=0.8),
        _hit(a, 3, "A3", score=80, evalue=1e-9, bits=39.0),
        {**_hit(a, 4, "A4", score=60, evalue=1e-3, bits=30.1), "aligned": False},
        _hit(b, 1, "B1", score=45, evalue=0.5, bits=20.0, identity=0.3),
        _hit(b, 2, "B2", score=45, evalue=0.1, bits=20.0),
        _hit(c, 1, "C1", score=30, evalue=2.0, bits=15.0),
        _hit(c, 2, "C2", evalue=3.0),
    ], (a, b, c)


def _expected_hits_docs(a, b, c, run_id):
    base = {"query_id": None, "library": "lib.fa", "program": "ssearch36", "run_id": run_id}
    return {
        # A: scores 60, 80, 100, 120: p25 = 60 + .75*20 = 75, median 90, p75 = 100 + .25*20 = 105
        a: {**base, "_id": a, "search_id": a, "query_id": "Q-" + a, "n_hits": 4, "n_scored": 4,
            "score_min": 60.0, "score_p25": 75.0, "score_median": 90.0, "score_p75": 105.0,
            "score_max": 120.0, "score_mean": 90.0, "best_hit_id": "A1", "best_rank": 1,
            "best_score": 120.0, "best_evalue": 1e-20, "best_bits": 55.0, "best_identity": 0.9},
        # B: equal scores, B2 has the lower E-value; B2 has no identity -> field absent
        b: {**base, "_id": b, "search_id": b, "query_id": "Q-" + b, "n_hits": 2, "n_scored": 2,
            "score_min": 45.0, "score_p25": 45.0, "score_median": 45.0, "score_p75": 45.0,
            "score_max": 45.0, "score_mean": 45.0, "best_hit_id": "B2", "best_rank": 2,
            "best_score": 45.0, "best_evalue": 0.1, "best_bits": 20.0},
        # C: C2 has no score
        c: {**base, "_id": c, "search_id": c, "query_id": "Q-" + c, "n_hits": 2, "n_scored": 1,
            "score_min": 30.0, "score_p25": 30.0, "score_median": 30.0, "score_p75": 30.0,
            "score_max": 30.0, "score_mean": 30.0, "best_hit_id": "C1", "best_rank": 1,
            "best_score": 30.0, "best_evalue": 2.0, "best_bits": 15.0},
    }


E2E_MATERIALS = [
    {"_id": "mp-1", "material_id": "mp-1", "elements": ["Fe", "O"], "formation_energy_per_atom": -1.5, "band_gap": 2.0},
    {"_id": "mp-2", "material_id": "mp-2", "elements": ["O", "Zn"], "formation_energy_per_atom": -1.2},
    {"_id": "mp-3", "material_id": "mp-3", "elements": ["O", "Si"], "formation_energy_per_atom": -2.0, "band_gap": 5.0},
    {"_id": "mp-4", "material_id": "mp-4", "elements": ["Si"], "formation_energy_per_atom": -0.5, "band_gap": 1.1},
    {"_id": "mp-5", "material_id": "mp-5", "elements": ["O", "Ti"], "band_gap": 3.0},
    {"_id": "mp-6", "material_id": "mp-6", "formation_energy_per_atom": -1.0, "band_gap": 4.0},
    {"_id": "mp-7", "material_id": "mp-7", "elements": ["Mg", "O"], "formation_energy_per_atom": 0.25, "band_gap": 7.5},
    {"_id": "mp-8", "material_id": "mp-8", "elements": ["Mg", "O"], "formation_energy_per_atom": 0.75, "band_gap": 6.5},
]


def _expected_oxide_docs(run_id):
    rows = [  # ceil -2: mp-3; ceil -1: mp-1, mp-2 (no band gap); ceil 1: mp-7, mp-8
        (-2, 1, 5.0, 1, -2.0, -2.0), (-1, 2, 2.0, 1, -1.5, -1.2), (1, 2, 7.0, 2, 0.25, 0.75)]
    return {
        c: {"_id": c, "formation_energy_ceil": c, "count": n, "mean_band_gap": gap, "n_band_gap": ng,
            "min_formation_energy": lo, "max_formation_energy": hi, "run_id": run_id}
        for c, n, gap, ng, lo, hi in rows
    }


def _check_published(db, collection, parquet_path, expected: dict):
    docs = {d["_id"]: d for d in db[collection].find()}
    assert set(docs) == set(expected)
    for key, want in expected.items():
        assert_record(docs[key], want)
    table = pq.read_table(parquet_path)
    assert b"sci_ingest" in table.schema.metadata
    rows = {r[next(k for k in ("search_id", "formation_energy_ceil") if k in r)]: r
            for r in table.to_pylist()}
    assert set(rows) == set(expected)
    for key, want in expected.items():
        want_row = {k: v for k, v in want.items() if k != "_id"}
        got_row = {k: v for k, v in rows[key].items() if v is not None}
        assert_record(got_row, want_row)
    assert not [n for n in db.list_collection_names() if "__tmp_" in n]


@pytest.mark.parametrize("read_mode", ["ranges", "stream"])
@pytest.mark.parametrize("hits_key, partitions", [("search_id", 2), ("_id", 3)])
def test_analyze_end_to_end(mongo_uri, db, dclient, tmp_path, hits_key, partitions, read_mode, monkeypatch):
    """With hits_key "_id" the runner partitions on _id and shuffles on the declared group key.

    Both ways of reading give the same outputs: key ranges, and one stream cut into
    chunks of 3 documents (so search a, 4 hits, makes a chunk larger than asked).
    """
    monkeypatch.setenv("SCI_INGEST_READ_MODE", read_mode)
    monkeypatch.setattr("analytics.reading.planning.DEFAULT_CHUNK_ROWS", 3)
    hits, (a, b, c) = _e2e_hits("9f3c2a")
    db.hits.insert_many(hits)
    db.materials.insert_many(E2E_MATERIALS)
    if hits_key == "_id":  # the plan really splits search a across partitions
        specs = plan_partitions(mongo_uri, db.name, "hits", partitions,
                                columns=HITS_COLUMNS)
        owners = [set(read_partition(s)["search_id"]) for s in specs]
        assert sum(a in o for o in owners) >= 2

    results = analyze(mongo_uri, db.name, "run-1", tmp_path, partitions=partitions,
                      client=dclient, partition_keys={"best_hits": hits_key})
    by_name = {r.name: r for r in results}
    assert list(by_name) == analysis_names() and {"best_hits", "oxide_formation_energy"} <= set(by_name)
    best, oxide = by_name["best_hits"], by_name["oxide_formation_energy"]
    assert (best.records_in, best.records_out, best.collection) == (8, 3, "query_best_hits")
    assert (oxide.records_in, oxide.records_out, oxide.collection) == (8, 3, "oxide_formation_energy")
    assert best.read["mode"] == oxide.read["mode"] == read_mode
    if read_mode == "ranges":
        assert 1 <= best.partitions <= partitions and 1 <= oxide.partitions <= partitions
    else:  # hits: [a a a a] [b b c c] (cut only between searches); materials: 3 + 3 + 2
        assert (best.partitions, oxide.partitions) == (2, 3)
        # unsorted: the searches were inserted whole, so no search reached two chunks
        assert (best.read["groups"], best.read["split_groups"]) == ("mended", 0)
    assert oxide.excluded == {"no_formation_energy": 1, "no_elements": 1}
    assert best.parquet_path == tmp_path / "best_hits.parquet"
    _check_published(db, "query_best_hits", best.parquet_path, _expected_hits_docs(a, b, c, "run-1"))
    _check_published(db, "oxide_formation_energy", oxide.parquet_path, _expected_oxide_docs("run-1"))

    # Each analysis alone; the output is replaced as a whole (stale rows disappear).
    db.hits.delete_many({"search_id": c})
    (only,) = analyze(mongo_uri, db.name, "run-2", tmp_path, names=["best_hits"],
                      partitions=partitions, client=dclient, partition_keys={"best_hits": hits_key})
    expected = _expected_hits_docs(a, b, c, "run-2")
    del expected[c]
    _check_published(db, "query_best_hits", only.parquet_path, expected)
    _check_published(db, "oxide_formation_energy", oxide.parquet_path, _expected_oxide_docs("run-1"))

    db.materials.delete_many({"_id": {"$in": ["mp-7", "mp-8"]}})
    (only,) = analyze(mongo_uri, db.name, "run-3", tmp_path, names=["oxide_formation_energy"],
                      partitions=partitions, client=dclient)
    expected = _expected_oxide_docs("run-3")
    del expected[1]
    _check_published(db, "oxide_formation_energy", only.parquet_path, expected)


def test_a_stream_mends_searches_whose_hits_are_scattered(mongo_uri, db, dclient, tmp_path, monkeypatch):
    """Hits inserted interleaved (a b c a b c a a) reach several chunks of the unsorted stream;
    the runner drops those searches' partial rows and reads them again whole."""
    monkeypatch.setenv("SCI_INGEST_READ_MODE", "stream")
    monkeypatch.setattr("analytics.reading.planning.DEFAULT_CHUNK_ROWS", 3)
    hits, (a, b, c) = _e2e_hits("5d1e")
    by_search = [[h for h in hits if h["search_id"] == s] for s in (a, b, c)]
    scattered = [h for layer in range(4) for group in by_search for h in group[layer:layer + 1]]
    assert [h["search_id"] for h in scattered] == [a, b, c, a, b, c, a, a]
    db.hits.insert_many(scattered)
    (best,) = analyze(mongo_uri, db.name, "run-m", tmp_path, names=["best_hits"], client=dclient)
    assert (best.records_in, best.records_out, best.partitions) == (8, 3, 3)
    assert (best.read["groups"], best.read["split_groups"]) == ("mended", 3)
    _check_published(db, "query_best_hits", best.parquet_path, _expected_hits_docs(a, b, c, "run-m"))


def test_an_analysis_that_cannot_mend_a_group_gets_a_sorted_stream(mongo_uri, db, dclient, tmp_path,
                                                                   monkeypatch):
    from dataclasses import replace

    from analytics.registry import get_analysis
    from analytics.runner import run_analysis

    monkeypatch.setenv("SCI_INGEST_READ_MODE", "stream")
    monkeypatch.setattr("analytics.reading.planning.DEFAULT_CHUNK_ROWS", 3)
    declared = get_analysis("best_hits")
    assert declared.mends_groups  # one output row per search, keyed by it, default combine
    custom = replace(declared, combine=lambda partials: pd.concat(partials, ignore_index=True),
                     file_prefix=None)
    assert not custom.mends_groups and not get_analysis("oxide_formation_energy").mends_groups
    hits, (a, b, c) = _e2e_hits("77aa")
    db.hits.insert_many([hits[i] for i in (0, 4, 6, 1, 5, 7, 2, 3)])  # a b c a b c a a
    result = run_analysis(custom, dclient, mongo_uri, db.name, "run-s", tmp_path)
    assert (result.read["groups"], result.read["split_groups"]) == ("sorted", None)
    assert (result.records_in, result.records_out) == (8, 3)  # sorted: every search arrived whole
    _check_published(db, "query_best_hits", result.parquet_path, _expected_hits_docs(a, b, c, "run-s"))


def test_analyze_empty_database(mongo_uri, db, dclient, tmp_path):
    results = analyze(mongo_uri, db.name, "empty", tmp_path, client=dclient)
    assert [(r.name, r.records_in, r.records_out, r.partitions) for r in results] == [
        (name, 0, 0, 0) for name in analysis_names()]
    assert db.query_best_hits.count_documents({}) == 0
    assert pq.read_table(tmp_path / "best_hits.parquet").num_rows == 0


def test_analyze_rejects_unknown_analysis(mongo_uri, db, dclient, tmp_path):
    with pytest.raises(UnknownAnalysis, match="unknown analysis 'nope'; known: " + ", ".join(analysis_names())):
        analyze(mongo_uri, db.name, "r", tmp_path, names=["nope"], client=dclient)
    assert issubclass(UnknownAnalysis, UsageError) and UnknownAnalysis.exit_code == 64  # a name that does not exist


def test_dask_client_connects_to_a_given_scheduler(dclient):
    with dask_client(dclient.scheduler.address) as remote:
        assert remote.submit(sum, [1, 2, 3]).result() == 6
        assert len(remote.nthreads()) == 2


def test_runner_import_is_light():
    code = ("import sys, analytics.runner; "
            "heavy = [m for m in ('pandas', 'dask', 'pyarrow', 'pymongoarrow', 'distributed') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_partitions_spread_small_and_bound_large_collections():
    from analytics.reading.planning import MAX_ROWS_PER_PARTITION, default_partitions

    assert default_partitions(2, 0) == 1
    assert default_partitions(2, 150) == 2  # no partition under MIN_ROWS_PER_PARTITION
    assert default_partitions(2, 3_000) == 4  # two per thread
    big = 50_000_000
    n = default_partitions(2, big)
    assert n * MAX_ROWS_PER_PARTITION >= big and n == -(-big // MAX_ROWS_PER_PARTITION)


def test_oxides_count_materials_not_documents_about_them(mongo_uri, db, dclient, tmp_path):
    """An entry or spectrum stored beside its material (same material_id) is not a second material."""
    db.materials.insert_many([
        {"_id": "mp-1", "material_id": "mp-1", "elements": ["Mg", "O"], "formation_energy_per_atom": -3.1,
         "band_gap": 4.5, "_ingest": {"type": "summary"}},
        {"_id": "entry:mp-1-GGA", "material_id": "mp-1", "elements": ["Mg", "O"],
         "formation_energy_per_atom": -3.0, "_ingest": {"type": "entry"}},
        {"_id": "xas:mp-1-K", "material_id": "mp-1", "elements": ["Mg", "O"], "_ingest": {"type": "xas"}},
        {"_id": "mp-2", "material_id": "mp-2", "elements": ["Zn", "O"], "formation_energy_per_atom": -1.8,
         "band_gap": 3.3},  # no _ingest: loaded by other means, still a material
    ])
    (result,) = analyze(mongo_uri, db.name, "r", tmp_path, names=["oxide_formation_energy"], client=dclient)
    rows = {d["_id"]: d for d in db.oxide_formation_energy.find()}
    assert result.records_in == 2
    assert rows[-3]["count"] == 1 and rows[-3]["mean_band_gap"] == 4.5
    assert rows[-1]["count"] == 1 and rows[-1]["mean_band_gap"] == 3.3


def _profiler_enabled() -> bool:
    import dask

    return bool(dask.config.get("distributed.worker.profile.enabled"))


def test_local_cluster_workers_run_without_the_statistical_profiler(dclient):
    """Dask's profiler calls sys._current_frames() every 10 ms, which on Python 3.11 < 3.11.9 can
    deadlock a process whose threads come and go (CPython gh-106883): a load's worker hung so."""
    assert set(dclient.run(_profiler_enabled).values()) == {False}


def _pid() -> int:
    return os.getpid()


def test_a_worker_started_again_after_it_died_runs_without_the_profiler_too():
    """The nanny starts a new worker after a kill -9; it hung a load when it came up profiling."""
    import psutil

    with dask_client(None, n_workers=1) as client:
        (before,) = client.run(_pid).values()
        psutil.Process(before).kill()
        deadline = time.monotonic() + 60
        pids: set = set()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                pids = set(client.run(_pid).values())
            except OSError:  # asked while the scheduler still listed the dead worker
                continue
            if pids and before not in pids:
                break
        assert pids and before not in pids, "the nanny did not start a new worker within 60 s"
        assert set(client.run(_profiler_enabled).values()) == {False}
