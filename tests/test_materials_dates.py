"""Dates of materials and tasks as BSON dates (UTC), reversibly; the legacy names' aliases.

Pure checks of ``ingest.dates`` and ``ingest.documents.materials`` first, then through a
real server: record files loaded by the loader (``load_files``), the bundled samples (and
the real Materials Project documents in ``../shared/data/materials`` when present) with
no date left a string, and ``sci-ingest query`` / ``export`` as subprocesses.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bson
import pytest

from ingest.dates import format_iso, parse_iso
from ingest.documents.materials import (
    DATE_FIELDS,
    LEGACY_NAMES,
    from_document,
    legacy_names_markdown,
    record_document,
    to_document,
)
from ingest.parsers.materials import read_records
from ingest.query.compile import evaluate, to_filter
from ingest.query.language import parse
from ingest.store import curated

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples" / "materials"
BIN = Path(sys.executable).parent / "sci-ingest"
UTC = UTC


def _utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


#: Every form of a date the documents hold -> the UTC instant stored.
FORMS = {
    "2024-04-12T04:58:56Z": _utc(2024, 4, 12, 4, 58, 56),
    "2013-06-23T16:27:42.000Z": _utc(2013, 6, 23, 16, 27, 42),
    "2022-07-26T14:23:04.840+00:00": _utc(2022, 7, 26, 14, 23, 4, 840000),
    "2023-03-11T00:05:53.694000+00:00": _utc(2023, 3, 11, 0, 5, 53, 694000),
    "2025-04-03 19:05:50.135338+00:00": _utc(2025, 4, 3, 19, 5, 50, 135000),
    "2018-07-19T18:49:53.596+0000": _utc(2018, 7, 19, 18, 49, 53, 596000),
    "2024-01-01T00:30:00-05:30": _utc(2024, 1, 1, 6, 0),
    "2024-01-01T01:00:00+02": _utc(2023, 12, 31, 23, 0),
    "2024-04-12 04:58:56.734259": _utc(2024, 4, 12, 4, 58, 56, 734000),  # naive: UTC
    "2020-01-24 16:12:30": _utc(2020, 1, 24, 16, 12, 30),
    "2019-02-13T07:11:18.613218": _utc(2019, 2, 13, 7, 11, 18, 613000),
    "2019-02-13T07:11": _utc(2019, 2, 13, 7, 11),
    "2024-01-01T00:00:00.123456789Z": _utc(2024, 1, 1, 0, 0, 0, 123000),  # nanoseconds: truncated
    "2024-03-01": _utc(2024, 3, 1),
}
WRAPPERS = [
    ({"$date": 1550033642697}, _utc(2019, 2, 13, 4, 54, 2, 697000)),
    ({"$date": "2019-02-13T04:54:02.697Z"}, _utc(2019, 2, 13, 4, 54, 2, 697000)),
    ({"$date": {"$numberLong": "1550033642697"}}, _utc(2019, 2, 13, 4, 54, 2, 697000)),
    ({"@module": "datetime", "@class": "datetime", "string": "2021-02-10 04:45:05.154000"},
     _utc(2021, 2, 10, 4, 45, 5, 154000)),
]
BAD = ["yesterday", "", " 2024-01-01", "2024-13-01", "2024-02-30T00:00:00", "2024-01-01T24:00:00",
       "2016-12-31T23:59:60Z", "2024-01-01Z", "0001-01-01T00:00:00+01:00", "2024-01-01T00:00:00+25:00",
       "01/02/2024", "2024-01-01T00:00:00 UTC"]


# ------------------------------------------------------------------ pure: reading
@pytest.mark.parametrize("text, expected", list(FORMS.items()))
def test_each_iso_form_is_read_as_utc(text, expected):
    assert parse_iso(text) == expected


@pytest.mark.parametrize("text", BAD)
def test_what_is_not_a_date_is_refused_with_a_reason(text):
    with pytest.raises(ValueError, match=r"^(is|has) "):
        parse_iso(text)


def test_dates_are_written_back_as_iso_utc_milliseconds():
    assert format_iso(_utc(2024, 1, 31, 12, 0, 0, 123456)) == "2024-01-31T12:00:00.123Z"
    assert format_iso(datetime(2024, 1, 31, 12)) == "2024-01-31T12:00:00.000Z"  # naive: UTC
    assert format_iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000Z"


def _record(value, i: int = 1) -> dict:
    """A task with ``value`` in every kind of place a date is found."""
    return {"task_id": f"mp-{i}", "input": {}, "output": {}, "completed_at": value, "last_updated": value,
            "calcs_reversed": [{"completed_at": value, "task": {"name": "relax1"}}, {"completed_at": value}],
            "builder_meta": {"build_date": value}, "origins": [{"name": "structure", "last_updated": value}],
            "transformations": {"last_modified": value}, "entry": {"data": {"last_updated": value}},
            "snl": {"about": {"created_at": value}}, "_bt": value, "note": "2024-01-01"}


_DATED_PATHS = [("completed_at",), ("last_updated",), ("calcs_reversed", 0, "completed_at"),
                ("calcs_reversed", 1, "completed_at"), ("builder_meta", "build_date"),
                ("origins", 0, "last_updated"), ("transformations", "last_modified"),
                ("entry", "data", "last_updated"), ("snl", "about", "created_at"), ("_bt",)]


def _at(doc, path):
    for step in path:
        doc = doc[step]
    return doc


@pytest.mark.parametrize("value, expected", list(FORMS.items()) + WRAPPERS)
def test_every_date_field_becomes_a_utc_date_and_comes_back_exactly(value, expected):
    original = _record(value)
    warnings: list[str] = []
    doc = to_document(original, warn=warnings.append)
    assert warnings == []
    for path in _DATED_PATHS:
        assert _at(doc, path) == expected, path
    assert doc["note"] == "2024-01-01"  # not a date field: a string stays a string
    assert doc["calcs_reversed"][0]["task"] == {"name": "relax1"}
    back = from_document(doc)
    assert back == original and list(back) == list(original)
    stored = bson.decode(bson.encode(doc))  # what a server gives back: naive UTC datetimes
    assert stored["completed_at"] == expected.replace(tzinfo=None)
    back = from_document(stored)
    assert back == original and json.dumps(back) == json.dumps(original)  # key order and types too


@pytest.mark.parametrize("value", BAD + [5, 2.5, True, ["2024-01-01"], {"when": "2024-01-01"}, {"$date": "soon"},
                                         {"@module": "datetime", "@class": "datetime", "string": "soon"}])
def test_a_value_that_is_not_a_date_is_kept_and_warned_about(value):
    original = {"material_id": "mp-1", "last_updated": value, "origins": [{"last_updated": value}, {}]}
    warnings: list[str] = []
    doc = to_document(original, warn=warnings.append)
    shown = json.dumps(value, ensure_ascii=False)
    assert [w.split(": ")[0] for w in warnings] == ["last_updated", "origins.0.last_updated"], warnings
    assert all(w.startswith(f"{w.split(': ')[0]}: {shown} ") for w in warnings), warnings
    assert not isinstance(doc["last_updated"], datetime)
    assert from_document(bson.decode(bson.encode(doc))) == original


def test_null_and_missing_dates_are_not_warned_about():
    warnings: list[str] = []
    doc = to_document({"material_id": "mp-1", "last_updated": None, "origins": [{"name": "x"}]}, warn=warnings.append)
    assert warnings == [] and doc["last_updated"] is None


def test_a_date_wrapper_elsewhere_is_converted_a_monty_datetime_only_in_a_date_field():
    monty = {"@module": "datetime", "@class": "datetime", "string": "2021-02-10 04:45:05.154000"}
    original = {"material_id": "mp-1", "when": {"$date": 0}, "other": monty}
    doc = to_document(original)
    assert doc["when"] == _utc(1970, 1, 1) and doc["other"] == monty
    assert from_document(doc) == original


# ------------------------------------------------------------------ pure: legacy names
#: One example per row of LEGACY_NAMES: (record, the value its current name must get).
LEGACY_EXAMPLES = {
    "task_id": ({"task_id": "mp-20351", "pretty_formula": "InP"}, "mp-20351"),
    "pretty_formula": ({"material_id": "mp-1", "pretty_formula": "Fe2O3"}, "Fe2O3"),
    "anonymous_formula": ({"material_id": "mp-1", "anonymous_formula": {"A": 3.0, "B": 2.0}}, "A2B3"),
    "unit_cell_formula": ({"material_id": "mp-1", "unit_cell_formula": {"Fe": 4.0, "O": 6.0}},
                          {"Fe": 4.0, "O": 6.0}),
    "e_above_hull": ({"material_id": "mp-1", "e_above_hull": 0.012}, 0.012),
    "e_form_per_atom": ({"material_id": "mp-1", "e_form_per_atom": -1.5}, -1.5),
    "final_energy_per_atom": ({"material_id": "mp-1", "final_energy_per_atom": -4.29}, -4.29),
    "band_gap.search_gap.band_gap": ({"material_id": "mp-1", "band_gap": {"search_gap": {"band_gap": 0.47,
                                                                                          "is_direct": True}}}, 0.47),
    "band_gap.search_gap.is_direct": ({"material_id": "mp-1", "band_gap": {"search_gap": {"band_gap": 0.47,
                                                                                           "is_direct": True}}}, True),
    "spacegroup": ({"material_id": "mp-1", "spacegroup": {"crystal_system": "cubic", "symbol": "F-43m", "number": 216,
                                                          "point_group": "-43m", "hall": "F -4 2 3"}},
                   {"crystal_system": "cubic", "symbol": "F-43m", "number": 216, "point_group": "-43m"}),
}


def test_the_docs_table_of_legacy_names_is_the_declaration():
    text = (REPO / "docs" / "data-model.md").read_text()
    block = re.search(r"<!-- legacy-names:begin -->\n(.*?)\n<!-- legacy-names:end -->", text, re.S)
    assert block, "docs/data-model.md lacks the legacy-names table"
    assert block.group(1).strip() == legacy_names_markdown().strip()


@pytest.mark.parametrize("legacy, current, kind, how", LEGACY_NAMES, ids=[row[0] for row in LEGACY_NAMES])
def test_each_legacy_name_gives_its_current_name(legacy, current, kind, how):
    assert legacy in LEGACY_EXAMPLES, f"add an example of {legacy} to LEGACY_EXAMPLES"
    original, expected = LEGACY_EXAMPLES[legacy]
    doc = to_document(original)
    assert doc[current] == expected
    if current == "band_gap":  # the one collision: the legacy object is displaced, not added to
        assert doc["_ingest"]["displaced"]["band_gap"] == original["band_gap"]
    else:
        assert current in doc["_ingest"]["added"]
    assert from_document(doc) == original
    if current != "band_gap":  # a current name the record has already is never replaced
        assert to_document({**original, current: "theirs"})[current] == "theirs"


def test_anonymous_formulas_are_written_as_pymatgen_writes_them():
    cases = {"A": {"A": 1.0}, "AB": {"A": 1.0, "B": 1.0}, "AB2": {"A": 2.0, "B": 4.0}, "AB2C4": {"C": 4, "A": 1, "B": 2},
             "A0.5B": {"A": 0.5, "B": 1.0}}
    for expected, value in cases.items():
        assert to_document({"material_id": "mp-1", "anonymous_formula": value})["formula_anonymous"] == expected
    for bad in ({}, {"a": 1.0}, {"A": 0}, {"A": "1"}, {"AB": 1.0}, [1], 3):
        assert "formula_anonymous" not in to_document({"material_id": "mp-1", "anonymous_formula": bad})


# ------------------------------------------------------------------ pure: every real and sample document
def _date_values(value, path=""):
    """(dotted path without list indexes, value) of every field named in DATE_FIELDS."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if key in DATE_FIELDS:
                yield here, item
            yield from _date_values(item, here)
    elif isinstance(value, list):
        for item in value:
            yield from _date_values(item, path)


