"""The ``-m 10`` blocks FASTA prints after a query's table rows when it is asked for both (``-m 8CB -m 10``,
``-m 10,8CC``): read by the ``-m 10`` parser and joined to the rows.

FASTA 36.3.8i prints, for each query, its comment lines and rows, then the ``-m 10`` part of the query
without its header or best-scores table: the summary line ``>>>ID, N aa vs LIB library``, the ``; pg_*``
lines, one block per shown alignment (``>>`` and ``>--``, the first ``-d`` hits), and no ``>>><<<``;
the next query's comments (or the run's ``# ... processed`` line) follow.  :class:`Section` hands the
``-m 10`` parser (:func:`ingest.parsers.pasta.parse_dicts`) that part as a one-query report: a header
made from what the comments and the summary line say, the part's lines as they are read (up to the
next comment line or table row, given back to the table's reader), and the end lines; a ParseError or
warning of it names the file's own line.  :func:`joined` then gives each of the first hits the values
of its ``-m 10`` block, as a ``-m 10`` file's aligned hit has them (scores, z-score, identity and
similarity as the block prints them, sequences, consensus, ``aligned: true``), with its rows'
``mismatches``, ``gap_opens`` and ``al_code`` in ``extra``; each block must be its row's alignment
(the same sequence, the same coordinates), else the file is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from io import BufferedIOBase

from ingest.errors import ParseError
from ingest.model import Hit, Hsp
from ingest.parsers.pasta import parse_dicts as _parse_m10
from ingest.parsers.pasta.spool import HitSpool

__all__ = ["Lines", "Section", "SUMMARY", "read_section", "joined"]

#: the summary line that begins a query's -m 10 part: ">>>ID, 209 aa vs LIB library"
SUMMARY = re.compile(rb">>>(.*), (\d+) (aa|nt) vs (.*?) library\s*")
_HEADER_LINES = 4  # the command, the version, the query line, the library


class Lines:
    """The lines of a binary handle, numbered from 1, the last one read given back by :meth:`push`."""

    def __init__(self, handle: BufferedIOBase, limit: int):
        self.readline, self.limit = handle.readline, limit
        self.number = 0
        self.back: bytes | None = None

    def next(self) -> bytes:
        """The next line (its end included; at most ``limit + 1`` bytes); ``b""`` at the end."""
        if self.back is not None:
            raw, self.back = self.back, None
        else:
            raw = self.readline(self.limit + 1)
        if raw:
            self.number += 1
        return raw

    def push(self, raw: bytes) -> None:
        self.back = raw
        self.number -= 1


class Section:
    """A binary handle: one query's ``-m 10`` part as a report of its own (see the module)."""

    def __init__(self, lines: Lines, header: bytes, summary: bytes):
        self.lines = lines
        self.first = lines.number  # the summary line's number in the file
        self.last = lines.number
        self.parts = [header, summary if summary.endswith(b"\n") else summary + b"\n"]
        self.done = False

    def read(self, n: int = -1) -> bytes:
        out, self.parts = self.parts, []
        size = sum(map(len, out))
        while not self.done and (n < 0 or size < n):
            raw = self.lines.next()
            if not raw or raw[:1] == b"#" or raw.count(b"\t") >= 11:  # the next comment or table row
                if raw:
                    self.lines.push(raw)
                out.append(b">>><<<\n>>>///\n")
                self.done = True
                break
            self.last = self.lines.number
            out.append(raw if raw.endswith(b"\n") or len(raw) > self.lines.limit else raw + b"\n")
            size += len(out[-1])
        return b"".join(out)

    def line(self, synthetic: int | None) -> int:
        """The file's line of the report's line ``synthetic``."""
        if synthetic is None or synthetic <= _HEADER_LINES:
            return self.first
        return min(self.first + synthetic - _HEADER_LINES - 1, self.last)


