"""The blocks FASTA adds past a long query's subrange, placed in the sequence (issue 43, item 3;
ingest/parsers/pasta/segments.py ``_past_subrange``).

Real FASTA 36.3.8i outputs in samples/pasta (commands in make_samples.sh, "a subrange of a long
query"): subranges of the 86,314 nt clone (``inputs/clone_long.fna``) and of the 68,700 aa
``titin_twice.aa``, searched by ssearch36, fasta36, fasty36 and lalign36, starting at 1, inside
the first read, ending before and past residue 39,990, with ``@C:``, ``-o`` with ``-i``, and
``-3``.  FASTA searches the subrange, then reads on from residue 39,991 numbering from the
subrange's length.  Every placed alignment is checked against the real sequence: its query
residues, gaps removed, are the sequence at the placed coordinates (reverse-complemented on the
``-`` strand, translated for fasty36)."""

from __future__ import annotations

import io
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.parsers.pasta import parse, parse_dicts

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
EXTRA = SAMPLES.parent / "pasta_extra"  # outputs for the parser's tests only, outside the bundled run


def sample(name: str) -> Path:
    """A sample's path: bundled, else a parser-only one (samples/pasta/README.md)."""
    return SAMPLES / name if (SAMPLES / name).exists() else EXTRA / name

BIN = Path(sys.executable).parent / "sci-ingest"
CLONE, TITIN = "clone_long.fna", "titin_twice.aa"
AFTER = [(39991, 39990), (79981, 6334)]  # the clone's blocks past its first read of 39,990 nt

# name -> (sequence file, number of its residue 1 in the alignments' numbering less one (@C:, -o),
#          the segments' (offset, length), query_range)
CASES = {
    "ssearch36_long_subrange.m10": (CLONE, 0, [(20001, 1000)] + AFTER, None),
    "fasta36_long_subrange_cross.m10": (CLONE, 0, [(39001, 990)] + AFTER, (39001, 86314)),
    "fasta36_long_subrange_head.m10": (CLONE, 0, [(1, 5000)] + AFTER, None),
    "fasta36_long_subrange_open.m10": (CLONE, 0, [(30001, 9990)] + AFTER, (30001, 86314)),
    "fasta36_long_subrange_at_c.m10": (CLONE, 1000000, [(1020001, 1000), (1039991, 39990), (1079981, 6334)], None),
    "fasta36_long_subrange_o_i.m10": (CLONE, 100, [(20101, 1000), (40091, 39990), (80081, 6334)], None),
    "fasta36_long_subrange_3.m10": (CLONE, 0, [(1, 39990)] + AFTER, None),
    "fasty36_long_subrange.m10": (CLONE, 0, [(2001, 1000)] + AFTER, None),
    "lalign36_long_subrange.m10": (CLONE, 0, [(20001, 1000)] + AFTER, None),
    "ssearch36_long_subrange_protein.m10": (TITIN, 0, [(1001, 2000), (39991, 28710)], None),
}
_CODE = {"".join(c): "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"[i]
         for i, c in enumerate(itertools.product("TCAG", repeat=3))}
_QLINE = re.compile(r"^\s*\d+>>>", re.M)
# the query side of an alignment: its sq_offset (the block's numbering offset + 1, + the block's
# length on the reverse strand) and al_start/al_stop
_QSIDE = re.compile(r"^>\S* \.\.\n; sq_len: (\d+)\n; sq_offset: (\d+)\n; sq_type: \w\n; al_start: (\d+)\n"
                    r"; al_stop: (\d+)\n", re.M)


def sequence(name: str) -> str:
    return "".join((SAMPLES / "inputs" / name).read_text().split("\n", 1)[1].split()).upper()


