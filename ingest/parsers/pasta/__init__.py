r"""Parser for FASTA-suite ``-m 10`` output ("PASTA"): ssearch36, fasta36, ggsearch36,
glsearch36, lalign36, fastx36, fasty36, tfastx36, tfasty36, fasts36, fastm36, fastf36,
tfasts36, tfastm36, tfastf36.

Entry points::

    parse(handle: BufferedIOBase, source: str = "<stream>", *, sequences: bool = True,
          warn: Callable[[str], None] | None = None, fast: bool = True,
          chunk_size: int = 1 << 20) -> Iterator[Query]
    parse_dicts(handle, source="<stream>", *, sequences=True, warn=None, fast=True,
                chunk_size=1 << 20, spill=SPILL_HITS) -> Iterator[dict]

``parse_dicts`` (registered as format ``"pasta"`` in :mod:`ingest.parsers`; the CLI and
the loader use it) yields exactly ``Query.to_dict()`` - same keys in the same order -
without building the objects first: its fast path builds the dicts of the hits itself
(the hits of a large block as a spool, see "Bounded memory" below).

* Pure and streaming: it reads only the binary ``handle`` it is given (the caller
  opens the file and gunzips ``.gz``), in 1 MiB chunks (``chunk_size``: the size asked
  of each ``handle.read()``; a read may return fewer bytes, as a pipe does, and the
  reader reads again), and holds one query block (in fact one hit block plus the hits
  parsed so far) at a time, and the query before it until the next line shows whether it
  goes on in segments: a long query searched in segments is held whole (``segments``).
* Bounded memory (``parse_dicts``, whose ``spill`` is ``SPILL_HITS``, 4096, unless
  given): the hits of a block beyond ``spill`` (or 4 MiB of their input), and the rows
  of a best-scores table beyond ``16 * spill``, go to an anonymous temporary file in
  chunks as they are read (``spool``); such a query's ``"hits"`` is then a
  :class:`~ingest.parsers.pasta.spool.HitSpool` - the same hit dicts in the same order,
  with ``len()`` and iteration - instead of a list.  With ``spill=None`` (and in
  ``parse``'s Query objects) every query's hits are a list.
* Yields one :class:`ingest.model.Query` (or its dict) per query block (``  N>>>`` ...
  ``>>><<<``), in file order.  Files made by concatenating several runs are accepted.
* A complete file ends with ``>>>///``.  Queries completed before a point of damage
  are yielded; the damaged one never is: the parser then raises
  :class:`ingest.errors.ParseError` ``(reason, source=source, line=N)`` with the
  1-based line number, and never any other exception.
* Bytes that are not UTF-8 in an id or a description are replaced by U+FFFD and
  reported through ``warn("<source>:<line>: ...")``; that is not an error.
* ``sequences=False`` skips the aligned sequences and the consensus line
  (``query_seq``, ``hit_seq``, ``consensus`` absent), which is faster.
* Speed: an alignment in the usual layout is read, from its ``>>`` line to the next
  ``>`` line, by one regular expression per layout (the exact score-line keys a
  program prints, matched literally; learned from the first alignment), in the read
  buffer, one alignment after the other (``fastpath.fast_hits``).  Its value patterns
  accept a subset of what the checking path accepts, so anything unusual (and every
  damaged alignment) goes to the line-checking path (``checking.parse_hit``), which
  reports the precise line; the tests check that both paths give the same result on every sample and on
  thousands of damaged ones (``tests/test_pasta_fastpath.py``).  ``fast=False`` sends
  every alignment to the checking path (same result, slower: for those tests).
* Limits (constant memory): a line may not exceed ``MAX_LINE`` (1 MiB), one hit block
  ``MAX_BLOCK`` (64 MiB); more than ``MAX_PREAMBLE`` lines between queries means the
  input is not a report.

Modules of this package, one per reason to change: ``reader`` (the buffered reader:
lines, table rows, hit blocks, their limits), ``query`` (runs and query blocks: the
loop that hands each hit block to the fast path or the checking path), ``header`` (a query
block's header: its query line, library, statistics, ``-H`` histogram, summary line and
parameters), ``segments`` (a long query searched in segments: its blocks
held, numbered and checked), ``table`` (the best-scores table), ``checking`` (the checking
path), ``fastpath`` (the fast path), ``spool`` (the hits of one block as they are
parsed: held, or in a temporary file past a bound, as a long table's rows) and ``common``
(the helpers they share).

Layout of a report (per query; lines not listed are ignored)::

    # ssearch36 -m 10 q.aa lib.fa          <- run header: command line (program)
     version 36.3.8i Nov, 2022             <- run header: version
      1>>>ID DESCRIPTION - 209 aa          <- query start: number, id, description, length
    Library: lib.fa
         2022 residues in    11 sequences
    Statistics: ...                        <- absent with -z -1
    Algorithm: ...
    The best scores are:   s-w bits E(11)  <- table header: its columns name the scores
    ID DESCRIPTION...  ( 218)  100 30.6 0.00031   (one row per hit, [f]/[r] frame for DNA)
    +-                 25 17.6 0.61 ...    <- (-m 9 family) one more alignment of the row above
    >>>ID, 209 aa vs lib.fa library        <- absent when no alignment is shown
    ; pg_name: ssearch36                   <- pg_* / mp_* lines -> Query.params
    >>HITID DESCRIPTION                    <- one block per aligned hit (table order)
    ; sw_s-w opt: 100 ...                  <- scores of the alignment
    >QUERY ..  ; sq_len / al_start / al_stop / al_display_start, sequence lines
    >HIT ..    ; idem for the library sequence
    ; al_cons:                             <- consensus line(s)
    ; al_code: =45-4=15                    <- (-m 10 -m 9c) the alignment, encoded
    >--                                    <- alternate alignment of the same hit (-E "x y")
    >>><<<                                 <- end of the query
    >>>///                                 <- end of the run

With ``-m 10 -m 9c`` (also ``9``, ``9C``, ``9B``: two ``-m`` options; ``-m "10 9c"`` is
plain ``-m 10``) the table header and rows go on after a tab with the ``-m 9``
columns (``%_id %_sim sw alen an0 ax0 pn0 px0 an1 ax1 pn1 px1 gapq gapl fs``, then for
9c/9C/9B the encoded alignment after a second tab), and ``+-`` rows list more
alignments of the sequence of the row above.  Output that is not ``-m 10`` (``-m 9c``
alone, ``-m 10 -m B``: the last ``-m`` wins) ends in a ParseError.

Field table
===========

Query (``Query.to_dict()``; fields that are None are omitted)

=================== =================================================================
field               source
=================== =================================================================
query_id            first word of the ``  N>>>`` line (same as in ``>>>ID, LEN aa vs``; the
                    alignments may show it cut, without ``gi|N|``, or for a title
                    ``gi|N gi|N|db||acc ...`` as ``N|db||acc``, FASTA's gi-stripping past the space)
query_description   rest of the ``  N>>>`` line before `` - LEN aa|nt`` (absent if empty; of a title
                    FASTA cut at 511 bytes, without the piece of `` - LEN aa`` it kept)
query_length        LEN of the ``  N>>>`` line (of the summary line when FASTA cut the title at
                    511 bytes); for a query searched in segments the whole query's (the sum of
                    its segments' lengths; after a subrange of a long query, 39,990 plus the
                    lengths of the blocks FASTA searched past it)
query_fragments     ``in K fragments`` of the ``  N>>>`` line (fasts/fastm/fastf, tfast*)
query_segment       a long query's segment: ``{index, count, offset, length}`` (segments.py;
                    ``printed_offset`` where FASTA's numbering was corrected)
library_subrange    ``{start, end}`` of a library subrange (``Library: lib.fa:101-500``): FASTA cut
                    every library sequence to it (``hit_length`` is the piece's)
query_range         what a block searched when not the whole sequence from 1 (a subrange
                    ``file:101-400``, an ``@C:N`` header, ``-o``): ``{start, end}`` in the
                    alignments' numbering, read from their ``; sq_offset:`` (segments.py)
query_type          ``"protein"``/``"dna"``: fastx/fasty query is DNA, tfastx/tfasty
                    query is protein, otherwise the unit of the query line (aa/nt;
                    ``"dna"`` means nucleotides: an RNA query, ``-n``/``-U``, is "dna"
                    too, its sequence shown with U)
library_type        ``"protein"``/``"dna"``: type of the library sequences (same rule)
searched_strand     ``"+"`` for ``(forward-only)`` (-3), ``"-"`` for ``(reverse complement)``
                    (-i) on the query line; absent when both strands were searched
query_index         1-based ordinal of the query in the file (across concatenated runs)
run_index           1-based number of the run in the file (concatenated runs)
run_query_number    the N of ``  N>>>`` (restarts at 1 in each run)
program             ``; pg_name:``, else the first word of the ``# prog ...`` header line
version             ``; pg_ver:``, else the `` version ...`` banner line
algorithm           the ``Algorithm:`` line
command             the run's ``# ...`` header line (the command line)
statistics          the ``Statistics:`` line (absent with ``-z -1``)
library             ``Library:`` line (without the ``(range: ...)`` that ``-M`` adds)
library_range       ``-M``: the ``(range: 200-250)`` of the ``Library:`` line, as
                    printed (``"200-250"``, ``">220"``)
library_sequences   ``R residues in S sequences`` -> S
library_residues    ``R residues in S sequences`` -> R
histogram           ``-H``: the rows of the histogram FASTA draws above ``Statistics:`` (when more
                    than 20 library scores sample them): ``{score, observed, expected}`` each, as
                    printed (``expected`` absent where FASTA prints none); the first row
                    (``< 20``) and the last (``>120``) also ``tail``: ``"<"``/``">"``
params              every ``; pg_*``/``; mp_*`` line: key as printed (``pg_open-ext``),
                    value int/float if it is a plain number, else the string.  The
                    ``pg_name_alg`` that FASTA prints on the ``pg_argv`` line is split
                    off into its own key.  Absent when the query has no such lines
                    (no alignments shown).
hits                list of Hit in table order
=================== =================================================================

Hit

=============== ======================================================================
hit_id          first word of the ``>>`` line; for table-only hits the first word of
                the table row (the table truncates long descriptions, so a very long
                id may be cut)
hit_description rest of the ``>>`` line (table row text for table-only hits)
hit_length      ``; sq_len:`` of the library side, or the table's ``(LEN)`` where that is
                larger (a long sequence searched in pieces, see below; table-only hits:
                the table's)
rank            1-based position in the best-scores table (alignment order if no table;
                ``+-`` rows are not counted: they belong to the sequence above)
aligned         False for hits only in the best-scores table (shown rows > ``-d``)
hsps            the ``>>`` alignment and its ``>--`` alternates, in file order;
                a table-only hit has one Hsp with the table's scores (one per row:
                its row and the ``+-`` rows after it)
=============== ======================================================================

A DNA search lists a library sequence once per strand/frame: each row is its own Hit.
A long library sequence is searched in overlapping pieces (by default beyond about
150,000 nt of DNA; ``-N`` sets the size): the table lists each piece that scores as a
row, so each is its own Hit; its alignment shows the piece (``; sq_len:`` its length,
``; sq_offset:`` its start) but counts coordinates in the whole sequence, whose length
the table gives.  Coordinates are always as FASTA prints them: with a query subrange
(``q.fa:20-120``) they count in the whole query while ``query_length`` is the
subrange's (101); ``-o`` offsets shift them as asked.

Hsp (``xx_`` is the program's prefix: ``sw_``, ``fa_``, ``bs_``, ``gnw_``, ``lsw_``,
``fx_``, ``fy_``, ``tfx_``, ``tfy_``; table-only hits take the same values from the
table columns named in brackets, and with ``-m 10 -m 9*`` also those in braces)

=============== ======================================================================
score           ``xx_score`` (raw score of the shown alignment); if the program prints
                none (fasta36) the optimised score ``opt_score`` [``s-w``/``n-w``/``opt``]
opt_score       ``xx_opt``, ``xx_s-w opt``, ``xx_n-w opt`` [``s-w``, ``n-w``, ``opt``]
initn_score     ``xx_initn`` [``initn``]
init1_score     ``xx_init1`` [``init1``]
z_score         ``xx_z-score`` [``z-sc``]
bits            ``xx_bits`` [``bits``]
evalue          ``xx_expect`` [``E(N)``]
evalue2         [``E2()``] (``-z 21`` and up: the best-shuffle E(), printed only in the
                table; for an aligned hit it goes to its first Hsp)
identity        ``xx_ident`` as a fraction 0..1 {``%_id``}
similarity      ``xx_sim`` as a fraction 0..1 {``%_sim``}
overlap         ``xx_overlap`` (alignment length in columns) {``alen``}
frame           ``xx_frame`` (``f``/``r``, or a frame number) [``[f]``/``[r]``]
query_start/end ``al_start``/``al_stop`` of the query side: 1-based inclusive, start<=end
                {``an0``/``ax0``}
hit_start/end   same for the library side {``an1``/``ax1``}
query_strand    ``"+"``/``"-"`` for a DNA query (``-`` when al_start > al_stop), else absent
hit_strand      same for a DNA library
query_seq       the aligned query residues (gaps ``-``, frameshifts ``/``/``\``), with
                the surrounding context FASTA displays cut away
hit_seq         the same columns of the library sequence
consensus       the ``al_cons`` characters of the same columns
extra           any other ``xx_*`` line of the alignment, typed as for ``params``; with
                ``-m 10 -m 9*``: ``sw``, ``gapq``, ``gapl``, ``fs`` (ints, from the table
                row, for aligned hits too) and ``al_code``: the encoded alignment as
                printed - ``; al_code:`` (9c), else the table's last column (9c: FASTA
                code, 9C: CIGAR, 9B: BTOP); with ``-V`` also ``al_code_ann``: where the
                annotated residues are (``; al_code_ann:``, or the table's third tab column)
=============== ======================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ingest.errors import ParseError
from ingest.model import Query
from ingest.parsers.pasta.query import parse_queries
from ingest.parsers.pasta.reader import CHUNK, MAX_BLOCK, MAX_LINE, BinaryReadable, Reader
from ingest.parsers.pasta.spool import SPILL_HITS, HitSpool

__all__ = ["parse", "parse_dicts", "MAX_LINE", "MAX_BLOCK", "SPILL_HITS", "HitSpool"]


def parse(
    handle: BinaryReadable,
    source: str = "<stream>",
    *,
    sequences: bool = True,
    warn: Callable[[str], None] | None = None,
    fast: bool = True,
    chunk_size: int = CHUNK,
) -> Iterator[Query]:
    """Yield one :class:`~ingest.model.Query` per query block of a ``-m 10`` report.

    Raises :class:`~ingest.errors.ParseError` (with ``source`` and a 1-based line)
    on malformed input, after yielding the queries completed before the damage.
    ``fast=False``: every alignment goes to the checking path (same result, slower).
    ``chunk_size``: bytes asked of each ``handle.read()`` (ValueError if below 1, at
    the call)."""
    return _guarded(Reader(handle, source, chunk_size), sequences, warn, False, fast)


def parse_dicts(
    handle: BinaryReadable,
    source: str = "<stream>",
    *,
    sequences: bool = True,
    warn: Callable[[str], None] | None = None,
    fast: bool = True,
    chunk_size: int = CHUNK,
    spill: int | None = SPILL_HITS,
) -> Iterator[dict]:
    """Like :func:`parse`, but yield each query as its JSON-ready dict, equal to
    ``Query.to_dict()`` (same keys, same order): what the CLI and the loader write.
    Faster: the fast path builds the dicts of the hits directly.

    ``spill`` (a number of hits, at least 1): a query block holding more (or 4 MiB of
    hits) yields its ``"hits"`` as a :class:`HitSpool` (a temporary file: the same dicts,
    iterated), so that memory stays bounded whatever one block holds; None: always a
    list (``Query.to_dict()`` exactly)."""
    if spill is not None and spill < 1:
        raise ValueError(f"spill must be at least 1, not {spill!r}")
    return _guarded(Reader(handle, source, chunk_size), sequences, warn, True, fast, spill)


def _guarded(r: Reader, sequences: bool, warn, dicts: bool, fast: bool, spill: int | None = None) -> Iterator:
    try:
        yield from parse_queries(r, sequences, warn, dicts, fast, spill)
    except ParseError:
        raise
    except (IndexError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        # Defensive: every structural check raises ParseError itself (the fuzz tests
        # never reach this); it only maps an unforeseen corner of damaged input to
        # the documented error instead of leaking a library exception.
        raise r.error(f"malformed input ({type(exc).__name__}: {exc})") from exc
