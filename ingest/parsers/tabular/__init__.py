r"""Parser for FASTA's BLAST-tabular output (``-m 8`` family), registered as format ``"pasta-m8"``:
the same searches/hits model as the ``-m 10`` parser (:mod:`ingest.parsers.pasta`), with only what
a table row holds.  (FASTA's ``-m 9`` family without ``-m 10``, format ``"pasta-m9"``, is
:mod:`ingest.parsers.tabular.m9`.)

Entry points (the contract of :mod:`ingest.parsers`)::

    parse(handle: BufferedIOBase, source="<stream>", *, sequences=True, warn=None) -> Iterator[Query]
    parse_dicts(handle, source="<stream>", *, sequences=True, warn=None, spill=SPILL_HITS)
        -> Iterator[dict]   # Query.to_dict(); a query's "hits" a HitSpool past ``spill`` hits

``sequences`` is accepted for the contract and changes nothing: a table holds no sequences.
Streaming, a line at a time (at most ``MAX_LINE``, 1 MiB); bad input raises
:class:`ingest.errors.ParseError` ``file:line: reason`` after the queries completed before it.

What FASTA prints (36.3.8i; ``-m 8`` and its letters, in one ``-m`` argument)::

    # ssearch36 -m 8CB q.aa lib.fa          <- C: comment lines; the command, first of a run
    # SSEARCH 36.3.8i Nov, 2022             <- the program and version, first of each query
    # Query: ID DESCRIPTION - 209 aa        <- the query (FASTA writes "aa" for fastx's nt query)
    # Database: lib.fa
    # Fields: query id, query length, subject id, ...   (absent for a query without hits)
    # 11 hits found                         <- library sequences, not rows
    ID<TAB>SUBJECT<TAB>%id<TAB>alen<TAB>mism<TAB>gapo<TAB>qs<TAB>qe<TAB>ss<TAB>se<TAB>E<TAB>bits[<TAB>code]
    # SSEARCH processed 4 queries           <- the end of the run

``L`` adds the query's and the subject's lengths after their ids (``-m 8CBL``; FASTA's ``# Fields:``
line names them whether printed or not: the columns are counted); ``B`` adds the BTOP string and
``C`` (a second one, ``8CC``) a CIGAR string as a last column.  Without ``C`` there are no comment
lines: a query is its run of rows with one query id, and a query without hits leaves no trace.
With ``-d N`` FASTA prints ``-m 0`` alignments after each query's rows (from ``>>ID``): they are
skipped, with one warning for the file; each hit's values are its rows'.  With ``-m 10`` beside
(``-m 8CB -m 10``, ``-m 10,8CC``, and ``-d N`` for any to be shown) it prints the ``-m 10`` blocks of
the first hits there instead: they are read by the ``-m 10`` parser and joined to their rows
(:mod:`ingest.parsers.tabular.beside`): such a hit has its blocks' values, as a ``-m 10`` file's
aligned hit (``score``, ``opt_score``, ``z_score``, ``identity`` and ``overlap`` as the block prints
them, ``similarity``, sequences, ``hit_length`` its ``; sq_len:``), its rows' ``mismatches``,
``gap_opens`` and ``al_code`` in ``extra``, and the query the ``; pg_*`` lines in ``params`` (but for a
query FASTA gives no name, whose blocks name its side after the query file: skipped, a warning).

Rows of one library sequence follow one another: consecutive rows with the same subject id and the
same strands are one hit (its alternate alignments, the ``>--`` of ``-m 10``), in table order
(``rank``), but where a row scores higher than the row before (FASTA lists a hit's alternates each
scoring no more than the one before; a higher score is the next hit: a long DNA library sequence
searched in pieces lists each piece and its alternates) and but for rows without a subject id
(sequences FASTA gives no name, a space after ``>``: a hit each).  ``# N hits found`` counts hits:
where it disagrees, the rows are grouped by sequence and strand alone, else a hit a row, whichever
gives N; neither refuses the file at that line.

Query (fields a table does not give are absent)

=================== ==============================================================================
query_id            the ``# Query:`` line's first word (each row's query id must equal it), or the
                    rows' query id without comments
query_description   the rest of the ``# Query:`` line, before `` - LEN aa|nt``
query_length        LEN of the ``# Query:`` line (what the block searched: a subrange's, a long
                    query's segment's, each segment its own query), or the ``L`` column
query_fragments     ``in K fragments`` of the ``# Query:`` line (fasts/fastm/fastf, tfast*; the
                    ``L`` column counts the commas between the peptides: LEN + K - 1)
query_type,         by the program (the command's, else the ``# SSEARCH ...`` line's): ``fastx36``
library_type        dna/protein, ``tfastx36`` protein/dna, ...; for the programs that search like
                    with like (ssearch36, fasta36, ...) the ``# Query:`` line's unit (aa: protein,
                    nt: dna) for both; absent without comment lines
program, command    the first comment line (the command; its first word)
version             the ``# PROGRAM VERSION`` line
library             ``# Database:``
query_index         1-based ordinal of the query in the file
run_index           1-based number of the run (with comments: each command line begins one)
hits                one per library sequence (rows, grouped as above)
=================== ==============================================================================

Hit: ``hit_id`` (subject id as printed: whole, ``gi|NNN|`` included; ``""`` for a sequence FASTA
gives no name), ``rank``, ``hit_length`` (``L`` column only: FASTA's subject length, a piece's for a
long sequence searched in pieces), ``aligned`` (true), ``hsps`` (one per row).

Hsp: ``identity`` (``% identity`` / 100, as printed: 27.69 -> 0.2769), ``overlap`` (alignment
length), ``evalue``, ``bits``, ``query_start``/``query_end``, ``hit_start``/``hit_end`` (1-based,
start <= end), ``query_strand``/``hit_strand`` (``"+"``/``"-"`` on a side known to be DNA; ``"-"``
wherever FASTA printed the coordinates reversed, which only a DNA side can be), ``extra``:
``mismatches``, ``gap_opens`` and, with ``B``/``C``, ``al_code`` (the BTOP or CIGAR string as
printed).  No ``score``, ``opt_score``, ``z_score``, ``similarity``, ``frame`` or sequences: a table
row has none.  A run whose command line has ``-z -1`` (no statistics) has no ``evalue`` or ``bits``:
FASTA prints numbers in those columns all the same (11 and 7.1 ...), left out with a warning (in a
file without comment lines the command is not known, and they are kept).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from io import BufferedIOBase
from typing import cast

from ingest.model import Query
from ingest.parsers.pasta.spool import SPILL_HITS
from ingest.parsers.tabular.blast import MAX_LINE, read

__all__ = ["parse", "parse_dicts", "MAX_LINE"]


def parse(handle: BufferedIOBase, source: str = "<stream>", *, sequences: bool = True,
          warn: Callable[[str], None] | None = None) -> Iterator[Query]:
    """Yield one :class:`~ingest.model.Query` per query of a tabular file (its hits a list)."""
    for query, hits in read(handle, source, dicts=False, warn=warn, spill=None):
        query.hits = cast(list, hits)  # without a spill bound, always a list (of Hit objects: dicts=False)
        yield query


def parse_dicts(handle: BufferedIOBase, source: str = "<stream>", *, sequences: bool = True,
                warn: Callable[[str], None] | None = None, spill: int | None = SPILL_HITS) -> Iterator[dict]:
    """Like :func:`parse`, each query as ``Query.to_dict()``; past ``spill`` hits its ``"hits"`` is a
    :class:`~ingest.parsers.pasta.spool.HitSpool` (the same dicts), so memory stays bounded."""
    if spill is not None and spill < 1:
        raise ValueError(f"spill must be at least 1, not {spill!r}")
    for query, hits in read(handle, source, dicts=True, warn=warn, spill=spill):
        d = query.to_dict()
        d["hits"] = hits
        yield d
