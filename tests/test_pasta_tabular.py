"""FASTA's tabular output (``-m 8``, ``8C``, ``8CB``, ``8CC``, ``8CBL``; alone, with ``-d``, with ``-m 10``)
and its ``-m 9`` family without ``-m 10`` read into the searches/hits model (issue 43, item 4).

Every real sample in samples/pasta_tab/ (commands in its make_samples.sh) is checked value by value
against its own lines, read here without the parser; the samples that are the same search as one of
samples/pasta/*.m10 against what the -m 10 parser read there; one against Biopython's reader; damaged
copies against their ``file:line: reason``; the format chosen by content; ``parse`` and ``load`` as
users run them (load against the suite's server).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest import parsers
from ingest.errors import ParseError
from ingest.parsers import pasta, tabular

REPO = Path(__file__).resolve().parent.parent
TAB = REPO / "samples" / "pasta_tab"
M10 = REPO / "samples" / "pasta"
BIN = Path(sys.executable).parent / "sci-ingest"
EVERY = sorted(p for p in TAB.iterdir() if p.suffix in (".m8", ".m8c", ".m8cb", ".m9", ".m10"))
# -m 9 family without -m 10 (format pasta-m9); the F10 file of -m "F10 FILE" -m 9c holds the -m 9c layout
M9 = [p for p in EVERY if p.suffix == ".m9" or p.name == "ssearch36_F10_9c_file.m10"]
SAMPLES = [p for p in EVERY if p not in M9]  # -m 8 family (format pasta-m8)
# tabular sample -> the -m 10 sample of the same search
TWINS = {"ssearch36_prot_multi.m8c": "ssearch36_prot_multi.m10", "ssearch36_dna_ref.m8cb": "ssearch36_dna_ref.m10",
         "fastx36.m8c": "fastx36.m10", "tfastx36_cigar.m8c": "tfastx36.m10",
         "ssearch36_dna_pieces.m8c": "ssearch36_dna_pieces.m10", "ssearch36_nameless.m8c": "ssearch36_nameless.m10",
         "ssearch36_nostats.m8c": "ssearch36_nostats.m10", "fasts36_peptides.m8cb": "fasts36_peptides.m10"}
TWINS9 = {"ssearch36_9c.m9": "ssearch36_m9c.m10", "ssearch36_dna_9B.m9": "ssearch36_dna_m9B.m10",
          "ssearch36_9i.m9": "ssearch36_m9i.m10"}


def _parsed(path: Path, **kw) -> list[dict]:
    with open(path, "rb") as fh:
        return list(tabular.parse_dicts(fh, str(path), **kw))


def _own_lines(path: Path):
    """(queries, rows) as the file prints them: each ``# Query:`` line with its ``# N hits found``
    (None without comments), and every row's fields, read here without the parser."""
    queries, rows, command = [], [], ""
    for line in path.read_text().splitlines():
        if line.startswith("# ") and " -m " in line:
            command = line
        elif line.startswith("# Query: "):
            queries.append({"title": line[len("# Query: "):], "found": None, "command": command})
        elif line.startswith("# ") and line.endswith(" hits found"):
            queries[-1]["found"] = int(line.split()[1])
        elif line.count("\t") >= 11:
            rows.append(line.split("\t"))
    return queries, rows


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_value_is_the_files_own(path):
    queries, rows = _own_lines(path)
    got = _parsed(path)
    assert rows, path
    if queries:  # with comment lines: one query each, its hits counted as FASTA counted them
        assert len(got) == len(queries)
        for q, own in zip(got, queries):
            assert own["title"].startswith(q["query_id"] + " ") or own["title"].startswith(" " + q["query_id"] + " ")
            if own["command"].startswith("# fasts36"):  # 6 peptides, 39 residues (the L column: 44, the commas)
                assert (q["query_length"], q["query_fragments"]) == (39, 6)
                assert own["title"].endswith(" - 39 aa in 6 fragments") and {r[1] for r in rows} == {"44"}
            else:
                assert own["title"].endswith(f" - {q['query_length']} aa") or own["title"].endswith(
                    f" - {q['query_length']} nt")
            assert len(q["hits"]) == own["found"]
            assert q["version"] == "36.3.8i Nov, 2022" and q["library"].startswith("inputs/")
    else:  # a query is its run of rows
        assert [q["query_id"] for q in got] == list(dict.fromkeys(r[0] for r in rows))
    hsps = [(q, h, s) for q in got for h in q["hits"] for s in h["hsps"]]
    assert len(hsps) == len(rows)
    for (q, h, s), row in zip(hsps, rows):
        if len(row) >= 14:  # L: the lengths after the ids
            qid, qlen, sid, slen, *rest = row
            assert (q["query_length"] + q.get("query_fragments", 1) - 1, h["hit_length"]) == (int(qlen), int(slen))
        else:
            qid, sid, *rest = row
            assert "hit_length" not in h or "query_seq" in s  # an -m 10 block's sq_len
        pid, alen, mism, gapo, qs, qe, ss, se, ev, bits = rest[:10]
        assert (q["query_id"], h["hit_id"]) == (qid, sid) or qid == "" and h["hit_id"] == sid  # a nameless query
        if "query_seq" in s:  # a row with its -m 10 block beside (ssearch36_8CB_and_10.m10): the block's values
            assert s["extra"]["mismatches"] == int(mism) and (s["query_start"], s["query_end"]) == tuple(
                sorted((int(qs), int(qe))))
            continue
        assert f"{s['identity'] * 100:.2f}" == pid
        assert (s["overlap"], s["extra"]["mismatches"], s["extra"]["gap_opens"]) == (int(alen), int(mism), int(gapo))
        if " -z -1 " in (q.get("command") or ""):  # no statistics: FASTA's columns are not E() and bits
            assert "evalue" not in s and "bits" not in s
        else:
            assert (s["evalue"], s["bits"]) == (float(ev), float(bits))
        for side, a, b in (("query", int(qs), int(qe)), ("hit", int(ss), int(se))):
            assert (s[f"{side}_start"], s[f"{side}_end"]) == (min(a, b), max(a, b))
            if a > b:
                assert s[f"{side}_strand"] == "-"
            elif q.get(f"{'library' if side == 'hit' else 'query'}_type") == "dna":
                assert s[f"{side}_strand"] == "+"
            else:
                assert f"{side}_strand" not in s
        assert s["extra"].get("al_code") == (rest[10] if len(rest) == 11 else None)
        for absent in ("score", "opt_score", "z_score", "similarity", "query_seq", "hit_seq", "frame"):
            assert absent not in s  # what a table does not print is not invented


