"""A large query block in bounded memory: its hits, and the rows of a long best-scores table,
moved to temporary files chunk by chunk as they are read (``ingest/parsers/pasta/spool.py``)
must give exactly what holding them gives.

Checked with tiny bounds (``spill=1, 2, 3``: every block with hits spills, and a table of more
than 16, 32 or 48 rows) on every real sample, in 7-byte reads and with CRLF, on damaged samples
(hypothesis: the same queries, the same end - complete or the same line and reason - and the same
warnings), and for the documents the loader makes of them (the search's fingerprint, hashed as
the hits are read back, included).  The CLI on a block of 300,000 hits, and its peak memory:
``tests/test_pasta_big_block.py``.
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pasta_mutations import mutate_from
from test_pasta_parser import GOOD, SAMPLE_FILES, SAMPLES, read_bytes

import ingest.parsers.pasta as pasta
from ingest.documents import search_documents
from ingest.documents.search import search_fingerprint
from ingest.errors import ParseError
from ingest.parsers.pasta.reader import Reader
from ingest.parsers.pasta.spool import HitSpool, Rows

FILES = SAMPLE_FILES + [GOOD / "ssearch36_z21_e2.m10"]


def _run(data: bytes, name: str, spill: int | None, sequences: bool = True, chunk_size: int = 1 << 20):
    """(each query as JSON text, its hits read from a spool if they are one; how many were
    spools; the end: None or (line, reason); the warnings)."""
    out, warnings, spools = [], [], 0
    try:
        for d in pasta.parse_dicts(io.BytesIO(data), name, sequences=sequences, warn=warnings.append,
                                   spill=spill, chunk_size=chunk_size):
            if isinstance(d["hits"], HitSpool):
                spools += 1
                d = {**d, "hits": list(d["hits"])}
            out.append(json.dumps(d))
        end = None
    except ParseError as err:
        end = (err.line, err.reason)
    return out, spools, end, warnings


@pytest.mark.parametrize("sequences", [True, False])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_spilled_block_gives_what_a_held_one_gives(path, sequences):
    data = read_bytes(path)
    held = _run(data, path.name, None, sequences)
    assert held[0] and held[1] == 0 and held[2] is None
    has_hits = any(json.loads(q)["hits"] for q in held[0])
    for spill in (1, 2, 3):
        spilled = _run(data, path.name, spill, sequences)
        assert spilled[0] == held[0], spill
        assert spilled[2:] == held[2:]
        if spill == 1:
            assert (spilled[1] > 0) == has_hits  # every block with hits spills
    for variant, kw in ((data.replace(b"\n", b"\r\n"), {}), (data, {"chunk_size": 7})):
        assert _run(variant, path.name, 1, sequences, **kw)[0] == held[0]


def test_the_default_bound_keeps_small_blocks_as_lists():
    """The CLI's and the loader's bound (SPILL_HITS, 4096 hits): every sample's block is a list."""
    for path in FILES:
        for d in pasta.parse_dicts(io.BytesIO(read_bytes(path)), path.name):
            assert isinstance(d["hits"], list)


def test_spill_below_one_is_refused_at_the_call():
    with pytest.raises(ValueError, match="spill"):
        pasta.parse_dicts(io.BytesIO(b""), "x", spill=0)


def test_a_long_table_goes_to_a_row_spool_and_comes_back_in_order():
    data = (SAMPLES / "ssearch36_m9i_d0.m10").read_bytes()
    start = data.index(b"\n", data.index(b"The best scores are:")) + 1
    expected = data[start:].split(b"\n  2>>>")[0].split(b"\n")  # the next query's line ends the table
    for spill_rows in (None, 2):
        r = Reader(io.BytesIO(data[start:]), "x", chunk_size=64)
        r.spill_rows = spill_rows
        rows, first, plus = r.read_rows()
        assert first == 1 and not plus and len(rows) == len(expected) == 18
        if spill_rows is None:
            assert rows == expected
            continue
        assert isinstance(rows, Rows)
        assert rows.peek() == expected[0] and rows.take(1) == expected[:1]
        assert rows.take(3) == expected[1:4] and rows.peek() == expected[4]
        assert rows.take(10**6) == expected[4:] and rows.peek() is None and rows.take(5) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_documents_of_a_spilled_block_equal_those_of_a_held_one(path):
    """What the loader stores: the search document (its fingerprint hashed as the spool is read)
    and every hit document."""
    data = read_bytes(path)
    held = list(pasta.parse_dicts(io.BytesIO(data), path.name, spill=None))
    spilled = list(pasta.parse_dicts(io.BytesIO(data), path.name, spill=1))
    assert len(held) == len(spilled)
    for index, (a, b) in enumerate(zip(held, spilled), start=1):
        doc_a, hits_a = search_documents(a, sha256="0" * 64, path="x.m10", query_index=index)
        doc_b, hits_b = search_documents(b, sha256="0" * 64, path="x.m10", query_index=index)
        assert isinstance(hits_a, list)
        assert doc_b == doc_a and list(hits_b) == hits_a
        assert search_fingerprint({**a, "hits": iter(a["hits"])}) == doc_a["fingerprint"]


