"""Runs and queries: the run header, each query block (query line, library,
statistics, best-scores table, ``pg_*``/``mp_*`` parameters, then its hit blocks, each
to the fast path or the checking path) and the end of each query and run."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ingest.errors import ParseError
from ingest.model import Query
from ingest.parsers.pasta.checking import parse_hit
from ingest.parsers.pasta.common import HitContext, decode_utf8
from ingest.parsers.pasta.fastpath import fast_hits
from ingest.parsers.pasta.header import (
    UNTERMINATED_OPTION,
    QueryLine,
    Run,
    cut_description,
    ends_unterminated,
    gi_stripped,
    new_query,
    query_line,
    read_header,
    read_params,
)
from ingest.parsers.pasta.reader import CONTROL_BYTES, Reader
from ingest.parsers.pasta.segments import Block, Segments, continuation_description
from ingest.parsers.pasta.spool import ROWS_PER_HIT, BlockHits
from ingest.parsers.pasta.table import Table, table_keeps_hits

MAX_PREAMBLE = 1000  # lines accepted between queries without a query block
SQ_OFFSET_REACH = 1 << 16  # bytes from a query's first hit line to its first "; sq_offset:" (a few hundred, as printed)


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


def parse_queries(r: Reader, sequences: bool, warn, dicts: bool = False, fast: bool = True,
           spill: int | None = None) -> Iterator:
    """The queries of ``r``; with ``dicts`` and ``spill`` (a number of hits), a query block holding
    more goes to a spool (spool.py)."""
    held = Segments()  # a query is yielded once the next line shows whether it goes on in segments
    if not dicts:
        spill = None  # Query objects hold their hits in a list
    if spill is not None:
        r.spill_rows = spill * ROWS_PER_HIT
    try:
        yield from _parse_held(r, sequences, warn, dicts, fast, held, spill)
    except ParseError:
        yield from held.drop_partial()
        raise


def _parse_held(r: Reader, sequences: bool, warn, dicts: bool, fast: bool, held: Segments,
                spill: int | None) -> Iterator:
    source = r.source
    run = Run(1)
    query_index = 0
    preamble = 0
    first_content: bytes | None = None
    while True:
        line = r.readline()
        if line is None:
            break
        if r.line_no == 1 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (an editor's)
            line = line[3:]
            if warn is not None:
                warn(f"{source}:1: a UTF-8 byte order mark before the first line was skipped")
        if first_content is None and line.strip():
            first_content = line
        ql = query_line(line) if b">>>" in line[:24] else None
        if ql is not None:
            if run.complete:  # a new run without a header line
                run = Run(run.index + 1)
            query_index += 1
            line_no = r.line_no
            continued = held.continues(run, ql.title, ql.length, ql.unit, ql.fragments)
            if not continued:
                yield from held.flush(r, dicts, warn)
            elif ql.unit is None:  # a cut title: a segment's unit is its query's
                ql.unit = held.blocks[-1].unit
            q, length, unit, offset = _parse_query(r, ql, run, query_index, sequences, warn, dicts, fast, spill)
            if continued:
                continuation_description(q, held.first(), dicts)
            held.add(Block(q, line_no, run, ql.title, length, unit, offset))
            run.queries += 1
            preamble = 0
            continue
        if line.startswith((b">>>///", b"# ")):  # the end of a run ends a query, and its segments
            yield from held.flush(r, dicts, warn)
        if len(line) - len(line.translate(None, CONTROL_BYTES)) > 1:
            raise r.error("binary data (control characters): not a text report", r.line_no)
        if line.startswith(b">>>///"):
            if run.queries == 0:
                raise r.error("'>>>///' end of run without any query block", r.line_no)
            run.complete = True
            continue
        if line.startswith(b"# ") and (run.complete or run.queries == 0):
            if run.queries or run.complete:
                run = Run(run.index + 1)
            run.command = decode_utf8(line[2:].strip(), "command line", source, r.line_no, warn)
            run.unterminated = UNTERMINATED_OPTION.search(run.command) is not None
            prog = run.command.split(None, 1)[0] if run.command else ""
            run.program = prog.rsplit("/", 1)[-1] or None
            continue
        if line.startswith(b"# "):
            raise r.error("a new run starts before the previous one ended with '>>>///' (truncated output?)", r.line_no)
        if line.startswith(b" version ") and run.version is None:
            run.version = decode_utf8(line[9:].strip(), "version", source, r.line_no, warn) or None
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
        if line.strip():
            _outside(r, run, line)
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
    yield from held.flush(r, dicts, warn)


#: What FASTA prints after a run's ">>>///" (``print_sum`` of its ``compacc2e.c``): the queries' and the
#: library's residues, the ``[STP]complib`` version line, start and end, scan and display times, the
#: function.  With blank lines, the only text between the end of a run and the next run or the end.
_TRAILER = re.compile(rb"(?:\d+ residues in +\d+ (?:query|library) +sequences|\s*[STP]complib \[|\s*start: "
                      rb"|\s*(?:Total )?Scan time: |Function used was )")
_ONE_FORMAT = "a file holds one format, and one holding more is refused whole"


def _outside(r: Reader, run: Run, line: bytes) -> None:
    """Refuse a line outside any query block that is none of FASTA's (a file that goes on in another
    format after a report, or holds another format before or between its queries, is never
    half loaded): after a run's end, anything but its trailer (:data:`_TRAILER`); between two
    queries, any text; before a run's first query (the program's banner), a JSON value."""
    shown = line[:60]
    if line.lstrip()[:1] in (b"{", b"["):
        what = f"a JSON value ({shown!r})"
    elif (not _TRAILER.match(line)) if run.complete else run.queries:
        what = f"{shown!r}"
    else:
        return
    where = ("after the end of the run ('>>>///')" if run.complete else
             "between two queries" if run.queries else "before the run's first query")
    raise r.error(f"{what} {where}, where FASTA prints no such line: {_ONE_FORMAT}", r.line_no)


def _types(program: str | None, unit: bytes) -> tuple[str, str]:
    """(query type, library type) from the program and the query line's unit."""
    base = _base(program)
    if base in _TRANSLATED:
        return _TRANSLATED[base]
    t = "dna" if unit == b"nt" else "protein"
    return t, t


