"""A file holds one format: one that goes on in another is refused whole, never half loaded (issue 41).

A ``-m 10`` report followed by JSON lines used to load its search and drop the JSON without a word;
JSON lines followed by a report, named ``.jsonl``, were sniffed as ``-m 10`` and lost their records.
Now the format is the one the name registers (then the first bytes), and each parser refuses text
that is not its own: after a run's end (``>>>///``) only FASTA's trailer may follow, between two
queries nothing, before a run's first query no JSON; in JSON Lines a report's line ends the
records.  Such a file fails as ``path:line: reason`` (the line where the other format starts),
exit 2, nothing of it stored.  Real FASTA outputs, made here by the Debian ``fasta3`` programs when
they are on PATH, with their trailers and concatenated, still load.  Every load is ``sci-ingest
load`` as a user runs it, against the suite's server.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
SAMPLE = REPO / "samples" / "pasta" / "ssearch36_prot.m10"
INPUTS = REPO / "samples" / "pasta" / "inputs"
RECORDS = [json.dumps({"material_id": f"mp-{i}", "band_gap": 1.0}) + "\n" for i in range(1, 25)]  # 24 JSON lines


@pytest.fixture()
def load(mongo_uri, db, tmp_path):
    """``load(*paths)``: ``sci-ingest load --json -q --workers 1`` into the test's database; (process, report)."""
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)

    def run(*paths):
        proc = subprocess.run([str(BIN), "load", "--json", "-q", "--db", db.name, "--workers", "1", *map(str, paths)],
                              env=env, capture_output=True, text=True, timeout=600)
        return proc, json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None

    return run


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _refused(db, proc, report, path: Path, line: int, words: str) -> None:
    """``path`` failed at ``line`` for ``words``, named once on stderr; nothing of it stored."""
    assert proc.returncode == 2, proc.stderr
    failed = [x for x in proc.stderr.splitlines() if x.startswith("failed: ")]
    assert failed == [x for x in failed if x.startswith(f"failed: {path}:{line}: ")] and len(failed) == 1, proc.stderr
    assert words in failed[0], failed[0]
    assert (report["files"]["files_failed"], report["files"]["files_loaded"]) == (1, 0)
    assert db.searches.count_documents({}) == db.hits.count_documents({}) == db.materials.count_documents({}) == 0
    assert db.ingest_files.find_one({"_id": str(path)})["status"] == "failed"


def test_a_report_followed_by_json_lines_is_refused_at_the_first(db, tmp_path, load):
    path = tmp_path / "run.m10"
    path.write_bytes(SAMPLE.read_bytes() + "".join(RECORDS).encode())
    proc, report = load(path)
    _refused(db, proc, report, path, _lines(SAMPLE) + 1, "a JSON value (b'{\"material_id\": \"mp-1\"")
    assert "after the end of the run ('>>>///')" in proc.stderr


@pytest.mark.parametrize("trailing", ["hello\n", "Query\tHit\t98.0\t100\t2\t0\t1\t100\t1\t100\t1e-50\t200\n",
                                      "[1, 2]\n", "  {\"a\": 1}\n"])
def test_any_text_after_the_trailer_is_refused(db, tmp_path, load, trailing):
    path = tmp_path / "run.m10.gz"
    path.write_bytes(gzip.compress(SAMPLE.read_bytes() + b"\n" + trailing.encode()))
    proc, report = load(path)
    _refused(db, proc, report, path, _lines(SAMPLE) + 2, "where FASTA prints no such line")


def test_json_lines_before_a_report_are_refused_at_the_first(db, tmp_path, load):
    path = tmp_path / "run.m10"
    path.write_bytes("".join(RECORDS).encode() + SAMPLE.read_bytes())
    proc, report = load(path)
    _refused(db, proc, report, path, 1, "before the run's first query")


