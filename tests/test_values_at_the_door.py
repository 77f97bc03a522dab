"""Values checked at the door, and every warning surfaced (the CLI as a subprocess, a real server).

``-m 10``: identity and similarity outside 0..1, a negative or NaN E-value fail the file with
``file:line: field value reason``; a negative bit score (FASTA prints one under a loose ``-E``)
loads.  JSON: ``NaN``, ``Infinity`` and numbers beyond a double's range are stored as the
doubles they became and named as warnings (``file:line: field: ...``).  Every warning goes
to stderr (the first three of a file, then a count), into ``--json`` and into the ledger.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.config import SAMPLES_DIR

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLE = SAMPLES_DIR / "pasta" / "ssearch36_prot.m10"


@pytest.fixture()
def load(mongo_uri, db, tmp_path):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*paths):
        proc = subprocess.run([str(BIN), "load", "--json", "-q", "--workers", "1", "--db", db.name, *map(str, paths)],
                              env=env, capture_output=True, text=True, timeout=300)
        return proc, json.loads(proc.stdout)

    return run


def mutated(folder: Path, name: str, pattern: str, value: str) -> tuple[Path, int]:
    """The sample with the first match of ``pattern`` (a '; xx_key: value' line) set to ``value``;
    (path, the 1-based line changed)."""
    text = SAMPLE.read_text()
    match = re.search(pattern, text, re.M)
    assert match, pattern
    path = folder / name
    path.write_text(text[:match.start(1)] + value + text[match.end(1):])
    return path, text.count("\n", 0, match.start()) + 1


def test_impossible_alignment_values_fail_the_file_naming_line_field_and_value(load, db, tmp_path):
    cases = {
        "ident.m10": (r"^; sw_ident: +(\S+)$", "5.31", "sw_ident 5.31 is not a fraction between 0 and 1"),
        "sim.m10": (r"^; sw_sim: +(\S+)$", "1.5", "sw_sim 1.5 is not a fraction between 0 and 1"),
        "negative.m10": (r"^; sw_expect: +(\S+)$", "-5", "sw_expect -5 is not an E-value (negative or not a number)"),
        "nan.m10": (r"^; sw_expect: +(\S+)$", "nan", "sw_expect nan is not an E-value (negative or not a number)"),
    }
    made = {name: mutated(tmp_path, name, pattern, value) for name, (pattern, value, _) in cases.items()}
    bits, _ = mutated(tmp_path, "bits.m10", r"^; sw_bits: +(\S+)$", "-3.2")
    proc, report = load(*[p for p, _ in made.values()], bits)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    failed = {Path(f["path"]).name: f["reason"] for f in report["failed"]}
    for name, (path, line) in made.items():
        assert failed[name] == f"{path}:{line}: {cases[name][2]}"
        assert f"failed: {path}:{line}: {cases[name][2]}" in proc.stderr.splitlines()
    assert "bits.m10" not in failed and db.hits.count_documents({"hsps.0.bits": -3.2}) == 1
    assert db.searches.count_documents({}) == db.searches.count_documents({"source.path": str(bits)})


def test_json_numbers_that_are_not_finite_are_stored_counted_and_named(load, db, tmp_path, mongo_uri):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"material_id": "a", "band_gap": NaN}\n'
                    '{"material_id": "b", "band_gap": 1e400}\n'
                    '{"material_id": "c", "energy_above_hull": -Infinity}\n'
                    + "".join(f'{{"material_id": "n{i}", "x": [NaN]}}\n' for i in range(6)))
    proc, report = load(path)
    assert proc.returncode == 0, proc.stderr
    stored = {d["_id"]: d for d in db.materials.find()}
    assert math.isnan(stored["a"]["band_gap"]) and stored["b"]["band_gap"] == math.inf
    assert stored["c"]["energy_above_hull"] == -math.inf
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert warned == [f"warning: {path}:1: band_gap: NaN is not a number (stored as NaN)",
                      f"warning: {path}:2: band_gap: Infinity, or a number beyond a double's range (stored as an "
                      "infinity)",
                      f"warning: {path}:3: energy_above_hull: -Infinity, or a number beyond a double's range (stored "
                      "as an infinity)",
                      f"warning: {path}: 6 more warning(s) (the first 9 in the ledger entry and in --json)"]
    (entry,) = report["warnings"]
    assert entry["path"] == str(path) and entry["total"] == 9 and entry["first"][3] == f"{path}:4: x.0: NaN is not " \
        "a number (stored as NaN)"
    ledger = db.ingest_files.find_one({"_id": str(path)})
    assert ledger["warnings_total"] == 9 and len(ledger["warnings"]) == 9
    # and the validation suites catch them where a field has a range: NaN as not a number, the
    # infinities by the range
    # (on worker processes, though the work is small: tests/test_cli_run.py checks it here)
    env = {**os.environ, "SCI_INGEST_HOME": str(tmp_path / "home"), "SCI_INGEST_SMALL_WORK": "0"}
    proc = subprocess.run([str(BIN), "validate", "--json", "--mongo-uri", mongo_uri, "--db", db.name],
                          env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    assert [s["stage"] for s in report["stages"]] == ["start-up", "connect", "cluster", "validate", "close"]
    assert report["stages"][3]["detail"]["checked"] == "cluster"
    suites = {s["suite"]: s for s in report["validation"]["suites"]}
    failed = {(f["expectation"], f["column"]): f for f in suites["materials"]["failures"]}
    assert failed[("expect_column_values_to_be_null", "band_gap:non_numeric")]["sample"] == ["nan"]
    assert failed[("expect_column_values_to_be_between", "band_gap")]["unexpected_count"] == 1  # inf > 20
    assert failed[("expect_column_values_to_be_between", "energy_above_hull")]["unexpected_count"] == 1  # -inf < 0


def test_a_byte_order_mark_is_skipped_and_warnings_of_the_parser_surface(load, db, tmp_path):
    """A BOM before '# ssearch36 ...' keeps the command; replaced bytes in a query id and a summary
    length that disagrees with the query line are warned about, not kept quiet."""
    bom = tmp_path / "bom.m10"
    bom.write_bytes(b"\xef\xbb\xbf" + SAMPLE.read_bytes())
    raw = SAMPLE.read_bytes()
    odd = tmp_path / "odd.m10"  # a byte that is not UTF-8 in the query's description, a summary saying 210 aa
    odd.write_bytes(raw.replace(b"GLUTATHIONE S-TRANSFERASE 1-1", b"GLUTATHIONE S-TRANSFERASE\xff 1-1", 1)
                    .replace(b">>>GTT1_DROME, 209 aa", b">>>GTT1_DROME, 210 aa", 1))
    proc, report = load(bom, odd)
    assert proc.returncode == 0, proc.stderr
    command = db.searches.find_one({"source.path": str(bom)})["command"]
    assert command.startswith("ssearch36 ")
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert f"warning: {bom}:1: a UTF-8 byte order mark before the first line was skipped" in warned
    assert any(str(odd) in w and "non-UTF-8 bytes in query description replaced" in w for w in warned), warned
    assert any(str(odd) in w and "the query summary says 210 aa but the query line says 209" in w for w in warned)
    assert {Path(w["path"]).name for w in report["warnings"]} == {"bom.m10", "odd.m10"}
