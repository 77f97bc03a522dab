"""The paper's analyses: formula_consistency, hull_energy, library_hits, hit_distributions.

Pure functions first, on hand-made frames whose answers are worked out in the
comments; then each analysis through the runner on the real server (one
LocalCluster of 2 worker processes for the module), on the bundled samples and
on the real Materials Project documents in ../shared/data/materials, with their
expectation suites.
"""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.analyses import formula_consistency as fc, hit_distributions as hd, hull_energy as he, library_hits as lh
from analytics.registry import Analysis, Side, all_analyses, get_analysis
from analytics.runner import analyze
from analytics.validation import validate
from ingest.cluster import dask_client
from ingest.errors import ConfigError
from ingest.schema import OUTPUT_DTYPES, Column, OutputColumn, Schema
from ingest.store.indexes import exact_indexes

REPO = Path(__file__).resolve().parent.parent
NAMES = ["formula_consistency", "hull_energy", "library_hits", "hit_distributions"]
#: |recomputed - stored| bound on the real with-hull entries, eV/atom (see test_real_documents_through_the_runner).
HULL_BOUND = 1e-10


def frame_of(columns, docs: list[dict]) -> pd.DataFrame:
    """The frame the runner would read from ``docs``: the declared columns, through the same Schema."""
    schema = Schema(columns)
    return schema.frame(schema.read(docs))


def by_id(frame: pd.DataFrame, column: str) -> dict:
    return {row[column]: row for row in frame.to_dict("records")}


# ------------------------------------------------------------------ formulas
def test_reduced_formulas_come_from_pymatgen():
    assert fc.parse_formula("Fe4O6").reduced == "Fe2O3"
    assert fc.parse_formula("Cr3 Li2 O8 Sn1").reduced == "Li2Cr3SnO8"  # an atomate formula_reduced_abc
    assert fc.composition_formula({"Fe": 4.0, "O": 6.0}).reduced == "Fe2O3"
    # the same atomic fractions are the same formula, whether pymatgen reduces them or not
    assert fc.composition_formula({"Fe": 0.4, "O": 0.6}).same_as(fc.parse_formula("Fe2O3"))
    assert not fc.parse_formula("Fe3O4").same_as(fc.parse_formula("Fe2O3"))
    for bad in ("Xx2", "Fe2O3)", "", "fe2o3", None):
        assert fc.parse_formula(bad) is None, bad
    assert fc.composition_formula({"Fe": -1.0, "O": 2.0}) is None
    assert fc.composition_formula({"Fe": 0.0}) is None


def material(_id, task_ids=(), **fields):
    return {"_id": _id, "task_ids": list(task_ids), **fields}


TASKS = [
    {"_id": "t1", "formula_pretty": "Fe2O3"},
    {"_id": "t2", "composition": {"Fe": 3.0, "O": 4.0}, "formula_pretty": "Fe2O3"},  # its composition wins: Fe3O4
    {"_id": "t4", "formula_pretty": "Xx2"},                                           # unparseable
    {"_id": "t5", "output": {"structure": {"sites": []}}},                           # nothing to read
    {"_id": "t6", "composition": None, "composition_unit_cell": {"Li": 3.0}, "formula_pretty": "Li"},
    {"_id": "t7", "formula_reduced_abc": "Li1"},
    {"_id": "t8", "composition_unit_cell": {"Li": 2.0, "O": 1.0}, "elements": ["Li", "O"]},
]


def test_formula_consistency_by_hand():
    materials = frame_of(fc.COLUMNS, [
        # Fe4O6 reduces to Fe2O3; t1 agrees, t2 is Fe3O4, t3 is not loaded, t4 and t5 have no usable formula
        material("mp-1", ["t1", "t2", "t3", "t4", "t5", "t1"], composition={"Fe": 4.0, "O": 6.0},
                 elements=["Fe", "O"]),
        material("mp-2", ["t1"], formula_pretty="Fe2O3)"),                 # unparseable: left out
        material("mp-3", ["t1"]),                                          # no formula at all: left out
        # the composition disagrees with elements (a species key it cannot see?): formula_pretty instead
        material("mp-4", ["t6", "t7", "t8"], composition={"Li": 2.0}, elements=["Li", "N"], formula_pretty="Li3N"),
        material("mp-5", formula_pretty="Li"),                             # no linked task: nothing to contradict
        material("mp-6", ["t6", "t7"], formula_pretty="Li"),
    ])
    tasks = frame_of(fc.TASK_COLUMNS, TASKS)
    out, excluded = fc.formula_consistency(materials, tasks)
    rows = by_id(out, "material_id")
    assert sorted(rows) == ["mp-1", "mp-4", "mp-5", "mp-6"]
    one = rows["mp-1"]
    assert (one["reduced_formula"], one["formula_source"]) == ("Fe2O3", "composition")
    # distinct links t1..t5 = 5; found t1, t2, t4, t5 = 4; compared t1, t2 = 2; t2 differs
    assert (one["n_tasks"], one["n_found"], one["n_compared"], one["n_mismatched"]) == (5, 4, 2, 1)
    assert list(one["mismatched_task_ids"]) == ["t2"] and list(one["mismatched_formulas"]) == ["Fe3O4"]
    assert not one["consistent"]
    four = rows["mp-4"]
    assert (four["reduced_formula"], four["formula_source"]) == ("Li3N", "formula_pretty")
    # t6 (composition_unit_cell Li3 -> Li) and t7 (formula_reduced_abc Li1) differ from Li3N; t8 (Li2O) too
    assert list(four["mismatched_task_ids"]) == ["t6", "t7", "t8"]
    assert list(four["mismatched_formulas"]) == ["Li", "Li", "Li2O"]
    assert (rows["mp-5"]["n_tasks"], bool(rows["mp-5"]["consistent"])) == (0, True)
    six = rows["mp-6"]
    assert (six["n_compared"], six["n_mismatched"], bool(six["consistent"])) == (2, 0, True)
    assert excluded == {"material_no_formula": 1, "material_unparseable_formula": 1,
                        "task_no_formula": 1, "task_unparseable_formula": 1}
    # the side as the partitions get it: one formula per task, or why there is none
    prepared = fc.task_formulas(tasks)
    assert list(prepared.columns) == ["task_id", "formula", "fractions", "reason"]
    formulas = dict(zip(prepared["task_id"], zip(prepared["formula"], prepared["reason"])))
    assert formulas == {"t1": ("Fe2O3", None), "t2": ("Fe3O4", None), "t4": (None, "unparseable_formula"),
                        "t5": (None, "no_formula"), "t6": ("Li", None), "t7": ("Li", None), "t8": ("Li2O", None)}
    # two partitions combine to the same table
    parts = [fc.formula_partial(materials.iloc[:3].reset_index(drop=True), prepared),
             fc.formula_partial(materials.iloc[3:].reset_index(drop=True), prepared)]
    split, split_excluded = fc.formula_combine(parts)
    pd.testing.assert_frame_equal(split, out)
    assert split_excluded == excluded


