"""Independent checker: compare sci-ingest JSON output with the raw -m 10 text,
Biopython's fasta-m10 reader, and the input sequences.

usage: check.py M10 JSONL JSONL_NOSEQ CMDLINE
prints one JSON object (summary) on stdout."""
import json
import math
import os
import re
import shlex
import sys

m10, jl, jl_ns, cmdline = sys.argv[1:5]
text = open(m10, encoding="latin-1").read().split("\n")

issues = []      # WRONG-type (value differs)
notes = []       # informational


def num(s):
    s = s.strip()
    try:
        if re.fullmatch(r"[-+]?\d+", s):
            return int(s)
        return float(s)
    except ValueError:
        return s


# ---------------- raw text model ----------------
QSTART = re.compile(r"^\s*(\d+)>>>(.*?)\s*-\s+(\d+) (aa|nt)(?:\s+\([^()]*\))?(?:\s+in\s+\d+\s+fragments)?\s*$")
# FASTA keeps 511 bytes of a title: a longer one loses its " - LEN aa", in part or whole; the
# length is then the summary line's
QANY = re.compile(r"^\s*(\d+)>>>(.*?)( \((?:reverse complement|forward-only)\))?$")
QSUMMARY = re.compile(r"^>>>.*, (\d+) (aa|nt) vs ")
# -H: the histogram's head line and its rows ("<20  0  0:", "  22  3  1:==*", ">120  0  0:")
HIST_HEAD = re.compile(r"^\s+opt(?:\s+E\(\))?\s*$")
HIST_ROW = re.compile(r"^([<> ])\s*(-?\d+)\s+(\d+)(?:\s+(\d+))?:")
blocks = []  # each: dict(name, length, table=[], aligns=[])
cur = None
al = None
section = None
in_table = False
table_cols = None
for ln, line in enumerate(text, 1):
    m = QSTART.match(line)
    ma = QANY.match(line) if not line.startswith(">>>") else None
    if ma and (m is None or len(ma.group(2)) >= 511):
        cur = dict(line=ln, announce=ma.group(2), title=ma.group(2), length=None, table=[], aligns=[], summary=None,
                   cols=None)
        blocks.append(cur)
        al = None
        in_table = False
        continue
    if m and not line.startswith(">>>"):
        cur = dict(line=ln, announce=m.group(2), title=ma.group(2) if ma else m.group(2), length=int(m.group(3)),
                   table=[], aligns=[], summary=None, cols=None)
        blocks.append(cur)
        al = None
        in_table = False
        continue
    if cur is None:
        continue
    if cur.get("in_hist"):
        mh = HIST_ROW.match(line)
        if mh:
            row = dict(score=int(mh.group(2)), observed=int(mh.group(3)))
            if mh.group(4) is not None:
                row["expected"] = int(mh.group(4))
            if mh.group(1) != " ":
                row["tail"] = mh.group(1)
            cur["hist"].append(row)
            cur["in_hist"] = mh.group(1) != ">"
            continue
        cur["in_hist"] = False
        cur["hist_cut"] = ln
    if al is None and not in_table and HIST_HEAD.match(line):
        cur["in_hist"], cur["hist"] = True, []
        continue
    if line.startswith("The best scores are:"):
        in_table = True
        hdr = line[len("The best scores are:"):]
        cur["cols"] = hdr.split("\t")[0].split()
        cur["m9cols"] = hdr.split("\t")[1].split() if "\t" in hdr else []
        continue
    if in_table:
        if not line.strip() or line.startswith(">>>") or line.startswith("!!"):
            in_table = False
        else:
            cur["table"].append((ln, line))
            continue
    if line.startswith(">>><<<") or line.startswith(">>>///"):
        al = None
        continue
    if line.startswith(">>>"):
        cur["summary"] = line
        sm = QSUMMARY.match(line)
        if cur["length"] is None and sm:
            cur["length"] = int(sm.group(1))
        al = None
        continue
    if line.startswith(">>") or line.startswith(">--"):
        if line.startswith(">--"):
            hitname = cur["aligns"][-1]["hit"] if cur["aligns"] else None
            alt = True
        else:
            hitname = line[2:]
            alt = False
        al = dict(line=ln, hit=hitname, alt=alt, tags={}, q={}, h={}, qseq=[], hseq=[])
        cur["aligns"].append(al)
        section = "tags"
        continue
    if al is not None:
        if line.startswith(">") and not line.startswith(">>"):
            section = "q" if section == "tags" else "h"
            continue
        mm = re.match(r"^; ([^:]*): ?(.*)$", line)
        if mm:
            k, v = mm.group(1), mm.group(2)
            if k.startswith("al_cons") or k.startswith("al_code"):
                section = "cons"
                al["tags"][k] = v
                continue
            if section == "tags":
                al["tags"][k] = v
            elif section in ("q", "h"):
                al[section][k] = v
            continue
        if section in ("q", "h") and line and not line.startswith(";"):
            al[section + "seq"].append(line)

