"""The reader of FASTA's BLAST-tabular output (``-m 8``, ``8C``, ``8CB``, ``8CC``, ``8CBL``; alone or
with ``-m 10``), line by line: comments, rows, the alignments printed after a query's rows.

See the package docstring (:mod:`ingest.parsers.tabular`) for the layout and the field table.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from io import BufferedIOBase

from ingest.errors import ParseError
from ingest.model import Hit, Hsp, Query
from ingest.parsers.pasta.reader import MAX_LINE
from ingest.parsers.pasta.spool import SPILL_HITS, HitSpool
from ingest.parsers.tabular import beside

__all__ = ["read", "buffered", "MAX_LINE"]

# "# SSEARCH 36.3.8i Nov, 2022": the program in capitals, its version
_VERSION = re.compile(r"# ([A-Z][A-Z0-9_]*) (\d+\.\S.*)")
_PROCESSED = re.compile(r"# ([A-Z][A-Z0-9_]*) processed (\d+) quer(?:y|ies)")
_HITS_FOUND = re.compile(r"# (\d+) hits? found")
# "# Query: ID DESCRIPTION - 209 aa" (FASTA prints "aa" for a fastx query of nt: the unit is not read)
_QUERY = re.compile(r"# Query: (\S*)(?: (.*))?")
# the title's end (absent where FASTA cut a long title); "in K fragments": a peptide mixture (fasts36 ...)
_LENGTH = re.compile(r"(.*?) ?- (\d+) (aa|nt)(?: in (\d+) fragments)?")
_INT = re.compile(rb"\d+")
_FLOAT = re.compile(rb"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf)")
_PERCENT = re.compile(rb"\d+(?:\.(\d+))?")
_CODE = re.compile(rb"[!-~]+")  # an encoded alignment (BTOP, CIGAR, FASTA's code): printable, no blank

#: the sequence types of the programs that do not search like with like as their "# Query:" unit says (fastx:
#: "aa" for DNA) or whose query is a peptide mixture; the others' are the unit's
_TYPES = {"fastx": ("dna", "protein"), "fasty": ("dna", "protein"), "tfastx": ("protein", "dna"),
          "tfasty": ("protein", "dna"), "tfasts": ("protein", "dna"), "tfastf": ("protein", "dna"),
          "tfastm": ("protein", "dna"), "fasts": ("protein", "protein"), "fastm": ("protein", "protein"),
          "fastf": ("protein", "protein")}
_NO_STATISTICS = re.compile(r"(?:^|\s)-z\s*(-?\d+)")  # the last -z of a command line; -1: no statistics
_FIELDS = ("query id", "query length", "subject id", "subject length", "% identity", "alignment length",
           "mismatches", "gap opens", "q. start", "q. end", "s. start", "s. end", "evalue", "bit score")


def buffered(handle: BufferedIOBase) -> BufferedIOBase:
    """``handle``, buffered if it is a raw stream: its ``readline`` would read a byte at a time (the
    loader's look at a large file's first MiB gives one)."""
    return io.BufferedReader(handle, 1 << 20) if isinstance(handle, io.RawIOBase) else handle


def _shown(raw: bytes) -> str:
    """``raw`` as it reads, quoted, for a message."""
    return repr(raw.decode("utf-8", errors="replace"))


def _program_base(program: str) -> str:
    """"ssearch36" -> "ssearch", "/usr/bin/tfastx36_t" -> "tfastx"."""
    name = program.rsplit("/", 1)[-1]
    return re.sub(r"36.*$", "", name)


class _Hits:
    """The hits of one query as their rows come: each row an Hsp; consecutive rows of one library
    sequence and strand one Hit, but where a row scores higher than the row before (FASTA lists a
    sequence's alternate alignments after its first, each scoring no more than the one before: a
    higher score is the next hit, another piece of a long sequence), and but for the rows without a
    library id (sequences FASTA gives no name: one hit each); ``rule`` "sequence" leaves the scores
    and names aside, "row" makes each row a hit.  Held in a list, past ``spill`` hits in a
    :class:`HitSpool` of their dicts."""

    def __init__(self, dicts: bool, spill: int | None, rule: str = "score"):
        self.dicts, self.spill, self.rule = dicts, spill, rule
        self.done: list = []
        self.spool: HitSpool | None = None
        self.last: Hit | None = None
        self.last_key = None
        self.last_score: tuple = ()
        self.count = 0  # hits, the last included
        self.sequences = 0  # hits by the "sequence" rule
        self.rows = 0

    def add(self, hit_id: str, key, hit_length: int | None, hsp: Hsp, score: tuple) -> None:
        """One row: ``key`` its library sequence and strands, ``score`` its (bits, E()) as printed."""
        self.rows += 1
        last = self.last
        same = last is not None and key == self.last_key
        if not same:
            self.sequences += 1
        prev, self.last_score = self.last_score, score
        if same and last is not None and self.rule != "row" and (self.rule == "sequence" or hit_id and not (
                score[0] > prev[0] or score[1] < prev[1])):
            last.hsps.append(hsp)
            return
        self._close_last()
        self.count += 1
        self.last = Hit(hit_id=hit_id, rank=self.count, hit_length=hit_length, hsps=[hsp])
        self.last_key = key

    def _close_last(self) -> None:
        if self.last is None:
            return
        self.done.append(self.last.to_dict() if self.dicts else self.last)
        self.last = None
        if self.spill is not None and len(self.done) >= self.spill:
            if self.spool is None:
                self.spool = HitSpool()
            self.spool.extend(self.done)
            self.done = []

    def finish(self):
        self._close_last()
        if self.spool is None:
            return self.done
        if self.done:
            self.spool.extend(self.done)
            self.done = []
        return self.spool

    def regrouped(self, rule: str):
        """The same rows, grouped by ``rule`` ("sequence" or "row") instead."""
        hits = self.finish()
        out = _Hits(self.dicts, self.spill, rule)
        for hit in hits:
            hit_id = hit["hit_id"] if self.dicts else hit.hit_id
            length = hit.get("hit_length") if self.dicts else hit.hit_length
            for hsp in (hit["hsps"] if self.dicts else hit.hsps):
                hsp = Hsp(**hsp) if self.dicts else hsp
                out.add(hit_id, (hit_id, hsp.query_strand == "-", hsp.hit_strand == "-"), length, hsp, ())
        return out.finish()


class _State:
    """What the reader knows of the file so far: the run and the query under way."""

    def __init__(self, source: str, dicts: bool, spill: int | None, warn):
        self.source, self.dicts, self.spill, self.warn = source, dicts, spill, warn
        self.commented = False  # comment lines seen (-m 8C): queries start at "# Query:"
        self.run_index = 0
        self.run_queries = 0  # queries of the run under way
        self.command: str | None = None
        self.program: str | None = None
        self.version: str | None = None
        self.kind: str | None = None  # "ssearch", "fastx", ...: the command's program, else the version line's
        self.query_index = 0
        self.query: Query | None = None
        self.expected: int | None = None  # "# N hits found"
        self.expected_line = 0
        self.nameless = False  # the query under way has no name (its rows' query id is empty)
        self.hits: _Hits | None = None
        self.columns = 0  # fields of a row, once one is read
        self.alignments = False  # inside the alignments after a query's rows
        self.warned_alignments = False
        self.warned_statistics = False
        self.printed_length: int | None = None  # the query's length as printed (# Query:, or the L column)
        self.ended = True  # the run ended ("# ... processed N queries"), or none began
        self.no_statistics = False  # the run's command has -z -1
        self.section: dict | None = None  # the query's -m 10 part (-m 8CB -m 10), read by beside.read_section

    def error(self, line: int, reason: str) -> ParseError:
        return ParseError(reason, source=self.source, line=line)

    # -------------------------------------------------------------- queries
    def start_query(self, line: int, query_id: str, description: str | None, length: int | None,
                    unit: str | None = None, fragments: int | None = None) -> None:
        self.query_index += 1
        self.run_queries += 1
        qtype = ltype = None
        if self.kind is not None:
            # the programs that search like with like print the query's unit right; fastx36 prints "aa"
            # for its DNA query: the types of the others are their program's
            same = {"aa": "protein", "nt": "dna"}.get(unit or "")
            qtype, ltype = _TYPES.get(self.kind, (same, same))
        # fasts/fastm/fastf (and tfast*): "- 39 aa in 6 fragments"; the L column counts the commas
        # between the peptides too (44), as -m 10's summary line
        self.printed_length = length + fragments - 1 if length is not None and fragments else length
        self.query = Query(query_id=query_id, query_index=self.query_index, query_description=description or None,
                           query_length=length, query_fragments=fragments, query_type=qtype, library_type=ltype,
                           program=self.program, version=self.version, command=self.command,
                           run_index=self.run_index if self.commented else None)
        self.expected = None
        self.hits = _Hits(self.dicts, self.spill)
        self.alignments = False

    def end_query(self, line: int):
        """The query under way, finished (its count of hits checked), or None."""
        q, hits = self.query, self.hits
        if q is None or hits is None:  # (set together by start_query)
            return None
        self.query = self.hits = None
        self.alignments = False
        n = self.expected
        if n is None or hits.count == n:
            found = hits.finish()
        elif hits.sequences == n:  # an alternate alignment scoring higher than the one before it
            found = hits.regrouped("sequence")
        elif hits.rows == n:
            found = hits.regrouped("row")
        else:
            raise self.error(self.expected_line, f"query {q.query_id!r}: '# {n} hits found' but its {hits.rows} "
                             f"rows (to line {line - 1}) are {hits.count} hits ({hits.sequences} runs of one "
                             "library sequence and strand)")
        m10, self.section = self.section, None
        if m10 is None:
            return q, found
        for key in ("query_length", "query_type", "library_type", "library", "program", "version", "params"):
            if getattr(q, key) is None:  # what the -m 10 part says and the comments did not
                setattr(q, key, m10.get(key))
        return q, beside.joined(found, m10, self.dicts, self.spill, self.source)

    # -------------------------------------------------------------- comments
    def comment(self, line: int, text: str):
        """Read a comment line; the query it ends, if any."""
        m = _VERSION.fullmatch(text)
        if m is not None:  # each query's comments begin so
            self.commented = True
            done = self.end_query(line)
            if self.ended:  # a run without its command line
                self._new_run(None)
            self.version = m.group(2)
            self.kind = _program_base(self.program) if self.program else m.group(1).lower()
            return done
        m = _QUERY.fullmatch(text)
        if m is not None:
            if not self.commented or self.query is not None:
                raise self.error(line, "'# Query:' without the '# PROGRAM VERSION' line before it")
            rest, length, unit, fragments = m.group(2) or "", None, None, None
            cut = _LENGTH.fullmatch(rest)
            if cut is not None:
                rest, length, unit = cut.group(1), int(cut.group(2)), cut.group(3)
                fragments = int(cut.group(4)) if cut.group(4) else None
            query_id = m.group(1)
            self.nameless = not query_id  # a FASTA header with a space after ">": its rows show no id;
            if self.nameless:  # the id is the first word, as the -m 10 parser (and Biopython) take it
                query_id, _, rest = rest.strip().partition(" ")
            self.start_query(line, query_id, rest.strip(), length, unit, fragments)
            return None
        if self.query is not None and self.hits is not None and not self.hits.rows:
            if text.startswith("# Database: ") and self.query.library is None:
                self.query.library = text[len("# Database: "):]
                return None
            if text.startswith("# Fields: "):
                self._fields(line, text[len("# Fields: "):])
                return None
            m = _HITS_FOUND.fullmatch(text)
            if m is not None and self.expected is None:
                self.expected, self.expected_line = int(m.group(1)), line
                return None
        m = _PROCESSED.fullmatch(text)
        if m is not None and not self.ended:
            done = self.end_query(line)
            if int(m.group(2)) != self.run_queries:
                raise self.error(line, f"'{text}' but the run holds {self.run_queries} queries")
            self.ended = True
            return done
        known = (m is not None or text.startswith(("# Query:", "# Database:", "# Fields:"))
                 or _HITS_FOUND.fullmatch(text) is not None)
        if self.ended and self.query is None and not known:  # the command line, first of a run
            self._new_run(text[1:].strip())
            return None
        raise self.error(line, f"unexpected comment line here: {text[:80]!r}")

    def _warn(self, line: int, message: str) -> None:
        if self.warn is not None:
            self.warn(f"{self.source}:{line}: {message}")

    def _new_run(self, command: str | None) -> None:
        z = _NO_STATISTICS.findall(command or "")
        self.no_statistics = bool(z) and z[-1] == "-1"  # -z -1: FASTA prints E() and bits of no statistics
        self.run_index += 1
        self.run_queries = 0
        self.ended = False
        self.command = command or None
        self.program = command.split()[0] if command else None
        self.version = None
        self.kind = None

    def _fields(self, line: int, names: str) -> None:
        got = tuple(n.strip() for n in names.split(","))
        if got[: len(_FIELDS)] != _FIELDS or len(got) > len(_FIELDS) + 1:
            raise self.error(line, f"unexpected '# Fields:' line: {names[:120]!r}")

    # -------------------------------------------------------------- rows
    def row(self, line: int, raw: bytes):
        """Read a table row; the query it ends (the query id changed, in a file without comments), if any."""
        fields = raw.split(b"\t")
        n = len(fields)
        if n not in (12, 13, 14, 15):
            raise self.error(line, f"a table row has {n} tab-separated fields, not 12 to 15 (-m 8 columns, "
                             "the lengths with L, an encoded alignment with B or C)")
        if self.columns and n != self.columns:
            raise self.error(line, f"a table row has {n} fields; the rows before have {self.columns}")
        self.columns = n
        lengths = n >= 14
        qid = self._text(line, fields[0], "the query id")
        done = None
        if self.commented:
            if self.query is None:
                raise self.error(line, "a table row outside a query ('# Query:' line)")
            if qid != self.query.query_id and not (self.nameless and qid == ""):
                raise self.error(line, f"a row of query {qid!r} under '# Query: {self.query.query_id}'")
        elif self.query is None or qid != self.query.query_id:
            done = self.end_query(line)
            self.start_query(line, qid, None, None)
        if self.alignments:
            raise self.error(line, "a table row of a query after its alignments")
        q, hits = self.query, self.hits
        if q is None or hits is None:  # cannot be: a query is under way (above); for the type checker
            raise self.error(line, "a table row outside a query")
        at = 1
        qlen = slen = None
        if lengths:
            qlen = self._int(line, fields[1], "query length", 1)
            at = 2
            if self.printed_length is None:
                self.printed_length = q.query_length = qlen
            elif qlen != self.printed_length:
                raise self.error(line, f"query length {qlen} but its '# Query:' line says {self.printed_length}")
        sid = self._text(line, fields[at], "the subject id")
        if lengths:
            slen = self._int(line, fields[at + 1], "subject length", 1)
            at += 1
        pident, alen, mism, gaps, qs, qe, ss, se, evalue, bits = fields[at + 1: at + 11]
        identity = self._percent(line, pident)
        overlap = self._int(line, alen, "alignment length", 1)
        mismatches = self._int(line, mism, "mismatches", 0)
        gap_opens = self._int(line, gaps, "gap opens", 0)
        if mismatches > overlap:
            raise self.error(line, f"{mismatches} mismatches in an alignment of {overlap}")
        score = (self._float(line, bits, "bit score"), self._float(line, evalue, "evalue"))
        if score[1] < 0:
            raise self.error(line, f"evalue {_shown(evalue)} is negative")
        hsp = Hsp(identity=identity, overlap=overlap)
        if not self.no_statistics:
            hsp.bits, hsp.evalue = score
        elif not self.warned_statistics:
            self.warned_statistics = True
            self._warn(line, "the run's command has -z -1 (no statistics): the E() and bit-score columns FASTA "
                             "prints anyway are left out")
        q_dna = q.query_type == "dna" if q.query_type else None
        h_dna = q.library_type == "dna" if q.library_type else None
        hsp.query_start, hsp.query_end, hsp.query_strand = self._side(line, qs, qe, q_dna, "q.")
        hsp.hit_start, hsp.hit_end, hsp.hit_strand = self._side(line, ss, se, h_dna, "s.")
        extra: dict[str, object] = {"mismatches": mismatches, "gap_opens": gap_opens}
        if n in (13, 15):
            code = fields[-1]
            if not _CODE.fullmatch(code):
                raise self.error(line, f"encoded alignment {_shown(code[:40])} is not one word")
            extra["al_code"] = code.decode("ascii")
        hsp.extra = extra
        key = (sid, hsp.query_strand == "-", hsp.hit_strand == "-")  # a library sequence's strand
        hits.add(sid, key, slen, hsp, score)
        return done

    def _side(self, line: int, a: bytes, b: bytes, dna: bool | None, what: str):
        start = self._int(line, a, what + " start", 1)
        end = self._int(line, b, what + " end", 1)
        if start <= end:
            return start, end, ("+" if dna else None)
        if dna is False:
            raise self.error(line, f"{what} start {start} > {what} end {end} on a protein side")
        return end, start, "-"

    def _text(self, line: int, raw: bytes, what: str) -> str:
        if raw != raw.strip():  # empty: a sequence FASTA gives no name (a space after ">")
            raise self.error(line, f"{what} has blanks: {_shown(raw[:40])}")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if self.warn is not None:
                self.warn(f"{self.source}:{line}: non-UTF-8 bytes in {what} replaced by U+FFFD")
            return raw.decode("utf-8", errors="replace")

    def _int(self, line: int, raw: bytes, what: str, least: int) -> int:
        if not _INT.fullmatch(raw) or int(raw) < least:
            raise self.error(line, f"{what} {_shown(raw[:40])} is not a whole number of at least {least}")
        return int(raw)

    def _float(self, line: int, raw: bytes, what: str) -> float:
        if not _FLOAT.fullmatch(raw):
            raise self.error(line, f"{what} {_shown(raw[:40])} is not a number")
        return float(raw)

    def _percent(self, line: int, raw: bytes) -> float:
        m = _PERCENT.fullmatch(raw)
        if m is None or float(raw) > 100:
            raise self.error(line, f"% identity {_shown(raw[:40])} is not a percentage (0 to 100)")
        return round(float(raw) / 100, len(m.group(1) or b"") + 2)  # 27.69 -> 0.2769, as printed

    # -------------------------------------------------------------- alignments
    def other(self, line: int, raw: bytes) -> None:
        """A line that is neither a comment nor a row: the ``-m 0`` alignments FASTA prints after a
        query's rows with ``-d N`` (from ``>>ID``), skipped (its ``-m 10`` part is :mod:`.beside`'s)."""
        if self.alignments:
            return
        if self.query is None or not raw.startswith(b">>"):
            raise self.error(line, f"not a table row, a comment or alignments: {_shown(raw[:60])}")
        self.alignments = True
        if not self.warned_alignments and self.warn is not None:
            self.warned_alignments = True
            self.warn(f"{self.source}:{line}: the -m 0 alignments printed after the table rows (-d) are not "
                      "read: each hit's values are its rows'")


def read(handle: BufferedIOBase, source: str, *, dicts: bool, warn: Callable[[str], None] | None = None,
         spill: int | None = SPILL_HITS) -> Iterator[tuple[Query, list | HitSpool]]:
    """Yield ``(query, hits)`` for each query of the file, in order: ``hits`` a list (of Hit objects,
    or of their dicts with ``dicts``) or a :class:`HitSpool` past ``spill`` hits.  Raises ParseError
    (``file:line: reason``) on anything that is not FASTA's tabular output, after the queries before."""
    st = _State(source, dicts, spill, warn)
    number = 0
    lines = beside.Lines(buffered(handle), MAX_LINE)
    while True:
        raw = lines.next()
        if not raw:
            break
        number = lines.number
        if len(raw) > MAX_LINE:
            raise st.error(number, f"line longer than {MAX_LINE} bytes")
        raw = raw.rstrip(b"\r\n")
        if not raw:
            continue
        if raw[:1] == b"#":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                if warn is not None:
                    warn(f"{source}:{number}: non-UTF-8 bytes in a comment line replaced by U+FFFD")
                text = raw.decode("utf-8", errors="replace")
            done = st.comment(number, text)
        elif b"\t" in raw and (not st.alignments or raw.count(b"\t") >= 11):
            done = st.row(number, raw)
        else:
            if b"\0" in raw:
                raise st.error(number, "a NUL byte: not text")
            if (raw[:3] == b">>>" and raw[3:6] not in (b"<<<", b"///") and st.query is not None
                    and not st.alignments):  # the query's -m 10 part (-m 8CB -m 10): read, joined to the rows
                st.alignments = True
                if st.nameless:  # FASTA names its query side after the query file: not -m 10's layout
                    st._warn(number, f"the -m 10 alignments of query {st.query.query_id!r} (a sequence FASTA "
                                     "gives no name) are not read: each hit's values are its rows'")
                    continue
                st.section = beside.read_section(lines, raw, st.query, st.command, st.nameless, source, warn,
                                                 spill if dicts else None)
                continue
            st.other(number, raw)
            continue
        if done is not None:
            yield done
    if number == 0:
        raise st.error(1, "empty input: no table rows or comments")
    if st.query_index == 0:
        raise st.error(number, "no query: no '# Query:' line and no table row")
    done = st.end_query(number)
    if done is not None:
        yield done
    if st.commented and not st.ended:
        raise st.error(number, "input ends before its '# PROGRAM processed N queries' line (truncated?)")