# ------------------------------------------------------------------ hull
def hull_doc(_id, formula, fe, stored=None, doc_type="summary", **fields):
    doc = {"_id": _id, "material_id": _id.split(":")[-1], "_ingest": {"type": doc_type}, "formula_pretty": formula,
           "formation_energy_per_atom": fe, **fields}
    if stored is not None:
        doc["energy_above_hull"] = stored
    return doc


def test_hull_of_a_binary_by_hand():
    # Li-O with Li and O at 0 (the references), LiO at -1.0 eV/atom on the hull.  At x_O = 1/3 the hull
    # runs from Li (0, 0) to LiO (1/2, -1): -1 * (1/3)/(1/2) = -2/3, so Li2O at -0.5 is 1/6 above it.
    # At x_O = 2/3, from LiO to O (1, 0): -1 + (2/3 - 1/2) / (1/2) = -2/3, so LiO2 at -0.2 is 7/15 above.
    # A Li polymorph at +0.1 is 0.1 above.  LiPO3 makes Li-O-P the only maximal system: the Li-O
    # documents are in its diagram, and their values do not change (a face of the hull is the hull
    # of its face).  The entry Li2O is in another population, alone with the references: on its hull.
    frame = frame_of(he.COLUMNS, [
        hull_doc("LiO", "LiO", -1.0, stored=0.0),
        hull_doc("Li2O", "Li2O", -0.5, stored=0.2),
        hull_doc("LiO2", None, -0.2, stored=0.5, composition={"Li": 2.0, "O": 4.0}, elements=["Li", "O"]),
        hull_doc("Li-poly", "Li", 0.1, stored=0.1),
        hull_doc("LiPO3", "LiPO3", -2.0),
        hull_doc("entry:Li2O", None, -0.5, stored=0.0, doc_type="entry", composition={"Li": 4.0, "O": 2.0}),
        hull_doc("no-fe", "FeO", None),
        hull_doc("bad", "Fe2O3)", -1.0),
        hull_doc("nothing", None, -1.0),
        hull_doc("tiny", None, -1.0, composition={"Fe": 1e-12}),  # below pymatgen's amount tolerance
    ])
    out, excluded = he.hull_energy(frame)
    rows = by_id(out, "doc_id")
    expected = {"LiO": 0.0, "Li2O": 1 / 6, "LiO2": 7 / 15, "Li-poly": 0.1, "LiPO3": 0.0, "entry:Li2O": 0.0}
    assert set(rows) == set(expected)
    for doc_id, value in expected.items():
        assert rows[doc_id]["recomputed"] == pytest.approx(value, abs=1e-12), doc_id
    assert rows["Li2O"]["difference"] == pytest.approx(1 / 6 - 0.2, abs=1e-12)
    assert rows["Li2O"]["abs_difference"] == pytest.approx(0.2 - 1 / 6, abs=1e-12)
    assert math.isnan(rows["LiPO3"]["stored"]) and math.isnan(rows["LiPO3"]["difference"])
    assert {d: rows[d]["hull_system"] for d in ("LiO", "Li2O", "LiPO3")} == dict.fromkeys(
        ("LiO", "Li2O", "LiPO3"), "Li-O-P")
    assert (rows["entry:Li2O"]["population"], rows["entry:Li2O"]["hull_system"]) == ("entry", "Li-O")
    assert (rows["LiO2"]["formula"], rows["Li2O"]["formula"], rows["entry:Li2O"]["formula"]) == ("LiO2", "Li2O", "Li2O")
    assert rows["LiO"]["n_hull_entries"] == 5
    assert bool(rows["LiO"]["on_hull"]) and not bool(rows["Li2O"]["on_hull"])
    assert excluded == {"no_formation_energy": 1, "no_composition": 1, "unparseable_formula": 2, "hull_failed": 0}
    summary = he.hull_summary(out)
    # compared (stored known): LiO 0, Li2O -1/30, LiO2 -1/30, Li-poly 0, the entry 0: three within 1 meV
    assert summary["compared"] == 5 and summary["max_abs_difference"] == pytest.approx(1 / 30, abs=1e-12)
    assert summary["within_1_meV"] == 3


