"""Field-by-field comparison with Biopython 1.88 ``Bio.SearchIO.parse(path, "fasta-m10")``.

Mapping (Biopython -> ours):

* coordinates: Biopython is 0-based half-open (``start = min - 1``, ``end = max``),
  ours 1-based inclusive; Biopython strands are 0 (protein) / 1 / -1, ours None/"+"/"-".
* ``bitscore``->``bits``, ``evalue``, ``z_score``, ``opt_score`` (Biopython only maps
  ``*_opt`` and ``*_s-w opt``, not ``*_n-w opt``), ``sw_score``->``score`` (Biopython
  only when a ``*_score`` line exists), ``ident_pct``/``pos_pct`` = 100 x our fractions,
  ``initn_score``/``init1_score``, ``aln_annotation["similarity"]``->``consensus``.
* Biopython merges the two strands of a DNA library sequence into one Hit (HSPs in
  file order) and drops hits shown only in the best-scores table; ours keeps one Hit
  per table row.  The comparison groups ours the same way.
* For tfastx/tfasty Biopython keeps the whole displayed sequence (context included);
  ours is the aligned part of it.  Biopython also gives the DNA library side strand 0
  there (it goes by the displayed translation); ours gives "+"/"-".

Biopython raises on several real samples (its regex does not accept a query line with
"(forward-only)"/"(reverse complement)", a display name without the "gi|NNN|" prefix, a
global alignment starting with a gap, or fastx/fasty coordinates); for those our values
are pinned to numbers read from the files (file line numbers in the comments).
"""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

import pytest
from Bio import BiopythonParserWarning, SearchIO

from ingest.parsers.pasta import parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"

