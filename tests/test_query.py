"""``sci-ingest query``: the --where language, the --filter allow-list, plans, warnings, formats.

The acceptance commands run as users run them (the console script, a subprocess) against
the bundled samples loaded into a test database; the language is also held, property by
property, to a Python evaluation of the same syntax tree on random documents stored in the
real server.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ingest.query import QueryError
from ingest.query.compile import evaluate, to_filter
from ingest.query.language import And, Compare, Not, Or, parse
from ingest.query.output import write_rows
from ingest.query.safety import COMPILED_OPERATORS, check_filter, parse_filter
from ingest.store import curated
from ingest.store.curated import Curated, Field

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
HITS = curated.get("hits")
ACCEPTANCE = "evalue < 1e-20 and identity > 0.9"


@pytest.fixture(scope="module")
def samples(mongo_uri, mongo_client):
    """The bundled -m 10 samples and materials loaded into a database of this module."""
    from ingest.load import LoadOptions, load_paths
    from ingest.store.catalog import QUERY_INDEXES
    from ingest.store.indexes import ensure_exact_indexes

    name = f"t_query_{uuid.uuid4().hex[:8]}"
    paths = [str(REPO / "samples" / "pasta"), str(REPO / "samples" / "materials" / "materials.jsonl.gz")]
    load_paths(mongo_uri, name, paths, "test-run", LoadOptions(workers=1, progress=False), server_kind="test")
    ensure_exact_indexes(mongo_client[name], QUERY_INDEXES)  # what `sci-ingest run` builds after its load
    yield mongo_client[name]
    mongo_client.drop_database(name)


_HOME: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory):
    """The commands' SCI_INGEST_HOME: a folder of this module's (they are given a URI, so no server)."""
    _HOME[:] = [tmp_path_factory.mktemp("query-home")]
    yield _HOME[0]


def cli(mongo_uri, db, *argv, env=None, cwd=None):
    full = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(cwd or _HOME[0]), **(env or {})}
    full.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db.name], capture_output=True, text=True, env=full,
                          cwd=cwd or REPO, timeout=120)


# ------------------------------------------------------------------ acceptance
def test_acceptance_query_prints_exactly_the_matching_rows(mongo_uri, samples):
    proc = cli(mongo_uri, samples, "query", "hits", "--where", ACCEPTANCE, "--fields", "query_id,hit_id,evalue",
               "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["query_id", "hit_id", "evalue"]
    got = sorted((q, h, float(e)) for q, h, e in rows[1:])
    expected = sorted((d["query_id"], d["hit_id"], d["hsps"][0]["evalue"]) for d in samples.hits.find(
        {"hsps.0.evalue": {"$lt": 1e-20}, "hsps.0.identity": {"$gt": 0.9}}))
    # and independently of any filter: every hit, judged in Python
    by_hand = sorted((d["query_id"], d["hit_id"], d["hsps"][0]["evalue"]) for d in samples.hits.find()
                     if d.get("hsps") and isinstance(d["hsps"][0].get("evalue"), float)
                     and isinstance(d["hsps"][0].get("identity"), float)
                     and d["hsps"][0]["evalue"] < 1e-20 and d["hsps"][0]["identity"] > 0.9)
    assert got == expected == by_hand and len(got) > 10
    assert any(e < 1e-150 for _, _, e in got)  # the tiny E-values an index range loses on SecantusDB


@pytest.mark.parametrize("raw, operator", [
    ('{"$where": "1"}', "$where"),
    ('{"$and": [{"$expr": {"$eq": [1, 1]}}]}', "$expr"),
    ('{"rank": 1, "$or": [{"hit_id": {"$in": [{"$function": {"body": "x", "args": [], "lang": "js"}}]}}]}',
     "$function"),
    ('{"hsps": {"$elemMatch": {"$where": "this.evalue < 1"}}}', "$where"),
    ('{"x": {"$not": {"$expr": 1}}}', "$expr"),
    ('{"$nor": [{"a": {"b": {"$accumulator": {}}}}]}', "$accumulator"),
])
def test_a_raw_filter_reaching_javascript_is_refused(mongo_uri, samples, raw, operator):
    proc = cli(mongo_uri, samples, "query", "hits", "--filter", raw)
    assert proc.returncode == 64, proc.stderr  # a usage error
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --filter: operator " + operator), proc.stderr
    assert "refused" in lines[0] and proc.stdout == ""


def test_the_filter_walk_refuses_anything_off_the_allow_list():
    for raw in ('{"a": {"$regex": "x"}}', '{"$comment": "c"}', '{"a": {"$gt": 1, "b": 2}}', '{"a.$x": 1}',
                '{"a": 1, "a": 2}', '[1]', '{"$and": []}', '{"a": {"$where": 1}}', '{"a": [{"$function": 1}]}'):
        with pytest.raises(QueryError):
            parse_filter(raw)
    ok = parse_filter('{"_id": {"$oid": "5b2f6ec2c0a8f4a3c1e4d4a1"}, "n": {"$numberLong": "5"}, '
                      '"x": {"$not": {"$gt": 1}}, "$or": [{"h": {"$elemMatch": {"e": {"$lt": 1}}}}]}')
    assert ok["n"] == 5 and type(ok["_id"]).__name__ == "ObjectId"


# ------------------------------------------------------------------ errors point at the column
@pytest.mark.parametrize("text, column, words", [
    ("evalu < 1", 1, "did you mean evalue"),
    ("evalue < < 1", 10, "unexpected '<'"),
    ('evalue < "x"', 10, "holds numbers"),
    ("query_id == 5", 13, 'write "5"'),
    ("evalue = 1", 8, "equality is =="),
    ("query_id == 'x'", 13, "double quotes"),
    ("(evalue < 1", 12, "ends too early"),
    ("1 < rank > 3", 10, "a range is"),
    ("rank has 1", 1, "has is for list fields"),
    ("aligned > true", 11, "== or !="),
    ("evalue < null", 10, "null can only"),
    ("`$where` == 1", 1, "no $"),
])
def test_parser_errors_name_the_column(text, column, words):
    with pytest.raises(QueryError) as info:
        parse(text, HITS)
    assert info.value.column == column and words in str(info.value), str(info.value)


def test_a_bad_expression_exits_64_with_one_line_naming_the_column(mongo_uri, samples):
    proc = cli(mongo_uri, samples, "query", "hits", "--where", "evalue < 1e-20 and identiti > 0.9")
    assert proc.returncode == 64
    assert proc.stderr.strip().splitlines() == [
        "error: --where column 20: unknown field: hits has no field 'identiti'; did you mean identity?: "
        "evalue < 1e-20 and >>>identiti > 0.9"]


@pytest.mark.parametrize("argv, message", [
    (("--where", 'query_id == "\\ud800"'), 'bad string "\\ud800": not valid Unicode (a lone surrogate)'),
    (("--filter", '{"query_id": "\\ud800"}'), "a string is not valid Unicode: '\\ud800'"),
    (("--filter", '{"\\udc00": 1}'), "a string is not valid Unicode: '\\udc00'"),
])
def test_a_lone_surrogate_is_refused_before_it_reaches_the_server(mongo_uri, samples, argv, message):
    proc = cli(mongo_uri, samples, "query", "hits", *argv)
    assert proc.returncode == 64 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr


def test_precedence_ranges_and_merging():
    tree = parse('hit_id == "a" or rank == 1 and not aligned == true', HITS)
    assert isinstance(tree, Or) and isinstance(tree.children[1], And) and isinstance(tree.children[1].children[1], Not)
    m = curated.get("materials")
    assert to_filter(parse('elements has "O" and 1 <= band_gap <= 3', m)) == \
        to_filter(parse('elements has "O" AND band_gap between 1 and 3', m)) == \
        {"elements": "O", "band_gap": {"$gte": 1, "$lte": 3}}
    assert to_filter(parse("3 >= band_gap > 1", m)) == {"band_gap": {"$lte": 3, "$gt": 1}}
    assert to_filter(parse("rank > 1 and rank > 2", HITS)) == {"rank": {"$gt": 1}, "$and": [{"rank": {"$gt": 2}}]}
    assert to_filter(parse('`params.pg_matrix` == "BL50" and z_score exists', HITS)) == \
        {"params.pg_matrix": "BL50", "hsps.0.z_score": {"$exists": True}}
    assert isinstance(parse("1e-20 > evalue", HITS), Compare)


# ------------------------------------------------------------------ plans and warnings
def test_explain_names_the_index_and_the_counts(mongo_uri, samples):
    proc = cli(mongo_uri, samples, "query", "hits", "--where", 'hit_id == "TPHUCS"', "--explain", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    expected = samples.hits.count_documents({"hit_id": "TPHUCS"})
    assert plan["indexes"] == ["hit_id_1"] and plan["returned"] == expected > 0
    assert plan["docs_examined"] == expected and plan["keys_examined"] == expected
    text = cli(mongo_uri, samples, "query", "hits", "--where", ACCEPTANCE, "--explain")
    assert "plan          COLLSCAN" in text.stdout and f"examined      {samples.hits.count_documents({})} documents" \
        in text.stdout, text.stdout


@pytest.mark.parametrize("reply, indexes, collscan, sort", [
    ({"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": "hit_id_1"}}, ["hit_id_1"], False, False),
    ({"queryPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "keyPattern": {"query_id": 1, "rank": 1}}},
      "slotBasedPlan": {"stages": "..."}}, ["query_id_1_rank_1"], False, False),  # MongoDB 7+ slot-based
    ({"stage": "EXPRESS_IXSCAN", "keyPattern": "{ hit_id: 1 }", "indexName": "hit_id_1"}, ["hit_id_1"], False, False),
    ({"stage": "EXPRESS_IDHACK"}, ["_id_"], False, False),
    ({"stage": "SHARD_MERGE", "shards": [
        {"shardName": "s0", "winningPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": "x_1"}}},
        {"shardName": "s1", "winningPlan": {"queryPlan": {"stage": "COLLSCAN"}}}]}, ["x_1"], True, False),
    ({"stage": "SUBPLAN", "inputStage": {"stage": "OR", "inputStages": [
        {"stage": "IXSCAN", "indexName": "a_1"}, {"stage": "IXSCAN", "indexName": "b_1"}]}},
     ["a_1", "b_1"], False, False),
    ({"stage": "SORT", "inputStage": {"stage": "COLLSCAN"}}, [], True, True),
])
def test_plans_of_every_shape_are_read(reply, indexes, collscan, sort):
    from ingest.query.plan import read_plan

    plan = read_plan({"queryPlanner": {"winningPlan": reply},
                      "executionStats": {"nReturned": 2, "totalKeysExamined": 3, "totalDocsExamined": 4}})
    assert (plan.indexes, plan.collscan, plan.blocking_sort) == (indexes, collscan, sort)
    assert (plan.returned, plan.keys_examined, plan.docs_examined) == (2, 3, 4)
    assert plan.label.startswith("IXSCAN" if indexes else "COLLSCAN")


def test_a_collection_scan_of_a_large_collection_warns(mongo_uri, samples):
    env = {"SCI_INGEST_SCAN_WARN": "100"}  # the samples' hundreds of hits count as large here
    scan = cli(mongo_uri, samples, "query", "hits", "--where", ACCEPTANCE, "--format", "csv", env=env)
    n = samples.hits.count_documents({})
    assert n > 100
    assert scan.returncode == 0 and f"warning: no index serves this query: all {n} documents of hits" in scan.stderr
    assert "COLLSCAN" in scan.stderr and "hit_id_1" in scan.stderr
    seek = cli(mongo_uri, samples, "query", "hits", "--where", 'hit_id == "TPHUCS"', env=env)
    assert seek.returncode == 0 and "warning" not in seek.stderr
    quiet = cli(mongo_uri, samples, "query", "hits", "--where", ACCEPTANCE, "--format", "csv")
    assert "warning" not in quiet.stderr


def test_a_numeric_range_on_an_index_is_answered_right(mongo_uri, samples):
    """The question of the compound index: on SecantusDB its numeric keys lose E-values below 1e-128,
    so the query is run as a collection scan there (a note says so); the rows are right either way."""
    where = 'query_id == "gi|910002|ref|NM_910002.1|" and evalue < 1e-20'
    proc = cli(mongo_uri, samples, "query", "hits", "--where", where, "--fields", "id,evalue", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    got = sorted(line.split(",")[0] for line in proc.stdout.splitlines()[1:])
    expected = sorted(d["_id"] for d in samples.hits.find({"query_id": "gi|910002|ref|NM_910002.1|"})
                      if d.get("hsps") and d["hsps"][0].get("evalue", 1) < 1e-20)
    assert got == expected and len(expected) >= 3
    noted = "collection scan answers it (hint $natural)" in proc.stderr
    as_planned = list(samples.hits.find({"query_id": "gi|910002|ref|NM_910002.1|", "hsps.0.evalue": {"$lt": 1e-20}}))
    assert noted == (len(as_planned) != len(expected))  # the note exactly where the server's own plan is wrong


def test_nothing_matching_is_exit_0_with_a_note(mongo_uri, samples):
    proc = cli(mongo_uri, samples, "query", "hits", "--where", 'query_id == "no such query"', "--format", "csv")
    assert proc.returncode == 0 and proc.stdout == "query_id,hit_id,rank,evalue,identity,bits,library\n"
    assert "note: no document of hits matches" in proc.stderr


def test_sort_limit_out_and_jsonl(mongo_uri, samples, tmp_path):
    out = tmp_path / "best.jsonl"
    proc = cli(mongo_uri, samples, "query", "hits", "--where", "evalue > 0", "--sort", "-evalue,rank",
               "--limit", "5", "--format", "jsonl", "--out", str(out), "--fields", "hit_id,evalue,rank")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    top = sorted((d["hsps"][0]["evalue"] for d in samples.hits.find({"hsps.0.evalue": {"$gt": 0}})), reverse=True)
    assert [r["evalue"] for r in rows] == top[:5] and set(rows[0]) == {"hit_id", "evalue", "rank"}
    assert [p.name for p in tmp_path.iterdir()] == ["best.jsonl"]  # the temporary file was renamed


def test_table_rows_are_aligned_and_long_values_cut():
    fields = [Field("name", "name", "string"), Field("n", "n", "float64")]
    out = io.StringIO()
    assert write_rows(out, fields, iter([["a" * 60, 1.5], ["b", None], ["c", 1e-200]]), "table") == 3
    lines = out.getvalue().splitlines()
    assert len({line.index(" n") if " n" in line else None for line in lines[:1]}) == 1
    assert lines[2].startswith("a" * 39 + "…") and lines[2].endswith("1.5")
    assert lines[4].endswith("1e-200") and len(lines[1].split("  ")[0]) == 40


# ------------------------------------------------------------------ properties
PROP = Curated(name="prop", one_per="test document", fields=(
    Field("s", "s", "string"), Field("t", "nested.t", "string"), Field("n", "hsps.0.x", "float64"),
    Field("i", "i", "int64"), Field("b", "b", "bool"), Field("tags", "tags", "list<string>")))
STRINGS = ["a", "b", "ab", "", "B"]
NUMBERS = [0, -1, 1, 2, 2.5, 1e-200, -3.25, 1e300]


def _doc(r: random.Random, i: int) -> dict:
    def pick(*options):
        return r.choice(options)

    doc: dict = {"_id": i}
    for key, good in (("s", lambda: r.choice(STRINGS)), ("i", lambda: r.choice([0, 1, 2, 3, -5])),
                      ("b", lambda: r.choice([True, False]))):
        kind = r.random()
        if kind < 0.6:
            doc[key] = good()
        elif kind < 0.7:
            doc[key] = None
        elif kind < 0.85:
            doc[key] = pick("1", 1, 2.0, True, 2.5, "a", [r.choice(STRINGS), 1])  # other types
        # else missing
    shape = r.random()
    if shape < 0.5:
        doc["nested"] = {"t": r.choice(STRINGS)}
    elif shape < 0.6:
        doc["nested"] = [{"t": r.choice(STRINGS)}, {"t": r.choice(STRINGS)}]
    elif shape < 0.7:
        doc["nested"] = {"t": pick(None, 3, ["a", "b"])}
    elif shape < 0.8:
        doc["nested"] = "flat"
    shape = r.random()
    if shape < 0.55:
        doc["hsps"] = [{"x": r.choice(NUMBERS)}]
    elif shape < 0.65:
        doc["hsps"] = [{"x": r.choice(NUMBERS)}, {"x": r.choice(NUMBERS)}]
    elif shape < 0.75:
        doc["hsps"] = [{"x": pick("1", None, True, [1, 5])}]
    elif shape < 0.85:
        doc["hsps"] = pick([], [{"y": 1}], {"x": 1})
    shape = r.random()
    if shape < 0.6:
        doc["tags"] = r.sample(STRINGS, r.randint(0, 3))
    elif shape < 0.7:
        doc["tags"] = pick("a", ["a", None], None)
    return doc


@pytest.fixture(scope="module")
def corpus(mongo_client):
    name = f"t_qprop_{uuid.uuid4().hex[:8]}"
    coll = mongo_client[name]["prop"]
    r = random.Random(20261124)
    coll.insert_many([_doc(r, i) for i in range(400)])
    docs = list(coll.find())
    yield coll, docs
    mongo_client.drop_database(name)


def _lit(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


_VALUES = {"s": st.sampled_from(STRINGS), "t": st.sampled_from(STRINGS), "n": st.sampled_from(NUMBERS),
           "i": st.sampled_from([0, 1, 2, -5, 2.5]), "b": st.booleans()}


@st.composite
def conditions(draw) -> str:
    name = draw(st.sampled_from(["s", "t", "n", "i", "b", "tags", "`hsps.1.x`"]))
    if name == "tags":
        form = draw(st.sampled_from(["has", "all", "any", "exists", "missing"]))
        items = draw(st.lists(st.sampled_from(STRINGS), min_size=1, max_size=3))
        return {"has": f"tags has {_lit(items[0])}", "all": f"tags has all [{', '.join(map(_lit, items))}]",
                "any": f"tags has any [{', '.join(map(_lit, items))}]", "exists": "tags exists",
                "missing": "tags missing"}[form]
    values = _VALUES["n" if name.startswith("`") else name]
    form = draw(st.sampled_from(["cmp", "in", "notin", "null", "exists", "missing", "range", "between"]))
    ops = ["==", "!="] if name == "b" else ["<", "<=", ">", ">=", "==", "!="]
    if form == "cmp" or (name == "b" and form in ("range", "between")):
        return f"{name} {draw(st.sampled_from(ops))} {_lit(draw(values))}"
    if form in ("in", "notin"):
        items = draw(st.lists(st.one_of(values, st.none()), min_size=1, max_size=3))
        return f"{name} {'not in' if form == 'notin' else 'in'} [{', '.join(map(_lit, items))}]"
    if form == "null":
        return f"{name} {draw(st.sampled_from(['==', '!=']))} null"
    if form in ("exists", "missing"):
        return f"{name} {form}"
    lo, hi = sorted([draw(values), draw(values)], key=lambda v: (isinstance(v, str), v))
    if form == "between":
        return f"{name} between {_lit(lo)} and {_lit(hi)}"
    return f"{_lit(lo)} {draw(st.sampled_from(['<', '<=']))} {name} {draw(st.sampled_from(['<', '<=']))} {_lit(hi)}"


expressions = st.recursive(conditions(), lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    inner.map(lambda e: f"not {e}"),
    st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} and {t[1]} or not {t[2]}")), max_leaves=6)


def _operators(filter_) -> set[str]:
    found = set()
    if isinstance(filter_, dict):
        for key, value in filter_.items():
            if key.startswith("$"):
                found.add(key)
            found |= _operators(value)
    elif isinstance(filter_, list):
        for item in filter_:
            found |= _operators(item)
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=expressions)
def test_random_expressions_select_what_python_selects(corpus, text):
    coll, docs = corpus
    tree = parse(text, PROP)
    filter_ = to_filter(tree)
    assert _operators(filter_) <= COMPILED_OPERATORS
    check_filter(filter_, "--where", COMPILED_OPERATORS)
    on_server = {d["_id"] for d in coll.find(filter_, {"_id": 1})}
    in_python = {d["_id"] for d in docs if evaluate(tree, d)}
    assert on_server == in_python, (text, filter_, sorted(on_server ^ in_python)[:5])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 40), text=expressions)
def test_random_documents_and_expressions_agree(mongo_client, seed, size, text):
    r = random.Random(seed)
    coll = mongo_client["t_qprop_docs"][f"c{uuid.uuid4().hex[:8]}"]
    try:
        coll.insert_many([_doc(r, i) for i in range(size)])
        tree = parse(text, PROP)
        stored = list(coll.find())
        assert {d["_id"] for d in coll.find(to_filter(tree), {"_id": 1})} == \
            {d["_id"] for d in stored if evaluate(tree, d)}, text
    finally:
        coll.drop()


@pytest.mark.parametrize("command", ["query", "export"])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_1(mongo_uri, samples, tmp_path, command):
    out = tmp_path / "no-such-folder" / "x.csv"
    proc = cli(mongo_uri, samples, command, "hits", "--format", "csv", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and f"cannot write {out}" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.parent.exists()


def test_a_reader_that_stops_early_ends_the_command_quietly(mongo_uri, samples):
    """`sci-ingest query hits | head -1`: the closed pipe ends the command with exit 0 and nothing on
    stderr, as `sci-ingest parse | head` does (it printed "cannot write the output: Broken pipe", exit 1)."""
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(_HOME[0])}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.Popen([str(BIN), "query", "hits", "--format", "jsonl", "--db", samples.name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert first.startswith(b"{")  # one document; the rest (far over a pipe's 64 KiB) is refused by the pipe
    assert err == ""