# --------------- JSON ----------------
def _ej(o):
    if isinstance(o, dict):
        if set(o) == {"$numberDouble"}:
            return float(o["$numberDouble"].replace("Infinity", "inf"))
        return {k: _ej(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_ej(x) for x in o]
    return o
res_ext = []
def load(p):
    out = []
    for l in open(p):
        l = l.strip()
        if l:
            if "$numberDouble" in l:
                res_ext.append(1)
            out.append(_ej(json.loads(l)))
    return out

J = load(jl) if os.path.getsize(jl) else []
JN = load(jl_ns) if os.path.exists(jl_ns) and os.path.getsize(jl_ns) else []

# ---- segments (a long query: each block's title is the one before plus " - N unit", cut at 511
# bytes) and the blocks FASTA prints past a long query's subrange ("file:A-B" on the command line,
# applied to the first query only), which sci-ingest places (issue 43), or sets aside (fewer JSON
# lines than blocks) when they contradict FASTA's numbering rule
def _continues(prev, cur):
    t, p = cur["title"], prev["title"]
    if len(t) < 511:
        return t.startswith(p) and re.fullmatch(r" - \d+ (aa|nt)", t[len(p):]) is not None
    if t == p:
        return prev["length"] == 39990
    return t.startswith(p) and re.fullmatch(r"( -( (\d+( (n|nt|a|aa)?)?)?)?)?", t[len(p):]) is not None


_args = cmdline.split()
if len(_args) >= 4 and _args[-1].isdigit():
    _args = _args[:-1]
subrange = len(_args) >= 3 and re.search(r":(\d+-\d*|-\d+)$", _args[-2]) is not None
all_blocks = list(blocks)
set_aside = []
if subrange and blocks and len(J) < len(blocks):
    k = 1
    while k < len(blocks) and _continues(blocks[k - 1], blocks[k]):
        k += 1
    set_aside = list(range(1, k))
    blocks = [b for i, b in enumerate(blocks) if i not in set_aside]

res = dict(blocks=len(blocks), json=len(J), set_aside=len(set_aside))
res["summary_lines"] = sum(1 for l in text if l.startswith(">>>") and not l.startswith(">>><<<") and not l.startswith(">>>///"))


def close(a, b):
    if a == b:
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0)
    return False


def flag(msg):
    if len(issues) < 60:
        issues.append(msg)


# --------- compare blocks/JSON ----------
if len(J) != len(blocks):
    flag(f"json lines {len(J)} != query blocks {len(blocks)}")

TAGMAP = {
    "z-score": "z_score", "bits": "bits", "expect": "evalue", "initn": "initn_score",
    "init1": "init1_score", "ident": "identity", "sim": "similarity", "overlap": "overlap",
    "frame": "frame",
}