BIO_PARSES = [
    "../pasta_extra/fastf36_unaligned_rows.m10",  # a row of E() 2.7e+29 left without one (test_pasta_peptides.py)
    # -H histograms (issue 43): Biopython skips them
    "../pasta_extra/histogram_ssearch36_prot.m10",
    "../pasta_extra/histogram_fasta36_prot.m10",
    "../pasta_extra/histogram_ssearch36_dna.m10",
    "../pasta_extra/histogram_fasta36_dna.m10",
    "../pasta_extra/histogram_ssearch36_inset.m10",
    "concatenated_runs.m10",  # Biopython reads the first run only
    "fasta36_dna.m10",
    "fasta36_prot.m10",
    "glsearch36.m10",
    "lalign36.m10",
    "ssearch36_mu.m10.gz",
    "ssearch36_no_alignments.m10",
    "ssearch36_nostats.m10",
    "ssearch36_prot.m10",
    "ssearch36_prot_alt.m10",
    "ssearch36_prot_multi.m10",
    "ssearch36_table_only.m10",
    "tfastx36.m10",
    "tfasty36.m10",
    # more options (Biopython ignores the -m 9C/9B table columns and "+-" rows)
    "ssearch36_dna_m9B.m10",
    "ssearch36_full_seq.m10",
    "ssearch36_m9C_alt.m10",
    "ssearch36_range.m10",  # -M: our library name leaves out "(range: ...)", as Biopython's
    "ssearch36_rna.m10",
    "ssearch36_m9i.m10",  # -m 10 -m 9i: no ">>><<<" after the query
    "ssearch36_m9i_d0.m10",  # idem with -d 0: the table runs into the next query's line
    "tfastx36_m9C_table.m10",  # -m 9C rows of table-only hits
    "ssearch36_F10_file.m10",  # -m "F10 FILE": no ">>><<<" after each query
    "ssearch36_dna_pieces.m10",  # one sequence in pieces: Biopython keeps a piece's length
    # a long query searched in segments: Biopython gives each segment's length and the
    # announce text with its " - 39990 nt" suffixes as the description (see test_field_by_field)
    "fasta36_long_query.m10",
    "ssearch36_long_query.m10",
    # where a query sits in its sequence (issue 26): subranges, segments numbered from @C: or -o,
    # a protein in segments; the segments after an @C: header and the blocks FASTA adds past a
    # long query's subrange renumbered (printed_offset; issue 43: the latter were set aside)
    "ssearch36_subrange.m10",
    "ssearch36_subrange_multi.m10",
    "ggsearch36_subrange_head.m10",
    "fasta36_subrange_open.m10",
    "ssearch36_long_subrange.m10",
    "fasta36_long_subrange_cross.m10",
    "fasta36_long_at_c.m10",
    "fasta36_long_o.m10",
    "ssearch36_long_protein.m10",
    "../pasta_extra/fasta36_long_subrange_head.m10",
    "../pasta_extra/fasta36_long_subrange_open.m10",
    "../pasta_extra/fasta36_long_subrange_at_c.m10",
    "../pasta_extra/lalign36_long_subrange.m10",
    "../pasta_extra/ssearch36_long_subrange_protein.m10",
    "../pasta_extra/glsearch36_long_subrange_nohit.m10",
]
BIO_RAISES = [
    # issue 43 (values pinned in test_pasta_histogram_names.py): FASTA's gi-stripped query names
    # ("345664|pir|| .." for "gi|345664 gi|345664|pir||A45388 ..."), titles cut inside " - 133 aa"
    "../pasta_extra/gi_stripped_runs.m10",
    "../pasta_extra/ssearch36_title_suffix_cut.m10",
    "fasta36_dna_ref.m10",
    "fastx36.m10",
    "fasty36.m10",
    "ggsearch36.m10",
    "ssearch36_dna_fwd.m10",
    "ssearch36_dna_ref.m10",
    "ssearch36_dna_revcomp.m10",
    "ssearch36_titin_alt.m10",
    "ssearch36_m9c.m10",  # "; al_code:" lines (-m 10 -m 9c)
    "fasta36_rna_U.m10",  # -U: "(forward-only)" on the query line
    "ssearch36_nameless.m10",  # FASTA headers "> ID": the summary line names no query
    "ssearch36_annot_m9c.m10",  # "; al_code:" lines (-m 10 -m 9c)
    # peptide mixtures: "- 39 aa in 6 fragments" on the query line (values pinned in test_pasta_peptides.py)
    "fasts36_peptides.m10",
    "fastm36_peptides.m10",
    "tfasts36_peptides.m10",
    "tfastm36_peptides.m10",
    "fastf36_peptides.m10",
    "tfastf36_peptides.m10",
    "../pasta_extra/fasts36_table_only.m10",  # a hit of the table only without a score (test_pasta_peptides.py)
    "../pasta_extra/tfasts36_unaligned_rows.m10",  # rows of empty alignments left without one (test_pasta_peptides.py)
    # issue 26 (values pinned in test_pasta_ranges.py): titles cut at 511 bytes, segments with
    # "(reverse complement)"/"(forward-only)", fastx coordinates
    "fasta36_long_title.m10",
    "ssearch36_title_cut.m10",
    "fasta36_long_revcomp.m10",
    "fasta36_long_3_m9c.m10",
    "fastx36_long_query.m10",
    # issue 43 (values pinned in test_pasta_long_subrange.py): past a long query's subrange with
    # "(reverse complement)"/"(forward-only)", fasty36's frameshifts
    "../pasta_extra/fasta36_long_subrange_o_i.m10",
    "../pasta_extra/fasta36_long_subrange_3.m10",
    "../pasta_extra/fasty36_long_subrange.m10",
]


def text_of(name: str) -> str:
    data = (SAMPLES / name).read_bytes()
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode()


def ours(name: str):
    return list(parse(io.BytesIO(text_of(name).encode()), name))


def bio(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BiopythonParserWarning)
        return list(SearchIO.parse(io.StringIO(text_of(name)), "fasta-m10"))


def test_every_sample_is_classified():
    """Every sample, bundled or for the parser's tests only (samples/pasta_extra, but the library
    subrange test_pasta_ranges.py checks)."""
    names = sorted([p.name for p in SAMPLES.iterdir() if p.name.endswith((".m10", ".m10.gz"))]
                   + ["../pasta_extra/" + p.name for p in (SAMPLES.parent / "pasta_extra").iterdir()
                      if p.name.endswith(".m10") and p.name != "ssearch36_lib_subrange.m10"])
    assert names == sorted(BIO_PARSES + BIO_RAISES)


