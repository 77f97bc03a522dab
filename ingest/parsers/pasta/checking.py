"""The checking path: one hit block (``>>`` line, its alignments and their ``>--``
alternates) read line by line, every line checked, with the precise line of any damage.
It reads every alignment the fast path (:mod:`ingest.parsers.pasta.fastpath`) leaves:
unusual layouts, CRLF line ends, damage."""

from __future__ import annotations

from ingest.errors import ParseError
from ingest.model import Hit, Hsp
from ingest.parsers.pasta.common import (
    FLOAT_PATTERN,
    INT_PATTERN,
    HitContext,
    decode_utf8,
    end_column,
    impossible,
    not_residues,
    orient,
    typed_value,
)

# suffix of an alignment score line (after the "xx_" prefix) -> (Hsp attribute, type)
_HSP_KEYS: dict[bytes, tuple[str, type]] = {
    b"s-w opt": ("opt_score", int),
    b"n-w opt": ("opt_score", int),
    b"opt": ("opt_score", int),
    b"initn": ("initn_score", int),
    b"init1": ("init1_score", int),
    b"z-score": ("z_score", float),
    b"bits": ("bits", float),
    b"expect": ("evalue", float),
    b"expect2": ("evalue2", float),
    b"score": ("score", int),
    b"ident": ("identity", float),
    b"sim": ("similarity", float),
    b"overlap": ("overlap", int),
}
_ANN_LINE = b"\n; al_code_ann: "  # -V: after the "; al_code:" line