def _jsonl(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _check_round_trip(paths) -> dict[str, int]:
    dated: dict[str, int] = {}
    for path in paths:
        with open(path, "rb") as fh:
            items = list(read_records(gzip.open(fh) if path.suffix == ".gz" else fh, str(path)))
        for original, item in zip(_jsonl(path), items):
            warnings: list[str] = []
            doc = to_document(item.raw, warn=warnings.append)
            assert warnings == [], f"{path.name}:{item.line}: {warnings}"
            for where, value in _date_values(doc):
                if value is not None:
                    assert isinstance(value, datetime), f"{path.name}:{item.line}: {where} = {value!r}"
                    dated[where] = dated.get(where, 0) + 1
            back = from_document(bson.decode(bson.encode(doc)))
            assert back == original and json.dumps(back) == json.dumps(original), f"{path.name}:{item.line}"
    return dated


def test_every_sample_date_is_a_date_and_every_sample_comes_back():
    dated = _check_round_trip(sorted(SAMPLES.glob("*.jsonl.gz")))
    assert dated == {"last_updated": 3000 + 6040, "completed_at": 6040}


def test_every_real_date_is_a_date_and_every_real_document_comes_back(shared_materials):
    dated = _check_round_trip(sorted(shared_materials.glob("*.jsonl")))
    for where in ("last_updated", "completed_at", "created_at", "_bt", "calcs_reversed.completed_at",
                  "data.last_updated", "entry.data.last_updated", "transformations.last_modified",
                  "snl.about.created_at", "xrd.Cu.created_at", "elasticity_third_order.calculations.completed_at"):
        assert dated.get(where), (where, dated)


def test_real_legacy_materials_get_the_current_names(shared_materials):
    for original in _jsonl(shared_materials / "materials_legacy_db.jsonl"):
        doc = to_document(original)
        assert doc["energy_above_hull"] == original["e_above_hull"]
        assert doc["energy_per_atom"] == original["final_energy_per_atom"]
        assert doc["formula_anonymous"] == original["formula_anonymous"]  # theirs, kept
        assert _anonymous_of(original["anonymous_formula"]) == original["formula_anonymous"]  # and ours agrees


def _anonymous_of(value) -> str:
    return to_document({"material_id": "mp-1", "anonymous_formula": value})["formula_anonymous"]


# ------------------------------------------------------------------ the reference semantics of a date literal
def test_a_date_literal_compiles_to_a_utc_datetime_and_needs_a_date():
    from ingest.query import QueryError

    tasks = curated.get("tasks")
    assert to_filter(parse('completed_at >= "2024-01-01"', tasks)) == {"completed_at": {"$gte": _utc(2024, 1, 1)}}
    assert to_filter(parse('last_updated between "2024-01-01T02:00:00+02:00" and "2024-02-01"', tasks)) == {
        "last_updated": {"$gte": _utc(2024, 1, 1), "$lte": _utc(2024, 2, 1)}}
    assert to_filter(parse('completed_at in ["2024-01-01", null]', tasks)) == {
        "completed_at": {"$in": [_utc(2024, 1, 1), None]}}
    for bad, column, words in (('completed_at > 2024', 16, "is a number"),
                               ('completed_at > "yesterday"', 16, "is not an ISO 8601"),
                               ('completed_at has "2024-01-01"', 1, "has is for list fields")):
        with pytest.raises(QueryError) as exc:
            parse(bad, tasks)
        assert exc.value.column == column and words in str(exc.value), str(exc.value)


# ------------------------------------------------------------------ through the loader
def test_a_record_file_with_every_date_form_stores_bson_dates(db, load_files, tmp_path):
    values = list(FORMS.items()) + WRAPPERS
    originals = [_record(value, i) for i, (value, _) in enumerate(values, 1)]
    path = tmp_path / "dated.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in originals))
    summary = load_files([path])
    [outcome] = summary.files
    assert outcome.status == "loaded" and outcome.warnings == [], (outcome.reason, outcome.warnings)
    for i, (original, (_, expected)) in enumerate(zip(originals, values), 1):
        stored = db.tasks.find_one({"_id": f"mp-{i}"})
        for where in _DATED_PATHS:
            assert _at(stored, where) == expected.replace(tzinfo=None), (i, where)  # pymongo: naive UTC
        assert from_document(stored) == original
    for where in ("completed_at", "last_updated", "calcs_reversed.completed_at", "builder_meta.build_date",
                  "origins.last_updated", "entry.data.last_updated", "_bt"):
        assert db.tasks.count_documents({where: {"$type": "date"}}) == len(values), where
        assert db.tasks.count_documents({where: {"$type": "string"}}) == 0, where
    # a range query on the server finds exactly the instants after the bound, whatever form they were written in
    bound = _utc(2020, 1, 1)
    assert db.tasks.count_documents({"completed_at": {"$gte": bound}}) == sum(v >= bound for _, v in values)


def test_an_unreadable_date_is_kept_as_found_and_named_in_the_warnings(db, load_files, tmp_path):
    """Kept as found where no contract names it (``origins.0.last_updated``); under a curated date field
    (``last_updated``, ``completed_at``) it is set aside as well (ingest/load/contracts.py): the field
    holds null, the value is in ``_ingest.set_aside``, and the record still comes back whole."""
    good = {"material_id": "mp-1", "last_updated": "2024-01-01 00:00:00"}
    bad = {"material_id": "mp-2", "last_updated": "yesterday", "origins": [{"last_updated": "2024-13-01"}]}
    task = {"task_id": "mp-3", "input": {}, "output": {}, "completed_at": 1712897936,
            "calcs_reversed": [{"completed_at": "2024-04-12 04:58:56"}, {"completed_at": {"$date": "soon"}}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (good, bad, task)))
    [outcome] = load_files([path]).files
    assert outcome.status == "loaded", outcome.reason
    key = str(path.resolve())
    assert outcome.warnings == [
        f'{key}:2: last_updated: "yesterday" is not an ISO 8601 date or date-time',
        f'{key}:2: origins.0.last_updated: "2024-13-01" is not a valid date-time (month must be in 1..12)',
        f"{key}:3: completed_at: 1712897936 is a number, not a date",
        f'{key}:3: calcs_reversed.1.completed_at: {{"$date": "soon"}} is not a date this reads ($date: milliseconds, '
        "ISO 8601 or $numberLong)",
    ], outcome.warnings
    assert db.ingest_files.find_one({"_id": key})["warnings"] == outcome.warnings
    assert outcome.set_aside == [f'{key}:2: last_updated "yesterday" is a string, not a date',
                                 f"{key}:3: completed_at 1712897936 is an integer, not a date"], outcome.set_aside
    stored = db.materials.find_one({"_id": "mp-2"})
    assert stored["last_updated"] is None and stored["origins"][0]["last_updated"] == "2024-13-01"
    assert stored["_ingest"]["set_aside"] == [{"path": "last_updated", "value": "yesterday",
                                               "reason": "is a string, not a date"}]
    assert from_document(stored) == bad and from_document(db.tasks.find_one({"_id": "mp-3"})) == task
    assert db.materials.find_one({"_id": "mp-1"})["last_updated"] == datetime(2024, 1, 1)
    # the query language compares dates with dates: the string is not "after" anything
    assert db.materials.count_documents(to_filter(parse('last_updated >= "2000-01-01"', curated.get("materials")))) == 1


def test_a_file_built_twice_warns_once(db, load_files, tmp_path, monkeypatch):
    """A file too large to keep its checked documents is built again to be written: its warnings
    come from the checking pass alone."""
    monkeypatch.setattr("ingest.load.batch.SMALL_FILE_BYTES", 0)  # not a small file: the per-file path
    monkeypatch.setattr("ingest.load.content.KEEP_CHECKED_DOCUMENTS", 1)  # ... whose pass 2 builds them again
    import ingest.load.content as content

    built = []
    monkeypatch.setattr(content, "record_document", lambda *a, **k: built.append(1) or record_document(*a, **k))
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"material_id": f"mp-{i}", "last_updated": "soon" if i % 2 else "2024-01-01"})
                            + "\n" for i in range(6)))
    [outcome] = load_files([path]).files
    assert outcome.status == "loaded", outcome.reason
    assert len(built) == 12  # checked, then built again
    assert [w.split(": ")[0] for w in outcome.warnings] == [f"{path.resolve()}:{n}" for n in (2, 4, 6)]
    assert db.materials.count_documents({"last_updated": {"$type": "date"}}) == 3


