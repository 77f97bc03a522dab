"""FASTA-suite options beyond the basic samples: values pinned from the sample files.

* ``-m 10 -m 9c`` / ``9C`` / ``9B`` (two ``-m`` options: not ``-m "10 9c"``, which is
  plain ``-m 10``): the best-scores table gets ``-m 9`` columns after a tab, ``+-`` rows
  (more alignments of the sequence of the row above) and, for 9c, the alignments end
  with ``; al_code:``.  Biopython raises on the ``; al_code:`` lines.
* ``-a -w 80`` (whole sequences, wider lines), ``-M 200-250`` (library length range),
  RNA queries with ``-n`` (U in the query, T in the library) and ``-U`` (forward strand
  only, U shown on both sides).

The comments give the line of the sample each value is read from.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ingest.errors import ParseError
from ingest.parsers.pasta import parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"


def load(name: str):
    return list(parse(io.BytesIO((SAMPLES / name).read_bytes()), name))


def test_m9c_table_and_al_code_lines():
    (q,) = load("ssearch36_m9c.m10")
    # table lines 20-28: 8 sequences (-b 8), "+-" at line 23; -d 4 alignments
    assert [(h.hit_id, h.rank, h.aligned, len(h.hsps)) for h in q.hits] == [
        ("GT8.7", 1, True, 1),
        ("OKBO2C", 2, True, 1),
        ("FEPE", 3, True, 2),
        ("CCHU", 4, True, 1),
        ("K3HU", 5, False, 1),
        ("K1HUAG", 6, False, 1),
        ("N2KF1U", 7, False, 1),
        ("RKMDS", 8, False, 1),
    ]
    # line 20: sw 100, gapq 6, gapl 9, fs 0; line 79: "; al_code: =45-4=15-1=4-2=46-2=2+3=10+3=8"
    assert q.hits[0].hsps[0].extra == {"sw": 100, "gapq": 6, "gapl": 9, "fs": 0, "al_code": "=45-4=15-1=4-2=46-2=2+3=10+3=8"}
    fepe = q.hits[2]
    # the ">--" alignment (lines 149-180) is the "+-" row (line 23)
    alt = fepe.hsps[1]
    assert (alt.score, alt.bits, alt.evalue, alt.identity, alt.overlap) == (25, 17.6, 0.61, 0.318, 22)
    assert alt.extra == {"sw": 25, "gapq": 0, "gapl": 1, "fs": 0, "al_code": "=7-1=14"}  # lines 23, 180
    assert alt.consensus.startswith(".:. :: -:.")  # line 178, after 30 columns of context
    assert fepe.hsps[0].extra["al_code"] == "=4"  # line 148
    # table-only row, line 25: K3HU ( 106) 45 17.7 1.1 | 0.296 0.593 45 27 115 141 1 209 5 31 1 106 0 0 0 =27
    k3 = q.hits[4].hsps[0]
    assert q.hits[4].hit_length == 106
    assert (k3.score, k3.opt_score, k3.bits, k3.evalue) == (45, 45, 17.7, 1.1)
    assert (k3.identity, k3.similarity, k3.overlap) == (0.296, 0.593, 27)
    assert (k3.query_start, k3.query_end, k3.hit_start, k3.hit_end) == (115, 141, 5, 31)
    assert k3.query_strand is None and k3.hit_strand is None and k3.query_seq is None
    assert k3.extra == {"sw": 45, "gapq": 0, "gapl": 0, "fs": 0, "al_code": "=27"}


def test_m9c_biopython_fields_are_unchanged_by_the_extra_format():
    """-m 10 -m 9c and plain -m 10 (ssearch36_prot.m10, the same search) give the same
    alignments; only the extras are new."""
    (a,) = load("ssearch36_m9c.m10")
    (b,) = load("ssearch36_prot.m10")
    for ha, hb in zip(a.hits[:4], b.hits[:4], strict=True):
        for xa, xb in zip(ha.hsps, hb.hsps, strict=True):
            da, db = xa.to_dict(), xb.to_dict()
            assert da.pop("extra") and "extra" not in db
            assert da == db


def test_m9C_table_only_hits_with_several_alignments():
    (q,) = load("ssearch36_m9C_alt.m10")
    assert q.query_id == "sp|P62158|CALM_HUMAN" and q.query_description == "Calmodulin; CaM"  # line 9
    assert [(h.hit_id, h.aligned, len(h.hsps)) for h in q.hits] == [
        ("TPHUCS", True, 1),
        ("FEPE", True, 1),
        ("GT8.7", False, 3),  # lines 22-24: a row and two "+-" rows
        ("K3HU", False, 1),
        ("K1HUAG", False, 1),
        ("RKMDS", False, 2),  # lines 27-28
        ("CCHU", False, 1),
        ("N2KF1U", False, 1),
    ]
    assert [h.rank for h in q.hits] == list(range(1, 9))
    # -m 9C prints no "; al_code:" line: the CIGAR comes from the table (line 20)
    assert q.hits[0].hsps[0].extra["al_code"] == "76M3I66M"
    gt = q.hits[2].hsps
    assert [(x.score, x.evalue, x.query_start, x.query_end, x.hit_start, x.hit_end, x.extra["al_code"]) for x in gt] == [
        (47, 1.5, 39, 97, 34, 88, "6M1D15M3D34M"),
        (47, 1.5, 67, 78, 125, 136, "12M"),
        (37, 5.6, 99, 124, 6, 30, "17M1D8M"),
    ]
    assert q.hits[2].hit_length == 218


def test_m9B_dna_table_strands_and_btop():
    (q,) = load("ssearch36_dna_m9B.m10")
    assert (q.query_id, q.query_description, q.query_length) == ("pGT875", None, 657)  # line 9
    assert [(h.hit_id, h.aligned, h.hsps[0].frame) for h in q.hits] == [
        ("pGT875", True, "f"),
        ("RABGLTR", True, "f"),
        ("BTGST", False, "f"),
        ("RABGSTB", False, "f"),
        ("RABALP1A", False, "f"),
        ("OCDHPR", False, "f"),
        ("RABALP1A", False, "r"),
        ("OCDHPR", False, "r"),
    ]
    # -m 9B: no "aln_code" in the header (line 19) but a BTOP string after a second tab
    assert q.hits[0].hsps[0].extra == {"sw": 3285, "gapq": 0, "gapl": 0, "fs": 0, "al_code": "657"}  # line 20
    # line 26: RABALP1A (6080) [r] 99 30.0 0.01 | 0.565 0.565 99 246 387 154 657 1 1047 1274 1 6080 12 18 0
    x = q.hits[6].hsps[0]
    assert (x.score, x.bits, x.evalue, x.identity, x.overlap) == (99, 30.0, 0.01, 0.565, 246)
    assert (x.query_start, x.query_end, x.query_strand) == (154, 387, "-")
    assert (x.hit_start, x.hit_end, x.hit_strand) == (1047, 1274, "+")
    assert (x.extra["gapq"], x.extra["gapl"]) == (12, 18)
    assert x.extra["al_code"].startswith("4AG1GC4CTTC7GC1TA1-G4ACAC2CG-T1GCGCGATG2TC1AT2GCA-G-4AGTA")


def test_whole_sequences_and_wide_lines_change_only_the_display():
    """-a -w 80: whole sequences shown (al_display_start 1, lines 53 and 65), 80
    columns a line; the aligned strings are the same as in ssearch36_prot.m10."""
    (a,) = load("ssearch36_full_seq.m10")
    (b,) = load("ssearch36_prot.m10")
    assert [h.hit_id for h in a.hits] == ["GT8.7", "OKBO2C", "FEPE", "CCHU"]  # -E 1: lines 20-23
    for ha, hb in zip(a.hits, b.hits):
        assert ha.hsps[0].to_dict() == hb.hsps[0].to_dict()
    x = a.hits[0].hsps[0]
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (53, 191, 60, 195)  # lines 51-52, 63-64
    assert len(x.query_seq) == len(x.hit_seq) == len(x.consensus) == x.overlap == 145


def test_library_length_range():
    (q,) = load("ssearch36_range.m10")
    # line 10: "Library: inputs/prot_lib.fa (range: 200-250)"; line 11: 3798 residues in 18 sequences
    assert (q.library, q.library_range) == ("inputs/prot_lib.fa", "200-250")
    assert (q.library_residues, q.library_sequences) == (3798, 18)
    assert q.to_dict()["library_range"] == "200-250"
    assert all(200 <= h.hit_length <= 250 for h in q.hits)
    assert "library_range" not in load("ssearch36_prot.m10")[0].to_dict()


def test_rna_query_with_n():
    q1, q2 = load("ssearch36_rna.m10")
    assert (q1.query_id, q1.query_length, q1.query_type, q1.library_type) == ("rna_frag1", 240, "dna", "dna")
    assert q1.searched_strand is None and len(q1.hits) == 10 and len(q2.hits) == 10
    x = q1.hits[0].hsps[0]  # lines 43-85: pGT875, 1-240 vs 38-277, identity 1.000
    assert (x.query_start, x.query_end, x.query_strand, x.hit_start, x.hit_end, x.hit_strand) == (1, 240, "+", 38, 277, "+")
    assert x.identity == 1.0
    # the query is shown with U (line 61), the library with T (line 75): U matches T
    assert x.query_seq.startswith("AUGCCUAUGAUACUGGGAUA") and "T" not in x.query_seq
    assert x.hit_seq.startswith("ATGCCTATGATACTGGGATA") and "U" not in x.hit_seq
    assert x.query_seq.replace("U", "T") == x.hit_seq and x.consensus == ":" * 240
    # lines 232-258: OCDHPR on the reverse strand, query 216 -> 154
    r = q1.hits[5]
    assert r.hit_id == "OCDHPR" and r.hsps[0].frame == "r"
    y = r.hsps[0]
    assert (y.query_start, y.query_end, y.query_strand, y.hit_start, y.hit_end, y.hit_strand) == (154, 216, "-", 1213, 1274, "+")
    assert (y.score, y.identity, y.overlap) == (77, 0.641, 64)


def test_rna_query_with_U_forward_only():
    q1, q2 = load("fasta36_rna_U.m10")
    assert q1.searched_strand == "+"  # line 8: "... - 240 nt (forward-only)"
    assert [h.hit_id for h in q1.hits] == ["pGT875", "RABGLTR", "BTGST"]
    x, alt = q1.hits[0].hsps  # fasta36 shows a second alignment of pGT875 (">--", line 83)
    # -U shows the library with U too (line 70)
    assert x.hit_seq.startswith("AUGCCUAUGAUACUGGGAUA") and x.hit_seq == x.query_seq
    assert (alt.opt_score, alt.initn_score, alt.init1_score, alt.identity, alt.overlap) == (137, 148, 50, 0.471, 223)
    assert (alt.query_start, alt.query_end, alt.hit_start, alt.hit_end) == (22, 228, 298, 514)
    # line 22: the table's "opt" column says 75 for BTGST, its alignment "; fa_opt: 139"
    assert q1.hits[2].hsps[0].opt_score == 139


@pytest.mark.parametrize("name", ["ssearch36_m9c.m10", "ssearch36_m9C_alt.m10", "ssearch36_dna_m9B.m10"])
def test_m9_extras_survive_without_sequences(name):
    full = load(name)
    lean = list(parse(io.BytesIO((SAMPLES / name).read_bytes()), name, sequences=False))
    for a, b in zip(full, lean, strict=True):
        assert [x.extra for h in a.hits for x in h.hsps] == [x.extra for h in b.hits for x in h.hsps]


def _without_command(d: dict) -> dict:
    d = dict(d, params=dict(d.get("params") or {}))
    d.pop("command", None)
    d["params"].pop("pg_argv", None)
    return d


def test_F10_file_has_no_query_terminators_and_parses_like_stdout():
    """-m "F10 FILE" writes no ">>><<<": query 2 starts at line 366 right after the
    last alignment of query 1, and query 3 (no hits, no "!!" line) is followed at line
    438 by query 4.  The search is the one of ssearch36_prot_multi.m10 (stdout -m 10),
    so everything but the command line is the same."""
    f10 = load("ssearch36_F10_file.m10")
    multi = load("ssearch36_prot_multi.m10")
    assert [q.query_id for q in f10] == ["GTT1_DROME", "sp|P62158|CALM_HUMAN", "H10_HUMAN", "sp|P10649|GSTM1_MOUSE"]
    assert [len(q.hits) for q in f10] == [9, 1, 0, 7]
    assert f10[0].command.startswith('ssearch36 -m "F10 ssearch36_F10_file.m10"')
    assert [_without_command(q.to_dict()) for q in f10] == [_without_command(q.to_dict()) for q in multi]
    # without the "# ssearch36 ..." line the "; pg_argv:" line tells the same
    lines = (SAMPLES / "ssearch36_F10_file.m10").read_bytes().split(b"\n")
    headless = b"\n".join(line for line in lines if not line.startswith(b"# "))
    assert [len(q.hits) for q in parse(io.BytesIO(headless), "headless.m10")] == [9, 1, 0, 7]


def test_m9i_table_columns_and_no_query_terminator():
    (q,) = load("ssearch36_m9i.m10")
    # table lines 20-26: "%_id %_sim alen" are plain columns; -d 3: three aligned hits
    assert [(h.hit_id, h.aligned, len(h.hsps)) for h in q.hits] == [
        ("GT8.7", True, 1), ("OKBO2C", True, 1), ("FEPE", True, 2),
        ("CCHU", False, 1), ("K3HU", False, 1), ("K1HUAG", False, 1),
    ]  # fmt: skip
    # line 24: CCHU | 1 | Cytochrome c - Human     ( 105)   47 18.2     0.8 0.310 0.548   42
    cchu = q.hits[3].hsps[0]
    assert (cchu.opt_score, cchu.bits, cchu.evalue) == (47, 18.2, 0.8)
    assert (cchu.identity, cchu.similarity, cchu.overlap) == (0.310, 0.548, 42)


def test_missing_query_terminator_is_still_damage_in_plain_m10_runs():
    """Only runs whose command line asks for such output may leave out ">>><<<"."""
    text = (SAMPLES / "ssearch36_prot_multi.m10").read_bytes()
    cut = text.replace(b">>><<<\n", b"", 1)
    with pytest.raises(ParseError) as err:
        list(parse(io.BytesIO(cut), "spliced.m10"))
    assert err.value.line is not None and err.value.source == "spliced.m10"


def test_headers_with_a_space_after_the_gt_sign():
    """'> GTT1_DROME ...' (query) and '>  CCHU ...' (library): FASTA shows no name for
    them - line 32 '>>>, 209 aa vs ...', line 54 '> ..', line 20 '  GT8.7 | 266 ...' -
    so the ids come from the first word; the search is the one of ssearch36_prot.m10."""
    (q,) = load("ssearch36_nameless.m10")
    (plain,) = load("ssearch36_prot.m10")
    assert q.query_id == "GTT1_DROME" and q.query_description.startswith("GLUTATHIONE S-TRANSFERASE 1-1")
    assert [h.hit_id for h in q.hits] == [h.hit_id for h in plain.hits]
    assert q.hits[0].hit_id == "GT8.7" and q.hits[0].hit_description == "| 266 | transl. of pa875.con, 19 to 675"
    for a, b in zip(q.hits, plain.hits, strict=True):
        assert [x.to_dict() for x in a.hsps] == [x.to_dict() for x in b.hsps]


def test_annotations_with_m9c():
    """-V "*@": line 83 '; al_code_ann: |*X:60Gz67S|@X:120K=122K' follows the '; al_code:'
    line of GT8.7; table-only rows carry it after a third tab (line 29, RKMDS)."""
    (q,) = load("ssearch36_annot_m9c.m10")
    assert [h.hit_id for h in q.hits if h.aligned] == ["GT8.7", "OKBO2C", "FEPE", "CCHU", "K3HU", "K1HUAG"]
    gt = q.hits[0].hsps[0].extra
    assert gt["al_code"] == "=45-4=15-1=4-2=46-2=2+3=10+3=8" and gt["al_code_ann"] == "|*X:60Gz67S|@X:120K=122K"
    assert q.hits[4].hsps[0].extra["al_code_ann"] == "|@X:120K<10F"  # line 254
    assert "al_code_ann" not in q.hits[5].hsps[0].extra  # K1HUAG: no annotated residue aligned
    rkmds = next(h for h in q.hits if h.hit_id == "RKMDS")
    assert not rkmds.aligned
    assert rkmds.hsps[0].extra == {"sw": 41, "gapq": 4, "gapl": 1, "fs": 0, "al_code": "=11+4=6-1=9",
                                   "al_code_ann": "|*X:60G=109G"}


def test_long_library_sequence_searched_in_pieces():
    """-N 2000 on a 6657-nt sequence: line 72-76 '; sq_len: 1990', '; sq_offset: 1841',
    '; al_start: 2501', '; al_stop: 3157' (a piece; coordinates in the whole sequence);
    line 20 of the table: '(6657)'.  Every piece is its own row and hit, all of them
    with the whole sequence's length; the alignment is where pGT875 was inserted."""
    (q,) = load("ssearch36_dna_pieces.m10")
    assert len(q.hits) == 7 and all(h.aligned and h.hit_id == "chrT" for h in q.hits)
    assert {h.hit_length for h in q.hits} == {6657}
    top = q.hits[0].hsps[0]
    assert (top.hit_start, top.hit_end, top.hit_strand, top.query_start, top.query_end) == (2501, 3157, "+", 1, 657)
    assert top.identity == 1.0 and top.query_seq == top.hit_seq
    # row 2 (line 21) is a first piece: "; sq_offset: 1" with sq_len 1990 (line 130)
    assert q.hits[1].hit_length == 6657
