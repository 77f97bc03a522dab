"""Long queries searched in segments.

FASTA reads at most ``MAXTST`` residues of a query at a time (40,000 in FASTA 36; the
segments of 36.3.8i are 39,990 nt).  A longer query (a genomic clone, a contig) is
searched segment after segment, each its own query block with its own number, statistics,
best-scores table and alignments::

      1>>>clone1 long genomic clone - 39990 nt
      2>>>clone1 long genomic clone - 39990 nt - 39990 nt
      3>>>clone1 long genomic clone - 39990 nt - 39990 nt - 6334 nt

The program keeps the query's title between segments and appends ``- N nt`` to it each
time, so block *k*'s announce text is block *k-1*'s with one more suffix: that, in the same
run, is what makes a block a continuation (a first segment looks like any query).  The
segments follow each other without overlap (``next_q_offset = q_offset + n0 - q_overlap``
in ``comp_lib9.c``, and ``q_overlap`` is never set), so segment *k* starts after the
residues of the segments before it.  The alignments' ``al_start``/``al_stop`` already count
in the whole query (``calc_coord`` adds the segment's offset); the query side's
``; sq_offset:`` does not help (for a reverse-strand alignment it is the segment's end).

Each segment stays one query (one ``searches`` document: its statistics and E-values are
its own), with ``query_length`` the whole query's length and ``query_segment`` = ``{index,
count, offset, length}`` (``offset``: the 1-based position of its first residue in the
query).  The description is the query's own, without the suffixes.  The segments of a
query are held until the next query, the end of the run or the end of the input shows the
last one (memory: one query's hits, not the file's); every alignment is checked to lie in
its segment, else the file is refused at that segment's query line (never a wrong
coordinate).  Damage before the last segment is seen yields none of them: the whole
query's length is not known.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator


class Segments:
    """The query blocks read but not yet yielded: one block, or the segments of one query."""

    __slots__ = ("blocks", "run", "text", "length", "unit")

    def __init__(self):
        self.blocks: list[tuple] = []  # (query or dict, line of its N>>> line, segment length)
        self.run = None
        self.text = b""
        self.length = b""
        self.unit = b""

    def continues(self, run, m) -> bool:
        """Whether the query line matched by ``m`` (``_QSTART``) continues the held query."""
        if not self.blocks or run is not self.run or m.group("fragments") is not None:
            return False
        return m.group(2) == self.text + b" - " + self.length + b" " + self.unit

    def add(self, q, line: int, run, m) -> None:
        self.blocks.append((q, line, int(m.group(3))))
        self.run, self.text, self.length, self.unit = run, m.group(2), m.group(3), m.group(4)

    def first(self):
        return self.blocks[0][0]

    def flush(self, r, dicts: bool) -> Iterator:
        """Yield the held blocks, as segments of one query when there are several."""
        blocks, self.blocks = self.blocks, []
        if len(blocks) == 1:
            yield blocks[0][0]
            return
        total = sum(n for _, _, n in blocks)
        offset = 1
        for index, (q, line, n) in enumerate(blocks, start=1):
            segment = {"index": index, "count": len(blocks), "offset": offset, "length": n}
            _check_inside(r, q, line, offset, offset + n - 1, dicts)
            if dicts:
                yield _with_segment(q, total, segment)
            else:
                q.query_length = total
                q.query_segment = segment
                yield q
            offset += n

    def drop_partial(self) -> Iterator:
        """At damage: yield the held block if it is a single complete query; the segments
        of a query whose end was not seen are not yielded (its length is unknown)."""
        blocks, self.blocks = self.blocks, []
        if len(blocks) == 1:
            yield blocks[0][0]


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


def _check_inside(r, q, line: int, lo: int, hi: int, dicts: bool) -> None:
    hits = q["hits"] if dicts else q.hits
    for hit in hits:
        for hsp in hit["hsps"] if dicts else hit.hsps:
            a, b = (hsp.get("query_start"), hsp.get("query_end")) if dicts else (hsp.query_start, hsp.query_end)
            if a is None:
                continue
            if a < lo or b > hi:
                hit_id = hit["hit_id"] if dicts else hit.hit_id
                raise r.error(
                    f"query segment {lo}-{hi}: the alignment with {hit_id} at query {a}-{b} lies outside it "
                    f"(segments that overlap or restart numbering are not a layout this parser knows)", line)


def _with_segment(d: dict, total: int, segment: dict) -> dict:
    """``d`` (a Query.to_dict()) with the whole length and ``query_segment`` in Query's field order."""
    out = {}
    for key, value in d.items():
        if key == "query_length":
            out[key] = total
            if "query_fragments" not in d:
                out["query_segment"] = segment
        else:
            out[key] = value
            if key == "query_fragments":
                out["query_segment"] = segment
    return out
