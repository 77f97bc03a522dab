"""The best-scores table of a query: its rows checked against the aligned hits (and
their values added to them: ``E2()``, the ``-m 9`` columns, the length of the whole
sequence), the other rows made table-only hits."""

from __future__ import annotations

from typing import Literal, overload

from ingest.errors import ParseError
from ingest.model import Hit, Hsp, Query
from ingest.parsers.pasta.common import INT_PATTERN, decode_utf8, fasta_number, impossible, orient
from ingest.parsers.pasta.spool import Rows

# identity, similarity and alignment length: -m 9 columns (after the tab), and with
# -m 9i / 9I plain columns of the best-scores table
_TABLE_ALIGN_COLS: dict[str, tuple[str, type]] = {
    "%_id": ("identity", float),
    "%_sim": ("similarity", float),
    "alen": ("overlap", int),
}
# best-scores table column -> (Hsp attribute, type)
_TABLE_COLS: dict[str, tuple[str, type]] = {
    "s-w": ("opt_score", int),
    "n-w": ("opt_score", int),
    "opt": ("opt_score", int),
    "initn": ("initn_score", int),
    "init1": ("init1_score", int),
    "z-sc": ("z_score", float),
    "bits": ("bits", float),
    "E2()": ("evalue2", float),
    **_TABLE_ALIGN_COLS,
}


#: warnings of aligned hits' rows a spilled block holds until its end (Table._later)
HELD_WARNINGS = 10_000