def test_maximal_systems_and_units():
    systems = [frozenset(s.split("-")) for s in ("Li-O", "Li", "O-P", "Li-O-P", "Fe", "Fe")]
    assert ["-".join(sorted(s)) for s in he.maximal_systems(systems)] == ["Fe", "Li-O-P"]
    present = set(systems)
    assert {"-".join(sorted(s)) for s in he.subsystems(frozenset({"Li", "O", "P"}), present)} == {
        "Li", "Li-O", "O-P", "Li-O-P"}
    # more systems than MAX_UNITS: packed, every system in exactly one unit
    many = [("material", f"S{i}", {"doc_id": np.array([f"d{i}"] * (i % 5 + 1))}) for i in range(150)]
    units = he._pack(many)
    assert len(units) == he.MAX_UNITS
    assert sorted(name for unit in units for _, name, _ in unit) == sorted(f"S{i}" for i in range(150))


# ------------------------------------------------------------------ hits
def hit(search, query, library, hit_id, evalue=None, identity=None, program="ssearch36", **fields):
    hsp = {k: v for k, v in (("evalue", evalue), ("identity", identity)) if v is not None}
    return {"search_id": search, "query_id": query, "library": library, "hit_id": hit_id, "program": program,
            "hsps": [hsp] if hsp else [], **fields}


HITS = [
    hit("s1", "q1", "chr.fa", "chr1", 1e-30, 0.9, hit_description="chromosome 1", hit_length=5000),
    hit("s1", "q1", "chr.fa", "chr2", 1e-3, 0.4),
    hit("s2", "q2", "chr.fa", "chr1", 0.0, 1.0),
    hit("s3", "q1", "chr.fa", "chr1", 2.0, None, program="fasta36"),   # the same query again, another search
    hit("s3", "q1", "a|b.fa", "x%y", 0.5, 1.7, program="fasta36"),     # an identity out of range
    hit("s4", "q3", None, "chr9"),                                     # no library
    hit("s4", "q3", "chr.fa", None, -1.0, 0.0, program=None),          # no hit id, no program
]


def _distinct_hits(db, match: dict) -> int:
    """MongoDB's count of the hits matching ``match``, one copy of each (fingerprint and rank)."""
    return len(list(db.hits.aggregate([{"$match": match},
                                       {"$group": {"_id": {"f": "$search_fingerprint", "r": "$rank"}}}])))


def test_library_hits_by_hand():
    frame = frame_of(lh.COLUMNS, HITS)
    out, excluded = lh.library_hits(frame)
    rows = by_id(out, "sequence")
    # chr1 has 3 hits; chr2 and x%y one each (one query each): the better E-value first
    assert list(out["sequence"]) == ["chr.fa|chr1", "chr.fa|chr2", "a%7Cb.fa|x%25y"]
    one = rows["chr.fa|chr1"]
    assert (one["rank"], one["n_hits"], one["n_queries"], one["n_searches"]) == (1, 3, 2, 3)
    assert one["best_evalue"] == 0.0 and one["n_identity"] == 2 and one["mean_identity"] == pytest.approx(0.95)
    assert (one["hit_description"], one["hit_length"]) == ("chromosome 1", 5000)
    odd = rows["a%7Cb.fa|x%25y"]
    assert (odd["library"], odd["hit_id"], odd["n_identity"]) == ("a|b.fa", "x%y", 0)
    assert math.isnan(odd["mean_identity"])
    assert excluded == {"no_library": 1, "no_hit_id": 1, "copies": 0}
    # a query split across partitions is counted once
    split, _ = lh.library_combine([lh.library_partial(frame.iloc[:2]), lh.library_partial(frame.iloc[2:])])
    pd.testing.assert_frame_equal(split, out)
    # a copy of search s1 in another file (its own search id, the same fingerprint) counts once
    fingerprinted = [{**h, "search_fingerprint": "F1", "rank": i} if h["search_id"] == "s1" else h
                     for i, h in enumerate(HITS, start=1)]
    copied = fingerprinted + [{**h, "search_id": "s1-copy"} for h in fingerprinted if h["search_id"] == "s1"]
    again, excluded = lh.library_hits(frame_of(lh.COLUMNS, copied))
    assert excluded["copies"] == 2
    pd.testing.assert_frame_equal(again, out)


