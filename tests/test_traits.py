"""How requests are shaped for the server at hand (ingest.store.servers.Traits): the embedded server's
shapes and MongoDB's plain ones give the same answers (both run here against the test server, which
answers either; only their cost differs)."""

from __future__ import annotations

import pytest

from analytics.increment import _ranges
from analytics.runner import analyze
from ingest.cluster import dask_client
from ingest.store.catalog import LEDGER
from ingest.store.ledger import Ledger
from ingest.store.servers import MONGODB, SECANTUSDB, server_of, traits

SHAPES = {"mongodb": MONGODB, "secantusdb": SECANTUSDB}


def test_the_server_is_described_by_its_kind(mongo_client, db):
    expected = SECANTUSDB if server_of(db).kind == "SecantusDB" else MONGODB
    assert traits(db) == expected
    assert MONGODB.in_values == 2000 and MONGODB.or_of_ranges and not MONGODB.counts_scan


def test_ledger_lists_give_the_same_entries_in_one_query_or_in_chunks(db):
    entries = [{"_id": f"f{i:03d}", "sha256": f"{i:064x}", "status": "loaded" if i % 3 else "failed"}
               for i in range(130)]
    db[LEDGER].insert_many(entries)
    keys = [e["_id"] for e in entries] + ["absent"]
    shas = [e["sha256"] for e in entries]
    found = {}
    for name, shape in SHAPES.items():
        ledger = Ledger(db, shape=shape)
        found[name] = (ledger.lookup(keys, {"status": 1}), ledger.contents_loaded(shas))
        assert len(found[name][0]) == 130 and len(found[name][1]) == len([e for e in entries if e["status"] == "loaded"])
    assert found["mongodb"] == found["secantusdb"]
    Ledger(db, shape=MONGODB).stamp(keys[:70])
    Ledger(db, shape=SECANTUSDB).stamp(keys[70:])
    assert db[LEDGER].count_documents({"changed_at": {"$type": "date"}}) == 130


def test_key_ranges_as_one_or_or_one_query_each_find_the_same_documents(db):
    db.rows.insert_many([{"_id": f"{p}{i}", "k": f"{p}{i}"} for p in ("aa", "ab", "b", "c") for i in range(5)])
    prefixes = ("aa", "c")
    got = {}
    for name, shape in SHAPES.items():
        queries = _ranges("k", prefixes, shape)
        assert len(queries) == (1 if shape.or_of_ranges else 2)
        got[name] = sorted(d["_id"] for q in queries for d in db.rows.find(q))
    assert got["mongodb"] == got["secantusdb"] == sorted(f"{p}{i}" for p in prefixes for i in range(5))
    # a command's BSON is bounded: many ranges go in several $or s of at most in_values each
    many = _ranges("k", [f"p{i:05d}" for i in range(4001)], MONGODB)
    assert [len(q["$or"]) if "$or" in q else 1 for q in many] == [2000, 2000, 1]


@pytest.fixture(scope="module")
def dclient():
    with dask_client(None) as client:
        yield client


def test_an_output_published_either_way_has_the_same_rows_and_indexes(mongo_uri, mongo_client, dclient, tmp_path,
                                                                       monkeypatch):
    """Renamed with its indexes (MongoDB) or renamed bare and indexed in place (a server whose rename
    copies); read through a projection or whole."""
    published = {}
    for name, shape in SHAPES.items():
        monkeypatch.setattr("analytics.runner.traits", lambda db, shape=shape: shape)
        monkeypatch.setattr("analytics.reading.planning.traits", lambda db, shape=shape: shape)
        db = mongo_client[f"t_traits_{name}"]
        db.hits.insert_many([{"_id": f"s{s}:{r}", "search_id": f"s{s}", "query_id": f"q{s}", "program": "ssearch36",
                              "library": "lib", "rank": r, "hit_id": f"h{r}", "aligned": True,
                              "hsps": [{"score": 10 * r, "evalue": 10.0 ** -r, "bits": 5.0 * r}]}
                             for s in range(4) for r in range(1, 4)])
        (result,) = analyze(mongo_uri, db.name, "r", tmp_path / name, names=["best_hits"], client=dclient)
        coll = db[result.collection]
        published[name] = (sorted((d["_id"], d["best_hit_id"], d["n_hits"]) for d in coll.find()),
                           sorted(tuple(spec["key"]) for spec in coll.index_information().values()))
        mongo_client.drop_database(db.name)
    assert published["mongodb"] == published["secantusdb"]
    assert len(published["mongodb"][0]) == 4 and len(published["mongodb"][1]) >= 2
