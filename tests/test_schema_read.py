"""Schema.read, column by column, gives every value exactly what the one-value rules give it.

The rules are :func:`ingest.schema.get_path` (a dotted path, integer parts index lists) and
:func:`ingest.schema.coerce` (one rule per kind).  ``Schema.read`` reads a block of documents a
column at a time and finds a list element that several paths share once per document
(``hsps.0``); these properties hold it to the rules on documents of every shape: the element a
document where a list is expected, a list of scalars, a list too short, a key named ``"0"``,
booleans where numbers are expected, integers in a float column, nested lists, a document that
is not a dict at all; and a cursor (any iterable) read in blocks gives what a list gives.
"""

from __future__ import annotations

import math

from bson.decimal128 import Decimal128
from hypothesis import given, settings, strategies as st

from ingest import schema as schema_module
from ingest.schema import Schema, coerce, get_path

COLUMNS = (
    ("search_id", "search_id", "string"),
    ("rank", "rank", "int64"),
    ("flag", "flag", "bool"),
    ("tags", "tags", "list<string>"),
    ("score", "hsps.0.score", "float64"),
    ("evalue", "hsps.0.evalue", "float64"),
    ("rank2", "hsps.0.rank", "int64"),
    ("second", "hsps.1.score", "float64"),
    ("last", "hsps.-1.score", "float64"),
    ("deep", "a.b.c", "string"),
    ("deeper", "a.0.b.0", "float64"),
)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.builds(lambda x: Decimal128(str(x)), st.integers(-10**6, 10**6)),
)
keys = st.sampled_from(["score", "evalue", "rank", "0", "1", "b", "c"])
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=8)
documents = st.one_of(
    st.fixed_dictionaries({}, optional={
        "search_id": values, "rank": values, "flag": values, "tags": values,
        "hsps": st.one_of(values, st.lists(st.dictionaries(keys, values, max_size=4), max_size=3)),
        "a": values,
    }),
    scalars,  # not a document at all: every column missing
)


def expected(docs: list) -> dict[str, list]:
    return {name: [coerce(get_path(d, path), kind) for d in docs] for name, path, kind in COLUMNS}


def same(a, b) -> bool:
    """Equal, with NaN equal to NaN and the type kept (1.0 is not 1, True is not 1)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(st.lists(documents, max_size=12))
def test_read_gives_each_value_what_get_path_and_coerce_give(docs):
    got = Schema(COLUMNS).read(docs)
    want = expected(docs)
    for name in want:
        assert same(got[name], want[name]), (name, docs, got[name], want[name])


@settings(max_examples=60, deadline=None)
@given(st.lists(documents, max_size=12), st.integers(1, 5))
def test_an_iterable_read_in_blocks_gives_what_the_list_gives(docs, block):
    before = schema_module.READ_BLOCK
    schema_module.READ_BLOCK = block  # blocks of 1-5 documents: every edge between them is crossed
    try:
        got = Schema(COLUMNS).read(iter(docs))
    finally:
        schema_module.READ_BLOCK = before
    want = Schema(COLUMNS).read(list(docs))
    for name in want:
        assert same(got[name], want[name]), (name, block, docs)


def test_the_hsp_columns_of_a_real_hit_and_of_odd_shapes():
    docs = [
        {"search_id": "s:1", "rank": 1, "hsps": [{"score": 827, "evalue": 3.2e-63, "rank": 2.0}]},
        {"search_id": "s:2", "rank": True, "hsps": {"0": {"score": 5.5}}},  # a document where a list is expected
        {"search_id": 7, "hsps": [3, {"score": 1}]},  # the first element not a document
        {"hsps": []},
        "not a document",
    ]
    got = Schema(COLUMNS).read(docs)
    assert got["score"] == [827.0, 5.5, None, None, None] and type(got["score"][0]) is float
    assert got["rank"] == [1, None, None, None, None]  # True is not a rank
    assert got["rank2"] == [2, None, None, None, None] and type(got["rank2"][0]) is int
    assert got["second"] == [None, None, 1.0, None, None]
    assert got["last"] == [827.0, None, 1.0, None, None]
    assert got["search_id"] == ["s:1", "s:2", None, None, None]


def test_an_integral_double_is_an_int64_only_where_an_int64_holds_it():
    assert coerce(2.0**62, "int64") == 2**62 and coerce(-(2.0**63), "int64") == -(2**63)
    assert coerce(2.0**63, "int64") is None and coerce(1e300, "int64") is None  # not storable: missing
    frame = Schema((("n", "n", "int64"),)).frame(Schema((("n", "n", "int64"),)).read([{"n": 2.0**63}, {"n": 3.0}]))
    assert frame["n"].isna().tolist() == [True, False] and frame["n"].iloc[1] == 3
