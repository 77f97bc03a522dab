"""Where a query block sits in its sequence: query subranges and long queries searched in segments.

Read from FASTA 36.3.8's source (``comp_lib9.c``, ``nmgetlib.c``, ``build_ares.c``, ``c_dispn.c``):

* **Numbering.**  An alignment's query coordinates are ``q_offset + (q_off-1) + (sq0off-1)``
  plus its place in the searched residues: ``q_offset`` counts the residues of the segments
  before (below), ``q_off`` is ``1``, or ``N`` from an ``@C:N`` in the sequence's header, plus
  ``start-1`` for a subrange (``query.fa:start-end``, ``:start-`` or ``:-end`` on the command
  line), ``sq0off`` the first number of ``-o "Q L"``.  Every alignment prints that offset:
  its query side's ``; sq_offset:`` is ``offset+1`` (``offset+len+1`` on the reverse strand).
  A block's *numbering offset* O is read from its first alignment; the block searched
  ``O+1 .. O+len`` and every alignment must lie there.  When O is not 0, or the command
  names a subrange, the search says so: ``query_range = {start, end}``.  FASTA applies a
  subrange to the first sequence of the query file only.
* **Segments.**  FASTA reads at most ``MAXTST - 10`` = 39,990 residues of a query at a time
  (``agetlib``: ``seqm = &seq[maxs-9]``).  A longer query is searched segment after segment,
  each its own block (own statistics, table, E-values), in the same run::

      1>>>clone1 long genomic clone - 39990 nt
      2>>>clone1 long genomic clone - 39990 nt - 39990 nt
      3>>>clone1 long genomic clone - 39990 nt - 39990 nt - 6334 nt

  The title is kept between reads and gets `` - N nt`` appended each time, so block *k*'s
  title is block *k-1*'s plus `` - N unit``, byte for byte: that is what makes a block a
  continuation.  The title buffer holds 511 bytes (``qtitle[MAX_STR]``, ``strncat``): a
  long title loses the end of its suffix, or all of it (see ``query.py``: the length is then
  read from the block's summary line), and once full it stays the same from segment to
  segment; two identical cut titles continue each other only after a full 39,990-residue
  read.  Segments follow each other without overlap (``q_overlap`` is never set).
* **Defects kept out.**  FASTA numbers the segments after the first as if the first began at
  residue 1 of the numbering: it drops an ``@C:N`` offset (renumbered here: the first
  segment's offset is known, the rest follow it without a gap; a warning says so and
  ``query_segment.printed_offset`` keeps the printed value), and after a subrange it goes
  on past the subrange's end (it cuts the subrange from the first read only) with
  alignments numbered from the subrange's length: those blocks are not what the command
  asked for and cannot be placed in the sequence; they are set aside with a warning
  naming their lines, the subrange's block is kept.  A subrange that ends past the first
  read is searched only up to residue 39,990: a warning says so.

Each segment stays one query (one ``searches`` document: its statistics and E-values are its
own), with ``query_length`` the whole query's length and ``query_segment`` = ``{index, count,
offset, length}`` (``offset``: the number of its first residue, in the alignments' numbering).
The description is the query's own, without the suffixes.  Segments are held until the next
query, the end of the run or the end of the input shows the last one (memory: one query's
hits, those of a large block in a spool: spool.py); damage before the last one yields none of them (the whole length is unknown).
"""

from __future__ import annotations

import re

from ingest.parsers.pasta.spool import HitSpool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

TITLE_MAX = 511  # bytes of a query title FASTA prints (qtitle[MAX_STR = 512], NUL included)
READ = 39990  # residues of a long query FASTA 36 reads at a time (MAXTST 40000 - 10)
# a subrange on the query file of the command line: "file:101-400", "file:101-", "file:-400"
_SUBRANGE = re.compile(r"^(.+):(?:(\d+)-(\d*)|-(\d+))$")
# what may follow the previous title in a cut one: the start of " - N unit"
_CUT_TAIL = re.compile(rb"(?: -(?: (?:\d+(?: (?:n|nt|a|aa)?)?)?)?)?")
_AT_C = re.compile(rb"@C:(\d+)")


def query_subrange(command: str | None) -> tuple[int, int | None] | None:
    """The (start, end or None) of the subrange the command line puts on its query file, if any:
    the query is the next-to-last argument (the last but two when a ktup follows)."""
    if not command:
        return None
    args = command.split()
    if len(args) >= 4 and args[-1].isdigit():
        args = args[:-1]
    if len(args) < 3:
        return None
    m = _SUBRANGE.match(args[-2])
    if m is None:
        return None
    if m.group(4) is not None:
        return 1, int(m.group(4))
    return int(m.group(2)), int(m.group(3)) if m.group(3) else None


