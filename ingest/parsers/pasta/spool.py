"""The hits of one query block as they are parsed (:class:`BlockHits`): held in a list, or, past a
bound, in an anonymous temporary file (:class:`HitSpool`), as the rows of a long best-scores table
(:class:`Rows`).

Memory must not grow with the hits of one query block (a ``-m 10`` report may show hundreds of
thousands for one query).  ``parse_dicts`` holds at most ``spill`` hits of a block (default
:data:`SPILL_HITS`) or :data:`SPILL_BYTES` of their input: past that it checks them against the
best-scores table and moves them, chunk by chunk, to a :class:`HitSpool`, and the query's ``"hits"``
is then that spool instead of a list (the same hits, in the same order, read back as often as
wanted, a chunk at a time).  A best-scores table of more than ``ROWS_PER_HIT * spill`` rows goes to
a :class:`Rows` spool as it is read: the table comes before the alignments and is consumed in its
order (:mod:`ingest.parsers.pasta.table`).

The files are made by :func:`tempfile.TemporaryFile` (in ``TMPDIR``; unlinked at once, gone when
closed or when the process ends) and hold what memory would have: about the size of the block's
input for the hits, the table's text for the rows.  The hits are written with :mod:`marshal` (a
chunk at a time, after its length), which gives back exactly what it was given: floats bit for
bit, infinities and NaN, integers of any size, the order of every dict's keys.
"""

from __future__ import annotations

import marshal
import os
import struct
import tempfile
from collections.abc import Iterator
from typing import IO

__all__ = ["BlockHits", "HitSpool", "Rows", "SPILL_HITS", "SPILL_BYTES", "ROWS_PER_HIT"]

#: hits of one query block held in memory before they go to a HitSpool (the CLI's and the loader's)
SPILL_HITS = 4096
#: ... or bytes of their input (one hit block may reach MAX_BLOCK: a count alone would not bound them)
SPILL_BYTES = 4 << 20
#: a best-scores table goes to a spool beyond ``ROWS_PER_HIT * spill`` rows (a row is ~100 bytes)
ROWS_PER_HIT = 16
_LENGTH = struct.Struct("<Q")  # the length of each marshalled chunk, before it


def _temporary(what: str) -> IO[bytes]:
    try:
        return tempfile.TemporaryFile(prefix="sci-ingest-")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot make a temporary file for {what} in {tempfile.gettempdir()} "
                                 f"({exc.strerror or exc}); free space there or set TMPDIR") from exc


class HitSpool:
    """The hits of one query (dicts, as ``Hit.to_dict()`` gives them), in file order, in a
    temporary file: ``len()``, and iteration from the first hit (each pass reads the file again,
    one chunk in memory at a time; :meth:`chunks` gives them chunk by chunk).  ``query_shift`` is
    added to every alignment's query coordinates as they are read (a query segment renumbered, see
    segments.py); ``query_low`` and ``query_high`` are the least query start and the greatest query
    end written (None without coordinates), before the shift."""

    __slots__ = ("_file", "_count", "query_shift", "query_low", "query_high")

    def __init__(self):
        self._file = _temporary("the hits of a large query block")
        self._count = 0
        self.query_shift = 0
        self.query_low: int | None = None
        self.query_high: int | None = None

    def extend(self, hits: list[dict]) -> None:
        """Append ``hits`` (one chunk) after those written before."""
        low, high = self.query_low, self.query_high
        for hit in hits:
            for hsp in hit["hsps"]:
                start = hsp.get("query_start")
                if start is not None:
                    if low is None or start < low:
                        low = start
                    end = hsp["query_end"]
                    if high is None or end > high:
                        high = end
        self.query_low, self.query_high = low, high
        data = marshal.dumps(hits)
        f = self._file
        f.seek(0, os.SEEK_END)
        try:
            f.write(_LENGTH.pack(len(data)))
            f.write(data)
        except OSError as exc:
            raise OSError(exc.errno, f"writing the hits of a large query block to a temporary file in "
                                     f"{tempfile.gettempdir()}: {exc.strerror or exc}") from exc
        self._count += len(hits)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[dict]:
        for chunk in self.chunks():
            yield from chunk

    def chunks(self) -> Iterator[list[dict]]:
        """The hits in lists (the chunks written), each read when the one before is done with."""
        f = self._file
        f.flush()
        end = f.seek(0, os.SEEK_END)
        at = 0
        shift = self.query_shift
        while at < end:
            f.seek(at)  # each pass keeps its own place: a write or another pass may have moved the file's
            (size,) = _LENGTH.unpack(f.read(_LENGTH.size))
            chunk = marshal.loads(f.read(size))  # marshal.load(f) reads the file piece by piece: 5x slower
            at += _LENGTH.size + size
            if shift:
                for hit in chunk:
                    for hsp in hit["hsps"]:
                        if hsp.get("query_start") is not None:
                            hsp["query_start"] += shift
                            hsp["query_end"] += shift
            yield chunk

    def __repr__(self) -> str:
        return f"<HitSpool of {self._count} hits>"