unknown_tags = set()
hist_rows = 0  # histogram rows equal to the file's
for bi, (b, q) in enumerate(zip(blocks, J)):
    qn = b["announce"].split()[0] if b["announce"].split() else ""
    if q.get("query_id") != qn and not (qn == "" and not q.get("query_id")):
        flag(f"block {bi+1}: query_id {q.get('query_id')!r} != announce {qn!r}")
    hist_rows += len(b.get("hist", ())) if b.get("hist") == q.get("histogram") else 0
    if "hist" in b and b["hist"] != q.get("histogram"):
        if "histogram" not in q:
            flag(f"block {bi+1} ({qn}): the file's histogram ({len(b['hist'])} rows, line {b['line']}..) not in the JSON")
        else:
            diff = [(r, j) for r, j in zip(b["hist"], q["histogram"]) if r != j][:1]
            flag(f"block {bi+1} ({qn}): histogram {len(q['histogram'])} rows vs the file's {len(b['hist'])}; first difference {diff}")
    elif "histogram" in q and "hist" not in b:
        flag(f"block {bi+1} ({qn}): JSON histogram ({len(q['histogram'] or [])} rows) but the file has none")
    if b.get("hist_cut"):
        notes.append(f"line {b['hist_cut']}: histogram ends without its '>' row")
    seg = q.get("query_segment") or {}
    shift = seg["offset"] - seg["printed_offset"] if "printed_offset" in seg else 0  # renumbered (@C:)
    if (seg.get("length") if seg else q.get("query_length")) != b["length"]:
        flag(f"block {bi+1}: query_length {q.get('query_length')} (segment {seg.get('length')}) != {b['length']}")
    hits = q.get("hits", [])
    aligned = [h for h in hits if h.get("aligned")]
    n_hitlines = sum(1 for a in b["aligns"] if not a["alt"])
    n_alt = sum(1 for a in b["aligns"] if a["alt"])
    if len(aligned) != n_hitlines:
        flag(f"block {bi+1} ({qn}): aligned hits {len(aligned)} != '>>' lines {n_hitlines}")
    nh_hsps = sum(len(h["hsps"]) for h in aligned)
    if nh_hsps != n_hitlines + n_alt:
        flag(f"block {bi+1} ({qn}): hsps in aligned hits {nh_hsps} != '>>'+'>--' {n_hitlines + n_alt}")
    # table rows (not '+-')
    trows = [(ln, t) for ln, t in b["table"] if not t.startswith("+-")]
    if b["table"] and len(hits) != len(trows) and len(hits) != max(len(trows), n_hitlines):
        flag(f"block {bi+1} ({qn}): hits {len(hits)} != table rows {len(trows)}")
    # FASTA may list rows it prints no alignment for among those it aligns (rows of empty alignments,
    # or of E() 1 and more, from tfasts/tfastm/tfastf/fastf): such a row is a table-only hit, after the
    # aligned ones; the rows are then matched to the hits by name and [frame], each once, in file order
    if b["table"] and not any(t.startswith("+-") for _, t in b["table"]) and len(hits) == len(trows):
        def row_key(t):
            mm = re.match(r"^(.*)\(\s*\d+\)\s*(?:\[([^\]]*)\])?\s", t.split("\t")[0])
            return (mm.group(1).split()[0] if mm and mm.group(1).split() else ""), (mm.group(2) if mm else None)

        free = list(range(len(hits)))
        matched = []
        for _, t in trows:
            name, frame = row_key(t)
            k = next((k for k in free if name and hits[k]["hit_id"].startswith(name)
                      and (frame is None or hits[k]["hsps"][0].get("frame") in (None, frame.strip()))), None)
            if k is None:
                matched = None
                break
            free.remove(k)
            matched.append(hits[k])
        if matched is not None:
            hits = matched
    # table value check (rows incl. '+-' rows: next hsp of the same hit)
    cols = b.get("cols") or []
    m9cols = b.get("m9cols") or []
    hi, si = -1, 0
    for ln, t in b["table"]:
        if t.startswith("+-"):
            si += 1
        else:
            hi += 1
            si = 0
        if hi >= len(hits):
            break
        h = hits[hi]
        if si >= len(h["hsps"]):
            flag(f"line {ln}: '+-' row but JSON hit {h['hit_id']} has only {len(h['hsps'])} hsps")
            continue
        s0 = h["hsps"][si]
        parts = t.split("\t")
        left = parts[0]
        if t.startswith("+-"):
            vals = left[2:].split()
            # '+-' rows have no name/length: values right-aligned to the columns
        else:
            mm = re.match(r"^(.*)\(\s*(\d+)\)\s*(\[[^\]]*\])?\s+(.*)$", left)
            if not mm:
                notes.append(f"unparsed table row line {ln}")
                continue
            rowname = mm.group(1).split()[0] if mm.group(1).split() else ""
            if rowname and h["hit_id"] != rowname and not h["hit_id"].startswith(rowname):
                flag(f"line {ln}: table row name {rowname!r} vs JSON hit_id {h['hit_id']!r}")
            if h.get("hit_length") != int(mm.group(2)):
                flag(f"line {ln}: table length {mm.group(2)} vs JSON hit_length {h.get('hit_length')} ({h['hit_id']})")
            vals = mm.group(4).split()
        ccols = cols[-len(vals):] if len(vals) <= len(cols) else cols
        pairs = list(zip(ccols, vals))
        if len(parts) > 1 and m9cols:
            pairs += list(zip(m9cols, parts[1].split()))
        qc = {}
        for c, v in pairs:
            v = num(v)
            if c == "bits" and "bits" in s0:
                if not close(s0["bits"], v):
                    flag(f"line {ln}: table bits {v} vs JSON bits {s0['bits']} ({h['hit_id']} hsp {si+1})")
            elif c.startswith("E(") and "evalue" in s0:
                ev = s0["evalue"]
                if isinstance(v, (int, float)) and isinstance(ev, (int, float)):
                    if not (close(ev, v) or (v != 0 and abs(ev - v) / abs(v) < 0.06) or (v == 0 and ev < 1e-300)):
                        flag(f"line {ln}: table E {v} vs JSON evalue {ev} ({h['hit_id']} hsp {si+1})")
            elif c in ("%_id", "%_sim", "alen"):
                jk = {"%_id": "identity", "%_sim": "similarity", "alen": "overlap"}[c]
                if jk in s0 and not close(s0[jk], v):
                    flag(f"line {ln}: table {c} {v} vs JSON {jk} {s0[jk]} ({h['hit_id']} hsp {si+1})")
            elif c in ("an0", "ax0", "an1", "ax1"):
                qc[c] = v
            elif c in ("s-w", "n-w", "lsw", "sw") and not h.get("aligned"):
                if s0.get("score") != v and s0.get("opt_score") != v:
                    flag(f"line {ln}: table-only {c} {v} vs JSON score {s0.get('score')} ({h['hit_id']} hsp {si+1})")
        for a_, b_, pre in (("an0", "ax0", "query"), ("an1", "ax1", "hit")):
            if a_ in qc and b_ in qc:
                lo, hi_ = min(qc[a_], qc[b_]), max(qc[a_], qc[b_])
                if (s0.get(pre + "_start"), s0.get(pre + "_end")) != (lo, hi_):
                    flag(f"line {ln}: table {a_}/{b_} {qc[a_]}-{qc[b_]} vs JSON {pre} {s0.get(pre+'_start')}-{s0.get(pre+'_end')} ({h['hit_id']} hsp {si+1})")
    # alignments vs aligned hsps
    flat = []
    for h in aligned:
        for s in h["hsps"]:
            flat.append((h, s))
    for a, (h, s) in zip(b["aligns"], flat):
        tag = a["tags"]
        hn = a["hit"].split()[0] if a["hit"].split() else ""
        if hn and h["hit_id"] != hn:
            flag(f"line {a['line']}: hit {hn!r} vs JSON hit_id {h['hit_id']!r}")
        scoretag = None
        for k, v in tag.items():
            if "_" not in k:
                continue
            pfx, key = k.split("_", 1)
            if key in TAGMAP:
                jk = TAGMAP[key]
                if jk == "identity" and pfx not in ("sw", "bs", "lsw", "gnw") and ("sw_ident" in tag or "bs_ident" in tag):
                    continue
                if jk not in s:
                    unknown_tags.add(f"{k}(missing {jk})")
                    continue
                vv = num(v)
                if jk == "frame":
                    if s[jk] != v.strip():
                        flag(f"line {a['line']}: {k} {v!r} vs JSON frame {s[jk]!r}")
                elif not close(s[jk], vv):
                    flag(f"line {a['line']}: {k} {v.strip()} vs JSON {jk} {s[jk]} ({h['hit_id']})")
            elif key in ("s-w opt", "n-w opt", "opt"):
                if s.get("opt_score") != num(v):
                    flag(f"line {a['line']}: {k} {v.strip()} vs JSON opt_score {s.get('opt_score')} ({h['hit_id']})")
            elif key == "score":
                if s.get("score") != num(v):
                    flag(f"line {a['line']}: {k} {v.strip()} vs JSON score {s.get('score')} ({h['hit_id']})")
            else:
                unknown_tags.add(k)
        # coordinates
        for side, pre in (("q", "query"), ("h", "hit")):
            d = a[side]
            if "al_start" not in d:
                continue
            st, sp = int(d["al_start"]), int(d["al_stop"])
            lo, hi = min(st, sp), max(st, sp)
            if side == "q":
                lo, hi = lo + shift, hi + shift
            js, je = s.get(pre + "_start"), s.get(pre + "_end")
            if (js, je) != (lo, hi):
                flag(f"line {a['line']}: {pre} al_start/al_stop {st}-{sp} vs JSON {js}-{je} ({h['hit_id']})")
            strand = s.get(pre + "_strand")
            if strand is not None and st != sp:
                exp = "-" if st > sp else "+"
                if strand != exp:
                    flag(f"line {a['line']}: {pre} {st}-{sp} implies strand {exp} vs JSON {strand} ({h['hit_id']})")
        if pre and "sq_len" in a["h"] and h.get("hit_length") is not None:
            pass

