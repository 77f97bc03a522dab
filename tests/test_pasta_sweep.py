"""Option combinations found wrong by a sweep over the FASTA options (issue 12, part 3);
real outputs in samples/pasta (commands in make_samples.sh), values pinned to the files'
own lines, read here independently."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from ingest.parsers.pasta import parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "pasta"


def run(name: str, fast: bool = True, sequences: bool = True):
    return list(parse(io.BytesIO((SAMPLES / name).read_bytes()), name, fast=fast, sequences=sequences))


def _tables(text: str) -> list[tuple[str, list[tuple[str, float]]]]:
    """Per query: its id and the (id, E()) of each table row, from the file."""
    out = []
    for block in re.split(r"^\s*\d+>>>", text, flags=re.M)[1:]:
        qid = block.split(None, 1)[0]
        header, table = block.split("The best scores are:", 1)[1].split("\n", 1)
        e_col = next(i for i, c in enumerate(header.split()) if c.startswith("E("))
        rows = []
        for line in table.splitlines():
            if not line.strip() or line.startswith(">>>"):
                break
            values = line.rsplit(")", 1)[1].replace("[f]", "").replace("[r]", "").split()
            rows.append((line.split()[0], float(values[e_col])))
        out.append((qid, rows))
    return out


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
def test_m9i_without_alignments_keeps_every_query_apart(fast):
    """-m 10 -m 9i -d 0 with 4 queries: each table runs straight into the next query's line
    (no alignments, no summary line, no blank line).  It used to be read as one query holding
    the rows of all four, under the first one's name."""
    text = (SAMPLES / "ssearch36_m9i_d0.m10").read_text()
    truth = _tables(text)
    assert len(truth) == 4 and all(rows for _, rows in truth)
    queries = run("ssearch36_m9i_d0.m10", fast)
    assert [q.query_id for q in queries] == [qid for qid, _ in truth]
    for q, (_, rows) in zip(queries, truth):
        assert [(h.hit_id, h.hsps[0].evalue) for h in q.hits] == rows
        assert not any(h.aligned for h in q.hits)


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "checking path"])
def test_a_table_only_hit_scores_its_sw_column_as_an_aligned_hit_its_score_line(fast):
    """tfastx36 -m 9C: the opt column (219) is not the Smith-Waterman score (sw 330) that an
    aligned hit's "; tx_score:" line would give; every hit's score is the sw score."""
    text = (SAMPLES / "tfastx36_m9C_table.m10").read_text()
    row = next(line for line in text.splitlines() if line.startswith("ref|NM_900009.1|"))
    left, nine = row.split("\t")[:2]
    opt, sw = int(left.split()[-3]), int(nine.split()[2])
    assert (opt, sw) == (219, 330)
    (q,) = run("tfastx36_m9C_table.m10", fast)
    hit = next(h for h in q.hits if h.hit_id == "ref|NM_900009.1|")
    assert not hit.aligned
    assert [(x.score, x.opt_score, x.extra["sw"]) for x in hit.hsps][:2] == [(330, 219, 330), (229, 173, 229)]
    aligned = [x for h in q.hits if h.aligned for x in h.hsps]
    assert aligned and all(x.score == x.extra["sw"] for x in aligned)