@pytest.mark.parametrize("name", sorted(TWINS))
def test_the_same_search_as_its_m10_sample(name):
    """Hits, alignments, coordinates, strands, E-values and bits equal the -m 10 parser's of the same
    search; the hit ids too, but for the gi|NNN| FASTA drops in -m 10 alignments."""
    tab = _parsed(TAB / name)
    with open(M10 / TWINS[name], "rb") as fh:
        m10 = list(pasta.parse_dicts(fh, TWINS[name]))
    assert len(tab) == len(m10)
    peptides = name.startswith("fasts36")
    for t, m in zip(tab, m10):
        for key in ("query_id", "query_description", "query_length", "query_fragments", "query_type", "library_type",
                    "version", "library", "query_index"):
            assert t.get(key) == m.get(key), key
        assert len(t["hits"]) == len(m["hits"])
        for ht, hm in zip(t["hits"], m["hits"]):
            assert ht["hit_id"] == hm["hit_id"] or ht["hit_id"].startswith("gi|") and ht["hit_id"].endswith(
                hm["hit_id"]) or ht["hit_id"] == "" and name == "ssearch36_nameless.m8c"  # no name in the table
            assert ht["rank"] == hm["rank"]
            if "hit_length" in ht:
                assert ht["hit_length"] == hm["hit_length"]
            assert len(ht["hsps"]) == len(hm["hsps"])
            for st, sm in zip(ht["hsps"], hm["hsps"]):
                for key in ("query_start", "query_end", "hit_start", "hit_end", "query_strand", "hit_strand",
                            "evalue", "bits"):
                    if peptides and key in ("evalue", "bits"):  # FASTA's -m 8 row and -m 10 block differ
                        assert (st[key], sm[key]) == {"evalue": (3.2e-30, 4.6e-33), "bits": (114.7, 124.1)}[key]
                        continue
                    assert st.get(key) == sm.get(key), (ht["hit_id"], key)


