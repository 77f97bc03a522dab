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
  ``query_segment.printed_offset`` keeps the printed value), and after a subrange of a long
  query it goes on past the subrange (it cuts the subrange from the first read only) through
  the rest of the sequence from residue 39,991, numbering block *k* >= 2 from the subrange's
  length: its alignments lie ``39,990 - L1 + (N-1)`` further on than printed (``L1`` the
  subrange block's length, ``N`` an ``@C:N``'s; ``_past_subrange`` derives it).  Those blocks
  are placed there, as segments of the query with the subrange's block as segment 1 (a
  warning names their lines and the shift, ``printed_offset`` keeps FASTA's number); they
  are set aside, with a warning saying why, only when the file contradicts the rule
  (``_unplaceable``).  A subrange that ends past the first read is searched by its own block
  only up to residue 39,990 (the blocks after it go on from 39,991).

Each segment stays one query (one ``searches`` document: its statistics and E-values are its
own), with ``query_length`` the whole query's length and ``query_segment`` = ``{index, count,
offset, length}`` (``offset``: the number of its first residue, in the alignments' numbering).
The description is the query's own, without the suffixes.  Segments are held until the next
query, the end of the run or the end of the input shows the last one (memory: one query's
hits, those of a large block in a spool: spool.py); damage before the last one yields none of
them (the whole length is unknown).  After a subrange (above) the subrange's block is segment 1
and the blocks past it follow from residue 39,991: ``query_range`` is then set only when they
join it (a subrange ending at or past 39,990), since what was searched is otherwise not one range.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from operator import itemgetter

from ingest.parsers.pasta.spool import HitSpool

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
        if len(blocks) > 1 and subrange is not None:
            why = _unplaceable(blocks, subrange)
            if why is None:
                yield from _past_subrange(r, blocks, subrange, dicts, warn)
                return
        if len(blocks) == 1 or subrange is not None:
            q = _single(r, first, subrange, dicts, warn)
            if len(blocks) > 1:
                _set_aside(r, blocks[1:], subrange, why, warn)
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
    c = _at_c(blocks[0])
    position = base
    placed = []
    for index, b in enumerate(blocks, start=1):
        segment = {"index": index, "count": len(blocks), "offset": position + 1, "length": b.length}
        if b.offset is not None and b.offset != position:
            shift = position - b.offset
            if index == 1 or shift != c - 1:
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


def _at_c(block: Block) -> int:
    """The N of an ``@C:N`` in the query's header (1 without): the number of its residue 1."""
    m = _AT_C.search(block.title)
    return int(m.group(1)) if m else 1


def _origin(blocks: list[Block], subrange) -> int | None:
    """The ``-o`` part of the numbering (``sq0off - 1``), from the first block that printed an
    offset (see _past_subrange); None when no block did (no alignment to place)."""
    first, read1 = blocks[0], blocks[0].length
    if first.offset is not None:
        return first.offset - (subrange[0] - 1) - (_at_c(first) - 1)
    for k, b in enumerate(blocks[1:], start=2):
        if b.offset is not None:
            return b.offset - read1 - READ * (k - 2)
    return None


def _unplaceable(blocks: list[Block], subrange) -> str | None:
    """Why the blocks past a long query's subrange cannot be placed by _past_subrange's rule
    (None: they can): the subrange's block is not what FASTA cuts from a full first read of READ
    residues, a block before the last is not a full read, or a block's printed offset is not
    the one the rule predicts."""
    start, end = subrange
    want = min(READ, end if end is not None else READ) - (start - 1)
    if blocks[0].length != want:
        return (f"the subrange's block has {blocks[0].length} residues, not the {want} FASTA cuts from its "
                f"first read of {READ:,}")
    for b in blocks[1:-1]:
        if b.length != READ:
            return f"the block at line {b.line} has {b.length} residues, not a full read of {READ:,}"
    origin = _origin(blocks, subrange)
    if origin is None:  # no block printed an offset: none to check
        return None
    for k, b in enumerate(blocks[1:], start=2):
        printed = origin + blocks[0].length + READ * (k - 2)
        if b.offset is not None and b.offset != printed:
            return (f"the block at line {b.line} is numbered from {b.offset + 1}, not from {printed + 1} as "
                    f"FASTA numbers the blocks after a subrange")
    return None


def _past_subrange(r, blocks: list[Block], subrange, dicts: bool, warn) -> Iterator:
    """A subrange of a long query and the blocks FASTA searched past it, as segments of the query.

    FASTA (``comp_lib9.c``) cuts the subrange from its first read only (``n0 = min(n0, sstop) -
    sstart``), then reads on where that read stopped, at residue ``READ+1``, while the next
    block's numbering offset is ``q_offset + n0``: the subrange's length, not READ; later reads
    add their own lengths; ``q_off`` (``@C:N`` and the subrange's start) is reset to 1 on a
    continued read.  Block *k* >= 2 prints ``origin + L1 + READ*(k-2)`` for its first residue
    less one (``origin``: ``-o``'s ``sq0off - 1``; ``L1``: the subrange block's length) where its
    true offset is ``origin + (C-1) + READ*(k-1)``: every alignment after the subrange's block
    lies ``READ - L1 + (C-1)`` further on.  Checked against real outputs of ssearch36, fasta36,
    fastx36, fasty36 and lalign36 (DNA, protein, ``-i``, ``-3``, ``-o``, ``@C:``)."""
    first = blocks[0]
    start, c = subrange[0], _at_c(first)
    origin = _origin(blocks, subrange) or 0
    read1 = first.length
    total = READ + sum(b.length for b in blocks[1:])  # the first read was full: FASTA read on
    shift = READ - read1 + (c - 1)
    offset1 = origin + (c - 1) + (start - 1)
    _check_inside(r, first.q, first.line, offset1 + 1, offset1 + read1, dicts, "query range")
    placed = [(first.q, {"index": 1, "count": len(blocks), "offset": offset1 + 1, "length": read1})]
    for k, b in enumerate(blocks[1:], start=2):
        true = origin + (c - 1) + READ * (k - 1)
        segment = {"index": k, "count": len(blocks), "offset": true + 1, "length": b.length}
        if shift and b.offset is not None:
            _shift(b.q, shift, dicts)
            segment["printed_offset"] = b.offset + 1
        _check_inside(r, b.q, b.line, true + 1, true + b.length, dicts, "query segment")
        placed.append((b.q, segment))
    end = origin + (c - 1) + total
    # what was searched is one range when the subrange's block reaches the end of the first read
    # (none when that is the whole sequence from 1, as for any segments)
    rng = {"start": offset1 + 1, "end": end} if start - 1 + read1 == READ and offset1 else None
    if warn is not None:
        lines = ", ".join(str(b.line) for b in blocks[1:])
        asked = f"{start}-{subrange[1] if subrange[1] is not None else ''}"
        how = ""
        if shift:
            dropped = f" and without the header's @C:{c}" if c != 1 else ""
            moved = (f"their alignments shifted by {shift:,} (query_segment.printed_offset keeps FASTA's number)"
                     if any(b.offset is not None for b in blocks[1:]) else "they hold no alignment to shift")
            how = f", numbering it from the subrange's length{dropped} (a FASTA 36 defect): {moved}"
        warn(f"{r.source}:{blocks[1].line}: {len(blocks) - 1} query block(s) at line(s) {lines} placed at residues "
             f"{origin + (c - 1) + READ + 1}-{end}: FASTA went on past the subrange {asked} the command asks for "
             f"into the rest of a long query{how}")
    for q, segment in placed:
        yield _with_segment(q, total, segment, rng) if dicts else _segment_object(q, total, segment, rng)


def _set_aside(r, blocks: list[Block], subrange, why: str | None, warn) -> None:
    if warn is None:
        return
    lines = ", ".join(str(b.line) for b in blocks)
    asked = f"{subrange[0]}-{subrange[1] if subrange[1] is not None else ''}"
    warn(f"{r.source}:{blocks[0].line}: {len(blocks)} query block(s) at line(s) {lines} set aside: FASTA went on "
         f"past the subrange {asked} the command asks for into the rest of a long query, numbering it from "
         f"the subrange's length (a FASTA 36 defect), and {why}: their positions in the sequence are unknown")


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


_START, _END = itemgetter("query_start"), itemgetter("query_end")


def _check_inside(r, q, line: int, lo: int, hi: int, dicts: bool, what: str) -> None:
    hits = q["hits"] if dicts else q.hits
    if isinstance(hits, HitSpool) and (hits.query_low is None or (
            hits.query_low + hits.query_shift >= lo and hits.query_high + hits.query_shift <= hi)):
        return  # a spilled block within the range (else read to name the first alignment outside)
    if dicts and isinstance(hits, list) and hits:
        # every alignment of a query, as most are: a pass in C over the least start and greatest end
        # (the loop below, for each query, was 2-3 % of `sci-ingest parse` on 900 small DNA queries)
        hsps = [hsp for hit in hits for hsp in hit["hsps"]]
        try:
            if not hsps or min(map(_START, hsps)) >= lo and max(map(_END, hsps)) <= hi:
                return
        except KeyError:  # a hit of the best-scores table only: no coordinates
            pass
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
    out: dict = {}
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
