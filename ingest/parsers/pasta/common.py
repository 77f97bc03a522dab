"""Helpers shared by the modules of the ``-m 10`` parser: number patterns, typed values,
decoding with a warning, coordinates (orientation, aligned columns) and the context of
the hits of one query."""

from __future__ import annotations

import re

INT_PATTERN = re.compile(rb"\s*[-+]?\d+\s*")
# FASTA prints scores with printf: "inf", "-inf", "nan" and "-nan" (glibc) where its statistics
# overflow (e.g. fastf36 -z 3 on a small library gives "; ff_z-score:  inf").  They are read as
# the float they denote; `sci-ingest parse` writes them as Extended JSON ({"$numberDouble": ...}).
FLOAT_PATTERN = re.compile(rb"\s*[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)\s*")
# the same for str values (typed_value)
_INT_S = re.compile(r"\s*[-+]?\d+\s*", re.ASCII)
_FLOAT_S = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*", re.ASCII)


#: What an aligned sequence of ``-m 10`` output may hold: residue letters (upper case, and
#: lower case where FASTA masks), ``*`` (stop), ``-`` (gap), ``/`` and ``\\`` (frameshifts of
#: fastx/fasty/tfastx/tfasty) and ``.``; anything else (NUL, digits, blanks, bytes over 127)
#: is not output of the FASTA programs.
RESIDUE_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz*-/\\."


def not_residues(seq: bytes) -> bytes:
    """The bytes of ``seq`` (newlines aside) that cannot be residues (empty when all can)."""
    return seq.translate(None, RESIDUE_BYTES + b"\n")


def fasta_number(value: bytes, typ):
    """``typ(value)`` (int or float) if ``value`` is such a number as FASTA prints, else
    ValueError (Python's own int()/float() also take "1_000", "infinity" and the like)."""
    if not (INT_PATTERN if typ is int else FLOAT_PATTERN).fullmatch(value):
        raise ValueError(value)
    return typ(value)


def impossible(field: str, value) -> str | None:
    """Why ``value`` cannot be the ``field`` of an alignment, or None.

    Only what FASTA cannot print is refused: identity and similarity are fractions
    (``xx_ident`` / ``xx_sim``, printed ``%5.3f`` of a count over the overlap, 0..1), and an
    E-value is an expected count (never negative, never NaN; FASTA prints ``inf`` for none).
    Scores, bit scores and z-scores may be negative (global alignments, ``-E`` loose enough to
    show a hit below chance) and are not checked.
    """
    if field in ("identity", "similarity"):
        if not 0.0 <= value <= 1.0:
            return "is not a fraction between 0 and 1"
    elif field in ("evalue", "evalue2"):
        if not value >= 0.0:  # NaN too
            return "is not an E-value (negative or not a number)"
    return None


def typed_value(value: str):
    """int/float if ``value`` is a plain number, else the stripped string."""
    if _INT_S.fullmatch(value):
        return int(value)
    if _FLOAT_S.fullmatch(value):
        return float(value)
    return value.strip()


def decode_utf8(raw: bytes, what: str, source: str, line: int, warn) -> str:
    """``raw`` as UTF-8; bytes that are not are replaced by U+FFFD, with a ``warn``ing
    naming ``what`` and the line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if warn is not None:
            warn(f"{source}:{line}: non-UTF-8 bytes in {what} replaced by U+FFFD")
        return raw.decode("utf-8", errors="replace")


def orient(a: int, b: int, dna: bool) -> tuple[int, int, str | None] | None:
    """``(start, end, strand)`` of an al_start/al_stop pair: 1-based inclusive with start <= end;
    the strand only for DNA.  None when a protein side runs backwards (malformed)."""
    if a <= b:
        return a, b, ("+" if dna else None)
    if dna:
        return b, a, "-"
    return None


def end_column(disp: bytes, c0: int, n_res: int) -> int:
    """The column after the ``n_res``-th residue (non-``-``) of ``disp`` from ``c0``."""
    c1 = c0 + n_res
    g = disp.count(b"-", c0, c1)
    while g:
        n = c1 + g
        g = disp.count(b"-", c1, n)
        c1 = n
    return c1


class HitContext:
    """What the two hit parsers (fast path and checking path) need to know of the query
    whose hits they read; the fast path also keeps here what it learned of them."""

    __slots__ = ("query_id", "query_id_b", "q_dna", "h_dna", "translated", "sequences", "pattern", "qname_ok",
                 "dicts", "absent", "unterminated", "before", "query_alt_b")  # fmt: skip

    def __init__(self, query_id, q_dna, h_dna, translated, sequences, dicts=False, unterminated=False):
        self.query_id = query_id
        self.query_id_b = query_id.encode("utf-8", "replace")
        self.pattern: re.Pattern | None = None  # fast path: the layout of the last hit
        self.qname_ok: bytes | None = None  # fast path: the query side's name, checked
        self.q_dna = q_dna
        self.h_dna = h_dna
        self.translated = translated  # None, "q" or "h"
        self.sequences = sequences
        self.dicts = dicts  # hits as dicts (Hit.to_dict()), not Hit objects
        self.unterminated = unterminated  # a run without ">>><<<" (Run.unterminated)
        self.before = 0  # hits of the query moved out of the list (a spilled block: spool.py)
        # the name FASTA's alignments show for a "gi|" title whose stripping ran past the first space
        # (header.gi_stripped), or None
        self.query_alt_b: bytes | None = None
        # the Hsp fields no alignment of this query sets, whatever the layout
        self.absent = (
            (() if q_dna else ("query_strand",))
            + (() if h_dna else ("hit_strand",))
            + (() if sequences else ("query_seq", "hit_seq"))
        )
