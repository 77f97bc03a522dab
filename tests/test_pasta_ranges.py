"""Where a query sits in its sequence (issue 26; ingest/parsers/pasta/segments.py).

Real FASTA 36.3.8i outputs in samples/pasta, commands in make_samples.sh ("where a query sits in
its sequence"): query subranges (``file:101-400``, ``file:-100``, ``file:101-``, the first query of
a multi-query file), subranges of an 86,314 nt clone (FASTA goes on past them: placed, issue 43), segments
numbered from an ``@C:`` header (renumbered) and from ``-o``, titles cut at 511 bytes, segments
with ``-i``, ``-3 -m 9c``, fastx36, and a 68,700 aa protein.  Run as users run it: the command
line as a subprocess; values pinned to the files' own lines, read here with regular expressions
of this test's own."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from Bio import BiopythonParserWarning, SearchIO

from ingest.errors import ParseError
from ingest.parsers.pasta import parse_dicts

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
BIN = Path(sys.executable).parent / "sci-ingest"
CLONE = 86314

# name -> (query blocks in the file, blocks set aside)
SAMPLES_26 = {
    "ssearch36_subrange.m10": (1, 0),
    "ssearch36_subrange_multi.m10": (4, 0),
    "ggsearch36_subrange_head.m10": (1, 0),
    "fasta36_subrange_open.m10": (1, 0),
    "ssearch36_long_subrange.m10": (3, 0),
    "fasta36_long_subrange_cross.m10": (3, 0),
    "fasta36_long_at_c.m10": (3, 0),
    "fasta36_long_o.m10": (3, 0),
    "fasta36_long_title.m10": (3, 0),
    "ssearch36_title_cut.m10": (1, 0),
    "fasta36_long_revcomp.m10": (3, 0),
    "fasta36_long_3_m9c.m10": (3, 0),
    "fastx36_long_query.m10": (3, 0),
    "ssearch36_long_protein.m10": (2, 0),
    "../pasta_extra/ssearch36_lib_subrange.m10": (1, 0),  # out of the bundled run: see make_samples.sh
}
_QLINE = re.compile(r"^\s*\d+>>>", re.M)
_QSIDE = re.compile(r"^>\S* \.\.\n; sq_len: (\d+)\n; sq_offset: (-?\d+)\n; sq_type: \w\n; al_start: (-?\d+)\n"
                    r"; al_stop: (-?\d+)\n", re.M)


def cli(path: Path, *args: str) -> tuple[int, list[dict], str]:
    out = subprocess.run([str(BIN), "parse", "--no-sequences", *args, str(path)], capture_output=True, text=True,
                         timeout=120)
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()], out.stderr


def file_blocks(name: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per query block of the file: its line number and the query side's (al_start, al_stop)
    of every alignment (the first side after each hit's score lines)."""
    text = (SAMPLES / name).read_text()
    starts = [m.start() for m in _QLINE.finditer(text)] + [len(text)]
    out = []
    for a, b in zip(starts, starts[1:]):
        block = text[a:b]
        sides = _QSIDE.findall(block)
        # each alignment prints the query side, then the library side: keep every other one
        out.append((1 + text[:a].count("\n"), [(int(s), int(e)) for _, _, s, e in sides[0::2]]))
    return out


def coords(doc: dict) -> list[tuple[int, int]]:
    return [(s["query_start"], s["query_end"]) for h in doc["hits"] for s in h["hsps"] if "query_start" in s]


@pytest.mark.parametrize("name", sorted(SAMPLES_26))
def test_every_form_parses_one_line_per_kept_block_with_the_files_coordinates(name):
    n_blocks, set_aside = SAMPLES_26[name]
    code, docs, err = cli(SAMPLES / name)
    assert code == 0, err
    blocks = file_blocks(name)
    assert len(blocks) == n_blocks
    assert len(docs) == n_blocks - set_aside
    for doc, (_, pairs) in zip(docs, blocks):
        seg = doc.get("query_segment") or {}
        shift = seg["offset"] - seg["printed_offset"] if "printed_offset" in seg else 0
        assert coords(doc) == [(min(a, b) + shift, max(a, b) + shift) for a, b in pairs]
        # every alignment lies in what was searched: the segment, else the range, else 1..length
        if seg:
            lo, hi = seg["offset"], seg["offset"] + seg["length"] - 1
        elif "query_range" in doc:
            lo, hi = doc["query_range"]["start"], doc["query_range"]["end"]
            assert hi - lo + 1 == doc["query_length"]
        else:
            lo, hi = 1, doc["query_length"]
        assert all(lo <= a <= b <= hi for a, b in coords(doc)), (lo, hi)
    if set_aside:
        lines = [line for line, _ in blocks[1:]]
        assert f"{SAMPLES / name}:{lines[0]}: {set_aside} query block(s) at line(s) " \
               f"{', '.join(map(str, lines))} set aside" in err
        assert "subrange" in err


def _one(name):
    code, docs, err = cli(SAMPLES / name)
    assert code == 0, err
    return docs, err


