"""Contracts at the door (ingest/load/contracts.py): the declared kind of every curated field is
checked as a record is loaded, on every path that loads (``load``, ``run``, the Airflow tasks).

A value of another kind is set aside (its field null, the value in ``_ingest.set_aside``), named on
stderr as ``set aside: file:line: field value reason``, and the command exits 2 with a status that
is not ``ok``; a number written as a string (and a few other lossless readings) is stored as its
kind with a warning; null is allowed everywhere.  The CLI runs as a subprocess against a real
server, and what is stored is read back through pymongo.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zlib
from datetime import datetime
from pathlib import Path

import bson
import pytest
from bson.decimal128 import Decimal128
from bson.objectid import ObjectId

from ingest.airflow.support import run_task
from ingest.config import SAMPLES_DIR
from ingest.documents import from_document, record_document, search_documents
from ingest.fileio import open_binary
from ingest.load.contracts import CONTRACTS, LOADERS_OWN, shown
from ingest.parsers import data_file_suffixes, detect
from ingest.parsers.materials import read_records
from ingest.pipeline import task_load
from ingest.store import curated

BIN = Path(sys.executable).parent / "sci-ingest"

ENUM = {"@module": "emmet.core.vasp.calc_types.enums", "@class": "RunType", "value": "GGA"}
#: A hostile materials file: wrong types in curated fields (top level and nested), numbers written as
#: strings, nulls; line 1 is clean.
HOSTILE = [
    {"material_id": "mp-1", "formula_pretty": "Fe2O3", "formula_anonymous": None, "band_gap": 2.1, "nsites": 10,
     "elements": ["Fe", "O"], "is_stable": None, "symmetry": {"crystal_system": "Trigonal", "number": None}},
    {"material_id": "mp-2", "formula_pretty": 42, "band_gap": "1.25", "nsites": 8.0, "is_metal": "yes"},
    {"material_id": "mp-3", "symmetry": {"crystal_system": 7, "symbol": "Fm-3m", "number": "225"},
     "elements": ["Fe", 26], "last_updated": "yesterday"},
    {"material_id": "mp-4", "symmetry": "cubic", "energy_above_hull": "1e400", "band_gap": None},
    {"task_id": "mp-5", "input": {}, "output": {"energy_per_atom": "-3.5", "bandgap": True}, "run_type": ENUM,
     "tags": [{"class": "x"}], "nsites": 2.5},
]
#: What each line's values set aside are named as on stderr (after ``set aside: FILE:LINE: ``).
SET_ASIDE = [
    (2, 'formula_pretty 42 is an integer, not a string'),
    (2, 'is_metal "yes" is a string, not a boolean'),
    (3, 'elements ["Fe", 26] is a list holding an integer, not a list of strings'),
    (3, 'symmetry.crystal_system 7 is an integer, not a string'),
    (3, 'last_updated "yesterday" is a string, not a date'),
    (4, 'energy_above_hull "1e400" is a string, not a number'),
    (4, 'symmetry "cubic" is a string, not an object'),
    (5, 'nsites 2.5 is a number, not an integer'),
    (5, 'output.bandgap true is a boolean, not a number'),
    (5, 'tags [{"class": "x"}] is a list holding an object, not a list of strings'),
]
#: The lossless readings: stored as their kind, each named as a warning.
READ = [
    (2, 'nsites 8.0 is a double; stored as the integer 8'),
    (2, 'band_gap "1.25" is a string; stored as the number 1.25'),
    (3, 'symmetry.number "225" is a string; stored as the number 225'),
    (5, 'run_type {"@module": "emmet.core.vasp.calc_types.enums", "@cl… is a serialised enumeration; stored as '
        'its value "GGA"'),
    (5, 'output.energy_per_atom "-3.5" is a string; stored as the number -3.5'),
]


@pytest.fixture()
def env(mongo_uri, tmp_path) -> dict:
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _cli(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *map(str, args)], env=env, capture_output=True, text=True, timeout=600)


def _hostile(folder: Path, name: str = "hostile.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(record) + "\n" for record in HOSTILE))
    return path


def test_load_sets_aside_values_of_another_type_naming_file_line_field_value_reason(env, db, tmp_path):
    path = _hostile(tmp_path)
    proc = _cli(env, "load", "-q", "--workers", "1", "--db", db.name, path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    said = proc.stderr.splitlines()
    assert [line for line in said if line.startswith("set aside:")] == [
        f"set aside: {path}:{line}: {what}" for line, what in SET_ASIDE]
    # the readings are warnings: the first three of the file, then a count (the date's own warning among them)
    assert [line for line in said if line.startswith("warning:")] == [
        f"warning: {path}:2: {READ[0][1]}", f"warning: {path}:2: {READ[1][1]}",
        f'warning: {path}:3: last_updated: "yesterday" is not an ISO 8601 date or date-time',
        f"warning: {path}: 3 more warning(s) (the first 6 in the ledger entry and in --json)"]
    out = proc.stdout.splitlines()
    assert "files: 1 loaded, 0 skipped (unchanged), 0 failed" in out
    assert ("set aside: 10 value(s) of another type than declared, in 1 file(s) (named on stderr; all in --json "
            "and the ledger)") in out
    assert out[-1] == "status: partial (exit 2)"
    load_row = next(line for line in out if line.startswith("load "))
    assert load_row.split()[-1] == "partial"

    stored = {d["_id"]: d for coll in ("materials", "tasks") for d in db[coll].find()}
    assert stored["mp-2"]["formula_pretty"] is None and stored["mp-2"]["is_metal"] is None
    assert stored["mp-2"]["band_gap"] == 1.25 and type(stored["mp-2"]["band_gap"]) is float
    assert stored["mp-2"]["nsites"] == 8 and type(stored["mp-2"]["nsites"]) is int
    assert stored["mp-2"]["_ingest"]["set_aside"] == [
        {"path": "formula_pretty", "value": 42, "reason": "is an integer, not a string"},
        {"path": "is_metal", "value": "yes", "reason": "is a string, not a boolean"}]
    assert stored["mp-3"]["symmetry"] == {"crystal_system": None, "symbol": "Fm-3m", "number": 225}
    assert stored["mp-3"]["elements"] is None and stored["mp-3"]["last_updated"] is None
    assert stored["mp-4"]["symmetry"] is None and stored["mp-4"]["energy_above_hull"] is None
    assert stored["mp-5"]["output"] == {"energy_per_atom": -3.5, "bandgap": None}
    assert stored["mp-5"]["run_type"] == "GGA" and stored["mp-5"]["tags"] is None and stored["mp-5"]["nsites"] is None
    # null is allowed for every curated field: stored as null, named nowhere
    assert stored["mp-1"]["formula_anonymous"] is None and stored["mp-1"]["is_stable"] is None
    assert stored["mp-4"]["band_gap"] is None and "set_aside" not in stored["mp-1"]["_ingest"]
    assert db.materials.count_documents({"_ingest.set_aside": {"$exists": True}}) == 3
    # nothing is lost: each record comes back as it was written, its keys in order
    for record in HOSTILE:
        back = from_document(stored[record.get("material_id") or record["task_id"]])
        assert back == record and list(back) == list(record)
    ledger = db.ingest_files.find_one({"_id": str(path)})
    assert ledger["status"] == "loaded" and ledger["set_aside_total"] == 10
    assert ledger["set_aside"] == [f"{path}:{line}: {what}" for line, what in SET_ASIDE]
    assert ledger["warnings_total"] == 6
    # and an export, which reads every curated field by its declared type, sets nothing aside
    for coll in ("materials", "tasks"):
        out_file = tmp_path / f"{coll}.parquet"
        done = _cli(env, "export", coll, "--db", db.name, "--out", out_file)
        assert done.returncode == 0 and not Path(f"{out_file}.rejects.jsonl").exists(), done.stderr


def test_a_file_too_large_to_keep_is_checked_the_same_way_when_built_again(env, db, tmp_path):
    """A file read twice (its documents built again to be written) stores the same documents and names
    each value once (the checking pass names them)."""
    path = _hostile(tmp_path)
    proc = _cli({**env, "SCI_INGEST_SMALL_FILE_BYTES": "0", "SCI_INGEST_KEEP_DOCUMENTS": "1"},
                "load", "--json", "-q", "--workers", "1", "--db", db.name, path)
    assert proc.returncode == 2, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "partial" and report["exit_code"] == 2
    (entry,) = report["set_aside"]
    assert entry == {"path": str(path), "total": 10, "first": [f"{path}:{line}: {what}" for line, what in SET_ASIDE]}
    assert [line for line in proc.stderr.splitlines() if line.startswith("set aside:")] == [
        f"set aside: {path}:{line}: {what}" for line, what in SET_ASIDE]
    assert db.materials.find_one({"_id": "mp-2"})["band_gap"] == 1.25
    assert db.materials.find_one({"_id": "mp-3"})["symmetry"] == {"crystal_system": None, "symbol": "Fm-3m",
                                                                  "number": 225}
    versions = {v["_id"]["k"]: bson.decode(zlib.decompress(v["z"])) for v in db.ingest_versions.find()}
    assert len(versions) == len(HOSTILE)  # every holder's version kept is the checked document
    assert versions["mp-2"]["formula_pretty"] is None and versions["mp-2"]["band_gap"] == 1.25


def test_run_of_the_typed_field_file_does_not_end_ok(env, db, tmp_path):
    """The issue's file: a band gap written "1.25" and a formula the number 42.  `sci-ingest run` names
    both at load, by file and line, and does not end `status: ok`."""
    path = tmp_path / "typed.jsonl"
    path.write_text(json.dumps({"material_id": "mp-1", "formula_pretty": "Fe2O3", "band_gap": 2.1}) + "\n"
                    + json.dumps({"material_id": "mp-2", "formula_pretty": 42, "band_gap": "1.25"}) + "\n")
    proc = _cli(env, "run", "--json", "-q", "--workers", "1", "--db", db.name, path)
    report = json.loads(proc.stdout)
    assert proc.returncode != 0 and report["status"] != "ok", (report["status"], proc.stderr)
    said = proc.stderr.splitlines()
    assert f"set aside: {path}:2: formula_pretty 42 is an integer, not a string" in said
    assert f'warning: {path}:2: band_gap "1.25" is a string; stored as the number 1.25' in said
    assert report["set_aside"] == [{"path": str(path), "total": 1,
                                    "first": [f"{path}:2: formula_pretty 42 is an integer, not a string"]}]
    assert {s["stage"]: s["status"] for s in report["stages"]}["load"] == "partial"
    stored = db.materials.find_one({"_id": "mp-2"})
    assert stored["formula_pretty"] is None and stored["band_gap"] == 1.25


def test_the_airflow_load_task_applies_the_same_contracts(mongo_uri, db, tmp_path, monkeypatch):
    """The DAGs' load task (through ``run_task``, as Airflow calls it) loads by the same loader: the
    values are set aside alike, and its result counts them."""
    monkeypatch.setenv("SCI_INGEST_DB", db.name)
    path = _hostile(tmp_path)
    result = run_task(task_load, "manual__contracts", [str(path)], mongo_uri=mongo_uri)
    assert result["files_loaded"] == 1 and result["set_aside"] == 10, result
    assert db.materials.find_one({"_id": "mp-2"})["_ingest"]["set_aside"][0]["path"] == "formula_pretty"
    assert db.ingest_files.find_one({"_id": str(path)})["set_aside_total"] == 10


# ------------------------------------------------------------------ the rule, field by field (no server)
def _record_fields(coll: str) -> list[curated.Field]:
    return [f for f in curated.DATA[coll].fields if f.path.partition(".")[0] not in LOADERS_OWN]


@pytest.mark.parametrize("coll", ["materials", "tasks"])
def test_every_curated_field_of_the_records_is_checked(coll):
    """Each declared field of materials and tasks, given an object (a value of no kind), is set aside,
    and given null is kept: the class of the problem, not two fields."""
    for field in _record_fields(coll):
        key = "task_id" if coll == "tasks" else "material_id"
        raw: dict = {key: "k-1"} if coll == "materials" else {"task_id": "k-1", "input": {}, "output": {}}
        wrong = {"oops": 1} if field.path != key else 7  # the natural key must stay readable: an integer
        head, _, rest = field.path.partition(".")
        raw[head] = {rest: wrong} if rest else wrong
        (record,) = [r for r in read_records(_stream(raw), "x.jsonl")]
        doc = record_document(record, sha256="0" * 64, path="x.jsonl")
        said = CONTRACTS[coll].enforce(doc)
        assert said and said[0][0] and said[0][1].startswith(f"{field.path} "), (field.path, said)
        holder = doc[head] if rest else doc
        assert holder[rest or head] is None, field.path
        assert from_document(doc) == raw
        if field.path == key:
            continue  # a record without its key is refused (the parser's rule), null or not
        raw[head] = {rest: None} if rest else None
        (record,) = [r for r in read_records(_stream(raw), "x.jsonl")]
        assert CONTRACTS[coll].enforce(record_document(record, sha256="0" * 64, path="x.jsonl")) == [], field.path


def _stream(raw: dict) -> io.BytesIO:
    return io.BytesIO((json.dumps(raw) + "\n").encode())


@pytest.mark.parametrize("kind, value, stored, said", [
    ("float64", 2**53, 2**53, None),
    ("float64", 2**53 + 1, None, "is an integer beyond ±2^53, not exact as a double"),
    ("float64", float("nan"), "nan", None),  # NaN is a number (named by the value policy)
    ("float64", "1.5e3", 1500.0, "is a string; stored as the number 1500.0"),
    ("float64", "7", 7, "is a string; stored as the number 7"),
    ("float64", " 1.5", None, "is a string, not a number"),  # not a JSON number: blanks
    ("float64", "NaN", None, "is a string, not a number"),
    ("float64", "0x10", None, "is a string, not a number"),
    ("float64", True, None, "is a boolean, not a number"),
    ("float64", Decimal128("1e40"), None, "is an integer beyond 64 bits, not a number"),
    ("int64", "12", 12, "is a string; stored as the number 12"),
    ("int64", "1.5", None, "is a string, not an integer"),
    ("int64", 3.0, 3, "is a double; stored as the integer 3"),
    ("int64", 2.0**60, 2**60, "is a double; stored as the integer 1152921504606846976"),
    ("int64", 2.0**63, None, "is a number, not an integer"),  # past int64
    ("int64", "9223372036854775808", None, "is a string, not an integer"),  # past int64
    ("int64", False, None, "is a boolean, not an integer"),
    ("string", ObjectId("0123456789abcdef01234567"), None, "is an object id, not a string"),
    ("string", {"@module": "m", "@class": "C", "value": 3}, None, "is an object, not a string"),
    ("bool", 1, None, "is an integer, not a boolean"),
    ("list<string>", ["a", None], ["a", None], None),
    ("list<string>", [], [], None),
    ("date", datetime(2024, 1, 1), datetime(2024, 1, 1), None),
    ("date", 1712897936, None, "is an integer, not a date"),
])
def test_the_rule_of_each_kind(kind, value, stored, said):
    contract = CONTRACTS["materials"]
    field = next(f for f in _record_fields("materials") if f.kind == kind)
    doc = {"_ingest": {"added": []}, field.path: value}
    found = contract.enforce(doc)
    if said is None:
        assert found == [] and (doc[field.path] == stored or stored == "nan"), found
        return
    assert found == [(stored is None, f"{field.path} {shown(value)} {said}")]
    assert doc[field.path] == stored and type(doc[field.path]) is type(stored)
    restored = doc["_ingest"]["restore"]
    assert restored == [{"path": [field.path], "value": value}]
    if stored is None:
        assert doc["_ingest"]["set_aside"] == [{"path": field.path, "value": value, "reason": said}]


def test_a_field_the_loader_added_is_set_aside_without_a_restore_entry():
    """``energy_above_hull`` copied from a legacy ``e_above_hull``: named with the name the file holds,
    and nothing to restore (the legacy field is kept as written)."""
    raw = {"material_id": "mp-9", "e_above_hull": 2**60}
    (record,) = list(read_records(_stream(raw), "x.jsonl"))
    doc = record_document(record, sha256="0" * 64, path="x.jsonl")
    assert "energy_above_hull" in doc["_ingest"]["added"]
    said = CONTRACTS["materials"].enforce(doc)
    assert said == [(True, "energy_above_hull (from e_above_hull) 1152921504606846976 is an integer beyond ±2^53, "
                           "not exact as a double")]
    assert doc["energy_above_hull"] is None and "restore" not in doc["_ingest"]
    assert from_document(doc) == raw


def test_every_bundled_search_keeps_its_contracts():
    """Search documents are typed by their parser: every bundled search sample's (-m 10, and FASTA's tables
    in samples/pasta_tab, each by the format its content gives) keeps the contracts (the loader fails the
    file of one that does not, a defect of the parser)."""
    checked = 0
    for path in sorted(SAMPLES_DIR.rglob("*")):
        if not path.is_file() or not path.name.endswith(data_file_suffixes()):
            continue
        fmt = detect(path)
        if fmt.kind != "search":
            continue
        with open_binary(path) as handle:
            for index, query in enumerate(fmt.load()(handle, str(path), warn=lambda message: None), 1):
                search, hits = search_documents(query, sha256="0" * 64, path=str(path), query_index=index)
                assert CONTRACTS["searches"].findings(search) == [], path
                for hit in hits:
                    assert CONTRACTS["hits"].findings(hit) == [], path
                    checked += 1
    assert checked > 500
    hit["hsps"][0]["evalue"] = "1e-5"  # the contract would catch a parser that wrote a string
    (found,) = CONTRACTS["hits"].findings(hit)
    assert found.said() == 'hsps.0.evalue "1e-5" is a string, not a number'