class Table:
    """The best-scores table of query ``q`` (its types set): ``table`` is (columns, ``-m 9``
    columns or None, rows (a list or a :class:`~ingest.parsers.pasta.spool.Rows`), line number
    of the first row, whether a row starts with ``+-``; at least one row), read in one pass.

    :meth:`aligned` checks each chunk of aligned hits, in order, against its rows (the row's id
    names the hit's sequence) and completes them from the table (the length of a whole sequence,
    ``E2()``, the ``-m 9`` columns); :meth:`finish` raises what those checks found, then
    :meth:`table_only` gives the other rows as table-only hits, in chunks.  Given all the hits in
    one chunk, it reports exactly what one pass over the whole table would; given them in several
    (a block spilled, see spool.py), the same errors, chosen in the same order: a table starting
    with a ``+-`` row, then more alignments than rows, then the first row naming another sequence,
    then the first bad row of an aligned hit; and the warnings of those rows (a description that
    is not UTF-8) are held until :meth:`finish`, so that they come after every alignment's, and
    not at all when the block fails before its rows are read (held up to :data:`HELD_WARNINGS`:
    past that they are said at once).  With ``dicts`` the aligned hits are dicts
    (``Hit.to_dict()``): then the table must keep them (:func:`table_keeps_hits`)."""

    __slots__ = ("r", "q", "cols", "cols9", "rows", "row1", "general", "e2", "warn", "dicts", "n_al", "taken",
                 "groups", "plus_first", "stopped", "id_error", "row_error", "warnings", "unaligned")

    def __init__(self, r, q: Query, table: tuple, warn, dicts: bool = False):
        cols, cols9, rows, row1, plus = table
        self.r, self.q, self.cols, self.cols9, self.row1, self.warn, self.dicts = r, q, cols, cols9, row1, warn, dicts
        self.rows = rows if isinstance(rows, Rows) else Rows(rows)
        # -m 9 columns and "+-" rows (more alignments of the sequence of the row above): _general
        self.general = cols9 is not None or plus
        self.e2 = "E2()" in cols  # -z 21..26: the second E() is only in the table
        self.n_al = 0  # aligned hits given
        self.taken = 0  # rows taken
        self.unaligned: list[tuple[bytes, int]] = []  # rows passed over without an alignment (_pair), their lines
        self.groups = 0  # groups of rows taken (general)
        first = self.rows.peek()
        # a first "+-" row (more alignments of no sequence) fails the table before anything
        self.plus_first = self.general and first is not None and first.startswith(b"+-")
        self.stopped = self.plus_first
        self.id_error: ParseError | None = None
        self.row_error: ParseError | None = None
        self.warnings: list[str] | None = []  # the aligned rows' warnings, held (None: said at once)

    def _later(self, message: str) -> None:
        """A warning of an aligned hit's row: held until finish() (see the class)."""
        held = self.warnings
        if held is None:
            self.warn(message)
            return
        held.append(message)
        if len(held) >= HELD_WARNINGS:  # too many to hold: those held are said, the next at once
            self.warnings = None
            for message in held:
                self.warn(message)

    def aligned(self, hits: list, ids: list[bytes]) -> None:
        """Check and complete the next ``len(hits)`` aligned hits (their ids as bytes: ``ids``)."""
        k0 = self.n_al
        self.n_al += len(hits)
        if self.stopped or not hits:
            return
        if self.general:
            self._aligned_groups(hits, ids, k0)
            return
        if len(hits) > len(self.rows) - self.taken:  # more alignments than rows: finish() says so
            self.stopped = True
            return
        r, q = self.r, self.q
        line0 = self.row1 + self.taken
        rows = self.rows.take(len(hits))
        self.taken += len(rows)
        # rows of aligned hits only have to name the same sequence (the alignment
        # carries all their values); the other rows become table-only hits.  Usually
        # each row starts with its hit's id (ids have no spaces: then the row's first
        # word contains the id, which _check_row_ids accepts)
        lines = None  # the rows' lines, when not line0, line0 + 1, ... (_pair)
        if not all(map(bytes.startswith, rows, ids)):
            paired = self._pair(ids, [_frame_of(h, self.dicts) for h in hits], rows, line0)
            if paired is None:
                row_ids = [raw.lstrip().partition(b" ")[0] for raw in rows]
                if self._ids_differ(ids, row_ids, [line0 + i for i in range(len(rows))], k0):
                    return
            else:
                rows, lines = paired
        _whole_lengths(hits, rows, self.dicts)
        if self.e2 and self.row_error is None:
            qtype, ltype = q.query_type, q.library_type
            warn = None if self.warn is None else self._later
            try:
                for i, hit in enumerate(hits):
                    x = hit.hsps[0]
                    if x.evalue2 is None:
                        x.evalue2 = _parse_row(rows[i], line0 + i if lines is None else lines[i], self.cols, None,
                                               qtype, ltype, r.source, warn)[1].evalue2
            except ParseError as exc:
                self.row_error = exc

    def _pair(self, ids: list[bytes], frames: list, rows: list[bytes], line0: int):
        """The rows of the alignments ``ids`` when FASTA printed no alignment for some rows among
        them, each a row it may leave so (:meth:`_unalignable`: tfasts36 and tfastm36 list rows of
        empty alignments past ``-E``'s bound and align some of them), a row naming the hit's sequence and, when
        it shows one (``[2]``), the frame of the hit's first alignment (``frames``): (the rows, in the
        order of ``ids``, the
        line of the first); the rows passed over join :attr:`unaligned` (table-only hits), and
        more rows are taken as needed.  None when a row that is not empty names another sequence
        (the error _check_row_ids gives), or the table ends first."""
        pool, out, lines, unaligned = list(rows), [], [], []
        i = j = 0
        while i < len(ids):
            if j == len(pool):
                more = self.rows.take(1)
                if not more:
                    return None
                pool += more
            raw, line = pool[j], line0 + j
            row_id = raw.lstrip().partition(b" ")[0]
            if row_id and (row_id.find(ids[i]) >= 0 or ids[i].find(row_id) >= 0) \
                    and (frames[i] is None or _row_frame(raw) in (None, frames[i])):
                out.append(raw)
                lines.append(line)
                i += 1
            elif self._unalignable(raw, line):
                unaligned.append((raw, line))
            else:
                return None
            j += 1
        self.taken += j - len(rows)
        self.unaligned += unaligned
        return out, lines

    def _unalignable(self, raw: bytes, line: int) -> bool:
        """Whether FASTA may list the row without an alignment: its score columns (opt, s-w, n-w,
        initn, init1: those it has) are all 0, or its E() is 1 or more (no significance: tfastf36
        and fastf36 list such rows among those they align, E() up to 3e+28, and align only some)."""
        try:
            hsp = _parse_row(raw, line, self.cols, None, self.q.query_type, self.q.library_type, self.r.source,
                             None)[1]
        except ParseError:
            return False
        scores = [v for v in (hsp.opt_score, hsp.initn_score, hsp.init1_score) if v is not None]
        return bool(scores) and not any(scores) or (hsp.evalue is not None and hsp.evalue >= 1.0)

    def _ids_differ(self, ids: list[bytes], row_ids: list[bytes], lines: list[int], k0: int) -> bool:
        try:
            _check_row_ids(self.r, self.q, ids, row_ids, lines, k0)
        except ParseError as exc:
            self.id_error = exc
            self.stopped = True
            return True
        return False

    def _take_groups(self, n: int) -> list[list[tuple[bytes, int]]]:
        """The next ``n`` groups of rows (fewer after the last): a row and the ``+-`` rows
        after it, each row with its line number."""
        rows = self.rows
        groups: list[list[tuple[bytes, int]]] = []
        line = self.row1 + self.taken
        while len(groups) < n:
            chunk = rows.take(n - len(groups))  # at least one group each, more with "+-" rows
            if not chunk:
                break
            for raw in chunk:
                if groups and raw.startswith(b"+-"):
                    groups[-1].append((raw, line))
                else:
                    groups.append([(raw, line)])
                line += 1
        while groups and (after := rows.peek()) is not None and after.startswith(b"+-"):  # the last group's
            groups[-1].append((rows.take(1)[0], line))
            line += 1
        self.taken = line - self.row1
        self.groups += len(groups)
        return groups

    def _aligned_groups(self, hits: list[Hit], ids: list[bytes], k0: int) -> None:
        """The general table (-m 9 columns after a tab, ``+-`` rows, which belong to the
        hit of the row above: for an aligned hit its ``>--`` alignments, in order)."""
        groups = self._take_groups(len(hits))
        if len(groups) < len(hits):  # more alignments than sequences: finish() says so
            self.stopped = True
            return
        row_ids = [g[0][0].lstrip().partition(b" ")[0] for g in groups]
        if row_ids != ids and self._ids_differ(ids, row_ids, [g[0][1] for g in groups], k0):
            return
        _whole_lengths(hits, [g[0][0].partition(b"\t")[0] for g in groups], self.dicts)
        if (self.cols9 is not None or self.e2) and self.row_error is None:
            # aligned hits: the alignments carry all values but E2() and the -m 9 extras
            q, cols, cols9, source = self.q, self.cols, self.cols9, self.r.source
            warn = None if self.warn is None else self._later
            try:
                for hit, g in zip(hits, groups):
                    for x, (raw, line) in zip(hit.hsps, g):
                        t = _parse_row(raw, line, cols, cols9, q.query_type, q.library_type, source, warn)[1]
                        if x.evalue2 is None:
                            x.evalue2 = t.evalue2
                        if t.extra:
                            x.extra = {**t.extra, **(x.extra or {})}
            except ParseError as exc:
                self.row_error = exc

    def finish(self) -> None:
        """After the last aligned hit: raise what the table says of them."""
        r, q, rows = self.r, self.q, self.rows
        if self.general:
            if self.plus_first:
                raise r.error("best-scores table starts with a '+-' row (more alignments of no sequence)", self.row1)
            groups = self.groups
            if self.n_al > groups:  # rows left untaken after an error: count their sequences
                while (chunk := rows.take(65536)):
                    groups += sum(1 for raw in chunk if not raw.startswith(b"+-"))
                    self.taken += len(chunk)
            if self.n_al > groups:
                raise r.error(
                    f"query {q.query_id!r} has {self.n_al} alignments but its best-scores table only {groups} "
                    f"sequences", self.row1 + len(rows) - 1)
        elif self.n_al > len(rows):
            raise r.error(
                f"query {q.query_id!r} has {self.n_al} alignments but its best-scores table only {len(rows)} rows",
                self.row1 + len(rows) - 1,
            )
        if self.id_error is not None:
            raise self.id_error
        for message in self.warnings or ():  # the rows read before any bad one
            self.warn(message)
        self.warnings = None
        if self.row_error is not None:
            raise self.row_error

    def table_only(self, chunk: int | None = None):
        """The rows after those of the aligned hits, as table-only hits (dicts with ``dicts``
        and a table that keeps the hits, else Hit objects), in lists of up to ``chunk``
        (None: one list)."""
        q, cols, cols9, source, warn = self.q, self.cols, self.cols9, self.r.source, self.warn
        qtype, ltype = q.query_type, q.library_type
        dicts = self.dicts and not self.general
        size = chunk or max(len(self.rows) - self.taken + len(self.unaligned), 1)
        rank = (self.groups if self.general else self.taken - len(self.unaligned)) + 1
        if self.unaligned:  # rows passed over among the aligned hits' (_pair): the first table-only hits
            hits = []
            for raw, line in self.unaligned:
                hit = _parse_row(raw, line, cols, None, qtype, ltype, source, warn, hit_row=True)[0]
                hit.rank = rank
                rank += 1
                hits.append(hit.to_dict() if dicts else hit)
            self.unaligned = []
            yield hits
        while True:
            hits = []
            if self.general:
                for g in self._take_groups(size):
                    hit = _parse_row(g[0][0], g[0][1], cols, cols9, qtype, ltype, source, warn, hit_row=True)[0]
                    for raw, line in g[1:]:
                        hit.hsps.append(_parse_row(raw, line, cols, cols9, qtype, ltype, source, warn)[1])
                    hit.rank = rank
                    rank += 1
                    hits.append(hit)
            else:
                line = self.row1 + self.taken
                rows = self.rows.take(size)
                self.taken += len(rows)
                for i, raw in enumerate(rows):
                    hit = _parse_row(raw, line + i, cols, None, qtype, ltype, source, warn, hit_row=True)[0]
                    hit.rank = rank
                    rank += 1
                    hits.append(hit.to_dict() if dicts else hit)
            if not hits:
                return
            yield hits