class Block:
    """One query block as read: the query (object or dict), where its line is, its title as
    printed, its length and unit, and the numbering offset its first alignment shows."""

    __slots__ = ("q", "line", "run", "title", "length", "unit", "offset")

    def __init__(self, q, line: int, run, title: bytes, length: int, unit: bytes, offset: int | None):
        self.q, self.line, self.run, self.title = q, line, run, title
        self.length, self.unit, self.offset = length, unit, offset


class Segments:
    """The query blocks read but not yet yielded: one block, or the segments of one query."""

    __slots__ = ("blocks",)

    def __init__(self):
        self.blocks: list[Block] = []

    def continues(self, run, title: bytes, length: int | None, unit: bytes | None, fragments) -> bool:
        """Whether a query line (its title as printed, the length and unit it states: None when
        cut) continues the held query."""
        if not self.blocks or fragments is not None:
            return False
        last = self.blocks[-1]
        if run is not last.run:
            return False
        prev = last.title
        if len(title) < TITLE_MAX:
            return length is not None and title == prev + b" - %d %s" % (length, unit)
        if title == prev:  # both cut to the full buffer: a continuation only after a full read
            return last.length == READ
        return title.startswith(prev) and _CUT_TAIL.fullmatch(title, len(prev)) is not None

    def add(self, block: Block) -> None:
        self.blocks.append(block)

    def first(self):
        return self.blocks[0].q

    def flush(self, r, dicts: bool, warn) -> Iterator:
        """Yield the held blocks: placed in their sequence, as segments of one query when there are several."""
        blocks, self.blocks = self.blocks, []
        if not blocks:
            return
        first = blocks[0]
        subrange = _subrange_of(first, dicts)
        if len(blocks) == 1 or subrange is not None:
            q = _single(r, first, subrange, dicts, warn)
            if len(blocks) > 1:
                _set_aside(r, blocks[1:], subrange, warn)
            yield q
            return
        yield from _segments(r, blocks, dicts, warn)

    def drop_partial(self) -> Iterator:
        """At damage: yield the held block if it is a single complete query; the segments
        of a query whose end was not seen are not yielded (its length is unknown)."""
        blocks, self.blocks = self.blocks, []
        if len(blocks) == 1:
            yield blocks[0].q


def _get(q, key, dicts):
    return q.get(key) if dicts else getattr(q, key)


def _subrange_of(block: Block, dicts: bool):
    """The command's query subrange when it applies to this block (the run's first query)."""
    q = block.q
    if _get(q, "run_query_number", dicts) != 1 or _get(q, "query_fragments", dicts) is not None:
        return None
    command = _get(q, "command", dicts)
    if command is None:
        params = _get(q, "params", dicts) or {}
        command = params.get("pg_argv") if isinstance(params.get("pg_argv"), str) else None
    return query_subrange(command)


def _single(r, block: Block, subrange, dicts: bool, warn):
    """A query searched in one block: its range when not the whole sequence from 1."""
    q, n = block.q, block.length
    if _get(q, "query_fragments", dicts) is not None:
        return q
    offset = block.offset
    if offset is None and subrange is not None:
        offset = subrange[0] - 1
    if offset is None:
        return q
    _check_inside(r, q, block.line, offset + 1, offset + n, dicts, "query range")
    if offset or subrange is not None:
        _set(q, "query_range", {"start": offset + 1, "end": offset + n}, dicts)
    if subrange is not None and subrange[1] is not None and offset + n < subrange[1] and warn is not None:
        warn(f"{r.source}:{block.line}: the command asks for residues {subrange[0]}-{subrange[1]} of the query; "
             f"FASTA searched {offset + 1}-{offset + n} (it cuts a subrange from the first "
             f"{READ:,} residues it reads of a long query)")
    return q