def _parse_query(r: Reader, ql: QueryLine, run: Run, query_index: int, sequences: bool, warn,
                 dicts: bool = False, fast: bool = True, spill: int | None = None) -> tuple:
    """The query block that starts at the query line ``ql``: (a Query, or with ``dicts``
    its ``to_dict()``; the block's length and unit; the numbering offset of its first
    alignment or None, see segments.py).  ``fast=False`` sends every alignment to the
    checking path.  ``spill``: the hits held in memory before they go to a spool (with
    ``dicts``; the dict's ``"hits"`` is then a HitSpool, see spool.py)."""
    q, nameless = new_query(r, ql, run, query_index, warn)
    line = r.line_no
    table, ended = read_header(r, q, run, nameless, warn, ql)
    unit = ql.unit
    if q.query_length is None or unit is None:
        raise r.error("the query line's title was cut at 511 bytes by FASTA and the block states no "
                      "length and unit of its own (no summary line): a layout this parser does not know", line)
    if not ended:
        read_params(r, q, run, warn)
    if ql.length is None and q.query_description is not None:  # a cut title: what of FASTA's " - N aa" it kept
        q.query_description = cut_description(ql.text, q.query_length, unit, _base(q.program))
    q.query_type, q.library_type = qtype, ltype = _types(q.program, unit)
    # with dicts, the hits are built as dicts when the table will not change them (it
    # adds E2() and the -m 9 columns to aligned hits; tables without those only add
    # table-only hits)
    hit_dicts = dicts and (table is None or table_keeps_hits(table))
    ctx = HitContext(q.query_id, qtype == "dna", ltype == "dna", _TRANSLATED_SIDE.get(_base(q.program)), sequences,
                      hit_dicts, run.unterminated)  # fmt: skip
    if ql.text.startswith(b"gi|"):
        ctx.query_alt_b = gi_stripped(ql.text)
    # a table with rows (the query's types set): its hits are checked against it
    checked = Table(r, q, table, warn, hit_dicts) if table is not None and len(table[2]) else None
    block = BlockHits(checked, hit_dicts, spill, ctx)
    offset = None
    if not ended:  # a query with alignments
        printed = _first_sq_offset(r)
        ctx.pattern = run.layout
        _read_hits(r, q, run, ctx, block, fast, warn)
        run.layout = ctx.pattern
        offset = _numbering_offset(printed, block.first_hit(), q.query_length, hit_dicts)
    hits = block.finish()
    if hit_dicts or not isinstance(hits, list):  # dicts already, or a spool of dicts
        d = q.to_dict()
        d["hits"] = hits
        return d, q.query_length, unit, offset
    q.hits = hits  # ranks: aligned hits get theirs when parsed
    return (q.to_dict() if dicts else q), q.query_length, unit, offset