def test_subranges_of_short_queries_say_what_was_searched():
    (doc,), err = _one("ssearch36_subrange.m10")  # mgstm1.nt:101-400
    assert (doc["query_length"], doc["query_range"]) == (300, {"start": 101, "end": 400})
    assert coords(doc)[0] == (101, 400) and err == ""  # pGT875 against itself: the whole subrange
    docs, _ = _one("ssearch36_subrange_multi.m10")  # prot_queries.fa:11-100: FASTA cuts the first query only
    assert [d.get("query_range") for d in docs] == [{"start": 11, "end": 100}, None, None, None]
    assert [d["query_length"] for d in docs] == [90, 149, 193, 218]
    (doc,), _ = _one("ggsearch36_subrange_head.m10")  # mgstm1.aa:-100
    assert (doc["query_length"], doc["query_range"]) == (100, {"start": 1, "end": 100})
    (doc,), _ = _one("fasta36_subrange_open.m10")  # mgstm1.aa:101-
    assert (doc["query_length"], doc["query_range"]) == (118, {"start": 101, "end": 218})


def test_a_subrange_of_a_long_query_is_segment_1_and_the_blocks_past_it_are_placed():
    """FASTA goes on past a long query's subrange from residue 39,991, numbered from the subrange's
    length: placed (issue 43; more forms and the sequence check in test_pasta_long_subrange.py)."""
    docs, err = _one("ssearch36_long_subrange.m10")  # clone_long.fna:20001-21000 vs two pieces of it
    assert [(d["query_segment"]["offset"], d["query_segment"]["length"]) for d in docs] == [
        (20001, 1000), (39991, 39990), (79981, 6334)]
    assert {d["query_length"] for d in docs} == {CLONE} and all("query_range" not in d for d in docs)
    assert (docs[0]["hits"][0]["hit_id"], coords(docs[0])[0]) == ("clone_20001_21000", (20001, 21000))
    # past the subrange FASTA finds the piece 50001-50500 of the clone and numbers it 11011-11510
    # (38,990 short: the 39,990 residues of its first read less the 1,000 of the subrange)
    text = (SAMPLES / "ssearch36_long_subrange.m10").read_text()
    assert ">>clone_50001_50500" in text and "; al_start: 11011\n; al_stop: 11510\n" in text
    assert next(c for h, c in zip(docs[1]["hits"], coords(docs[1])) if h["hit_id"] == "clone_50001_50500") == (
        50001, 50500)
    assert [d["query_segment"].get("printed_offset") for d in docs] == [None, 1001, 40991]
    assert err.count("warning:") == 1 and "placed at residues 39991-86314" in err and "shifted by 38,990" in err
    docs, err = _one("fasta36_long_subrange_cross.m10")  # 39001-41000: its block stops at 39,990
    assert [(d["query_segment"]["offset"], d["query_segment"]["length"]) for d in docs] == [
        (39001, 990), (39991, 39990), (79981, 6334)]
    assert {json.dumps(d["query_range"]) for d in docs} == {json.dumps({"start": 39001, "end": CLONE})}
    assert "the subrange 39001-41000" in err and "shifted by 39,000" in err


def test_segments_numbered_from_an_at_c_header_are_renumbered_and_from_o_are_kept():
    docs, err = _one("fasta36_long_at_c.m10")
    assert [d["query_segment"]["offset"] for d in docs] == [1000001, 1039991, 1079981]
    assert [d["query_segment"].get("printed_offset") for d in docs] == [None, 39991, 79981]
    assert {json.dumps(d["query_range"]) for d in docs} == {json.dumps({"start": 1000001, "end": 1000000 + CLONE})}
    assert err.count("renumbered from") == 2
    # the plant: pGT875 at 39501 of the clone, i.e. 1039501 in the header's numbering
    def plant(doc):
        return next((s["query_start"], s["query_end"]) for h in doc["hits"] if h["hit_id"] == "pGT875" for s in h["hsps"])
    assert [plant(d) for d in docs] == [(1039501, 1039990), (1039991, 1040159), (1081995, 1082657)]
    docs, err = _one("fasta36_long_o.m10")  # -o "101 1": every segment shifted by 100, as printed
    assert [d["query_segment"]["offset"] for d in docs] == [101, 40091, 80081] and err == ""
    assert [d["query_segment"].get("printed_offset") for d in docs] == [None, None, None]
    assert docs[0]["query_range"] == {"start": 101, "end": 100 + CLONE}


def test_titles_cut_at_511_bytes():
    docs, err = _one("fasta36_long_title.m10")
    text = (SAMPLES / "fasta36_long_title.m10").read_text()
    lines = [line for line in text.splitlines() if _QLINE.match(line)]
    # 494 characters, a space, " - 39990 nt" (506); then cut at 511: " - 39" of the second suffix, and no more
    assert [len(line.split(">>>", 1)[1]) for line in lines] == [506, 511, 511]
    assert lines[1].endswith("  - 39990 nt - 39") and lines[2] == lines[1].replace("  2>>>", "  3>>>")
    assert [d["query_segment"]["length"] for d in docs] == [39990, 39990, 6334]
    assert {d["query_length"] for d in docs} == {CLONE} and err == ""
    assert {d["query_id"] for d in docs} == {"gi|900100|ref|NC_900100.1|"}
    (doc,), _ = _one("ssearch36_title_cut.m10")  # 600-character title: no " - 657 nt" on its line
    line = next(line for line in (SAMPLES / "ssearch36_title_cut.m10").read_text().splitlines() if _QLINE.match(line))
    assert len(line.split(">>>", 1)[1]) == 511 and not line.endswith(" nt")
    assert doc["query_length"] == 657 and doc["query_type"] == "dna"


