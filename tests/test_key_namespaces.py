"""One namespace per kind of key (issue 41): a typed record and a plain material never replace each other.

A typed key is ``<kind>:<id>`` (``entry:``, ``xas:``, ``phonon:``); a plain material id is written with
``%`` as ``%25`` and ``:`` as ``%3A`` (``ingest.parsers.materials.plain_key``), so no record's text
makes the two equal.  A database loaded under the old keys (a plain id was its own key) is moved
once, at its next load (``ingest.load.keys``).  Every load here is ``sci-ingest load`` as a user runs
it (a subprocess) against the suite's server; the results are read back with pymongo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import bson
import pytest

from ingest.load.keys import KEY_SCHEME, old_keys_held
from ingest.parsers.materials import plain_key
from ingest.store.catalog import VERSIONS
from ingest.store.mongo import compressed_bson
from ingest.store.retry import Retry

BIN = Path(sys.executable).parent / "sci-ingest"

ENTRY = {"@module": "pymatgen.entries.computed_entries", "@class": "ComputedStructureEntry",
         "entry_id": "mp-1211097", "energy": -10.5, "composition": {"Li": 2.0, "O": 1.0}, "correction": 0.0,
         "parameters": {}, "data": {}}
PHONON = {"material_id": "mp-23302", "ph_bs": {"bands": [[1.0, 2.0]]}, "ph_dos": {"densities": [0.1]}}
#: plain records whose material_id is the text of the typed keys above
PLAIN = [{"material_id": "entry:mp-1211097", "formula_pretty": "Li2O", "band_gap": 1.0},
         {"material_id": "phonon:mp-23302", "formula_pretty": "Ba", "band_gap": 2.0}]


@pytest.fixture()
def load(mongo_uri, db, tmp_path):
    """``load(*paths)``: ``sci-ingest load --json -q --workers 1`` into the test's database; the process."""
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*paths):
        return subprocess.run([str(BIN), "load", "--json", "-q", "--db", db.name, "--workers", "1", *map(str, paths)],
                              env=env, capture_output=True, text=True, timeout=600)

    return run


def write(path: Path, records: list[dict], mtime: float) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    os.utime(path, (mtime, mtime))
    return path


def kinds(db) -> dict[str, str]:
    """Every stored material: key -> its kind (``_ingest.type``)."""
    return {d["_id"]: d["_ingest"]["type"] for d in db.materials.find({}, {"_ingest.type": 1})}


def by_material_id(db, material_id: str) -> dict[str, str]:
    """The documents whose ``material_id`` field is ``material_id``: key -> kind."""
    return {d["_id"]: d["_ingest"]["type"] for d in db.materials.find({"material_id": material_id}, {"_ingest.type": 1})}


BOTH = {"entry:mp-1211097": "entry", "phonon:mp-23302": "phonon",
        "entry%3Amp-1211097": "summary", "phonon%3Amp-23302": "summary"}


@pytest.mark.parametrize("order", ["typed first", "plain first", "one file"])
def test_a_plain_record_whose_id_is_a_typed_key_keeps_both(db, tmp_path, load, order):
    if order == "one file":
        paths = [write(tmp_path / "all.jsonl", [ENTRY, PHONON, *PLAIN], 1_700_000_000)]
    else:
        typed = write(tmp_path / "typed.jsonl", [ENTRY, PHONON], 1_700_000_000)
        plain = write(tmp_path / "plain.jsonl", PLAIN, 1_700_000_100)  # newer: under one key it would win
        paths = [typed, plain] if order == "typed first" else [plain, typed]
    for path in paths:
        proc = load(path)
        assert proc.returncode == 0, proc.stderr
    assert kinds(db) == BOTH
    # each is found by what it is: the typed documents by their material, the plain ones by their id
    assert by_material_id(db, "entry:mp-1211097") == {"entry%3Amp-1211097": "summary"}
    assert by_material_id(db, "phonon:mp-23302") == {"phonon%3Amp-23302": "summary"}
    assert by_material_id(db, "mp-23302") == {"phonon:mp-23302": "phonon"}
    assert db.materials.find_one({"_id": "entry:mp-1211097"})["energy"] == -10.5
    assert db.materials.find_one({"_id": plain_key("entry:mp-1211097")})["band_gap"] == 1.0
    assert {v["_id"]["k"] for v in db[VERSIONS].find({"_id.c": "materials"})} == set(BOTH)