def _frame_of(hit, dicts: bool):
    """The frame of an aligned hit's first alignment, or None."""
    return (hit["hsps"][0].get("frame") if hit["hsps"] else None) if dicts else \
        (hit.hsps[0].frame if hit.hsps else None)


def _row_frame(raw: bytes):
    """The frame a best-scores row shows (``[2]`` before its scores), or None when it shows none."""
    rest = raw.rstrip()
    close = rest.rfind(b"]")
    if close < 0 or rest.rfind(b")") > close:
        return None
    return rest[rest.rfind(b"[", 0, close) + 1 : close].decode("latin-1").strip()


def table_keeps_hits(table: tuple) -> bool:
    """True if Table leaves the aligned hits as they are with this table (columns,
    -m 9 columns, rows, line, any ``+-`` row): no -m 9 columns, no E2() column, no
    ``+-`` rows."""
    cols, cols9, rows, _, plus = table
    return cols9 is None and "E2()" not in cols and not plus


def _whole_lengths(hits: list, rows: list[bytes], dicts: bool) -> None:
    """Give the aligned ``hits`` the length of their table ``rows`` (one each, without
    their -m 9 part) where it is larger than the alignment's ``; sq_len:``.

    FASTA searches a long library sequence in overlapping pieces (by default beyond
    about 150,000 nt of DNA; ``-N`` sets the size): an alignment's library side then
    shows the piece (``; sq_len:`` its length, ``; sq_offset:`` where it starts; the
    coordinates count in the whole sequence) while the table row gives the length of
    the whole sequence.  The length is the last ``(...)`` of a row (only numbers and
    a ``[f]`` frame follow it)."""
    found = [raw[raw.rfind(b"(") + 1 : raw.rfind(b")")] for raw in rows]
    try:
        table = list(map(int, found))
    except ValueError:  # a damaged row: the alignment's own length stays
        table = [int(v) if INT_PATTERN.fullmatch(v) else 0 for v in found]
    if dicts:
        if table != [h["hit_length"] for h in hits]:
            for h, n in zip(hits, table):
                if n > h["hit_length"]:
                    h["hit_length"] = n
    elif table != [h.hit_length for h in hits]:
        for h, n in zip(hits, table):
            if n > h.hit_length:
                h.hit_length = n