# --------- no-sequences differential ----------
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("query_seq", "hit_seq", "consensus")}
    if isinstance(o, list):
        return [strip(x) for x in o]
    return o

if JN:
    if len(JN) != len(J):
        flag(f"--no-sequences gives {len(JN)} lines vs {len(J)}")
    else:
        for i, (x, y) in enumerate(zip(J, JN)):
            if strip(x) != strip(y):
                # find first diff
                sx, sy = strip(x), strip(y)
                diffk = [k for k in set(sx) | set(sy) if sx.get(k) != sy.get(k)]
                detail = ""
                if "hits" in diffk:
                    for hx, hy in zip(sx["hits"], sy["hits"]):
                        if hx != hy:
                            for kk in set(hx) | set(hy):
                                if hx.get(kk) != hy.get(kk) and kk != "hsps":
                                    detail += f" {hx.get('hit_id')}.{kk}: {hx.get(kk)!r} vs {hy.get(kk)!r};"
                            for px, py in zip(hx["hsps"], hy["hsps"]):
                                for kk in set(px) | set(py):
                                    if px.get(kk) != py.get(kk):
                                        detail += f" {hx.get('hit_id')}.{kk}: {px.get(kk)!r} vs {py.get(kk)!r};"
                            if len(hx["hsps"]) != len(hy["hsps"]):
                                detail += f" {hx.get('hit_id')} hsps {len(hx['hsps'])} vs {len(hy['hsps'])}"
                            break
                flag(f"query {i+1}: --no-sequences output differs in {sorted(diffk)}:{detail[:300]}")

