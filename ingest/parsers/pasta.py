r"""Parser for FASTA-suite ``-m 10`` output ("PASTA"): ssearch36, fasta36, ggsearch36,
glsearch36, lalign36, fastx36, fasty36, tfastx36, tfasty36.

Entry points::

    parse(handle: BinaryIO, source: str = "<stream>", *, sequences: bool = True,
          warn: Callable[[str], None] | None = None, fast: bool = True,
          chunk_size: int = 1 << 20) -> Iterator[Query]
    parse_dicts(handle, source="<stream>", *, sequences=True, warn=None, fast=True,
                chunk_size=1 << 20) -> Iterator[dict]

``parse_dicts`` (registered as format ``"pasta"`` in :mod:`ingest.parsers`; the CLI and
the loader use it) yields exactly ``Query.to_dict()`` - same keys in the same order -
without building the objects first: its fast path builds the dicts of the hits itself.

* Pure and streaming: it reads only the binary ``handle`` it is given (the caller
  opens the file and gunzips ``.gz``), in 1 MiB chunks (``chunk_size``: the size asked
  of each ``handle.read()``; a read may return fewer bytes, as a pipe does, and the
  reader reads again), and holds one query block (in fact one hit block plus the hits
  parsed so far) at a time.
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
  buffer, one alignment after the other (``_fast_hits``).  Its value patterns accept
  a subset of what the checking path accepts, so anything unusual (and every damaged
  alignment) goes to the line-checking path (``_parse_hit``), which reports the precise
  line; the tests check that both paths give the same result on every sample and on
  thousands of damaged ones (``tests/test_pasta_fastpath.py``).  ``fast=False`` sends
  every alignment to the checking path (same result, slower: for those tests).
* Limits (constant memory): a line may not exceed ``MAX_LINE`` (1 MiB), one hit block
  ``MAX_BLOCK`` (64 MiB); more than ``MAX_PREAMBLE`` lines between queries means the
  input is not a report.

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
query_id            first word of the ``  N>>>`` line (same as in ``>>>ID, LEN aa vs``)
query_description   rest of the ``  N>>>`` line before `` - LEN aa|nt`` (absent if empty)
query_length        LEN of the ``  N>>>`` line
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

import re
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import BinaryIO, Callable, Iterator

from ingest.errors import ParseError
from ingest.model import Hit, Hsp, Query

__all__ = ["parse", "parse_dicts", "MAX_LINE", "MAX_BLOCK"]

CHUNK = 1 << 20  # default chunk_size: bytes asked of each handle.read()
MAX_LINE = 1 << 20  # longest accepted line (bytes)
MAX_BLOCK = 64 << 20  # largest accepted single hit block (bytes)
MAX_PREAMBLE = 1000  # lines accepted between queries without a query block
LOOKAHEAD = 256 << 10  # bytes kept ahead of the position in the hit loop (at most chunk_size)

_QSTART = re.compile(rb"^\s*(\d+)>>>(.*?)\s*-\s+(\d+) (aa|nt)(?:\s+\(([^()]*)\))?\s*$")
_QSUMMARY = re.compile(rb"^>>>(.*), (\d+) (aa|nt) vs (.*?) library\s*$")
_RESIDUES = re.compile(rb"(\d+) residues in\s+(\d+) sequences")
_LIB_RANGE = re.compile(rb"\s*\(range: ([^()]*)\)$")  # "Library: lib.fa (range: 200-250)" (-M)
_KV = re.compile(rb"^; ([^:\n]*): ?(.*?)\r?$", re.M)
_INT = re.compile(rb"\s*[-+]?\d+\s*")
# "-m F10 FILE" (-m 10 written to a file) and "-m 9i"/"-m 9I" end queries without ">>><<<":
# in a run whose command line has such a -m option, the next query line or ">>>///" ends
# a query; elsewhere a missing ">>><<<" is damage (a cut or spliced file)
_UNTERMINATED = re.compile(r"""(?:^|\s)-m\s*["']?\s*(?:F|9[iI](?![\w-]))""")
_NEXT_QUERY = re.compile(rb"\n[ \t]*\d+>>>")  # a query line (in a run without ">>><<<")
# the line after the best-scores table: blank (or white space) or a ">>>" line
_ROW_END = re.compile(rb"\n(?:[ \t\r\x0b\x0c]*\n|>>>)")
_CONTROL = bytes(range(0, 9)) + bytes(range(14, 32)) + b"\x7f"
_FLOAT = re.compile(rb"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")
_INT_S = re.compile(r"\s*[-+]?\d+\s*", re.ASCII)
_FLOAT_S = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*", re.ASCII)

# program base name -> (query type, library type); None: "same as the query line says"
_TRANSLATED = {
    "fastx": ("dna", "protein"),
    "fasty": ("dna", "protein"),
    "tfastx": ("protein", "dna"),
    "tfasty": ("protein", "dna"),
    "tfasts": ("protein", "dna"),
    "tfastf": ("protein", "dna"),
    "tfastm": ("protein", "dna"),
}

# suffix of an alignment score line (after the "xx_" prefix) -> (Hsp attribute, type)
_HSP_KEYS: dict[bytes, tuple[str, type]] = {
    b"s-w opt": ("opt_score", int),
    b"n-w opt": ("opt_score", int),
    b"opt": ("opt_score", int),
    b"initn": ("initn_score", int),
    b"init1": ("init1_score", int),
    b"z-score": ("z_score", float),
    b"bits": ("bits", float),
    b"expect": ("evalue", float),
    b"expect2": ("evalue2", float),
    b"score": ("score", int),
    b"ident": ("identity", float),
    b"sim": ("similarity", float),
    b"overlap": ("overlap", int),
}

# identity, similarity and alignment length: -m 9 columns (after the tab), and with
# -m 9i / 9I plain columns of the best-scores table
_TABLE_ALIGN_COLS: dict[str, tuple[str, type]] = {
    "%_id": ("identity", float),
    "%_sim": ("similarity", float),
    "alen": ("overlap", int),
}
# best-scores table column -> (Hsp attribute, type)
_TABLE_COLS: dict[str, tuple[str, type]] = {
    "s-w": ("opt_score", int),
    "n-w": ("opt_score", int),
    "opt": ("opt_score", int),
    "initn": ("initn_score", int),
    "init1": ("init1_score", int),
    "z-sc": ("z_score", float),
    "bits": ("bits", float),
    "E2()": ("evalue2", float),
    **_TABLE_ALIGN_COLS,
}


# --------------------------------------------------------------------------- helpers


def _typed(value: str):
    """int/float if ``value`` is a plain number, else the stripped string."""
    if _INT_S.fullmatch(value):
        return int(value)
    if _FLOAT_S.fullmatch(value):
        return float(value)
    return value.strip()


