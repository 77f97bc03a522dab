"""Bad input: every case raises ParseError naming the file and the 1-based line.

Fixtures are in tests/data/pasta/bad/ (made by tests/data/pasta/make_bad_inputs.py
from real samples); the 10 MB lines are generated here.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from ingest.errors import InputError, ParseError
from ingest.parsers.pasta import MAX_LINE, parse

BAD = Path(__file__).resolve().parent / "data" / "pasta" / "bad"
SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"

# fixture -> (line reported, words of the reason, query ids yielded before the error)
CASES = {
    "empty.m10": (1, "empty input", []),
    "plain_fasta.m10": (1, "plain FASTA", []),
    "random_bytes.m10": (1, "binary data", []),
    "blast_tabular.m8": (1, "tabular", []),
    # cut 20 characters into line 73, a sequence line of the library side of hit 1
    "cut_mid_alignment.m10": (73, "library sequence shorter than its coordinates say (truncated?)", []),
    # cut inside line 62: the alignment beginning at line 54 has no library side
    "cut_mid_query_side.m10": (54, "without its library side (truncated?)", []),
    # queries 1 and 2 complete, the file stops at line 430 (">>><<<")
    "truncated_after_query2.m10": (430, "without the '>>>///'", ["GTT1_DROME", "sp|P62158|CALM_HUMAN"]),
    "no_end_of_run.m10": (
        754,
        "after query 4 without the '>>>///'",
        ["GTT1_DROME", "sp|P62158|CALM_HUMAN", "H10_HUMAN", "sp|P10649|GSTM1_MOUSE"],
    ),
    # ">>><<<" of query 1 removed: query 2 starts at line 366 inside query 1
    "missing_end_of_query.m10": (366, "unexpected line after an alignment", []),
    "bad_number.m10": (49, "is not a number", []),
    # alignment 1 is OKBO2C but row 1 (line 20) of the best-scores table is GT8.7
    "table_mismatch.m10": (20, "best-scores table", []),
    # real "ssearch36 -m 9c" output: -m 9c table, default (-m 0) alignments; the first
    # hit (line 36, ">>GT8.7 ...") is followed by " s-w opt: 100  Z-score: ..."
    "m9c_default_alignments.m10": (36, "not -m 10 alignments", []),
    # real "ssearch36 -m 10 -m B" output (the last -m wins): line 33 is ">GT8.7 ..."
    "m10_then_mB.m10": (33, "unexpected line in the header of query", []),
    # -m 10 -m 9c with the first three table rows removed: row 1 (line 20) is "+-"
    "m9c_plus_row_first.m10": (20, "starts with a '+-' row", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_fixture(name):
    line, words, before = CASES[name]
    got = []
    with open(BAD / name, "rb") as fh:
        with pytest.raises(ParseError) as info:
            for q in parse(fh, str(BAD / name)):
                got.append(q.query_id)
    err = info.value
    assert isinstance(err, InputError)
    assert err.source == str(BAD / name)
    assert err.line == line, err
    assert words in err.reason
    assert str(err).startswith(f"{BAD / name}:{line}: ")
    assert got == before  # complete queries before the damage, never the damaged one


def test_every_fixture_has_a_case():
    assert sorted(p.name for p in BAD.iterdir()) == sorted([*CASES, "non_utf8_description.m10"])


def test_ten_megabyte_single_line():
    data = b"ACGT" * (10 * 1024 * 1024 // 4)  # 10 MB, no line end
    with pytest.raises(ParseError) as info:
        list(parse(io.BytesIO(data), "long.m10"))
    assert info.value.line == 1 and "longer than" in info.value.reason
    with pytest.raises(ParseError) as info:
        list(parse(io.BytesIO(data + b"\n>>>///\n"), "long.m10"))
    assert info.value.line == 1


def test_ten_megabyte_line_inside_an_alignment():
    lines = (SAMPLES / "ssearch36_prot.m10").read_bytes().split(b"\n")
    assert lines[62].startswith(b"ADPEAFKKIE")  # line 63: a query sequence line of hit 1
    lines[62] = b"A" * (10 * 1024 * 1024)
    with pytest.raises(ParseError) as info:
        list(parse(io.BytesIO(b"\n".join(lines)), "long_seq.m10"))
    assert info.value.line == 63 and "longer than" in info.value.reason
    assert MAX_LINE < 10 * 1024 * 1024


def test_non_utf8_description_is_replaced_and_reported():
    path = BAD / "non_utf8_description.m10"
    warnings: list[str] = []
    with open(path, "rb") as fh:
        (q,) = list(parse(fh, "non_utf8_description.m10", warn=warnings.append))
    assert warnings == [
        "non_utf8_description.m10:9: non-UTF-8 bytes in query description replaced by U+FFFD",
        "non_utf8_description.m10:44: non-UTF-8 bytes in hit description replaced by U+FFFD",
    ]
    assert q.query_description.startswith("GLUTATHIONE \ufffd\ufffd S-TRANSFERASE")
    assert q.hits[0].hit_description == "| 266 | transl\ufffd. of pa875.con, 19 to 675"
    # without a warn callback the values are the same and nothing is raised
    with open(path, "rb") as fh:
        (q2,) = list(parse(fh, "x"))
    assert q2.to_dict() == q.to_dict()


def test_truncated_gzip_stream():
    data = gzip.compress((SAMPLES / "ssearch36_prot_multi.m10").read_bytes())
    with pytest.raises(ParseError) as info:
        with gzip.open(io.BytesIO(data[: len(data) // 2]), "rb") as fh:
            list(parse(fh, "cut.m10.gz"))
    assert info.value.source == "cut.m10.gz" and info.value.line >= 1


def test_text_mode_handle_is_refused():
    with open(SAMPLES / "ssearch36_prot.m10") as fh:
        with pytest.raises(ParseError) as info:
            list(parse(fh, "text"))
    assert "binary mode" in info.value.reason


def test_garbage_after_the_last_query_of_a_run():
    data = (SAMPLES / "ssearch36_prot.m10").read_bytes()
    lines = data.split(b"\n")
    end = lines.index(b">>><<<")
    # a stray '; key: value' line between two queries / after the run
    damaged = b"\n".join(lines[: end + 1] + [b"; sw_expect: 1"] + lines[end + 1 :])
    with pytest.raises(ParseError) as info:
        list(parse(io.BytesIO(damaged), "stray.m10"))
    assert info.value.line == end + 2