# --------- input sequence oracle ----------
AT_C = {}  # sequence id -> N-1 of an "@C:N" in its header (FASTA numbers its residues from N)


def read_fasta(p):
    seqs = {}
    try:
        name = None
        for l in open(p, encoding="latin-1"):
            if l.startswith(">"):
                hdr = l[1:].strip()
                name = hdr.split()[0] if hdr and not hdr[0].isspace() and hdr.split() else None
                key = name if name else f"__noname{len(seqs)}"
                n = 1
                while key in seqs:  # an id again (n2_fs.lib): the n-th sequence of that id as ID#n
                    n += 1
                    key = f"{name}#{n}"
                at_c = re.search(r"@C:(\d+)", hdr)
                if at_c:
                    AT_C[key] = int(at_c.group(1)) - 1
                seqs[key] = []
                cur_key = key
            elif seqs:
                seqs[cur_key].append(re.sub(r"[^A-Za-z*]", "", l))
    except OSError:
        return {}
    return {k: "".join(v) for k, v in seqs.items()}

args = shlex.split(cmdline)
prog = os.path.basename(args[0])
files = [x for x in args[1:] if os.path.exists(x.split(":")[0]) and not x.startswith("-")]
# FASTA takes the last two positionals
qfile = lfile = None
pos = []
skip_next = False
for x in args[1:]:
    pos.append(x)
