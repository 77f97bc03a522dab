"""The fast path: hits in the usual layout, read in the read buffer.

A hit in the usual layout is matched by ONE regular expression per layout (the exact
set of score-line keys a program prints; a file repeats one or two), from its ``>>``
line to the ``>`` line after it; the layouts are learned from the first alignment of
each (``_learn_layout``) and kept for the process.  Every value pattern is a strict
subset of what the checking path (:mod:`ingest.parsers.pasta.checking`) accepts, and
sequence lines may not start with ``;`` or ``>``, so whatever this regex matches, the
checking path reads the same way; whatever it does not match (and every damaged hit)
goes to the checking path.  With ``parse_dicts`` the fast path builds ``Hsp.to_dict()``
itself (``_dict_builder``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ingest.model import Hit, Hsp
from ingest.parsers.pasta.common import RESIDUE_BYTES, HitContext, end_column
from ingest.parsers.pasta.reader import MAX_LINE

_SCORES = (
    rb"(?:; [a-z]+_frame: *([^\n]*)\n)?"
    rb"(?:; [a-z]+_initn: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_init1: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_(?:s-w |n-w )?opt: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_z-score: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_bits: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_expect: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_score: *(-?\d+)\n)?"
    rb"(?:; [a-z]+_ident: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_sim: *([^\n]+)\n)?"
    rb"(?:; [a-z]+_overlap: *(\d+)\n)?"
)
# one side of an alignment: name (its first word, as split(None, 1)[0] gives it for a
# name without leading space), sq_len, al_start, al_stop, al_display_start
_SIDE_KV = (
    rb">([^\s]+)(?:[^\S\n][^\n]*)?\n; sq_len: *(\d+)\n; sq_offset: *-?\d+\n; sq_type: *\w\n"
    rb"; al_start: *(-?\d+)\n; al_stop: *(-?\d+)\n; al_display_start: *(-?\d+)\n"
)
# the same for the fast path: one space after the colon (as FASTA prints these);
# the query side's sq_len is not captured (_QSIDE_FAST)
_SIDE_FAST = (
    rb">([^\s]+)(?:[^\S\n][^\n]*+|)\n; sq_len: (\d++)\n; sq_offset: -?\d++\n; sq_type: \w\n"
    rb"; al_start: (-?\d++)\n; al_stop: (-?\d++)\n; al_display_start: (-?\d++)\n"
)
_QSIDE_FAST = _SIDE_FAST.replace(rb"; sq_len: (\d++)", rb"; sq_len: \d++")
# sequence (or consensus) lines: none starts with ";" or ">" (possessive: no backtracking);
# [^\n]*+ runs twice as fast as a class such as [^\n>]*+ (0.1 s of 0.8 on 43 MB of DNA), so
# a ">" inside (a query line "  3>>>..." spliced into an alignment) is looked for afterwards
_SEQ_LINES = rb"((?:[^\n;>][^\n]*+\n)*+)"
# the score lines of an alignment in any order-compatible subset, then the query
# side's header lines: used only to learn the layout of a file's alignments
_HEAD_FAST = re.compile(_SCORES + _SIDE_KV)
_FRAMES = {b"f": "f", b"r": "r"}

_INT_V = rb"(-?\d++)"
_FLOAT_V = rb"([-+.eE0-9]++|-?inf|-?nan)"  # with float(): exactly what FLOAT_PATTERN accepts, unpadded
# _HEAD_FAST's score groups, in order: the key suffix and the strict value pattern
_SCORE_SLOTS = (
    (b"frame", rb"([^\n]*+)"),
    (b"initn", _INT_V),
    (b"init1", _INT_V),
    (b"opt", _INT_V),
    (b"z-score", _FLOAT_V),
    (b"bits", _FLOAT_V),
    (b"expect", _FLOAT_V),
    (b"score", _INT_V),
    (b"ident", _FLOAT_V),
    (b"sim", _FLOAT_V),
    (b"overlap", rb"(\d++)"),
)
_SCORE_KEYS = re.compile(rb"^; ([a-z]+_)((?:s-w |n-w )?)([^:\n]+):", re.M)
# after the score lines: query side, library side, optional consensus, optional
# "; al_code:" line (-m 9c) and "; al_code_ann:" line after it (-V), blank lines (group
# 28), and a look at the next line: ">--" alternate alignment (group 29 set), ">>>" end
# of the query (group 30 is ">"), ">>" next hit (group 30 is empty) or a query line
# "  N>>>" (group 31 set: the end of the query in runs without ">>><<<", damage
# elsewhere); anything else (or the end of the buffer) fails
_AFTER_SIDES = (
    rb"(?:; al_cons:\n" + _SEQ_LINES + rb"|)"
    rb"(?:; al_code: ([^\n]*+)\n(?:; al_code_ann: ([^\n]*+)\n)?|)(\n*+)(?=>(?:(-)-\n|>(>?))|[ \t]*+\d++(>)>>)"
)
_HSP_TAIL = _QSIDE_FAST + _SEQ_LINES + _SIDE_FAST + _SEQ_LINES + _AFTER_SIDES
# with sequences: the two sides' lines of residues only (RESIDUE_BYTES), checked as they are matched
# (a class costs the match 4-10 % more than _SEQ_LINES, and saves the two bytes.translate that
# would check them after: 8 % of the hits' time on protein, 4 % on DNA, measured)
_RESIDUE_LINES = rb"((?:[" + re.escape(RESIDUE_BYTES) + rb"]++\n)*+)"
_HSP_TAIL_RESIDUES = _QSIDE_FAST + _RESIDUE_LINES + _SIDE_FAST + _RESIDUE_LINES + _AFTER_SIDES
# ">>ID DESCRIPTION" (ID: printable ASCII, not starting with ">"; then the rest as
# split(None, 1) leaves it, to be stripped) or ">--" (alternate alignment)
_HIT_LINE = rb"(?:>>([!-=?-~][!-~]*+)(?:[^\S\n]++([^\n]*+)|)|>--)\n"
_LAYOUTS: dict[tuple[bytes, bool], re.Pattern] = {}
_FIXED_LINES: dict[re.Pattern, int] = {}
_ABSENT: dict[re.Pattern, tuple[str, ...]] = {}
# the Hsp field each score slot fills
_SLOT_FIELDS = (
    (b"frame", "frame"),
    (b"initn", "initn_score"),
    (b"init1", "init1_score"),
    (b"opt", "opt_score"),
    (b"z-score", "z_score"),
    (b"bits", "bits"),
    (b"expect", "evalue"),
    (b"score", "score"),
    (b"ident", "identity"),
    (b"sim", "similarity"),
    (b"overlap", "overlap"),
)
_HSP_FIELD_ORDER = tuple(Hsp.__slots__)  # type: ignore[attr-defined]  # dataclass(slots=True) makes it


_BUILDERS: dict[tuple[str, ...], Callable] = {}
_BUILT_FIELDS = tuple(f for f in _HSP_FIELD_ORDER if f not in ("evalue2", "consensus", "extra"))


def _dict_builder(absent: tuple[str, ...]) -> Callable[..., dict]:
    """A function of the values of ``_BUILT_FIELDS`` (positional, in that order) that
    returns ``Hsp.to_dict()`` without consensus and extra: a dict display of the fields
    not in ``absent``, in the order of Hsp's slots.  ``absent`` lists the fields that
    are None by construction in the fast path - the score slots its layout lacks
    (_ABSENT), the strand of a protein side and the sequences with sequences=False
    (HitContext.absent) - so no value is None (tests: the same JSON as to_dict() on
    every sample and under mutation).  Generated once per set (as namedtuple does):
    half the cost of a display of every field followed by deletions."""
    fn = _BUILDERS.get(absent)
    if fn is None:
        args = [f"v{i}" for i in range(len(_BUILT_FIELDS))]
        items = ", ".join(f"{f!r}: {a}" for f, a in zip(_BUILT_FIELDS, args) if f not in absent)
        namespace: dict = {}
        exec(f"def build({', '.join(args)}):\n    return {{{items}}}\n", namespace)  # noqa: S102 - fixed names only
        fn = _BUILDERS[absent] = namespace["build"]
    return fn


def _learn_layout(buf: bytes, p: int, residues: bool = False) -> re.Pattern | None:
    """The regex for the alignment at ``buf[p]`` (its ``>>``/``>--`` line): learned
    from its score-line keys, which are matched literally (several times faster than
    the optional groups of _HEAD_FAST).  Groups: 1-2 the hit id and the rest of the
    ``>>`` line (None for ``>--``), 3-13 the scores of _SCORE_SLOTS (None when absent),
    14-17 the query side's name, al_start, al_stop, al_display_start, 18 its sequence
    lines, 19-23 the library side's name, sq_len, al_start, al_stop, al_display_start,
    24 its sequence lines, 25 the consensus lines (None when absent), 26 the
    ``; al_code:`` value and 27 the ``; al_code_ann:`` value (None when absent), 28 the
    blank lines after them, 29-31 what follows (see _HSP_TAIL).  ``residues``: the sequence lines
    of the two sides hold residues only (_RESIDUE_LINES).  None if the alignment is unusual."""
    nl = buf.find(b"\n", p)
    if nl < 0:
        return None
    m = _HEAD_FAST.match(buf, nl + 1)
    if m is None:
        return None
    keys = _SCORE_KEYS.findall(buf, nl + 1, m.start(12))
    if not keys:  # no score lines: not -m 10 alignments, the checking path says where
        return None
    sig = (b"|".join(b"".join(k) for k in keys), residues)
    pat = _LAYOUTS.get(sig)
    if pat is None and len(_LAYOUTS) < 64:
        by_slot = {suffix: re.escape(b"; " + prefix + sw + suffix + b":") + rb" ++" for prefix, sw, suffix in keys}
        parts = [by_slot[s] + v + b"\n" if s in by_slot else rb"(?:(\x00)|)" for s, v in _SCORE_SLOTS]
        pat = re.compile(_HIT_LINE + b"".join(parts) + (_HSP_TAIL_RESIDUES if residues else _HSP_TAIL))
        # lines that are always there: ">>"/">--", the score lines, 7 a side
        _FIXED_LINES[pat] = 1 + len(keys) + 14
        # the Hsp fields this layout never sets (the dicts of parse_dicts omit them)
        absent = {field for slot, field in _SLOT_FIELDS if slot not in by_slot}
        if b"opt" in by_slot:
            absent.discard("score")  # score is the optimised score when there is no xx_score
        _ABSENT[pat] = tuple(f for f in _HSP_FIELD_ORDER if f in absent)
        # published last: the threads of a Dask worker share these, and one that found the layout
        # before its line count and absent fields failed its file (or, reading defaults, counted wrong)
        _LAYOUTS[sig] = pat
    return pat


def _code_extra(code: bytes, ann: bytes | None) -> dict:
    """Hsp.extra of the ``; al_code:`` and ``; al_code_ann:`` values (-m 9c, -V)."""
    extra = {"al_code": code.decode("utf-8", "replace")}
    if ann is not None:
        extra["al_code_ann"] = ann.decode("utf-8", "replace")
    return extra


def fast_hits(buf: bytes, pos: int, stop: int, ctx: HitContext, hits: list[Hit | dict], ids: list[bytes]
              ) -> tuple[int, bool, int]:
    """Parse hits in the usual layout in the read buffer, from the ``>>`` line at
    ``buf[pos]``, while they start before ``stop`` and end (at the next ``>>`` line)
    inside ``buf``; append them to ``hits`` and their ids (bytes) to ``ids``.

    Returns (offset after the last hit parsed, True if the hit there must go to the
    checking path, number of lines of the hits parsed).  The lines are counted from
    the lengths of what the regular expression matched: bytes.count(b"\\n") over the
    hits would cost a tenth of the parsing time.  Never raises on bad input: anything
    it does not fully recognise is left to the checking path, which reports the
    precise line.

    Deliberately one function, the parser's hot loop: its body runs once per alignment
    (about a hundred thousand times a second), where each helper would add a call with
    a dozen arguments and the tuple it returns.  Measured on the 24 MB input of
    ``benchmarks/bench_pasta.py`` (CPU time, 15 rounds interleaved with this version,
    median of the per-round ratios): with the aligned columns, the number conversions,
    the Hsp and the Hit each in a helper (and still 137 lines) ``parse`` took 5.5% and
    ``parse_dicts`` 4.6% longer; with only the aligned columns and the Hsp moved out,
    3.3% and 1.3%."""
    pat = ctx.pattern
    sequences = ctx.sequences
    q_plus = "+" if ctx.q_dna else None
    h_plus = "+" if ctx.h_dna else None
    translated = ctx.translated
    query_id_b = ctx.query_id_b
    qname_ok = ctx.qname_ok
    frames = _FRAMES
    new = object.__new__
    append_hit = hits.append
    append_id = ids.append
    rank = len(hits) + ctx.before  # hits before those in the list: a spilled block (spool.py)
    done = p = pos
    # the hit being read: hsps is None until its ">>" line, which sets the others (read only after it);
    # its alignments are Hsp objects, or with dicts their dicts (one type per call: list, not list[Hsp | dict])
    hsps: list | None = None
    hid_b, hid, desc, hit_len = b"", "", None, 0
    hit: Hit | dict  # (annotations only: no code)
    slow = True
    n_lines = hit_lines = 0  # lines of the hits done, of the hit being read
    # consecutive alignments: a scanner matches each where the previous one ended
    # (Pattern.scanner is CPython's, undocumented, and not in typeshed's stubs: the ignores below)
    scan = pat.scanner(buf, p).match if pat is not None else None  # type: ignore[attr-defined]  # not in typeshed
    fixed = _FIXED_LINES[pat] if pat is not None else 0
    dicts = ctx.dicts
    unterminated = ctx.unterminated
    build = _dict_builder((_ABSENT[pat] if pat is not None else ()) + ctx.absent) if dicts else None
    x: Hsp | dict  # an alignment, as built (annotation only)
    while True:
        m = scan() if scan is not None else None
        if m is None:  # a new layout (or an unusual alignment)
            pat = _learn_layout(buf, p, sequences)
            if pat is None:
                break
            scan = pat.scanner(buf, p).match  # type: ignore[attr-defined]  # not in typeshed
            fixed = _FIXED_LINES[pat]
            if dicts:
                build = _dict_builder(_ABSENT[pat] + ctx.absent)
            m = scan()
            if m is None:
                break
        (new_id, new_desc, frame, initn, init1, opt, z, bits, ev, score, ident, sim, overlap,
         qname, q0, q1, qds, qsq, hname, hlen, h0, h1, hds, hsq, cons, al_code, ann, blank, alternate, end,
         next_query) = m.groups()
        if next_query is not None and not unterminated:
            break  # a query line right after an alignment: damage, for the checking path
        if new_id is not None:  # a ">>" line: a new hit (its id is printable ASCII)
            if hsps is not None:
                break
            hid_b = new_id
            hid = new_id.decode("ascii")
            if new_desc is not None:
                try:
                    desc = new_desc.decode("utf-8").strip() or None
                except UnicodeDecodeError:
                    break  # the checking path replaces and warns
            else:
                desc = None
            hit_len = int(hlen)
            hsps = []
            hit_lines = 0
        elif hsps is None:
            break
        # FASTA cuts names in the alignment and drops a leading "gi|NNN|" (for a query, at times
        # past the first space: ctx.query_alt_b); find, not "in": bytes.__contains__ first tries
        # the name as an int
        if qname != qname_ok:
            if query_id_b.find(qname) < 0 and (ctx.query_alt_b is None or ctx.query_alt_b.find(qname) < 0):
                break
            qname_ok = qname
        if hid_b.find(hname) < 0:
            break
        q0 = int(q0)
        q1 = int(q1)
        h0 = int(h0)
        h1 = int(h1)
        if q0 <= q1:
            qs, qe, qstrand = q0, q1, q_plus
        elif q_plus:
            qs, qe, qstrand = q1, q0, "-"
        else:
            break
        if h0 <= h1:
            hs, he, hstrand = h0, h1, h_plus
        elif h_plus:
            hs, he, hstrand = h1, h0, "-"
        else:
            break
        ov = None if overlap is None else int(overlap)
        qseq = hseq = consensus = None
        hit_lines += fixed + len(blank) + (al_code is not None) + (ann is not None)
        if sequences:  # residues only (the layout's _RESIDUE_LINES)
            qdisp = qsq.replace(b"\n", b"")
            hdisp = hsq.replace(b"\n", b"")
            hit_lines += len(qsq) - len(qdisp) + len(hsq) - len(hdisp)
            # the aligned columns c0:c1 of the displayed sequences: see _parse_hsp
            if translated is None:
                qctx = q0 - int(qds) if q0 <= q1 else int(qds) - q0
                hctx = h0 - int(hds) if h0 <= h1 else int(hds) - h0
                if qctx < 0 or hctx < 0:
                    break
                c0 = qctx if qctx > hctx else hctx
                # usually the overlap is the number of columns; then c0 + overlap is
                # the column after the last residue of a side, as end_column finds it
                # (ov None, no overlap, raises the TypeError caught: on purpose, no test in the loop;
                # past last_gap False ov is an int)
                try:
                    c1 = c0 + ov  # type: ignore[operator]  # None: TypeError, caught
                    # 45: "-"
                    last_gap = ov > 0 and qdisp[c1 - 1] == 45 and hdisp[c1 - 1] == 45  # type: ignore[operator]  # as above
                except (TypeError, IndexError):  # no overlap, or beyond the sequences
                    last_gap = True
                if (
                    last_gap
                    or qdisp.count(b"-", c0, c1) != ov - (qe - qs + 1)  # type: ignore[operator]  # an int here
                    or hdisp.count(b"-", c0, c1) != ov - (he - hs + 1)  # type: ignore[operator]  # an int here
                ):
                    c1 = end_column(qdisp, c0, qe - qs + 1)
                    c2 = end_column(hdisp, c0, he - hs + 1)
                    if c2 > c1:
                        c1 = c2
            else:
                if translated == "q":
                    ref, r0, r1, ds = hdisp, h0, h1, int(hds)
                else:
                    ref, r0, r1, ds = qdisp, q0, q1, int(qds)
                rctx = r0 - ds if r0 <= r1 else ds - r0
                if rctx < 0:
                    break
                c0 = len(ref) - len(ref.lstrip(b"-")) + rctx
                c1 = end_column(ref, c0, abs(r1 - r0) + 1)
            if c1 > len(qdisp) or c1 > len(hdisp):
                break
            try:
                qseq = qdisp[c0:c1].decode("ascii")
                hseq = hdisp[c0:c1].decode("ascii")
            except UnicodeDecodeError:
                break
            if cons is not None:
                if cons.find(b">") >= 0:
                    break  # damage: see _SEQ_LINES
                cb = cons.replace(b"\n", b"")
                hit_lines += 1 + len(cons) - len(cb)  # "; al_cons:" and its lines
                cb = cb[c0:c1]
                if len(cb) < c1 - c0:
                    cb = cb.ljust(c1 - c0)
                consensus = cb.decode("ascii", "replace")
        else:
            # a ">" in a sequence or consensus line is damage (with sequences, residues are
            # checked): see _SEQ_LINES.  bytes.find is memchr; bytes.count is ~0.5 ns a byte
            if qsq.find(b">") >= 0 or hsq.find(b">") >= 0:
                break
            hit_lines += qsq.count(b"\n") + hsq.count(b"\n")
            if cons is not None:
                if cons.find(b">") >= 0:
                    break
                hit_lines += 1 + cons.count(b"\n")
        try:
            opt = None if opt is None else int(opt)
            score = opt if score is None else int(score)
            initn = None if initn is None else int(initn)
            init1 = None if init1 is None else int(init1)
            z = None if z is None else float(z)
            bits = None if bits is None else float(bits)
            ev = None if ev is None else float(ev)
            ident = None if ident is None else float(ident)
            sim = None if sim is None else float(sim)
            frame = None if frame is None else frames.get(frame) or frame.strip().decode("ascii")
        except (ValueError, UnicodeDecodeError):
            break
        # values FASTA cannot print (a fraction beyond 0..1, a negative or NaN E-value): the
        # checking path names the line (common.impossible); NaN fails every comparison
        if (ident is not None and not 0.0 <= ident <= 1.0) or (sim is not None and not 0.0 <= sim <= 1.0) \
                or (ev is not None and not ev >= 0.0):
            break
        if build is not None:  # dicts (the same test, that the type checker follows)
            # Hsp.to_dict() built directly (see _dict_builder); consensus and extra,
            # the last fields, only when present
            x = build(score, opt, initn, init1, z, bits, ev, ident, sim, ov, frame, qs, qe, hs, he, qstrand, hstrand,
                      qseq, hseq)  # fmt: skip
            if consensus is not None:
                x["consensus"] = consensus
            if al_code is not None:
                x["extra"] = _code_extra(al_code, ann)
        else:
            # an Hsp with every field set here: object.__new__ and slot stores cost a
            # quarter of the dataclass __init__ with 21 arguments (called via the type)
            x = new(Hsp)
            x.score = score
            x.opt_score = opt
            x.initn_score = initn
            x.init1_score = init1
            x.z_score = z
            x.bits = bits
            x.evalue = ev
            x.evalue2 = None  # only in the best-scores table
            x.identity = ident
            x.similarity = sim
            x.overlap = ov
            x.frame = frame
            x.query_start = qs
            x.query_end = qe
            x.hit_start = hs
            x.hit_end = he
            x.query_strand = qstrand
            x.hit_strand = hstrand
            x.query_seq = qseq
            x.hit_seq = hseq
            x.consensus = consensus
            x.extra = None if al_code is None else _code_extra(al_code, ann)
        hsps.append(x)
        p = m.end()  # the next ">" line
        if alternate is not None:
            continue
        if p - done > MAX_LINE:
            break  # let read_block check the length of its lines
        rank += 1
        if dicts:  # Hit.to_dict()
            if desc is None:
                hit = {"hit_id": hid, "hit_length": hit_len, "rank": rank, "aligned": True, "hsps": hsps}
            else:
                hit = {"hit_id": hid, "hit_description": desc, "hit_length": hit_len, "rank": rank,
                       "aligned": True, "hsps": hsps}  # fmt: skip
        else:
            hit = new(Hit)  # as for the Hsp
            hit.hit_id = hid
            hit.rank = rank
            hit.hit_description = desc
            hit.hit_length = hit_len
            hit.aligned = True
            hit.hsps = hsps
        append_hit(hit)
        append_id(hid_b)
        hsps = None
        done = p
        n_lines += hit_lines
        if end or next_query or p >= stop:  # ">>>" or "  N>>>": end of the query
            slow = False
            break
    ctx.pattern = pat
    ctx.qname_ok = qname_ok
    return done, slow, n_lines