@pytest.mark.parametrize("name,strand", [("fasta36_long_revcomp.m10", "-"), ("fasta36_long_3_m9c.m10", "+"),
                                         ("fastx36_long_query.m10", None)])
def test_segments_under_other_options_and_programs(name, strand):
    docs, err = _one(name)
    assert [d["query_segment"]["offset"] for d in docs] == [1, 39991, 79981] and err == ""
    assert {d["query_length"] for d in docs} == {CLONE}
    assert {d.get("searched_strand") for d in docs} == {strand}


def test_a_protein_in_segments():
    docs, _ = _one("ssearch36_long_protein.m10")
    assert [(d["query_segment"]["offset"], d["query_segment"]["length"]) for d in docs] == [(1, 39990), (39991, 28710)]
    assert {d["query_length"] for d in docs} == {68700} and {d["query_type"] for d in docs} == {"protein"}


def test_a_library_subrange_is_named_and_its_hits_count_in_the_whole_sequence():
    (doc,), err = _one("../pasta_extra/ssearch36_lib_subrange.m10")  # gst.nlib:101-500: every sequence cut
    assert doc["library_subrange"] == {"start": 101, "end": 500} and err == ""
    best = doc["hits"][0]
    assert (best["hit_id"], best["hit_length"]) == ("pGT875", 400)  # the piece's length, from the table
    assert (best["hsps"][0]["hit_start"], best["hsps"][0]["hit_end"]) == (101, 500)  # "; al_start: 101"
    assert all(101 <= s["hit_start"] <= s["hit_end"] <= 500 for h in doc["hits"] for s in h["hsps"] if "hit_start" in s)
    # Biopython 1.88 reads it: the same coordinates (0-based there) and the piece's length
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BiopythonParserWarning)
        (bq,) = SearchIO.parse(str(SAMPLES.parent / "pasta_extra" / "ssearch36_lib_subrange.m10"), "fasta-m10")
    aligned = [h for h in doc["hits"] if h.get("aligned", True)]
    theirs = [(h.id, h.seq_len, [(s.hit_start + 1, s.hit_end) for s in h.hsps]) for h in bq]
    ours = {}
    for h in aligned:  # Biopython merges the two strands of a DNA library sequence into one hit
        ours.setdefault(h["hit_id"], (h["hit_id"], h["hit_length"], []))[2].extend(
            (s["hit_start"], s["hit_end"]) for s in h["hsps"])
    assert list(ours.values()) == theirs


# ---- hostile edits of real files: refused with the file, the line and the reason, never misplaced

def test_an_alignment_outside_the_searched_subrange_is_refused():
    text = (SAMPLES / "ssearch36_subrange.m10").read_text()
    bad = text.replace("; al_start: 101\n; al_stop: 400\n", "; al_start: 121\n; al_stop: 420\n", 1)
    assert bad != text
    with pytest.raises(ParseError) as err:
        list(parse_dicts(io.BytesIO(bad.encode()), "bad.m10"))
    assert err.value.line == 9 and "query range 101-400" in str(err.value) and "lies outside it" in str(err.value)


def test_a_cut_title_with_no_length_anywhere_is_refused(tmp_path):
    text = (SAMPLES / "ssearch36_title_cut.m10").read_text()
    head, rest = text.split("Statistics:", 1)
    body = rest.split("\n", 1)[1]
    cut = head + "Statistics: Expectation_n fit: rho(ln(x))= 6.1\n" + body[: body.index("The best scores")] + \
        "!! No sequences with E() < 10\n>>><<<\n>>>///\n"
    path = tmp_path / "cut.m10"
    path.write_text(cut)
    code, docs, err = cli(path)
    assert code == 2 and docs == []
    assert f"{path}:9: the query line's title was cut at 511 bytes" in err


def test_two_queries_with_the_same_cut_title_stay_two_queries(tmp_path):
    """Identical cut titles continue each other only after a full 39,990-residue read: two copies
    of a 657 nt query under one 600-character title are two searches."""
    text = (SAMPLES / "ssearch36_title_cut.m10").read_text()
    block = text[text.index("  1>>>"):text.index(">>>///")]
    path = tmp_path / "twice.m10"
    path.write_text(text.replace(">>>///", block.replace("  1>>>", "  2>>>", 1) + ">>>///", 1))
    code, docs, err = cli(path)
    assert code == 0, err
    assert [d.get("query_segment") for d in docs] == [None, None] and [d["query_length"] for d in docs] == [657, 657]
