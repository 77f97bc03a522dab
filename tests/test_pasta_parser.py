"""The PASTA (-m 10) parser on every real sample in samples/pasta/.

Two kinds of checks:

* ``test_matches_naive_scan``: every sample is also read by ``naive_scan`` below, a
  deliberately simple line-by-line reading of the raw text (no shared code with the
  parser); queries, hits, HSPs, ids, lengths, scores and coordinates must agree.
* ``test_<sample>``: values pinned from the sample files themselves (the comments give
  the line of the file each value was read from).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

import ingest.parsers.pasta as pasta
from ingest.model import Hit, Hsp, Query
from ingest.parsers.pasta import parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
# the bundled samples and those for the parser's tests only (samples/pasta_extra, outside the bundled run)
SAMPLE_FILES = sorted(p for d in (SAMPLES, SAMPLES.parent / "pasta_extra") for p in d.iterdir()
                      if p.name.endswith((".m10", ".m10.gz")))
GOOD = Path(__file__).resolve().parent / "data" / "pasta" / "good"  # real outputs that are not deterministic


def read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def parse_file(path: Path, **kw) -> list[Query]:
    return list(parse(io.BytesIO(read_bytes(path)), str(path), **kw))


def by_name(name: str) -> list[Query]:
    return parse_file(SAMPLES / name)


class ShortReads(io.RawIOBase):
    """A binary handle whose read() returns at most ``most`` bytes, as a pipe may."""

    def __init__(self, data: bytes, most: int):
        self.data, self.most, self.at = data, most, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        n = self.most if size is None or size < 0 else min(size, self.most)
        out = self.data[self.at : self.at + n]
        self.at += len(out)
        return out


# --------------------------------------------------------------------------- naive reference


def naive_scan(text: str) -> list[dict]:
    """Queries of a -m 10 report, read line by line in the simplest possible way."""
    queries: list[dict] = []
    q = hsp = side = None
    table = False
    for line in text.split("\n"):
        if ">>>" in line and not line.startswith(">>>") and line.split(">>>")[0].strip().isdigit():
            title = line.split(">>>", 1)[1]
            head, _, length = title.rpartition(" - ")
            # a title FASTA cut at 511 bytes: the length is the summary line's (below)
            cut = len(title.replace(" (reverse complement)", "").replace(" (forward-only)", "")) >= 511
            q = {"id": title.split()[0], "length": None if cut else int(length.split()[0]), "hits": [], "rows": 0,
                 "row_lengths": [], "row_names": []}
            queries.append(q)
            table = False
        elif line.startswith(">>>") and " vs " in line and q is not None and q["length"] is None:
            q["length"] = int(line.rsplit(" vs ", 1)[0].rsplit(", ", 1)[1].split()[0])
        elif line.startswith("The best scores are:"):
            table = True
        elif table:
            if line.strip() and not line.startswith(">>>"):
                if not line.startswith("+-"):  # "+-": one more HSP of the row above
                    q["rows"] += 1
                    q["row_lengths"].append(int(line.split("\t")[0].rsplit("(", 1)[1].split(")")[0]))
                    q["row_names"].append(line.split()[0])
            else:
                table = False
        elif line.startswith(">>") and not line.startswith(">>>"):
            hsp = {"scores": {}}
            q["hits"].append({"id": line[2:].split()[0], "hsps": [hsp]})
            side = None
        elif line.startswith(">--"):
            hsp = {"scores": {}}
            q["hits"][-1]["hsps"].append(hsp)
            side = None
        elif line.startswith(">") and not line.startswith(">>") and hsp is not None:
            side = "q" if side is None else "h"
        elif line.startswith("; ") and hsp is not None and q["hits"]:
            key, _, value = line[2:].partition(": ")
            if side is None:
                hsp["scores"][key.split("_", 1)[1]] = value.strip()
            elif key in ("al_start", "al_stop", "sq_len"):
                hsp[side + key] = int(value)
        if line.startswith(">>><<<"):
            hsp = side = None
    return queries


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_matches_naive_scan(path):
    ref = naive_scan(read_bytes(path).decode("utf-8"))
    ours = parse_file(path)
    assert [q.query_id for q in ours] == [q["id"] for q in ref]
    # a long query's segments (the announce line's last length): query_length is the whole query's
    assert [q.query_segment["length"] if q.query_segment else q.query_length for q in ours] == [
        q["length"] for q in ref]
    for q, rq in zip(ours, ref):
        seg = q.query_segment or {}
        shift = seg["offset"] - seg["printed_offset"] if "printed_offset" in seg else 0  # renumbered (@C:, subrange)
        aligned = [h for h in q.hits if h.aligned]
        assert [h.hit_id for h in aligned] == [h["id"] for h in rq["hits"]]
        assert len(q.hits) == max(rq["rows"], len(rq["hits"]))
        assert [h.rank for h in q.hits] == list(range(1, len(q.hits) + 1))
        assert all(not h.aligned for h in q.hits[len(aligned) :])
        rows_left = list(zip(rq["row_names"], rq["row_lengths"]))
        for h, rh in zip(aligned, rq["hits"]):
            assert len(h.hsps) == len(rh["hsps"])
            # its row: the first left that names its sequence (FASTA may list rows it prints no
            # alignment for among those it aligns: fastf36_unaligned_rows.m10)
            k = next((k for k, (name, _) in enumerate(rows_left) if h.hit_id.startswith(name)), None)
            row_length = rows_left.pop(k)[1] if k is not None else 0
            for x, r in zip(h.hsps, rh["hsps"]):
                # a long sequence searched in pieces: the alignment shows a piece, the
                # table row the whole sequence (ssearch36_dna_pieces.m10)
                whole = row_length
                assert h.hit_length == max(r["hsq_len"], whole)
                assert (x.query_start - shift, x.query_end - shift) == tuple(sorted((r["qal_start"], r["qal_stop"])))
                assert (x.hit_start, x.hit_end) == tuple(sorted((r["hal_start"], r["hal_stop"])))
                s = r["scores"]
                opt = s.get("s-w opt", s.get("n-w opt", s.get("opt")))
                assert x.opt_score == (int(opt) if opt is not None else None)
                assert x.score == int(s.get("score", opt))
                assert x.evalue == (float(s["expect"]) if "expect" in s else None)
                assert x.bits == (float(s["bits"]) if "bits" in s else None)
                assert x.z_score == (float(s["z-score"]) if "z-score" in s else None)
                assert x.identity == float(s["ident"])
                assert x.similarity == float(s["sim"])
                assert x.overlap == int(s["overlap"])
                assert x.initn_score == (int(s["initn"]) if "initn" in s else None)
                assert x.frame == s.get("frame")
                # aligned strings: same number of columns on both sides; residues
                # (not gaps / frameshift marks) match the coordinates where the
                # coordinates count displayed residues
                assert len(x.query_seq) == len(x.hit_seq) == len(x.consensus)
                marks = sum(x.query_seq.count(c) + x.hit_seq.count(c) for c in "/\\")
                if q.query_fragments:  # peptide mixtures: the overlap counts aligned residue pairs only,
                    # the fragments being laid out along the hit with gaps between them
                    assert x.overlap == sum(a != "-" and b != "-" for a, b in zip(x.query_seq, x.hit_seq))
                else:
                    assert x.overlap == len(x.query_seq) - marks
                if q.query_type == q.library_type:
                    assert len(x.query_seq) - x.query_seq.count("-") == x.query_end - x.query_start + 1
                    assert len(x.hit_seq) - x.hit_seq.count("-") == x.hit_end - x.hit_start + 1


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_general_path_agrees_with_fast_path(path):
    fast = [q.to_dict() for q in parse_file(path)]
    assert [q.to_dict() for q in parse_file(path, fast=False)] == fast


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_streaming_in_tiny_chunks_and_crlf(path):
    """Buffer boundaries anywhere (7-byte reads: asked for with chunk_size, or given by
    a handle that returns at most 7 bytes a read, like a pipe) and CRLF line ends
    change nothing."""
    expected = [q.to_dict() for q in parse_file(path)]
    assert [q.to_dict() for q in parse_file(path, chunk_size=7)] == expected
    assert [q.to_dict() for q in parse(ShortReads(read_bytes(path), 7), path.name)] == expected
    crlf = read_bytes(path).replace(b"\n", b"\r\n")
    assert [q.to_dict() for q in parse(io.BytesIO(crlf), path.name)] == expected


def test_chunk_size_below_one_is_refused_at_the_call():
    with pytest.raises(ValueError, match="chunk_size"):
        parse(io.BytesIO(b""), "x", chunk_size=0)
    with pytest.raises(ValueError, match="chunk_size"):
        pasta.parse_dicts(io.BytesIO(b""), "x", chunk_size=-1)


@pytest.mark.parametrize("sequences", [True, False])
@pytest.mark.parametrize("path", SAMPLE_FILES + [GOOD / "ssearch36_z21_e2.m10"], ids=lambda p: p.name)
def test_parse_dicts_equals_to_dict_key_for_key(path, sequences):
    """parse_dicts (the fast path builds the dicts itself) gives exactly Query.to_dict():
    compared as JSON text, so the order of the keys counts too - also in 7-byte reads
    (alignments then straddle buffers and go to the checking path) and with CRLF."""
    expected = [json.dumps(q.to_dict()) for q in parse_file(path, sequences=sequences)]
    data = read_bytes(path)
    got = [json.dumps(d) for d in pasta.parse_dicts(io.BytesIO(data), path.name, sequences=sequences)]
    assert got == expected and got
    crlf = data.replace(b"\n", b"\r\n")
    got = [json.dumps(d) for d in pasta.parse_dicts(io.BytesIO(crlf), path.name, sequences=sequences)]
    assert got == expected
    got = [json.dumps(d) for d in pasta.parse_dicts(io.BytesIO(data), path.name, sequences=sequences, chunk_size=7)]
    assert got == expected


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_to_dict_is_json_ready_and_omits_none(path):
    for q in parse_file(path):
        d = q.to_dict()
        json.dumps(d)

        def walk(node):
            if isinstance(node, dict):
                for v in node.values():
                    assert v is not None
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(d)
        assert d["query_id"] == q.query_id and isinstance(d["hits"], list)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sequences_false_drops_only_sequences(path):
    full = parse_file(path)
    lean = parse_file(path, sequences=False)
    for a, b in zip(full, lean, strict=True):
        da, db = a.to_dict(), b.to_dict()
        for h in da["hits"]:
            for x in h["hsps"]:
                for k in ("query_seq", "hit_seq", "consensus"):
                    x.pop(k, None)
        assert da == db
        for h in b.hits:
            for x in h.hsps:
                assert x.query_seq is None and x.hit_seq is None and x.consensus is None


def test_gz_sample_is_the_same_stream():
    with gzip.open(SAMPLES / "ssearch36_mu.m10.gz", "rb") as fh:
        queries = list(parse(fh, "ssearch36_mu.m10.gz"))
    assert [q.query_id for q in queries] == [
        "GTT1_DROME",
        "sp|P62158|CALM_HUMAN",
        "H10_HUMAN",
        "sp|P10649|GSTM1_MOUSE",
    ]
    # query 3 printed "!! No sequences with E() < 1" (line 395 of the stream)
    assert queries[2].hits == [] and queries[2].params is None
    assert queries[2].query_length == 193 and queries[2].program == "ssearch36"
    assert queries[2].library == "inputs/mu.lib" and queries[2].library_sequences == 7


# --------------------------------------------------------------------------- pinned values


def test_ssearch36_prot():
    (q,) = by_name("ssearch36_prot.m10")
    assert q.query_id == "GTT1_DROME"
    assert q.query_description == "GLUTATHIONE S-TRANSFERASE 1-1 (EC 2.5.1.18) (CLASS-THETA). - DROS"
    assert (q.query_length, q.query_type, q.library_type) == (209, "protein", "protein")
    assert (q.program, q.version) == ("ssearch36", "36.3.8i Nov, 2022")
    assert q.algorithm == "Smith-Waterman (SSE2, Michael Farrar 2006) (7.2 Nov 2010/SIMDe Nov 2020)"
    assert (q.library, q.library_residues, q.library_sequences) == ("inputs/prot_test.lib", 2022, 11)
    assert q.statistics == "Altschul/Gish params: n0: 209 Lambda: 0.158 K: 0.019 H: 0.100"
    assert q.command == "ssearch36 -m 10 -T 1 -z 3 inputs/gtt1_drome.aa inputs/prot_test.lib"
    assert q.params["pg_argv"] == q.command  # "; pg_name_alg: ..." split off the argv line
    assert q.params["pg_name_alg"] == "Smith-Waterman (SSE2, Michael Farrar 2006)"
    assert q.params["pg_open-ext"] == "-10 -2" and q.params["pg_matrix"] == "BL50 (15:-5)"
    assert q.params["mp_extrap"] == "60000 10"
    assert (q.query_index, q.run_index, q.run_query_number) == (1, 1, 1)
    assert len(q.hits) == 11 and all(h.aligned for h in q.hits)
    h = q.hits[0]  # line 44
    assert (h.hit_id, h.hit_description, h.hit_length, h.rank) == (
        "GT8.7",
        "| 266 | transl. of pa875.con, 19 to 675",
        218,
        1,
    )
    (x,) = h.hsps
    assert (x.score, x.opt_score, x.z_score, x.bits, x.evalue) == (100, 100, 121.9, 29.6, 0.00061)
    assert (x.identity, x.similarity, x.overlap, x.frame) == (0.248, 0.517, 145, "f")
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (53, 191, 60, 195)
    assert x.query_strand is None and x.hit_strand is None  # protein: no strand
    # FEPE (line 117) has an alternate alignment (">--", line 148)
    fepe = q.hits[2]
    assert fepe.hit_id == "FEPE" and len(fepe.hsps) == 2
    a, b = fepe.hsps
    assert (a.score, a.evalue, a.query_start, a.query_end, a.hit_start, a.hit_end) == (34, 0.15, 85, 88, 16, 19)
    assert (b.score, b.evalue, b.query_start, b.query_end, b.hit_start, b.hit_end) == (25, 0.61, 143, 164, 24, 44)


def test_ssearch36_first_alignment_columns():
    """The displayed context is cut away: lines 61-64 (query), 72-75 (GT8.7) and 77-80
    (al_cons) show 30 residues before the alignment (al_start 53 / al_display_start 23
    and al_start 60 / al_display_start 30); the alignment has 145 columns (sw_overlap)."""
    (q,) = by_name("ssearch36_prot.m10")
    x = q.hits[0].hsps[0]
    lines = (SAMPLES / "ssearch36_prot.m10").read_text().split("\n")
    qdisp = "".join(lines[60:64])
    hdisp = "".join(lines[71:75])
    cons = "".join(lines[76:80])
    assert lines[59] == "; al_display_start: 23" and lines[70] == "; al_display_start: 30"
    assert x.query_seq == qdisp[30:175]
    assert x.hit_seq == hdisp[30:175]
    assert x.consensus == cons[30:175]
    assert x.query_seq.startswith("IPTLVDNGFA") and x.query_seq.endswith("YENAKKVT")  # 191 = T
    assert x.hit_seq.startswith("LPYLIDGSHK")  # residue 60 of GT8.7 = L
    assert len(x.query_seq) == 145 == x.overlap


def test_ssearch36_prot_multi_with_a_query_without_hits():
    qs = by_name("ssearch36_prot_multi.m10")
    assert [q.query_id for q in qs] == ["GTT1_DROME", "sp|P62158|CALM_HUMAN", "H10_HUMAN", "sp|P10649|GSTM1_MOUSE"]
    assert [q.query_index for q in qs] == [1, 2, 3, 4]
    assert [q.query_length for q in qs] == [209, 149, 193, 218]
    # line 440: "!! No sequences with E() < 0.5"
    assert qs[2].hits == [] and qs[2].params is None
    assert qs[2].query_description == "| 90538   | HISTONE H1' (H1.0) (H1(0))."
    assert qs[2].program == "ssearch36" and qs[2].version == "36.3.8i Nov, 2022"
    assert "hits" in qs[2].to_dict() and "params" not in qs[2].to_dict()
    assert qs[1].query_description == "Calmodulin; CaM"
    assert [len(q.hits) for q in qs] == [9, 1, 0, 7]


def test_ssearch36_table_only_hits():
    qs = by_name("ssearch36_table_only.m10")  # -b 12 -d 4
    q = qs[0]
    assert len(q.hits) == 12
    assert [h.aligned for h in q.hits] == [True] * 4 + [False] * 8
    t = q.hits[4]
    assert t.rank == 5 and t.hsps[0].query_start is None and t.hsps[0].query_seq is None
    d = t.to_dict()
    assert d["aligned"] is False and "query_start" not in d["hsps"][0]
    # every table-only hit keeps the table's length, s-w score, bits and E()
    raw = (SAMPLES / "ssearch36_table_only.m10").read_text().splitlines()
    start = raw.index(next(l for l in raw if l.startswith("The best scores are:"))) + 1
    for hit, row in zip(q.hits[4:], raw[start + 4 : start + 12]):
        length, sw, bits, ev = row.rsplit("(", 1)[1].replace(")", " ").split()
        assert row.startswith(hit.hit_id + " ")
        assert hit.hit_length == int(length)
        (x,) = hit.hsps
        assert (x.score, x.opt_score, x.bits, x.evalue) == (int(sw), int(sw), float(bits), float(ev))


def test_ssearch36_no_alignments_d0():
    (q,) = by_name("ssearch36_no_alignments.m10")  # -d 0: the table only
    assert len(q.hits) == 11 and not any(h.aligned for h in q.hits)
    assert q.params is None and q.program == "ssearch36"
    first = q.hits[0]  # line 20: "GT8.7 | 266 | transl. ... ( 218)  100 29.6 0.00061"
    assert (first.hit_id, first.hit_length) == ("GT8.7", 218)
    assert (first.hsps[0].opt_score, first.hsps[0].bits, first.hsps[0].evalue) == (100, 29.6, 0.00061)
    assert first.hit_description == "| 266 | transl. of pa875.con, 19 to 675"


def test_ssearch36_nostats():
    (q,) = by_name("ssearch36_nostats.m10")  # -z -1: no statistics, no E(), no bits
    assert q.statistics is None
    for h in q.hits:
        for x in h.hsps:
            assert x.evalue is None and x.bits is None and x.z_score is None
            assert x.score is not None and x.opt_score is not None
            assert "evalue" not in x.to_dict()


def test_ssearch36_alternate_alignments():
    (q,) = by_name("ssearch36_prot_alt.m10")  # -E "10 1"
    gt = next(h for h in q.hits if h.hit_id == "GT8.7")
    assert len(gt.hsps) == 3
    assert sum(len(h.hsps) for h in q.hits) == 14
    (t,) = by_name("ssearch36_titin_alt.m10")
    # titin (gi|108861911|sp|Q8WZ42|TITIN_HUMAN) is shown as "sp|Q8WZ42|TI" in alignments
    assert t.query_id == "gi|108861911|sp|Q8WZ42|TITIN_HUMAN"
    assert len(t.hits) == 1 and len(t.hits[0].hsps) == 3


def test_ssearch36_dna_ref_ids_and_strands():
    qs = by_name("ssearch36_dna_ref.m10")
    assert [q.query_id for q in qs] == ["gi|910001|ref|NM_910001.1|", "gi|910002|ref|NM_910002.1|"]
    assert all(q.query_type == "dna" and q.library_type == "dna" for q in qs)
    q = qs[0]
    # FASTA prints library ids without the leading "gi|NNN|" (line 51)
    assert q.hits[0].hit_id == "ref|NM_900001.1|" and q.hits[0].hit_description == "pGT875 | 266"
    strands = {(x.query_strand, x.hit_strand) for h in q.hits for x in h.hsps}
    assert strands <= {("+", "+"), ("-", "+")} and ("+", "+") in strands
    frames = {h.hsps[0].frame for h in q.hits}
    assert frames == {"f", "r"}
    for h in q.hits:
        for x in h.hsps:
            assert x.query_strand == ("+" if x.frame == "f" else "-")


def test_ssearch36_forward_only_and_reverse_complement():
    fwd = by_name("ssearch36_dna_fwd.m10")  # -3: "(forward-only)" on the query line
    rev = by_name("ssearch36_dna_revcomp.m10")  # -i: "(reverse complement)"
    assert [q.searched_strand for q in fwd] == ["+", "+"]
    assert [q.searched_strand for q in rev] == ["-", "-"]
    assert {x.query_strand for q in fwd for h in q.hits for x in h.hsps} == {"+"}
    assert {x.query_strand for q in rev for h in q.hits for x in h.hsps} == {"-"}
    assert [q.query_id for q in rev] == ["pGT875", "mgstm1"]  # summary line says "pGT875-"


def test_fasta36_dna():
    qs = by_name("fasta36_dna.m10")
    q = qs[0]
    assert (q.program, q.query_id, q.query_length, q.query_type) == ("fasta36", "pGT875", 657, "dna")
    assert q.query_description is None
    h = q.hits[1]  # RABGLTR: fa_initn/init1/opt and bs_ident/bs_sim/bs_overlap
    x = h.hsps[0]
    assert h.hit_id == "RABGLTR"
    assert x.initn_score is not None and x.init1_score is not None
    assert x.score == x.opt_score  # fasta36 prints no *_score line
    assert x.identity is not None and x.overlap is not None
    rq = qs[1]  # mgstm1.rev: the query is the reverse complement of pGT875
    assert all(x.query_strand == "-" for h in rq.hits for x in h.hsps if x.frame == "r")


def test_fasta36_prot_and_dna_ref():
    qs = by_name("fasta36_prot.m10")
    assert [q.query_type for q in qs] == ["protein"] * 4
    assert all(x.initn_score is not None for q in qs for h in q.hits if h.aligned for x in h.hsps)
    ref = by_name("fasta36_dna_ref.m10")
    assert sum(len(h.hsps) for q in ref for h in q.hits) == 28


def test_ggsearch36_global_alignment_starting_with_a_gap():
    (q,) = by_name("ggsearch36.m10")
    x = q.hits[0].hsps[0]  # lines 37-70: query 1-218 vs GTM1_MOUSE 1-217, hit begins "-PMIL"
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 218, 1, 217)
    assert (x.score, x.opt_score, x.evalue) == (1478, 1478, 0.78)
    assert len(x.query_seq) == 218 and x.hit_seq.startswith("-PMILGYWNV") and x.consensus[0] == "-"


def test_glsearch36_and_lalign36():
    (g,) = by_name("glsearch36.m10")
    assert g.program == "glsearch36" and all(x.opt_score is not None for h in g.hits for x in h.hsps)
    (la,) = by_name("lalign36.m10")
    assert la.program == "lalign36" and len(la.hits) == 1 and len(la.hits[0].hsps) == 5
    assert la.hits[0].hsps[0].frame is None  # lalign prints no lsw_frame line


def test_translated_searches():
    fx = by_name("fastx36.m10")
    assert [(q.query_type, q.library_type) for q in fx] == [("dna", "protein")] * 2
    x = fx[0].hits[0].hsps[0]  # GT8.7: query nt 1-654 vs protein 1-218
    assert (x.query_start, x.query_end, x.hit_start, x.hit_end) == (1, 654, 1, 218)
    assert x.query_strand == "+" and x.hit_strand is None
    assert len(x.query_seq) == 218
    rev = [x for h in fx[0].hits for x in h.hsps if x.frame == "r"]
    assert rev and all(x.query_strand == "-" for x in rev)
    (fy,) = by_name("fasty36.m10")  # a frameshifted query: '/' and '\' in the translation
    assert any("/" in x.query_seq or "\\" in x.query_seq for h in fy.hits for x in h.hsps)
    (tfx,) = by_name("tfastx36.m10")
    assert (tfx.query_type, tfx.library_type) == ("protein", "dna")
    y = tfx.hits[0].hsps[0]
    assert (y.query_start, y.query_end, y.hit_start, y.hit_end, y.hit_strand) == (1, 218, 38, 691, "+")
    assert y.query_strand is None
    (tfy,) = by_name("tfasty36.m10")
    assert tfy.program == "tfasty36" and tfy.library_type == "dna"


def test_concatenated_runs():
    qs = by_name("concatenated_runs.m10")
    assert [(q.query_index, q.run_index, q.run_query_number, q.program) for q in qs] == [
        (1, 1, 1, "ssearch36"),
        (2, 2, 1, "fasta36"),
        (3, 3, 1, "glsearch36"),
    ]
    assert qs[1].command == "fasta36 -m 10 -T 1 -z 3 inputs/mgstm1.nt inputs/gst.nlib"


def test_model_to_dict_shapes():
    x = Hsp(score=5, evalue=None, query_start=1, query_end=3)
    assert x.to_dict() == {"score": 5, "query_start": 1, "query_end": 3}
    h = Hit(hit_id="a", rank=1, hsps=[x])
    assert h.to_dict() == {"hit_id": "a", "rank": 1, "aligned": True, "hsps": [x.to_dict()]}
    q = Query(query_id="q", query_index=1, hits=[h])
    assert q.to_dict() == {"query_id": "q", "query_index": 1, "hits": [h.to_dict()]}


def test_second_evalue_from_the_table():
    """-z 21: the best-shuffle E2() is printed only in the best-scores table (lines
    23-42 of tests/data/pasta/good/ssearch36_z21_e2.m10; shuffle-based, so this file is
    a kept fixture rather than a regenerated sample)."""
    path = GOOD / "ssearch36_z21_e2.m10"
    (q,) = parse_file(path)
    assert len(q.hits) == 20 and [h.aligned for h in q.hits] == [True] * 5 + [False] * 15
    first = q.hits[0].hsps[0]  # line 23: "... ( 218) 1499 293.8 1.9e-81 9.7e-105"
    assert (first.opt_score, first.bits, first.evalue, first.evalue2) == (1499, 293.8, 1.9e-81, 9.7e-105)
    last = q.hits[19]  # line 42
    assert last.hit_id == "MUT0023|GTM4_HUMAN" and last.hit_length == 217
    assert (last.hsps[0].opt_score, last.hsps[0].evalue, last.hsps[0].evalue2) == (1268, 3.3e-68, 9.3e-88)
    ref = naive_scan(path.read_text())
    assert [h.hit_id for h in q.hits if h.aligned] == [h["id"] for h in ref[0]["hits"]]