def test_the_warnings_of_a_file_are_capped(db, load_files, tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"material_id": f"mp-{i}", "last_updated": "soon"}) + "\n" for i in range(60)))
    [outcome] = load_files([path]).files
    assert outcome.status == "loaded" and len(outcome.warnings) == 50
    assert outcome.warnings[49].startswith(f"{path.resolve()}:50: last_updated:")
    assert getattr(outcome, "warnings_total", 60) == 60
    assert len(outcome.set_aside) == 50 and outcome.set_aside_total == 60  # a curated date field: set aside too
    assert db.materials.count_documents({"_ingest.set_aside.value": "soon"}) == 60


# ------------------------------------------------------------------ the samples (and the real documents) loaded
@pytest.fixture(scope="module")
def loaded(mongo_uri, mongo_client):
    """The bundled material samples, loaded once."""
    from ingest.load import LoadOptions, load_paths

    name = f"t_dates_{uuid.uuid4().hex[:8]}"
    summary = load_paths(mongo_uri, name, [str(SAMPLES)], "test-run", LoadOptions(workers=1, progress=False),
                         server_kind="test")
    assert not [f for f in summary.files if f.status == "failed"], [f.line for f in summary.files]
    yield mongo_client[name], summary
    mongo_client.drop_database(name)


def _date_paths(paths) -> dict[str, set[str]]:
    """collection -> the dotted paths (list indexes left out: MongoDB looks into lists) of every date field."""
    found: dict[str, set[str]] = {"materials": set(), "tasks": set()}
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            for item in read_records(fh, str(path)):
                coll = "materials" if item.kind == "material" else "tasks"
                found[coll].update(where for where, _ in _date_values(item.raw))
    return found