def _new_hit(line: bytes, rank: int, source: str, line_no: int, warn) -> Hit | None:
    """A Hit from the text of its ``>>`` line (without ``>>``); None if it has no id."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = decode_utf8(line, "hit description", source, line_no, warn)
    id_desc = text.split(None, 1)
    if not id_desc:
        return None
    desc = id_desc[1].strip() if len(id_desc) > 1 else None
    return Hit(hit_id=id_desc[0], rank=rank, hit_description=desc or None)


def parse_hit(block: bytes, first: int, rank: int, ctx: HitContext, source: str, warn) -> Hit:
    """The Hit of ``block`` (its ``>>`` line, its alignment, any ``>--`` alternates; the
    block's first line is line ``first``), ranked ``rank``; a ParseError names the
    line of any damage."""
    if b"\r" in block:
        block = block.replace(b"\r\n", b"\n")

    def err(reason: str, offset: int) -> ParseError:
        return ParseError(reason, source=source, line=first + block.count(b"\n", 0, max(offset, 0)))

    nl = block.find(b"\n")
    if nl < 0 or nl + 1 >= len(block):
        raise err("hit block has no alignment (input truncated?)", 0)
    hit = _new_hit(block[2:nl], rank, source, first, warn)
    if hit is None:
        raise err("'>>' line without a hit id", 0)
    # the block: ">>..." line, then HSPs separated by ">--" lines
    pos = nl + 1
    if not block.startswith(b";", pos):
        raise err("no '; key: value' lines after a '>>' hit line: not -m 10 alignments (-m 0 layout?)", pos)
    size = len(block)
    hsps = hit.hsps
    while True:
        nxt = block.find(b"\n>--", pos - 1)
        end = size if nxt < 0 else nxt + 1
        res = _parse_hsp(block, pos, end, ctx, hit.hit_id, err)
        hsp, hit_len = res
        hsps.append(hsp)
        if hit.hit_length is None:
            hit.hit_length = hit_len
        if end >= size or not block.startswith(b">--", end):
            break
        e = block.find(b"\n", end)
        if e < 0 or e + 1 >= size:
            raise err("'>--' alternate alignment without content (truncated?)", end)
        pos = e + 1
    return hit


def _side(block: bytes, start: int, stop: int, err) -> tuple[bytes, dict, int]:
    """Parse one side (">NAME ..", "; sq_*/al_*" lines, sequence lines) of an HSP.

    Returns (name, key/value dict, offset of the first sequence line)."""
    nl = block.find(b"\n", start, stop)
    if nl < 0:
        raise err("alignment side without data (truncated?)", start)
    name = block[start + 1 : nl]
    p = nl + 1
    kv: dict[bytes, bytes] = {}
    while p < stop and block.startswith(b"; ", p):
        e = block.find(b"\n", p, stop)
        if e < 0:
            e = stop
        key, sep, val = block[p + 2 : e].partition(b": ")
        if not sep:
            if block[p + 2 : e].endswith(b":"):
                key, val = block[p + 2 : e - 1], b""
            else:
                raise err(f"malformed '; key: value' line: {block[p:e][:60]!r}", p)
        kv[key] = val
        p = e + 1
    return name, kv, min(p, stop)


def _side_names(name: bytes, seq_id: bytes) -> bool:
    """True if the ``>NAME ..`` line of an alignment side names the sequence ``seq_id``:
    NAME is a piece of the id, or FASTA printed none (``> ..``)."""
    if name[:1] in (b" ", b"\t"):
        return name.strip() in (b"", b"..")
    first = name.split(None, 1)[0] if name.strip() else b""
    return bool(first) and first in seq_id


def _int(kv: dict, key: bytes, err, offset: int) -> int:
    v = kv.get(key)
    if v is None:
        raise err(f"alignment lacks '; {key.decode()}:'", offset)
    if not INT_PATTERN.fullmatch(v):
        raise err(f"'; {key.decode()}: {v[:30].decode('latin-1')}' is not an integer", offset)
    return int(v)


def _parse_hsp(block: bytes, pos: int, stop: int, ctx: HitContext, hit_id: str, err) -> tuple[Hsp, int]:
    """The alignment in ``block[pos:stop]`` (after its ``>>`` or ``>--`` line) of the hit
    ``hit_id``: its Hsp and the library sequence length (``; sq_len:``)."""
    hsp = Hsp()
    # scores: "; xx_key: value" lines up to the query side ">NAME .."
    qh = block.find(b"\n>", pos - 1, stop)
    if qh < 0:
        raise err("alignment without its '>QUERY ..' side (truncated?)", pos)
    _hsp_scores(block, pos, qh, hsp, err)

    # query side, then library side
    hh = block.find(b"\n>", qh + 2, stop)
    if hh < 0:
        raise err("alignment without its library side (truncated?)", qh + 1)
    qname, qkv, qseq_at = _side(block, qh + 1, hh, err)
    stop = _al_code(block, hh + 2, stop, hsp, err)  # -m 10 -m 9c: the alignment ends before it
    cons_at = block.find(b"\n; al_cons:", hh + 2, stop)
    hend = stop if cons_at < 0 else cons_at
    hname, hkv, hseq_at = _side(block, hh + 1, hend, err)
    for a, b in ((qseq_at, hh), (hseq_at, hend)):
        i = block.find(b"\n;", a, b)
        if i >= 0:
            raise err(f"unexpected line in an aligned sequence: {block[i + 1 : i + 40]!r}", i + 1)
    tail = block.find(b"\n\n", hseq_at if cons_at < 0 else cons_at + 1, stop)
    if tail >= 0 and block[tail:stop].strip():
        i = tail + 1 + len(block[tail:stop]) - len(block[tail:stop].lstrip())
        raise err(f"unexpected line after an alignment: {block[i : i + 40]!r}", i)
    # FASTA shows at most -C characters of the name and drops a leading "gi|NNN|" (for a query, up to
    # a "|" that may lie past the first space: ctx.query_alt_b); a sequence whose FASTA header
    # starts with a space has no name: "> .."
    if not _side_names(qname, ctx.query_id_b) and not (ctx.query_alt_b and _side_names(qname, ctx.query_alt_b)):
        raise err(f"alignment side names {qname[:40]!r}, not the query {ctx.query_id!r}", qh + 1)
    if not _side_names(hname, hit_id.encode("utf-8", "replace")):
        raise err(f"alignment side names {hname[:40]!r}, not the hit {hit_id!r}", hh + 1)

    q0 = _int(qkv, b"al_start", err, qh + 1)
    q1 = _int(qkv, b"al_stop", err, qh + 1)
    h0 = _int(hkv, b"al_start", err, hh + 1)
    h1 = _int(hkv, b"al_stop", err, hh + 1)
    hit_len = _int(hkv, b"sq_len", err, hh + 1)
    side = orient(q0, q1, ctx.q_dna)
    if side is None:
        raise err("protein query coordinates run backwards", qh + 1)
    hsp.query_start, hsp.query_end, hsp.query_strand = side
    side = orient(h0, h1, ctx.h_dna)
    if side is None:
        raise err("protein library coordinates run backwards", hh + 1)
    hsp.hit_start, hsp.hit_end, hsp.hit_strand = side

    if ctx.sequences:
        for begin, end, side_name in ((qseq_at, hh, "query"), (hseq_at, hend, "library")):
            bad = not_residues(block[begin:end])
            if bad:
                at = begin + next(i for i, b in enumerate(block[begin:end]) if b in bad)
                raise err(f"{len(bad)} byte(s) in the {side_name} sequence that are not residues "
                          f"(first: {bad[:1]!r})", at)
        qdisp = block[qseq_at:hh].replace(b"\n", b"")
        hdisp = block[hseq_at:hend].replace(b"\n", b"")
        # FASTA shows context around the alignment; both sides are column-aligned at
        # the alignment start (the side with less context is padded with '-'), and
        # each side's residues of the alignment are counted by |al_stop - al_start|+1.
        if ctx.translated is None:
            qds = _int(qkv, b"al_display_start", err, qh + 1)
            hds = _int(hkv, b"al_display_start", err, hh + 1)
            qctx = q0 - qds if q0 <= q1 else qds - q0
            hctx = h0 - hds if h0 <= h1 else hds - h0
            if qctx < 0 or hctx < 0:
                raise err("alignment starts before its displayed sequence", qh + 1)
            c0 = max(qctx, hctx)
            c1 = max(end_column(qdisp, c0, abs(q1 - q0) + 1), end_column(hdisp, c0, abs(h1 - h0) + 1))
        else:
            # translated searches: the translated side counts nucleotides, so use the
            # protein side (local alignments: no leading gap, leading '-' are padding)
            if ctx.translated == "q":
                ref, r0, r1, rkv, at = hdisp, h0, h1, hkv, hh + 1
            else:
                ref, r0, r1, rkv, at = qdisp, q0, q1, qkv, qh + 1
            ds = _int(rkv, b"al_display_start", err, at)
            rctx = r0 - ds if r0 <= r1 else ds - r0
            if rctx < 0 and len(ref) - ref.count(b"-") == abs(r1 - r0) + 1:
                # tfasts36/tfastm36 print an al_display_start past al_start (in every frame) and
                # no context: the displayed residues are the alignment's, as many as its range
                rctx = 0
            if rctx < 0:
                raise err("alignment starts before its displayed sequence", at)
            c0 = len(ref) - len(ref.lstrip(b"-")) + rctx
            c1 = end_column(ref, c0, abs(r1 - r0) + 1)
        if c1 > len(qdisp):
            raise err("query sequence shorter than its coordinates say (truncated?)", hh - 1)
        if c1 > len(hdisp):
            raise err("library sequence shorter than its coordinates say (truncated?)", hend - 1)
        qs, hs = qdisp[c0:c1], hdisp[c0:c1]
        try:
            hsp.query_seq = qs.decode("ascii")
            hsp.hit_seq = hs.decode("ascii")
        except UnicodeDecodeError:
            raise err("non-ASCII bytes in an aligned sequence", qh + 1) from None
        if cons_at >= 0:
            e = block.find(b"\n", cons_at + 1, stop)
            cons = block[e + 1 : stop].rstrip(b"\n").replace(b"\n", b"") if e >= 0 else b""
            hsp.consensus = cons[c0:c1].ljust(c1 - c0).decode("ascii", errors="replace")
    return hsp, hit_len


def _hsp_scores(block: bytes, pos: int, qh: int, hsp: Hsp, err) -> None:
    """The score lines (``; xx_key: value``) of an alignment, from ``pos`` to its query
    side's line at ``qh``, into ``hsp``: the known keys as numbers (checked), the
    frame, any other key into its extra; blank lines are skipped."""
    extra = None
    p = pos
    while p < qh:
        e = block.find(b"\n", p, qh + 1)
        if e < 0:
            e = qh
        line = block[p:e]
        if not line.startswith(b"; "):
            if not line.strip():
                p = e + 1
                continue
            raise err(f"unexpected line among alignment scores: {line[:60]!r}", p)
        key, sep, val = line[2:].partition(b": ")
        if not sep:
            raise err(f"malformed '; key: value' line: {line[:60]!r}", p)
        u = key.find(b"_")
        suffix = key[u + 1 :] if u >= 0 else key
        spec = _HSP_KEYS.get(suffix)
        if spec is not None:
            attr, typ = spec
            pattern = INT_PATTERN if typ is int else FLOAT_PATTERN
            if not pattern.fullmatch(val):
                raise err(f"'{line[:60].decode('latin-1')}' is not a number", p)
            value = typ(val)
            why = impossible(attr, value)
            if why:
                raise err(f"{key.decode('latin-1')} {val.strip().decode('latin-1')} {why}", p)
            setattr(hsp, attr, value)
        elif suffix == b"frame":
            hsp.frame = val.strip().decode("latin-1")
        else:
            if extra is None:
                extra = {}
            extra[key.decode("latin-1")] = typed_value(val.decode("utf-8", errors="replace"))
        p = e + 1
    hsp.extra = extra
    if hsp.score is None:
        hsp.score = hsp.opt_score


def _al_code(block: bytes, start: int, stop: int, hsp: Hsp, err) -> int:
    """``-m 10 -m 9c`` ends an alignment with ``; al_code: <encoded alignment>`` (with -V
    then ``; al_code_ann: ...``): if ``block[start:stop]`` has that line, its values go
    to ``hsp.extra`` (only blank lines may follow) and the alignment ends there.
    Returns where the alignment's lines end: that line, else ``stop``."""
    code_at = block.find(b"\n; al_code:", start, stop)
    if code_at < 0:
        return stop
    e = block.find(b"\n", code_at + 1, stop)
    if e < 0:
        e = stop
    code = block[code_at + 11 : e]
    if code and not code.startswith(b" "):
        raise err(f"malformed '; key: value' line: {block[code_at + 1 : e][:60]!r}", code_at + 1)
    ann = None
    if block.startswith(_ANN_LINE, e):  # -V: where the annotated residues are
        a = block.find(b"\n", e + 1, stop)
        a = stop if a < 0 else a
        ann = block[e + len(_ANN_LINE) : a].decode("utf-8", errors="replace")
        e = a
    if block[e:stop].strip():
        i = e + len(block[e:stop]) - len(block[e:stop].lstrip())
        raise err(f"unexpected line after an alignment: {block[i : i + 40]!r}", i)
    extra = hsp.extra
    if extra is None:
        hsp.extra = extra = {}
    extra["al_code"] = code[1:].decode("utf-8", errors="replace")
    if ann is not None:
        extra["al_code_ann"] = ann
    return code_at + 1