class _Reader:
    """Chunked reader over a binary handle that tracks line numbers: it asks
    ``chunk_size`` bytes of each ``handle.read()`` and reads again while it needs more
    (a read may return fewer bytes, as from a pipe; only b"" is the end)."""

    __slots__ = ("handle", "source", "chunk_size", "lookahead", "buf", "pos", "line_no", "eof", "_before")

    def __init__(self, handle: BinaryIO, source: str, chunk_size: int = CHUNK):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, not {chunk_size!r}")
        self.handle = handle
        self.source = source
        self.chunk_size = chunk_size
        self.lookahead = min(LOOKAHEAD, chunk_size)  # bytes the hit loop keeps ahead
        self.buf = b""
        self.pos = 0
        self.line_no = 0  # lines fully consumed before ``pos``
        self.eof = False
        self._before = (0, 0)  # (pos, line_no) before the last readline, for unread()

    def error(self, reason: str, line: int | None = None) -> ParseError:
        return ParseError(reason, source=self.source, line=self.line_no + 1 if line is None else line)

    def _fill(self) -> bool:
        if self.eof:
            return False
        try:
            chunk = self.handle.read(self.chunk_size)
        except (OSError, EOFError, ValueError) as exc:  # e.g. a broken gzip stream
            raise self.error(f"cannot read input: {exc}") from exc
        if not chunk:
            self.eof = True
            return False
        if not isinstance(chunk, (bytes, bytearray)):
            raise ParseError("handle must be opened in binary mode", source=self.source, line=self.line_no + 1)
        if self.pos:
            self.buf = self.buf[self.pos :] + chunk
            self.pos = 0
        else:
            self.buf += chunk
        return True

    def unread(self) -> None:
        """Give back the line the last readline() returned (call right after it: the
        line is still in the buffer before ``pos``, since only a read refills it)."""
        self.pos, self.line_no = self._before

    def readline(self) -> bytes | None:
        """The next line without its line end, or None at the end of the input."""
        start = self.pos
        while True:
            buf = self.buf
            e = buf.find(b"\n", start)
            if e >= 0:
                if e - self.pos > MAX_LINE:
                    raise self.error(f"line longer than {MAX_LINE} bytes")
                line = buf[self.pos : e]
                self._before = (self.pos, self.line_no)  # after any refill moved the line
                self.pos = e + 1
                self.line_no += 1
                return line[:-1] if line.endswith(b"\r") else line
            if len(buf) - self.pos > MAX_LINE:
                raise self.error(f"line longer than {MAX_LINE} bytes")
            start = len(buf) - self.pos
            if not self._fill():
                if self.pos >= len(self.buf):
                    return None
                line = self.buf[self.pos :]
                self._before = (self.pos, self.line_no)
                self.pos = len(self.buf)
                self.line_no += 1
                return line[:-1] if line.endswith(b"\r") else line
            start += self.pos

    def read_rows(self) -> tuple[list[bytes], int, bool]:
        """Consecutive non-blank lines not starting with ``>>>`` (best-scores table
        rows), the line number of the first, and whether a row starts with ``+-``;
        the line that ends them is not consumed."""
        rows: list[bytes] = []
        first = self.line_no + 1
        plus = False
        while True:
            buf, pos = self.buf, self.pos
            last = buf.rfind(b"\n", pos)  # rows are taken only as complete lines
            if last < 0:
                if len(buf) - pos > MAX_LINE:
                    raise self.error(f"line longer than {MAX_LINE} bytes")
                if not self._fill():
                    return rows, first, plus  # a last line without line end is left to readline
                continue
            e = buf.find(b"\n", pos)
            if e - pos > MAX_LINE:
                raise self.error(f"line longer than {MAX_LINE} bytes")
            line = buf[pos:e]
            if not line.strip() or line.startswith(b">>>"):
                return rows, first, plus
            m = _ROW_END.search(buf, e, last + 1)
            end = last if m is None else m.start()
            seg = buf[pos:end]
            lines = seg.split(b"\n")
            if len(seg) > MAX_LINE:
                for i, line in enumerate(lines):
                    if len(line) > MAX_LINE:
                        raise self.error(f"line longer than {MAX_LINE} bytes", self.line_no + 1 + i)
            if b"\r" in seg:
                lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
            rows += lines
            plus = plus or seg.startswith(b"+-") or b"\n+-" in seg
            self.pos = end + 1
            self.line_no += len(lines)
            if m is not None or not self._fill():
                return rows, first, plus

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes at the current position, without consuming them."""
        while len(self.buf) - self.pos < n and self._fill():
            pass
        return self.buf[self.pos : self.pos + n]

    def _check_lines(self, block: bytes, first: int) -> None:
        """Raise if a line of ``block`` (starting at line ``first``) exceeds MAX_LINE."""
        p = 0
        n = len(block)
        while p < n:
            e = block.find(b"\n", p)
            if e < 0:
                e = n
            if e - p > MAX_LINE:
                raise self.error(f"line longer than {MAX_LINE} bytes", first + block.count(b"\n", 0, p))
            p = e + 1

    def read_block(self, unterminated: bool = False) -> tuple[bytes, int]:
        """The lines from here to the next line starting with ``>>`` (exclusive) or,
        if ``unterminated`` (a run without ``>>><<<``), to the next query line.

        Returns the block (every line of it ends with ``\\n``) and the line number of
        its first line."""
        first = self.line_no + 1
        search = self.pos + 1
        while True:
            buf = self.buf
            e = buf.find(b"\n>>", search)
            if unterminated:
                m = _NEXT_QUERY.search(buf, search, len(buf) if e < 0 else e)
                if m is not None:
                    e = m.start()
            if e >= 0:
                block = buf[self.pos : e + 1]
                if len(block) > MAX_LINE:
                    self._check_lines(block, first)
                self.pos = e + 1
                self.line_no += block.count(b"\n")
                return block, first
            if len(buf) - self.pos > MAX_BLOCK:
                raise self.error(f"hit block larger than {MAX_BLOCK} bytes without a '>>' line")
            restart = len(buf) - 2  # "\n>" at the end may start a "\n>>"
            if unterminated:  # a query line may be cut anywhere: look at its line again
                restart = min(restart, buf.rfind(b"\n", self.pos + 1))
            search = max(restart, self.pos + 1) - self.pos
            if not self._fill():
                block = self.buf[self.pos :]
                if len(block) > MAX_LINE:
                    self._check_lines(block, first)
                self.pos = len(self.buf)
                self.line_no += block.count(b"\n")
                if not block.endswith(b"\n"):
                    self.line_no += 1
                    block += b"\n"
                return block, first
            search += self.pos


def _decode(raw: bytes, what: str, source: str, line: int, warn) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if warn is not None:
            warn(f"{source}:{line}: non-UTF-8 bytes in {what} replaced by U+FFFD")
        return raw.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- main


class _Run:
    """What the header of the current run says."""

    __slots__ = ("index", "program", "version", "command", "queries", "complete", "unterminated")

    def __init__(self, index: int):
        self.index = index
        self.program: str | None = None
        self.version: str | None = None
        self.command: str | None = None
        self.queries = 0
        self.complete = False
        # output modes that print no ">>><<<" after a query (see _UNTERMINATED)
        self.unterminated = False


def parse(
    handle: BinaryIO,
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
    return _guarded(_Reader(handle, source, chunk_size), sequences, warn, False, fast)


def parse_dicts(
    handle: BinaryIO,
    source: str = "<stream>",
    *,
    sequences: bool = True,
    warn: Callable[[str], None] | None = None,
    fast: bool = True,
    chunk_size: int = CHUNK,
) -> Iterator[dict]:
    """Like :func:`parse`, but yield each query as its JSON-ready dict, equal to
    ``Query.to_dict()`` (same keys, same order): what the CLI and the loader write.
    Faster: the fast path builds the dicts of the hits directly."""
    return _guarded(_Reader(handle, source, chunk_size), sequences, warn, True, fast)


def _guarded(r: _Reader, sequences: bool, warn, dicts: bool, fast: bool) -> Iterator:
    try:
        yield from _parse(r, sequences, warn, dicts, fast)
    except ParseError:
        raise
    except (IndexError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        # Defensive: every structural check raises ParseError itself (the fuzz tests
        # never reach this); it only maps an unforeseen corner of damaged input to
        # the documented error instead of leaking a library exception.
        raise r.error(f"malformed input ({type(exc).__name__}: {exc})") from exc


def _parse(r: _Reader, sequences: bool, warn, dicts: bool = False, fast: bool = True) -> Iterator:
    source = r.source
    run = _Run(1)
    query_index = 0
    preamble = 0
    first_content: bytes | None = None
    while True:
        line = r.readline()
        if line is None:
            break
        if first_content is None and line.strip():
            first_content = line
        m = _QSTART.match(line)
        if m:
            if run.complete:  # a new run without a header line
                run = _Run(run.index + 1)
            query_index += 1
            q = _parse_query(r, m, run, query_index, sequences, warn, dicts, fast)
            run.queries += 1
            preamble = 0
            yield q
            continue
        if len(line) - len(line.translate(None, _CONTROL)) > 1:
            raise r.error("binary data (control characters): not a text report", r.line_no)
        if line.startswith(b">>>///"):
            if run.queries == 0:
                raise r.error("'>>>///' end of run without any query block", r.line_no)
            run.complete = True
            continue
        if line.startswith(b"# ") and (run.complete or run.queries == 0):
            if run.queries or run.complete:
                run = _Run(run.index + 1)
            run.command = _decode(line[2:].strip(), "command line", source, r.line_no, warn)
            run.unterminated = _UNTERMINATED.search(run.command) is not None
            prog = run.command.split(None, 1)[0] if run.command else ""
            run.program = prog.rsplit("/", 1)[-1] or None
            continue
        if line.startswith(b"# "):
            raise r.error("a new run starts before the previous one ended with '>>>///' (truncated output?)", r.line_no)
        if line.startswith(b" version ") and run.version is None:
            run.version = _decode(line[9:].strip(), "version", source, r.line_no, warn) or None
            continue
        if line.startswith(b">"):
            if query_index == 0 and not line.startswith(b">>"):
                raise r.error(
                    "a FASTA sequence header where a -m 10 report was expected (plain FASTA file?)", r.line_no
                )
            raise r.error(f"unexpected line outside a query block: {line[:60]!r}", r.line_no)
        if line.startswith(b";"):
            raise r.error(f"'; key: value' line outside a query block: {line[:60]!r}", r.line_no)
        if line.count(b"\t") >= 5 and query_index == 0:
            raise r.error("tab-separated columns: this looks like BLAST/FASTA tabular output, not -m 10", r.line_no)
        preamble += 1
        if preamble > MAX_PREAMBLE:
            raise r.error(f"no query block ('  N>>>' line) within {MAX_PREAMBLE} lines", r.line_no)
    if query_index == 0:
        if first_content is None:
            raise r.error("empty input: no -m 10 report", max(r.line_no, 1))
        raise r.error("no query block ('  N>>>ID ... - LEN aa' line) found: not a FASTA -m 10 report", max(r.line_no, 1))
    if not run.complete:
        raise r.error(
            f"input ends after query {query_index} without the '>>>///' end-of-run line (truncated output?)",
            max(r.line_no, 1),
        )


def _types(program: str | None, unit: bytes) -> tuple[str, str]:
    """(query type, library type) from the program and the query line's unit."""
    base = _base(program)
    if base in _TRANSLATED:
        return _TRANSLATED[base]
    t = "dna" if unit == b"nt" else "protein"
    return t, t