def test_biopython_merges_the_pieces_of_a_long_sequence():
    """-N 2000: the 7 alignments with pieces of chrT (rows 20-26 of the table) come out of
    Biopython as one hit with the length of one piece (sq_len 1990), not 6657."""
    (bq,) = bio("ssearch36_dna_pieces.m10")
    assert [(h.id, h.seq_len) for h in bq] == [("chrT", 1990)]
    (q,) = ours("ssearch36_dna_pieces.m10")
    assert len(q.hits) == 7 and {h.hit_length for h in q.hits} == {6657}


@pytest.mark.parametrize("name", BIO_RAISES)
def test_biopython_raises_and_we_do_not(name):
    with pytest.raises((ValueError, AttributeError, AssertionError)):
        bio(name)
    assert ours(name)


def _strand(ours_strand, bio_strand):
    return {None: 0, "+": 1, "-": -1}[ours_strand] == bio_strand


def _attr(obj, name):
    try:
        return getattr(obj, name)
    except AttributeError:
        return None


@pytest.mark.parametrize("name", BIO_PARSES)
def test_field_by_field(name):
    mine = ours(name)
    theirs = bio(name)
    if name == "concatenated_runs.m10":
        mine = mine[:1]
    assert [q.query_id for q in mine] == [q.id for q in theirs]
    compared = 0
    before: list[int] = []  # the lengths of a query's segments before this one
    for q, b in zip(mine, theirs):
        if q.query_segment is None:
            assert q.query_length == b.seq_len
            assert (q.query_description or "") == b.description.strip()
        else:  # Biopython: the segment's length, the description with the suffixes FASTA appends
            assert q.query_segment["length"] == b.seq_len
            if q.query_segment["index"] == 1:
                before = []
            unit = "nt" if q.query_type == "dna" else "aa"
            assert b.description.strip() == q.query_description + "".join(f" - {n} {unit}" for n in before)
            before.append(q.query_segment["length"])
        # segments after an @C: header, blocks past a long query's subrange, are renumbered
        # (FASTA's numbering is off there): by this much
        shift = q.query_segment["offset"] - q.query_segment["printed_offset"] if (
            q.query_segment and "printed_offset" in q.query_segment) else 0
        assert q.program.startswith(b.program)  # "ssearch36" / "ssearch"
        assert q.version.split()[0] == b.version  # "36.3.8i Nov, 2022" / "36.3.8i"
        if q.params is not None:
            assert q.library == b.target
        # group our aligned hits by id, as Biopython does
        grouped: dict[str, list] = {}
        hit_of: dict[str, object] = {}
        for h in q.hits:
            if h.aligned:
                grouped.setdefault(h.hit_id, []).extend(h.hsps)
                hit_of.setdefault(h.hit_id, h)
        assert list(grouped) == [h.id for h in b]
        for bh in b:
            h = hit_of[bh.id]
            if name == "ssearch36_dna_pieces.m10":
                # the length of the piece its first alignment shows (sq_len) against the
                # whole sequence's, from the best-scores table (test below)
                assert (bh.seq_len, h.hit_length) == (1990, 6657)
            elif name.rpartition("/")[2].startswith("histogram_"):  # -N cuts titin (34,350 aa) and the clone (86,314 nt)
                assert bh.seq_len < h.hit_length == {"sp|Q8WZ42|TITIN_HUMAN": 34350, "clone_long": 86314}[h.hit_id]
            else:
                assert h.hit_length == bh.seq_len
            assert (h.hit_description or "") == bh.description.strip()
            assert len(grouped[bh.id]) == len(bh.hsps)
            for x, y in zip(grouped[bh.id], bh.hsps):
                assert x.query_start - 1 == y.query_start + shift and x.query_end == y.query_end + shift
                assert x.hit_start - 1 == y.hit_start and x.hit_end == y.hit_end
                assert _strand(x.query_strand, y.query_strand)
                if "tfast" in q.program:
                    # Biopython takes the displayed translation for protein (strand 0);
                    # the library is DNA, searched on the "+" strand here (frame f)
                    assert y.hit_strand == 0 and x.hit_strand == "+" and x.frame == "f"
                else:
                    assert _strand(x.hit_strand, y.hit_strand)
                assert x.evalue == _attr(y, "evalue")
                assert x.bits == _attr(y, "bitscore")
                assert x.z_score == _attr(y, "z_score")
                assert x.initn_score == _attr(y, "initn_score")
                assert x.init1_score == _attr(y, "init1_score")
                if _attr(y, "opt_score") is not None or "glsearch" not in q.program:
                    assert x.opt_score == _attr(y, "opt_score")
                if _attr(y, "sw_score") is not None:
                    assert x.score == y.sw_score
                else:
                    assert x.score == x.opt_score  # fasta36: no *_score line
                assert x.identity * 100 == pytest.approx(y.ident_pct)
                assert x.similarity * 100 == pytest.approx(y.pos_pct)
                if "tfast" in q.program:
                    assert x.query_seq in str(y.query.seq) and x.hit_seq in str(y.hit.seq)
                else:
                    assert x.query_seq == str(y.query.seq)
                    assert x.hit_seq == str(y.hit.seq)
                    assert x.consensus == y.aln_annotation["similarity"]
                    assert len(x.query_seq) == y.aln_span
                compared += 1
        # hits Biopython drops: only those shown just in the best-scores table
        assert all(not h.aligned for h in q.hits if h.hit_id not in grouped)
    if any(h.aligned for q in mine for h in q.hits):
        assert compared > 0