def _check_row_ids(r, q: Query, ids: list[bytes], row_ids: list[bytes], lines: list[int], base: int = 0) -> None:
    """Raise if a row does not name the sequence of its aligned hit (the ``base + 1``-th first)."""
    for i, (row_id, hit_id) in enumerate(zip(row_ids, ids), start=base):
        if not row_id or (row_id.find(hit_id) < 0 and hit_id.find(row_id) < 0):
            raise r.error(
                f"alignment {i + 1} of query {q.query_id!r} is for {hit_id.decode('utf-8', 'replace')!r} "
                f"but its row of the best-scores table is {row_id.decode('utf-8', 'replace')!r}",
                lines[i - base],
            )


# -m 9 table columns (after the tab) -> (Hsp attribute or extra key, type)
_TABLE9_COLS: dict[str, tuple[str, type]] = {
    **_TABLE_ALIGN_COLS,
    "sw": ("sw", int),
    "gapq": ("gapq", int),
    "gapl": ("gapl", int),
    "fs": ("fs", int),
}
_TABLE9_COORDS = ("an0", "ax0", "an1", "ax1")


@overload
def _parse_row(raw: bytes, line: int, cols: list[str], cols9: list[str] | None, qtype: str | None,
               ltype: str | None, source: str, warn, hit_row: Literal[True]) -> tuple[Hit, Hsp]: ...
