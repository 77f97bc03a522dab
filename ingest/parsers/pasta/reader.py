"""The buffered reader of the ``-m 10`` parser: lines, best-scores table rows and hit
blocks from a binary handle, read in chunks, with the line numbers of the errors and
the limits on a line (``MAX_LINE``) and a hit block (``MAX_BLOCK``)."""

from __future__ import annotations

import re
from typing import Protocol

from ingest.errors import ParseError
from ingest.parsers.pasta.spool import Rows

CHUNK = 1 << 20  # default chunk_size: bytes asked of each handle.read()
MAX_LINE = 1 << 20  # longest accepted line (bytes)
MAX_BLOCK = 64 << 20  # largest accepted single hit block (bytes)
LOOKAHEAD = 256 << 10  # bytes kept ahead of the position in the hit loop (at most chunk_size)

_NEXT_QUERY = re.compile(rb"\n[ \t]*\d+>>>")  # a query line (in a run without ">>><<<")
# the line after the best-scores table: blank (or white space), a ">>>" line, or the next
# query's line (-m 9i with -d 0: no alignments, no summary line, no blank line after the table)
_ROW_END = re.compile(rb"\n(?:[ \t\r\x0b\x0c]*\n|>>>|[ \t]*\d+>>>)")
_QUERY_LINE = re.compile(rb"[ \t]*\d+>>>")
# control characters but tab, line feed, vertical tab, form feed and carriage return:
# more than one in a line outside the query blocks means binary data, not a report
CONTROL_BYTES = bytes(range(0, 9)) + bytes(range(14, 32)) + b"\x7f"


class BinaryReadable(Protocol):
    """What the parser reads: ``read(n)`` giving bytes, b"" at the end (a file opened ``"rb"``, a
    gzip stream, a pipe, or the tabular parsers' readers of a part of one)."""

    def read(self, n: int = -1, /) -> bytes: ...


class Reader:
    """Chunked reader over a binary handle that tracks line numbers: it asks
    ``chunk_size`` bytes of each ``handle.read()`` and reads again while it needs more
    (a read may return fewer bytes, as from a pipe; only b"" is the end)."""

    __slots__ = ("handle", "source", "chunk_size", "lookahead", "buf", "pos", "line_no", "eof", "_before",
                 "spill_rows")

    def __init__(self, handle: BinaryReadable, source: str, chunk_size: int = CHUNK):
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
        self.spill_rows: int | None = None  # read_rows: rows held before a table goes to a Rows spool

    def error(self, reason: str, line: int | None = None) -> ParseError:
        return ParseError(reason, source=self.source, line=self.line_no + 1 if line is None else line)

    def fill(self) -> bool:
        """Read one more chunk into the buffer; False at the end of the input."""
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
            if not self.fill():
                if self.pos >= len(self.buf):
                    return None
                line = self.buf[self.pos :]
                self._before = (self.pos, self.line_no)
                self.pos = len(self.buf)
                self.line_no += 1
                return line[:-1] if line.endswith(b"\r") else line
            start += self.pos

    def read_rows(self) -> tuple[list[bytes] | Rows, int, bool]:
        """Consecutive non-blank lines not starting with ``>>>`` (best-scores table
        rows), the line number of the first, and whether a row starts with ``+-``;
        the line that ends them is not consumed.  The rows are a list, or a spilled
        :class:`~ingest.parsers.pasta.spool.Rows` beyond ``spill_rows`` of them."""
        rows: list[bytes] = []
        spooled: Rows | None = None
        spill = self.spill_rows
        first = self.line_no + 1
        plus = False
        while True:
            buf, pos = self.buf, self.pos
            last = buf.rfind(b"\n", pos)  # rows are taken only as complete lines
            if last < 0:
                if len(buf) - pos > MAX_LINE:
                    raise self.error(f"line longer than {MAX_LINE} bytes")
                if not self.fill():
                    break  # a last line without line end is left to readline
                continue
            e = buf.find(b"\n", pos)
            if e - pos > MAX_LINE:
                raise self.error(f"line longer than {MAX_LINE} bytes")
            line = buf[pos:e]
            if not line.strip() or line.startswith(b">>>") or _QUERY_LINE.match(line):
                break
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
            if spill is not None and len(rows) > spill:  # a table of many rows: to a temporary file
                if spooled is None:
                    spooled = Rows([])
                spooled.spill(rows)
                rows = []
            if m is not None or not self.fill():
                break
        if spooled is None:
            return rows, first, plus
        spooled.spill(rows)
        return spooled, first, plus

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes at the current position, without consuming them."""
        while len(self.buf) - self.pos < n and self.fill():
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
            if not self.fill():
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
