"""The real Materials Project documents in ../shared/data/materials go through a real server without loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.documents.materials import from_document
from ingest.parsers.materials import classify


@pytest.mark.xdist_group("real_materials")
def test_every_real_record_lands_and_round_trips(shared_materials: Path, real_materials_loaded):
    db, files, summary = real_materials_loaded  # loaded once for the tests that read it (conftest.py)
    assert files, f"no .jsonl files in {shared_materials}"
    assert not summary.failed, [(f.path, f.reason) for f in summary.failed]
    assert summary.count("loaded") == len(files)

    # The last record with a given natural key wins (a newer version updates the older one).
    expected: dict[tuple[str, str], dict] = {}
    total = 0
    for path in files:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                raw = json.loads(line)
                kind, _doc_type, key = classify(raw)
                expected[("materials" if kind == "material" else "tasks", key)] = raw
                total += 1
    assert total == sum(f.documents for f in summary.files)
    for coll in ("materials", "tasks"):
        keys = {k for c, k in expected if c == coll}
        assert db[coll].count_documents({}) == len(keys), coll
    mismatches = []
    for (coll, key), raw in expected.items():
        stored = db[coll].find_one({"_id": key})
        assert stored is not None, (coll, key)
        back = from_document(stored)
        if back != raw:
            mismatches.append((coll, key))
    assert mismatches == []


def test_legacy_names_are_queryable_by_canonical_fields(db, shared_materials: Path, load_files):
    load_files(
        [shared_materials / "materials_legacy_db.jsonl"])
    inp = db.materials.find_one({"material_id": "mp-20351"})
    assert inp is not None
    assert inp["formula_pretty"] == inp["pretty_formula"] == "InP"
    assert inp["energy_above_hull"] == inp["e_above_hull"]
    assert isinstance(inp["band_gap"], float) and inp["band_gap"] > 0
    assert sorted(inp["elements"]) == ["In", "P"]
