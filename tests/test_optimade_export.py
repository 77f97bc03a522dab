"""``sci-ingest export materials --format optimade | optimade-parquet``, held to optimade-python-tools.

Every record the command writes, of the bundled samples and of the real Materials Project
documents in ``../shared/data``, is validated by ``optimade.models.StructureResource`` (the
OPTIMADE v1.2 models of optimade-python-tools); a record may only miss what its notes name,
and a document set aside must be one that is not a structure.  The formulas are also checked
against pymatgen's, and the Parquet file against the JSON Lines.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pymatgen.core import Composition

from ingest.query.optimade import anonymous_formula, hermann_mauguin, parse_formula, reduced_formula, to_structure

optimade_models = pytest.importorskip("optimade.models", reason="optimade (optimade-python-tools) is not installed: "
                                                                 "make install installs it from requirements.lock")
from optimade.warnings import MissingExpectedField  # noqa: E402 - after the skip above

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
STRUCTURE_FIELDS = "cartesian_site_positions, species_at_sites, species, lattice_vectors"


def _cli(mongo_uri, db_name, home, *argv):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db_name], capture_output=True, text=True, env=env, cwd=home,
                          timeout=300)


def _validate(records: list[dict], notes: dict[str, list[dict]]) -> int:
    """Each record through StructureResource; a MissingExpectedField warning only where the record's notes say
    the document has no structure.  Returns how many were validated."""
    for record in records:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimade_models.StructureResource(**record)
        named = {n["field"] for n in notes.get(record["id"], [])}
        for w in caught:
            assert issubclass(w.category, MissingExpectedField) and STRUCTURE_FIELDS in named, \
                (record["id"], str(w.message)[-200:])
    return len(records)


def test_the_conventions_of_the_spec():
    # the examples: MP's AB2C2D8 is OPTIMADE's A8B2C2D; reduced formulas alphabetical; H-M spacing
    assert anonymous_formula({"Li": 1, "Fe": 2, "P": 2, "O": 8}) == "A8B2C2D"
    assert reduced_formula({"Na": 4, "Cl": 4}) == "ClNa" and reduced_formula({"O": 6, "Fe": 4}) == "Fe2O3"
    assert reduced_formula({"Fe": 2.5, "O": 1}) is None  # not integral: left out, never rounded
    assert parse_formula("Sc2(CN2)3") == {"Sc": 2, "C": 3, "N": 6} and parse_formula("Xy2") is None
    for mp, optimade in [("P6_3/mmc", "P 63/m m c"), ("Fm-3m", "F m -3 m"), ("P2_12_12_1", "P 21 21 21"),
                         ("I4_1/amd", "I 41/a m d"), ("P-42_1m", "P -4 21 m"), ("P3_121", "P 31 2 1"),
                         ("Cmce", "C m c e"), ("P-1", "P -1"), ("R-3m", "R -3 m"), ("P2_1/c", "P 21/c")]:
        assert hermann_mauguin(mp) == optimade, mp
    assert hermann_mauguin("R-3m:H") is None and hermann_mauguin("P") is None


def test_fractional_sites_become_cartesian_and_what_is_missing_is_named():
    doc = {"_id": "mp-x", "_ingest": {"type": "summary"}, "formula_pretty": "NaCl",
           "structure": {"lattice": {"matrix": [[2, 0, 0], [0, 4, 0], [1, 0, 5]]},
                         "sites": [{"species": [{"element": "Na", "occu": 1}], "abc": [0.5, 0.25, 0.2]},
                                   {"species": [{"element": "Cl", "occu": 1}], "abc": [0, 0, 0]}]},
           "symmetry": {"symbol": "Fm-3m", "number": 225}}
    mapped = to_structure(doc)
    attrs = mapped.resource["attributes"]
    assert attrs["cartesian_site_positions"] == [[1.2, 1.0, 1.0], [0.0, 0.0, 0.0]]  # abc . matrix
    assert attrs["dimension_types"] == [1, 1, 1] and attrs["nperiodic_dimensions"] == 3  # a Structure: periodic
    assert attrs["chemical_formula_descriptive"] == "NaCl" and attrs["chemical_formula_reduced"] == "ClNa"
    assert attrs["last_modified"] is None and "space_group_symbol_hall" not in attrs
    assert {f for f, _ in mapped.unmapped} == {"immutable_id", "last_modified", "space_group_symbol_hall"}
    optimade_models.StructureResource(**mapped.resource)
    disordered = {**doc, "structure": {**doc["structure"], "sites": [
        {"species": [{"element": "Na", "occu": 0.5}, {"element": "K", "occu": 0.5}], "abc": [0, 0, 0]}]}}
    mapped = to_structure(disordered)
    assert "lattice_vectors" not in mapped.resource["attributes"]
    assert any("disorder is not mapped" in reason for _, reason in mapped.unmapped)
    assert to_structure({"_id": "xas:1", "_ingest": {"type": "xas"}}).set_aside.startswith("an XAS spectrum")


@pytest.fixture(scope="module")
def samples(mongo_uri, mongo_client):
    from ingest.load import LoadOptions, load_paths

    name = f"t_optimade_{uuid.uuid4().hex[:8]}"
    load_paths(mongo_uri, name, [str(REPO / "samples" / "materials" / "materials.jsonl.gz")], "test-run",
               LoadOptions(workers=1, progress=False), server_kind="test")
    yield mongo_client[name]
    mongo_client.drop_database(name)


def test_every_sample_record_validates_and_the_parquet_holds_the_same(mongo_uri, samples, tmp_path):
    proc = _cli(mongo_uri, samples.name, tmp_path, "export", "materials", "--format", "optimade", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    n = samples.materials.count_documents({})
    records = [json.loads(line) for line in (tmp_path / "materials.optimade.jsonl").read_text().splitlines()]
    assert n > 2000 and len(records) == report["records"] == n and not report["set_aside"]
    notes = {r["id"]: r["unmapped"] for r in report["unmapped"]}
    assert _validate(records, notes) == n
    stored = {d["_id"]: d for d in samples.materials.find({}, {"formula_pretty": 1, "symmetry": 1, "nsites": 1})}
    for record in records:  # against the documents and pymatgen
        attrs, doc = record["attributes"], stored[record["id"]]
        composition = Composition(doc["formula_pretty"])  # the sites' formula, read by pymatgen from MP's own
        assert parse_formula(attrs["chemical_formula_reduced"]) == {
            str(e): float(c) for e, c in composition.reduced_composition.items()}, record["id"]
        assert attrs["elements"] == sorted(e.symbol for e in composition.elements)
        assert attrs["nsites"] == doc["nsites"] == len(attrs["cartesian_site_positions"])
        assert attrs["space_group_it_number"] == doc["symmetry"]["number"]
        assert attrs["space_group_symbol_hermann_mauguin"].replace(" ", "") == doc["symmetry"]["symbol"].replace("_", "")
        assert attrs["last_modified"].endswith("Z") and attrs["immutable_id"]
    # the Parquet: one row per record, the same values (flattened: id, type, one column per attribute)
    proc = _cli(mongo_uri, samples.name, tmp_path, "export", "materials", "--format", "optimade-parquet",
                "--out", "s.parquet")
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(tmp_path / "s.parquet")
    assert table.num_rows == n and table.column_names[:3] == ["id", "type", "immutable_id"]
    by_id = {r["id"]: r for r in records}
    for row in table.slice(0, 200).to_pylist():
        attrs = by_id[row["id"]]["attributes"]
        assert row["chemical_formula_anonymous"] == attrs["chemical_formula_anonymous"]
        assert row["lattice_vectors"] == attrs["lattice_vectors"]
        assert row["species"] == attrs["species"] and row["type"] == "structures"
        assert row["last_modified"].isoformat(timespec="milliseconds").replace("+00:00", "Z") == attrs["last_modified"]
    if importlib.util.find_spec("duckdb") is not None:  # optional: not in the lock
        import duckdb

        assert duckdb.sql(f"select count(*) from read_parquet('{tmp_path / 's.parquet'}')").fetchone()[0] == n


def test_reduced_formulas_agree_with_pymatgen(samples):
    """pymatgen's alphabetical reduced formula, 1s removed, is OPTIMADE's (an independent reading)."""
    for doc in samples.materials.find({}, {"formula_pretty": 1}):
        counts = parse_formula(doc["formula_pretty"])
        expected = Composition(doc["formula_pretty"]).reduced_composition
        ours = reduced_formula(counts)
        assert parse_formula(ours) == {str(e): float(n) for e, n in expected.items()}, doc["_id"]
        assert list(parse_formula(ours)) == sorted(parse_formula(ours))


@pytest.mark.parametrize("argv, message", [
    (["export", "hits", "--format", "optimade"], "optimade writes materials as OPTIMADE structures"),
    (["export", "materials", "--format", "optimade-parquet", "--fields", "chemsys"], "leave --fields out"),
])
def test_usage_errors_are_refused_before_any_work(mongo_uri, tmp_path, argv, message):
    proc = _cli(mongo_uri, f"t_none_{uuid.uuid4().hex[:6]}", tmp_path, *argv)
    assert proc.returncode == 64 and message in proc.stderr and not list(tmp_path.glob("*.optimade*"))


@pytest.mark.xdist_group("real_materials")
def test_every_real_record_validates_or_is_named_with_its_reason(mongo_uri, real_materials_loaded, tmp_path):
    db, _files, _summary = real_materials_loaded
    proc = _cli(mongo_uri, db.name, tmp_path, "export", "materials", "--format", "optimade", "--out", "r.jsonl",
                "--json")
    report = json.loads(proc.stdout)
    kinds = {d["_id"]: d["_ingest"]["type"] for d in db.materials.find({}, {"_ingest.type": 1})}
    not_structures = {i for i, k in kinds.items() if k in ("xas", "phonon")}
    assert {e["id"] for e in report["set_aside"]} == not_structures and not_structures  # the spectrum, the phonons
    assert proc.returncode == 2  # set aside: exit 2, each named on stderr and in r.jsonl.rejects.jsonl
    for entry in report["set_aside"]:
        assert f"set aside: {entry['id']}: {entry['reason']}" in proc.stderr
    rejects = [json.loads(line) for line in (tmp_path / "r.jsonl.rejects.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rejects} == not_structures
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(records) == report["records"] == len(kinds) - len(not_structures)
    notes = {r["id"]: r["unmapped"] for r in report["unmapped"]}
    assert _validate(records, notes) == len(records)
    side = {json.loads(line)["id"] for line in (tmp_path / "r.jsonl.unmapped.jsonl").read_text().splitlines()}
    assert side == set(notes) and side <= {r["id"] for r in records}
    for key, count in report["unmapped_by"].items():  # stderr: `first-id: field: reason (and N more records)`
        assert any(line.startswith("note: ") and f": {key}" in line for line in proc.stderr.splitlines()), key
        assert count >= 1
    # what the issue counted: MP's formula_anonymous is the other order, formula_pretty is not alphabetical
    legacy = {d["_id"]: d for d in db.materials.find({"formula_anonymous": {"$exists": True}}, {"formula_anonymous": 1})}
    for record in records:
        if record["id"] in legacy:
            mp = _counts(legacy[record["id"]]["formula_anonymous"])
            ours = _counts(record["attributes"]["chemical_formula_anonymous"])
            assert sorted(mp) == sorted(ours) and ours == sorted(ours, reverse=True), record["id"]


def _counts(anonymous: str) -> list[int]:
    return [int(n or 1) for n in re.findall(r"[A-Z][a-z]*(\d*)", anonymous)]