def test_hit_distributions_by_hand():
    frame = frame_of(hd.COLUMNS, HITS + [hit("s5", "q4", "chr.fa", "chr1", 1e-5, 0.0),
                                         hit("s5", "q4", "chr.fa", "chr2", 10.0, 0.05)])
    out, excluded = hd.hit_distributions(frame)
    ss = out[out["program"] == "ssearch36"]
    identity = ss[ss["measure"] == "identity"]
    assert len(identity) == hd.IDENTITY_BINS  # every identity bin, zeros included
    counts = dict(zip(identity["label"], identity["count"]))
    # identities 0.9, 0.4, 1.0, 0.0, 0.05: 1.0 is in the last (closed) bin, 0.05 starts the second
    assert counts["[0.95, 1.00]"] == 1 and counts["[0.90, 0.95)"] == 1 and counts["[0.40, 0.45)"] == 1
    assert counts["[0.00, 0.05)"] == 1 and counts["[0.05, 0.10)"] == 1 and sum(counts.values()) == 5
    evalue = ss[ss["measure"] == "log10_evalue"]
    # E = 1e-30 -> decade -30, 1e-3 -> -3, 0 -> its own bin, 1e-5 -> -5, 10 -> 1
    assert dict(zip(evalue["label"], evalue["count"])) == {
        "E = 0": 1, "1e-30 <= E < 1e-29": 1, "1e-5 <= E < 1e-4": 1, "1e-3 <= E < 1e-2": 1, "1e1 <= E < 1e2": 1}
    zero = evalue[evalue["evalue_zero"]]
    assert len(zero) == 1 and math.isnan(zero["bin_lo"].iloc[0]) and zero["share"].iloc[0] == pytest.approx(0.2)
    fasta = out[(out["program"] == "fasta36") & (out["measure"] == "log10_evalue")]
    assert dict(zip(fasta["label"], fasta["count"])) == {"1e-1 <= E < 1e0": 1, "1e0 <= E < 1e1": 1}
    assert excluded == {"no_program": 1, "no_identity": 2, "identity_out_of_range": 1, "no_evalue": 1,
                        "bad_evalue": 0, "copies": 0}
    split, split_excluded = hd.hits_combine([hd.hits_partial(frame.iloc[:4]), hd.hits_partial(frame.iloc[4:])])
    pd.testing.assert_frame_equal(split, out)
    assert split_excluded == excluded


# ------------------------------------------------------------------ declarations and plots
def test_declarations_are_checked():
    columns = (Column("a", "a", "string"),)
    with pytest.raises(ConfigError, match="key 'b' is not one of its columns"):
        Side("tasks", columns, key="b")
    outputs = (OutputColumn("a", "str", "the key", ""),)
    with pytest.raises(ConfigError, match="regroup and per_group are declared together"):
        Analysis(name="x", description="", source="s", columns=columns, partition=len, output="o",
                 output_id="a", outputs=outputs, regroup=lambda p: ([], {}))
    with pytest.raises(ConfigError, match="file_prefix cannot go with a side input"):
        Analysis(name="x", description="", source="s", columns=columns, partition=len, output="o",
                 output_id="a", outputs=outputs, group_key="a", file_prefix=str,
                 join=Side("t", columns, key="a"))
    described = get_analysis("formula_consistency").describe()
    assert described["join"] == {"source": "tasks", "key": "task_id"}
    for name in NAMES:
        analysis = get_analysis(name)
        assert analysis.questions and analysis.indexes and analysis.plot is not None and not analysis.mends_groups


# ------------------------------------------------------------------ output columns: meaning and unit
def test_every_output_column_declares_its_meaning_and_unit():
    """One declaration per column; the dtypes, the Arrow schema and the units all come from it."""
    for analysis in all_analyses():
        assert analysis.outputs and all(isinstance(c, OutputColumn) for c in analysis.outputs), analysis.name
        for c in analysis.outputs:
            assert c.meaning.strip() and isinstance(c.unit, str), (analysis.name, c)
            assert "output column" not in c.meaning, (analysis.name, c)  # a meaning, not a placeholder
            assert c.dtype in OUTPUT_DTYPES and c.dtype != "object", (analysis.name, c)
        assert analysis.output_types == {c.name: c.pandas_dtype for c in analysis.outputs}
        schema = analysis.arrow_schema
        assert schema.names == [c.name for c in analysis.outputs] + ["run_id"]
        for c in analysis.outputs:
            assert schema.field(c.name).metadata == {b"meaning": c.meaning.encode(), b"unit": c.unit.encode()}
    hull = get_analysis("hull_energy")
    for name in ("stored", "recomputed", "difference", "abs_difference", "formation_energy_per_atom"):
        assert hull.output_column(name).unit == "eV/atom", name
    assert "energy above the convex hull" in hull.output_column("stored").meaning
    assert "energy above the convex hull" in hull.output_column("recomputed").meaning
    consistency = get_analysis("formula_consistency")
    for name in ("mismatched_task_ids", "mismatched_formulas"):
        assert consistency.output_column(name).dtype == "list<string>"
        assert consistency.arrow_schema.field(name).type == pa.list_(pa.string())
        assert consistency.output_types[name] == "object"  # in pandas: a column of lists


def _declare(*outputs):
    return Analysis(name="x", description="d", source="s", columns=(Column("a", "a", "string"),), partition=len,
                    output="o", output_id="a", outputs=outputs)


KEY = OutputColumn("a", "str", "the key", "")