def _parse_query(r: _Reader, m: re.Match, run: _Run, query_index: int, sequences: bool, warn,
                 dicts: bool = False, fast: bool = True) -> Query | dict:
    """The query block that starts at the ``  N>>>`` line matched by ``m``: a Query,
    or with ``dicts`` its ``to_dict()``; ``fast=False`` sends every alignment to the
    checking path."""
    source = r.source
    qline = r.line_no
    text = _decode(m.group(2), "query description", source, qline, warn)
    # a FASTA header with a space after ">" has no name for FASTA: its summary line
    # (">>>, 209 aa vs ...") and alignments ("> ..") show none; the id is then the first
    # word (as for hits, and as Biopython's FASTA reader takes it), "" for an empty header
    nameless = not text or text[0].isspace()
    parts = text.split(None, 1) or [""]
    q = Query(
        query_id=parts[0],
        query_index=query_index,
        query_description=(parts[1].strip() or None) if len(parts) > 1 else None,
        query_length=int(m.group(3)),
        program=run.program,
        version=run.version,
        command=run.command,
        run_index=run.index,
        run_query_number=int(m.group(1)),
    )
    unit = m.group(4)
    note = m.group(5)
    if note is not None:
        q.searched_strand = {b"forward-only": "+", b"reverse complement": "-"}.get(note.strip())
        if q.searched_strand is None:
            raise r.error(f"unknown query annotation ({note.decode('latin-1')})", qline)
    table: tuple | None = None  # (columns, -m 9 columns or None, rows, line of the first row, any "+-" row)
    params: dict | None = None

    # ---- header of the query: library, statistics, best-scores table, summary line
    while True:
        line = r.readline()
        if line is None:
            raise r.error(f"input ends inside query {q.query_id!r} (no '>>><<<' end of query; truncated?)", r.line_no)
        if line.startswith(b">>><<<"):
            _finish(r, q, run, unit, table, [], warn)
            return q.to_dict() if dicts else q
        if _ends_unterminated(run, line):
            r.unread()  # the next query's line, or the end of the run
            _finish(r, q, run, unit, table, [], warn)
            return q.to_dict() if dicts else q
        if line.startswith(b">>>///"):
            raise r.error(f"'>>>///' before the end of query {q.query_id!r} ('>>><<<' missing)", r.line_no)
        if line.startswith(b">>>"):
            sm = _QSUMMARY.match(line)
            if sm is None:
                raise r.error(f"malformed query summary line: {line[:80]!r}", r.line_no)
            sid = _decode(sm.group(1), "query id", source, r.line_no, warn)
            if sid != q.query_id and sid != q.query_id + "-" and not (nameless and sid in ("", "-")):
                # "ID-": -i (reverse complement); "": a query without a name (see above)
                raise r.error(f"query summary names {sid!r} but the query is {q.query_id!r}", r.line_no)
            if q.library is None:
                q.library = _decode(sm.group(4), "library name", source, r.line_no, warn)
            break
        if _QSTART.match(line):
            raise r.error(f"a new query starts before query {q.query_id!r} ended ('>>><<<' missing)", r.line_no)
        if line.startswith(b">") or line.startswith(b";"):
            raise r.error(f"unexpected line in the header of query {q.query_id!r}: {line[:60]!r}", r.line_no)
        if line.startswith(b"The best scores are:"):
            # "-m 10 -m 9c" (9, 9C, 9B): more columns after a tab
            head, tab, head9 = line[20:].decode("latin-1").partition("\t")
            cols = head.split()
            if not cols:
                raise r.error("best-scores table without column names", r.line_no)
            table = (cols, head9.split() if tab else None, *r.read_rows())
        elif line.startswith(b"Library:"):
            lib = line[8:].strip()
            rm = _RESIDUES.search(lib)
            if rm:
                lib = lib[: rm.start()].strip()
                q.library_residues, q.library_sequences = int(rm.group(1)), int(rm.group(2))
            rg = _LIB_RANGE.search(lib)
            if rg:
                q.library_range = rg.group(1).decode("latin-1").strip() or None
                lib = lib[: rg.start()]
            q.library = _decode(lib, "library name", source, r.line_no, warn) or None
        elif q.library_residues is None and (rm := _RESIDUES.search(line)) is not None:
            q.library_residues, q.library_sequences = int(rm.group(1)), int(rm.group(2))
        elif line.startswith(b"Statistics:"):
            q.statistics = _decode(line[11:].strip(), "statistics", source, r.line_no, warn) or None
        elif line.startswith(b"Algorithm:"):
            q.algorithm = _decode(line[10:].strip(), "algorithm", source, r.line_no, warn) or None

    # ---- pg_* / mp_* lines
    while r.peek(1) == b";":
        line = r.readline()
        km = _KV.match(line)
        if km is None:
            raise r.error(f"malformed '; key: value' line: {line[:60]!r}", r.line_no)
        key = km.group(1).decode("latin-1")
        value = _decode(km.group(2), key, source, r.line_no, warn)
        if params is None:
            params = {}
        if key == "pg_argv" and "; pg_name_alg: " in value:
            value, alg = value.split("; pg_name_alg: ", 1)
            params["pg_name_alg"] = _typed(alg)
        params[key] = _typed(value)
    q.params = params
    if params:
        if isinstance(params.get("pg_name"), str):
            q.program = params["pg_name"]
        if "pg_ver" in params:
            q.version = str(params["pg_ver"])
        argv = params.get("pg_argv")
        if not run.unterminated and isinstance(argv, str) and _UNTERMINATED.search(argv):
            run.unterminated = True  # the same signal when the "# command" line is missing

    # ---- hit blocks
    qtype, ltype = _types(q.program, unit)
    hits: list[Hit] = []
    ids: list[bytes] = []  # hit ids as bytes, to check them against the table rows
    # with dicts, the hits are built as dicts when _finish will not change them (it
    # adds E2() and the -m 9 columns to aligned hits; tables without those only add
    # table-only hits)
    hit_dicts = dicts and (table is None or _table_keeps_hits(table))
    ctx = _HitContext(q.query_id, qtype == "dna", ltype == "dna", _TRANSLATED_SIDE.get(_base(q.program)), sequences,
                      hit_dicts, run.unterminated)  # fmt: skip
    slow_next = False  # the hit at r.pos goes to the checking path
    lookahead = r.lookahead
    while True:
        buf, pos = r.buf, r.pos
        if len(buf) - pos < lookahead and not r.eof:
            r._fill()
            buf, pos = r.buf, r.pos
        if buf.startswith(b">>", pos) and not buf.startswith(b">>>", pos):
            # fast path: hits in the usual layout, parsed in the read buffer while
            # lookahead bytes remain after them (at least one, if it ends in the buffer)
            if fast and not slow_next:
                n = len(hits)
                end, slow_next, n_lines = _fast_hits(buf, pos, len(buf) if r.eof else len(buf) - lookahead, ctx, hits, ids)
                if end > pos and buf.find(b"\r", pos, end) >= 0:
                    # the checking path reads CRLF line ends (and stray CRs) its own way
                    del hits[n:], ids[n:]
                    end, slow_next = pos, True
                if end > pos:
                    r.line_no += n_lines
                    r.pos = end
                    continue
            slow_next = False
            block, first = r.read_block(run.unterminated)
            hit = _parse_hit(block, first, len(hits) + 1, ctx, source, warn)
            hits.append(hit.to_dict() if hit_dicts else hit)
            ids.append(hit.hit_id.encode("utf-8", "replace"))
            continue
        line = r.readline()
        if line is None:
            raise r.error(f"input ends inside query {q.query_id!r} (no '>>><<<' end of query; truncated?)", r.line_no)
        if line.startswith(b">>><<<"):
            break
        if not line.strip():
            continue
        if _ends_unterminated(run, line):
            r.unread()  # the next query's line, or the end of the run
            break
        raise r.error(f"unexpected line in query {q.query_id!r}: {line[:60]!r}", r.line_no)
    _finish(r, q, run, unit, table, hits, warn, ids, hit_dicts)
    if hit_dicts:
        q.hits = []
        d = q.to_dict()
        d["hits"] = hits
        return d
    return q.to_dict() if dicts else q