def _first_sq_offset(r: Reader) -> int | None:
    """The ``; sq_offset:`` of the first alignment's query side (the first one after the
    summary's parameter lines), read ahead in the buffer (filled as needed, up to
    SQ_OFFSET_REACH bytes: a pipe may hand over a few bytes at a time); None if not there."""
    while True:
        buf, pos = r.buf, r.pos
        i = buf.find(b"\n; sq_offset: ", pos, pos + SQ_OFFSET_REACH)
        j = buf.find(b"\n", i + 14) if i >= 0 else -1
        if j >= 0 or (i >= 0 and r.eof):
            try:
                return int(buf[i + 14 : j if j >= 0 else len(buf)])
            except ValueError:
                return None
        if len(buf) - pos >= SQ_OFFSET_REACH or not r.fill():
            return None


def _numbering_offset(printed: int | None, first, length: int, dicts: bool) -> int | None:
    """The block's numbering offset O (its residues are numbered O+1 .. O+length) from the
    first alignment's query-side ``sq_offset`` (O+1; O+length+1 on the reverse strand); ``first``
    is the first aligned hit (None without)."""
    if printed is None or first is None:
        return None
    hsps = first["hsps"] if dicts else first.hsps
    if not hsps:
        return None
    strand = hsps[0].get("query_strand") if dicts else hsps[0].query_strand
    return printed - 1 - (length if strand == "-" else 0)


def _read_hits(r: Reader, q: Query, run: Run, ctx: HitContext, block: BlockHits, fast: bool, warn) -> None:
    """The hit blocks of query ``q``, up to its end (``>>><<<``; in a run without it
    the next query's line or the end of the run, left unread): each hit in the usual
    layout to the fast path (unless not ``fast``), any other to the checking path;
    appended to ``block.hits`` (dicts if ``ctx.dicts``), their ids as bytes to ``block.ids``,
    moved to its spool whenever the block is full (BlockHits.full)."""
    source = r.source
    hit_dicts = ctx.dicts
    hits, ids = block.hits, block.ids
    bounded = block.spill is not None
    slow_next = False  # the hit at r.pos goes to the checking path
    lookahead = r.lookahead
    while True:
        buf, pos = r.buf, r.pos
        if len(buf) - pos < lookahead and not r.eof:
            r.fill()
            buf, pos = r.buf, r.pos
        if buf.startswith(b">>", pos) and not buf.startswith(b">>>", pos):
            # fast path: hits in the usual layout, parsed in the read buffer while
            # lookahead bytes remain after them (at least one, if it ends in the buffer)
            if fast and not slow_next:
                n = len(hits)
                end, slow_next, n_lines = fast_hits(buf, pos, len(buf) if r.eof else len(buf) - lookahead, ctx, hits, ids)
                if end > pos and buf.find(b"\r", pos, end) >= 0:
                    # the checking path reads CRLF line ends (and stray CRs) its own way
                    del hits[n:], ids[n:]
                    end, slow_next = pos, True
                if end > pos:
                    r.line_no += n_lines
                    r.pos = end
                    if bounded:
                        block.held_bytes += end - pos
                        if block.full():
                            block.spill_aligned()
                    continue
            slow_next = False
            text, first = r.read_block(run.unterminated)
            hit = parse_hit(text, first, len(hits) + 1 + ctx.before, ctx, source, warn)
            hits.append(hit.to_dict() if hit_dicts else hit)
            ids.append(hit.hit_id.encode("utf-8", "replace"))
            if bounded:
                block.held_bytes += len(text)
                if block.full():
                    block.spill_aligned()
            continue
        line = r.readline()
        if line is None:
            raise r.error(f"input ends inside query {q.query_id!r} (no '>>><<<' end of query; truncated?)", r.line_no)
        if line.startswith(b">>><<<"):
            return
        if not line.strip():
            continue
        if ends_unterminated(run, line):
            r.unread()  # the next query's line, or the end of the run
            return
        raise r.error(f"unexpected line in query {q.query_id!r}: {line[:60]!r}", r.line_no)


def _base(program: str | None) -> str:
    """"ssearch36" -> "ssearch", "/usr/bin/tfastx36_t" -> "tfastx"."""
    base = _BASES.get(program)
    if base is None:
        base = re.sub(r"(36|35|34)?(_t)?$", "", (program or "").rsplit("/", 1)[-1].lower())
        if len(_BASES) >= 64:
            _BASES.clear()
        _BASES[program] = base
    return base


# program -> _base(program), asked twice a query (its types, its hits' context): a look-up, not a re.sub
_BASES: dict[str | None, str] = {}


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
