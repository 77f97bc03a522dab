"""Hits as genome-browser and BLAST-table lines: BED, GFF3 and BLAST tabular (``-outfmt 6``).

One line per HSP (alignment) of a ``hits`` document, placed on the library sequence (the
hit's ``hit_id``: BED's chrom, GFF3's seqid, BLAST's sseqid).  The stored coordinates are
FASTA's: 1-based, inclusive, start <= end on each side, the strand apart
(:mod:`ingest.parsers.pasta`).  Each format states them in its own convention:

* **BED** (BED6+7), 0-based half-open: ``chromStart = hit_start - 1``, ``chromEnd = hit_end``.
  ``name`` the query id; ``score`` the bit score rounded to an integer and held to BED's
  0..1000 (negative bits: 0; none: 0, its column ``.``); ``strand`` on the library sequence
  (:func:`library_strand`; ``.`` when it has none).  Then :data:`BED_EXTRA`: ``evalue``,
  ``bits``, ``pident`` (percent identity), ``qstart`` and ``qend`` (the query's, 0-based
  half-open too: one convention in the file), ``qstrand`` and ``hsp`` (``<hit _id>#<k>``,
  k the HSP's 1-based position in the document).  BED has no escape: an id with whitespace,
  a control character or a character outside printable ASCII cannot be written and the HSP
  is set aside (a changed id would no longer name the genome's sequence).
* **GFF3**, 1-based closed (the stored numbers).  seqid, source and type percent-encoded
  outside GFF3's allowed set (every byte of a non-ASCII character too); type the Sequence
  Ontology term (:func:`so_type`); score the E-value (as the GFF3 specification recommends
  for similarity features; ``.`` when absent or not finite); strand as BED's; phase ``.``;
  attributes ``ID`` (the HSP key), ``Name`` (query id), ``Target`` (query id, its start and
  end, and its strand when it has one), then ``evalue``, ``bits``, ``score``, ``opt_score``,
  ``z_score``, ``pident``, ``psim``, ``overlap``, ``program``, ``rank`` where the HSP has
  them, values escaped (``%``, ``;``, ``=``, ``&``, ``,``, controls, non-ASCII; a space too
  in Target's id).
* **BLAST tabular**: BLAST's 12 columns (:data:`BLAST_COLUMNS`), coordinates 1-based
  inclusive, a side on the minus strand written end to start as BLAST does (``sstart >
  send`` for a reverse-complement hit), then FASTA's own statistics (:data:`BLAST_EXTRA`).
  ``length`` is the alignment's columns, gaps included, ``gapopen`` the runs of gaps,
  ``pident`` FASTA's identity (identical columns over all columns), as BLAST defines them.
  No ``# Fields:`` line: ``-outfmt 6`` has none (``-outfmt 7``'s comments are another
  format); the columns are these, always.  ``NA`` where the document lacks a value
  (mismatches and gap opens when the file held no alignment text).  Ids with whitespace or
  control characters are set aside (they would split the columns).

Nothing is invented: an HSP without coordinates (a hit shown only in FASTA's best-scores
table) yields a :class:`SetAside` with its reason, not a line.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any

__all__ = ["FORMATS", "BED_EXTRA", "BLAST_COLUMNS", "BLAST_EXTRA", "Hsp", "SetAside", "hsps_of", "library_strand",
           "so_type", "bed_line", "gff3_line", "gff3_header", "blast_line", "gff3_escape", "line_for"]

FORMATS = ("bed", "gff3", "blast-tab")
BED_EXTRA = ("evalue", "bits", "pident", "qstart", "qend", "qstrand", "hsp")
BLAST_COLUMNS = ("qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend", "sstart", "send",
                 "evalue", "bitscore")
#: After BLAST's 12: FASTA's z-score, opt score, raw score of the shown alignment, percent
#: similarity, and the two sequences' lengths (BLAST's ``qlen slen``).
BLAST_EXTRA = ("zscore", "opt", "score", "psim", "qlen", "slen")

#: GFF3's column 1 keeps these characters; every other is percent-encoded (GFF3 1.26, "Column 1").
_SEQID_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:^*$@!+_?-|")
#: Characters a GFF3 attribute value (and columns 2, 3) must not hold literally.
_GFF_RESERVED = frozenset("%;=&,\t\n\r")
_FRAMESHIFT = frozenset("/\\")


@dataclass
class Hsp:
    """One HSP of a hit document, with what the formats write of it (None: the document lacks it)."""

    key: str  # "<hit _id>#<k>"
    doc_id: Any
    index: int  # 1-based
    query_id: str
    hit_id: str
    program: str | None
    rank: int | None
    qstart: int
    qend: int
    sstart: int
    send: int
    qstrand: str | None
    sstrand: str | None
    qtype: str | None  # "dna" / "protein", from the hit's search
    stype: str | None
    qlen: int | None
    slen: int | None
    values: dict  # the stored HSP (evalue, bits, score, ...)

    def get(self, name: str):
        return self.values.get(name)


@dataclass
class SetAside:
    doc_id: Any
    index: int | None  # the HSP's 1-based position, None: the whole document
    reason: str


def hsps_of(doc: dict, search: dict | None) -> list[Hsp | SetAside]:
    """Each HSP of ``doc`` (a ``hits`` document) as an :class:`Hsp`, or set aside with its reason.

    ``search``: the hit's ``searches`` document (``query_type``, ``library_type``,
    ``query_length``), or None when it is not there."""
    doc_id = doc.get("_id")
    hsps = doc.get("hsps")
    if not isinstance(hsps, list) or not hsps:
        return [SetAside(doc_id, None, "no HSP (no alignment and no table row with coordinates)")]
    query_id, hit_id = doc.get("query_id"), doc.get("hit_id")
    if not isinstance(query_id, str) or not isinstance(hit_id, str):
        return [SetAside(doc_id, None, "no query_id or hit_id string")]
    search = search or {}
    out: list[Hsp | SetAside] = []
    for k, hsp in enumerate(hsps, start=1):
        if not isinstance(hsp, dict):
            out.append(SetAside(doc_id, k, "the HSP is not a document"))
            continue
        coords = [_int(hsp.get(n)) for n in ("query_start", "query_end", "hit_start", "hit_end")]
        qs, qe, ss, se = coords
        if qs is None or qe is None or ss is None or se is None:
            out.append(SetAside(doc_id, k, "no coordinates (a hit shown only in the best-scores table)"))
            continue
        if not (1 <= qs <= qe and 1 <= ss <= se):
            out.append(SetAside(doc_id, k, f"coordinates out of order ({qs}-{qe}, {ss}-{se})"))
            continue
        out.append(Hsp(key=f"{doc_id}#{k}", doc_id=doc_id, index=k, query_id=query_id, hit_id=hit_id,
                       program=_str(doc.get("program")), rank=_int(doc.get("rank")), qstart=qs, qend=qe,
                       sstart=ss, send=se, qstrand=_strand(hsp.get("query_strand")),
                       sstrand=_strand(hsp.get("hit_strand")), qtype=_str(search.get("query_type")),
                       stype=_str(search.get("library_type")), qlen=_int(search.get("query_length")),
                       slen=_int(doc.get("hit_length")), values=hsp))
    return out


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strand(value) -> str | None:
    return value if value in ("+", "-") else None


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def library_strand(h: Hsp) -> str | None:
    """The strand of the alignment on the library sequence.

    Both sides DNA (each with a strand): ``+`` when the strands agree, ``-`` when they differ
    (FASTA's reverse-complement hit: the query's minus strand on the library's plus strand is
    the query on the library's minus strand, as BLAST and genome browsers show it).  A
    translated library (tfastx/tfasty, ...: only the library has a strand): the library's.
    A protein library, or no strand printed: None (written ``.``)."""
    if h.sstrand and h.qstrand:
        return "+" if h.sstrand == h.qstrand else "-"
    return h.sstrand


def so_type(h: Hsp) -> str:
    """The Sequence Ontology term of the HSP as a feature of the library sequence.

    DNA on DNA: ``nucleotide_match`` (SO:0000347); protein on protein, or a protein query on a
    translated DNA library: ``protein_match`` (SO:0000349); a translated DNA query on a protein
    library (fastx/fasty): ``translated_nucleotide_match`` (SO:0000181).  Types unknown (the
    search's document absent) and no strand on both sides to tell: ``match`` (SO:0000343)."""
    q, s = (h.qtype or "").lower(), (h.stype or "").lower()
    if q and s:
        if q == "dna" and s == "dna":
            return "nucleotide_match"
        if q == "protein":
            return "protein_match"
        return "translated_nucleotide_match"
    if h.qstrand and h.sstrand:
        return "nucleotide_match"
    return "match"


# ---- text of values -----------------------------------------------------------------------------------

def _float_text(value: float | None, missing: str) -> str:
    if value is None or math.isnan(value):
        return missing
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _percent(fraction: float | None, missing: str) -> str:
    """A fraction 0..1 as a percentage, to the digits FASTA printed (``0.826`` -> ``82.6``, never ``82.600``:
    no precision the file did not have; 4 decimals at most, what a float's product leaves is rounded off)."""
    if fraction is None or not math.isfinite(fraction):
        return missing
    return repr(round(fraction * 100, 4))


def _int_text(value, missing: str) -> str:
    number = _int(value)
    return missing if number is None else str(number)


def _plain(text: str, ascii_only: bool) -> str | None:
    """Why ``text`` cannot be a column of a whitespace-separated format (None: it can)."""
    if not text:
        return "is empty"
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Zs"):
            return f"holds {_named(ch)}"
        if ascii_only and ord(ch) > 0x7E:
            return f"holds {_named(ch)}, not ASCII"
    return None


def _named(ch: str) -> str:
    names = {"\t": "a tab", "\n": "a line feed", "\r": "a carriage return", " ": "a space"}
    return names.get(ch, f"U+{ord(ch):04X}")


# ---- BED ------------------------------------------------------------------------------------------------

def bed_score(bits: float | None) -> int:
    """BED's 0..1000 score: the bit score rounded, negative as 0, above 1000 as 1000; none: 0."""
    if bits is None or math.isnan(bits):
        return 0
    return 1000 if bits >= 1000 else max(0, int(round(bits)))


def bed_line(h: Hsp) -> str | SetAside:
    for what, text in (("library sequence id", h.hit_id), ("query id", h.query_id)):
        why = _plain(text, ascii_only=True)
        if why:
            return SetAside(h.doc_id, h.index, f"the {what} {why}: BED has no escape for it")
    bits = _num(h.get("bits"))
    cells = [h.hit_id, str(h.sstart - 1), str(h.send), h.query_id, str(bed_score(bits)), library_strand(h) or ".",
             _float_text(_num(h.get("evalue")), "."), _float_text(bits, "."), _percent(_num(h.get("identity")), "."),
             str(h.qstart - 1), str(h.qend), h.qstrand or ".", _bed_key(h)]
    return "\t".join(cells)


def _bed_key(h: Hsp) -> str:
    """The HSP key in a BED column: an _id with whitespace would split it (the key of the loader's
    ids never has any: ``<sha256 20 hex>:<query>:<rank>``); such a key is written percent-encoded."""
    return h.key if _plain(h.key, ascii_only=True) is None else gff3_escape(h.key)


# ---- GFF3 -----------------------------------------------------------------------------------------------

def gff3_escape(text: str, safe: frozenset | None = None, extra: str = "") -> str:
    """``text`` percent-encoded for GFF3: with ``safe``, every character outside it (column 1);
    else the reserved characters, ``extra``, controls and non-ASCII (UTF-8 bytes, ``%C3%A9``)."""
    out = []
    for ch in text:
        keep = ch in safe if safe is not None else (
            ch not in _GFF_RESERVED and ch not in extra and 0x20 <= ord(ch) < 0x7F)
        out.append(ch if keep else "".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def gff3_header(regions: dict[str, int]) -> list[str]:
    """``##gff-version 3`` and one ``##sequence-region`` a library sequence of known length."""
    return ["##gff-version 3"] + [f"##sequence-region {gff3_escape(seqid, _SEQID_SAFE)} 1 {length}"
                                  for seqid, length in sorted(regions.items())]


def gff3_line(h: Hsp) -> str | SetAside:
    for what, text in (("library sequence id", h.hit_id), ("query id", h.query_id)):
        if not text:  # a seqid, and a Target's id, is one character at least (GFF3 escapes any other)
            return SetAside(h.doc_id, h.index, f"the {what} is empty: GFF3's {'seqid' if what[0] == 'l' else 'Target'} "
                                                "needs one")
    strand = library_strand(h)
    # the query's strand is the feature's when both sides have one; a translated query on a protein
    # library keeps its own (frame), a protein query has none
    target_strand = "+" if (h.qstrand and h.sstrand) else (h.qstrand or "")
    evalue = _num(h.get("evalue"))
    attrs = [("ID", gff3_escape(h.key)), ("Name", gff3_escape(h.query_id)),
             ("Target", " ".join(filter(None, (gff3_escape(h.query_id, extra=" "), str(h.qstart), str(h.qend),
                                               target_strand))))]
    for name in ("evalue", "bits", "score", "opt_score", "z_score"):
        value = _num(h.get(name))
        if value is not None:
            attrs.append((name, _float_text(value, "") if isinstance(h.get(name), float) else str(h.get(name))))
    for name, stored in (("pident", "identity"), ("psim", "similarity")):
        value = _num(h.get(stored))
        if value is not None and math.isfinite(value):
            attrs.append((name, _percent(value, "")))
    if _int(h.get("overlap")) is not None:
        attrs.append(("overlap", str(h.get("overlap"))))
    if h.program:
        attrs.append(("program", gff3_escape(h.program)))
    if h.rank is not None:
        attrs.append(("rank", str(h.rank)))
    score = _float_text(evalue, ".") if evalue is not None and math.isfinite(evalue) else "."
    cells = [gff3_escape(h.hit_id, _SEQID_SAFE), gff3_escape(h.program or "sci-ingest"), so_type(h),
             str(h.sstart), str(h.send), score, strand or ".", ".", ";".join(f"{k}={v}" for k, v in attrs)]
    return "\t".join(cells)


# ---- BLAST tabular --------------------------------------------------------------------------------------

def alignment_counts(h: Hsp) -> tuple[int | None, int | None]:
    """(mismatches, gap opens): counted in the stored
    alignment (columns where both rows hold a residue and they differ; runs of ``-`` in either
    row); None when there is no alignment text, or it has frameshifts (``/``, ``\\``), whose
    columns are not residue against residue.  A row of FASTA's ``-m 8`` table: its mismatches,
    and no gap opens (:func:`from_m8`)."""
    if from_m8(h):  # FASTA's -m 8 row: its mismatches are BLAST's, its "gap opens" are gap columns
        return _int(h.values["extra"].get("mismatches")), None
    q, s = h.get("query_seq"), h.get("hit_seq")
    if not isinstance(q, str) or not isinstance(s, str) or len(q) != len(s) or not q:
        return None, None
    if _FRAMESHIFT & set(q) or _FRAMESHIFT & set(s):
        return None, None
    mismatches = sum(1 for a, b in zip(q, s) if a != "-" and b != "-" and a.upper() != b.upper())
    gap_opens = sum(1 for row in (q, s) for i, c in enumerate(row) if c == "-" and (i == 0 or row[i - 1] != "-"))
    return mismatches, gap_opens


def from_m8(h: Hsp) -> bool:
    """The HSP is a row of FASTA's ``-m 8`` table (``pasta-m8``: ``extra`` holds its ``gap_opens``).

    That table counts otherwise than BLAST (checked on ``samples/pasta_tab/ssearch36_dna_ref.m8cb``
    against its BTOP strings): its alignment length (stored as ``overlap``) leaves the gap columns
    out, its % identity is over that length, its "gap opens" are the gap columns.  BLAST's
    ``length``, ``pident`` and ``gapopen`` are then not known: ``NA``, never FASTA's under BLAST's name."""
    extra = h.get("extra")
    return isinstance(extra, dict) and "gap_opens" in extra


def blast_coordinates(h: Hsp) -> tuple[int, int, int, int]:
    """(qstart, qend, sstart, send), 1-based; a side on the minus strand end to start, as BLAST writes it.

    DNA on DNA: the relative strand goes to the subject (``sstart > send``), the query ascending
    (blastn); a translated query on a protein library: the query's (``qstart > qend``, blastx);
    a protein query on a translated library: the subject's (tblastn)."""
    qs, qe, ss, se = h.qstart, h.qend, h.sstart, h.send
    if h.qstrand and h.sstrand:
        return (qs, qe, se, ss) if h.qstrand != h.sstrand else (qs, qe, ss, se)
    if h.qstrand == "-":
        qs, qe = qe, qs
    if h.sstrand == "-":
        ss, se = se, ss
    return qs, qe, ss, se


def blast_line(h: Hsp) -> str | SetAside:
    for what, text in (("query id", h.query_id), ("library sequence id", h.hit_id)):
        why = _plain(text, ascii_only=False)
        if why:
            return SetAside(h.doc_id, h.index, f"the {what} {why}: it would split BLAST's tab-separated columns")
    mismatches, gap_opens = alignment_counts(h)
    qs, qe, ss, se = blast_coordinates(h)
    m8 = from_m8(h)
    cells = [h.query_id, h.hit_id, "NA" if m8 else _percent(_num(h.get("identity")), "NA"),
             "NA" if m8 else _int_text(h.get("overlap"), "NA"),
             _int_text(mismatches, "NA"), _int_text(gap_opens, "NA"), str(qs), str(qe), str(ss), str(se),
             _float_text(_num(h.get("evalue")), "NA"), _float_text(_num(h.get("bits")), "NA"),
             _float_text(_num(h.get("z_score")), "NA"), _int_text(h.get("opt_score"), "NA"),
             _int_text(h.get("score"), "NA"), _percent(_num(h.get("similarity")), "NA"),
             _int_text(h.qlen, "NA"), _int_text(h.slen, "NA")]
    return "\t".join(cells)


def line_for(fmt: str, h: Hsp) -> str | SetAside:
    if fmt == "bed":
        return bed_line(h)
    if fmt == "gff3":
        return gff3_line(h)
    if fmt == "blast-tab":
        return blast_line(h)
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