def _ends_unterminated(run: _Run, line: bytes) -> bool:
    """True if ``line`` ends a query of a run without ``>>><<<`` (-m F10, -m 9i): it is
    the next query's line or the end of the run."""
    return run.unterminated and (line.startswith(b">>>///") or _QSTART.match(line) is not None)


def _table_keeps_hits(table: tuple) -> bool:
    """True if _finish leaves the aligned hits as they are with this table (columns,
    -m 9 columns, rows, line, any ``+-`` row): no -m 9 columns, no E2() column, no
    ``+-`` rows."""
    cols, cols9, rows, _, plus = table
    return cols9 is None and "E2()" not in cols and not plus


def _base(program: str | None) -> str:
    """"ssearch36" -> "ssearch", "/usr/bin/tfastx36_t" -> "tfastx"."""
    base = (program or "").rsplit("/", 1)[-1].lower()
    return re.sub(r"(36|35|34)?(_t)?$", "", base)


# which side of a translated search is shown translated (its coordinates are in nt)
_TRANSLATED_SIDE = {
    "fastx": "q",
    "fasty": "q",
    "tfastx": "h",
    "tfasty": "h",
    "tfasts": "h",
    "tfastf": "h",
    "tfastm": "h",
}


def _finish(r, q: Query, run: _Run, unit: bytes, table: tuple | None, hits: list, warn, ids=(),
            dicts: bool = False) -> None:
    """Complete ``q``: its types and its hits, with the best-scores ``table`` (columns,
    ``-m 9`` columns or None, rows, line number of the first row, whether a row starts
    with ``+-``) checked against the aligned ``hits`` (whose ids as bytes are ``ids``)
    and its other rows added as table-only hits.  With ``dicts`` the hits are dicts
    (``Hit.to_dict()``), and so are the table-only hits added; the table then keeps
    the hits (_table_keeps_hits)."""
    qtype, ltype = _types(q.program, unit)
    q.query_type, q.library_type = qtype, ltype
    if table is not None and table[2]:
        cols, cols9, rows, row1, plus = table
        e2 = "E2()" in cols  # -z 21..26: the second E() is only in the table
        if cols9 is not None or plus:
            _finish_rows(r, q, cols, cols9, rows, row1, hits, ids, warn, e2, dicts)
            q.hits = hits
            return
        n_al = len(hits)
        if n_al > len(rows):
            raise r.error(
                f"query {q.query_id!r} has {n_al} alignments but its best-scores table only {len(rows)} rows",
                row1 + len(rows) - 1,
            )
        # rows of aligned hits only have to name the same sequence (the alignment
        # carries all their values); the other rows become table-only hits.  Usually
        # each row starts with its hit's id (ids have no spaces: then the row's first
        # word contains the id, which _check_row_ids accepts)
        if not all(map(bytes.startswith, rows[:n_al], ids)):
            row_ids = [raw.lstrip().partition(b" ")[0] for raw in rows[:n_al]]
            _check_row_ids(r, q, ids, row_ids, [row1 + i for i in range(n_al)])
        _whole_lengths(hits, rows[:n_al], dicts)
        if e2:
            for i in range(n_al):
                x = hits[i].hsps[0]
                if x.evalue2 is None:
                    x.evalue2 = _parse_row(rows[i], row1 + i, cols, None, qtype, ltype, r.source, warn)[1].evalue2
        for i in range(n_al, len(rows)):
            hit = _parse_row(rows[i], row1 + i, cols, None, qtype, ltype, r.source, warn)[0]
            hit.rank = i + 1
            hits.append(hit.to_dict() if dicts else hit)
    q.hits = hits  # ranks: aligned hits get theirs when parsed


def _whole_lengths(hits: list, rows: list[bytes], dicts: bool) -> None:
    """Give the aligned ``hits`` the length of their table ``rows`` (one each, without
    their -m 9 part) where it is larger than the alignment's ``; sq_len:``.

    FASTA searches a long library sequence in overlapping pieces (by default beyond
    about 150,000 nt of DNA; ``-N`` sets the size): an alignment's library side then
    shows the piece (``; sq_len:`` its length, ``; sq_offset:`` where it starts; the
    coordinates count in the whole sequence) while the table row gives the length of
    the whole sequence.  The length is the last ``(...)`` of a row (only numbers and
    a ``[f]`` frame follow it)."""
    found = [raw[raw.rfind(b"(") + 1 : raw.rfind(b")")] for raw in rows]
    try:
        table = list(map(int, found))
    except ValueError:  # a damaged row: the alignment's own length stays
        table = [int(v) if _INT.fullmatch(v) else 0 for v in found]
    if dicts:
        if table != [h["hit_length"] for h in hits]:
            for h, n in zip(hits, table):
                if n > h["hit_length"]:
                    h["hit_length"] = n
    elif table != [h.hit_length for h in hits]:
        for h, n in zip(hits, table):
            if n > h.hit_length:
                h.hit_length = n


def _check_row_ids(r, q: Query, ids: list[bytes], row_ids: list[bytes], lines: list[int]) -> None:
    for i, (row_id, hit_id) in enumerate(zip(row_ids, ids)):
        if not row_id or (row_id.find(hit_id) < 0 and hit_id.find(row_id) < 0):
            raise r.error(
                f"alignment {i + 1} of query {q.query_id!r} is for {hit_id.decode('utf-8', 'replace')!r} "
                f"but its row of the best-scores table is {row_id.decode('utf-8', 'replace')!r}",
                lines[i],
            )


def _finish_rows(r, q: Query, cols, cols9, rows: list[bytes], row1: int, hits: list[Hit], ids, warn, e2,
                 dicts: bool = False) -> None:
    """The general table: ``-m 9``-family columns after a tab (``-m 10 -m 9c``), and
    ``+-`` rows - more alignments of the library sequence of the row above - which
    belong to the same hit (for an aligned hit: its ``>--`` alignments, in order)."""
    groups: list[list[int]] = []  # row indices of each hit
    for i, raw in enumerate(rows):
        if raw.startswith(b"+-"):
            if not groups:
                raise r.error("best-scores table starts with a '+-' row (more alignments of no sequence)", row1 + i)
            groups[-1].append(i)
        else:
            groups.append([i])
    n_al = len(hits)
    if n_al > len(groups):
        raise r.error(
            f"query {q.query_id!r} has {n_al} alignments but its best-scores table only {len(groups)} sequences",
            row1 + len(rows) - 1,
        )
    qtype, ltype = q.query_type, q.library_type
    row_ids = [rows[g[0]].lstrip().partition(b" ")[0] for g in groups[:n_al]]
    if row_ids != ids:
        _check_row_ids(r, q, ids, row_ids, [row1 + g[0] for g in groups[:n_al]])
    _whole_lengths(hits, [rows[g[0]].partition(b"\t")[0] for g in groups[:n_al]], dicts)
    if cols9 is not None or e2:
        # aligned hits: the alignments carry all values but E2() and the -m 9 extras
        for hit, g in zip(hits, groups):
            for x, i in zip(hit.hsps, g):
                t = _parse_row(rows[i], row1 + i, cols, cols9, qtype, ltype, r.source, warn)[1]
                if x.evalue2 is None:
                    x.evalue2 = t.evalue2
                if t.extra:
                    x.extra = {**t.extra, **(x.extra or {})}
    for rank in range(n_al + 1, len(groups) + 1):
        g = groups[rank - 1]
        hit = _parse_row(rows[g[0]], row1 + g[0], cols, cols9, qtype, ltype, r.source, warn)[0]
        for i in g[1:]:
            hit.hsps.append(_parse_row(rows[i], row1 + i, cols, cols9, qtype, ltype, r.source, warn)[1])
        hit.rank = rank
        hits.append(hit)


# -m 9 table columns (after the tab) -> (Hsp attribute or extra key, type)
_TABLE9_COLS: dict[str, tuple[str, type]] = {
    **_TABLE_ALIGN_COLS,
    "sw": ("sw", int),
    "gapq": ("gapq", int),
    "gapl": ("gapl", int),
    "fs": ("fs", int),
}
_TABLE9_COORDS = ("an0", "ax0", "an1", "ax1")


