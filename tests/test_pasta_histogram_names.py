"""Real FASTA 36 outputs the parser refused or misread (issue 43, items 1-2 and the 700-character
title): ``-H`` histograms, FASTA's gi-stripped names of its own ``n2*.aa`` examples, titles FASTA cut
inside the `` - N aa`` it appends.  Samples in samples/pasta (commands in make_samples.sh and the
README), values read here from the files' own lines with regular expressions, on both parser paths
and through ``sci-ingest parse``."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.documents.search import search_fingerprint
from ingest.errors import ParseError
from ingest.parsers.pasta import parse, parse_dicts

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"
EXTRA = SAMPLES.parent / "pasta_extra"  # outputs for the parser's tests only, outside the bundled run


def sample(name: str) -> Path:
    """A sample's path: bundled, else a parser-only one (samples/pasta/README.md)."""
    return SAMPLES / name if (SAMPLES / name).exists() else EXTRA / name

BIN = Path(sys.executable).parent / "sci-ingest"
HISTOGRAMS = ["histogram_ssearch36_prot.m10", "histogram_fasta36_prot.m10", "histogram_ssearch36_dna.m10",
              "histogram_fasta36_dna.m10", "histogram_ssearch36_inset.m10"]
PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
_QUERY_LINE = re.compile(r"^\s*\d+>>>(\S*)", re.M)


def run(name: str, fast: bool = True) -> list:
    return list(parse(io.BytesIO(sample(name).read_bytes()), name, fast=fast))


def file_histograms(text: str) -> list[list[tuple]]:
    """Per query line of ``text``: its histogram's rows (first character, bin, observed, expected)."""
    out = []
    for block in re.split(r"^\s*\d+>>>", text, flags=re.M)[1:]:
        lines = block.split("\n")
        if "       opt      E()" not in lines:
            out.append([])
            continue
        rows = []
        for line in lines[lines.index("       opt      E()") + 1:]:
            left = line.split(":", 1)[0]
            rows.append((left[0], *map(int, left[1:].split())))
            if left[0] == ">":
                break
        out.append(rows)
    return out


@PATHS
@pytest.mark.parametrize("name", HISTOGRAMS)
def test_histograms_are_read_as_the_file_prints_them(name, fast):
    """ssearch36 and fasta36, protein and DNA, several queries, an inset: each query's bins equal its
    own lines (the last row starts with ">", which was refused), and every query is kept with its hits."""
    text = sample(name).read_text()
    truth = file_histograms(text)
    queries = run(name, fast)
    assert [q.query_id for q in queries] == _QUERY_LINE.findall(text)
    assert all(len(rows) > 20 for rows in truth)
    for q, rows in zip(queries, truth):
        got = [({"<": "<", ">": ">"}.get(b.get("tail"), " "), b["score"], b["observed"], b["expected"])
               for b in q.histogram]
        assert got == rows
        assert [b.get("tail") for b in q.histogram].count(None) == len(rows) - 2
        assert q.statistics and q.library_sequences
    # a query with a table has hits; fasta36 finds none for two (a histogram, then "!! No sequences")
    blocks = re.split(r"^\s*\d+>>>", text, flags=re.M)[1:]
    assert [bool(q.hits) for q in queries] == ["The best scores are:" in b for b in blocks]
    assert sum(h.aligned for q in queries for h in q.hits) == len(re.findall(r"^>>[^>]", text, re.M))
    if name.endswith("inset.m10"):
        assert "inset = represents" in text and any(b["observed"] > 120 for b in queries[0].histogram)