def test_text_between_two_queries_is_refused(db, tmp_path, load):
    multi = (REPO / "samples" / "pasta" / "ssearch36_prot_multi.m10").read_bytes().split(b"\n")
    end = multi.index(b">>><<<")
    path = tmp_path / "multi.m10"
    path.write_bytes(b"\n".join(multi[:end + 1] + [RECORDS[0].strip().encode()] + multi[end + 1:]))
    proc, report = load(path)
    _refused(db, proc, report, path, end + 2, "between two queries")


@pytest.mark.parametrize("name", ["records.jsonl", "records.json", "records.ndjson.gz"])
def test_json_lines_followed_by_a_report_are_json_and_refused_where_it_starts(db, tmp_path, load, name):
    path = tmp_path / name
    data = "".join(RECORDS).encode() + SAMPLE.read_bytes()  # the report is within the first 4 KiB
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    proc, report = load(path)
    _refused(db, proc, report, path, 25, "a FASTA -m 10 report starts here, in a file read as JSON records")


def test_a_json_array_followed_by_a_report_is_refused(db, tmp_path, load):
    path = tmp_path / "records.json"
    path.write_bytes(b"[" + b",".join(r.strip().encode() for r in RECORDS) + b"]\n" + SAMPLE.read_bytes())
    proc, report = load(path)
    _refused(db, proc, report, path, 25, "data after the closing ']' (line 2)")


# ------------------------------------------------------------------ real outputs still load
FASTA_PROGRAMS = ("ssearch36", "fasta36", "lalign36")


@pytest.fixture(scope="module")
def real_outputs(tmp_path_factory) -> list[Path]:
    """Outputs of the FASTA programs on PATH, with their default statistics and threads (trailers as
    printed), one file each, one of two runs concatenated, and one gzipped."""
    missing = [p for p in FASTA_PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"the Debian fasta3 programs are not on PATH: {', '.join(missing)}")
    out = tmp_path_factory.mktemp("real")
    commands = {"ssearch36": ["ssearch36", "-m", "10", "gtt1_drome.aa", "prot_test.lib"],
                "fasta36": ["fasta36", "-m", "10", "-E", "0.5", "prot_queries.fa", "prot_lib.fa"],
                "lalign36": ["lalign36", "-m", "10", "gtm1_human.aa", "mgstm1.aa"]}
    made = []
    for name, command in commands.items():
        proc = subprocess.run(command, cwd=INPUTS, capture_output=True, timeout=300, check=True)
        (out / f"{name}.m10").write_bytes(proc.stdout)
        made.append(out / f"{name}.m10")
    (out / "both.m10").write_bytes(made[0].read_bytes() + made[1].read_bytes())
    (out / "lalign36.m10.gz").write_bytes(gzip.compress(made[2].read_bytes() + b"\n\n"))
    return made + [out / "both.m10", out / "lalign36.m10.gz"]


def test_real_outputs_with_their_trailers_load(db, load, real_outputs):
    for path in real_outputs:
        assert b"\nFunction used was " in (gzip.decompress(path.read_bytes()) if path.suffix == ".gz"
                                           else path.read_bytes())
    proc, report = load(*real_outputs)
    assert proc.returncode == 0, proc.stderr
    assert (report["files"]["files_loaded"], report["files"]["files_failed"]) == (len(real_outputs), 0)
    runs = {d["_id"]: d for d in db.searches.find({}, {"run_index": 1, "program": 1, "source.path": 1})}
    both = [d for d in runs.values() if d["source"]["path"].endswith("both.m10")]
    assert {d["run_index"] for d in both} == {1, 2}
    assert {d["program"] for d in runs.values()} == {"ssearch36", "fasta36", "lalign36"}


def test_a_report_named_as_json_is_read_as_json_and_refused_at_its_first_line(db, tmp_path, load):
    path = tmp_path / "run.json"
    path.write_bytes(SAMPLE.read_bytes())
    proc, report = load(path)
    _refused(db, proc, report, path, 1, "a FASTA -m 10 report starts here, in a file read as JSON records")