# ------------------------------------------------------------------------- damaged samples
NAMES = [
    "ssearch36_table_only.m10",  # table-only rows
    "ssearch36_m9c.m10",  # -m 9 columns
    "ssearch36_m9C_alt.m10",  # "+-" rows
    "ssearch36_dna_m9B.m10",
    "ssearch36_m9i_d0.m10",  # no alignments
    "ssearch36_prot_multi.m10",
    "fasta36_long_at_c.m10",  # segments renumbered: their hits shifted
    "ssearch36_subrange_multi.m10",  # blocks set aside
    "ssearch36_F10_file.m10",  # queries without ">>><<<"
]
DATA = {name: (SAMPLES / name).read_bytes() for name in NAMES}
SPECIAL = [b"\n", b">>", b"+-", b" ", b"\t", b"(", b"\xe9", b"0", b"\n\n", b">>><<<\n"]


@st.composite
def damaged(draw):
    name = draw(st.sampled_from(NAMES))
    data = bytearray(DATA[name])
    first = data.find(b"The best scores are:")  # the table and the alignments
    return name, bytes(mutate_from(draw, data, first, SPECIAL))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(), st.sampled_from([1, 2]))
def test_a_damaged_block_ends_the_same_spilled_or_held(case, spill):
    name, data = case
    held = _run(data, name, None)
    spilled = _run(data, name, spill)
    assert spilled[2] == held[2]  # the same end: complete, or the same line and reason
    assert spilled[0] == held[0]  # the same queries before it
    assert spilled[3] == held[3]  # the same warnings


def _short_table(data: bytes, keep: int) -> bytes:
    """``data`` with its first best-scores table cut to ``keep`` rows."""
    head, sep, rest = data.partition(b"The best scores are:")
    title, nl, rest = rest.partition(b"\n")
    table, blank, after = rest.partition(b"\n\n")
    return head + sep + title + nl + b"\n".join(table.split(b"\n")[:keep]) + blank + after


def test_a_spilled_block_reports_the_table_error_a_held_one_reports():
    """The table is checked a chunk at a time as the hits leave memory; what it finds is raised when
    the block ends, in the held order: more alignments than rows before a row naming another
    sequence, and any damaged alignment after them before either."""
    data = (SAMPLES / "ssearch36_table_only.m10").read_bytes()  # 4 alignments, 12 rows in its first query
    renamed = data.replace(b"\nGTM1_MOUSE GLUTATHIONE S-TRANSFERASE GT8.7", b"\nXXXX_MOUSE GLUTATHIONE S-TRANSFERASE GT8.7", 1)
    cases = {
        renamed: (21, "alignment 2 of query 'GTT1_DROME' is for 'GTM1_MOUSE' but its row of the best-scores "
                      "table is 'XXXX_MOUSE'"),
        _short_table(renamed, 3): (22, "query 'GTT1_DROME' has 4 alignments but its best-scores table only 3 rows"),
        renamed.replace(b"; sw_bits: 29.4\n", b"; sw_bits: 29.4x\n", 1): (159, "'; sw_bits: 29.4x' is not a number"),
    }
    for damaged_data, end in cases.items():
        for spill in (None, 1, 2):
            assert _run(damaged_data, "x.m10", spill)[2] == end, spill


def test_a_spilled_block_says_its_rows_warnings_when_the_held_one_would():
    """A row's description that is not UTF-8 warns when the row is read: for a spilled block that is
    as its hits leave memory, but the warning waits for the block's end, after every alignment's,
    and is never said when an alignment after it fails the block (found by the test above)."""
    data = (SAMPLES / "ssearch36_dna_m9B.m10").read_bytes()  # -m 9B: every aligned row is read
    bad_row = data.replace(b"\npGT875 | 266 ", b"\npGT875\x80 | 266 ", 1)
    warned = _run(bad_row, "x.m10", None)
    assert warned[2] is None and warned[3] == ["x.m10:20: non-UTF-8 bytes in hit description replaced by U+FFFD"]
    second = bad_row.index(b"\n>>RABGLTR")
    failing = bad_row[:second] + bad_row[second:].replace(b"; sw_bits: ", b"; sw_bits: x", 1)
    failed = _run(failing, "x.m10", None)
    assert failed[2] is not None and failed[3] == []
    for spill in (1, 2):
        assert _run(bad_row, "x.m10", spill)[2:] == warned[2:]
        assert _run(failing, "x.m10", spill)[2:] == failed[2:]