class Rows:
    """The rows of a best-scores table (bytes, without line ends), read once, in order:
    :meth:`peek` at the next row, :meth:`take` the next ``n``.  Held in a list, or in a temporary
    file once :meth:`spill` put them there (a table of many rows: see ``Reader.read_rows``)."""

    __slots__ = ("_list", "_at", "_file", "_count", "_next", "_reading")

    def __init__(self, rows: list[bytes]):
        self._list = rows
        self._at = 0  # rows of the list taken
        self._file: IO[bytes] | None = None
        self._count = len(rows)
        self._next: bytes | None = None  # a spilled row read ahead by peek()
        self._reading = False

    def __len__(self) -> int:
        return self._count

    def spill(self, rows: list[bytes]) -> None:
        """Append ``rows`` to the temporary file (after those of the list, moved there first)."""
        if self._file is None:
            self._file = _temporary("a large best-scores table")
            rows, self._list = self._list + rows, []
            self._count = 0
        if rows:
            try:
                self._file.write(b"\n".join(rows) + b"\n")
            except OSError as exc:
                raise OSError(exc.errno, f"writing a large best-scores table to a temporary file in "
                                         f"{tempfile.gettempdir()}: {exc.strerror or exc}") from exc
        self._count += len(rows)

    def peek(self) -> bytes | None:
        """The next row, not taken; None after the last."""
        if self._file is None:
            return self._list[self._at] if self._at < len(self._list) else None
        if self._next is None:
            if not self._reading:
                self._file.flush()
                self._file.seek(0)
                self._reading = True
            line = self._file.readline()
            self._next = line[:-1] if line else None
        return self._next

    def take(self, n: int) -> list[bytes]:
        """The next ``n`` rows (fewer after the last)."""
        if self._file is None:
            rows = self._list[self._at : self._at + n]
            self._at += len(rows)
            return rows
        first = self.peek() if n > 0 else None
        if first is None:
            return []
        rows = [first]
        self._next = None
        readline = self._file.readline
        while len(rows) < n:
            line = readline()
            if not line:
                break
            rows.append(line[:-1])
        return rows


class BlockHits:
    """The hits of one query as they are parsed: ``hits`` (the chunk in memory; dicts with
    ``dicts``, else Hit objects) and their ids as bytes (``ids``), ``table`` (the query's
    :class:`~ingest.parsers.pasta.table.Table`, or None without rows), and the spool once a
    chunk passed ``spill`` hits or SPILL_BYTES of input (``held_bytes``, counted by the caller).

    The aligned hits are checked against the table as each chunk leaves memory, and the last
    chunk when the block ends; the table's other rows then follow as table-only hits, in chunks
    too.  Without a bound (``spill`` None: ``parse``, and ``parse_dicts(spill=None)``) the whole
    block is one chunk and the hits are the list they always were; with one, a block within it
    gives the same list, and a larger one a HitSpool of the same hits in the same order."""

    __slots__ = ("hits", "ids", "table", "spill", "dicts", "held_bytes", "spool", "first", "ctx")

    def __init__(self, table, dicts: bool, spill: int | None, ctx):
        self.hits: list = []
        self.ids: list[bytes] = []
        self.table = table
        self.spill = spill
        self.dicts = dicts
        self.held_bytes = 0
        self.spool: HitSpool | None = None
        self.first = None  # the first aligned hit, once its chunk left memory
        self.ctx = ctx  # ctx.before: the hits moved out (the ranks of the next go on from there)

    def full(self) -> bool:
        """Whether the chunk in memory passed the bound (never without one)."""
        return self.spill is not None and (len(self.hits) >= self.spill or self.held_bytes >= SPILL_BYTES)

    def spill_aligned(self) -> None:
        """Check the aligned hits in memory against the table and move them to the spool."""
        if self.first is None and self.hits:
            self.first = self.hits[0]
        if self.table is not None:
            self.table.aligned(self.hits, self.ids)
            if self.table.stopped:  # the block fails when it ends (Table.finish): nothing to keep
                self._drop()
                return
        self._move()

    def first_hit(self):
        """The first aligned hit, or None (before :meth:`finish`)."""
        return self.first if self.first is not None else (self.hits[0] if self.hits else None)

    def finish(self):
        """The block has ended: the hits as a list (``dicts`` or objects, as held), or the
        spool (of dicts); raises the table's findings (a ParseError)."""
        table, hits = self.table, self.hits
        if table is not None:
            table.aligned(hits, self.ids)
            table.finish()
            for chunk in table.table_only(self.spill):
                hits += chunk
                if self.full():
                    self._move()
        if self.spool is None:
            return hits
        self._move()
        return self.spool

    def _move(self) -> None:
        hits = self.hits
        if self.spool is None:
            self.spool = HitSpool()
        if hits:
            self.spool.extend(hits if self.dicts else [hit.to_dict() for hit in hits])
        self._drop()

    def _drop(self) -> None:
        self.ctx.before += len(self.hits)
        self.hits.clear()
        self.ids.clear()
        self.held_bytes = 0