def test_a_histogram_reaches_the_json_and_not_the_search_fingerprint():
    """`sci-ingest parse` writes the bins (a list in each query's JSON); a query without -H has no
    such field; the same search printed without -H has the same fingerprint."""
    out = subprocess.run([str(BIN), "parse", str(EXTRA / "histogram_ssearch36_dna.m10"),
                          str(SAMPLES / "ssearch36_prot.m10")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    truth = file_histograms((EXTRA / "histogram_ssearch36_dna.m10").read_text())
    assert [[(b["score"], b["observed"], b["expected"]) for b in d["histogram"]] for d in docs[:2]] == \
        [[row[1:] for row in rows] for rows in truth]
    assert docs[0]["histogram"][0]["tail"] == "<" and docs[0]["histogram"][-1] == {
        "score": 120, "observed": 8, "expected": 0, "tail": ">"}
    assert "histogram" not in docs[2]
    d = next(parse_dicts(io.BytesIO((EXTRA / "histogram_ssearch36_dna.m10").read_bytes())))
    assert search_fingerprint(d) == search_fingerprint({k: v for k, v in d.items() if k != "histogram"})


def run_bytes(data: bytes, fast: bool = True) -> list:
    return list(parse(io.BytesIO(data), "damaged.m10", fast=fast))


def test_a_damaged_histogram_names_its_line():
    data = (EXTRA / "histogram_ssearch36_dna.m10").read_bytes().replace(b"\n  60    19     8:", b"\n  60    19 x:", 1)
    with pytest.raises(ParseError) as err:
        run_bytes(data)
    line = data[: data.index(b"  60    19 x:")].count(b"\n") + 1
    assert f":{line}: malformed histogram row" in str(err.value)


@PATHS
def test_fastas_gi_stripped_names_with_every_program_that_takes_them(fast):
    """FASTA's n2.aa, n2s.aa, n2t.aa (and n2_fs.lib) are titled "gi|345664 gi|345664|pir||A45388 ...":
    the alignments name the query "345664|pir||" (FASTA strips up to the "|" past the space), which
    was refused at the first alignment, with every query after it.  Each query keeps the id of its
    ">>>" line; library sequences the id of their ">>" line, as in the table."""
    name = "gi_stripped_runs.m10"
    text = sample(name).read_text()
    assert "\n>345664|pir|| ..\n" in text
    queries = run(name, fast)
    assert [q.query_id for q in queries] == _QUERY_LINE.findall(text)
    assert len(queries) == 15 and queries[1].query_id == "H10_HUMAN" and queries[2].query_id == "GTT1_DROME"
    assert {q.program for q in queries} == {"ssearch36", "fasta36", "ggsearch36", "glsearch36", "lalign36",
                                            "fasts36", "fastm36", "tfastx36", "tfasty36", "tfasts36",
                                            "tfastm36", "fastx36", "fasty36"}
    gi = [q for q in queries if q.query_id == "gi|345664"]
    assert len(gi) == 11 and all(q.query_description.startswith("gi|345664|pir||A45388 protein-tyrosine")
                                 for q in gi)
    assert all(any(h.aligned for h in q.hits) for q in gi)
    aligned = [h.hit_id for q in queries for h in q.hits if h.aligned]
    assert aligned == [line.split()[0][2:] for line in text.splitlines() if re.match(r">>[^>]", line)]
    assert aligned.count("345664|pir||A45388") >= 4
    # the fastx/fasty runs: the gi-titled library sequence, by the name the file gives it
    for q in queries[-2:]:
        assert "345664|pir||A45388" in [h.hit_id for h in q.hits if h.aligned]


def test_both_paths_agree_on_the_new_samples():
    for name in [*HISTOGRAMS, "gi_stripped_runs.m10", "ssearch36_title_suffix_cut.m10"]:
        assert [q.to_dict() for q in run(name, True)] == [q.to_dict() for q in run(name, False)], name


@PATHS
def test_a_title_cut_inside_fastas_length_suffix_leaves_none_of_it_in_the_description(fast):
    """FASTA appends " - 133 aa" to a title and keeps 511 bytes of the whole: a one-word title of 509
    letters became "BBB… -" and its description "-" (505 letters: "- 133"); the description is the
    title's own text after its id, None when it has none, even when it ends in " - 1" itself."""
    titles = [line[1:].rstrip("\n") for line in (SAMPLES / "inputs" / "cut_suffix_titles.aa").open()
              if line.startswith(">")]
    text = (EXTRA / "ssearch36_title_suffix_cut.m10").read_text()
    printed = [m.group(1) for m in re.finditer(r"^\s*\d+>>>(.*)$", text, re.M)]
    assert printed[1].endswith(" -") and printed[2].endswith(" - 133") and printed[4].endswith("x - 1 - ")
    queries = run("ssearch36_title_suffix_cut.m10", fast)
    assert [q.query_length for q in queries] == [133] * 5
    assert [q.query_id for q in queries] == [titles[0][:510], titles[1], titles[2], "D_ID", "E_ID"]
    assert [q.query_description for q in queries] == [None, None, None, titles[3].split(None, 1)[1],
                                                      titles[4].split(None, 1)[1]]
    assert queries[4].query_description.endswith("x - 1")