def _parse_row(raw: bytes, line: int, cols: list[str], cols9: list[str] | None, qtype: str, ltype: str,
               source: str, warn) -> tuple[Hit | None, Hsp]:
    """One best-scores table row: (a table-only Hit holding the row's Hsp, or None for
    a ``+-`` row; the Hsp with the row's values)."""
    def bad(reason: str) -> ParseError:
        return ParseError(f"best-scores table row: {reason}: {raw[:80]!r}", source=source, line=line)

    nine = None
    if cols9 is not None:
        raw, tab, nine = raw.partition(b"\t")
        if not tab:
            raise bad("no tab before the -m 9 columns")
    parts = raw.rsplit(None, len(cols))
    if len(parts) != len(cols) + 1:
        raise bad(f"expected {len(cols)} score columns")
    rest = parts[0].rstrip()
    values = parts[1:]
    frame = None
    if rest.endswith(b"]"):
        i = rest.rfind(b"[")
        if i < 0:
            raise bad("unbalanced '[frame]'")
        frame = rest[i + 1 : -1].decode("latin-1").strip()
        rest = rest[:i].rstrip()
    hsp = Hsp(frame=frame)
    for col, val in zip(cols, values):
        if col.startswith("E(") or col == "E()":
            attr, typ = "evalue", float
        else:
            spec = _TABLE_COLS.get(col)
            if spec is None:
                continue
            attr, typ = spec
        try:
            setattr(hsp, attr, typ(val))
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
    hsp.score = hsp.opt_score
    if nine is not None:
        _parse_row9(nine, cols9, hsp, qtype == "dna", ltype == "dna", bad)
    if rest == b"+-":
        return None, hsp
    if not rest.endswith(b")"):
        raise bad("no '(length)' column")
    i = rest.rfind(b"(")
    if i < 0 or not _INT.fullmatch(rest[i + 1 : -1]):
        raise bad("malformed '(length)' column")
    length = int(rest[i + 1 : -1])
    text = _decode(rest[:i].strip(), "hit description", source, line, warn)
    id_desc = text.split(None, 1)
    if not id_desc:
        raise bad("no hit id")
    hit = Hit(
        hit_id=id_desc[0],
        rank=0,  # set by the caller through position
        hit_description=id_desc[1].strip() if len(id_desc) > 1 and id_desc[1].strip() else None,
        hit_length=length,
        aligned=False,
        hsps=[hsp],
    )
    return hit, hsp


def _parse_row9(nine: bytes, cols9: list[str], hsp: Hsp, q_dna: bool, h_dna: bool, bad) -> None:
    """The ``-m 9`` columns of a row (after its tab): identity, similarity, overlap and
    coordinates into ``hsp``; ``sw``, ``gapq``, ``gapl``, ``fs`` and the encoded
    alignment (``-m 9c``/``9C``/``9B``: the text after a second tab) into its extra."""
    numbers, tab, code = nine.partition(b"\t")
    names = [c for c in cols9 if c != "aln_code"]
    values = numbers.split()
    if len(values) != len(names):
        raise bad(f"expected {len(names)} -m 9 columns")
    extra: dict = {}
    coords: dict[str, int] = {}
    for col, val in zip(names, values):
        try:
            if col in _TABLE9_COORDS:
                coords[col] = int(val)
                continue
            spec = _TABLE9_COLS.get(col)
            if spec is None:
                continue  # pn0 px0 pn1 px1: the bounds of the sequences
            name, typ = spec
            v = typ(val)
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
        if name in ("identity", "similarity", "overlap"):
            setattr(hsp, name, v)
        else:
            extra[name] = v
    if len(coords) == 4:
        for (a, b), dna, side in (((coords["an0"], coords["ax0"]), q_dna, "query"), ((coords["an1"], coords["ax1"]), h_dna, "hit")):
            oriented = _orient(a, b, dna)
            if oriented is None:
                raise bad(f"protein {side} coordinates run backwards")
            setattr(hsp, side + "_start", oriented[0])
            setattr(hsp, side + "_end", oriented[1])
            setattr(hsp, side + "_strand", oriented[2])
    code, _, ann = code.strip().partition(b"\t")  # -V: annotations after a third tab
    if code:
        extra["al_code"] = code.decode("utf-8", errors="replace")
    if ann.strip():
        extra["al_code_ann"] = ann.strip().decode("utf-8", errors="replace")
    hsp.extra = extra or None


class _HitContext:
    __slots__ = ("query_id", "query_id_b", "q_dna", "h_dna", "translated", "sequences", "pattern", "qname_ok",
                 "dicts", "absent", "unterminated")  # fmt: skip

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
        self.unterminated = unterminated  # a run without ">>><<<" (_Run.unterminated)
        # the Hsp fields no alignment of this query sets, whatever the layout
        self.absent = (
            (() if q_dna else ("query_strand",))
            + (() if h_dna else ("hit_strand",))
            + (() if sequences else ("query_seq", "hit_seq"))
        )


