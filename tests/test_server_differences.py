"""Where the server answers differently from MongoDB: the probe (ingest/store/differences.py) against
what the server really answers, ``server status`` naming each difference, ``query --explain`` showing
only the indexes there are, and ``export`` never replacing a file nobody named.

Each form is run here as analysts write it, on hits and searches of the test's own, and its answer
compared with MongoDB's (computed in Python from the documents, by MongoDB's rules); the probe must
report a difference exactly where the answer is wrong, and each form that works must give the right
answer on the server at hand, whatever it is (SecantusDB here, a real MongoDB with
SCI_INGEST_TEST_URI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pymongo
import pytest

from ingest.store import curated
from ingest.store.differences import _IN_PROCESS, CHECKS, FLOAT_INDEX, SCRATCH_PREFIX, cache_file, probe

BIN = Path(sys.executable).parent / "sci-ingest"
#: Three queries, four searches of two programs, hits of one to three HSPs (E-values past 1e-128 too).
SEARCHES = [{"_id": "s1", "program": "ssearch36"}, {"_id": "s2", "program": "fasta36"},
            {"_id": "s3", "program": "ssearch36"}, {"_id": "s4", "program": "fasta36"}]
EVALUES = [[1e-3, 2e-200], [5e-6], [3e-150, 1e-20, 4.0], [0.2], [7e-9, 1e-140], [1e-6], [2.5]]
HITS = [{"_id": f"h{i}", "query_id": f"q{i % 3}", "search_id": f"s{i % 4 + 1}",
         "hsps": [{"evalue": v} for v in values]} for i, values in enumerate(EVALUES)]


@pytest.fixture()
def seeded(db):
    db.searches.insert_many([dict(s) for s in SEARCHES])
    db.hits.insert_many([dict(h, hsps=[dict(x) for x in h["hsps"]]) for h in HITS])
    return db


def _evalues(hit) -> list[float]:
    return [x["evalue"] for x in hit["hsps"]]


def _agg(coll, pipeline):
    """The answer, or the server's error code (what the probe records as a difference)."""
    try:
        return list(coll.aggregate(pipeline))
    except pymongo.errors.OperationFailure as exc:
        return f"error {exc.code}"


def _forms(db):
    """{check key: (the form's answer, MongoDB's answer, the working form's answer, its right answer)}."""
    programs = {s["_id"]: s["program"] for s in SEARCHES}
    by_query: dict[str, list] = {}
    for h in HITS:
        by_query.setdefault(h["query_id"], []).append(h)
    join = {"$lookup": {"from": "searches", "localField": "search_id", "foreignField": "_id", "as": "s"}}
    sort = {"$sort": {"_id": 1}}

    def counted(stages):
        return [{"$lookup": {"from": "hits", "let": {"id": "$_id"}, "as": "h", "pipeline": [
            {"$match": {"$expr": {"$eq": ["$search_id", "$$id"]}}}, *stages]}}, {"$project": {"h": 1}}, sort]

    per_search = [{"_id": s["_id"], "h": [{"n": n}] if (n := sum(h["search_id"] == s["_id"] for h in HITS)) else []}
                  for s in SEARCHES]
    db.hits.create_index([("hsps.0.evalue", 1)])  # as an analyst adds it
    below = sorted(h["_id"] for h in HITS if h["hsps"][0]["evalue"] < 1e-5)
    return {
        "array_path_group_min": (
            _agg(db.hits, [{"$group": {"_id": "$query_id", "m": {"$min": "$hsps.evalue"}}}, sort]),
            # in $group, MongoDB compares the arrays whole (element by element, as Python compares lists)
            [{"_id": q, "m": min(_evalues(h) for h in hs)} for q, hs in sorted(by_query.items())],
            _agg(db.hits, [{"$unwind": "$hsps"}, {"$group": {"_id": "$query_id", "m": {"$min": "$hsps.evalue"}}},
                           sort]),
            [{"_id": q, "m": min(v for h in hs for v in _evalues(h))} for q, hs in sorted(by_query.items())]),
        "array_path_project_min": (
            _agg(db.hits, [{"$project": {"m": {"$min": "$hsps.evalue"}}}, sort]),
            [{"_id": h["_id"], "m": min(_evalues(h))} for h in HITS],
            _agg(db.hits, [{"$project": {"m": {"$min": {"$map": {"input": "$hsps", "in": "$$this.evalue"}}}}}, sort]),
            [{"_id": h["_id"], "m": min(_evalues(h))} for h in HITS]),
        "lookup_array_elem_at": (
            _agg(db.hits, [join, {"$project": {"p": {"$arrayElemAt": ["$s.program", 0]}}}, sort]),
            [{"_id": h["_id"], "p": programs[h["search_id"]]} for h in HITS],
            _agg(db.hits, [join, {"$unwind": "$s"}, {"$project": {"p": "$s.program"}}, sort]),
            [{"_id": h["_id"], "p": programs[h["search_id"]]} for h in HITS]),
        "lookup_count": (
            _agg(db.searches, counted([{"$count": "n"}])), per_search,
            _agg(db.searches, counted([{"$group": {"_id": None, "n": {"$sum": 1}}}, {"$project": {"_id": 0}}])),
            per_search),
        "positional_path": (
            _agg(db.hits, [{"$project": {"e": "$hsps.0.evalue"}}, sort]),
            [{"_id": h["_id"], "e": []} for h in HITS],  # "0" names a field in an expression
            _agg(db.hits, [{"$project": {"e": {"$let": {"vars": {"h": {"$arrayElemAt": ["$hsps", 0]}},
                                                        "in": "$$h.evalue"}}}}, sort]),
            [{"_id": h["_id"], "e": h["hsps"][0]["evalue"]} for h in HITS]),
        FLOAT_INDEX: (
            # as analysts ask it, no hint: the planner walks the index's range (SecantusDB, given the index
            # as a hint, walks all of it and answers right)
            sorted(d["_id"] for d in db.hits.find({"hsps.0.evalue": {"$lt": 1e-5}}, {"_id": 1})),
            below,
            sorted(d["_id"] for d in db.hits.find({"hsps.0.evalue": {"$lt": 1e-5}}, {"_id": 1},
                                                  hint=[("$natural", 1)])),
            below),
    }