def test_biopython_reads_the_first_query_alike():
    """Bio.Align.tabular (1.88) takes the '# Fields:' line at its word: it reads -m 8CBL, whose columns
    are those it names, up to the second query's comments (then an AssertionError)."""
    Align = pytest.importorskip("Bio.Align")
    path = TAB / "ssearch36_dna_ref.m8cb"
    theirs = []
    with pytest.raises(AssertionError):
        for alignment in Align.parse(str(path), "tabular"):
            theirs.append(alignment)
    ours = [s for h in _parsed(path)[0]["hits"] for s in h["hsps"]]
    assert len(theirs) == len(ours) == 24
    for a, s in zip(theirs, ours):
        (t0, t1), (q0, q1) = a.coordinates[:, [0, -1]].tolist()  # 0-based, end excluded, reversed on a - strand
        assert (min(t0, t1) + 1, max(t0, t1)) == (s["hit_start"], s["hit_end"])
        assert (min(q0, q1) + 1, max(q0, q1)) == (s["query_start"], s["query_end"])
        assert a.annotations["evalue"] == s["evalue"] and a.annotations["bit score"] == s["bits"]
        assert a.annotations["mismatches"] == s["extra"]["mismatches"]
        assert round(a.annotations["% identity"] / 100, 4) == s["identity"]


def test_m0_alignments_after_the_rows_are_skipped_with_a_warning():
    warned = []
    got = _parsed(TAB / "ssearch36_d1.m8", warn=warned.append)
    assert [len(q["hits"]) for q in got] == [9, 1, 7]
    assert len(warned) == 1 and "-m 0 alignments printed after the table rows (-d) are not read" in warned[0]
    assert warned[0].startswith(f"{TAB / 'ssearch36_d1.m8'}:10: ")


def _block_values(path: Path, key: str) -> list[str]:
    """The values of the file's own '; KEY:' lines, in order (the -m 10 blocks), read without a parser."""
    return [line.split(": ", 1)[1] for line in path.read_text().splitlines() if line.startswith(f"; {key}:")]


def test_m10_blocks_beside_the_table_are_joined_to_their_rows():
    """-m 8CB -m 10 -d 2: the first two hits have their -m 10 blocks' values (as a -m 10 file's aligned
    hits), their rows' mismatches, gap opens and BTOP in extra; FEPE (no block) its rows'."""
    path = TAB / "ssearch36_8CB_and_10.m10"
    warned = []
    (q,) = _parsed(path, warn=warned.append)
    assert warned == [] and q["params"]["pg_name"] == "ssearch36" and q["params"]["pg_matrix"] == "BL50 (15:-5)"
    gt, ok, fepe = q["hits"]
    _, rows = _own_lines(path)
    for hit, row, n in ((gt, rows[0], 0), (ok, rows[1], 1)):
        (s,) = hit["hsps"]
        assert hit["aligned"] and hit["hit_id"] == row[1]
        assert s["score"] == int(_block_values(path, "sw_score")[n])
        assert s["z_score"] == float(_block_values(path, "sw_z-score")[n])
        assert s["identity"] == float(_block_values(path, "sw_ident")[n])  # the block's, not the row's %
        assert s["overlap"] == int(_block_values(path, "sw_overlap")[n])
        assert (s["query_start"], s["query_end"]) == (int(row[6]), int(row[7]))
        assert len(s["query_seq"]) == len(s["hit_seq"]) == s["overlap"]
        assert s["extra"] == {"mismatches": int(row[4]), "gap_opens": int(row[5]), "al_code": row[12]}
    assert [len(h["hsps"]) for h in q["hits"]] == [1, 1, 2] and "query_seq" not in fepe["hsps"][0]
    assert fepe["hsps"][1]["identity"] == 0.3333


