"""The header of a query block: its query line (number, title, id, description, length), then the
``Library:``, statistics and ``-H`` histogram lines, the best-scores table's head, the summary line
(``>>>ID, LEN aa vs LIB library``) and the ``; pg_*``/``; mp_*`` parameters; and the names FASTA
gives the query where it shows it cut (a title cut at 511 bytes, a ``gi|`` title stripped)."""

from __future__ import annotations

import re

from ingest.model import Query
from ingest.parsers.pasta.common import decode_utf8, typed_value
from ingest.parsers.pasta.reader import Reader
from ingest.parsers.pasta.segments import TITLE_MAX

# "; pg_*"/"; mp_*" lines read before -> their (key, typed value) pairs: most repeat from one
# query to the next of a run (program, matrix, gap penalties, algorithm): 0.01-0.03 s of a
# 0.6 s parse of 900 DNA queries (benchmarks/make_large_pasta.sh), measured
_PARAM_LINES: dict[bytes, tuple] = {}
_QSTART = re.compile(rb"^\s*(\d+)>>>(.*?)\s*-\s+(\d+) (aa|nt)(?:\s+\(([^()]*)\))?"
                     rb"(?:\s+in\s+(?P<fragments>\d+)\s+fragments)?\s*$")  # fastf/fasts/fastm: peptide sets
# any query line: one whose title FASTA cut at TITLE_MAX bytes may have lost its " - LEN aa"
_QANY = re.compile(rb"^\s*(\d+)>>>(.*?)( \((?:reverse complement|forward-only)\))?$")
_STATS_N0 = re.compile(rb"\bn0: *(\d+)")
_QSUMMARY = re.compile(rb"^>>>(.*), (\d+) (aa|nt) vs (.*?) library\s*$")
_RESIDUES = re.compile(rb"(\d+) residues in\s+(\d+) sequences")
_LIB_RANGE = re.compile(rb"\s*\(range: ([^()]*)\)$")  # "Library: lib.fa (range: 200-250)" (-M)
_LIB_SUBRANGE = re.compile(rb":(?:(\d+)-(\d*)|-(\d+))$")  # "Library: lib.fa:101-500"
_KV = re.compile(rb"^; ([^:\n]*): ?(.*?)\r?$", re.M)
# -H: the histogram's head ("opt E()"; "opt" alone without statistics) and rows (compacc2e.c, prhist:
# "%c%3d %5d %5d:" then its bars, the first row's "%c" "<", the last's ">", the others' a space)
_HIST_HEAD = re.compile(rb"\s+opt(?:\s+E\(\))?\s*")
_HIST_ROW = re.compile(rb"([<> ])\s*(-?\d+) +(\d+)(?: +(\d+))? *:")
# "-m F10 FILE" (-m 10 written to a file) and "-m 9i"/"-m 9I" end queries without ">>><<<":
# in a run whose command line has such a -m option, the next query line or ">>>///" ends
# a query; elsewhere a missing ">>><<<" is damage (a cut or spliced file)
UNTERMINATED_OPTION = re.compile(r"""(?:^|\s)-m\s*["']?\s*(?:F|9[iI](?![\w-]))""")


class Run:
    """What the header of the current run says."""

    __slots__ = ("index", "program", "version", "command", "queries", "complete", "unterminated", "layout")

    def __init__(self, index: int):
        self.index = index
        self.program: str | None = None
        self.version: str | None = None
        self.command: str | None = None
        self.queries = 0
        self.complete = False
        # output modes that print no ">>><<<" after a query (see UNTERMINATED_OPTION)
        self.unterminated = False
        # the fast path's regex for the last query's alignments: the next query's are usually
        # alike (learning a layout was 2-3 % of a line profile of 900 queries of 40 hits)
        self.layout = None


class QueryLine:
    """A query line ``  N>>>TITLE[ (note)]``: TITLE as printed (``DESCRIPTION - LEN aa``, cut by
    FASTA at TITLE_MAX bytes), the length and unit it states (None when the title is full: a
    cut one may have lost them, and the block's summary line gives them)."""

    __slots__ = ("number", "title", "text", "length", "unit", "note", "fragments")

    def __init__(self, number, title, text, length, unit, note, fragments):
        self.number, self.title, self.text, self.length = number, title, text, length
        self.unit, self.note, self.fragments = unit, note, fragments


def query_line(line: bytes) -> QueryLine | None:
    """The query line ``line`` is, or None."""
    m = _QSTART.match(line)
    if m is not None:
        end = m.end("fragments") if m.group("fragments") is not None else m.end(4)
        title = line[m.start(2):end]
        if len(title) < TITLE_MAX:
            return QueryLine(m.group(1), title, m.group(2), int(m.group(3)), m.group(4), m.group(5),
                          m.group("fragments"))
    elif len(line) < TITLE_MAX or b">>>" not in line[:24]:
        return None
    c = _QANY.match(line)
    if c is None or len(c.group(2)) != TITLE_MAX:
        return None
    note = c.group(3).strip()[1:-1] if c.group(3) else None
    return QueryLine(c.group(1), c.group(2), c.group(2), None, None, note, None)