def test_an_output_column_without_a_meaning_or_a_unit_is_refused():
    assert _declare(KEY, OutputColumn("b", "float64", "an energy", "eV/atom")).output_types == {
        "a": "str", "b": "float64"}
    refused = [
        ((KEY, OutputColumn("b", "float64", "", "eV/atom")), r"analysis x: output column 'b' has no meaning"),
        ((KEY, OutputColumn("b", "float64", "  ", "eV/atom")), r"analysis x: output column 'b' has no meaning"),
        ((KEY, OutputColumn("b", "float64", None, "eV/atom")), r"analysis x: output column 'b' has no meaning"),
        ((KEY, ("b", "float64", "an energy")),  # the unit left out: declared explicitly or not at all
         r"analysis x: output column 'b' must be declared as OutputColumn\(name, dtype, meaning, unit\)"),
        ((KEY, OutputColumn("b", "float64", "an energy", None)), r"analysis x: output column 'b' has no unit"),
        ((KEY, OutputColumn("b", "object", "task ids", "")),  # a list declares its element type
         r"analysis x: output column 'b' has dtype 'object'.*list<string>"),
        ((KEY, OutputColumn("a", "str", "again", "")), r"analysis x: output column 'a' declared twice"),
        ((KEY, OutputColumn("run_id", "str", "mine", "")), r"analysis x: output column 'run_id' is the runner's"),
        ((), r"analysis x: declares no output column"),
    ]
    for outputs, message in refused:
        with pytest.raises(ConfigError, match=message):
            _declare(*outputs)
    with pytest.raises(TypeError):  # the unit cannot be left out of an OutputColumn either
        OutputColumn("b", "float64", "an energy")


def test_the_registry_refuses_an_analysis_whose_output_column_lacks_a_meaning(tmp_path, monkeypatch):
    """A module of analytics/analyses/ declaring a column without a meaning: the registry (what
    ``sci-ingest analyze`` and ``query`` list) refuses to start, naming the analysis and the column."""
    import analytics.analyses as package
    import analytics.registry as registry

    (tmp_path / "unexplained.py").write_text(textwrap.dedent('''
        from analytics.registry import Analysis
        from ingest.schema import Column, OutputColumn

        ANALYSIS = Analysis(name="unexplained", description="d", source="hits", columns=(Column("a", "a", "string"),),
                            partition=len, output="unexplained", output_id="a",
                            outputs=(OutputColumn("a", "str", "the key", ""), OutputColumn("n", "int64", "", "count")))
    '''))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_FOUND", None)
    monkeypatch.delitem(sys.modules, "analytics.analyses.unexplained", raising=False)
    with pytest.raises(ConfigError, match="analysis unexplained: output column 'n' has no meaning"):
        registry.all_analyses()
    sys.modules.pop("analytics.analyses.unexplained", None)


def check_plot(analysis, frame) -> None:
    """The analysis's figure renders to PNG; every plot has a title and an x label with its unit; the
    first has a y label or named categories (the others may share them)."""
    fig = analysis.plot(frame)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert axes, analysis.name
    for ax in axes:
        categories = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert ax.get_title() and "(" in ax.get_xlabel(), (analysis.name, ax.get_title(), ax.get_xlabel())
        assert ax.get_ylabel() or categories or ax is not axes[0], (analysis.name, ax.get_title())


# ------------------------------------------------------------------ through the runner
@pytest.fixture(scope="module")
def dclient():
    with dask_client(None) as client:
        yield client


def check_published(db, result, analysis):
    """The collection and the Parquet file hold the result's rows, with the declared indexes."""
    assert db[analysis.output].count_documents({}) == result.records_out
    assert pq.read_table(result.parquet_path).num_rows == result.records_out
    keys = [[tuple(k) for k in info["key"]] for info in db[analysis.output].index_information().values()]
    build, _cut = exact_indexes(db, analysis.output, analysis.indexes)  # none on a float where keys lose numbers
    for index in build:
        assert [tuple(k) for k in index] in keys, index


@pytest.mark.parametrize("read_mode", ["ranges", "stream"])
def test_the_side_input_reaches_every_partition(db, mongo_uri, dclient, tmp_path, monkeypatch, read_mode):
    """Materials in 3 key ranges (or streamed in chunks of 2), tasks read as ranges or a stream:
    the same rows as the analysis on the whole frames in this process."""
    monkeypatch.setattr("analytics.reading.planning.DEFAULT_CHUNK_ROWS", 2)
    docs = [material(f"mp-{i}", [f"t{i}", f"t{i + 1}", "t1"], formula_pretty=f) for i, f in
            enumerate(["Fe2O3", "Fe3O4", "Li", "LiO2", "Fe2O3", "Li2O", "Li", "NaCl"], start=1)]
    tasks = [{"_id": t["_id"], **{k: v for k, v in t.items() if k != "_id"}} for t in TASKS]
    db.materials.insert_many(docs)
    db.tasks.insert_many(tasks)
    (result,) = analyze(mongo_uri, db.name, "run-side", tmp_path, names=["formula_consistency"], partitions=3,
                        client=dclient, read_mode=read_mode)
    assert result.read["mode"] == read_mode and result.read["join"]["rows"] == len(TASKS)
    assert result.partitions == (3 if read_mode == "ranges" else 4)
    expected, excluded = get_analysis("formula_consistency").run_frames(
        [frame_of(fc.COLUMNS, docs)], frame_of(fc.TASK_COLUMNS, tasks))
    published = pq.read_table(result.parquet_path).to_pandas().drop(columns="run_id")
    for frame in (published, expected):
        for column in ("mismatched_task_ids", "mismatched_formulas"):
            frame[column] = frame[column].map(list)
    pd.testing.assert_frame_equal(published, expected, check_dtype=False)
    assert result.excluded == excluded
    # mp-1 (Fe2O3): t1 agrees, t2 (Fe3O4) does not; mp-2 (Fe3O4): t2 agrees, t3 is not loaded, t1 does not
    rows = by_id(expected, "material_id")
    assert list(rows["mp-1"]["mismatched_task_ids"]) == ["t2"] and list(rows["mp-2"]["mismatched_task_ids"]) == ["t1"]