def test_m10_blocks_beside_a_dna_table_are_the_m10_samples_aligned_hits():
    """-m 10,8CC -d 3 of the search of ssearch36_dna_ref.m10: each query's first 3 hits are its aligned
    hits there, value for value (sequences, scores, strands, coordinates, the sequence's length); the
    others are their rows, at the same coordinates."""
    got = _parsed(TAB / "ssearch36_dna_ref_10_8CC.m10")
    with open(M10 / "ssearch36_dna_ref.m10", "rb") as fh:
        m10 = list(pasta.parse_dicts(fh, "ssearch36_dna_ref.m10"))
    assert len(got) == len(m10) == 2
    for t, m in zip(got, m10):
        assert len(t["hits"]) == len(m["hits"]) == 18
        for n, (ht, hm) in enumerate(zip(t["hits"], m["hits"])):
            assert ht["hit_id"].endswith(hm["hit_id"]) and len(ht["hsps"]) == len(hm["hsps"])
            for st, sm in zip(ht["hsps"], hm["hsps"]):
                if n < 3:
                    assert {k: v for k, v in st.items() if k != "extra"} == {
                        k: v for k, v in sm.items() if k != "extra"}
                    assert set(st["extra"]) == {"mismatches", "gap_opens", "al_code"} | set(sm.get("extra") or ())
                else:
                    assert "query_seq" not in st and all(st[k] == sm[k] for k in (
                        "query_start", "query_end", "hit_start", "hit_end", "query_strand", "hit_strand", "evalue"))
            assert (ht.get("hit_length") == hm["hit_length"]) == (n < 3)  # no L column: only a block's


@pytest.mark.parametrize("edit, line, words", [
    (lambda ls: ls.__setitem__(32, "; al_start: 54\n"), 12, "-m 10 block 1 ('GT8.7') aligns (54, 191, 60, 195)"),
    (lambda ls: ls.__setitem__(24, "; sw_score: many\n"), 25, "is not a number"),
])
def test_a_bad_m10_block_beside_the_table_names_its_line(tmp_path, edit, line, words):
    path = _damaged(tmp_path, "ssearch36_8CB_and_10.m10", edit)
    with pytest.raises(ParseError) as info:
        _parsed(path)
    assert info.value.line == line and words in info.value.reason, info.value


def test_the_format_is_chosen_by_content(tmp_path):
    for path in SAMPLES:
        assert parsers.detect(path).name == "pasta-m8", path  # ssearch36_8CB_and_10.m10 too
    for path in M9:
        assert parsers.detect(path).name == "pasta-m9", path
        renamed = tmp_path / (path.stem + ".m10")
        renamed.write_bytes(path.read_bytes())
        assert parsers.detect(renamed).name == "pasta-m9", path  # by its command line
    for path in M10.glob("*.m10*"):
        assert parsers.detect(path).name == "pasta", path
    for path in (REPO / "samples" / "materials").iterdir():
        if path.name.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")):
            assert parsers.detect(path).name == "materials", path


def _damaged(tmp_path, name: str, edit) -> Path:
    lines = (TAB / name).read_text().splitlines(keepends=True)
    edit(lines)
    out = tmp_path / name
    out.write_text("".join(lines))
    return out


def _field(n: int, value: str):
    def edit(lines):
        at = next(i for i, x in enumerate(lines) if "\t" in x)
        row = lines[at].rstrip("\n").split("\t")
        row[n] = value
        lines[at] = "\t".join(row) + "\n"
    return edit