@overload
def _parse_row(raw: bytes, line: int, cols: list[str], cols9: list[str] | None, qtype: str | None,
               ltype: str | None, source: str, warn, hit_row: bool = False) -> tuple[Hit | None, Hsp]: ...
def _parse_row(raw: bytes, line: int, cols: list[str], cols9: list[str] | None, qtype: str | None,
               ltype: str | None, source: str, warn, hit_row: bool = False) -> tuple[Hit | None, Hsp]:
    """One best-scores table row: (a table-only Hit holding the row's Hsp, or None for
    a ``+-`` row; the Hsp with the row's values).  ``hit_row``: the row is a sequence's (the
    first of its group), never a ``+-`` row (refused if it is one): the Hit is never None."""
    def bad(reason: str) -> ParseError:
        return ParseError(f"best-scores table row: {reason}: {raw[:80]!r}", source=source, line=line)

    nine = b""  # the -m 9 part, with cols9
    if cols9 is not None:
        raw, tab, nine = raw.partition(b"\t")
        if not tab:
            raise bad("no tab before the -m 9 columns")
    parts = raw.rsplit(None, len(cols))
    if len(parts) != len(cols) + 1:
        raise bad(f"expected {len(cols)} score columns")
    rest = parts[0].rstrip()
    values = parts[1:]
    frame = None
    if rest.endswith(b"]"):
        i = rest.rfind(b"[")
        if i < 0:
            raise bad("unbalanced '[frame]'")
        frame = rest[i + 1 : -1].decode("latin-1").strip()
        rest = rest[:i].rstrip()
    hsp = Hsp(frame=frame)
    typ: type
    for col, val in zip(cols, values):
        if col.startswith("E(") or col == "E()":
            attr, typ = "evalue", float
        else:
            spec = _TABLE_COLS.get(col)
            if spec is None:
                continue
            attr, typ = spec
        try:
            value = fasta_number(val, typ)
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
        why = impossible(attr, value)
        if why:
            raise bad(f"column {col} {val.strip().decode('latin-1')} {why}")
        setattr(hsp, attr, value)
    hsp.score = hsp.opt_score
    if cols9 is not None:
        _parse_row9(nine, cols9, hsp, qtype == "dna", ltype == "dna", bad)
    if rest == b"+-":
        if hit_row:
            raise bad("a '+-' row (more alignments of the sequence above) where a sequence's row belongs")
        return None, hsp
    if not rest.endswith(b")"):
        raise bad("no '(length)' column")
    i = rest.rfind(b"(")
    if i < 0 or not INT_PATTERN.fullmatch(rest[i + 1 : -1]):
        raise bad("malformed '(length)' column")
    length = int(rest[i + 1 : -1])
    text = decode_utf8(rest[:i].strip(), "hit description", source, line, warn)
    id_desc = text.split(None, 1)
    if not id_desc:
        raise bad("no hit id")
    hit = Hit(
        hit_id=id_desc[0],
        rank=0,  # set by the caller through position
        hit_description=id_desc[1].strip() if len(id_desc) > 1 and id_desc[1].strip() else None,
        hit_length=length,
        aligned=False,
        hsps=[hsp],
    )
    return hit, hsp