def _segments(r, blocks: list[Block], dicts: bool, warn) -> Iterator:
    """The segments of one long query, numbered without gaps from the first one's offset."""
    base = blocks[0].offset or 0
    total = sum(b.length for b in blocks)
    at_c = _AT_C.search(blocks[0].title)
    c = int(at_c.group(1)) if at_c else None
    position = base
    placed = []
    for index, b in enumerate(blocks, start=1):
        segment = {"index": index, "count": len(blocks), "offset": position + 1, "length": b.length}
        if b.offset is not None and b.offset != position:
            shift = position - b.offset
            if c is None or index == 1 or shift != c - 1:
                raise r.error(
                    f"query segment {index} of {len(blocks)}: its alignments are numbered from {b.offset + 1}, "
                    f"not from {position + 1} after the segments before it (a layout this parser does not "
                    f"know)", b.line)
            _shift(b.q, shift, dicts)
            segment["printed_offset"] = b.offset + 1
            if warn is not None:
                warn(f"{r.source}:{b.line}: query segment {index}: FASTA numbered it from {b.offset + 1}, "
                     f"without the header's @C:{c}; renumbered from {position + 1}")
        _check_inside(r, b.q, b.line, position + 1, position + b.length, dicts, "query segment")
        placed.append((b.q, segment))
        position += b.length
    rng = {"start": base + 1, "end": base + total} if base else None
    for q, segment in placed:
        yield _with_segment(q, total, segment, rng) if dicts else _segment_object(q, total, segment, rng)


def _set_aside(r, blocks: list[Block], subrange, warn) -> None:
    if warn is None:
        return
    lines = ", ".join(str(b.line) for b in blocks)
    asked = f"{subrange[0]}-{subrange[1] if subrange[1] is not None else ''}"
    warn(f"{r.source}:{blocks[0].line}: {len(blocks)} query block(s) at line(s) {lines} set aside: FASTA went on "
         f"past the subrange {asked} the command asks for into the rest of a long query, numbering it from "
         f"the subrange's length (a FASTA 36 defect): their positions in the sequence are unknown")


def _set(q, key: str, value, dicts: bool) -> None:
    if dicts:
        out = {}
        for k, v in q.items():
            out[k] = v
            if k == "query_length":
                out[key] = value
        q.clear()
        q.update(out)
    else:
        setattr(q, key, value)


def _segment_object(q, total: int, segment: dict, rng):
    q.query_length = total
    q.query_segment = segment
    q.query_range = rng
    return q


def _shift(q, shift: int, dicts: bool) -> None:
    hits = q["hits"] if dicts else q.hits
    if isinstance(hits, HitSpool):  # a spilled block: shifted as it is read
        hits.query_shift += shift
        return
    for hit in hits:
        for hsp in hit["hsps"] if dicts else hit.hsps:
            if dicts:
                if hsp.get("query_start") is not None:
                    hsp["query_start"] += shift
                    hsp["query_end"] += shift
            elif hsp.query_start is not None:
                hsp.query_start += shift
                hsp.query_end += shift


def continuation_description(q, first, dicts: bool) -> None:
    """Give a continuation block the description of the query's first block."""
    if dicts:
        desc = first.get("query_description")
        if desc is None:
            q.pop("query_description", None)
        else:
            q["query_description"] = desc
    else:
        q.query_description = first.query_description


def _check_inside(r, q, line: int, lo: int, hi: int, dicts: bool, what: str) -> None:
    hits = q["hits"] if dicts else q.hits
    if isinstance(hits, HitSpool) and (hits.query_low is None or (
            hits.query_low + hits.query_shift >= lo and hits.query_high + hits.query_shift <= hi)):
        return  # a spilled block within the range (else read to name the first alignment outside)
    for hit in hits:
        for hsp in hit["hsps"] if dicts else hit.hsps:
            a, b = (hsp.get("query_start"), hsp.get("query_end")) if dicts else (hsp.query_start, hsp.query_end)
            if a is None:
                continue
            if a < lo or b > hi:
                hit_id = hit["hit_id"] if dicts else hit.hit_id
                raise r.error(
                    f"{what} {lo}-{hi}: the alignment with {hit_id} at query {a}-{b} lies outside it "
                    f"(a layout this parser does not know)", line)


def _with_segment(d: dict, total: int, segment: dict, rng) -> dict:
    """``d`` (a Query.to_dict()) with the whole length, ``query_segment`` and ``query_range`` in Query's field order."""
    out = {}
    for key, value in d.items():
        if key == "query_length":
            out[key] = total
            if "query_fragments" not in d:
                out["query_segment"] = segment
                if rng is not None:
                    out["query_range"] = rng
        else:
            out[key] = value
            if key == "query_fragments":
                out["query_segment"] = segment
                if rng is not None:
                    out["query_range"] = rng
    return out