# (sample, edit, line reported, words of the reason)
BAD = {
    "word_for_a_number": ("ssearch36_prot_multi.m8c", _field(4, "x"), 7, "mismatches 'x' is not a whole number"),
    "coordinate_zero": ("ssearch36_prot_multi.m8c", _field(6, "0"), 7,
                        "q. start '0' is not a whole number of at least 1"),
    "percent_over_100": ("ssearch36_prot_multi.m8c", _field(2, "100.5"), 7, "is not a percentage"),
    "more_mismatches_than_columns": ("ssearch36_prot_multi.m8c", _field(4, "999"), 7, "999 mismatches in an alignment"),
    "negative_evalue": ("ssearch36_prot_multi.m8c", _field(10, "-1"), 7, "evalue '-1' is negative"),
    "protein_backwards": ("ssearch36_prot_multi.m8c", _field(9, "1"), 7, "on a protein side"),
    "a_field_missing": ("fasta36_dna.m8", lambda ls: ls.__setitem__(1, ls[1].rsplit("\t", 1)[0] + "\n"), 2,
                        "has 11 tab-separated fields"),
    "a_row_dropped": ("ssearch36_prot_multi.m8c", lambda ls: ls.pop(7), 6,
                      "'# 9 hits found' but its 8 rows (to line 14) are 8 hits (8 runs of one library sequence"),
    "truncated": ("ssearch36_prot_multi.m8c", lambda ls: ls.pop(), 37, "truncated?"),
    "a_row_of_another_query": ("ssearch36_prot_multi.m8c", _field(0, "OTHER"), 7, "a row of query 'OTHER'"),
    "garbage_line": ("fasta36_dna.m8", lambda ls: ls.insert(3, "hello world\n"), 4, "not a table row"),
    "a_count_without_its_run": ("fasta36_dna.m8", lambda ls: ls.insert(0, "# FASTA processed 2 queries\n"), 1,
                                "unexpected comment line here"),
    "a_second_database_line": ("ssearch36_prot_multi.m8c", lambda ls: ls.insert(4, "# Database: other.fa\n"), 5,
                               "unexpected comment line here"),
    "queries_miscounted": ("fastx36.m8c", lambda ls: ls.__setitem__(-1, "# FASTX processed 3 queries\n"), 28,
                           "the run holds 2 queries"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rows_are_refused_at_their_line(tmp_path, case):
    name, edit, line, words = BAD[case]
    path = _damaged(tmp_path, name, edit)
    with pytest.raises(ParseError) as info:
        _parsed(path)
    assert info.value.line == line, info.value
    assert words in info.value.reason, info.value
    assert str(info.value).startswith(f"{path}:{line}: ")


def _cli(*args, env=None):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_parse_reads_a_folder_of_tabular_files(tmp_path):
    proc = _cli("parse", TAB, env={"SCI_INGEST_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == sum(len(_parsed(p)) for p in SAMPLES) + sum(len(_parsed9(p)) for p in M9) == 23 + 11
    assert sum(len(h["hsps"]) for q in lines for h in q["hits"]) == sum(
        len(_own_lines(p)[1]) for p in SAMPLES) + sum(len(rows) for p in M9 for _, rows in _own_tables(p))
    # the -m 0 alignments after the rows (one -m 8 file) or the tables (every -m 9 file), once a file;
    # -z -1's E() and bits left out (one file)
    assert proc.stderr.count("warning: ") == 1 + len(M9) + 1


def test_comments_without_a_query_are_refused(tmp_path):
    path = tmp_path / "only.m8c"
    path.write_text("".join((TAB / "fastx36.m8c").read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(ParseError) as info:
        _parsed(path)
    assert info.value.line == 2 and "no query: no '# Query:' line and no table row" in info.value.reason


def test_parse_names_a_bad_row(tmp_path):
    path = _damaged(tmp_path, "fastx36.m8c", _field(11, "many"))
    proc = _cli("parse", path, env={"SCI_INGEST_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {path}:7: bit score 'many' is not a number"


def test_load_stores_tabular_searches(mongo_uri, db, tmp_path):
    env = {"MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    os.environ.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = _cli("load", "--json", "-q", "--db", db.name, "--workers", "1", TAB, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["files"]["files_loaded"] == len(EVERY)
    assert db.searches.count_documents({}) == 23 + 11
    assert db.searches.count_documents({"source.format": "pasta-m8"}) == 23
    assert db.searches.count_documents({"source.format": "pasta-m9"}) == 11
    rows = sum(len(_own_lines(p)[1]) for p in SAMPLES)
    assert sum(len(h["hsps"]) for h in db.hits.find({"source.path": {"$in": list(map(str, SAMPLES))}})) == rows
    mixed = db.searches.find_one({"source.path": str(TAB / "ssearch36_8CB_and_10.m10")})
    assert mixed["n_hits"] == 3 and mixed["query_id"] == "GTT1_DROME"
    none = db.searches.find_one({"query_id": "H10_HUMAN", "source.path": str(TAB / "ssearch36_prot_multi.m8c")})
    assert none["n_hits"] == 0 and none["query_length"] == 193


# ------------------------------------------------------------------ -m 9 family without -m 10

def _parsed9(path: Path, **kw) -> list[dict]:
    with open(path, "rb") as fh:
        return list(parsers.get("pasta-m9").load()(fh, str(path), **kw))


def _own_tables(path: Path):
    """Each query's best-scores table as the file prints it: (column names, rows), rows split into
    the score columns and the -m 9 columns (after the tab), read here without the parser."""
    tables, rows = [], None
    for line in path.read_text().splitlines():
        if line.startswith("The best scores are:"):
            head, _, head9 = line[len("The best scores are:"):].partition("\t")
            rows = []
            tables.append(((head.split(), head9.split()), rows))
        elif rows is not None and line.strip():
            left, _, nine = line.partition("\t")
            rows.append((left.split(), nine.split("\t")[0].split(), nine.partition("\t")[2]))
        else:
            rows = None
    return tables


@pytest.mark.parametrize("path", M9, ids=lambda p: p.name)
def test_every_m9_table_value_is_the_files_own(path):
    got = _parsed9(path)
    text = path.read_text()
    assert len(got) == sum(1 for line in text.splitlines() if ">>>" in line[:8] and line.strip()[0].isdigit())
    hsps = [s for q in got for h in q["hits"] for s in h["hsps"]]
    rows = [(cols, row) for cols, table in _own_tables(path) for row in table]
    assert len(hsps) == len(rows) > 0
    for s, ((cols, cols9), (left, nine, code)) in zip(hsps, rows):
        values = dict(zip(cols, left[-len(cols):]))
        assert s["evalue"] == float(next(v for k, v in values.items() if k.startswith("E(")))
        assert s["bits"] == float(values["bits"])
        if cols9:  # -m 9, 9c, 9C, 9B: the columns after the tab
            nines = dict(zip([c for c in cols9 if c != "aln_code"], nine))
            assert (s["identity"], s["similarity"], s["overlap"]) == (
                float(nines["%_id"]), float(nines["%_sim"]), int(nines["alen"]))
            for side, a, b in (("query", "an0", "ax0"), ("hit", "an1", "ax1")):
                lo, hi = sorted((int(nines[a]), int(nines[b])))
                assert (s[f"{side}_start"], s[f"{side}_end"]) == (lo, hi)
            assert s["extra"].get("al_code") == (code.strip() or None)
        else:  # -m 9i: %_id %_sim alen as plain columns
            assert (s["identity"], s["overlap"]) == (float(values["%_id"]), int(values["alen"]))
        assert "query_seq" not in s and "z_score" not in s


@pytest.mark.parametrize("name", sorted(TWINS9))
def test_m9_alone_is_the_table_of_its_m10_twin(name):
    """The same search with -m 10 beside: the same hits and alignments, in the same order, with the
    same coordinates, strands, E(), bits and encoded alignments (the -m 10 file's aligned hits keep
    their alignment blocks' values; the -m 9 file's come from its table)."""
    alone = _parsed9(TAB / name)
    with open(M10 / TWINS9[name], "rb") as fh:
        m10 = list(pasta.parse_dicts(fh, TWINS9[name]))
    assert len(alone) == len(m10) == 1
    a, m = alone[0], m10[0]
    for key in ("query_id", "query_description", "query_length", "query_type", "library_type", "program",
                "version", "algorithm", "statistics", "library", "library_sequences", "library_residues"):
        assert a.get(key) == m.get(key), key
    assert [h["hit_id"] for h in a["hits"]] == [h["hit_id"] for h in m["hits"]]
    assert not any(h["aligned"] for h in a["hits"]) and any(h["aligned"] for h in m["hits"])
    for ha, hm in zip(a["hits"], m["hits"]):
        assert (ha["rank"], ha["hit_length"], len(ha["hsps"])) == (hm["rank"], hm["hit_length"], len(hm["hsps"]))
        for sa, sm in zip(ha["hsps"], hm["hsps"]):
            for key in ("query_start", "query_end", "hit_start", "hit_end", "query_strand", "hit_strand", "evalue",
                        "bits", "overlap"):
                if key in sa or not name.endswith("9i.m9"):  # -m 9i's table has no coordinates
                    assert sa.get(key) == sm.get(key), (ha["hit_id"], key)
            assert (sa.get("extra") or {}).get("al_code") == (sm.get("extra") or {}).get("al_code")


def test_m9_alone_with_its_alignments_damaged_still_refuses_a_bad_table(tmp_path):
    """The display is skipped, the table is not: a bad table row is the -m 10 parser's 'file:line: reason'."""
    lines = (TAB / "ssearch36_9c.m9").read_text().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith("The best scores are:")) + 1
    lines[at] = lines[at].replace("\t", " ", 1)
    path = tmp_path / "bad.m9"
    path.write_text("".join(lines))
    with pytest.raises(ParseError) as info:
        _parsed9(path)
    assert info.value.line == at + 1 and "best-scores table row: expected 15 -m 9 columns" in info.value.reason


def test_lalign36_m9_alone_is_refused():
    """lalign36 prints no best-scores table: its -m 9c output holds its alignments only in the -m 0
    display, which is not read; refused at the first alignment (not 0 hits)."""
    path = REPO / "tests" / "data" / "pasta_tab" / "lalign36_9c.m9"
    assert parsers.detect(path).name == "pasta-m9"
    with pytest.raises(ParseError) as info:
        _parsed9(path)
    assert info.value.line == 28 and "without a best-scores table" in info.value.reason
    assert path.read_text().splitlines()[27].startswith(">>")


def test_a_gzipped_table_parses_as_the_plain_one(tmp_path):
    """Chosen by its decompressed first bytes: a .gz of a table (named .txt.gz here, no suffix of ours)."""
    plain = TAB / "fastx36.m8c"
    packed = tmp_path / "fastx36.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert parsers.detect(packed).name == "pasta-m8"
    env = {"SCI_INGEST_HOME": str(tmp_path / "home")}
    one, two = _cli("parse", plain, env=env), _cli("parse", packed, env=env)
    assert one.returncode == two.returncode == 0, two.stderr
    assert one.stdout == two.stdout and len(one.stdout.splitlines()) == 2


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_spilled_query_is_the_held_one(path):
    """Past ``spill`` hits a query's hits go to a temporary file (memory bounded whatever one query
    holds): the same hits in the same order, regrouped ones too."""
    held = _parsed(path, spill=None)
    spilled = _parsed(path, spill=1)
    assert [{k: v for k, v in q.items() if k != "hits"} for q in held] == [
        {k: v for k, v in q.items() if k != "hits"} for q in spilled]
    assert [q["hits"] for q in held] == [list(q["hits"]) for q in spilled]
    assert all(not isinstance(q["hits"], list) for q in spilled if len(q["hits"]))