def _no_date_is_a_string(db, summary, files) -> dict[str, set[str]]:
    """Every date path of ``files``' records holds dates in ``db``, no string (the load warned of none: its
    only warnings are emmet's enumerations under string fields, read as their values by the contracts)."""
    warned = [w for f in summary.files for w in f.warnings if " is a serialised enumeration; stored as " not in w]
    assert warned == [], warned[:5]
    paths = _date_paths(files)
    for coll, wheres in paths.items():
        # a count is a pass over the collection: one for the strings of every path (the message
        # names the paths), and one read of every path's values for the dates (a find_one per path
        # took 0.8 s each on the embedded server, 21 of them: limit 1 does not end its scan early)
        def strings(where: str, coll=coll) -> int:
            return db[coll].count_documents({where: {"$type": "string"}})

        if wheres:
            any_string = {"$or": [{where: {"$type": "string"}} for where in sorted(wheres)]}
            assert db[coll].count_documents(any_string) == 0, (coll, [w for w in sorted(wheres) if strings(w)])
        dated = set()
        for doc in db[coll].find({}, {where: 1 for where in wheres}):
            dated.update(where for where, value in _date_values(doc) if isinstance(value, datetime))
        assert dated >= wheres, (coll, sorted(wheres - dated))
    return paths


def test_no_date_of_the_loaded_samples_is_a_string(loaded):
    db, summary = loaded
    paths = _no_date_is_a_string(db, summary, sorted(SAMPLES.glob("*.jsonl.gz")))
    assert paths == {"materials": {"last_updated"}, "tasks": {"last_updated", "completed_at"}}
    # the figures: every one of them a date now
    sample_materials = {"_source.path": str((SAMPLES / "materials.jsonl.gz").resolve())}
    assert db.materials.count_documents({**sample_materials, "last_updated": {"$type": "date"}}) == 3000
    sample_tasks = {"_source.path": str((SAMPLES / "tasks.jsonl.gz").resolve())}
    assert db.tasks.count_documents({**sample_tasks, "last_updated": {"$type": "date"}}) == 6040
    assert db.tasks.count_documents({**sample_tasks, "completed_at": {"$type": "date"}}) == 6040