# --------------------------------------------------------------------------- pinned


def _hsp(queries, qi, hi, xi=0):
    return queries[qi].hits[hi].hsps[xi]


def test_pinned_fasta36_dna_ref():
    qs = ours("fasta36_dna_ref.m10")
    h = qs[0].hits[0]  # line 44: ">>ref|NM_900001.1| pGT875 | 266"
    assert (h.hit_id, h.hit_length) == ("ref|NM_900001.1|", 1125)  # line 77
    x = h.hsps[0]
    # lines 45-54: fa_frame f, fa_opt 3285, fa_bits 912.6, fa_expect 0, bs_ident 1.000, bs_overlap 657
    assert (x.frame, x.opt_score, x.score, x.bits, x.evalue, x.identity, x.overlap) == (
        "f", 3285, 3285, 912.6, 0.0, 1.0, 657,
    )
    # lines 59-60 and 80-81: query 1-657, hit 38-694
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 657, 38, 694)
    assert (x.query_strand, x.hit_strand) == ("+", "+")
    y = _hsp(qs, 0, 1)  # lines 113-150
    assert qs[0].hits[1].hit_id == "ref|NM_900008.1|"
    assert (y.opt_score, y.bits, y.evalue, y.identity, y.overlap) == (2259, 628.4, 1e-182, 0.826, 657)
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end) == (1, 657, 16, 672)


def test_pinned_fastx36():
    qs = ours("fastx36.m10")
    x = _hsp(qs, 0, 0)  # lines 44-73: GT8.7
    assert (x.frame, x.opt_score, x.score, x.bits, x.evalue, x.identity, x.overlap) == (
        "f", 1497, 1497, 411.4, 3.7e-118, 1.0, 218,
    )
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 654, 1, 218)
    assert qs[0].hits[0].hit_length == 218  # line 69
    y = _hsp(qs, 0, 1)  # lines 86-115: GTM1_MOUSE
    assert (y.opt_score, y.bits, y.evalue, y.overlap) == (1490, 409.5, 1.4e-117, 217)
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end) == (4, 654, 1, 217)


