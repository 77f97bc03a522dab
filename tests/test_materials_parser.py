"""ingest.parsers.materials (reading, classification) and ingest.documents.materials (the
stored form and its inverse), and the generated samples.  Pure: no database (the BSON round
trip uses ``bson`` only)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bson
import pytest
from bson.decimal128 import Decimal128
from bson.objectid import ObjectId
from hypothesis import HealthCheck, given, settings, strategies as st
from jsonschema import Draft202012Validator

from ingest import parsers
from ingest.documents.materials import ELEMENTS, from_document, record_document, to_document
from ingest.errors import InputError, ParseError
from ingest.parsers import materials as M
from ingest.parsers.materials import Record, classify, read_records

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples" / "materials"
SCHEMAS = REPO / "schemas"

# file -> the (kind, doc_type) every record of it must get
EXPECTED_TYPES = {
    "computed_structure_entry.jsonl": ("material", "entry"),
    "computed_structure_entry_with_hull.jsonl": ("material", "entry"),
    "materials_legacy_db.jsonl": ("material", "legacy_material"),
    "materials_magnetism_partial.jsonl": ("material", "legacy_material"),
    "phonon_doc.jsonl": ("material", "phonon"),
    "summary_api_partial.jsonl": ("material", "summary"),
    "task_qchem_molecule.jsonl": ("task", "qchem_task"),
    "task_vasp.jsonl": ("task", "vasp_task"),
    "task_vasp_legacy.jsonl": ("task", "vasp_task"),
    "xas_doc.jsonl": ("material", "xas"),
}


def _read(data: bytes, source: str = "mem") -> list:
    return list(read_records(io.BytesIO(data), source))


# --------------------------------------------------------------------------- real data
def _manifest_counts(directory: Path) -> Counter:
    rows = (directory / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
    header = rows[0].split("\t")
    counts = Counter()
    for row in rows[1:]:
        fields = dict(zip(header, row.split("\t")))
        counts[fields["jsonl_file"]] += int(fields["record_count"])
    return counts


def _expected_key(original: dict, kind: str, doc_type: str) -> str:
    if kind == "task":
        return str(original["task_id"])
    return {
        "entry": lambda: "entry:" + original["entry_id"],
        "xas": lambda: "xas:" + original["spectrum_id"],
        "phonon": lambda: "phonon:" + original["material_id"],
        "summary": lambda: original["material_id"],
        "legacy_material": lambda: original["task_id"],
    }[doc_type]()


_SCALARS = frozenset({float, int, str, bool, type(None)})


def _unstorable_keys(value, found=None) -> list[str]:
    """Keys MongoDB refuses or cannot query: leading '$', '.', NUL."""
    found = [] if found is None else found
    if type(value) is dict:
        for k, v in value.items():
            if k[:1] == "$" or "." in k or "\x00" in k:
                found.append(k)
            if type(v) is dict or type(v) is list:
                _unstorable_keys(v, found)
    elif not _SCALARS.issuperset(map(type, value)):  # a list holding containers
        for v in value:
            if type(v) is dict or type(v) is list:
                _unstorable_keys(v, found)
    return found


def _check_entry_aliases(original: dict, doc: dict) -> None:
    elements = sorted(el for el, amount in original["composition"].items() if amount > 0)
    assert doc["elements"] == elements and doc["nelements"] == len(elements)
    assert doc["chemsys"] == "-".join(elements)
    assert doc["nsites"] == len(original["structure"]["sites"])
    assert doc["material_id"] == original["data"].get("material_id", original["entry_id"])
    if "e_above_hull" in original:
        assert doc["energy_above_hull"] == original["e_above_hull"]
        assert doc["formation_energy_per_atom"] == original["e_form_per_atom"]


def test_real_data_files_are_all_known(shared_materials):
    assert {p.name for p in shared_materials.glob("*.jsonl")} == set(EXPECTED_TYPES)
    assert set(_manifest_counts(shared_materials)) == set(EXPECTED_TYPES)


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_real_file(shared_materials, name):
    """Every record of a real file: read, classified, keyed, round-tripped (pure and through BSON)."""
    path = shared_materials / name
    with open(path, "rb") as fh:
        items = list(read_records(fh, str(path)))
    originals = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(items) == len(originals) == _manifest_counts(shared_materials)[name]
    kind, doc_type = EXPECTED_TYPES[name]
    dotted = 0
    for original, item in zip(originals, items):
        where = f"{name}:{getattr(item, 'line', '?')}"
        assert isinstance(item, Record), f"{where}: {item}"
        assert (item.kind, item.doc_type) == (kind, doc_type), where
        assert item.key == _expected_key(original, kind, doc_type), where
        assert classify(original) == (item.kind, item.doc_type, item.key)
        doc = to_document(item.raw)
        assert doc["_ingest"]["key"] == item.key and doc["_ingest"]["kind"] == item.kind
        if kind == "material":
            assert isinstance(doc.get("material_id"), str) and doc["material_id"], where
        if doc_type == "entry":
            _check_entry_aliases(original, doc)
        # the stored form: storable, and the original comes back exactly, key order included
        assert "_id" not in doc and _unstorable_keys(doc) == [], where
        back = from_document(doc)
        assert back == original and list(back) == list(original), where
        stored = bson.decode(bson.encode(doc))  # encode raises on anything BSON cannot hold
        assert from_document(stored) == original, where
        if doc_type == "qchem_task":
            dotted_keys = [k for k in _all_keys(original) if "." in k]
            stored_keys = set(_all_keys(doc)) if dotted_keys else set()
            for key in dotted_keys:
                assert key.replace(".", "%2E") in stored_keys, where
                dotted += 1
    if doc_type == "qchem_task":
        assert dotted, "expected Q-Chem records with dotted keys (file names) in the real data"


def _all_keys(value, found=None) -> list[str]:
    found = [] if found is None else found
    if type(value) is dict:
        found.extend(value)
        for v in value.values():
            if type(v) is dict or type(v) is list:
                _all_keys(v, found)
    elif not _SCALARS.issuperset(map(type, value)):
        for v in value:
            if type(v) is dict or type(v) is list:
                _all_keys(v, found)
    return found


def test_legacy_material_aliases_use_the_file_values(shared_materials):
    path = shared_materials / "materials_legacy_db.jsonl"
    originals = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    with open(path, "rb") as fh:
        records = list(read_records(fh, str(path)))
    assert [o["task_id"] for o in originals] == ["mp-20351", "mp-19"]
    for original, record in zip(originals, records):
        doc = to_document(record.raw)
        assert doc["material_id"] == original["task_id"]
        assert doc["formula_pretty"] == original["pretty_formula"]
        assert doc["energy_above_hull"] == original["e_above_hull"]
        assert doc["band_gap"] == original["band_gap"]["search_gap"]["band_gap"]
        assert isinstance(doc["band_gap"], float)
        assert doc["is_gap_direct"] is original["band_gap"]["search_gap"]["is_direct"]
        assert doc["_ingest"]["displaced"]["band_gap"] == original["band_gap"]
        assert doc["symmetry"]["number"] == original["spacegroup"]["number"]
        assert doc["symmetry"]["crystal_system"] == original["spacegroup"]["crystal_system"]
        assert doc["composition"] == original["unit_cell_formula"]
        # present in the original: kept as they are, not re-derived
        assert doc["formation_energy_per_atom"] == original["formation_energy_per_atom"]
        assert doc["elements"] == original["elements"] and doc["chemsys"] == original["chemsys"]
        assert doc["formula_anonymous"] == original["formula_anonymous"]
        assert doc["energy_per_atom"] == original["final_energy_per_atom"]
        assert set(doc["_ingest"]["added"]) == {
            "material_id", "formula_pretty", "energy_above_hull", "energy_per_atom", "is_gap_direct", "symmetry",
            "composition"}
        # every original field is still there under its own name (band_gap: the displaced copy)
        assert set(original) - {"_id"} <= set(doc)
        # extended JSON became BSON types
        assert doc["_ingest"]["source_id"] == ObjectId(original["_id"]["$oid"])
        ms = original["last_updated"]["$date"]
        assert doc["last_updated"] == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


# --------------------------------------------------------------------------- bad input
GOOD = [{"material_id": f"mp-{i}", "formula_pretty": "Fe2O3", "elements": ["Fe", "O"]} for i in range(1, 6)]


def test_jsonl_with_one_malformed_line():
    lines = [json.dumps(d) for d in GOOD]
    lines.insert(2, '{"material_id": "mp-99", "band_gap": 1.2,, }')  # line 3
    items = _read(("\n".join(lines) + "\n").encode(), "bad.jsonl")
    errors = [i for i in items if isinstance(i, ParseError)]
    assert len(errors) == 1
    assert errors[0].line == 3 and errors[0].source == "bad.jsonl" and "invalid JSON" in errors[0].reason
    records = [i for i in items if isinstance(i, Record)]
    assert [r.key for r in records] == [d["material_id"] for d in GOOD]
    assert [r.line for r in records] == [1, 2, 4, 5, 6]


def test_jsonl_whose_first_line_is_bad():
    lines = ['{"material_id": "mp-0", "x": tru}'] + [json.dumps(d) for d in GOOD]
    items = _read("\n".join(lines).encode())
    assert isinstance(items[0], ParseError) and items[0].line == 1
    assert [r.key for r in items[1:]] == [d["material_id"] for d in GOOD]


@pytest.mark.parametrize("data", [b"", b"   \n\n\t  \n", b"\xef\xbb\xbf"])
def test_empty_file(data):
    items = _read(data, "empty.jsonl")
    assert len(items) == 1 and isinstance(items[0], ParseError)
    assert items[0].reason == "empty file" and items[0].source == "empty.jsonl"


def test_array_with_a_bad_element():
    elements = [json.dumps(d) for d in GOOD[:3]]
    elements.insert(1, '{"material_id": "mp-x", "volume": }')  # record 2
    text = "[\n  " + ",\n  ".join(elements) + "\n]\n"
    items = _read(text.encode(), "arr.json")
    assert [type(i).__name__ for i in items] == ["Record", "ParseError", "Record", "Record"]
    assert items[1].line == 2 and "(line 3)" in items[1].reason
    assert [i.line for i in items if isinstance(i, Record)] == [1, 3, 4]
    assert [i.key for i in items if isinstance(i, Record)] == ["mp-1", "mp-2", "mp-3"]


def test_array_structure_errors():
    assert [i.key for i in _read(json.dumps(GOOD).encode())] == [d["material_id"] for d in GOOD]
    assert _read(b"[]") == []
    trailing = _read(b'[{"material_id": "mp-1"},]')
    assert isinstance(trailing[0], Record) and "trailing comma" in trailing[1].reason
    after = _read(b'[{"material_id": "mp-1"}] {"material_id": "mp-2"}')
    assert isinstance(after[0], Record) and "after the closing" in after[1].reason
    cut = _read(b'[{"material_id": "mp-1"}, {"material_id": "mp-')
    assert isinstance(cut[0], Record) and "end of file" in cut[1].reason and cut[1].line == 2
    not_objects = _read(b'[1, "two", [3], null]')
    assert all(isinstance(i, ParseError) and "JSON object" in i.reason for i in not_objects)
    assert [i.line for i in not_objects] == [1, 2, 3, 4]
    strings = _read(b'[{"material_id": "mp-1", "note": "a,b]}\\""}, {"material_id": "mp-2"}]')
    assert [i.key for i in strings] == ["mp-1", "mp-2"]


def test_single_pretty_printed_object_and_concatenated_objects():
    doc = {"material_id": "mp-7", "structure": {"lattice": {"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]},
                                                 "sites": [{}]}}
    items = _read(json.dumps(doc, indent=2).encode())
    assert len(items) == 1 and items[0].key == "mp-7" and from_document(to_document(items[0].raw)) == doc
    two = json.dumps(doc, indent=2) + "\n" + json.dumps({"task_id": "mp-8", "input": {}, "output": {}}, indent=4)
    assert [(i.kind, i.key, i.line) for i in _read(two.encode())] == [("material", "mp-7", 1), ("task", "mp-8", 2)]


def test_records_without_a_natural_key():
    lines = [
        '{"formula_pretty": "NaCl", "band_gap": 5.0}',
        '{"calcs_reversed": [], "input": {}, "output": {}}',
        '{"@class": "ComputedStructureEntry", "energy": -1.0, "composition": {"Na": 1}}',
        '{"material_id": null}',
        '{"task_id": ""}',
        '[1, 2]',
    ]
    items = _read("\n".join(lines).encode(), "keys.jsonl")
    assert all(isinstance(i, ParseError) for i in items) and [i.line for i in items] == [1, 2, 3, 4, 5, 6]
    reasons = [i.reason for i in items]
    assert "cannot classify" in reasons[0] and "'formula_pretty'" in reasons[0]
    assert "task document" in reasons[1] and "without task_id" in reasons[1]
    assert "ComputedStructureEntry without entry_id" in reasons[2]
    assert "material_id is null, not a string" in reasons[3]
    assert "empty task_id" in reasons[4]
    assert "not an array" in reasons[5]


def test_odd_field_types_do_not_break_classification_or_aliases():
    odd = [
        {"material_id": "mp-1", "@class": ["not", "hashable"], "elements": "Fe", "composition": {"Fe": "x"}},
        {"material_id": "mp-2", "@class": {"a": 1}, "band_gap": {"search_gap": {"band_gap": "n/a"}}},
        {"task_id": 17, "input": {}, "output": {}, "spacegroup": [], "structure": {"sites": [1, {"species": 2}]}},
        {"material_id": "mp-3", "elements": [], "formula_pretty": "Fe2O3"},
    ]
    items = _read("\n".join(json.dumps(d) for d in odd).encode())
    assert [(i.kind, i.key) for i in items] == [("material", "mp-1"), ("material", "mp-2"), ("task", "17"),
                                                 ("material", "mp-3")]
    docs = [to_document(item.raw) for item in items]
    for doc, original in zip(docs, odd):
        assert from_document(bson.decode(bson.encode(doc))) == original
    assert docs[0]["_ingest"]["added"] == [] and docs[3]["_ingest"]["added"] == []
    assert docs[1]["band_gap"] == {"search_gap": {"band_gap": "n/a"}}


def _read_stored(data: bytes, source: str = "mem") -> list:
    """The parser's items with each record's stored document built, as the loader's checking
    pass builds them: a record the stored form cannot hold becomes its ParseError."""
    items = []
    for item in _read(data, source):
        if isinstance(item, Record):
            try:
                item = record_document(item, sha256="0" * 64, path=source)
            except ParseError as exc:
                item = exc
        items.append(item)
    return items


def test_unstorable_records_are_parse_errors():
    deep = b'{"material_id": "mp-1", "x": ' + b"[" * 120 + b"]" * 120 + b"}"
    assert isinstance(_read(deep)[0], Record)  # good JSON: the parser does not judge storability
    [item] = _read_stored(deep)
    assert isinstance(item, ParseError) and "100 levels" in item.reason
    very_deep = b'{"material_id": "mp-1", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    [item] = _read_stored(very_deep)
    assert isinstance(item, ParseError) and "deep" in item.reason
    [item] = _read_stored(b'{"material_id": "mp-1", "note": "\\ud800"}')
    assert isinstance(item, ParseError) and "surrogate" in item.reason
    items = _read(b'{"material_id": "mp-1"}\n{"material_id": "mp-2", "x": "\xff\xfe"}\n{"material_id": "mp-3"}\n')
    assert [type(i).__name__ for i in items] == ["Record", "ParseError", "Record"]
    assert "UTF-8" in items[1].reason and items[1].line == 2


def test_unstorable_record_in_the_middle_is_named_by_its_number():
    """An encoding failure names the file and the record, like a parse failure, in every layout."""
    good = [json.dumps(d) for d in GOOD]
    bad = '{"material_id": "mp-99", "x": {"note": "\\udc00 lone"}}'
    jsonl = "\n".join(good[:3] + [bad] + good[3:]).encode()  # record 4, line 4
    items = _read_stored(jsonl, "mid.jsonl")
    assert [type(i).__name__ for i in items] == ["dict"] * 3 + ["ParseError"] + ["dict"] * 2
    error = items[3]
    assert (error.source, error.line) == ("mid.jsonl", 4) and "surrogate" in error.reason
    assert str(error).startswith("mid.jsonl:4: ")
    deep = '{"material_id": "mp-98", "x": ' + "[" * 120 + "]" * 120 + "}"
    array = ("[\n  " + ",\n  ".join(good[:2] + [deep] + good[2:]) + "\n]\n").encode()  # record 3, line 4
    items = _read_stored(array, "mid.json")
    [error] = [i for i in items if isinstance(i, ParseError)]
    assert items.index(error) == 2 and error.line == 3 and error.source == "mid.json"
    assert "100 levels" in error.reason and error.reason.endswith("(line 4)")


def test_random_bytes_never_raise():
    rng = random.Random(7)
    for n in range(300):
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
        data = (b"", b"[", b"{", b'{"material_id": "mp-1"}\n')[n % 4] + noise
        items = _read(data, "rnd.bin")
        assert items, data[:40]
        assert all(isinstance(i, (Record, ParseError)) for i in items)
        if noise.strip():
            assert any(isinstance(i, ParseError) for i in items)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise(data):
    items = _read(data)
    assert all(isinstance(i, (Record, ParseError)) for i in items)


def test_jsonl_is_streamed():
    """The first record comes out after reading a bounded prefix of a large file."""

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, size=-1):
            chunk = super().read(size)
            self.read_bytes += len(chunk)
            return chunk

        def readinto(self, buffer):
            n = super().readinto(buffer)
            self.read_bytes += n
            return n

    line = json.dumps({"material_id": "mp-1", "pad": "x" * 5000}).encode() + b"\n"
    for data in (line * 1000, b"[" + b",".join([line.strip()] * 1000) + b"]"):  # 5 MB each
        handle = Counting(data)
        iterator = read_records(handle, "big")
        first = next(iterator)
        assert isinstance(first, Record)
        assert handle.read_bytes <= 4 * M.CHUNK, handle.read_bytes
        assert sum(1 for _ in iterator) == 999
        assert handle.read_bytes == len(data)


def test_corrupt_gzip_is_an_input_error():
    data = bytearray(gzip.compress(b'{"material_id": "mp-1"}\n' * 20000, mtime=0))
    data[20:28] = b"\xff" * 8  # an invalid deflate block header: zlib.error from the handle
    handle = gzip.GzipFile(fileobj=io.BytesIO(bytes(data)))
    with pytest.raises(InputError, match="bad.jsonl.gz: cannot read: corrupt compressed data") as info:
        list(read_records(handle, "bad.jsonl.gz"))
    assert info.value.__cause__ is not None


def test_registered_entry_point():
    fmt = parsers.get("materials")
    assert fmt.kind == "records" and fmt.load() is read_records


# --------------------------------------------------------------------------- stored form
def test_edge_cases_round_trip_through_bson():
    original = {
        "_ingest": {"a": 1},
        "_source": "theirs",
        "material_id": "mp-1",
        "_id": {"$oid": "5C08C4C2277E2B8E3AA9189C"},
        "a.b": {"$c": 1, "%d": 2, "e\x00f": 3, "": 4, "%25": 5, "%int": 6, "$": 7},
        "big": 123456789012345678901234567890,
        "huger": -(10**40),
        "int64_edge": [2**63 - 1, -(2**63), 2**63],
        "when": {"$date": 1550033642697},
        "when_iso": {"$date": "2019-02-13T04:54:02.697Z"},
        "when_long": {"$date": {"$numberLong": "1550033642697"}},
        "when_bad": {"$date": "not a date"},
        "when_out_of_range": {"$date": "0001-01-01T00:00:00+01:00"},
        "when_huge": {"$date": 10**20},
        "oid": {"$oid": "5c08c4c2277e2b8e3aa9189c"},
        "not_oid": {"$oid": "xyz"},
        "two_keys": {"$oid": "5c08c4c2277e2b8e3aa9189c", "x": 1},
        "nested": [{"$date": 0}, [{"$oid": "000000000000000000000000"}]],
        "pretty_formula": "Fe2O3",
        "band_gap": {"search_gap": {"band_gap": 2.1, "is_direct": False}},
    }
    doc = to_document(original)
    assert list(doc)[:3] == ["%5Fingest", "%5Fsource", "material_id"]
    assert doc["a%2Eb"] == {"%24c": 1, "%25d": 2, "e%00f": 3, "": 4, "%2525": 5, "%25int": 6, "%24": 7}
    assert doc["big"] == Decimal128("123456789012345678901234567890")
    assert doc["huger"] == {"%int": str(-(10**40))}
    assert isinstance(doc["int64_edge"][2], Decimal128)
    assert doc["when"] == doc["when_iso"] == doc["when_long"] == datetime(2019, 2, 13, 4, 54, 2, 697000,
                                                                           tzinfo=UTC)
    assert doc["when_bad"] == {"%24date": "not a date"}
    assert doc["when_out_of_range"] == {"%24date": "0001-01-01T00:00:00+01:00"}
    assert doc["when_huge"] == {"%24date": Decimal128(str(10**20))}
    assert doc["oid"] == ObjectId("5c08c4c2277e2b8e3aa9189c") and doc["not_oid"] == {"%24oid": "xyz"}
    assert doc["band_gap"] == 2.1 and doc["formula_pretty"] == "Fe2O3"
    assert doc["_ingest"]["source_id"] == ObjectId("5c08c4c2277e2b8e3aa9189c")
    stored = bson.decode(bson.encode(doc))
    stored["_id"] = "mp-1"  # what the loader adds
    stored["_source"] = {"path": "x", "sha256": "y", "line": 1}
    stored["_ingest"]["loader_note"] = "ignored"
    back = from_document(stored)
    assert back == original and list(back) == list(original)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=15,
)


# keys that would change the record's kind or natural key (everything else may be anything)
CLASSIFYING = {"material_id", "task_id", "entry_id", "spectrum_id", "ph_bs", "ph_dos", "calcs_reversed",
               "orig_inputs", "input", "output"}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10).filter(lambda k: k not in CLASSIFYING), json_values, max_size=6))
def test_any_json_record_round_trips(extra):
    original = {"material_id": "mp-1", **extra}
    doc = to_document(original)
    back = from_document(bson.decode(bson.encode(doc)))
    assert back == original and list(back) == list(original)


def test_from_document_rejects_foreign_documents():
    with pytest.raises(InputError):
        from_document({"material_id": "mp-1"})


# --------------------------------------------------------------------------- samples
def _generator():
    spec = importlib.util.spec_from_file_location("materials_sample_generator", SAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen():
    return _generator()


@pytest.fixture(scope="module")
def samples():
    def load(name):
        with gzip.open(SAMPLES / name, "rb") as fh:
            raw_lines = fh.read().splitlines()
        with gzip.open(SAMPLES / name, "rb") as fh:
            items = list(read_records(fh, name))
        return [json.loads(line) for line in raw_lines], items

    return load("materials.jsonl.gz"), load("tasks.jsonl.gz")


def test_sample_files_are_reproducible(gen, tmp_path):
    gen.main(["--out-dir", str(tmp_path)])
    for name in ("materials.jsonl.gz", "tasks.jsonl.gz"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), f"{name} differs from generate.py"
    total = sum((SAMPLES / name).stat().st_size for name in ("materials.jsonl.gz", "tasks.jsonl.gz"))
    assert total < 4_000_000


def test_samples_read_cleanly(samples):
    (materials, mat_items), (tasks, task_items) = samples
    assert 2900 <= len(materials) <= 3100 and 5600 <= len(tasks) <= 6400
    assert all(isinstance(i, Record) and i.kind == "material" for i in mat_items)
    assert all(isinstance(i, Record) and i.kind == "task" for i in task_items)
    for raw, item in zip(materials + tasks, mat_items + task_items):
        assert from_document(to_document(item.raw)) == raw


def test_samples_are_physically_plausible(samples, gen):
    (materials, mat_items), _ = samples
    docs = [to_document(item.raw) for item in mat_items]  # canonical names for legacy records too
    oxide_ef, other_ef, fluoride_gaps, metal_gaps, hulls = [], [], [], [], []
    for doc in docs:
        elements, comp = doc["elements"], doc["composition"]
        assert elements == sorted(comp) and doc["nelements"] == len(elements)
        assert doc["chemsys"] == "-".join(elements)
        counts = {el: int(n) for el, n in comp.items()}
        reduced, units = gen.reduce_counts(counts)
        assert doc["formula_pretty"] == gen.formula_of(reduced)
        assert all(el in ELEMENTS for el in elements)
        is_metallic = all(el in gen.METALS for el in elements) or len(elements) == 1
        if not is_metallic:
            assert gen.charge_balanced(counts), doc["formula_pretty"]
        assert -4.5 <= doc["formation_energy_per_atom"] <= 0.5
        (oxide_ef if "O" in elements else other_ef).append(doc["formation_energy_per_atom"])
        assert doc["energy_above_hull"] >= 0
        hulls.append(doc["energy_above_hull"])
        assert 0 <= doc["band_gap"] <= 9.5
        if "F" in elements:
            fluoride_gaps.append(doc["band_gap"])
        if is_metallic and len(elements) > 1:
            metal_gaps.append(doc["band_gap"])
        mass = sum(gen.ELEMENT_DATA[el][0] * n for el, n in counts.items())
        assert math.isclose(doc["density"], mass * gen.AMU_A3_TO_G_CM3 / doc["volume"], rel_tol=1e-9)
        assert 0.3 < doc["density"] < 25 and 5 < doc["volume"] / doc["nsites"] < 130
        lattice, sites = doc["structure"]["lattice"], doc["structure"]["sites"]
        (a1, a2, a3), (b1, b2, b3), (c1, c2, c3) = lattice["matrix"]
        det = a1 * (b2 * c3 - b3 * c2) - a2 * (b1 * c3 - b3 * c1) + a3 * (b1 * c2 - b2 * c1)
        assert math.isclose(det, doc["volume"], rel_tol=1e-6)
        assert len(sites) == doc["nsites"] == sum(counts.values())
        assert Counter(s["species"][0]["element"] for s in sites) == Counter(counts)
        low, high = gen.SPACE_GROUP_RANGES[doc["symmetry"]["crystal_system"]]
        assert low <= doc["symmetry"]["number"] <= high
        assert (doc["symmetry"]["symbol"], doc["symmetry"]["number"]) in {
            pair for pairs in gen.SPACE_GROUPS.values() for pair in pairs}
        assert doc["material_id"] == doc["task_ids"][0]
    assert len(oxide_ef) / len(docs) > 0.3
    assert sum(oxide_ef) / len(oxide_ef) < sum(other_ef) / len(other_ef) - 0.5
    assert max(fluoride_gaps) > 8 and sum(g == 0 for g in metal_gaps) / len(metal_gaps) > 0.8
    hulls.sort()
    assert hulls[len(hulls) // 4] == 0.0 and hulls[len(hulls) // 2] < 0.05


def test_samples_include_legacy_names_that_normalise(samples):
    (materials, mat_items), (tasks, task_items) = samples
    legacy = [(raw, to_document(item.raw)) for raw, item in zip(materials, mat_items) if "pretty_formula" in raw]
    assert len(legacy) >= 50
    for raw, doc in legacy:
        assert doc["formula_pretty"] == raw["pretty_formula"]
        assert doc["energy_above_hull"] == raw["e_above_hull"]
        assert "formula_pretty" in doc["_ingest"]["added"]
    dated = [(raw, to_document(item.raw)) for raw, item in zip(materials + tasks, mat_items + task_items)
             if isinstance(raw.get("last_updated"), dict)]
    assert dated and all(isinstance(doc["last_updated"], datetime) for _, doc in dated)
    assert any(isinstance(raw.get("band_gap"), dict) for raw, _ in legacy)


def test_tasks_are_linked_to_materials(samples):
    (_, mat_items), (_, task_items) = samples
    material_docs = [to_document(item.raw) for item in mat_items]
    materials = {doc["material_id"]: doc for doc in material_docs}
    assert len(materials) == len(mat_items)
    task_ids = set()
    for item in task_items:
        doc = to_document(item.raw)
        material = materials[doc["material_id"]]
        assert doc["task_id"] in material["task_ids"]
        assert doc["formula_pretty"] == material["formula_pretty"] and doc["elements"] == material["elements"]
        assert doc["calc_type"] == f"{doc['run_type']} {doc['task_type']}"
        assert isinstance(doc["output"]["energy_per_atom"], float)
        assert isinstance(doc["input"]["parameters"], dict)
        assert item.key == doc["task_id"]
        task_ids.add(doc["task_id"])
    assert len(task_ids) == len(task_items)
    assert task_ids == {t for m in materials.values() for t in m["task_ids"]}


@pytest.mark.parametrize("schema_name, index", [("material", 0), ("task", 1)])
def test_samples_match_the_json_schemas(samples, schema_name, index):
    schema = json.loads((SCHEMAS / f"{schema_name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    _, items = samples[index]
    for item in items:
        errors = sorted(validator.iter_errors(to_document(item.raw)), key=lambda e: list(e.path))
        assert not errors, f"{item.key}: {[e.message for e in errors[:3]]}"


def test_schemas_reject_inconsistent_documents(samples):
    (_, mat_items), (_, task_items) = samples
    material = Draft202012Validator(json.loads((SCHEMAS / "material.schema.json").read_text()))
    doc = json.loads(json.dumps(next(to_document(i.raw) for i in mat_items if isinstance(i.raw["last_updated"], str)),
                                default=str))  # dates (BSON dates in the stored form) as text
    assert material.is_valid(doc)
    for field, value in [("symmetry", {"crystal_system": "cubic", "symbol": "P-1", "number": 2}),
                         ("energy_above_hull", -0.1), ("band_gap", -1.0), ("elements", ["Fe", "Fe"]),
                         ("chemsys", "Fe,O"), ("nsites", 0)]:
        assert not material.is_valid({**doc, field: value}), field
    assert not material.is_valid({k: v for k, v in doc.items() if k != "formula_pretty"})
    task = Draft202012Validator(json.loads((SCHEMAS / "task.schema.json").read_text()))
    tdoc = json.loads(json.dumps(to_document(task_items[0].raw), default=str))
    assert task.is_valid(tdoc)
    assert not task.is_valid({**tdoc, "output": {"energy": -1.0}})
    assert not task.is_valid({**tdoc, "_ingest": {**tdoc["_ingest"], "kind": "material"}})