def test_the_probe_reports_exactly_the_forms_the_server_answers_wrong(seeded, tmp_path):
    found = probe(seeded, home=tmp_path, fresh=True)
    assert found.probed and found.checked == tuple(c.key for c in CHECKS), found
    forms = _forms(seeded)
    assert set(forms) == set(found.checked)
    wrong = {key for key, (answer, right, _, _) in forms.items() if answer != right}
    assert set(found.keys()) == wrong, {k: forms[k][:2] for k in wrong ^ set(found.keys())}
    for key, (_, _, works, right) in forms.items():
        assert works == right, key  # the form that works does, here
    assert all(f.instead_works for f in found.found)
    if os.environ.get("SCI_INGEST_TEST_URI") is None:  # the embedded SecantusDB 0.7.0b3: all six
        assert wrong == set(forms), wrong
        assert forms["lookup_count"][0] == "error 168"
        assert forms["array_path_group_min"][0] == [{"_id": q, "m": None} for q in ("q0", "q1", "q2")]
        # $first of the joined field is no way round: the same path through an array
        firsts = _agg(seeded.hits, [{"$lookup": {"from": "searches", "localField": "search_id",
                                                 "foreignField": "_id", "as": "s"}},
                                    {"$project": {"_id": 0, "p": {"$first": "$s.program"}}}])
        assert firsts == [{"p": None}] * len(HITS)
    # one line each, with the form that works
    for f in found.found:
        assert f.check.form in f.line() and f"works on both: {f.check.instead}" in f.line()
        assert "\n" not in f.line()
    assert not [n for n in seeded.list_collection_names() if n.startswith(SCRATCH_PREFIX)]


def test_the_probe_is_asked_once_per_server_process(db, tmp_path):
    """A second command (a new client, nothing in its process) reads the first one's answer, kept
    for the same server process; a server with another pid or start is asked again; a scratch
    collection a killed probe left behind is dropped by the next probe."""
    first = probe(db, home=tmp_path, fresh=True)
    entry = json.loads(cache_file(tmp_path).read_text())["servers"][0]
    assert entry["found"] == [{"key": f.key, "answered": f.answered, "instead_works": f.instead_works}
                              for f in first.found] and entry["identity"]["pid"]
    _IN_PROCESS.clear()
    with pymongo.MongoClient(db.client.address[0], db.client.address[1], directConnection=True) as other:
        again = probe(other[db.name], home=tmp_path)
        assert again.cached and again.keys() == first.keys() and again.at == first.at
        entry["identity"]["pid"] += 1  # another server process: not this one's answer
        cache_file(tmp_path).write_text(json.dumps({"servers": [entry]}))
        _IN_PROCESS.clear()
        stale = f"{SCRATCH_PREFIX}{int(time.time()) - 3600}_deadbeef"
        other[db.name][stale].insert_one({"_id": 1})
        asked = probe(other[db.name], home=tmp_path)
        assert not asked.cached and asked.keys() == first.keys()
        assert not [n for n in other[db.name].list_collection_names() if n.startswith(SCRATCH_PREFIX)]