def _parse_row9(nine: bytes, cols9: list[str], hsp: Hsp, q_dna: bool, h_dna: bool, bad) -> None:
    """The ``-m 9`` columns of a row (after its tab): identity, similarity, overlap and
    coordinates into ``hsp``; ``sw``, ``gapq``, ``gapl``, ``fs`` and the encoded
    alignment (``-m 9c``/``9C``/``9B``: the text after a second tab) into its extra."""
    numbers, tab, code = nine.partition(b"\t")
    names = [c for c in cols9 if c != "aln_code"]
    values = numbers.split()
    if len(values) != len(names):
        raise bad(f"expected {len(names)} -m 9 columns")
    extra: dict = {}
    coords: dict[str, int] = {}
    for col, val in zip(names, values):
        try:
            if col in _TABLE9_COORDS:
                coords[col] = fasta_number(val, int)
                continue
            spec = _TABLE9_COLS.get(col)
            if spec is None:
                continue  # pn0 px0 pn1 px1: the bounds of the sequences
            name, typ = spec
            v = fasta_number(val, typ)
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
        why = impossible(name, v)
        if why:
            raise bad(f"column {col} {val.strip().decode('latin-1')} {why}")
        if name in ("identity", "similarity", "overlap"):
            setattr(hsp, name, v)
        else:
            extra[name] = v
    if "sw" in extra:
        # the -m 9 "sw" column is the alignment's Smith-Waterman score, what an aligned
        # hit's "; xx_score:" line gives (fasta36, fastx/y, tfastx/y: not the opt column)
        hsp.score = extra["sw"]
    if len(coords) == 4:
        for (a, b), dna, side in (((coords["an0"], coords["ax0"]), q_dna, "query"), ((coords["an1"], coords["ax1"]), h_dna, "hit")):
            oriented = orient(a, b, dna)
            if oriented is None:
                raise bad(f"protein {side} coordinates run backwards")
            setattr(hsp, side + "_start", oriented[0])
            setattr(hsp, side + "_end", oriented[1])
            setattr(hsp, side + "_strand", oriented[2])
    code, _, ann = code.strip().partition(b"\t")  # -V: annotations after a third tab
    if code:
        extra["al_code"] = code.decode("utf-8", errors="replace")
    if ann.strip():
        extra["al_code_ann"] = ann.strip().decode("utf-8", errors="replace")
    hsp.extra = extra or None
