"""Long queries searched in segments (issue 12, part 2; ingest/parsers/pasta/segments.py).

Real outputs in samples/pasta (commands in make_samples.sh): an 86,314 nt "clone" (85,000
random nt with pGT875, mgstm1.nt, planted across the first segment boundary at 39501 and
reverse-complemented at 82001) is searched by fasta36 and ssearch36 in three segments of
39,990 / 39,990 / 6,334 nt; the ssearch36 run has an ordinary query after it.  The values
are pinned to the files' own lines (read here independently) and to the plant's positions."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.errors import ParseError
from ingest.parsers.pasta import parse, parse_dicts

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
BIN = Path(sys.executable).parent / "sci-ingest"
CLONE = 86314
SEGMENTS = [(1, 39990), (39991, 39990), (79981, 6334)]


def run_parse(data: bytes, fast: bool = True, dicts: bool = False, sequences: bool = True):
    fn = parse_dicts if dicts else parse
    out = fn(io.BytesIO(data), "x.m10", fast=fast, sequences=sequences)
    return [q if dicts else q.to_dict() for q in out]


def _query_coordinates(text: str) -> list[list[tuple[int, int]]]:
    """Per query block, the query side's (al_start, al_stop) of every alignment, from the file."""
    blocks = re.split(r"^\s*\d+>>>", text, flags=re.M)[1:]
    return [[(int(a), int(b)) for a, b in re.findall(
        r"^>\S+ \.\.\n; sq_len: \d+\n; sq_offset: \d+\n; sq_type: \w\n; al_start: (\d+)\n; al_stop: (\d+)\n(?:.*\n)*?>",
        block, re.M)] for block in blocks]


@pytest.mark.parametrize("dicts", [False, True], ids=["objects", "dicts"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
@pytest.mark.parametrize("name", ["fasta36_long_query.m10", "ssearch36_long_query.m10"])
def test_segments_give_the_whole_query(name, fast, dicts):
    text = (SAMPLES / name).read_text()
    queries = run_parse(text.encode(), fast, dicts)
    blocks = re.findall(r"^\s*\d+>>>.*$", text, re.M)
    assert len(queries) == len(blocks)
    clone = [q for q in queries if q["query_id"] == "clone_long"]
    assert [(q["query_segment"]["offset"], q["query_segment"]["length"]) for q in clone] == SEGMENTS
    assert {q["query_length"] for q in clone} == {CLONE} == {sum(n for _, n in SEGMENTS)}
    assert [q["query_segment"]["index"] for q in clone] == [1, 2, 3]
    assert {q["query_segment"]["count"] for q in clone} == {3}
    assert {q["query_description"] for q in clone} == {
        "synthetic clone: 85000 random nt with pGT875 (mgstm1.nt) at 39501 and reverse-complemented at 82001"}
    assert [q["query_index"] for q in queries] == list(range(1, len(blocks) + 1))
    # every alignment's query coordinates are the file's al_start/al_stop (whole-query numbering),
    # inside its segment
    for q, coords in zip(queries, _query_coordinates(text)):
        got = [(s["query_start"], s["query_end"]) for h in q["hits"] for s in h["hsps"] if "query_start" in s]
        assert got == [(min(a, b), max(a, b)) for a, b in coords]
        if "query_segment" in q:
            lo = q["query_segment"]["offset"]
            assert all(lo <= a <= b < lo + q["query_segment"]["length"] for a, b in got)
    # the plant: 1-490 of pGT875 at the end of segment 1, 491-657 at the start of segment 2,
    # all of it reverse-complemented in segment 3
    def best(q):
        return next(s for h in q["hits"] if h["hit_id"] == "pGT875" for s in h["hsps"])
    if name.startswith("ssearch"):
        assert [(best(q)["query_start"], best(q)["query_end"], best(q)["query_strand"]) for q in clone] == [
            (39501, 39990, "+"), (39991, 40157, "+"), (82001, 82657, "-")]
        assert [(best(q)["hit_start"], best(q)["hit_end"]) for q in clone] == [(1, 490), (491, 657), (1, 657)]
        (short,) = [q for q in queries if q["query_id"] == "pGT875"]
        assert short["query_length"] == 657 and "query_segment" not in short


def test_objects_and_dicts_agree_key_for_key():
    data = (SAMPLES / "ssearch36_long_query.m10").read_bytes()
    assert [json.dumps(d) for d in run_parse(data, dicts=True)] == [json.dumps(d) for d in run_parse(data)]


def test_the_command_line_gives_one_line_per_query_block():
    path = SAMPLES / "ssearch36_long_query.m10"
    out = subprocess.run([str(BIN), "parse", "--no-sequences", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d.get("query_segment", {}).get("index") for d in lines] == [1, 2, 3, None]
    assert [d["query_length"] for d in lines] == [CLONE, CLONE, CLONE, 657]


def test_a_query_cut_before_its_last_segment_is_not_yielded():
    """Truncated after segment 2 of 3: the whole query's length is unknown, so none of its
    segments is yielded (a length of 79,980 would be a wrong value); the file is refused."""
    text = (SAMPLES / "fasta36_long_query.m10").read_text()
    cut = text[: text.index("  3>>>clone_long")]
    yielded = []
    with pytest.raises(ParseError, match="without the '>>>///'"):
        for q in parse(io.BytesIO(cut.encode()), "x.m10"):
            yielded.append(q)
    assert yielded == []


def test_an_alignment_outside_its_segment_is_refused_at_the_segments_query_line():
    """Segments are numbered without overlap (FASTA 36.3.8i): were a first segment 10 nt
    shorter than its alignments' numbering says, the file is refused, not mis-numbered."""
    text = (SAMPLES / "fasta36_long_query.m10").read_text()
    bad = re.sub(r"^(\s*\d+>>>clone_long .*? - )39990 nt", r"\g<1>39980 nt", text, flags=re.M)
    assert bad.count(" - 39980 nt") == 3
    line = 1 + text[:text.index("  1>>>clone_long")].count("\n")
    with pytest.raises(ParseError) as err:
        list(parse(io.BytesIO(bad.encode()), "x.m10"))
    assert err.value.line == line and "lies outside it" in str(err.value)


def test_a_title_that_merely_ends_like_a_segment_is_its_own_query():
    """Two queries whose titles differ by ' - 12 nt' but not as FASTA appends it (another
    run, or not the previous block's text plus its own length) stay ordinary queries."""
    text = (SAMPLES / "ssearch36_long_query.m10").read_text()
    q4 = text[text.index("  4>>>pGT875"):text.index(">>>///")]
    fake = q4.replace("  4>>>pGT875  - 657 nt", "  5>>>pGT875  - 12 nt - 657 nt", 1)
    data = text.replace(">>>///", q4 + fake + ">>>///", 1)
    queries = run_parse(data.encode())
    assert [q.get("query_segment") for q in queries[-2:]] == [None, None]
    assert queries[-1]["query_description"] == "- 12 nt"