def revcomp(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def translate(s: str) -> str:
    return "".join(_CODE.get(s[i:i + 3], "X") for i in range(0, len(s) - 2, 3))


def expected_residues(seq: str, hsp: dict, origin: int, translated: bool) -> tuple[str, str]:
    """(the HSP's query residues without gaps, the sequence at its placed coordinates); for a
    frameshift alignment (fasty36's ``/``, ``\\``) the residues before the first shift."""
    residues = hsp["query_seq"].replace("-", "")
    a, b = hsp["query_start"] - origin, hsp["query_end"] - origin  # 1-based in the sequence file
    minus = hsp.get("query_strand") == "-"
    if translated:
        residues = re.split(r"[/\\]", residues)[0]
        n = 3 * len(residues)
        return residues, translate(revcomp(seq[b - n:b]) if minus else seq[a - 1:a - 1 + n])
    return residues, revcomp(seq[a - 1:b]) if minus else seq[a - 1:b]


def file_sides(name: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per query block: its line and every alignment's query-side (al_start, al_stop), as printed."""
    text = sample(name).read_text()
    starts = [m.start() for m in _QLINE.finditer(text)] + [len(text)]
    return [(1 + text[:a].count("\n"), [(int(s), int(e)) for _, _, s, e in _QSIDE.findall(text[a:b])[0::2]])
            for a, b in zip(starts, starts[1:])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_places_every_block_and_says_by_how_much(name):
    _, origin, segments, rng = CASES[name]
    out = subprocess.run([str(BIN), "parse", "--no-sequences", str(sample(name))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    blocks = file_sides(name)
    assert len(docs) == len(blocks) == len(segments)
    assert [(d["query_segment"]["offset"], d["query_segment"]["length"]) for d in docs] == segments
    assert [d["query_segment"]["index"] for d in docs] == list(range(1, len(docs) + 1))
    assert {d["query_length"] for d in docs} == {39990 + sum(n for _, n in segments[1:])}
    want_range = None if rng is None else {"start": rng[0], "end": rng[1]}
    assert [d.get("query_range") for d in docs] == [want_range] * len(docs)
    first = segments[0][1]
    shift = 39990 - first + (1000000 if "at_c" in name else 0)  # 39,990 - L1 (+ @C:N - 1)
    for k, (doc, (_, printed)) in enumerate(zip(docs, blocks), start=1):
        moved = shift if k > 1 else 0
        seg = doc["query_segment"]
        assert seg.get("printed_offset") == (seg["offset"] - moved if moved else None)
        got = [(s["query_start"], s["query_end"]) for h in doc["hits"] for s in h["hsps"] if "query_start" in s]
        assert got == [(min(a, b) + moved, max(a, b) + moved) for a, b in printed]
        assert all(seg["offset"] <= a <= b < seg["offset"] + seg["length"] for a, b in got)
    lines = [line for line, _ in blocks[1:]]
    end = origin + 39990 + sum(n for _, n in segments[1:])
    said = (f"{sample(name)}:{lines[0]}: {len(lines)} query block(s) at line(s) {', '.join(map(str, lines))} "
            f"placed at residues {segments[1][0]}-{end}: FASTA went on past the subrange ")
    assert out.stderr.count("warning:") == 1 and said in out.stderr, out.stderr
    assert (f"shifted by {shift:,} (query_segment.printed_offset keeps FASTA's number)" in out.stderr) == (shift != 0)


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_placed_alignment_is_the_query_sequence_there(name, fast):
    seqfile, origin, _, _ = CASES[name]
    seq = sequence(seqfile)
    data = sample(name).read_bytes()
    docs = list(parse_dicts(io.BytesIO(data), name, fast=fast, sequences=True))
    checked = moved = pieces = 0
    for doc in docs:
        for hit in doc["hits"]:
            for hsp in hit["hsps"]:
                if "query_start" not in hsp:
                    continue
                residues, there = expected_residues(seq, hsp, origin, name.startswith("fasty"))
                assert residues and residues == there, (doc["query_segment"], hit["hit_id"], hsp["query_start"])
                checked += 1
                moved += "printed_offset" in doc["query_segment"]
                # a piece of the query cut out as a library sequence lies where it was cut
                m = re.fullmatch(r"(?:clone|titin)_(\d+)_(\d+)r?", hit["hit_id"])
                if m and hsp["hit_start"] == 1 and hsp["hit_end"] == int(m[2]) - int(m[1]) + 1:
                    assert (hsp["query_start"] - origin, hsp["query_end"] - origin) == (int(m[1]), int(m[2]))
                    pieces += 1
    assert checked >= 2 and (moved > 0) == ("_3." not in name)  # -3 :-39990: FASTA's numbering is right
    # pieces of the query in the library: none for fasty36 (translations) and the gst.nlib run
    assert pieces >= {"fasty36_long_subrange.m10": 0, "fasta36_long_subrange_cross.m10": 0,
                      "fasta36_long_subrange_o_i.m10": 1}.get(name, 2), pieces
    # both paths, objects and dicts, give the same documents
    other = [q.to_dict() for q in parse(io.BytesIO(data), name, fast=not fast, sequences=True)]
    assert [json.dumps(d) for d in other] == [json.dumps(d) for d in docs]


def test_blocks_that_contradict_the_rule_are_set_aside_saying_why(tmp_path):
    """Edited: the first alignment past the subrange numbered 10 further on than FASTA's rule
    gives; the blocks past the subrange are set aside, the subrange's block kept as before."""
    text = (SAMPLES / "ssearch36_long_subrange.m10").read_text()
    bad = text.replace("; sq_offset: 1001\n", "; sq_offset: 1011\n", 1)
    assert bad != text
    path = tmp_path / "bad.m10"
    path.write_text(bad)
    out = subprocess.run([str(BIN), "parse", "--no-sequences", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    (doc,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert (doc["query_length"], doc["query_range"]) == (1000, {"start": 20001, "end": 21000})
    assert "query_segment" not in doc
    lines = [line for line, _ in file_sides("ssearch36_long_subrange.m10")[1:]]
    assert (f"{path}:{lines[0]}: 2 query block(s) at line(s) {lines[0]}, {lines[1]} set aside: FASTA went on past "
            f"the subrange 20001-21000") in out.stderr
    assert (f"the block at line {lines[0]} is numbered from 1011, not from 1001 as FASTA numbers the blocks after a "
            f"subrange: their positions in the sequence are unknown") in out.stderr


def test_a_subrange_block_of_another_length_than_fasta_cuts_is_not_placed():
    """Edited: the command line asks for 20001-21010 while the block holds 1,000 residues (not
    what FASTA cuts from its first read): the blocks past it are set aside, not shifted by a guess."""
    text = (SAMPLES / "ssearch36_long_subrange.m10").read_text().replace("20001-21000", "20001-21010")
    warnings: list[str] = []
    docs = list(parse_dicts(io.BytesIO(text.encode()), "x.m10", warn=warnings.append))
    assert len(docs) == 1 and docs[0]["query_range"] == {"start": 20001, "end": 21000}
    assert any("set aside" in w and "the subrange's block has 1000 residues, not the 1010 FASTA cuts" in w
               for w in warnings), warnings


def test_blocks_without_alignments_are_placed_by_the_rule_alone():
    """glsearch36 finds nothing in either block: no offset is printed, the blocks are placed from
    the subrange and FASTA's read of 39,990 residues, and the warning says nothing was shifted."""
    path = EXTRA / "glsearch36_long_subrange_nohit.m10"
    out = subprocess.run([str(BIN), "parse", "--no-sequences", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["query_segment"] for d in docs] == [{"index": 1, "count": 2, "offset": 1001, "length": 2000},
                                                  {"index": 2, "count": 2, "offset": 39991, "length": 28710}]
    assert {d["query_length"] for d in docs} == {68700} and [d["hits"] for d in docs] == [[], []]
    line = file_sides(path.name)[1][0]
    assert (f"{path}:{line}: 1 query block(s) at line(s) {line} placed at residues 39991-68700: FASTA went on past "
            f"the subrange 1001-3000") in out.stderr
    assert out.stderr.rstrip().endswith("(a FASTA 36 defect): they hold no alignment to shift")
