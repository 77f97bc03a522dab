"""Peptide-mixture programs (issue 12, part 1): fasts36, fastm36, fastf36 and their translated forms read
a query that is a set of peptides; the announce line reads "- 39 aa in 6 fragments" while the
summary line counts 44 (the separators).  Real outputs in samples/pasta (commands in
make_samples.sh).  Biopython 1.88 cannot read them (its announce-line pattern stops at "aa"),
so every value is pinned against the file's own lines, read here independently.

fastf36/tfastf36 with -z 3 on these small libraries print "; ff_z-score:  inf" and bits "inf"
(the statistics overflow): read as float('inf'), written by `parse` as Extended JSON."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.parsers.pasta import parse


def parse_file(path: Path, fast: bool = True):
    with open(path, "rb") as handle:
        return list(parse(handle, str(path), fast=fast))

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
EXTRA = SAMPLES.parent / "pasta_extra"  # outputs for the parser's tests only, outside the bundled run
BIN = Path(sys.executable).parent / "sci-ingest"
PEPTIDE_SAMPLES = {  # file: (program, field prefix, library type)
    "fasts36_peptides.m10": ("fasts36", "fs", "protein"),
    "fastm36_peptides.m10": ("fastm36", "fm", "protein"),
    "tfasts36_peptides.m10": ("tfasts36", "tfs", "dna"),
    "tfastm36_peptides.m10": ("tfastm36", "tfm", "dna"),
    "fastf36_peptides.m10": ("fastf36", "ff", "protein"),
    "tfastf36_peptides.m10": ("tfastf36", "tff", "dna"),
}


def _from_the_file(path: Path, prefix: str) -> dict:
    """What the report's own lines say: the announce line and each hit's scores, in order."""
    text = path.read_text()
    announce = re.search(r"^\s*1>>>(\S+) .* - (\d+) aa in (\d+) fragments$", text, re.M)
    hits = re.findall(rf"^>>(\S+).*\n; {prefix}_frame: (\S+)\n; {prefix}_initn: +(\d+)\n; {prefix}_init1: +(\d+)\n"
                      rf"; {prefix}_opt: +(\d+)\n; {prefix}_z-score: +(\S+)\n; {prefix}_bits: +(\S+)\n"
                      rf"; {prefix}_expect: +(\S+)\n", text, re.M)
    return {"query_id": announce.group(1), "length": int(announce.group(2)), "fragments": int(announce.group(3)),
            "hits": [(h[0], h[1], int(h[4]), int(h[2]), int(h[3]), float(h[5]), float(h[6]), float(h[7]))
                     for h in hits]}


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
@pytest.mark.parametrize("name", sorted(PEPTIDE_SAMPLES))
def test_peptide_mixture_reports_parse_with_the_files_values(name, fast):
    program, prefix, library_type = PEPTIDE_SAMPLES[name]
    path = SAMPLES / name
    truth = _from_the_file(path, prefix)
    assert truth["hits"], "the pattern found the file's hits"
    (query,) = parse_file(path, fast)
    assert (query.query_id, query.query_length, query.query_fragments) == (
        truth["query_id"], truth["length"], truth["fragments"])
    assert (query.program, query.query_type, query.library_type) == (program, "protein", library_type)
    got = [(h.hit_id, h.hsps[0].frame, h.hsps[0].opt_score, h.hsps[0].initn_score, h.hsps[0].init1_score,
            h.hsps[0].z_score, h.hsps[0].bits, h.hsps[0].evalue) for h in query.hits if h.hsps]
    assert got == truth["hits"]
    for hit in query.hits:
        for hsp in hit.hsps:  # coordinates inside the query (39 residues) and the hit
            assert 1 <= hsp.query_start <= hsp.query_end <= query.query_length
            assert 1 <= hsp.hit_start <= hsp.hit_end <= hit.hit_length


def test_the_command_line_parses_every_peptide_sample(tmp_path):
    paths = [str(SAMPLES / n) for n in sorted(PEPTIDE_SAMPLES)]
    out = subprocess.run([str(BIN), "parse", *paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    blocks = sum(len(re.findall(r"^\s*\d+>>>", Path(p).read_text(), re.M)) for p in paths)
    lines = out.stdout.splitlines()
    assert len(lines) == blocks == len(PEPTIDE_SAMPLES)
    fragments = [int(re.search(r" in (\d+) fragments$", Path(p).read_text(), re.M).group(1)) for p in paths]
    assert [json.loads(line)["query_fragments"] for line in lines] == fragments
    assert set(fragments) == {4, 6}


def test_infinite_scores_are_written_as_extended_json_not_null():
    """JSON has no infinity and orjson would write null: `parse` writes MongoDB Extended JSON,
    which bson.json_util (and mongoimport) read back as the double the file printed."""
    from bson import json_util

    path = SAMPLES / "fastf36_peptides.m10"
    assert "; ff_z-score:  inf" in path.read_text()
    out = subprocess.run([str(BIN), "parse", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "null" not in out.stdout
    plain = json.loads(out.stdout)
    assert plain["hits"][0]["hsps"][0]["z_score"] == {"$numberDouble": "Infinity"}
    back = json_util.loads(out.stdout)
    hsp = back["hits"][0]["hsps"][0]
    assert (hsp["z_score"], hsp["bits"], hsp["evalue"]) == (float("inf"), float("inf"), 0.0)
    assert back["hits"][0]["hsps"][0]["opt_score"] == 251


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
@pytest.mark.parametrize("printed, expected", [("-inf", float("-inf")), ("nan", "nan"), ("-nan", "nan")])
def test_every_non_finite_number_glibc_prints_is_read(tmp_path, printed, expected, fast):
    text = (SAMPLES / "fastf36_peptides.m10").read_text()
    path = tmp_path / "x.m10"
    path.write_text(text.replace("; ff_z-score:  inf", f"; ff_z-score:  {printed}", 1))
    (query,) = parse_file(path, fast)
    z = query.hits[0].hsps[0].z_score
    assert (z != z) if expected == "nan" else z == expected


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
@pytest.mark.parametrize("printed", ["infinity", "1_0", "in f", "0x10"])
def test_numbers_fasta_does_not_print_are_refused_with_the_line(tmp_path, printed, fast):
    from ingest.errors import ParseError

    text = (SAMPLES / "fastf36_peptides.m10").read_text()
    path = tmp_path / "x.m10"
    path.write_text(text.replace("; ff_z-score:  inf", f"; ff_z-score:  {printed}", 1))
    line = 1 + text[: text.index("; ff_z-score:  inf")].count("\n")
    with pytest.raises(ParseError) as err:
        parse_file(path, fast)
    assert f"x.m10:{line}:" in str(err.value) and "not a number" in str(err.value)


def test_an_ordinary_query_has_no_fragment_count():
    (query,) = parse_file(SAMPLES / "ssearch36_prot.m10")
    assert query.query_fragments is None and "query_fragments" not in query.to_dict()


FASTA_EXAMPLES = Path("/usr/share/doc/fasta3/examples/seq")
_QUERY_SIDE = re.compile(r"\n>tests \.\.\n; sq_len: \d+\n; sq_offset: \d+\n; sq_type: p\n; al_start: (\d+)\n"
                         r"; al_stop: (\d+)\n; al_display_start: (\d+)\n([-A-Za-z*\n]+?)\n(?=>)")


@pytest.mark.skipif(not FASTA_EXAMPLES.is_dir() or shutil.which("tfasts36") is None,
                    reason="needs Debian's fasta3 (its programs and examples)")
@pytest.mark.parametrize("program", ["tfasts36", "tfastm36"])
def test_a_translated_peptide_alignment_displayed_from_past_its_start_is_read(tmp_path, program):
    """tfasts36/tfastm36 print a query side's '; al_display_start:' past its '; al_start:' (FASTA's
    m2.aa against the reverse complement mgstm1.nt12r, frames 3 to 6) and no context: its
    displayed residues, as many as its range, are the alignment (the file was refused, 'alignment
    starts before its displayed sequence'; found by the examples sweep, issue 43)."""
    out = tmp_path / f"{program}.m10"
    with open(out, "wb") as handle:
        subprocess.run([program, "-q", "-m", "10", "-T", "1", str(FASTA_EXAMPLES / "m2.aa"),
                        str(FASTA_EXAMPLES / "mgstm1.nt12r")], stdout=handle, stderr=subprocess.DEVNULL, check=True)
    sides = [(int(a), int(b), int(d), seq.replace("\n", "")) for a, b, d, seq in _QUERY_SIDE.findall(out.read_text())]
    assert any(d > a for a, _, d, _ in sides)
    proc = subprocess.run([str(BIN), "parse", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    hsps = [s for line in proc.stdout.splitlines() for h in json.loads(line)["hits"] if h["aligned"]
            for s in h["hsps"]]
    assert [(s["query_start"], s["query_end"]) for s in hsps] == [(a, b) for a, b, _, _ in sides]
    for hsp, (a, b, d, seq) in zip(hsps, sides):
        if d > a:  # no context: the residues shown (less the '-' padding before) are the alignment
            assert len(seq) - seq.count("-") == b - a + 1
            assert hsp["query_seq"] == seq.strip("-")
            assert len(hsp["hit_seq"]) == len(hsp["query_seq"])
    assert parse_file(out, fast=True) == parse_file(out, fast=False)


def test_a_table_only_peptide_hit_has_no_score_and_validation_asks_none(db, mongo_uri, load_files):
    """A peptide-mixture table prints initn, init1, bits and E() but no opt column: a hit of the table
    only has no score, and the hits suite's "every alignment has a score" asks it of aligned hits only
    (it failed every such real output).  An aligned hit without a score still fails it."""
    from analytics.validation.run import validate

    name = "fasts36_table_only.m10"
    head = (EXTRA / name).read_text().split("The best scores are:", 1)[1].splitlines()[0]
    assert head.split() == ["initn", "init1", "bits", "E(6)", "sn", "sl"]  # no opt, no sw
    [q] = parse_file(EXTRA / name)
    table_only = [h for h in q.hits if not h.aligned]
    assert table_only and all(h.hsps[0].score is None and h.hsps[0].bits is not None for h in table_only)
    assert all(h.hsps[0].score is not None for h in q.hits if h.aligned)
    load_files([EXTRA / name])

    def score_check(report):
        [suite] = report.suites
        return next(r for r in suite.results if r["expectation"] == "expect_column_values_to_not_be_null"
                    and r["column"] == "hsps.score")

    assert score_check(validate(mongo_uri, db.name, "run-peptides", suites=["hits"]))["success"]
    doc = db.hits.find_one({"aligned": True})
    doc.pop("_id")
    doc["_id"], doc["hsps"] = "an aligned hit without a score", [{k: v for k, v in doc["hsps"][0].items()
                                                                  if k != "score"}]
    db.hits.insert_one(doc)
    assert not score_check(validate(mongo_uri, db.name, "run-peptides-2", suites=["hits"]))["success"]


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
def test_rows_of_empty_alignments_without_one_become_table_only_hits(fast):
    """tfasts36 -E 1000: past the E() bound the table lists rows of empty alignments (every score 0),
    and FASTA aligns some of them only; each alignment pairs with the row of its sequence and frame
    (RABGLTR [2] and [6] aligned, [4] not), the others become table-only hits.  The file was refused
    ("alignment 26 ... is for 'RABALP1A' but its row of the best-scores table is 'BTGST'")."""
    name = "tfasts36_unaligned_rows.m10"
    text = (EXTRA / name).read_text()
    rows = []  # (id, frame, initn) of each table row, from the file
    for line in text.split("The best scores are:", 1)[1].splitlines()[1:]:
        if not line.strip():
            break
        m = re.match(r"(\S+) .*\(\s*\d+\) \[(\d)\]\s+(\d+)", line)
        rows.append((m.group(1), m.group(2), int(m.group(3))))
    aligned = re.findall(r"^>>(\S+).*\n; tfs_frame: (\d)$", text, re.M)  # each alignment's id and frame
    assert len(rows) == 36 and len(aligned) == 28
    [q] = parse_file(EXTRA / name, fast)
    got = [(h.hit_id, h.hsps[0].frame) for h in q.hits if h.aligned]
    assert got == aligned  # in file order
    table_only = [h for h in q.hits if not h.aligned]
    pairs = {(i, f) for i, f, _ in rows}
    assert len(pairs) == len(rows)  # sequence and frame name one row
    assert sorted(got + [(h.hit_id, h.hsps[0].frame) for h in table_only]) == sorted((i, f) for i, f, _ in rows)
    zero = {(i, f) for i, f, initn in rows if initn == 0}
    assert {(h.hit_id, h.hsps[0].frame) for h in table_only} == zero - set(got) and len(table_only) == 8
    assert [h.rank for h in q.hits] == list(range(1, 37))


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
def test_a_row_of_no_significance_without_an_alignment_becomes_a_table_only_hit(fast):
    """fastf36 lists EXMUT0276|MWRTC1 (E() 2.7e+29, bits -69.5) among the rows it aligns and prints no
    alignment for it: the alignments pair with the rows of their sequences, that row is a table-only
    hit.  The file was refused ("alignment 6 ... is for 'EXMUT0193|MWKW_601-900' but its row ... is
    'EXMUT0276|MWRTC1'")."""
    text = (EXTRA / "fastf36_unaligned_rows.m10").read_text()
    table = text.split("The best scores are:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    rows = [(line.split()[0], float(line.split()[-3])) for line in table]  # (id, E())
    aligned = re.findall(r"^>>([^>\s]\S*)", text, re.M)  # the ">>ID" lines, not ">>>"
    assert len(rows) == 7 and len(aligned) == 6 and "EXMUT0276|MWRTC1" not in aligned
    [q] = parse_file(EXTRA / "fastf36_unaligned_rows.m10", fast)
    assert [h.hit_id for h in q.hits if h.aligned] == aligned
    [only] = [h for h in q.hits if not h.aligned]
    assert (only.hit_id, only.hsps[0].evalue, only.hsps[0].bits) == ("EXMUT0276|MWRTC1", 2.7e29, -69.5)
    assert sorted(h.hit_id for h in q.hits) == sorted(r for r, _ in rows) and dict(rows)[only.hit_id] == 2.7e29