def _sci(home: Path, *argv, uri: str | None = None, cwd: Path | None = None, timeout: int = 180):
    env = {**os.environ, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.pop("MONGODB_URI", None)
    if uri:
        env["MONGODB_URI"] = uri
    return subprocess.run([str(BIN), *argv], capture_output=True, text=True, env=env, cwd=cwd or home.parent,
                          timeout=timeout)


@pytest.mark.skipif(bool(os.environ.get("SCI_INGEST_TEST_URI")), reason="the embedded server's status")
def test_server_status_names_each_difference_with_the_form_that_works(tmp_path):
    home = tmp_path / "home"
    started = _sci(home, "server", "start", "--json")
    assert started.returncode == 0, started.stderr
    try:
        status = _sci(home, "server", "status")
        assert status.returncode == 0, status.stderr
        as_json = json.loads(_sci(home, "server", "status", "--json").stdout)
        uri = json.loads(started.stdout)["uri"]
        with pymongo.MongoClient(uri) as client:
            truth = probe(client["sci_ingest"], home=tmp_path / "elsewhere", fresh=True)  # asked here, again
    finally:
        assert _sci(home, "server", "stop").returncode == 0
    lines = status.stdout.splitlines()
    differences = [line for line in lines if line.startswith("  - ")]
    assert len(differences) == len(truth.found) == 6, status.stdout
    for f, line in zip(truth.found, differences):
        assert line == f"  - {f.line()}"  # the form, what it answers here and on MongoDB, the form that works
    assert "differences from MongoDB: 6 of the 6 forms asked" in status.stdout
    for form in ('{$min: "$hsps.evalue"}', '{$arrayElemAt: ["$s.program", 0]}', '{$count: "n"}', "hsps.0.evalue"):
        assert form in status.stdout
    data = as_json["differences"]
    assert data["probed"] and data["cached"]  # the second command read the first one's answer
    assert [d["key"] for d in data["differences"]] == list(truth.keys())
    assert all(d["instead"] and d["mongodb"] for d in data["differences"])


def _explain(mongo_uri, db_name, home: Path, *argv):
    proc = _sci(home, "query", "hits", "--db", db_name, "--where", "evalue < 1e-5", "--explain", *argv, uri=mongo_uri)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_explain_shows_the_indexes_the_collection_has_and_why_the_others_are_not(mongo_uri, seeded, tmp_path):
    seeded.hits.create_index([("hsps.0.evalue", 1)])  # an analyst's
    seeded.hits.create_index([("hit_id", 1)])
    have = seeded.hits.index_information()
    data = json.loads(_explain(mongo_uri, seeded.name, tmp_path, "--json"))
    assert sorted(ix["index"] for ix in data["indexes_here"]) == sorted(have)
    declared = {curated.index_name(keys) for keys in curated.get("hits").indexes}
    absent = {ix["index"]: ix["reason"] for ix in data["indexes_absent"]}
    assert set(absent) == declared - set(have) and absent
    exact = FLOAT_INDEX not in probe(seeded, home=tmp_path).keys()
    marked = {ix["index"] for ix in data["indexes_here"] if ix.get("note")}
    assert marked == (set() if exact else {"hsps.0.evalue_1"})
    if not exact:
        assert absent["query_id_1_hsps.0.evalue_1"].startswith("withheld: this server's index keys lose")
    text = _explain(mongo_uri, seeded.name, tmp_path)
    here = next(line for line in text.splitlines() if line.startswith("indexes here"))
    assert sorted(n.removesuffix(" (!)") for n in here.split(None, 2)[2].split(", ")) == sorted(have)
    assert [line.split()[2].rstrip(":") for line in text.splitlines() if line.startswith("not here")] == \
        [ix["index"] for ix in data["indexes_absent"]]


def test_export_without_out_never_replaces_a_file_unless_forced(mongo_uri, seeded, tmp_path):
    def export(*argv):
        return _sci(tmp_path / "home", "export", "searches", "--db", seeded.name, "--format", "csv", *argv,
                    uri=mongo_uri, cwd=tmp_path)

    first = export()
    assert first.returncode == 0, first.stderr
    target = tmp_path / "searches.csv"
    target.write_text("mine\n")
    refused = export()
    assert refused.returncode == 64
    assert refused.stderr.splitlines() == ["error: export: searches.csv exists and no --out names it: nothing "
                                           "written; give --out FILE, or --force to replace it"]
    assert target.read_text() == "mine\n"
    forced = export("--force")
    assert forced.returncode == 0, forced.stderr
    assert target.read_text() != "mine\n" and len(target.read_text().splitlines()) == len(SEARCHES) + 1
    named = export("--out", "searches.csv")  # a file --out names is replaced: you named it
    assert named.returncode == 0, named.stderr
    folder = export("--out", str(tmp_path))
    assert folder.returncode == 64 and "is a folder" in folder.stderr and len(folder.stderr.splitlines()) == 1
