"""MongoDB's hashed-index value (issue 11): every literal of MongoDB's own hasher tests, their
equal / not-equal pairs, the number rules, Extended JSON input, and `sci-ingest hash` as a
user runs it (a subprocess; arguments and stdin; a bad line named, the rest printed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bson import Int64
from bson.decimal128 import Decimal128
from hypothesis import given, settings, strategies as st

from ingest.sharding.hashkey import INT64_MAX, INT64_MIN, UNDEFINED, hash64, number_for_hash, parse_value

DATA = json.loads((Path(__file__).parent / "data" / "mongodb_hash_vectors.json").read_text())
BIN = Path(sys.executable).parent / "sci-ingest"


def _value(ejson):
    return parse_value(json.dumps(ejson))


@pytest.mark.parametrize("vector", DATA["vectors"], ids=lambda v: f"{v['source']}-seed{v['seed']}")
def test_every_literal_of_mongodbs_hasher_tests(vector):
    assert hash64(_value(vector["value_ejson"]), vector["seed"]) == int(vector["expected"])


def test_the_vectors_cover_both_test_files_and_every_seed_they_use():
    sources = {v["source"].split(":")[0] for v in DATA["vectors"]}
    assert {"src/mongo/db/hasher_test.cpp", "jstests/core/testing/hash.js"} <= sources
    assert {v["seed"] for v in DATA["vectors"]} >= {0, 1} and len(DATA["vectors"]) >= 70


@pytest.mark.parametrize("pair", DATA["relations"], ids=lambda p: p["source"])
def test_the_pairs_mongodb_compares(pair):
    a = hash64(_value(pair["a"]), pair["seed"])
    b = hash64(_value(pair["b"]), pair.get("seed_b", pair["seed"]))
    assert (a == b) is pair["equal"]


def test_number_rules():
    assert number_for_hash(42.999) == 42 and number_for_hash(-42.999) == -42
    assert number_for_hash(float("nan")) == 0 and number_for_hash(float("inf")) == INT64_MAX
    assert number_for_hash(float("-inf")) == INT64_MIN and number_for_hash(2.0**63) == INT64_MIN
    assert number_for_hash(2.0**64) == INT64_MAX and number_for_hash(-(2.0**64)) == INT64_MIN
    assert number_for_hash(Decimal128("2.5")) == 2 and number_for_hash(Decimal128("3.5")) == 4  # half to even
    assert number_for_hash(Decimal128("-2.5")) == -2 and number_for_hash(Decimal128("NaN")) == 0
    assert number_for_hash(Decimal128("1E+30")) == INT64_MAX and number_for_hash(Decimal128("-Infinity")) == INT64_MIN
    assert number_for_hash(2**70) == INT64_MAX  # a Python int beyond int64 is the double it would be in JSON
    with pytest.raises(TypeError):
        number_for_hash(True)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_every_number_type_of_one_value_hashes_alike(n):
    same = {hash64(n), hash64(Int64(n)), hash64(Decimal128(str(n)))}
    if abs(n) < 2**53:
        same |= {hash64(float(n)), hash64(n + (0.25 if n >= 0 else -0.25))}
    assert len(same) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(min_size=1, max_size=8))
def test_field_names_count_inside_documents_only(text, name):
    assert hash64(text) == hash64(parse_value(json.dumps(text)))
    assert hash64({name: text}) != hash64({name + "x": text})
    assert hash64([text]) == hash64(parse_value(json.dumps([text])))


def test_types_that_look_alike_hash_apart_and_order_matters():
    assert hash64(None) != hash64(UNDEFINED) != hash64(False)
    assert hash64({"a": 1, "b": 2}) != hash64({"b": 2, "a": 1})
    assert hash64([1, 2]) != hash64({"0": 1, "1": 2})  # same elements, another canonical type
    assert hash64("1") != hash64(1)
    assert hash64(parse_value('{"$symbol": "abc"}')) == hash64("abc")  # symbols are strings here


def test_extended_json_forms():
    assert parse_value('{"$numberLong": "42"}') == 42 and isinstance(parse_value('{"$numberLong": "42"}'), Int64)
    assert parse_value("123456789012345678901234567890") == 1.2345678901234568e29  # beyond int64: a double
    date = parse_value('{"$date": {"$numberLong": "-62135596800001"}}')  # before year 1: still exact
    assert int(date) == -62135596800001
    relaxed, canonical = parse_value('{"$date": "1970-01-01T00:00:00.001Z"}'), parse_value(
        '{"$date": {"$numberLong": "1"}}')
    assert hash64(relaxed) == hash64(canonical)
    for bad in ("", "{", "'single quotes'", '{"$oid": "zz"}', '{"$dbPointer": 1}', "[1,]", "[" * 5000 + "]" * 5000):
        with pytest.raises(ValueError):
            parse_value(bad)
    with pytest.raises(ValueError, match=r"\$numberLong 99999999999999999999 is outside the int64 range"):
        parse_value('{"$numberLong": "99999999999999999999"}')
    with pytest.raises(ValueError, match=r"bad \$numberDecimal: not a decimal number"):
        parse_value('{"a": {"$numberDecimal": "xyz"}}')


def test_nesting_deeper_than_mongodb_stores_is_refused_not_a_crash():
    assert isinstance(hash64(parse_value("[" * 100 + "]" * 100)), int)
    with pytest.raises(ValueError, match="nested deeper than 100"):
        hash64(parse_value("[" * 101 + "]" * 101))
    out = _cli(stdin="[" * 900 + "]" * 900 + "\n1\n")
    assert out.returncode == 2 and out.stdout.split() == [str(hash64(1))] and "<stdin>:1: nested" in out.stderr


def test_the_seed_is_a_32_bit_integer():
    assert hash64(1, -(2**31)) != hash64(1, 2**31 - 1)
    for bad in (2**31, -(2**31) - 1, 1.5, True):
        with pytest.raises(ValueError):
            hash64(1, bad)


# ------------------------------------------------------------------ the command
def _cli(*args, stdin=None):
    return subprocess.run([str(BIN), "hash", *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_cli_hashes_arguments_in_order():
    out = _cli('"string to hash"', "5", '{"$numberLong": "10"}', "--seed", "0")
    assert out.returncode == 0, out.stderr
    # the MongoDB manual's $toHashedIndexKey and zone-sharding examples
    assert out.stdout.split() == ["763543691661428748", "4470791281878691347", "7766103514953448109"]


def test_cli_reads_stdin_names_bad_lines_and_exits_2():
    vectors = [v for v in DATA["vectors"] if v["seed"] == 1][:5]
    lines = [json.dumps(v["value_ejson"]) for v in vectors]
    text = "\n".join([lines[0], "{not json", lines[1], "", lines[2], '{"$oid": "12"}', *lines[3:]]) + "\n"
    out = _cli("--seed", "1", stdin=text)
    assert out.returncode == 2
    assert out.stdout.split() == [v["expected"] for v in vectors]
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 2 and errors[0].startswith("<stdin>:2: ") and errors[1].startswith("<stdin>:6: ")


def test_cli_refuses_a_seed_out_of_range():
    out = _cli("--seed", str(2**31), "1")
    assert out.returncode == 64 and "32-bit" in out.stderr and out.stdout == ""  # a usage error
