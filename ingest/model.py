"""The object model of a sequence-similarity search report.

Plain ``@dataclass(slots=True)`` classes with no heavy imports, filled by the
search-format parsers (``ingest.parsers.pasta``) and turned into JSON/BSON-ready
dicts with :meth:`to_dict`.

``to_dict()`` *omits* every field whose value is ``None``: a value the program
did not print is absent from the document, never zero or an empty string.
Lists (``hits``, ``hsps``) are always present, possibly empty.

* :class:`Query` - one query sequence of a report (one ``>>>`` block).
* :class:`Hit` - one library sequence (one row of the best-scores table).
* :class:`Hsp` - one local alignment (high-scoring segment pair) of a hit.

The meaning of each field, and where the parser takes it from, is documented
in the docstring of the package :mod:`ingest.parsers.pasta`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

__all__ = ["Hsp", "Hit", "Query"]


@dataclass(slots=True)
class Hsp:
    """One alignment between the query and a hit.

    Coordinates are 1-based and inclusive with ``start <= end``; the strand
    (``"+"``/``"-"``) of a nucleotide side is given separately and is absent
    for protein sides.  ``score`` is the program's raw alignment score (the
    ``*_score`` line, e.g. ``sw_score``), or the optimised score (``*_opt``,
    ``*_s-w opt``, ``*_n-w opt``) when the program prints no ``*_score`` line
    (fasta36) or when only the best-scores table gives the scores.
    ``identity``/``similarity`` are fractions (0..1) as printed.
    """

    score: int | None = None
    opt_score: int | None = None
    initn_score: int | None = None
    init1_score: int | None = None
    z_score: float | None = None
    bits: float | None = None
    evalue: float | None = None
    evalue2: float | None = None
    identity: float | None = None
    similarity: float | None = None
    overlap: int | None = None
    frame: str | None = None
    query_start: int | None = None
    query_end: int | None = None
    hit_start: int | None = None
    hit_end: int | None = None
    query_strand: str | None = None
    hit_strand: str | None = None
    query_seq: str | None = None
    hit_seq: str | None = None
    consensus: str | None = None
    extra: dict[str, object] | None = None

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in zip(_HSP_FIELDS, _hsp_values(self)) if v is not None}
        if self.extra is not None:
            d["extra"] = dict(self.extra)
        return d


_HSP_FIELDS = tuple(f for f in Hsp.__slots__ if f != "extra")  # type: ignore[attr-defined]  # slots=True makes it
_hsp_values = attrgetter(*_HSP_FIELDS)  # all values in one C call (to_dict is hot)


@dataclass(slots=True)
class Hit:
    """One library sequence that matched the query.

    ``rank`` is the 1-based position in the program's best-scores table (or in
    the list of alignments when the program prints no table).  ``aligned`` is
    False for hits listed only in the best-scores table (beyond ``-d``): they
    carry a single :class:`Hsp` holding the table's scores and no coordinates.
    """

    hit_id: str
    rank: int
    hit_description: str | None = None
    hit_length: int | None = None
    aligned: bool = True
    hsps: list[Hsp] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in zip(_HIT_FIELDS, _hit_values(self)) if v is not None}
        d["hsps"] = [h.to_dict() for h in self.hsps]
        return d


_HIT_FIELDS = ("hit_id", "hit_description", "hit_length", "rank", "aligned")
_hit_values = attrgetter(*_HIT_FIELDS)


@dataclass(slots=True)
class Query:
    """One query sequence of a report, with its hits in the program's order."""

    query_id: str
    query_index: int
    query_description: str | None = None
    query_length: int | None = None
    #: fastf/fasts/fastm (and tfast*): the query is a set of peptides, "- 39 aa in 6 fragments"
    query_fragments: int | None = None
    #: a long query searched in segments (parsers/pasta/segments.py): {index, count, offset, length};
    #: query_length is then the whole query's
    query_segment: dict[str, int] | None = None
    #: the residues searched, in the alignments' numbering, when not the whole sequence from 1
    #: (a subrange "query.fa:101-400", an "@C:N" header, "-o"): {start, end} (parsers/pasta/segments.py)
    query_range: dict[str, int] | None = None
    query_type: str | None = None
    library_type: str | None = None
    searched_strand: str | None = None
    program: str | None = None
    version: str | None = None
    algorithm: str | None = None
    command: str | None = None
    statistics: str | None = None
    library: str | None = None
    library_range: str | None = None
    #: a subrange FASTA cut from every library sequence ("lib.fa:101-500" on the command line):
    #: {start, end} (end absent for "lib.fa:101-"); hit coordinates count in the whole sequence,
    #: hit_length is the cut piece's
    library_subrange: dict[str, int] | None = None
    library_sequences: int | None = None
    library_residues: int | None = None
    #: -H: the histogram FASTA draws above the statistics, one {score, observed, expected} a row as
    #: printed (the first row's score is "< N", the last's ">N": tail "<"/">"); absent without one
    histogram: list[dict[str, object]] | None = None
    params: dict[str, object] | None = None
    run_index: int | None = None
    run_query_number: int | None = None
    hits: list[Hit] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in zip(_QUERY_SCALARS, _query_values(self)) if v is not None}
        if self.params is not None:
            d["params"] = dict(self.params)
        d["hits"] = [h.to_dict() for h in self.hits]
        return d


_QUERY_SCALARS = tuple(
    f for f in Query.__slots__ if f not in ("params", "hits")  # type: ignore[attr-defined]  # slots=True makes it
)
_query_values = attrgetter(*_QUERY_SCALARS)
