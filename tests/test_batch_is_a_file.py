"""A batch of one is a file (issue 44, item 2): loading small files in a batch leaves the database,
the ledger and the report exactly as loading each file alone does.

The same folder is loaded twice by the CLI (a subprocess, as users run it), into two databases: as
it comes (its small new files in batches, :mod:`ingest.load.batch`) and with
``SCI_INGEST_SMALL_FILE_BYTES=0`` (every file alone, :mod:`ingest.load.files`).  The folder holds what
a landing directory holds: search outputs of several programs and formats (one gzipped), materials
and tasks files whose records overlap, values set aside, a file that fails to parse, an empty file,
and a copy of a file under another name.  Then everything stored is compared, but what names the
run or the moment (run id, times, the server's clock).
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

from ingest.config import SAMPLES_DIR

BIN = Path(sys.executable).parent / "sci-ingest"

#: What names the run or the moment, not the data: left out of the comparison.
MOMENT = {"run_id", "finished", "seconds", "changed_at", "loaded_at", "at", "worker", "started", "ended",
          "parsed", "parse_seconds", "load_seconds", "retries", "owner", "lease_until"}
#: The collections of timings (every stage's, per run): the moment only.
TIMINGS = {"stage_timings", "runs"}
#: Bundled outputs of several FASTA programs, -m 10 and tabular.
SAMPLES = ["pasta/fasta36_dna.m10", "pasta/ssearch36_dna_fwd.m10", "pasta/lalign36.m10", "pasta/fastx36.m10",
           "pasta/concatenated_runs.m10", "pasta_extra/fasts36_table_only.m10", "pasta_tab/ssearch36_9c.m9",
           "pasta_tab/fasta36_dna.m8", "pasta_tab/ssearch36_prot_multi.m8c"]


def _cli(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *map(str, args)], env=env, capture_output=True, text=True, timeout=600)


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _landing(folder: Path) -> Path:
    folder.mkdir()
    for name in SAMPLES:
        shutil.copy(SAMPLES_DIR / name, folder / Path(name).name)
    (folder / "ssearch36_dna_fwd.m10.gz").write_bytes(gzip.compress((SAMPLES_DIR / SAMPLES[1]).read_bytes()))
    shutil.copy(SAMPLES_DIR / SAMPLES[0], folder / "copy_of_fasta36_dna.m10")  # the same content again
    text = (SAMPLES_DIR / SAMPLES[2]).read_text()
    (folder / "cut_short.m10").write_text(text[: len(text) // 3] + "\n>>>garbage\x00line\n")
    (folder / "empty.m10").write_text("")
    _jsonl(folder / "materials_a.jsonl", [
        {"material_id": "mp-1", "formula_pretty": "Fe2O3", "band_gap": 2.1, "elements": ["Fe", "O"], "nsites": 10,
         "last_updated": "2024-01-02T03:04:05"},
        {"material_id": "mp-2", "formula_pretty": 42, "band_gap": "1.25", "nsites": 8.0},  # set aside, read
        {"material_id": "mp-3", "formula_pretty": "LiFePO4", "elements": ["Fe", "Li", "O", "P"]}])
    _jsonl(folder / "materials_b.jsonl", [  # mp-3 again, newer: records shared between files
        {"material_id": "mp-3", "formula_pretty": "LiFePO4", "band_gap": 3.7, "last_updated": "2025-05-05"},
        {"material_id": "mp-4", "formula_pretty": "NaCl", "symmetry": {"crystal_system": "Cubic", "number": 225}}])
    _jsonl(folder / "tasks.jsonl", [
        {"task_id": "mp-10", "output": {"energy_per_atom": -3.5}, "nsites": 2},
        {"task_id": "mp-11", "output": {"energy_per_atom": "x"}}])
    (folder / "broken.jsonl").write_text('{"material_id": "mp-9", "band_gap": 1.0}\n{"material_id": \n')
    return folder


def _without_moment(value):
    if isinstance(value, dict):
        return {k: _without_moment(v) for k, v in value.items() if k not in MOMENT}
    if isinstance(value, list):
        return [_without_moment(v) for v in value]
    return value


def _stored(db) -> dict[str, list]:
    """Every collection's documents, in _id order, without what names the run or the moment."""
    stored = {name: [_without_moment(d) for d in db[name].find().sort("_id", 1)]
              for name in sorted(db.list_collection_names()) if name not in TIMINGS and not name.startswith("system.")}
    return {name: docs for name, docs in stored.items() if docs}  # an empty bookkeeping collection is none


def _report(proc: subprocess.CompletedProcess) -> dict:
    """The --json report but its server, stages and run id (which name the moment)."""
    report = json.loads(proc.stdout)
    return {"exit": proc.returncode, **_without_moment({k: v for k, v in report.items()
                                                         if k not in ("server", "stages", "run_id")})}


@pytest.fixture()
def env(mongo_uri, tmp_path) -> dict:
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_HOME": str(tmp_path / "home")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


@pytest.fixture()
def other_db(mongo_client, db):
    name = f"{db.name}_alone"
    yield mongo_client[name]
    mongo_client.drop_database(name)


def _both_ways(env: dict, db, other_db, paths: list[Path]) -> tuple[dict, dict]:
    batched = _cli(env, "load", "--json", "-q", "--workers", "1", "--db", db.name, *paths)
    alone = _cli({**env, "SCI_INGEST_SMALL_FILE_BYTES": "0"}, "load", "--json", "-q", "--workers", "1",
                 "--db", other_db.name, *paths)
    assert "Traceback" not in batched.stderr + alone.stderr, batched.stderr + alone.stderr
    return {"report": _report(batched), "stderr": batched.stderr.splitlines(), "stored": _stored(db)}, \
           {"report": _report(alone), "stderr": alone.stderr.splitlines(), "stored": _stored(other_db)}


def test_a_landing_folder_loaded_in_batches_is_stored_as_when_each_file_goes_alone(env, db, other_db, tmp_path):
    folder = _landing(tmp_path / "landing")
    batched, alone = _both_ways(env, db, other_db, [folder])
    # the folder is what it says: a failure, values set aside, a duplicate, records shared between files
    assert batched["report"]["exit"] == 2 and batched["report"]["status"] == "partial", batched["stderr"]
    entries = {e["_id"]: e for e in batched["stored"]["ingest_files"]}
    assert {Path(k).name for k, e in entries.items() if e["status"] == "failed"} >= {"cut_short.m10", "broken.jsonl"}
    assert any(e.get("duplicate_of") for e in entries.values())
    assert any(e.get("set_aside_total") for e in entries.values())
    assert len(batched["stored"]["searches"]) >= 20 and {"mp-1", "mp-2", "mp-3", "mp-4"} <= {
        d["_id"] for d in batched["stored"]["materials"]}
    for part in ("report", "stderr"):
        assert batched[part] == alone[part], part
    assert sorted(batched["stored"]) == sorted(alone["stored"])
    for name in sorted(batched["stored"]):
        for one, other in zip(batched["stored"][name], alone["stored"][name], strict=True):
            assert one == other, name


@pytest.mark.parametrize("name", ["fasta36_dna.m10", "materials_a.jsonl", "cut_short.m10", "broken.jsonl"])
def test_a_batch_of_one_is_a_file(env, db, other_db, tmp_path, name):
    path = _landing(tmp_path / "landing") / name
    batched, alone = _both_ways(env, db, other_db, [path])
    assert batched == alone