def read_section(lines: Lines, summary: bytes, q, command: str | None, nameless: bool, source: str,
                 warn: Callable[[str], None] | None, spill: int | None) -> dict:
    """The ``-m 10`` part of query ``q`` (a :class:`~ingest.model.Query` of the rows; ``nameless``: FASTA
    gave it no name), its summary line just read: the ``-m 10`` parser's query dict (its hits a list, or
    past ``spill`` hits a spool, as the parser gives them).
    The query line made for it holds the id alone (the description is the comments'; a long one would
    be cut as FASTA cuts its titles), after a blank for a query without a name."""
    m = SUMMARY.fullmatch(summary.rstrip(b"\r\n"))
    if m is None:
        raise ParseError(f"malformed query summary line: {summary[:80]!r}", source=source, line=lines.number)
    title = (" " if nameless else "") + q.query_id
    header = (f"# {command or 'fasta36'}\n {'version ' + q.version if q.version else 'version 36'}\n"
              f"  1>>>{title} - {int(m.group(2))} {m.group(3).decode()}\n").encode() + b"Library: " + m.group(4) + b"\n"
    section = Section(lines, header, summary)
    pattern = re.compile(re.escape(source) + r":(\d+): ")

    def warned(message: str) -> None:
        if warn is not None:
            warn(pattern.sub(lambda w: f"{source}:{section.line(int(w.group(1)))}: ", message, count=1))

    try:
        queries = list(_parse_m10(section, source, warn=warned, spill=spill))
    except ParseError as exc:
        raise ParseError(exc.reason, source=source, line=section.line(exc.line)) from None
    if len(queries) != 1:
        raise ParseError(f"the -m 10 part of query {q.query_id!r} holds {len(queries)} queries, not 1",
                         source=source, line=section.first)
    found = queries[0]
    found["_lines"] = (section.first, section.last)
    return found


def _same_sequence(row_id: str, block_id: str) -> bool:
    """A row's subject id and its -m 10 block's hit id name one sequence: equal, or the block's FASTA's
    without the ``gi|NNN|`` the table keeps; a sequence without a name has no id in the table."""
    return row_id == block_id or row_id.endswith("|" + block_id) or row_id == ""


def joined(hits, m10: dict, dicts: bool, spill: int | None, source: str):
    """``hits`` (the rows' hits, a list or a spool, in table order) with the first ones given their
    ``-m 10`` blocks' values (``m10``: :func:`read_section`'s query); the others as they are."""
    count = len(m10["hits"])
    blocks = iter(m10["hits"])  # a list, or a spool: read once, in order
    first = m10["_lines"][0]
    out: list = []
    spool: HitSpool | None = None
    k = 0
    for hit in hits:
        if k < count:
            hit = _join(hit if dicts else hit.to_dict(), next(blocks), k + 1, source, first)
            if not dicts:
                hit = Hit(**{key: value for key, value in hit.items() if key != "hsps"},
                          hsps=[Hsp(**hsp) for hsp in hit["hsps"]])
            k += 1
        out.append(hit)
        if spill is not None and dicts and len(out) >= spill:
            spool = spool or HitSpool()
            spool.extend(out)
            out = []
    if k < count:
        raise ParseError(f"the -m 10 part has {count} alignments' hits but the table {k}", source=source,
                         line=first)
    if spool is None:
        return out
    if out:
        spool.extend(out)
    return spool


def _join(row: dict, block: dict, n: int, source: str, line: int) -> dict:
    if not _same_sequence(row["hit_id"], block["hit_id"]) or len(row["hsps"]) != len(block["hsps"]):
        raise ParseError(f"-m 10 block {n} ({block['hit_id']!r}, {len(block['hsps'])} alignment(s)) is not hit {n} of "
                         f"the table ({row['hit_id']!r}, {len(row['hsps'])} row(s))", source=source, line=line)
    hsps = []
    for a, b in zip(row["hsps"], block["hsps"]):
        where = ("query_start", "query_end", "hit_start", "hit_end")
        if tuple(a.get(k) for k in where) != tuple(b.get(k) for k in where):
            raise ParseError(f"-m 10 block {n} ({block['hit_id']!r}) aligns {tuple(b.get(k) for k in where)} but its "
                             f"table row {tuple(a.get(k) for k in where)}", source=source, line=line)
        hsp = dict(b)
        hsp["extra"] = {**(b.get("extra") or {}), **a["extra"]}  # the row's mismatches, gap opens, BTOP/CIGAR
        hsps.append(hsp)
    return Hit(hit_id=row["hit_id"] or block["hit_id"],  # the table's, whole (gi|NNN| kept), as the other hits'
               rank=row["rank"], hit_description=block.get("hit_description"),
               hit_length=row.get("hit_length", block.get("hit_length")), aligned=block["aligned"],
               hsps=[Hsp(**hsp) for hsp in hsps]).to_dict()