LIST_COLUMNS = ("mismatched_task_ids", "mismatched_formulas")
STRINGS = pa.list_(pa.string())


def _export(mongo_uri, db_name, tmp_path, *argv):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    done = subprocess.run([str(Path(sys.executable).parent / "sci-ingest"), "export", "formula_consistency", *argv,
                           "--db", db_name], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    return done


def test_empty_list_columns_keep_their_type_in_parquet_and_the_export(db, mongo_uri, dclient, tmp_path):
    """Every linked task agrees, so every list of formula_consistency is empty: the published Parquet
    file and ``sci-ingest export`` still type both list columns list<string> (inferred from the values
    they would be list<null>: DuckDB's NULL[], Polars' List(Null)), and so they do with no row at all."""
    db.materials.insert_many([material("mp-1", ["t1"], formula_pretty="Fe2O3"),
                              material("mp-2", [], formula_pretty="Li"),
                              material("mp-3", ["t6", "t7"], formula_pretty="Li")])
    db.tasks.insert_many([{"_id": t["_id"], **{k: v for k, v in t.items() if k != "_id"}} for t in TASKS])
    analysis = get_analysis("formula_consistency")
    (result,) = analyze(mongo_uri, db.name, "run-lists", tmp_path / "out", names=["formula_consistency"],
                        client=dclient)
    assert result.records_out == 3
    table = pq.read_table(result.parquet_path)
    assert [table.column(c).to_pylist() for c in LIST_COLUMNS] == [[[], [], []], [[], [], []]]
    schema = pq.read_schema(result.parquet_path)
    for c in LIST_COLUMNS:
        assert schema.field(c).type == STRINGS, (c, schema.field(c).type)
    assert schema.equals(analysis.arrow_schema, check_metadata=False)  # every column as declared
    assert schema.field("n_mismatched").metadata[b"unit"] == b"count"
    assert b"tasks with another reduced formula" in schema.field("n_mismatched").metadata[b"meaning"]
    assert db.formula_consistency.find_one({"_id": "mp-1"})["mismatched_task_ids"] == []

    # the export of the published collection: every declared column, the lists list<string>
    _export(mongo_uri, db.name, tmp_path, "--format", "parquet", "--out", str(tmp_path / "all.parquet"))
    exported = pq.read_table(tmp_path / "all.parquet")
    assert exported.num_rows == 3 and exported.column_names == [*analysis.output_types, "run_id"]
    assert all(exported.schema.field(c).type == STRINGS for c in LIST_COLUMNS), exported.schema
    assert exported.column("mismatched_task_ids").to_pylist() == [[], [], []]
    _export(mongo_uri, db.name, tmp_path, "--where", "consistent == false", "--format", "parquet",
            "--out", str(tmp_path / "none.parquet"))
    nothing = pq.read_table(tmp_path / "none.parquet")
    assert nothing.num_rows == 0 and all(nothing.schema.field(c).type == STRINGS for c in LIST_COLUMNS)

    # no material at all: no row, and the same types
    db.materials.delete_many({})
    (again,) = analyze(mongo_uri, db.name, "run-none", tmp_path / "out", names=["formula_consistency"],
                       client=dclient)
    assert again.records_out == 0
    empty_schema = pq.read_schema(again.parquet_path)
    assert empty_schema.equals(analysis.arrow_schema, check_metadata=False), empty_schema
    assert all(empty_schema.field(c).type == STRINGS for c in LIST_COLUMNS)


def test_bundled_samples_through_the_runner(db, mongo_uri, load_files, dclient, tmp_path):
    summary = load_files([REPO / "samples" / "materials", REPO / "samples" / "pasta"], "samples")
    assert not summary.failed
    results = {r.name: r for r in analyze(mongo_uri, db.name, "run-paper", tmp_path, names=NAMES, client=dclient)}
    for name in NAMES:
        check_published(db, results[name], get_analysis(name))

    # formula_consistency: every material document has a composition; the links and the tasks found
    # agree with MongoDB's own count of them
    fcr = results["formula_consistency"]
    materials = list(db.materials.find(fc.MATERIALS_ONLY, {"task_ids": 1}))
    assert fcr.records_in == len(materials) == 3000 and fcr.records_out == 3000
    assert fcr.read["join"]["source"] == "tasks" and fcr.read["join"]["rows"] == db.tasks.count_documents({})
    links = [(m["_id"], t) for m in materials for t in dict.fromkeys(m.get("task_ids") or [])]
    known = set(db.tasks.distinct("_id"))
    out = list(db.formula_consistency.find())
    assert sum(r["n_tasks"] for r in out) == len(links)
    assert sum(r["n_found"] for r in out) == sum(t in known for _, t in links)
    assert all(r["consistent"] == (r["n_mismatched"] == 0) for r in out)
    assert db.formula_consistency.count_documents({"formula_source": "composition"}) == 3000

    # hull_energy: one row per material, recomputed on the diagrams of 1,000-odd maximal systems
    hr = results["hull_energy"]
    assert hr.records_out == 3000 and hr.excluded == {
        "no_formation_energy": 0, "no_composition": 0, "unparseable_formula": 0, "hull_failed": 0}
    assert hr.summary["compared"] == 3000
    rows = pd.DataFrame(list(db.hull_energy.find()))
    assert (rows["recomputed"] >= -1e-9).all() and rows["hull_system"].nunique() > 500
    # an element's energy above hull is its formation energy less the lowest of its element's (or 0, the
    # reference's); the samples' elements sit at 0 plus their stored distance above the hull
    elements = rows[~rows["chemsys"].str.contains("-")]
    lowest = elements.groupby("chemsys")["formation_energy_per_atom"].transform("min").clip(upper=0)
    assert len(elements) > 10
    assert np.allclose(elements["recomputed"], elements["formation_energy_per_atom"] - lowest, rtol=0, atol=1e-12)
    assert np.allclose(elements["recomputed"], elements["stored"], rtol=0, atol=1e-12)

    # library_hits: its ranking is MongoDB's own count of distinct hits (one copy of each: a search's
    # fingerprint and the hit's rank) per (library, hit_id)
    lr = results["library_hits"]
    counted = list(db.hits.aggregate([
        {"$match": {"library": {"$ne": None}, "hit_id": {"$ne": None}}},
        {"$group": {"_id": {"f": "$search_fingerprint", "r": "$rank", "library": "$library", "hit_id": "$hit_id"}}},
        {"$group": {"_id": {"library": "$_id.library", "hit_id": "$_id.hit_id"}, "n": {"$sum": 1}}}]))
    assert lr.excluded["copies"] == db.hits.count_documents({}) - _distinct_hits(db, {}) > 0
    assert lr.records_out == len(counted)
    top = list(db.library_hits.find().sort("rank", 1).limit(5))
    assert [r["n_hits"] for r in top] == sorted((c["n"] for c in counted), reverse=True)[:5]
    assert top[0]["rank"] == 1 and top[0]["n_hits"] >= top[1]["n_hits"]
    assert sum(r["n_hits"] for r in db.library_hits.find()) == sum(c["n"] for c in counted)

    # hit_distributions: counts per program are MongoDB's counts of the hits with each value
    hr2 = pd.DataFrame(list(db.hit_distributions.find()))
    ident = hr2[hr2["measure"] == "identity"].groupby("program")["count"].sum()
    assert ident["ssearch36"] == _distinct_hits(db, {"program": "ssearch36", "hsps.0.identity": {"$gte": 0, "$lte": 1}})
    zero = hr2[hr2["evalue_zero"] == True]  # noqa: E712
    assert zero["count"].sum() == _distinct_hits(db, {"hsps.0.evalue": 0}) > 0
    assert hr2.loc[hr2["measure"] == "log10_evalue", "count"].sum() == _distinct_hits(
        db, {"program": {"$ne": None}, "hsps.0.evalue": {"$gte": 0}})

    report = validate(mongo_uri, db.name, "run-paper", suites=NAMES)
    assert report.ok and {s.suite: (s.status, s.rows) for s in report.suites} == {
        name: ("passed", results[name].records_out) for name in NAMES}

    for name in NAMES:  # the report's plots, from the published Parquet files
        check_plot(get_analysis(name), pq.read_table(results[name].parquet_path).to_pandas())

    # small work runs on one worker in this process (what `sci-ingest analyze` does below
    # SCI_INGEST_SMALL_WORK documents): the same outputs as on the worker processes, row for row
    with dask_client(None, in_process=True) as here:
        again = {r.name: r for r in analyze(mongo_uri, db.name, "run-here", tmp_path / "here", names=NAMES,
                                            client=here)}  # fmt: skip
    for name in NAMES:
        assert again[name].parquet_path != results[name].parquet_path
        assert _rows(again[name].parquet_path) == _rows(results[name].parquet_path), name


def _rows(path) -> list[str]:
    """A Parquet output's rows without the run id, in a fixed order (NaN equal to NaN)."""
    table = pq.read_table(path)
    table = table.drop_columns([c for c in ("run_id",) if c in table.column_names])
    return sorted(map(repr, table.to_pylist()))


def test_real_documents_through_the_runner(db, mongo_uri, shared_materials, load_files, dclient, tmp_path):
    files = ["materials_legacy_db.jsonl", "summary_api_partial.jsonl", "task_vasp.jsonl", "task_vasp_legacy.jsonl",
             "computed_structure_entry_with_hull.jsonl"]
    summary = load_files([shared_materials / f for f in files], "real")
    assert not summary.failed
    # A hand-made material linking real task documents of three schemas, to check their formulas are read
    # right: mp-1117333 (atomate: composition_unit_cell Cr9 Li6 O24 Sn3 -> Li2Cr3SnO8, agrees), mp-1018351
    # (TaskDoc, composition null, composition_unit_cell Li3 -> Li, differs), mp-688194 (only an output
    # structure: no formula), and an id no document has.
    db.materials.insert_one({"_id": "test-links", "formula_pretty": "Li2Cr3SnO8",
                             "task_ids": ["mp-1117333", "mp-1018351", "mp-688194", "mp-0"]})
    results = {r.name: r for r in analyze(mongo_uri, db.name, "run-real", tmp_path,
                                          names=["formula_consistency", "hull_energy"], client=dclient)}

    rows = {r["_id"]: r for r in db.formula_consistency.find()}
    # the legacy documents: InP links 15 tasks, Te 19, none of which is among the real task documents
    inp, te = rows["mp-20351"], rows["mp-19"]
    assert (inp["reduced_formula"], inp["formula_source"], inp["n_tasks"], inp["n_found"]) == (
        "InP", "composition", 15, 0)
    assert (te["reduced_formula"], te["n_tasks"], te["n_found"], te["consistent"]) == ("Te", 19, 0, True)
    links = rows["test-links"]
    assert (links["n_tasks"], links["n_found"], links["n_compared"], links["n_mismatched"]) == (4, 3, 2, 1)
    assert links["mismatched_task_ids"] == ["mp-1018351"] and links["mismatched_formulas"] == ["Li"]
    assert links["consistent"] is False
    assert results["formula_consistency"].excluded["task_no_formula"] == 1
    assert sum(r["n_mismatched"] for r in rows.values()) == 1  # the only mismatch is the hand-made one

    # hull_energy: the 1,310 distinct with-hull entries, whose e_above_hull pymatgen's PhaseDiagram computed
    # from the same entries.  Recomputed from their formation energies (an affine shift of the energies,
    # which leaves distances to the hull unchanged) they differ only by floating-point rounding: formation
    # energies of a few eV/atom carry about 1e-16 relative error, and the facet solves of a 4-element hull
    # multiply it by their condition number; measured: 2.8e-14 eV/atom at most.  HULL_BOUND, 1e-10 eV/atom,
    # leaves room for another BLAS's rounding and still fails on any real disagreement (0.1 meV is 1e6 times it).
    entries = pd.DataFrame(list(db.hull_energy.find({"population": "entry"})))
    assert len(entries) == 1310
    assert set(entries["hull_system"]) == {"Co-Li-Ni-O", "Fe-Na-O-P"}
    assert entries["abs_difference"].max() < HULL_BOUND
    assert results["hull_energy"].excluded["no_formation_energy"] == 1  # the hand-made test-links
    stable = entries[entries["stored"] == 0]
    assert len(stable) and bool(stable["on_hull"].all())
    # the legacy InP document is alone in In-P: on its own hull, as stored
    inp_hull = db.hull_energy.find_one({"_id": "mp-20351"})
    assert (inp_hull["formula"], inp_hull["stored"], inp_hull["hull_system"]) == ("InP", 0.0, "In-P")
    assert inp_hull["recomputed"] == pytest.approx(0.0, abs=1e-12)

    report = validate(mongo_uri, db.name, "run-real", suites=["formula_consistency", "hull_energy"])
    statuses = {s.suite: s.status for s in report.suites}
    assert report.ok and statuses == {"formula_consistency": "passed with warnings", "hull_energy": "passed"}
    warning = next(r for s in report.suites for r in s.results if not r["success"])
    assert warning["kwargs"]["column"] == "consistent" and warning["critical"] is False


def test_suites_catch_broken_invariants(db, mongo_uri):
    db.formula_consistency.insert_many([
        {"_id": "m1", "material_id": "m1", "reduced_formula": "Fe2O3", "formula_source": "composition",
         "n_tasks": 2, "n_found": 2, "n_compared": 2, "n_mismatched": 1, "mismatched_task_ids": ["t1"],
         "consistent": True},                                            # consistent, yet a mismatch
        {"_id": "m2", "material_id": "m2", "reduced_formula": "Fe2O3", "formula_source": "composition",
         "n_tasks": 1, "n_found": 2, "n_compared": 0, "n_mismatched": 0, "mismatched_task_ids": [],
         "consistent": True},                                            # more found than linked
    ])
    db.hit_distributions.insert_many([
        {"_id": "p|identity|x", "program": "p", "measure": "identity", "bin_lo": 0.95, "bin_hi": 1.05,
         "evalue_zero": False, "count": 3, "share": 1.0},
        {"_id": "p|log10_evalue|E = 0", "program": "p", "measure": "log10_evalue", "bin_lo": -math.inf,
         "evalue_zero": True, "count": 1, "share": 1.0},                 # E = 0 as -inf: not allowed
    ])
    report = validate(mongo_uri, db.name, "run-bad", suites=["formula_consistency", "hit_distributions"])
    assert not report.ok
    def condition(result) -> str | None:
        rc = (result["kwargs"] or {}).get("row_condition")
        return f"{rc['column']['name']}=={rc['parameter']!r}" if rc else None

    failed = {(s.suite, r["expectation"], r["column"], condition(r))
              for s in report.suites for r in s.results if not r["success"] and r["critical"]}
    assert ("formula_consistency", "expect_column_values_to_be_between", "n_mismatched", "consistent==True") in failed
    assert ("formula_consistency", "expect_column_pair_values_a_to_be_greater_than_b", "n_tasks, n_found",
            None) in failed
    assert ("hit_distributions", "expect_column_values_to_be_between", "bin_hi", "measure=='identity'") in failed
    assert ("hit_distributions", "expect_column_values_to_be_null", "bin_lo", "evalue_zero==True") in failed
    # the good rows of each output broke nothing: one row per failed invariant
    assert len(failed) == 5 and ("hit_distributions", "expect_column_values_to_be_between", "bin_lo",
                                 "measure=='log10_evalue'") in failed