def test_plain_keys_are_their_ids_unless_they_hold_a_colon_or_a_percent_sign():
    assert plain_key("mp-149") == "mp-149"
    assert plain_key("entry:mp-1") == "entry%3Amp-1"
    # injective: an id that looks escaped is escaped again, so it never meets the escaped form of another
    assert plain_key("entry%3Amp-1") == "entry%253Amp-1"
    assert plain_key("a%b:c") == "a%25b%3Ac"
    assert ":" not in plain_key("x:y:z")


def _as_scheme_1(db) -> None:
    """Rewrite a loaded database as the old keys left it: each plain record and its versions under its
    own id's text, and where that was a typed key the plain record in the typed one's place (the newer
    holder's), no marker."""
    for doc in list(db.materials.find({"_ingest.type": "summary", "_id": {"$regex": "%"}})):
        old = doc["material_id"]
        db.materials.delete_one({"_id": doc["_id"]})
        doc["_id"] = doc["_ingest"]["key"] = old
        db.materials.replace_one({"_id": old}, doc, upsert=True)
    for version in list(db[VERSIONS].find({"_id.c": "materials", "_id.k": {"$regex": "%"}})):
        doc = bson.decode(zlib.decompress(version["z"]))
        old = doc["material_id"]
        doc["_id"] = doc["_ingest"]["key"] = old
        db[VERSIONS].delete_one({"_id": version["_id"]})
        db[VERSIONS].insert_one({"_id": {**version["_id"], "k": old}, "o": version["o"], "z": compressed_bson(doc)})
    db.ingest_meta.delete_one({"_id": "key_scheme"})


def test_a_database_with_the_old_keys_is_moved_once_at_its_next_load(db, tmp_path, load):
    typed = write(tmp_path / "typed.jsonl", [ENTRY, PHONON], 1_700_000_000)
    plain = write(tmp_path / "plain.jsonl", PLAIN, 1_700_000_100)
    for path in (typed, plain):
        assert load(path).returncode == 0
    _as_scheme_1(db)
    # what the old keys did: the plain records replaced the typed ones
    assert kinds(db) == {"entry:mp-1211097": "summary", "phonon:mp-23302": "summary"}
    assert old_keys_held(db, Retry(10)) == 4  # 2 records, 2 versions

    other = write(tmp_path / "other.jsonl", [{"material_id": "mp-77"}], 1_700_000_200)
    proc = load(other)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "key scheme" in line]
    assert len(notes) == 1 and "2 plain material id(s)" in notes[0], proc.stderr
    assert "'entry:mp-1211097' -> 'entry%3Amp-1211097'" in notes[0]
    assert kinds(db) == {**BOTH, "mp-77": "summary"}  # the typed records are back, beside the plain ones
    assert db.materials.find_one({"_id": "entry:mp-1211097"})["energy"] == -10.5
    assert old_keys_held(db, Retry(10)) == 0
    marker = db.ingest_meta.find_one({"_id": "key_scheme"})
    assert marker["version"] == KEY_SCHEME and marker["rekeyed"] == 2 and marker["files"] == [str(plain)]

    # moved once: the next load says nothing of it, and a reload keeps both kinds
    proc = load("--force", typed, plain)
    assert proc.returncode == 0, proc.stderr
    assert "key scheme" not in proc.stderr
    assert kinds(db) == {**BOTH, "mp-77": "summary"}
    # the files' contents leave with them: the old key held nothing the versions do not know
    write(plain, [{"material_id": "mp-78"}], 1_700_000_300)
    assert load(plain).returncode == 0
    assert kinds(db) == {"entry:mp-1211097": "entry", "phonon:mp-23302": "phonon", "mp-77": "summary",
                         "mp-78": "summary"}


def test_a_new_database_is_marked_without_being_searched(db, tmp_path, load):
    proc = load(write(tmp_path / "a.jsonl", [{"material_id": "a:b"}], 1_700_000_000))
    assert proc.returncode == 0, proc.stderr
    assert "key scheme" not in proc.stderr
    assert db.ingest_meta.find_one({"_id": "key_scheme"})["rekeyed"] == 0
    assert kinds(db) == {"a%3Ab": "summary"}