def cut_description(title: bytes, length: int, unit: bytes, base: str) -> str | None:
    """The description in a query title that FASTA cut at TITLE_MAX bytes: FASTA appends
    `` - LEN aa`` (`` - LEN aa in K fragments`` for a peptide mixture) to the title it read (at most
    510 bytes) and cuts the whole, so such a title ends in a piece of that suffix (`` -``, `` - 13``,
    or a lone space), which is not description.  The longest end of ``title`` with the suffix's
    shape is taken away if its length (``LEN``) agrees with ``length`` (for a peptide mixture, whose
    block states the residues and commas, if not larger); what remains after the id is the
    description, None if nothing."""
    cut = 0
    for k in range(min(len(title), 40), 0, -1):
        tail = title[-k:]
        if not tail.startswith(b" "):
            continue
        shape = _DIGITS.sub(b"#", tail)
        if not (b" - # " + unit + b" in # fragments").startswith(shape):
            continue
        number = _DIGITS.search(tail)
        if number is not None:
            printed, said = number.group(), b"%d" % length
            whole = number.end() < len(tail)
            if base in _PEPTIDE_SETS:
                if int(printed) > length:
                    continue
            elif printed != said if whole else not said.startswith(printed):
                continue
        cut = k
        break
    text = (title[:-cut] if cut else title).decode("utf-8", "replace")
    parts = text.split(None, 1)
    return (parts[1].strip() or None) if len(parts) > 1 else None


_DIGITS = re.compile(rb"\d+")
_PEPTIDE_SETS = frozenset(("fasts", "fastm", "fastf", "tfasts", "tfastm", "tfastf"))


def gi_stripped(title: bytes) -> bytes | None:
    """The name FASTA shows on the query side of an alignment for a title starting with ``gi|``, where
    it is not a piece of the query's id: FASTA drops the title up to the ``|`` after ``gi|N``, if
    another ``|`` follows, and takes the first word of the rest (mshowalign2.c); that ``|`` may lie
    past the first space (``gi|345664 gi|345664|pir||A45388 ...``: ``345664|pir||A45388``)."""
    bar = title.find(b"|", 4)
    if bar < 0 or title.find(b"|", bar + 1) < 0 or title.find(b" ", 0, bar) < 0:
        return None
    return title[bar + 1 :].split(b" ", 1)[0] or None


def new_query(r: Reader, ql: QueryLine, run: Run, query_index: int, warn) -> tuple[Query, bool]:
    """The Query of the query line ``ql`` (the line just read), with what the run's header
    says, and whether the query has no name."""
    qline = r.line_no
    text = decode_utf8(ql.text, "query description", r.source, qline, warn)
    # a FASTA header with a space after ">" has no name for FASTA: its summary line
    # (">>>, 209 aa vs ...") and alignments ("> ..") show none; the id is then the first
    # word (as for hits, and as Biopython's FASTA reader takes it), "" for an empty header
    nameless = not text or text[0].isspace()
    parts = text.split(None, 1) or [""]
    q = Query(
        query_id=parts[0],
        query_index=query_index,
        query_description=(parts[1].strip() or None) if len(parts) > 1 else None,
        query_length=ql.length,
        program=run.program,
        version=run.version,
        command=run.command,
        run_index=run.index,
        run_query_number=int(ql.number),
    )
    if ql.fragments is not None:
        q.query_fragments = int(ql.fragments)
    note = ql.note
    if note is not None:
        q.searched_strand = {b"forward-only": "+", b"reverse complement": "-"}.get(note.strip())
        if q.searched_strand is None:
            raise r.error(f"unknown query annotation ({note.decode('latin-1')})", qline)
    return q, nameless