@pytest.mark.xdist_group("real_materials")
def test_no_date_of_the_loaded_real_documents_is_a_string(real_materials_loaded):
    db, files, summary = real_materials_loaded  # loaded once for the tests that read it (conftest.py)
    assert summary.count("loaded") == len(files), [f.line for f in summary.files if f.status != "loaded"]
    paths = _no_date_is_a_string(db, summary, files)
    assert {"last_updated", "created_at", "_bt", "data.last_updated", "snl.about.created_at"} <= paths["materials"]
    assert {"last_updated", "completed_at", "calcs_reversed.completed_at", "entry.data.last_updated",
            "transformations.last_modified"} <= paths["tasks"]


def test_legacy_materials_have_the_current_names_in_the_database(loaded):
    db, _ = loaded
    legacy = list(db.materials.find({"_ingest.type": "legacy_material", "pretty_formula": {"$exists": True}}))
    assert len(legacy) == 103
    for doc in legacy:
        original = from_document(doc)
        assert doc["energy_above_hull"] == original["e_above_hull"], doc["_id"]
        assert doc["energy_per_atom"] == original["final_energy_per_atom"], doc["_id"]
        assert doc["formula_anonymous"] == original.get("formula_anonymous", _anonymous_of(original["anonymous_formula"]))
        assert isinstance(doc["last_updated"], datetime)
    # and the curated fields find them: none of them is missing energy_per_atom / formula_anonymous
    assert db.materials.count_documents({"_ingest.type": "legacy_material", "pretty_formula": {"$exists": True},
                                         "$or": [{"energy_per_atom": None}, {"energy_above_hull": None},
                                                 {"formula_anonymous": None}]}) == 0


