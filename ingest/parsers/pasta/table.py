"""The best-scores table of a query: its rows checked against the aligned hits (and
their values added to them: ``E2()``, the ``-m 9`` columns, the length of the whole
sequence), the other rows made table-only hits."""

from __future__ import annotations

from ingest.errors import ParseError
from ingest.model import Hit, Hsp, Query
from ingest.parsers.pasta.common import _INT, _decode, _number, _orient, impossible

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


def _table_hits(r, q: Query, table: tuple, hits: list, ids, warn, dicts: bool = False) -> None:
    """Check the best-scores ``table`` (columns, ``-m 9`` columns or None, rows, line
    number of the first row, whether a row starts with ``+-``; at least one row) of
    ``q`` (its types set) against the aligned ``hits`` (whose ids as bytes are ``ids``)
    and add its other rows to ``hits`` as table-only hits.  With ``dicts`` the hits are
    dicts (``Hit.to_dict()``), and so are the table-only hits added; the table then
    keeps the hits (_table_keeps_hits)."""
    qtype, ltype = q.query_type, q.library_type
    cols, cols9, rows, row1, plus = table
    e2 = "E2()" in cols  # -z 21..26: the second E() is only in the table
    if cols9 is not None or plus:
        _finish_rows(r, q, cols, cols9, rows, row1, hits, ids, warn, e2, dicts)
        return
    n_al = len(hits)
    if n_al > len(rows):
        raise r.error(
            f"query {q.query_id!r} has {n_al} alignments but its best-scores table only {len(rows)} rows",
            row1 + len(rows) - 1,
        )
    # rows of aligned hits only have to name the same sequence (the alignment
    # carries all their values); the other rows become table-only hits.  Usually
    # each row starts with its hit's id (ids have no spaces: then the row's first
    # word contains the id, which _check_row_ids accepts)
    if not all(map(bytes.startswith, rows[:n_al], ids)):
        row_ids = [raw.lstrip().partition(b" ")[0] for raw in rows[:n_al]]
        _check_row_ids(r, q, ids, row_ids, [row1 + i for i in range(n_al)])
    _whole_lengths(hits, rows[:n_al], dicts)
    if e2:
        for i in range(n_al):
            x = hits[i].hsps[0]
            if x.evalue2 is None:
                x.evalue2 = _parse_row(rows[i], row1 + i, cols, None, qtype, ltype, r.source, warn)[1].evalue2
    for i in range(n_al, len(rows)):
        hit = _parse_row(rows[i], row1 + i, cols, None, qtype, ltype, r.source, warn)[0]
        hit.rank = i + 1
        hits.append(hit.to_dict() if dicts else hit)


