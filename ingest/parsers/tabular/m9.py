r"""FASTA's ``-m 9`` family without ``-m 10`` (``-m 9``, ``9c``, ``9C``, ``9B``, ``9i``), registered as
format ``"pasta-m9"``: its best-scores tables read into the searches/hits model, the alignments skipped.

What FASTA prints (36.3.8i) is the layout of ``-m 10`` - run header, ``  N>>>`` query lines, library,
statistics, the best-scores table with the ``-m 9`` columns after a tab (``%_id %_sim sw alen an0 ax0
pn0 px0 an1 ax1 pn1 px1 gapq gapl fs``, then the encoded alignment with ``c``/``C``/``B``; with ``i``
``%_id %_sim alen`` as plain columns), the summary line ``>>>ID, N aa vs LIB library``, ``>>><<<``,
``>>>///`` - but the alignments between the summary line and the end of the query are FASTA's default
``-m 0`` display (``>>ID ... (N aa)``, `` s-w opt: ...``, the sequences in columns) instead of ``-m 10``
blocks.  Every alignment is a row of the table (``+-`` rows: more alignments of the sequence above),
so the table is read and the display is not: :class:`SkipDisplay` turns each line of it into an empty
line (the line numbers stay the file's) and the ``-m 10`` parser (:mod:`ingest.parsers.pasta`) reads
the rest as it reads a ``-m 10`` file whose alignments were not shown (``-d 0``).  Every hit is then
``aligned: false`` with the table's values: the scores of its columns, E(), and from the ``-m 9``
columns identity, similarity, overlap, coordinates, strands, ``sw`` (the score), ``gapq``, ``gapl``,
``fs`` and ``al_code``; no sequences, no z-score (the display's), one warning for the file.

The format is told by the run's command line (the first line, ``# ssearch36 -m 9c ...``): a ``-m``
of the ``9`` family and none of ``10``, ``8`` or ``F...`` (a file) (``ingest.parsers._claims_m9``).
FASTA reads the first word of an ``-m`` argument (``-m "10 9c"`` is ``-m 10``) and each of a comma
list (``-m 10,9c`` is both).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from io import BufferedIOBase

from ingest.errors import ParseError
from ingest.model import Query
from ingest.parsers.pasta import parse as _parse_m10, parse_dicts as _parse_dicts_m10
from ingest.parsers.pasta.spool import SPILL_HITS
from ingest.parsers.tabular.blast import buffered

__all__ = ["parse", "parse_dicts", "SkipDisplay"]

_QUERY_LINE = re.compile(rb"\s*\d+>>>")


class SkipDisplay:
    """A binary handle that reads ``handle`` with the lines of each ``-m 0`` alignment display (after a
    query's summary line ``>>>ID, N aa vs ...``, up to ``>>><<<``, ``>>>///`` or the next query line)
    emptied: ``read(n)`` gives whole lines, at least one, about ``n`` bytes."""

    def __init__(self, handle: BufferedIOBase, source: str, warn: Callable[[str], None] | None):
        self.handle, self.source, self.warn = buffered(handle), source, warn
        self.skipping = False
        self.table = False  # the query under way has a best-scores table (lalign36 prints none)
        self.line = 0
        self.warned = False

    def read(self, n: int = -1) -> bytes:
        out: list[bytes] = []
        size = 0
        readline = self.handle.readline
        while n < 0 or size < n:
            raw = readline(1 << 20)  # the -m 10 parser's limit is a line's: it says so at a longer one
            if not raw:
                break
            if raw[-1:] == b"\n" or len(raw) < 1 << 20:
                self.line += 1
            raw = self._filtered(raw)
            out.append(raw)
            size += len(raw)
        return b"".join(out)

    def _filtered(self, raw: bytes) -> bytes:
        if raw.startswith(b"The best scores are:"):
            self.table = True
        if raw[:3] == b">>>":
            self.skipping = raw[3:6] not in (b"<<<", b"///")  # a summary line: its display follows
            return raw
        if _QUERY_LINE.match(raw):
            self.skipping = self.table = False
            return raw
        if not self.skipping:
            return raw
        if raw[:2] == b">>" and not self.table:
            raise ParseError("an alignment of a query without a best-scores table (lalign36 prints none): its "
                             "-m 0 display, which is not read, is all there is of it; ask FASTA for -m 10 "
                             "(-m 9c -m 10)", source=self.source, line=self.line)
        if raw.strip() and not self.warned:
            self.warned = True
            if self.warn is not None:
                self.warn(f"{self.source}:{self.line}: the alignments after the best-scores table (-m 9 without "
                          "-m 10: FASTA's -m 0 display) are not read: each hit's values are its table rows'")
        return b"\n" if raw[-1:] == b"\n" else b""


def parse(handle: BufferedIOBase, source: str = "<stream>", *, sequences: bool = True,
          warn: Callable[[str], None] | None = None) -> Iterator[Query]:
    """Yield one :class:`~ingest.model.Query` per query (hits from its best-scores table)."""
    return _parse_m10(SkipDisplay(handle, source, warn), source, sequences=sequences, warn=warn)


def parse_dicts(handle: BufferedIOBase, source: str = "<stream>", *, sequences: bool = True,
                warn: Callable[[str], None] | None = None, spill: int | None = SPILL_HITS) -> Iterator[dict]:
    """Like :func:`parse`, each query as ``Query.to_dict()`` (a spool past ``spill`` hits, as -m 10's)."""
    return _parse_dicts_m10(SkipDisplay(handle, source, warn), source, sequences=sequences, warn=warn,
                            spill=spill)
