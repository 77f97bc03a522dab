"""``sci-ingest export hits --format bed|gff3|blast-tab`` (and ``query``) checked by the real tools.

The bundled ``samples/pasta`` are loaded into a database of their own; the CLI runs as a
subprocess; ``bedtools`` (sort, merge, intersect) and ``gt gff3validator`` / ``gt stat``
(genometools) read what it wrote, and their counts are compared with what this file computes
from the hit documents read through pymongo (its own strand, interval and overlap code, not
the exporter's).  The BLAST table is compared with FASTA's own ``-m 8CBL`` output of the same
search (``samples/pasta_tab/ssearch36_dna_ref.m8cb``): length, mismatches and gap opens as its
BTOP strings give them.  A tool that is absent skips its test, saying which Debian package has it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_export import cli

REPO = Path(__file__).resolve().parent.parent
BEDTOOLS, GT = shutil.which("bedtools"), shutil.which("gt")
needs_bedtools = pytest.mark.skipif(BEDTOOLS is None, reason="bedtools is not installed (Debian package bedtools)")
needs_gt = pytest.mark.skipif(GT is None, reason="gt is not installed (Debian package genometools)")
HOSTILE_TAB = "chr 1\tx;y=z%25\u00e9"  # a space, a tab, ; = % and a non-ASCII letter
HOSTILE_PLAIN = "id;a=b%2C,c&\u00e9|d"  # no whitespace: BLAST's columns hold it, BED does not (not ASCII)


@pytest.fixture(scope="module")
def loaded(mongo_uri, mongo_client):
    from ingest.load import LoadOptions, load_paths

    name = f"t_genomic_{uuid.uuid4().hex[:8]}"
    load_paths(mongo_uri, name, [str(REPO / "samples" / "pasta")], "test-run", LoadOptions(workers=1, progress=False),
               server_kind="test")
    yield mongo_client[name]
    mongo_client.drop_database(name)


def tool(*argv) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (argv, proc.stderr)
    return proc.stdout


def expected(db) -> list[dict]:
    """Every HSP with coordinates, as this test reads the documents: the library strand its own way."""
    out = []
    for doc in db.hits.find({}, {"hsps.query_seq": 0, "hsps.hit_seq": 0, "hsps.consensus": 0}):
        for k, h in enumerate(doc["hsps"], start=1):
            if "hit_start" not in h:
                continue
            q, s = h.get("query_strand"), h.get("hit_strand")
            strand = ("+" if q == s else "-") if (q and s) else (s or ".")
            out.append({"key": f"{doc['_id']}#{k}", "chrom": doc["hit_id"], "start": h["hit_start"] - 1,
                        "end": h["hit_end"], "strand": strand, "doc": doc, "hsp": h, "search": doc["search_id"]})
    return out


def merged(intervals) -> int:
    """How many intervals bedtools merge leaves: overlapping or touching ones (start <= end so far) joined."""
    n = 0
    for _, group in _by(intervals, lambda i: i[0]).items():
        end = None
        for start, stop in sorted((i[1], i[2]) for i in group):
            if end is None or start > end:
                n += 1
                end = stop
            else:
                end = max(end, stop)
    return n


def _by(items, key) -> dict:
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


@pytest.fixture(scope="module")
def exports(mongo_uri, loaded, tmp_path_factory):
    folder = tmp_path_factory.mktemp("genomic")
    runs = {}
    for fmt, name in (("bed", "hits.bed"), ("gff3", "hits.gff3"), ("blast-tab", "hits.tsv")):
        runs[fmt] = cli(mongo_uri, loaded.name, "export", "hits", "--format", fmt, "--out", name, "--json",
                        cwd=folder)
    return folder, runs


def test_every_hsp_is_a_line_or_set_aside_with_its_reason(loaded, exports):
    folder, runs = exports
    hsps = sum(len(d["hsps"]) for d in loaded.hits.find({}, {"hsps.hit_start": 1}))
    want = expected(loaded)
    for fmt, proc in runs.items():
        assert proc.returncode == 2, proc.stderr  # the table-only hits have no coordinates: set aside, exit 2
        report = json.loads(proc.stdout)
        assert report["lines"] == len(want) and report["lines"] + report["set_aside"] == hsps, fmt
        assert report["set_aside_by"] == {"no coordinates (a hit shown only in the best-scores table)":
                                          hsps - len(want)}
        assert f"{hsps - len(want)} HSPs set aside" in proc.stderr
        rejects = [json.loads(line) for line in open(folder / f"{report['path']}.rejects.jsonl")]
        assert len(rejects) == report["set_aside"]
        for r in rejects[:20]:
            assert "hit_start" not in loaded.hits.find_one({"_id": r["_id"]})["hsps"][r["hsp"] - 1]
    lines = (folder / "hits.bed").read_text().splitlines()
    assert {tuple(line.split("\t")[i] for i in (0, 1, 2, 5, 12)) for line in lines} == {
        (w["chrom"], str(w["start"]), str(w["end"]), w["strand"], w["key"]) for w in want}
    assert all(len(line.split("\t")) == 13 for line in lines)
    assert any(w["strand"] == "-" for w in want) and any(w["strand"] == "." for w in want)


@needs_bedtools
def test_bedtools_sort_merge_intersect_count_what_python_counts(loaded, exports):
    folder, _ = exports
    bed = folder / "hits.bed"
    want = expected(loaded)
    intervals = [(w["chrom"], w["start"], w["end"], w["strand"]) for w in want]
    ordered = tool(BEDTOOLS, "sort", "-i", str(bed))
    (folder / "sorted.bed").write_text(ordered)
    rows = [line.split("\t") for line in ordered.splitlines()]
    assert len(rows) == len(want)
    assert [(r[0], int(r[1])) for r in rows] == sorted((r[0], int(r[1])) for r in rows)
    merged_rows = tool(BEDTOOLS, "merge", "-i", str(folder / "sorted.bed")).splitlines()
    assert len(merged_rows) == merged(intervals) > 0
    stranded = tool(BEDTOOLS, "merge", "-s", "-c", "6", "-o", "distinct", "-i", str(folder / "sorted.bed"))
    by_strand = [(f"{c}\x00{s}", a, b) for c, a, b, s in intervals if s in "+-"]  # -s leaves "." out
    assert len(stranded.splitlines()) == merged(by_strand)
    # every HSP against every other: the overlapping pairs (itself included), then those on the same strand
    counted = tool(BEDTOOLS, "intersect", "-a", str(bed), "-b", str(bed), "-c").splitlines()
    pairs = sum(1 for a in intervals for b in intervals if a[0] == b[0] and a[1] < b[2] and b[1] < a[2])
    assert sum(int(line.split("\t")[-1]) for line in counted) == pairs
    same = tool(BEDTOOLS, "intersect", "-a", str(bed), "-b", str(bed), "-s", "-wa", "-wb").splitlines()
    assert len(same) == sum(1 for a in intervals for b in intervals if a[0] == b[0] and a[1] < b[2] and b[1] < a[2]
                            and a[3] == b[3] and a[3] in "+-")
    assert len(same) < pairs  # some overlaps are on the other strand, or on a protein (no strand)


@needs_gt
def test_gt_gff3validator_accepts_and_gt_stat_counts_the_types(loaded, exports):
    folder, _ = exports
    gff = folder / "hits.gff3"
    proc = subprocess.run([GT, "gff3validator", "-typecheck", "so", str(gff)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "input is valid GFF3" in proc.stdout, proc.stderr
    want = expected(loaded)
    types = {s["_id"]: (s["query_type"], s["library_type"]) for s in loaded.searches.find()}
    kinds = Counter({("dna", "dna"): "nucleotide_match", ("dna", "protein"): "translated_nucleotide_match"}.get(
        types[w["search"]], "protein_match") for w in want)
    stat = tool(GT, "stat", str(gff))
    for kind, n in kinds.items():
        assert f"{kind}s: {n}\n" in stat + "\n", (kind, stat)
    features = [line.split("\t") for line in gff.read_text().splitlines() if not line.startswith("#")]
    assert len(features) == len(want)
    by_key = {w["key"]: w for w in want}
    for f in features:
        w = by_key[unquote(dict(a.split("=", 1) for a in f[8].split(";"))["ID"])]
        assert (unquote(f[0]), int(f[3]), int(f[4]), f[6]) == (w["chrom"], w["start"] + 1, w["end"], w["strand"])
        assert f[5] == (repr(w["hsp"]["evalue"]) if "evalue" in w["hsp"] else ".")
    lengths = _by([(d["hit_id"], d["hit_length"], max(h.get("hit_end", 0) for h in d["hsps"]))
                   for d in loaded.hits.find({"hsps.hit_start": {"$exists": True}})], lambda r: r[0])
    regions = {seqid for seqid, rows in lengths.items() if len({r[1] for r in rows}) == 1
               and max(r[2] for r in rows) <= rows[0][1]}
    declared = [line.split()[1] for line in gff.read_text().splitlines() if line.startswith("##sequence-region")]
    assert sorted(unquote(s) for s in declared) == sorted(regions) and len(regions) < len(lengths)


def test_blast_tab_columns_coordinates_and_values(loaded, exports):
    folder, _ = exports
    rows = [line.split("\t") for line in (folder / "hits.tsv").read_text().splitlines()]
    assert rows and all(len(r) == 18 for r in rows)
    want = Counter()
    for w in expected(loaded):
        h, doc = w["hsp"], w["doc"]
        qs, qe, ss, se = h["query_start"], h["query_end"], h["hit_start"], h["hit_end"]
        q, s = h.get("query_strand"), h.get("hit_strand")
        if q and s and q != s:  # DNA on DNA, reverse complement: BLAST's blastn, the subject end to start
            ss, se = se, ss
        elif not (q and s):  # one side translated: that side end to start on its minus strand
            qs, qe = (qe, qs) if q == "-" else (qs, qe)
            ss, se = (se, ss) if s == "-" else (ss, se)
        pident = round(100 * h["identity"], 4) if "identity" in h else None
        want[(doc["query_id"], doc["hit_id"], pident, str(h.get("overlap", "NA")), qs, qe, ss, se,
              repr(h["evalue"]) if "evalue" in h else "NA", repr(h["bits"]) if "bits" in h else "NA",
              repr(h["z_score"]) if "z_score" in h else "NA", str(h.get("opt_score", "NA")),
              str(doc["hit_length"]))] += 1
    got = Counter((r[0], r[1], None if r[2] == "NA" else float(r[2]), r[3], *(int(x) for x in r[6:10]), r[10], r[11],
                   r[12], r[13], r[17]) for r in rows)
    assert got == want
    assert sum(1 for r in rows if int(r[8]) > int(r[9])) > 10  # minus-strand hits: sstart > send
    assert all(int(r[6]) <= int(r[7]) for r in rows if int(r[8]) > int(r[9]))


def test_blast_tab_agrees_with_fastas_own_m8_btop(mongo_uri, loaded, tmp_path):
    """The same ssearch36 DNA search as -m 10 (loaded) and as FASTA's -m 8CBL (its BTOP strings)."""
    source = str(REPO / "samples" / "pasta" / "ssearch36_dna_ref.m10")
    proc = cli(mongo_uri, loaded.name, "query", "hits", "--format", "blast-tab", "--where",
               f'source_path == "{source}"', "--sort", "search_id,rank", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ours = [line.split("\t") for line in proc.stdout.splitlines()]
    theirs = [line.rstrip("\n").split("\t") for line in open(REPO / "samples" / "pasta_tab" / "ssearch36_dna_ref.m8cb")
              if not line.startswith("#")]
    assert len(ours) == len(theirs) == 48
    reversed_rows = 0
    for o, t in zip(ours, theirs, strict=True):
        q, s = [], []
        for token in re.findall(r"\d+|[A-Za-z*-]{2}", t[14]):  # BTOP: matches as a count, else query+subject
            q += ["="] * int(token) if token.isdigit() else [token[0]]
            s += ["="] * int(token) if token.isdigit() else [token[1]]
        mismatches = sum(1 for a, b in zip(q, s) if a != "=" and "-" not in (a, b))
        opens = sum(1 for row in (q, s) for i, c in enumerate(row) if c == "-" and (i == 0 or row[i - 1] != "-"))
        assert [int(o[3]), int(o[4]), int(o[5])] == [len(q), mismatches, opens], (o, t[:14])
        assert float(o[10]) == float(t[12]) and o[11] == t[13]
        fq, fs = sorted((int(t[8]), int(t[9]))), sorted((int(t[10]), int(t[11])))
        assert sorted((int(o[6]), int(o[7]))) == fq and sorted((int(o[8]), int(o[9]))) == fs
        if int(t[8]) > int(t[9]):  # FASTA reverses the query; BLAST (and this export) the subject
            reversed_rows += 1
            assert int(o[6]) < int(o[7]) and int(o[8]) > int(o[9])
    assert reversed_rows > 5


@pytest.fixture(scope="module")
def hostile(loaded):
    """Two real hits copied under hostile library and query ids (as a library file could name them)."""
    docs = list(loaded.hits.find({"hsps.0.hit_start": {"$exists": True}, "hsps.0.query_strand": "-"}).limit(1)) + \
        list(loaded.hits.find({"hsps.0.hit_start": {"$exists": True}, "program": "ssearch36"}).limit(1))
    ids = []
    for i, (doc, name) in enumerate(zip(docs, (HOSTILE_TAB, HOSTILE_PLAIN), strict=True)):
        doc.update(_id=f"hostile:{i}", hit_id=name, query_id=name + "-q", source={"path": "hostile", "sha256": "-"})
        loaded.hits.insert_one(doc)
        ids.append(doc["_id"])
    yield ids
    loaded.hits.delete_many({"_id": {"$in": ids}})


@needs_gt
def test_hostile_ids_escaped_in_gff3_refused_in_bed(mongo_uri, loaded, hostile, tmp_path):
    where = json.dumps({"_id": {"$in": hostile}})
    proc = cli(mongo_uri, loaded.name, "export", "hits", "--filter", where, "--format", "gff3", "--out", "h.gff3",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "h.gff3").read_text(encoding="ascii")  # every non-ASCII character percent-encoded
    check = subprocess.run([GT, "gff3validator", "-typecheck", "so", str(tmp_path / "h.gff3")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    features = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
    assert len(features) == 2 and all(len(f) == 9 for f in features)
    assert {unquote(f[0]) for f in features} == {HOSTILE_TAB, HOSTILE_PLAIN}
    assert "chr%201%09x%3By%3Dz%2525%C3%A9" in {f[0] for f in features}
    for f in features:
        attrs = dict(a.split("=", 1) for a in f[8].split(";"))  # ; and = inside values are escaped
        assert unquote(attrs["Name"]) == unquote(f[0]) + "-q"
        assert unquote(attrs["Target"].split(" ")[0]) == unquote(f[0]) + "-q"  # the space escaped in Target
    bed = cli(mongo_uri, loaded.name, "export", "hits", "--filter", where, "--format", "bed", "--out", "h.bed",
              cwd=tmp_path)
    assert bed.returncode == 2 and (tmp_path / "h.bed").read_text() == ""
    reasons = {r["_id"]: r["reason"] for r in map(json.loads, open(tmp_path / "h.bed.rejects.jsonl"))}
    assert reasons == {"hostile:0": "the library sequence id holds a space: BED has no escape for it",
                       "hostile:1": "the library sequence id holds U+00E9, not ASCII: BED has no escape for it"}
    tab = cli(mongo_uri, loaded.name, "query", "hits", "--filter", where, "--format", "blast-tab", cwd=tmp_path)
    assert tab.returncode == 2 and "1 HSPs set aside: the query id holds a space" in tab.stderr
    assert "hostile:0 HSP 1" in tab.stderr
    assert [line.split("\t")[:2] for line in tab.stdout.splitlines()] == [[HOSTILE_PLAIN + "-q", HOSTILE_PLAIN]]


def test_an_empty_library_id_is_set_aside_in_every_format(mongo_uri, loaded, tmp_path):
    """A hit whose library sequence has no id (a FASTA library entry named by nothing): no seqid,
    chrom or sseqid to place it on, so each format sets it aside, naming why (GFF3 once wrote it on an
    empty seqid, which gt accepts with a warning)."""
    doc = loaded.hits.find_one({"hsps.0.hit_start": {"$exists": True}})
    doc.update(_id="hostile:empty", hit_id="", source={"path": "hostile", "sha256": "-"})
    loaded.hits.insert_one(doc)
    try:
        where = json.dumps({"_id": "hostile:empty"})
        for fmt, said in (("gff3", "GFF3's seqid needs one"), ("bed", "BED has no escape for it"),
                          ("blast-tab", "it would split BLAST's tab-separated columns")):
            proc = cli(mongo_uri, loaded.name, "export", "hits", "--filter", where, "--format", fmt, "--out", "e.out",
                       "--force", cwd=tmp_path)
            assert proc.returncode == 2, (fmt, proc.stderr)
            reasons = {r["reason"] for r in map(json.loads, open(tmp_path / "e.out.rejects.jsonl"))}
            assert reasons == {f"the library sequence id is empty: {said}"}, (fmt, reasons)
            assert [line for line in (tmp_path / "e.out").read_text().splitlines() if not line.startswith("#")] == []
    finally:
        loaded.hits.delete_one({"_id": "hostile:empty"})


def test_usage_errors_exit_64(mongo_uri, loaded, tmp_path):
    for argv in (("export", "searches", "--format", "bed"), ("query", "materials", "--format", "gff3"),
                 ("export", "hits", "--format", "blast-tab", "--fields", "query_id"),
                 ("query", "hits", "--format", "bed", "--json")):
        proc = cli(mongo_uri, loaded.name, *argv, cwd=tmp_path)
        assert proc.returncode == 64 and proc.stderr.startswith("error: --"), (argv, proc.stderr)
        assert not [p for p in tmp_path.iterdir() if p.suffix in (".bed", ".gff3", ".tsv")], argv  # nothing written


def test_the_manuals_example_lines_are_the_exports(exports):
    folder, _ = exports
    page = (REPO / "docs" / "querying.md").read_text(encoding="utf-8")
    block = page.split("<!-- genomic-example:begin -->")[1].split("<!-- genomic-example:end -->")[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("```")]
    assert len(lines) == 4
    written = {name: (folder / name).read_text().splitlines() for name in ("hits.bed", "hits.gff3", "hits.tsv")}
    assert lines[0] in written["hits.bed"]
    assert lines[1] in written["hits.gff3"] and lines[2] in written["hits.gff3"]
    assert lines[3] in written["hits.tsv"]


def test_a_fasta_m8_row_has_no_blast_length_pident_or_gapopen(mongo_uri, db, load_files, tmp_path):
    """FASTA's -m 8 counts its length without the gap columns and calls those "gap opens": NA, not FASTA's."""
    m8 = REPO / "samples" / "pasta_tab" / "ssearch36_dna_ref.m8cb"
    load_files([str(m8)])
    proc = cli(mongo_uri, db.name, "query", "hits", "--format", "blast-tab", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ours = sorted(line.split("\t") for line in proc.stdout.splitlines())
    theirs = sorted(line.rstrip("\n").split("\t") for line in open(m8) if not line.startswith("#"))
    assert len(ours) == len(theirs) == 48
    assert all(o[2] == o[3] == o[5] == "NA" for o in ours)
    assert Counter((o[0], o[4], float(o[10])) for o in ours) == Counter((t[0], t[6], float(t[12])) for t in theirs)


def test_batch_size_reads_in_smaller_batches_and_writes_the_same_lines(mongo_uri, loaded, exports, tmp_path):
    """``--batch-size`` is the documents read per batch for these formats too: the same file, byte for byte."""
    proc = cli(mongo_uri, loaded.name, "export", "hits", "--format", "bed", "--out", "small.bed", "--batch-size", "7",
               cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # the table-only hits are set aside, as in the default run
    folder, _ = exports
    assert (tmp_path / "small.bed").read_bytes() == (folder / "hits.bed").read_bytes()