def _table_keeps_hits(table: tuple) -> bool:
    """True if _table_hits leaves the aligned hits as they are with this table (columns,
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
        table = [int(v) if _INT.fullmatch(v) else 0 for v in found]
    if dicts:
        if table != [h["hit_length"] for h in hits]:
            for h, n in zip(hits, table):
                if n > h["hit_length"]:
                    h["hit_length"] = n
    elif table != [h.hit_length for h in hits]:
        for h, n in zip(hits, table):
            if n > h.hit_length:
                h.hit_length = n


def _check_row_ids(r, q: Query, ids: list[bytes], row_ids: list[bytes], lines: list[int]) -> None:
    for i, (row_id, hit_id) in enumerate(zip(row_ids, ids)):
        if not row_id or (row_id.find(hit_id) < 0 and hit_id.find(row_id) < 0):
            raise r.error(
                f"alignment {i + 1} of query {q.query_id!r} is for {hit_id.decode('utf-8', 'replace')!r} "
                f"but its row of the best-scores table is {row_id.decode('utf-8', 'replace')!r}",
                lines[i],
            )


def _finish_rows(r, q: Query, cols, cols9, rows: list[bytes], row1: int, hits: list[Hit], ids, warn, e2,
                 dicts: bool = False) -> None:
    """The general table: ``-m 9``-family columns after a tab (``-m 10 -m 9c``), and
    ``+-`` rows - more alignments of the library sequence of the row above - which
    belong to the same hit (for an aligned hit: its ``>--`` alignments, in order)."""
    groups: list[list[int]] = []  # row indices of each hit
    for i, raw in enumerate(rows):
        if raw.startswith(b"+-"):
            if not groups:
                raise r.error("best-scores table starts with a '+-' row (more alignments of no sequence)", row1 + i)
            groups[-1].append(i)
        else:
            groups.append([i])
    n_al = len(hits)
    if n_al > len(groups):
        raise r.error(
            f"query {q.query_id!r} has {n_al} alignments but its best-scores table only {len(groups)} sequences",
            row1 + len(rows) - 1,
        )
    qtype, ltype = q.query_type, q.library_type
    row_ids = [rows[g[0]].lstrip().partition(b" ")[0] for g in groups[:n_al]]
    if row_ids != ids:
        _check_row_ids(r, q, ids, row_ids, [row1 + g[0] for g in groups[:n_al]])
    _whole_lengths(hits, [rows[g[0]].partition(b"\t")[0] for g in groups[:n_al]], dicts)
    if cols9 is not None or e2:
        # aligned hits: the alignments carry all values but E2() and the -m 9 extras
        for hit, g in zip(hits, groups):
            for x, i in zip(hit.hsps, g):
                t = _parse_row(rows[i], row1 + i, cols, cols9, qtype, ltype, r.source, warn)[1]
                if x.evalue2 is None:
                    x.evalue2 = t.evalue2
                if t.extra:
                    x.extra = {**t.extra, **(x.extra or {})}
    for rank in range(n_al + 1, len(groups) + 1):
        g = groups[rank - 1]
        hit = _parse_row(rows[g[0]], row1 + g[0], cols, cols9, qtype, ltype, r.source, warn)[0]
        for i in g[1:]:
            hit.hsps.append(_parse_row(rows[i], row1 + i, cols, cols9, qtype, ltype, r.source, warn)[1])
        hit.rank = rank
        hits.append(hit)


# -m 9 table columns (after the tab) -> (Hsp attribute or extra key, type)
_TABLE9_COLS: dict[str, tuple[str, type]] = {
    **_TABLE_ALIGN_COLS,
    "sw": ("sw", int),
    "gapq": ("gapq", int),
    "gapl": ("gapl", int),
    "fs": ("fs", int),
}
_TABLE9_COORDS = ("an0", "ax0", "an1", "ax1")


def _parse_row(raw: bytes, line: int, cols: list[str], cols9: list[str] | None, qtype: str, ltype: str,
               source: str, warn) -> tuple[Hit | None, Hsp]:
    """One best-scores table row: (a table-only Hit holding the row's Hsp, or None for
    a ``+-`` row; the Hsp with the row's values)."""
    def bad(reason: str) -> ParseError:
        return ParseError(f"best-scores table row: {reason}: {raw[:80]!r}", source=source, line=line)

    nine = None
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
    for col, val in zip(cols, values):
        if col.startswith("E(") or col == "E()":
            attr, typ = "evalue", float
        else:
            spec = _TABLE_COLS.get(col)
            if spec is None:
                continue
            attr, typ = spec
        try:
            value = _number(val, typ)
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
        why = impossible(attr, value)
        if why:
            raise bad(f"column {col} {val.strip().decode('latin-1')} {why}")
        setattr(hsp, attr, value)
    hsp.score = hsp.opt_score
    if nine is not None:
        _parse_row9(nine, cols9, hsp, qtype == "dna", ltype == "dna", bad)
        if hsp.extra and "sw" in hsp.extra:
            # the -m 9 "sw" column is the alignment's Smith-Waterman score, what an aligned
            # hit's "; xx_score:" line gives (fasta36, fastx/y, tfastx/y: not the opt column)
            hsp.score = hsp.extra["sw"]
    if rest == b"+-":
        return None, hsp
    if not rest.endswith(b")"):
        raise bad("no '(length)' column")
    i = rest.rfind(b"(")
    if i < 0 or not _INT.fullmatch(rest[i + 1 : -1]):
        raise bad("malformed '(length)' column")
    length = int(rest[i + 1 : -1])
    text = _decode(rest[:i].strip(), "hit description", source, line, warn)
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
                coords[col] = _number(val, int)
                continue
            spec = _TABLE9_COLS.get(col)
            if spec is None:
                continue  # pn0 px0 pn1 px1: the bounds of the sequences
            name, typ = spec
            v = _number(val, typ)
        except ValueError:
            raise bad(f"column {col!r} is not a number") from None
        why = impossible(name, v)
        if why:
            raise bad(f"column {col} {val.strip().decode('latin-1')} {why}")
        if name in ("identity", "similarity", "overlap"):
            setattr(hsp, name, v)
        else:
            extra[name] = v
    if len(coords) == 4:
        for (a, b), dna, side in (((coords["an0"], coords["ax0"]), q_dna, "query"), ((coords["an1"], coords["ax1"]), h_dna, "hit")):
            oriented = _orient(a, b, dna)
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
