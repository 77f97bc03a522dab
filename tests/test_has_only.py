"""``elements has only ...`` in ``--where``: every sub-system's ``chemsys``, held to a Python filter.

The set question of OPTIMADE (``elements HAS ONLY "Li","Fe","P","O"``) compiles to
``{chemsys: {$in: [every non-empty subset, sorted and joined by -]}}``, which the curated
``chemsys`` indexes serve.  On the real Materials Project documents of ``../shared/data``
(materials and tasks), the command's answer must be exactly the documents whose ``elements``
are a non-empty subset of the given ones, and ``explain`` must show the index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.query import QueryError
from ingest.query.compile import build, evaluate, subsystems
from ingest.query.language import parse
from ingest.store import curated

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
MATERIALS = curated.get("materials")
TASKS = curated.get("tasks")

#: Element sets asked of the real documents: the systems the files were fetched for, their parts, one with In
#: (a keyword when not after `has only`) and one that matches nothing.
SETS = [("Li", "Fe", "P", "O"), ("Na", "Fe", "P", "O"), ("Li", "Co", "Ni", "O"), ("Fe", "O"), ("Li",),
        ("In", "P"), ("Mn", "O", "Y"), ("Si", "C"), ("Xe", "Kr")]


def test_has_only_is_every_subsystem_of_the_set():
    spec = build(MATERIALS, where="elements has only Li, Fe, P, O")
    systems = spec.filter["chemsys"]["$in"]
    assert len(systems) == 15 == len(set(systems))  # 2**4 - 1 non-empty subsets
    assert {"Fe", "Li", "O", "P", "Fe-Li-O-P", "Fe-O-P", "Li-O"} <= set(systems)
    assert all(s == "-".join(sorted(s.split("-"))) for s in systems)  # as chemsys is written: sorted, joined by -
    assert subsystems(["O", "Li", "O"]) == ["Li", "O", "Li-O"]
    # OPTIMADE's quoted form, a list, bare names, any case of the keywords, duplicates: one filter
    for text in ('elements HAS ONLY "Li","Fe","P","O"', 'elements has only ["O", "P", "Fe", "Li"]',
                 "elements Has Only O, P, Fe, Li, Li", "elements has only Li,Fe,P,O"):
        assert build(MATERIALS, where=text).filter == spec.filter, text
    assert build(MATERIALS, where="elements has only In, P").filter == {"chemsys": {"$in": ["In", "P", "In-P"]}}
    both = build(MATERIALS, where="elements has only Fe, O and is_stable == true").filter
    assert both == {"chemsys": {"$in": ["Fe", "O", "Fe-O"]}, "is_stable": True}
    assert build(TASKS, where="elements has only Fe, O").filter == {"chemsys": {"$in": ["Fe", "O", "Fe-O"]}}
    # the cheap OPTIMADE forms of has all / has any (no brackets) are the bracketed ones
    assert build(MATERIALS, where='elements has all "Fe", "O"').filter == {"elements": {"$all": ["Fe", "O"]}}
    assert build(MATERIALS, where="elements has any S, Se").filter == {"elements": {"$in": ["S", "Se"]}}


@pytest.mark.parametrize("text, message", [
    ("tags has only a", "it is for `elements` of a collection with `chemsys`, not tags"),
    ("nelements has only Li", "has is for list fields; nelements is int64"),
    ("elements has only " + ", ".join(f"E{i}" for i in range(13)), "at most 12 distinct values"),
    ("elements has only 1, 2", "elements holds strings; 1 is a number"),
    ("elements has only", "ends too early"),
])
def test_has_only_refuses_what_it_cannot_answer(text, message):
    with pytest.raises(QueryError, match=message):
        build(TASKS if text.startswith("tags") else MATERIALS, where=text)


def _cli(mongo_uri, db_name, home, *argv):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db_name], capture_output=True, text=True, env=env, cwd=home,
                          timeout=180)


@pytest.mark.xdist_group("real_materials")
@pytest.mark.parametrize("collection, key", [("materials", "id"), ("tasks", "task_id")])
def test_has_only_on_the_real_documents_is_the_python_set_filter(mongo_uri, real_materials_loaded, tmp_path,
                                                                 collection, key):
    db, _files, _summary = real_materials_loaded
    coll = db[collection]
    docs = list(coll.find({}, {"elements": 1, "chemsys": 1, "task_id": 1}))
    assert len(docs) > 300
    served_by = [name for name, ix in coll.index_information().items() if ix["key"][0][0] == "chemsys"]
    matched_any = 0
    for elements in SETS:
        where = f"elements has only {', '.join(elements)}"
        # the reference: a non-empty elements list within the set (a document without elements matches nothing)
        expected = {str(d["_id"] if key == "id" else d["task_id"]) for d in docs
                    if isinstance(d.get("elements"), list) and d["elements"] and set(d["elements"]) <= set(elements)}
        tree = parse(where, curated.get(collection))
        assert {str(d["_id"] if key == "id" else d["task_id"]) for d in docs if evaluate(tree, d)} == expected
        matched_any += bool(expected)
        spec = build(curated.get(collection), where=where)
        assert {str(d["_id"] if key == "id" else d["task_id"]) for d in coll.find(spec.filter)} == expected
        if elements not in (SETS[0], SETS[5]):
            continue  # the compiled filter on the server above; the command itself for two sets (seconds each)
        proc = _cli(mongo_uri, db.name, tmp_path, "query", collection, "--where", where, "--fields", key,
                    "--format", "jsonl")
        assert proc.returncode == 0, proc.stderr
        got = [json.loads(line)[key] for line in proc.stdout.splitlines()]
        assert len(got) == len(set(got)) and set(got) == expected, (collection, elements)
        plan = _cli(mongo_uri, db.name, tmp_path, "query", collection, "--where", where, "--explain", "--json")
        assert plan.returncode == 0, plan.stderr
        report = json.loads(plan.stdout)
        assert report["returned"] == len(expected)
        if served_by:  # an index on chemsys is here (the load builds chemsys_1 / chemsys_1_task_type_1): it serves it
            assert not report["collscan"] and set(report["indexes"]) & set(served_by), report["plan"]
    assert matched_any >= 4  # the sets are not all empty answers