pargs = [a for a in args if not a.isdigit()] if args[-1].isdigit() else args
qfile, lfile = (pargs[-2], pargs[-1]) if len(pargs) >= 3 else (None, None)
annot = ""
offq = offl = 0
for i, a in enumerate(args):
    if a == "-V" and i + 1 < len(args):
        annot = args[i + 1]
    if a == "-o" and i + 1 < len(args):
        offq, offl = [int(x) - 1 for x in args[i + 1].split()]
comp = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A", "N": "N"}
def rc(s):
    return "".join(comp.get(c, "N") for c in reversed(s.upper()))

translated_q = prog.startswith("fastx") or prog.startswith("fasty")
translated_h = prog.startswith("tfast")
peptide = prog[:5] in ("fasts", "fastm", "fastf") or prog[:6] in ("tfasts", "tfastm", "tfastf")
checked = 0
if qfile and lfile and os.path.exists(qfile.split(":")[0]) and os.path.exists(lfile):
    QS = read_fasta(qfile.split(":")[0])
    LS = read_fasta(lfile)
    if prog.startswith("lalign"):
        LS = {**QS, **LS}  # the library's sequence where the query file has one of its id too
    occurrence = {}  # query id -> how many queries of that id so far (a long query's segments: one)
    for q in J:
        if (q.get("query_segment") or {}).get("index", 1) == 1:
            occurrence[q["query_id"]] = occurrence.get(q["query_id"], 0) + 1
        nth = occurrence.get(q["query_id"], 1)
        for h in q.get("hits", []):
            for s in h["hsps"]:
                for side, store, tr in (("query", QS, translated_q or peptide), ("hit", LS, translated_h)):
                    seq = s.get(side + "_seq")
                    if seq is None or tr:
                        continue
                    sid = q["query_id"] if side == "query" else h["hit_id"]
                    if side == "query" and nth > 1:
                        sid = f"{sid}#{nth}"
                    full = store.get(sid)
                    if full is None:
                        continue
                    st, en = s.get(side + "_start"), s.get(side + "_end")
                    if st is None:
                        continue
                    off = (offq if side == "query" else offl) + AT_C.get(sid, 0)
                    # a library of one id twice (n2_fs.lib's GT8.7): any sequence of that id
                    fulls, k = [full], 2
                    while side == "hit" and f"{sid}#{k}" in store:
                        fulls.append(store[f"{sid}#{k}"])
                        k += 1
                    subs = []
                    for full in fulls:
                        if annot:
                            full = "".join(c for c in full if c not in annot)
                        sub = full[st - 1 - off:en - off].upper().replace("U", "T")
                        subs.append(rc(sub) if s.get(side + "_strand") == "-" else sub)
                    got = re.sub(r"[-/\\ ]", "", seq).upper().replace("U", "T")
                    checked += 1
                    if got not in subs:
                        sub = subs[0]
                        # -N pieces: hit side coordinates may be relative; report
                        flag(f"{side} seq of {q['query_id']}/{h['hit_id']} ({st}-{en} {s.get(side+'_strand')}) != input residues: got {got[:25]}.. expected {sub[:25]}..")
res["seq_checks"] = checked
res["histogram_rows"] = hist_rows