def test_pinned_fasty36():
    (q,) = ours("fasty36.m10")
    assert q.query_id == "gi|183668|gb|J03817.1|HUMGSTM1B" and q.query_length == 1117  # line 57
    x = q.hits[0].hsps[0]  # lines 44-73: GTM1_HUMAN
    assert q.hits[0].hit_id == "GTM1_HUMAN" and q.hits[0].hit_length == 217
    assert (x.opt_score, x.score, x.bits, x.evalue, x.identity, x.overlap) == (1406, 1406, 386.7, 1.7e-110, 0.995, 217)
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (19, 666, 1, 217)
    y = q.hits[1].hsps[0]  # lines 86-115: GTM4_HUMAN
    assert (y.opt_score, y.bits, y.evalue, y.identity) == (1259, 346.8, 1.7e-98, 0.872)
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end) == (16, 666, 1, 218)


def test_pinned_ggsearch36():
    (q,) = ours("ggsearch36.m10")
    x = q.hits[0].hsps[0]  # lines 35-62: GTM1_MOUSE
    assert (x.frame, x.opt_score, x.score, x.bits, x.evalue, x.identity, x.overlap) == (
        "f", 1478, 1478, 18.5, 0.78, 0.995, 218,
    )
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 218, 1, 217)
    assert q.hits[0].hit_length == 217  # line 58
    y = q.hits[1].hsps[0]  # lines 75-102: GTM1_RAT
    assert (y.opt_score, y.bits, y.evalue, y.identity, y.overlap) == (1394, 17.2, 1.9, 0.927, 218)
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end) == (1, 218, 1, 217)


@pytest.mark.parametrize("name,first", [("ssearch36_dna_fwd.m10", 43), ("ssearch36_dna_ref.m10", 51)])
def test_pinned_ssearch36_dna(name, first):
    qs = ours(name)
    h = qs[0].hits[0]  # ">>ref|NM_900001.1| pGT875 | 266"
    assert (h.hit_id, h.hit_length) == ("ref|NM_900001.1|", 1125)
    x = h.hsps[0]
    assert (x.frame, x.opt_score, x.score, x.bits, x.evalue, x.identity, x.overlap) == (
        "f", 3285, 3285, 912.6, 0.0, 1.0, 657,
    )
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 657, 38, 694)
    assert (x.query_strand, x.hit_strand) == ("+", "+")
    y = qs[0].hits[1].hsps[0]
    assert qs[0].hits[1].hit_id == "ref|NM_900008.1|" and qs[0].hits[1].hit_length == 1117
    assert (y.opt_score, y.bits, y.evalue, y.identity) == (2259, 628.4, 1e-182, 0.826)
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end) == (1, 657, 16, 672)
    assert text_of(name).split("\n")[first - 1].startswith(">>ref|NM_900001.1|")


def test_pinned_ssearch36_dna_revcomp():
    qs = ours("ssearch36_dna_revcomp.m10")
    h = qs[0].hits[0]  # lines 41-71
    assert (h.hit_id, h.hit_length) == ("ref|NM_900005.1|", 6080)
    x = h.hsps[0]
    assert (x.frame, x.opt_score, x.bits, x.evalue, x.identity, x.overlap) == ("r", 99, 30.0, 0.013, 0.565, 246)
    # query al_start 387 > al_stop 154: the reverse strand
    assert (x.query_start, x.query_end, x.query_strand) == (154, 387, "-")
    assert (x.hit_start, x.hit_end, x.hit_strand) == (1047, 1274, "+")


def test_pinned_ssearch36_titin_alt():
    (q,) = ours("ssearch36_titin_alt.m10")
    h = q.hits[0]  # line 34
    assert (h.hit_id, h.hit_length, len(h.hsps)) == ("MWKW", 1966, 3)
    a, b = h.hsps[0], h.hsps[1]  # lines 35-65 and the ">--" at line 84
    assert (a.opt_score, a.bits, a.evalue, a.identity, a.overlap) == (140, 37.7, 0.00029, 0.192, 359)
    assert (a.query_start, a.query_end, a.hit_start, a.hit_end) == (448, 773, 1607, 1959)
    assert (b.opt_score, b.bits, b.evalue, b.identity, b.overlap) == (133, 36.1, 0.00089, 0.2, 827)
    assert (b.query_start, b.query_end, b.hit_start, b.hit_end) == (12427, 13203, 827, 1603)
    assert q.query_length == 34350  # line 45
