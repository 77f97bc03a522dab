"""`sci-ingest parse`: the parser on its own, as a command (no database)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bson import json_util

from ingest.config import SAMPLES_DIR
from ingest.fileio import open_binary
from ingest.parsers.pasta import parse

BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLES = sorted(p for p in (SAMPLES_DIR / "pasta").iterdir() if p.name.endswith((".m10", ".m10.gz")))
BAD = Path(__file__).parent / "data" / "pasta" / "bad"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "parse", *args], capture_output=True, timeout=120)


def test_every_sample_gives_one_json_line_per_query_in_file_order():
    proc = run(*map(str, SAMPLES))
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    expected = []
    for path in SAMPLES:
        with open_binary(path) as handle:
            expected += [q.to_dict() for q in parse(handle, str(path))]
    # Extended JSON: the fastf36 samples' infinite z-scores are {"$numberDouble": "Infinity"}
    assert [json_util.loads(line) for line in lines] == expected
    programs = {json.loads(line)["program"] for line in lines}
    assert {"ssearch36", "fasta36", "ggsearch36", "glsearch36", "lalign36", "fastx36", "fasty36",
            "tfastx36", "tfasty36", "fasts36", "fastm36", "fastf36", "tfasts36", "tfastm36", "tfastf36"} <= programs


def test_no_sequences_leaves_aligned_sequences_out():
    proc = run("--no-sequences", str(SAMPLES_DIR / "pasta" / "ssearch36_prot.m10"))
    assert proc.returncode == 0
    query = json.loads(proc.stdout)
    hsps = [h for hit in query["hits"] for h in hit["hsps"]]
    assert hsps and all("query_seq" not in h and "hit_seq" not in h for h in hsps)
    assert all("query_start" in h for hit in query["hits"] if hit["aligned"] for h in hit["hsps"])


def test_failed_file_exits_2_names_file_and_line_and_the_rest_is_parsed(tmp_path):
    good = SAMPLES_DIR / "pasta" / "ssearch36_prot.m10"
    cut = tmp_path / "cut.m10"
    cut.write_bytes(good.read_bytes()[:3000])
    proc = run(str(cut), str(good))
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert f"{cut}:" in err and "error:" in err
    line_no = err.split(f"{cut}:", 1)[1].split(":", 1)[0]
    assert line_no.isdigit()
    assert json.loads(proc.stdout.decode().splitlines()[-1])["query_id"]  # the good file still went out


def test_missing_file_is_an_error_not_a_crash(tmp_path):
    proc = run(str(tmp_path / "nope.m10"))
    assert proc.returncode == 2 and b"nope.m10" in proc.stderr and b"Traceback" not in proc.stderr


def test_values_orjson_cannot_encode_still_come_out_as_json_lines(tmp_path):
    """A ``; pg_*`` integer beyond 64 bits is kept exactly (the standard encoder takes
    over from orjson for that query); the other queries stay one line each."""
    text = (SAMPLES_DIR / "pasta" / "ssearch36_prot.m10").read_text()
    assert "; pg_name:" in text
    big = 2**70 + 1
    path = tmp_path / "big.m10"
    path.write_text(text.replace("; pg_name:", f"; pg_huge: {big}\n; pg_name:", 1))
    proc = run(str(path), str(SAMPLES_DIR / "pasta" / "ssearch36_prot.m10"))
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    first = json.loads(lines[0])
    assert first["params"]["pg_huge"] == big
    assert len(lines) == 2 and json.loads(lines[1])["query_id"] == first["query_id"]