# --------- Biopython ----------
bio = "n/a"
try:
    if not all_blocks:  # Biopython 1.88 loops on a file without a query block (FASTA failed)
        raise StopIteration("no query block")
    import signal
    import warnings

    from Bio import SearchIO
    def _alarm(*a):
        raise TimeoutError("Biopython did not finish in 20 s")
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    warnings.simplefilter("ignore")
    qrs = list(SearchIO.parse(m10, "fasta-m10"))
    signal.alarm(0)
    if set_aside and len(qrs) == len(all_blocks):  # Biopython reads the blocks we set aside
        qrs = [x for i, x in enumerate(qrs) if i not in set_aside]
    bio = f"ok({len(qrs)} queries)"
    bdiff = []
    # map JSON queries having aligned hits, in order
    jq = [q for q in J if any(h.get("aligned") for h in q.get("hits", []))]
    if len([x for x in qrs if len(x)]) != len(jq):
        bdiff.append(f"Biopython {len([x for x in qrs if len(x)])} queries with hits vs JSON {len(jq)}")
    byid = {}
    for q in jq:
        byid.setdefault(q["query_id"], []).append(q)
    pairs = []
    for qr in qrs:
        lst = byid.get(qr.id)
        if lst:
            pairs.append((qr, lst.pop(0)))
        elif len(qr):
            bdiff.append(f"Biopython query {qr.id!r} ({len(qr)} hits) has no JSON query with aligned hits of that id")
    for qr, q in pairs:
        if qr.id != q["query_id"]:
            bdiff.append(f"query id bio {qr.id!r} vs json {q['query_id']!r}")
        ah0 = [h for h in q["hits"] if h.get("aligned")]
        # Biopython merges hits with the same id (both strands, -N pieces): do the same
        grouped = {}
        for h in ah0:
            if h["hit_id"] in grouped:
                grouped[h["hit_id"]]["hsps"] = grouped[h["hit_id"]]["hsps"] + h["hsps"]
            else:
                grouped[h["hit_id"]] = dict(h)
        ah = list(grouped.values())
        bh = list(qr)
        if len(bh) != len(ah):
            bdiff.append(f"{qr.id}: bio hits {len(bh)} vs json aligned {len(ah)}")
        for bhit, jhit in zip(bh, ah):
            if bhit.id != jhit["hit_id"]:
                bdiff.append(f"{qr.id}: hit id bio {bhit.id!r} vs json {jhit['hit_id']!r}")
            if len(bhit.hsps) != len(jhit["hsps"]):
                bdiff.append(f"{qr.id}/{bhit.id}: bio hsps {len(bhit.hsps)} vs json {len(jhit['hsps'])}")
            for bs, js in zip(bhit.hsps, jhit["hsps"]):
                ev = getattr(bs, "evalue", None)
                if ev is not None and "evalue" in js and not close(ev, js["evalue"]):
                    bdiff.append(f"{qr.id}/{bhit.id}: evalue bio {ev} vs json {js['evalue']}")
                try:
                    seg = q.get("query_segment") or {}
                    sh = seg["offset"] - seg["printed_offset"] if "printed_offset" in seg else 0
                    bq = (bs.query_start + 1 + sh, bs.query_end + sh)
                    bhh = (bs.hit_start + 1, bs.hit_end)
                except Exception:
                    continue
                jqc = (js.get("query_start"), js.get("query_end"))
                jhc = (js.get("hit_start"), js.get("hit_end"))
                if bq != jqc:
                    bdiff.append(f"{qr.id}/{bhit.id}: query coords bio(1-based) {bq} vs json {jqc}")
                if bhh != jhc:
                    bdiff.append(f"{qr.id}/{bhit.id}: hit coords bio(1-based) {bhh} vs json {jhc}")
                try:
                    if js.get("query_seq") is not None and str(bs.query.seq) != js["query_seq"]:
                        bdiff.append(f"{qr.id}/{bhit.id}: query seq bio {str(bs.query.seq)[:20]}.. vs json {js['query_seq'][:20]}..")
                    if js.get("hit_seq") is not None and str(bs.hit.seq) != js["hit_seq"]:
                        bdiff.append(f"{qr.id}/{bhit.id}: hit seq bio {str(bs.hit.seq)[:20]}.. vs json {js['hit_seq'][:20]}..")
                except Exception:
                    pass
    res["bio_diffs"] = bdiff[:25]
    res["bio_ndiffs"] = len(bdiff)
except StopIteration as e:
    bio = f"n/a ({e})"
except Exception as e:
    bio = f"error: {type(e).__name__}: {str(e)[:120]}"
res["bio"] = bio
res["issues"] = issues
res["ext_json_inf"] = bool(res_ext)
res["notes"] = notes[:10]
res["unknown_tags"] = sorted(unknown_tags)
print(json.dumps(res))