def read_header(r: Reader, q: Query, run: Run, nameless: bool, warn, ql: QueryLine) -> tuple[tuple | None, bool]:
    """The header of query ``q``: library, statistics, best-scores table, up to its
    summary line (``>>>ID, LEN aa vs LIB library``).  Returns the table (columns, -m 9
    columns or None, rows, line of the first row, any ``+-`` row) or None, and True
    if the query ended there, without alignments (``>>><<<``; in a run without it the
    next query's line or the end of the run, left unread)."""
    source = r.source
    table: tuple | None = None
    while True:
        line = r.readline()
        if line is None:
            raise r.error(f"input ends inside query {q.query_id!r} (no '>>><<<' end of query; truncated?)", r.line_no)
        if line.startswith(b">>><<<"):
            return table, True
        if ends_unterminated(run, line):
            r.unread()  # the next query's line, or the end of the run
            return table, True
        if line.startswith(b">>>///"):
            raise r.error(f"'>>>///' before the end of query {q.query_id!r} ('>>><<<' missing)", r.line_no)
        if line.startswith(b">>>"):
            sm = _QSUMMARY.match(line)
            if sm is None:
                raise r.error(f"malformed query summary line: {line[:80]!r}", r.line_no)
            sid = decode_utf8(sm.group(1), "query id", source, r.line_no, warn)
            if sid != q.query_id and sid != q.query_id + "-" and not (nameless and sid in ("", "-")):
                # "ID-": -i (reverse complement); "": a query without a name (see new_query)
                raise r.error(f"query summary names {sid!r} but the query is {q.query_id!r}", r.line_no)
            if q.library is None:
                q.library = decode_utf8(sm.group(4), "library name", source, r.line_no, warn)
            said = int(sm.group(2))
            if ql.length is None:  # a cut title: this line gives the length
                q.query_length, ql.unit = said, sm.group(3)
                return table, False
            # fastf/fasts/fastm count the commas between a query's peptides on this line (the query
            # line's length: q.query_length)
            expected = ql.length + (q.query_fragments - 1 if q.query_fragments else 0)
            if said != expected and warn is not None:  # the query line's length is the one kept
                warn(f"{source}:{r.line_no}: the query summary says {said} {sm.group(3).decode()} but the "
                     f"query line says {q.query_length}; the query line's length is kept")
            return table, False
        if query_line(line) is not None:
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
            q.library = decode_utf8(lib, "library name", source, r.line_no, warn) or None
            sub = _LIB_SUBRANGE.search(lib)
            if sub is not None:  # FASTA cuts every library sequence to it (comp_lib9.c, opt_text)
                start, end = (int(sub.group(1)), sub.group(2)) if sub.group(1) else (1, sub.group(3))
                q.library_subrange = {"start": start, "end": int(end)} if end else {"start": start}
        elif q.library_residues is None and (rm := _RESIDUES.search(line)) is not None:
            q.library_residues, q.library_sequences = int(rm.group(1)), int(rm.group(2))
        elif line.startswith(b"Statistics:"):
            q.statistics = decode_utf8(line[11:].strip(), "statistics", source, r.line_no, warn) or None
            if ql.length is None and (n0 := _STATS_N0.search(line)) is not None:
                q.query_length = int(n0.group(1))  # a cut title without hits: the statistics' query length
        elif line.startswith(b"Algorithm:"):
            q.algorithm = decode_utf8(line[10:].strip(), "algorithm", source, r.line_no, warn) or None
        elif line[:1] == b" " and _HIST_HEAD.fullmatch(line) is not None:
            q.histogram = _read_histogram(r)


def _read_histogram(r: Reader) -> list[dict]:
    """The rows of a ``-H`` histogram (its head line just read), up to its last row (``>N``):
    ``{score, observed, expected}`` as printed (``expected`` absent where FASTA prints none), the
    first and last rows with ``tail`` ``"<"``/``">"``; any other line before the last row is damage."""
    bins: list[dict] = []
    while True:
        line = r.readline()
        m = None if line is None else _HIST_ROW.match(line)
        if m is None or (m.group(1) == b"<") != (not bins):
            raise r.error(f"malformed histogram row: {(line or b'')[:60]!r}", r.line_no)
        row: dict[str, int | str] = {"score": int(m.group(2)), "observed": int(m.group(3))}
        if m.group(4) is not None:
            row["expected"] = int(m.group(4))
        if m.group(1) != b" ":
            row["tail"] = m.group(1).decode()
        bins.append(row)
        if m.group(1) == b">":
            return bins


def read_params(r: Reader, q: Query, run: Run, warn) -> None:
    """The ``; pg_*``/``; mp_*`` lines after the summary line: ``q.params``, and the
    program and version they name (and, from ``pg_argv``, whether the run ends its
    queries without ``>>><<<``)."""
    params: dict | None = None
    cache = _PARAM_LINES
    while r.peek(1) == b";":
        line = r.readline() or b""  # a line: peek saw one (`or`: a jump, for the type checker)
        pairs = cache.get(line)
        if pairs is None:
            km = _KV.match(line)
            if km is None:
                raise r.error(f"malformed '; key: value' line: {line[:60]!r}", r.line_no)
            key = km.group(1).decode("latin-1")
            raw = km.group(2)
            value = decode_utf8(raw, key, r.source, r.line_no, warn)
            if key == "pg_argv" and "; pg_name_alg: " in value:
                value, alg = value.split("; pg_name_alg: ", 1)
                pairs = (("pg_name_alg", typed_value(alg)), (key, typed_value(value)))
            else:
                pairs = ((key, typed_value(value)),)
            if raw.isascii():  # a line that warned is not cached: each time it warns again
                if len(cache) >= 512:
                    cache.clear()
                cache[line] = pairs
        if params is None:
            params = {}
        for key, value in pairs:
            params[key] = value
    q.params = params
    if params:
        if isinstance(params.get("pg_name"), str):
            q.program = params["pg_name"]
        if "pg_ver" in params:
            q.version = str(params["pg_ver"])
        argv = params.get("pg_argv")
        if not run.unterminated and isinstance(argv, str) and UNTERMINATED_OPTION.search(argv):
            run.unterminated = True  # the same signal when the "# command" line is missing


def ends_unterminated(run: Run, line: bytes) -> bool:
    """True if ``line`` ends a query of a run without ``>>><<<`` (-m F10, -m 9i): it is
    the next query's line or the end of the run."""
    return run.unterminated and (line.startswith(b">>>///") or query_line(line) is not None)
