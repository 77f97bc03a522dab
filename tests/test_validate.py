"""Great Expectations validation against a real server (the ``db`` / ``mongo_uri`` fixtures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.validation import (
    RUNS_COLLECTION,
    STATUS_FAILED,
    STATUS_PASSED,
    STATUS_SKIPPED,
    STATUS_WARNINGS,
    load_suites,
    validate,
)
from ingest.errors import ConfigError, ValidationFailed

REPO_ROOT = Path(__file__).resolve().parent.parent
SHA = "ab" * 32


# ------------------------------------------------------------------ documents
def search_doc(index: int, **extra) -> dict:
    doc = {
        "_id": f"{SHA[:20]}:{index}", "query_id": f"q{index}", "query_description": "test query",
        "query_length": 120, "query_type": "p", "program": "ssearch36", "version": "36.3.8",
        "algorithm": "Smith-Waterman", "library": "lib.fa", "params": {"pg_matrix": "BL50"},
        "query_index": index, "n_hits": 2,
        "source": {"path": "/data/q.m10", "sha256": SHA, "format": "pasta"},
    }
    doc.update(extra)
    return doc


def hsp(**extra) -> dict:
    doc = {
        "score": 250, "opt_score": 250, "initn_score": 200, "init1_score": 150, "z_score": 310.5,
        "bits": 60.2, "evalue": 1.5e-12, "identity": 0.61, "similarity": 0.83, "overlap": 70,
        "frame": "f", "query_start": 5, "query_end": 74, "hit_start": 10, "hit_end": 79,
        "query_strand": "+", "hit_strand": "+", "query_seq": "MKV", "hit_seq": "MRV",
    }
    doc.update(extra)
    return doc


def hit_doc(search_index: int, rank: int, hsps: list[dict] | None = None, **extra) -> dict:
    search_id = f"{SHA[:20]}:{search_index}"
    doc = {
        "_id": f"{search_id}:{rank}", "search_id": search_id, "query_id": f"q{search_index}",
        "program": "ssearch36", "library": "lib.fa", "rank": rank, "hit_id": f"sp|P{rank:05d}|X",
        "hit_description": "a protein", "hit_length": 300, "aligned": True,
        "hsps": [hsp()] if hsps is None else hsps, "source": {"path": "/data/q.m10", "sha256": SHA},
    }
    doc.update(extra)
    return doc


def unaligned_hit(search_index: int, rank: int) -> dict:
    """A hit listed only in the best-scores table: one HSP with score/bits/evalue."""
    return hit_doc(search_index, rank, hsps=[{"score": 90, "bits": 21.0, "evalue": 3.2}], aligned=False)


def material_doc(material_id: str, **extra) -> dict:
    doc = {
        "_id": material_id, "material_id": material_id, "formula_pretty": "Si", "elements": ["Si"],
        "nelements": 1, "chemsys": "Si", "composition": {"Si": 2.0}, "formation_energy_per_atom": 0.0,
        "energy_above_hull": 0.0, "band_gap": 0.61, "density": 2.33, "volume": 40.9, "nsites": 2,
        "symmetry": {"crystal_system": "Cubic", "symbol": "Fd-3m", "number": 227},
        "task_ids": ["mp-1791788"], "some_new_field": {"nested": [1, 2]},
    }
    doc.update(extra)
    return doc


def task_doc(task_id: str, **extra) -> dict:
    doc = {"_id": task_id, "task_id": task_id, "material_id": "mp-149", "formula_pretty": "Si",
           "state": "successful", "output": {"energy_per_atom": -5.42, "bandgap": 0.6}}
    doc.update(extra)
    return doc


def insert_good(db) -> None:
    db.searches.insert_many([search_doc(0), search_doc(1)])
    db.hits.insert_many([
        hit_doc(0, 1, hsps=[hsp(), hsp(query_start=80, query_end=90, hit_start=1, hit_end=11,
                                   query_strand="+", hit_strand="-")]),
        hit_doc(0, 2),
        unaligned_hit(0, 3),
        hit_doc(1, 1),
    ])
    db.materials.insert_many([
        material_doc("mp-149"),
        material_doc("mp-1143", formula_pretty="Al2O3", elements=["Al", "O"], nelements=2, chemsys="Al-O",
                     formation_energy_per_atom=-3.43, band_gap=5.85),
        # a sparse real-world document: most canonical fields absent
        {"_id": "mp-2", "material_id": "mp-2", "formula_pretty": "C", "task_ids": ["mp-2"]},
    ])
    db.tasks.insert_many([task_doc("mp-1791788"), task_doc("mp-1791789")])
    db.query_best_hits.insert_many([
        {"_id": "q0", "best_score": 250.0, "n_hits": 3, "best_hit_id": "sp|P00001|X"},
        {"_id": "q1", "best_score": 250.0, "n_hits": 1, "best_hit_id": "sp|P00001|X"},
    ])
    db.oxide_formation_energy.insert_many([
        {"_id": "Al-O", "count": 1, "mean_band_gap": 5.85, "mean_formation_energy_per_atom": -3.43},
    ])


# ------------------------------------------------------------------ suites (no server, no GX)
def test_suite_files_load_and_name_their_collections():
    suites = {s.name: s for s in load_suites()}
    assert {"searches", "hits", "materials", "material_entries", "tasks", "query_best_hits",
            "oxide_formation_energy"} <= set(suites)
    assert suites["hits"].unwind == "hsps"
    for spec in suites.values():
        assert spec.collection
        assert "_id" in spec.fields
        for exp in spec.all_expectations():
            assert exp["type"].startswith("expect_")
            assert isinstance(exp["meta"].get("critical", False), bool)
    critical = {e["kwargs"].get("column") for e in suites["hits"].expectations if e["meta"].get("critical")}
    assert {"hsps.identity", "hsps.similarity", "hsps.evalue", "search_id", "hit_id"} <= critical


def test_unwind_keeps_hits_without_hsps_and_reads_paths():
    spec = next(s for s in load_suites() if s.name == "hits")
    rows = list(spec.rows([hit_doc(0, 1, hsps=[hsp(identity=0.5), hsp(identity=0.9)]), hit_doc(0, 2, hsps=[])]))
    column = spec.fields.index("hsps.identity")
    rank = spec.fields.index("rank")
    assert [row[column] for row in rows] == [0.5, 0.9, None]
    assert [row[rank] for row in rows] == [1, 1, 2]


def test_importing_validate_does_not_import_great_expectations():
    code = ("import sys, analytics.validation as v; v.load_suites(); "
            "print('great_expectations' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_validation_package_import_is_light():
    """The package and its suite format import none of Great Expectations, pandas or pymongo."""
    code = ("import sys, analytics.validation, analytics.validation.suites; "
            "heavy = [m for m in ('great_expectations', 'pandas', 'numpy', 'pymongo', 'bson') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_bad_suite_files_are_config_errors(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({
        "collection": "x", "fields": ["a"],
        "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "b"}}],
    }))
    with pytest.raises(ConfigError, match="column 'b' is not a field"):
        load_suites(tmp_path)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_suites(tmp_path)


# ------------------------------------------------------------------ against the server
def test_good_documents_pass_and_are_recorded(db, mongo_uri):
    insert_good(db)
    report = validate(mongo_uri, db.name, "run-good")
    by_suite = {s.suite: s for s in report.suites}
    assert report.ok, report.summary()
    report.raise_for_critical()  # must not raise
    for name in ("searches", "hits", "materials", "tasks", "query_best_hits", "oxide_formation_energy"):
        assert by_suite[name].status == STATUS_PASSED, report.summary()
        assert by_suite[name].success and not by_suite[name].failures
    # no entry documents inserted: its filter matched none of the materials, which is not a pass
    entries = by_suite["material_entries"]
    assert entries.status == "checked nothing: its filter matched none of the 3 documents", entries.status
    assert not entries.success and not entries.failed and entries.skipped
    # inserted behind the loader's back: no loaded file holds these searches, which the table checks see
    [tables] = report.failed_suites
    assert tables.suite == "tables" and report.verdict == "validation failed (1 of 12 suites)"
    assert {(f["expectation"], f["kwargs"]["collection"], f["severity"]) for f in tables.failures} == {
        ("expect_references_to_exist", "searches", "error"),  # their files are not in the ledger
        ("expect_references_to_exist", "materials", "warning")}  # linked tasks not loaded: partial data
    assert by_suite["hits"].rows == 5  # 2 + 1 + 1 (unaligned) + 1 HSPs
    assert by_suite["hits"].documents == 4
    assert by_suite["materials"].rows == 3
    assert report.rows_checked == 2 + 5 + 3 + 2 + 2 + 1

    runs = {d["suite"]: d for d in db[RUNS_COLLECTION].find({"run_id": "run-good"})}
    assert set(runs) == set(by_suite)
    hits_run = runs["hits"]
    assert hits_run["success"] is True and hits_run["critical_ok"] is True
    assert hits_run["rows"] == 5 and hits_run["collection"] == "hits"
    stats = hits_run["statistics"]
    assert stats["evaluated"] == len(hits_run["results"]) == stats["successful"] > 0
    assert any(r["critical"] for r in hits_run["results"])
    assert all(r["unexpected_count"] == 0 for r in hits_run["results"] if "unexpected_count" in r)


def test_bad_values_fail_critically_with_names_and_samples(db, mongo_uri):
    db.hits.insert_many([
        hit_doc(0, 1, hsps=[hsp(), hsp(identity=1.7, similarity=1.7)]),
        hit_doc(0, 2, hsps=[hsp(evalue=-0.5)]),
        hit_doc(0, 3, hsps=[hsp(query_start=90, query_end=12)]),
    ])
    db.materials.insert_many([material_doc("mp-149"), material_doc("mp-149", _id="mp-149-copy")])
    report = validate(mongo_uri, db.name, "run-bad", suites=["hits", "materials"])
    assert not report.ok
    assert {s.suite: s.status for s in report.suites} == {"hits": STATUS_FAILED, "materials": STATUS_FAILED}

    with pytest.raises(ValidationFailed) as caught:
        report.raise_for_critical()
    message = str(caught.value)
    assert "expect_column_values_to_be_between on hsps.identity" in message and "1.7" in message
    assert "expect_column_values_to_be_between on hsps.evalue" in message and "-0.5" in message
    assert "expect_column_pair_values_a_to_be_greater_than_b on hsps.query_end, hsps.query_start" in message
    assert "[12.0, 90.0]" in message  # (query_end, query_start) of the offending row
    assert "expect_column_values_to_be_unique on material_id" in message and "'mp-149'" in message
    assert f"'{SHA[:20]}:0:1'" in message  # the _id of the offending hit
    failed = {(f["suite"], f["expectation"], f["column"]) for f in caught.value.failures}
    assert ("hits", "expect_column_values_to_be_between", "hsps.similarity") in failed
    assert ("materials", "expect_column_values_to_be_unique", "material_id") in failed
    # the good rows did not fail anything else critical
    assert ("hits", "expect_column_pair_values_a_to_be_greater_than_b", "hsps.hit_end, hsps.hit_start") not in failed

    stored = db[RUNS_COLLECTION].find_one({"run_id": "run-bad", "suite": "hits"})
    assert stored["success"] is False and stored["critical_ok"] is False
    identity = next(r for r in stored["results"] if r["column"] == "hsps.identity" and not r["generated"])
    assert identity["critical"] is True and identity["unexpected_count"] == 1
    assert identity["sample"] == [1.7]
    assert identity["sample_rows"] == [{"_id": f"{SHA[:20]}:0:1", "value": 1.7}]


def test_severities_an_error_fails_the_validation_a_warning_is_reported(db, mongo_uri):
    db.materials.insert_many([
        material_doc("mp-149", formation_energy_per_atom=42.0),            # implausible, not impossible: warning
        material_doc("mp-1143", elements=["Al", "O"], nelements=3),         # nelements != len(elements): error
        # a legacy document whose band_gap is a sub-document, not a number: error
        {"_id": "mp-20351", "material_id": "mp-20351", "elements": ["In", "P"], "nelements": 2,
         "band_gap": {"search_gap": {"band_gap": 0.468, "is_direct": True}}},
    ])
    report = validate(mongo_uri, db.name, "run-warn", suites=["materials"])
    [materials] = report.suites
    assert report.ok and materials.status == STATUS_FAILED and materials.failed
    assert not materials.success and report.failed_suites == [materials]
    assert report.verdict == "validation failed (1 of 1 suites)"
    report.raise_for_critical()  # no critical expectation failed: nothing fatal
    with pytest.raises(ValidationFailed) as caught:
        report.raise_for_failed()
    assert "validation failed (1 of 1 suites)" in str(caught.value)
    failed = {(f["expectation"], f["column"]): f for f in materials.failures}
    assert all(not f["critical"] for f in failed.values())
    plausible = failed[("expect_column_values_to_be_between", "formation_energy_per_atom")]
    assert plausible["sample"] == [42.0] and plausible["severity"] == "warning"
    pair = failed[("expect_column_pair_values_to_be_equal", "nelements, elements.len")]
    assert pair["sample"] == [[3.0, 2.0]] and pair["severity"] == "error"
    non_numeric = failed[("expect_column_values_to_be_null", "band_gap:non_numeric")]
    assert "search_gap" in non_numeric["sample"][0] and non_numeric["severity"] == "error"
    assert non_numeric["sample_rows"][0]["_id"] == "mp-20351"
    summary = report.summary()
    assert "ERROR: expect_column_values_to_be_null on band_gap:non_numeric" in summary
    assert "WARNING: expect_column_values_to_be_between on formation_energy_per_atom" in summary
    # and formula_pretty, which mp-20351 lacks (2 of 3 rows, under its mostly=0.9)
    assert {f["column"] for f in caught.value.failures} == {"nelements, elements.len", "band_gap:non_numeric",
                                                            "formula_pretty"}


def test_warnings_alone_pass(db, mongo_uri):
    db.materials.insert_many([material_doc("mp-149", formation_energy_per_atom=42.0), material_doc("mp-1143")])
    report = validate(mongo_uri, db.name, "run-warn-only", suites=["materials"])
    [materials] = report.suites
    assert materials.status == STATUS_WARNINGS and materials.success and not materials.failed
    assert report.verdict == "passed" and not report.failed_suites
    report.raise_for_failed()  # warnings never raise


def test_empty_collection_is_skipped_and_max_rows_truncates(db, mongo_uri):
    db.tasks.insert_many([task_doc(f"mp-{i}") for i in range(5)])
    report = validate(mongo_uri, db.name, "run-skip", suites=["searches", "tasks"], max_rows=3)
    searches, tasks = report.suites
    assert searches.status == STATUS_SKIPPED and searches.rows == 0
    assert not searches.success and not searches.failed  # it checked nothing: not a pass, not a failure
    assert tasks.status == STATUS_PASSED and tasks.rows == 3 and tasks.truncated
    assert report.ok and report.rows_checked == 3
    stored = db[RUNS_COLLECTION].find_one({"_id": "run-skip:searches"})
    assert stored["status"] == STATUS_SKIPPED and stored["rows"] == 0


def test_unknown_suite_name_and_invalid_expectation(db, mongo_uri, tmp_path):
    with pytest.raises(ConfigError, match="unknown expectation suite"):
        validate(mongo_uri, db.name, "r", suites=["nope"])
    (tmp_path / "odd.json").write_text(json.dumps({
        "collection": "odd", "fields": ["x"],
        "expectations": [{"type": "expect_column_values_to_be_between", "kwargs": {"column": "x"}}],
    }))
    db.odd.insert_one({"x": 1})
    with pytest.raises(ConfigError, match="expectation #0 .*not valid"):
        validate(mongo_uri, db.name, "r", suites_dir=tmp_path)


def _parsed_documents(path: Path, limit: int | None = None) -> list[dict]:
    """Documents as the loader stores them (``record_document``: the stored form keyed by ``Record.key``)."""
    from itertools import islice

    from ingest.documents import record_document
    from ingest.parsers.materials import read_records

    with open(path, "rb") as handle:
        records = list(islice(read_records(handle, str(path)), limit))
    bad = [r for r in records if isinstance(r, Exception)]
    assert not bad, bad[:3]
    return [(r.kind, record_document(r, sha256="0" * 64, path=str(path))) for r in records]


def test_materials_suite_leaves_entries_out(db, mongo_uri):
    """GGA and GGA+U entries of one material share its material_id: not a duplicate material."""
    import io

    from ingest.documents import record_document
    from ingest.parsers.materials import read_records

    lines = [
        {"material_id": "mp-19009", "formula_pretty": "NiO", "band_gap": 2.1, "elements": ["Ni", "O"],
         "nelements": 2},
        {"@module": "pymatgen.entries.computed_entries", "@class": "ComputedStructureEntry",
         "entry_id": "mp-19009-GGA", "energy": -20.1, "correction": 0.0, "composition": {"Ni": 1, "O": 1},
         "data": {"material_id": "mp-19009"}},
        {"@module": "pymatgen.entries.computed_entries", "@class": "ComputedStructureEntry",
         "entry_id": "mp-19009-GGA+U", "energy": -25.3, "correction": -2.0, "composition": {"Ni": 1, "O": 1},
         "data": {"material_id": "mp-19009"}},
    ]
    payload = "\n".join(json.dumps(line) for line in lines).encode()
    records = list(read_records(io.BytesIO(payload), "inline.jsonl"))
    assert [r.doc_type for r in records] == ["summary", "entry", "entry"]
    db.materials.insert_many([record_document(r, sha256="0" * 64, path="inline.jsonl") for r in records])
    report = validate(mongo_uri, db.name, "run-entries", suites=["materials", "material_entries"])
    materials, entries = report.suites
    assert report.ok, report.summary()
    assert materials.rows == 1 and entries.rows == 2
    assert not any(f["column"] == "material_id" for f in materials.failures)


def test_real_materials_project_documents(db, mongo_uri, shared_materials):
    """Real MP records, stored as the materials parser stores them: no critical failure."""
    materials, tasks = [], []
    for name, limit in [("summary_api_partial.jsonl", None), ("materials_legacy_db.jsonl", None),
                        ("materials_magnetism_partial.jsonl", None),
                        ("computed_structure_entry_with_hull.jsonl", 50), ("task_vasp.jsonl", 30)]:
        for kind, doc in _parsed_documents(shared_materials / name, limit):
            (materials if kind == "material" else tasks).append(doc)
    db.materials.insert_many(materials)
    db.tasks.insert_many(tasks)
    report = validate(mongo_uri, db.name, "run-real", suites=["materials", "material_entries", "tasks"])
    by_suite = {s.suite: s for s in report.suites}
    assert report.ok, report.summary()
    assert by_suite["materials"].rows == 24 + 2 + 10
    assert by_suite["material_entries"].rows == 50
    assert by_suite["tasks"].rows == 30
    # the parser turned the legacy band_gap {search_gap: ...} objects into numbers
    flagged = {f["column"] for f in by_suite["materials"].failures}
    assert "band_gap:non_numeric" not in flagged
    legacy = next(d for d in materials if d["_id"] == "mp-20351")
    assert isinstance(legacy["band_gap"], float)