def _cli(mongo_uri, db_name, *argv, cwd):
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(cwd)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([str(BIN), *argv, "--db", db_name], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180)


def _sample_dates(name: str, field: str) -> dict[str, datetime]:
    """natural key -> the instant of ``field`` of each sample record."""
    out = {}
    for raw in _jsonl(SAMPLES / name):
        value = raw.get(field)
        key = raw["task_id"] if name.startswith("tasks") else raw.get("material_id") or raw["task_id"]
        if isinstance(value, dict):
            out[key] = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value["$date"])
        elif isinstance(value, str):
            out[key] = parse_iso(value)
    return out


def test_query_materials_by_last_updated(mongo_uri, loaded, tmp_path):
    db, _ = loaded
    dates = _sample_dates("materials.jsonl.gz", "last_updated")
    bound = sorted(dates.values())[len(dates) // 2]  # half of them, the $date ones among them
    text = format_iso(bound)
    proc = _cli(mongo_uri, db.name, "query", "materials", "--where",
                f'last_updated >= "{text}" and source_path == "{(SAMPLES / "materials.jsonl.gz").resolve()}"',
                "--fields", "material_id,last_updated", "--format", "jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    expected = {k for k, v in dates.items() if v >= bound}
    assert {r["material_id"] for r in rows} == expected and len(expected) >= 1500
    assert all(parse_iso(r["last_updated"]) == dates[r["material_id"]] for r in rows)
    assert all(r["last_updated"].endswith("Z") for r in rows)
    bad = _cli(mongo_uri, db.name, "query", "materials", "--where", 'last_updated >= "last week"', cwd=tmp_path)
    assert bad.returncode == 64 and "last_updated holds dates" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_export_tasks_to_parquet_has_timestamp_columns(mongo_uri, loaded, tmp_path):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    db, _ = loaded
    sample = json.dumps({"_source.path": str((SAMPLES / "tasks.jsonl.gz").resolve())})
    proc = _cli(mongo_uri, db.name, "export", "tasks", "--filter", sample, "--format", "parquet", "--out",
                "tasks.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    schema = pq.read_schema(tmp_path / "tasks.parquet")
    assert schema.field("completed_at").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("last_updated").type == pa.timestamp("ms", tz="UTC")
    frame = pd.read_parquet(tmp_path / "tasks.parquet")
    assert len(frame) == 6040
    assert str(frame["completed_at"].dtype) == "datetime64[ms, UTC]"
    completed = _sample_dates("tasks.jsonl.gz", "completed_at")
    updated = _sample_dates("tasks.jsonl.gz", "last_updated")
    rows = frame.set_index("task_id")
    for task_id in random.Random(7).sample(sorted(completed), 200):
        assert rows.at[task_id, "completed_at"].to_pydatetime() == completed[task_id]
        assert rows.at[task_id, "last_updated"].to_pydatetime() == updated[task_id]
    assert frame["completed_at"].notna().all() and frame["last_updated"].notna().all()


def test_the_server_selects_dates_as_the_reference_semantics_do(mongo_client):
    """Dates, naive strings, lists of dates, missing and null: the server and ``evaluate`` agree."""
    from ingest.store.curated import Curated, Field

    coll_def = Curated(name="d", one_per="test document", fields=(Field("t", "t", "date"), Field("u", "a.u", "date")))
    r = random.Random(20261126)
    instants = [_utc(2024, 1, 1), _utc(2024, 1, 1, 0, 0, 0, 1000), _utc(2023, 12, 31, 23, 59, 59, 999000),
                _utc(1969, 12, 31), _utc(2030, 6, 1)]
    choices = instants + ["2024-01-01", None, 5, [_utc(2024, 1, 1), _utc(2022, 1, 1)], []]
    docs = []
    for i in range(300):
        doc = {"_id": i}
        if r.random() < 0.85:
            doc["t"] = r.choice(choices)
        if r.random() < 0.7:
            doc["a"] = r.choice([{"u": r.choice(choices)}, [{"u": r.choice(instants)}, {"u": r.choice(choices)}]])
        docs.append(doc)
    name = f"t_qdate_{uuid.uuid4().hex[:8]}"
    coll = mongo_client[name]["d"]
    try:
        coll.insert_many(docs)
        stored = list(coll.find())
        for text in ['t >= "2024-01-01"', 't > "2024-01-01"', 't < "2024-01-01T00:00:00.001Z"', 't == "2024-01-01"',
                     't != "2024-01-01"', 't between "1970-01-01" and "2024-01-01T01:00:00+01:00"',
                     't in ["2030-06-01", null]', 't not in ["2024-01-01"]', 'u <= "2024-01-01" or t missing',
                     'not u > "2023-06-01"', 't == null']:
            node = parse(text, coll_def)
            expected = {d["_id"] for d in stored if evaluate(node, d)}
            got = {d["_id"] for d in coll.find(to_filter(node), {"_id": 1})}
            assert got == expected, (text, sorted(got ^ expected)[:5])
    finally:
        mongo_client.drop_database(name)
