"""The curated declarations: one source for the indexes, the tables of docs/querying.md, and indexes the server takes.

Against the real test server: every declared index is created (twice: idempotent) by
``sci-ingest indexes``, each question's example is planned on its index, the prefix rule
that retired ``query_id_1`` and ``elements_1`` holds there, and the SecantusDB numeric-key
probe agrees with what an index range really returns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.query.compile import to_filter
from ingest.query.language import parse
from ingest.query.plan import explain, numeric_paths
from ingest.store import catalog, curated
from ingest.store.indexes import exact_indexes, numeric_keys_exact

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"


def test_query_indexes_are_the_curated_ones_and_keep_their_users():
    assert catalog.QUERY_INDEXES == curated.query_indexes()
    assert set(catalog.QUERY_INDEXES) == set(catalog.DATA_COLLECTIONS)
    # the analyses' runner and the bench data read hits on (search_id, rank): it stays first
    assert catalog.QUERY_INDEXES["hits"][0] == [("search_id", 1), ("rank", 1)]
    for coll, specs in catalog.QUERY_INDEXES.items():
        assert all(keys in catalog.INDEXES[coll] for keys in specs)
    kept = {"searches": [[("query_id", 1)], [("source.path", 1)], [("source.sha256", 1)]],
            "hits": [[("hit_id", 1)]], "materials": [[("chemsys", 1)], [("formula_pretty", 1)], [("_ingest.type", 1)]],
            "tasks": [[("material_id", 1)]]}
    for coll, specs in kept.items():
        assert all(keys in catalog.QUERY_INDEXES[coll] for keys in specs), coll


def test_every_index_names_declared_fields_and_none_is_unique_or_hashed():
    for c in curated.DATA.values():
        paths = {f.path for f in c.fields}
        for keys in c.indexes:
            assert all(path in paths for path, _ in keys), (c.name, keys)
            assert all(d in (1, -1) for _, d in keys)
        for q in c.questions:
            if q.where:
                parsed = to_filter(parse(q.where, c))
                if q.index:  # the example filters on the index's leading field
                    assert q.index[0][0] in json.dumps(parsed), (c.name, q.text)


def test_analysis_outputs_are_derived_from_the_registry():
    from analytics.registry import all_analyses

    for analysis in all_analyses():
        c = curated.get(analysis.output)
        # every declared column is a field (a list column too: list<string>), with its meaning and unit
        assert [f.name for f in c.fields] == [o.name for o in analysis.outputs] + ["run_id"]
        assert not c.notes, c.notes
        for o in analysis.outputs:
            f = c.by_name[o.name]
            assert (f.path, f.kind, f.unit) == (o.name, curated.dtype_kind(o.dtype), o.unit), o
            assert f.meaning.startswith(o.meaning), o
        assert c.by_name["run_id"].meaning == "the run that wrote it"
        assert c.indexes == tuple(tuple(ix) for ix in analysis.indexes)
        assert [q.text for q in c.questions] == list(analysis.questions)
        described = {d["name"]: d for d in c.describe()["fields"]}
        assert all(described[o.name]["unit"] == o.unit for o in analysis.outputs)
    consistency = curated.get("formula_consistency")
    assert consistency.by_name["mismatched_task_ids"].kind == "list<string>"
    with pytest.raises(curated.UnknownCollection, match="did you mean hits"):
        curated.get("hitz")


def test_the_docs_tables_are_the_declarations():
    text = (REPO / "docs" / "querying.md").read_text()
    block = re.search(r"<!-- curated:begin -->\n(.*?)\n<!-- curated:end -->", text, re.S)
    assert block, "docs/querying.md lacks the curated tables"
    assert block.group(1).strip() == curated.markdown().strip()


def test_the_docs_tables_of_the_outputs_are_the_analyses_declarations():
    text = (REPO / "docs" / "querying.md").read_text()
    block = re.search(r"<!-- curated-outputs:begin -->\n(.*?)\n<!-- curated-outputs:end -->", text, re.S)
    assert block, "docs/querying.md lacks the tables of the analyses' outputs"
    assert block.group(1).strip() == curated.outputs_markdown().strip()
    assert "| `recomputed` | float64 | eV/atom | energy above the convex hull recomputed" in block.group(1)


def _fields_list(*argv) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("MONGODB_URI", None)  # no server is needed to list fields
    return subprocess.run([str(BIN), "query", *argv, "--fields-list"], capture_output=True, text=True, env=env,
                          timeout=120)


def test_fields_list_of_an_output_shows_each_columns_meaning_and_unit():
    """What a user runs: ``sci-ingest query hull_energy --fields-list`` (and ``--json``)."""
    from analytics.registry import get_analysis

    done = _fields_list("hull_energy")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("field "))
    assert header.split() == ["field", "path", "kind", "unit", "meaning"]
    rows = {line.split()[0]: line.split(None, 4) for line in lines[lines.index(header) + 2:] if line.strip()
            and not line.startswith(" ")}
    for name in ("stored", "recomputed", "difference", "abs_difference"):
        assert rows[name][2:4] == ["float64", "eV/atom"], rows[name]
    assert rows["stored"][4].startswith("energy above the convex hull as stored")
    assert rows["recomputed"][4].startswith("energy above the convex hull recomputed")
    assert rows["doc_id"][3] == "-" and rows["n_hull_entries"][3] == "count"
    assert "hull_energy output column" not in done.stdout  # the old placeholder

    as_json = _fields_list("formula_consistency", "--json")
    assert as_json.returncode == 0, as_json.stderr
    fields = {f["name"]: f for f in json.loads(as_json.stdout)["fields"]}
    for column in get_analysis("formula_consistency").outputs:
        assert fields[column.name]["unit"] == column.unit and fields[column.name]["meaning"].startswith(
            column.meaning), column
    assert fields["mismatched_task_ids"]["kind"] == "list<string>"
    assert fields["n_mismatched"]["unit"] == "count" and fields["run_id"]["unit"] == ""
    # a data collection's fields have no declared unit (their meanings say it): no unit column there
    data = _fields_list("materials")
    assert data.returncode == 0 and "unit" not in next(line for line in data.stdout.splitlines()
                                                       if line.startswith("field "))


def _env(uri: str, tmp_path: Path) -> dict:
    env = {**os.environ, "MONGODB_URI": uri, "SCI_INGEST_HOME": str(tmp_path)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


@pytest.fixture()
def seeded(db):
    """A database with a few documents of each data collection (indexes come from the command)."""
    db.hits.insert_many([{"_id": f"s:{i}", "search_id": "s", "query_id": "q", "hit_id": f"h{i}", "rank": i,
                          "hsps": [{"evalue": 10.0 ** -(i * 20)}]} for i in range(1, 12)])
    db.searches.insert_one({"_id": "s", "query_id": "q", "source": {"path": "/p", "sha256": "x"}})
    db.materials.insert_many([{"_id": f"mp-{i}", "elements": ["Fe", "O"] if i % 2 else ["Si"], "band_gap": i / 3,
                               "chemsys": "Fe-O", "energy_above_hull": 0.01 * i, "_ingest": {"type": "summary"}}
                              for i in range(10)])
    db.tasks.insert_one({"_id": "t1", "task_id": "t1", "material_id": "mp-1", "chemsys": "Fe-O", "task_type": "Static"})
    return db


def test_indexes_command_builds_every_index_the_server_accepts_idempotently(mongo_uri, seeded, tmp_path):
    args = [str(BIN), "indexes", "--db", seeded.name, "--json", "--collections", "hits,searches,materials,tasks"]
    first = subprocess.run(args, capture_output=True, text=True, env=_env(mongo_uri, tmp_path), timeout=120)
    assert first.returncode == 0, first.stderr
    rows = json.loads(first.stdout)["indexes"]
    plans = {c.name: exact_indexes(seeded, c.name, c.indexes) for c in curated.DATA.values()}
    wanted = {(name, curated.index_name(ix)) for name, (build, cut) in plans.items()
              for ix in build + [declared for declared, _ in cut]}
    assert {(r["collection"], r["index"]) for r in rows} == wanted
    withheld = {(r["collection"], r["index"]) for r in rows if r["outcome"].startswith("withheld")}
    assert withheld == {(name, curated.index_name(d)) for name, (_, cut) in plans.items() for d, _ in cut}
    assert {r["outcome"] for r in rows if not r["outcome"].startswith("withheld")} == {"created"}
    floats = {name: {f.path for f in curated.get(name).fields if f.kind == "float64"} for name in plans}
    for coll, (build, cut) in plans.items():
        have = [[tuple(k) for k in info["key"]] for info in seeded[coll].index_information().values()]
        assert all(list(keys) in have for keys in build), coll
        if cut:  # the server's keys lose numbers: no index of this collection on a float field
            assert not any(k in floats[coll] for h in have for k, _ in h), (coll, have)
    again = subprocess.run(args, capture_output=True, text=True, env=_env(mongo_uri, tmp_path), timeout=120)
    assert again.returncode == 0
    assert {r["outcome"].split(":")[0] for r in json.loads(again.stdout)["indexes"]} <= {"present", "withheld"}


def _server_info(mongo_uri):
    from ingest.store.mongo import connect
    from ingest.store.servers import describe

    client = connect(mongo_uri)
    try:
        return describe(client)
    finally:
        client.close()


def test_each_question_is_planned_on_its_index(mongo_uri, seeded):
    """On MongoDB every question's example walks its index; on SecantusDB too, except a numeric range
    where its index keys lose numbers: that one is run as a collection scan on purpose (and says so)."""
    from ingest.query.compile import build
    from ingest.store.servers import ensure_indexes

    ensure_indexes(seeded, catalog.QUERY_INDEXES)
    info = _server_info(mongo_uri)
    exact = numeric_keys_exact(seeded, info)
    planned = scanned = 0
    for c in curated.DATA.values():
        for q in c.questions:
            if not (q.where and q.index):
                continue
            spec = build(c, where=q.where)
            spec.settle(seeded[c.name], info)
            plan = explain(seeded[c.name], spec.filter, hint=spec.hint)
            if spec.hint:
                assert not exact and numeric_paths(spec.filter, None, spec.kinds), q.text
                assert plan.collscan and not plan.indexes and "1e±128" in spec.notes[0]
                scanned += 1
            else:
                assert curated.index_name(q.index) in plan.indexes, (c.name, q.text, plan.label)
                planned += 1
    assert planned + scanned == sum(1 for c in curated.DATA.values() for q in c.questions if q.where and q.index)
    assert planned >= 8


def test_a_compound_index_serves_its_prefix_so_the_single_field_one_went(seeded):
    from ingest.store.servers import ensure_indexes

    ensure_indexes(seeded, {"hits": [[("query_id", 1), ("hsps.0.evalue", 1)]],
                            "materials": [[("elements", 1), ("band_gap", 1)]]})
    hits = explain(seeded.hits, to_filter(parse('query_id == "q"', curated.get("hits"))))
    assert hits.indexes == ["query_id_1_hsps.0.evalue_1"] and hits.returned == 11
    oxides = explain(seeded.materials, to_filter(parse('elements has "O"', curated.get("materials"))))
    assert oxides.indexes == ["elements_1_band_gap_1"] and oxides.returned == 5


def test_the_numeric_key_probe_tells_the_truth(mongo_uri, seeded):
    """An index range over E-values from 1e-20 to 1e-220: what it returns, and what the probe says."""
    from ingest.store.servers import ensure_indexes

    ensure_indexes(seeded, {"hits": [[("hsps.0.evalue", 1)]]})
    through_index = seeded.hits.count_documents({"hsps.0.evalue": {"$lt": 1e-100}})
    scanned = seeded.hits.count_documents({"hsps.0.evalue": {"$lt": 1e-100}}, hint={"$natural": 1})
    assert scanned == 6  # 1e-120 ... 1e-220
    info = _server_info(mongo_uri)
    assert numeric_keys_exact(seeded, info) == (through_index == scanned)
    if info.kind != "SecantusDB":
        assert through_index == scanned


def test_the_analyses_take_curated_paths_from_the_curated_declarations():
    """One vocabulary: a document path the curated collections declare (with its kind) is not
    declared again by an analysis, which names the field instead (``curated.HITS.columns(...)``)."""
    import ast

    declared = {f.path: f"{c.name}.{f.name}" for c in curated.DATA.values() for f in c.fields}
    # a task's _id (its id) is no curated field of tasks, whose task_id is the field of that name
    not_curated_there = {("analytics/analyses/formula_consistency.py", "task_id", "_id")}
    again = []
    for path in sorted((REPO / "analytics").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Column"
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in declared
                    and (str(path.relative_to(REPO)), getattr(node.args[0], "value", None), node.args[1].value)
                    not in not_curated_there):
                again.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.args[1].value} "
                             f"(curated as {declared[node.args[1].value]})")
    assert not again, "declared again outside ingest/store/curated.py:\n" + "\n".join(again)
    from analytics.analyses import best_hits

    assert best_hits.COLUMNS[0] == curated.HITS.column("search_id")  # and the analyses do read them from there
    assert curated.HITS.column("score", kind="float64").path == "hsps.0.score"