def _new_hit(line: bytes, rank: int, source: str, line_no: int, warn) -> Hit | None:
    """A Hit from the text of its ``>>`` line (without ``>>``); None if it has no id."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = _decode(line, "hit description", source, line_no, warn)
    id_desc = text.split(None, 1)
    if not id_desc:
        return None
    desc = id_desc[1].strip() if len(id_desc) > 1 else None
    return Hit(hit_id=id_desc[0], rank=rank, hit_description=desc or None)


def _parse_hit(block: bytes, first: int, rank: int, ctx: _HitContext, source: str, warn) -> Hit:
    if b"\r" in block:
        block = block.replace(b"\r\n", b"\n")

    def err(reason: str, offset: int) -> ParseError:
        return ParseError(reason, source=source, line=first + block.count(b"\n", 0, max(offset, 0)))

    nl = block.find(b"\n")
    if nl < 0 or nl + 1 >= len(block):
        raise err("hit block has no alignment (input truncated?)", 0)
    hit = _new_hit(block[2:nl], rank, source, first, warn)
    if hit is None:
        raise err("'>>' line without a hit id", 0)
    # the block: ">>..." line, then HSPs separated by ">--" lines
    pos = nl + 1
    if not block.startswith(b";", pos):
        raise err("no '; key: value' lines after a '>>' hit line: not -m 10 alignments (-m 0 layout?)", pos)
    size = len(block)
    hsps = hit.hsps
    while True:
        nxt = block.find(b"\n>--", pos - 1)
        end = size if nxt < 0 else nxt + 1
        res = _parse_hsp(block, pos, end, ctx, hit.hit_id, err)
        hsp, hit_len = res
        hsps.append(hsp)
        if hit.hit_length is None:
            hit.hit_length = hit_len
        if end >= size or not block.startswith(b">--", end):
            break
        e = block.find(b"\n", end)
        if e < 0 or e + 1 >= size:
            raise err("'>--' alternate alignment without content (truncated?)", end)
        pos = e + 1
    return hit


# --------------------------------------------------------------------------- fast path
#
# A hit in the usual layout is matched by ONE regular expression per layout (the
# exact set of score-line keys a program prints; a file repeats one or two), from its
# ">>" line to the ">" line after it.  Every value pattern is a strict subset of what
# the checking path (_parse_hit) accepts, and sequence lines may not start with ";" or
# ">", so whatever this regex matches, the checking path reads the same way; whatever
# it does not match (and every damaged hit) goes to the checking path.

_SCORES = (
    rb"(?:; [a-z]+_frame: *([^\n]*)\n)?"
    rb"(?:; [a-z]+_initn: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_init1: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_(?:s-w |n-w )?opt: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_z-score: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_bits: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_expect: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_score: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_ident: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_sim: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_overlap: *(\d+)\n)?"
)
# one side of an alignment: name (its first word, as split(None, 1)[0] gives it for a
# name without leading space), sq_len, al_start, al_stop, al_display_start
_SIDE_KV = (
    rb">([^\s]+)(?:[^\S\n][^\n]*)?\n; sq_len: *(\d+)\n; sq_offset: *-?\d+\n; sq_type: *\w\n"
    rb"; al_start: *(-?\d+)\n; al_stop: *(-?\d+)\n; al_display_start: *(-?\d+)\n"
)
# the same for the fast path: one space after the colon (as FASTA prints these);
# the query side's sq_len is not captured (_QSIDE_FAST)
_SIDE_FAST = (
    rb">([^\s]+)(?:[^\S\n][^\n]*+|)\n; sq_len: (\d++)\n; sq_offset: -?\d++\n; sq_type: \w\n"
    rb"; al_start: (-?\d++)\n; al_stop: (-?\d++)\n; al_display_start: (-?\d++)\n"
)
_QSIDE_FAST = _SIDE_FAST.replace(rb"; sq_len: (\d++)", rb"; sq_len: \d++")
# sequence (or consensus) lines: none starts with ";" or ">" (possessive: no backtracking)
_SEQ_LINES = rb"((?:[^\n;>][^\n]*+\n)*+)"
# the score lines of an alignment in any order-compatible subset, then the query
# side's header lines: used only to learn the layout of a file's alignments
_HEAD_FAST = re.compile(_SCORES + _SIDE_KV)
_FRAMES = {b"f": "f", b"r": "r"}

_INT_V = rb"(-?\d++)"
_FLOAT_V = rb"([-+.eE0-9]++)"  # with float(): exactly what _FLOAT accepts, unpadded
# _HEAD_FAST's score groups, in order: the key suffix and the strict value pattern
_SCORE_SLOTS = (
    (b"frame", rb"([^\n]*+)"),
    (b"initn", _INT_V),
    (b"init1", _INT_V),
    (b"opt", _INT_V),
    (b"z-score", _FLOAT_V),
    (b"bits", _FLOAT_V),
    (b"expect", _FLOAT_V),
    (b"score", _INT_V),
    (b"ident", _FLOAT_V),
    (b"sim", _FLOAT_V),
    (b"overlap", rb"(\d++)"),
)
_SCORE_KEYS = re.compile(rb"^; ([a-z]+_)((?:s-w |n-w )?)([^:\n]+):", re.M)
# after the score lines: query side, library side, optional consensus, optional
# "; al_code:" line (-m 9c) and "; al_code_ann:" line after it (-V), blank lines (group
# 28), and a look at the next line: ">--" alternate alignment (group 29 set), ">>>" end
# of the query (group 30 is ">"), ">>" next hit (group 30 is empty) or a query line
# "  N>>>" (group 31 set: the end of the query in runs without ">>><<<", damage
# elsewhere); anything else (or the end of the buffer) fails
_HSP_TAIL = (
    _QSIDE_FAST + _SEQ_LINES + _SIDE_FAST + _SEQ_LINES + rb"(?:; al_cons:\n" + _SEQ_LINES + rb"|)"
    rb"(?:; al_code: ([^\n]*+)\n(?:; al_code_ann: ([^\n]*+)\n)?|)(\n*+)(?=>(?:(-)-\n|>(>?))|[ \t]*+\d++(>)>>)"
)
# ">>ID DESCRIPTION" (ID: printable ASCII, not starting with ">"; then the rest as
# split(None, 1) leaves it, to be stripped) or ">--" (alternate alignment)
_HIT_LINE = rb"(?:>>([!-=?-~][!-~]*+)(?:[^\S\n]++([^\n]*+)|)|>--)\n"
_LAYOUTS: dict[bytes, re.Pattern] = {}
_FIXED_LINES: dict[re.Pattern, int] = {}
_ABSENT: dict[re.Pattern, tuple[str, ...]] = {}
# the Hsp field each score slot fills
_SLOT_FIELDS = (
    (b"frame", "frame"),
    (b"initn", "initn_score"),
    (b"init1", "init1_score"),
    (b"opt", "opt_score"),
    (b"z-score", "z_score"),
    (b"bits", "bits"),
    (b"expect", "evalue"),
    (b"score", "score"),
    (b"ident", "identity"),
    (b"sim", "similarity"),
    (b"overlap", "overlap"),
)
_HSP_FIELD_ORDER = tuple(Hsp.__slots__)  # type: ignore[attr-defined]


_BUILDERS: dict[tuple[str, ...], Callable] = {}
_BUILT_FIELDS = tuple(f for f in _HSP_FIELD_ORDER if f not in ("evalue2", "consensus", "extra"))


def _dict_builder(absent: tuple[str, ...]) -> Callable:
    """A function of the values of ``_BUILT_FIELDS`` (positional, in that order) that
    returns ``Hsp.to_dict()`` without consensus and extra: a dict display of the fields
    not in ``absent``, in the order of Hsp's slots.  ``absent`` lists the fields that
    are None by construction in the fast path - the score slots its layout lacks
    (_ABSENT), the strand of a protein side and the sequences with sequences=False
    (_HitContext.absent) - so no value is None (tests: the same JSON as to_dict() on
    every sample and under mutation).  Generated once per set (as namedtuple does):
    half the cost of a display of every field followed by deletions."""
    fn = _BUILDERS.get(absent)
    if fn is None:
        args = [f"v{i}" for i in range(len(_BUILT_FIELDS))]
        items = ", ".join(f"{f!r}: {a}" for f, a in zip(_BUILT_FIELDS, args) if f not in absent)
        namespace: dict = {}
        exec(f"def build({', '.join(args)}):\n    return {{{items}}}\n", namespace)  # noqa: S102 - fixed names only
        fn = _BUILDERS[absent] = namespace["build"]
    return fn


def _learn_layout(buf: bytes, p: int) -> re.Pattern | None:
    """The regex for the alignment at ``buf[p]`` (its ``>>``/``>--`` line): learned
    from its score-line keys, which are matched literally (several times faster than
    the optional groups of _HEAD_FAST).  Groups: 1-2 the hit id and the rest of the
    ``>>`` line (None for ``>--``), 3-13 the scores of _SCORE_SLOTS (None when absent),
    14-17 the query side's name, al_start, al_stop, al_display_start, 18 its sequence
    lines, 19-23 the library side's name, sq_len, al_start, al_stop, al_display_start,
    24 its sequence lines, 25 the consensus lines (None when absent), 26 the
    ``; al_code:`` value and 27 the ``; al_code_ann:`` value (None when absent), 28 the
    blank lines after them, 29-31 what follows (see _HSP_TAIL).  None if the alignment
    is unusual."""
    nl = buf.find(b"\n", p)
    if nl < 0:
        return None
    m = _HEAD_FAST.match(buf, nl + 1)
    if m is None:
        return None
    keys = _SCORE_KEYS.findall(buf, nl + 1, m.start(12))
    sig = b"|".join(b"".join(k) for k in keys)
    pat = _LAYOUTS.get(sig)
    if pat is None and len(_LAYOUTS) < 64:
        by_slot = {suffix: re.escape(b"; " + prefix + sw + suffix + b":") + rb" ++" for prefix, sw, suffix in keys}
        parts = [by_slot[s] + v + b"\n" if s in by_slot else rb"(?:(\x00)|)" for s, v in _SCORE_SLOTS]
        pat = _LAYOUTS[sig] = re.compile(_HIT_LINE + b"".join(parts) + _HSP_TAIL)
        # lines that are always there: ">>"/">--", the score lines, 7 a side
        _FIXED_LINES[pat] = 1 + len(keys) + 14
        # the Hsp fields this layout never sets (the dicts of parse_dicts omit them)
        absent = {field for slot, field in _SLOT_FIELDS if slot not in by_slot}
        if b"opt" in by_slot:
            absent.discard("score")  # score is the optimised score when there is no xx_score
        _ABSENT[pat] = tuple(f for f in _HSP_FIELD_ORDER if f in absent)
    return pat


def _fast_hits(buf: bytes, pos: int, stop: int, ctx: _HitContext, hits: list[Hit], ids: list[bytes]):
    """Parse hits in the usual layout in the read buffer, from the ``>>`` line at
    ``buf[pos]``, while they start before ``stop`` and end (at the next ``>>`` line)
    inside ``buf``; append them to ``hits`` and their ids (bytes) to ``ids``.

    Returns (offset after the last hit parsed, True if the hit there must go to the
    checking path, number of lines of the hits parsed).  The lines are counted from
    the lengths of what the regular expression matched: bytes.count(b"\\n") over the
    hits would cost a tenth of the parsing time.  Never raises on bad input: anything
    it does not fully recognise is left to the checking path, which reports the
    precise line."""
    pat = ctx.pattern
    sequences = ctx.sequences
    q_plus = "+" if ctx.q_dna else None
    h_plus = "+" if ctx.h_dna else None
    translated = ctx.translated
    query_id_b = ctx.query_id_b
    qname_ok = ctx.qname_ok
    frames = _FRAMES
    new = object.__new__
    append_hit = hits.append
    append_id = ids.append
    rank = len(hits)
    done = p = pos
    hsps = hid_b = hid = desc = hit_len = None
    slow = True
    n_lines = hit_lines = 0  # lines of the hits done, of the hit being read
    # consecutive alignments: a scanner matches each where the previous one ended
    scan = pat.scanner(buf, p).match if pat is not None else None
    fixed = _FIXED_LINES.get(pat, 0)
    dicts = ctx.dicts
    unterminated = ctx.unterminated
    build = _dict_builder(_ABSENT.get(pat, ()) + ctx.absent) if dicts else None
    while True:
        m = scan() if scan is not None else None
        if m is None:  # a new layout (or an unusual alignment)
            pat = _learn_layout(buf, p)
            if pat is None:
                break
            scan = pat.scanner(buf, p).match
            fixed = _FIXED_LINES[pat]
            if dicts:
                build = _dict_builder(_ABSENT[pat] + ctx.absent)
            m = scan()
            if m is None:
                break
        (new_id, new_desc, frame, initn, init1, opt, z, bits, ev, score, ident, sim, overlap,
         qname, q0, q1, qds, qsq, hname, hlen, h0, h1, hds, hsq, cons, al_code, ann, blank, alternate, end,
         next_query) = m.groups()
        if next_query is not None and not unterminated:
            break  # a query line right after an alignment: damage, for the checking path
        if new_id is not None:  # a ">>" line: a new hit (its id is printable ASCII)
            if hsps is not None:
                break
            hid_b = new_id
            hid = new_id.decode("ascii")
            if new_desc is not None:
                try:
                    desc = new_desc.decode("utf-8").strip() or None
                except UnicodeDecodeError:
                    break  # the checking path replaces and warns
            else:
                desc = None
            hit_len = int(hlen)
            hsps = []
            hit_lines = 0
        elif hsps is None:
            break
        # FASTA cuts names in the alignment and drops a leading "gi|NNN|"
        # (find, not "in": bytes.__contains__ first tries the name as an int)
        if qname != qname_ok:
            if query_id_b.find(qname) < 0:
                break
            qname_ok = qname
        if hid_b.find(hname) < 0:
            break
        q0 = int(q0)
        q1 = int(q1)
        h0 = int(h0)
        h1 = int(h1)
        if q0 <= q1:
            qs, qe, qstrand = q0, q1, q_plus
        elif q_plus:
            qs, qe, qstrand = q1, q0, "-"
        else:
            break
        if h0 <= h1:
            hs, he, hstrand = h0, h1, h_plus
        elif h_plus:
            hs, he, hstrand = h1, h0, "-"
        else:
            break
        ov = None if overlap is None else int(overlap)
        qseq = hseq = consensus = None
        hit_lines += fixed + len(blank) + (al_code is not None) + (ann is not None)
        if sequences:
            qdisp = qsq.replace(b"\n", b"")
            hdisp = hsq.replace(b"\n", b"")
            hit_lines += len(qsq) - len(qdisp) + len(hsq) - len(hdisp)
            # the aligned columns c0:c1 of the displayed sequences: see _parse_hsp
            if translated is None:
                qctx = q0 - int(qds) if q0 <= q1 else int(qds) - q0
                hctx = h0 - int(hds) if h0 <= h1 else int(hds) - h0
                if qctx < 0 or hctx < 0:
                    break
                c0 = qctx if qctx > hctx else hctx
                # usually the overlap is the number of columns; then c0 + overlap is
                # the column after the last residue of a side, as _end_col finds it
                try:
                    c1 = c0 + ov
                    last_gap = ov > 0 and qdisp[c1 - 1] == 45 and hdisp[c1 - 1] == 45  # 45: "-"
                except (TypeError, IndexError):  # no overlap, or beyond the sequences
                    last_gap = True
                if (
                    last_gap
                    or qdisp.count(b"-", c0, c1) != ov - (qe - qs + 1)
                    or hdisp.count(b"-", c0, c1) != ov - (he - hs + 1)
                ):
                    c1 = _end_col(qdisp, c0, qe - qs + 1)
                    c2 = _end_col(hdisp, c0, he - hs + 1)
                    if c2 > c1:
                        c1 = c2
            else:
                if translated == "q":
                    ref, r0, r1, ds = hdisp, h0, h1, int(hds)
                else:
                    ref, r0, r1, ds = qdisp, q0, q1, int(qds)
                rctx = r0 - ds if r0 <= r1 else ds - r0
                if rctx < 0:
                    break
                c0 = len(ref) - len(ref.lstrip(b"-")) + rctx
                c1 = _end_col(ref, c0, abs(r1 - r0) + 1)
            if c1 > len(qdisp) or c1 > len(hdisp):
                break
            try:
                qseq = qdisp[c0:c1].decode("ascii")
                hseq = hdisp[c0:c1].decode("ascii")
            except UnicodeDecodeError:
                break
            if cons is not None:
                cb = cons.replace(b"\n", b"")
                hit_lines += 1 + len(cons) - len(cb)  # "; al_cons:" and its lines
                cb = cb[c0:c1]
                if len(cb) < c1 - c0:
                    cb = cb.ljust(c1 - c0)
                consensus = cb.decode("ascii", "replace")
        try:
            opt = None if opt is None else int(opt)
            score = opt if score is None else int(score)
            initn = None if initn is None else int(initn)
            init1 = None if init1 is None else int(init1)
            z = None if z is None else float(z)
            bits = None if bits is None else float(bits)
            ev = None if ev is None else float(ev)
            ident = None if ident is None else float(ident)
            sim = None if sim is None else float(sim)
            frame = None if frame is None else frames.get(frame) or frame.strip().decode("ascii")
        except (ValueError, UnicodeDecodeError):
            break
        if dicts:
            # Hsp.to_dict() built directly (see _dict_builder); consensus and extra,
            # the last fields, only when present
            x = build(score, opt, initn, init1, z, bits, ev, ident, sim, ov, frame, qs, qe, hs, he, qstrand, hstrand,
                      qseq, hseq)  # fmt: skip
            if consensus is not None:
                x["consensus"] = consensus
            if al_code is not None:
                x["extra"] = _code_extra(al_code, ann)
        else:
            # an Hsp with every field set here: object.__new__ and slot stores cost a
            # quarter of the dataclass __init__ with 21 arguments (called via the type)
            x = new(Hsp)
            x.score = score
            x.opt_score = opt
            x.initn_score = initn
            x.init1_score = init1
            x.z_score = z
            x.bits = bits
            x.evalue = ev
            x.evalue2 = None  # only in the best-scores table
            x.identity = ident
            x.similarity = sim
            x.overlap = ov
            x.frame = frame
            x.query_start = qs
            x.query_end = qe
            x.hit_start = hs
            x.hit_end = he
            x.query_strand = qstrand
            x.hit_strand = hstrand
            x.query_seq = qseq
            x.hit_seq = hseq
            x.consensus = consensus
            x.extra = None if al_code is None else _code_extra(al_code, ann)
        hsps.append(x)
        if not sequences:
            hit_lines += qsq.count(b"\n") + hsq.count(b"\n")
            if cons is not None:
                hit_lines += 1 + cons.count(b"\n")
        p = m.end()  # the next ">" line
        if alternate is not None:
            continue
        if p - done > MAX_LINE:
            break  # let read_block check the length of its lines
        rank += 1
        if dicts:  # Hit.to_dict()
            if desc is None:
                hit = {"hit_id": hid, "hit_length": hit_len, "rank": rank, "aligned": True, "hsps": hsps}
            else:
                hit = {"hit_id": hid, "hit_description": desc, "hit_length": hit_len, "rank": rank,
                       "aligned": True, "hsps": hsps}  # fmt: skip
        else:
            hit = new(Hit)  # as for the Hsp
            hit.hit_id = hid
            hit.rank = rank
            hit.hit_description = desc
            hit.hit_length = hit_len
            hit.aligned = True
            hit.hsps = hsps
        append_hit(hit)
        append_id(hid_b)
        hsps = None
        done = p
        n_lines += hit_lines
        if end or next_query or p >= stop:  # ">>>" or "  N>>>": end of the query
            slow = False
            break
    ctx.pattern = pat
    ctx.qname_ok = qname_ok
    return done, slow, n_lines


def _side(block: bytes, start: int, stop: int, err) -> tuple[bytes, dict, int]:
    """Parse one side (">NAME ..", "; sq_*/al_*" lines, sequence lines) of an HSP.

    Returns (name, key/value dict, offset of the first sequence line)."""
    nl = block.find(b"\n", start, stop)
    if nl < 0:
        raise err("alignment side without data (truncated?)", start)
    name = block[start + 1 : nl]
    p = nl + 1
    kv: dict[bytes, bytes] = {}
    while p < stop and block.startswith(b"; ", p):
        e = block.find(b"\n", p, stop)
        if e < 0:
            e = stop
        key, sep, val = block[p + 2 : e].partition(b": ")
        if not sep:
            if block[p + 2 : e].endswith(b":"):
                key, val = block[p + 2 : e - 1], b""
            else:
                raise err(f"malformed '; key: value' line: {block[p:e][:60]!r}", p)
        kv[key] = val
        p = e + 1
    return name, kv, min(p, stop)


_ANN_LINE = b"\n; al_code_ann: "


def _code_extra(code: bytes, ann: bytes | None) -> dict:
    """Hsp.extra of the ``; al_code:`` and ``; al_code_ann:`` values (-m 9c, -V)."""
    extra = {"al_code": code.decode("utf-8", "replace")}
    if ann is not None:
        extra["al_code_ann"] = ann.decode("utf-8", "replace")
    return extra


def _side_names(name: bytes, seq_id: bytes) -> bool:
    """True if the ``>NAME ..`` line of an alignment side names the sequence ``seq_id``:
    NAME is a piece of the id, or FASTA printed none (``> ..``)."""
    if name[:1] in (b" ", b"\t"):
        return name.strip() in (b"", b"..")
    first = name.split(None, 1)[0] if name.strip() else b""
    return bool(first) and first in seq_id


def _orient(a: int, b: int, dna: bool) -> tuple[int, int, str | None] | None:
    """``(start, end, strand)`` of an al_start/al_stop pair: 1-based inclusive with start <= end;
    the strand only for DNA.  None when a protein side runs backwards (malformed)."""
    if a <= b:
        return a, b, ("+" if dna else None)
    if dna:
        return b, a, "-"
    return None


def _int(kv: dict, key: bytes, err, offset: int) -> int:
    v = kv.get(key)
    if v is None:
        raise err(f"alignment lacks '; {key.decode()}:'", offset)
    if not _INT.fullmatch(v):
        raise err(f"'; {key.decode()}: {v[:30].decode('latin-1')}' is not an integer", offset)
    return int(v)


def _end_col(disp: bytes, c0: int, n_res: int) -> int:
    """The column after the ``n_res``-th residue (non-``-``) of ``disp`` from ``c0``."""
    c1 = c0 + n_res
    g = disp.count(b"-", c0, c1)
    while g:
        n = c1 + g
        g = disp.count(b"-", c1, n)
        c1 = n
    return c1


def _parse_hsp(block: bytes, pos: int, stop: int, ctx: _HitContext, hit_id: str, err) -> tuple[Hsp, int]:
    hsp = Hsp()
    # scores: "; xx_key: value" lines up to the query side ">NAME .."
    qh = block.find(b"\n>", pos - 1, stop)
    if qh < 0:
        raise err("alignment without its '>QUERY ..' side (truncated?)", pos)
    extra = None
    p = pos
    while p < qh:
        e = block.find(b"\n", p, qh + 1)
        if e < 0:
            e = qh
        line = block[p:e]
        if not line.startswith(b"; "):
            if not line.strip():
                p = e + 1
                continue
            raise err(f"unexpected line among alignment scores: {line[:60]!r}", p)
        key, sep, val = line[2:].partition(b": ")
        if not sep:
            raise err(f"malformed '; key: value' line: {line[:60]!r}", p)
        u = key.find(b"_")
        suffix = key[u + 1 :] if u >= 0 else key
        spec = _HSP_KEYS.get(suffix)
        if spec is not None:
            attr, typ = spec
            pattern = _INT if typ is int else _FLOAT
            if not pattern.fullmatch(val):
                raise err(f"'{line[:60].decode('latin-1')}' is not a number", p)
            setattr(hsp, attr, typ(val))
        elif suffix == b"frame":
            hsp.frame = val.strip().decode("latin-1")
        else:
            if extra is None:
                extra = {}
            extra[key.decode("latin-1")] = _typed(val.decode("utf-8", errors="replace"))
        p = e + 1
    hsp.extra = extra
    if hsp.score is None:
        hsp.score = hsp.opt_score

    # query side, then library side
    hh = block.find(b"\n>", qh + 2, stop)
    if hh < 0:
        raise err("alignment without its library side (truncated?)", qh + 1)
    qname, qkv, qseq_at = _side(block, qh + 1, hh, err)
    # "-m 10 -m 9c" ends an alignment with "; al_code: <encoded alignment>"
    code_at = block.find(b"\n; al_code:", hh + 2, stop)
    if code_at >= 0:
        e = block.find(b"\n", code_at + 1, stop)
        if e < 0:
            e = stop
        code = block[code_at + 11 : e]
        if code and not code.startswith(b" "):
            raise err(f"malformed '; key: value' line: {block[code_at + 1 : e][:60]!r}", code_at + 1)
        ann = None
        if block.startswith(_ANN_LINE, e):  # -V: where the annotated residues are
            a = block.find(b"\n", e + 1, stop)
            a = stop if a < 0 else a
            ann = block[e + len(_ANN_LINE) : a].decode("utf-8", errors="replace")
            e = a
        if block[e:stop].strip():
            i = e + len(block[e:stop]) - len(block[e:stop].lstrip())
            raise err(f"unexpected line after an alignment: {block[i : i + 40]!r}", i)
        if extra is None:
            hsp.extra = extra = {}
        extra["al_code"] = code[1:].decode("utf-8", errors="replace")
        if ann is not None:
            extra["al_code_ann"] = ann
        stop = code_at + 1
    cons_at = block.find(b"\n; al_cons:", hh + 2, stop)
    hend = stop if cons_at < 0 else cons_at
    hname, hkv, hseq_at = _side(block, hh + 1, hend, err)
    for a, b in ((qseq_at, hh), (hseq_at, hend)):
        i = block.find(b"\n;", a, b)
        if i >= 0:
            raise err(f"unexpected line in an aligned sequence: {block[i + 1 : i + 40]!r}", i + 1)
    tail = block.find(b"\n\n", hseq_at if cons_at < 0 else cons_at + 1, stop)
    if tail >= 0 and block[tail:stop].strip():
        i = tail + 1 + len(block[tail:stop]) - len(block[tail:stop].lstrip())
        raise err(f"unexpected line after an alignment: {block[i : i + 40]!r}", i)
    # FASTA shows at most -C characters of the name and drops a leading "gi|NNN|"; a
    # sequence whose FASTA header starts with a space has no name: "> .."
    if not _side_names(qname, ctx.query_id_b):
        raise err(f"alignment side names {qname[:40]!r}, not the query {ctx.query_id!r}", qh + 1)
    if not _side_names(hname, hit_id.encode("utf-8", "replace")):
        raise err(f"alignment side names {hname[:40]!r}, not the hit {hit_id!r}", hh + 1)

    q0 = _int(qkv, b"al_start", err, qh + 1)
    q1 = _int(qkv, b"al_stop", err, qh + 1)
    h0 = _int(hkv, b"al_start", err, hh + 1)
    h1 = _int(hkv, b"al_stop", err, hh + 1)
    hit_len = _int(hkv, b"sq_len", err, hh + 1)
    side = _orient(q0, q1, ctx.q_dna)
    if side is None:
        raise err("protein query coordinates run backwards", qh + 1)
    hsp.query_start, hsp.query_end, hsp.query_strand = side
    side = _orient(h0, h1, ctx.h_dna)
    if side is None:
        raise err("protein library coordinates run backwards", hh + 1)
    hsp.hit_start, hsp.hit_end, hsp.hit_strand = side

    if ctx.sequences:
        qdisp = block[qseq_at:hh].replace(b"\n", b"")
        hdisp = block[hseq_at:hend].replace(b"\n", b"")
        # FASTA shows context around the alignment; both sides are column-aligned at
        # the alignment start (the side with less context is padded with '-'), and
        # each side's residues of the alignment are counted by |al_stop - al_start|+1.
        if ctx.translated is None:
            qds = _int(qkv, b"al_display_start", err, qh + 1)
            hds = _int(hkv, b"al_display_start", err, hh + 1)
            qctx = q0 - qds if q0 <= q1 else qds - q0
            hctx = h0 - hds if h0 <= h1 else hds - h0
            if qctx < 0 or hctx < 0:
                raise err("alignment starts before its displayed sequence", qh + 1)
            c0 = max(qctx, hctx)
            c1 = max(_end_col(qdisp, c0, abs(q1 - q0) + 1), _end_col(hdisp, c0, abs(h1 - h0) + 1))
        else:
            # translated searches: the translated side counts nucleotides, so use the
            # protein side (local alignments: no leading gap, leading '-' are padding)
            if ctx.translated == "q":
                ref, r0, r1, rkv, at = hdisp, h0, h1, hkv, hh + 1
            else:
                ref, r0, r1, rkv, at = qdisp, q0, q1, qkv, qh + 1
            ds = _int(rkv, b"al_display_start", err, at)
            rctx = r0 - ds if r0 <= r1 else ds - r0
            if rctx < 0:
                raise err("alignment starts before its displayed sequence", at)
            c0 = len(ref) - len(ref.lstrip(b"-")) + rctx
            c1 = _end_col(ref, c0, abs(r1 - r0) + 1)
        if c1 > len(qdisp):
            raise err("query sequence shorter than its coordinates say (truncated?)", hh - 1)
        if c1 > len(hdisp):
            raise err("library sequence shorter than its coordinates say (truncated?)", hend - 1)
        qs, hs = qdisp[c0:c1], hdisp[c0:c1]
        try:
            hsp.query_seq = qs.decode("ascii")
            hsp.hit_seq = hs.decode("ascii")
        except UnicodeDecodeError:
            raise err("non-ASCII bytes in an aligned sequence", qh + 1) from None
        if cons_at >= 0:
            e = block.find(b"\n", cons_at + 1, stop)
            cons = block[e + 1 : stop].rstrip(b"\n").replace(b"\n", b"") if e >= 0 else b""
            hsp.consensus = cons[c0:c1].ljust(c1 - c0).decode("ascii", errors="replace")
    return hsp, hit_len
