"""A corpus of a hundred and more distinct real files for the load tests, built from the bundled samples.

``-m 10`` files: two different real sample outputs concatenated (a file of two
runs, which FASTA users make with ``cat`` and the parser reads), so every file
has its own content; only pairs that parse to the sum of their parts' queries
are used.  Record files: the sample materials and tasks in slices, each record
in one file only.  With ``shared_files``, also record files that share
records, in other versions (a field ``corpus_version``), windows that overlap
and modification times that do not follow the names: the stored version of a
shared record is then the newest holder's (``ingest.load.records``), whatever
the order or the timing of the loads.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
from pathlib import Path

from ingest.config import SAMPLES_DIR
from ingest.parsers.pasta import parse_dicts

PASTA = SAMPLES_DIR / "pasta"
MATERIALS = SAMPLES_DIR / "materials"
DATA = ("searches", "hits", "materials", "tasks")


def _queries(data: bytes) -> int:
    try:
        return sum(1 for _ in parse_dicts(io.BytesIO(data), "<pair>"))
    except Exception:  # a sample that does not concatenate cleanly is left out
        return -1


def build(folder: Path, n_pasta: int = 100, record_files: int = 5, records_per_file: int = 60,
          shared_files: int = 0) -> list[Path]:
    """Write the corpus into ``folder`` (pasta/ and records/); returns every file."""
    samples = sorted(p for p in PASTA.glob("*.m10"))
    texts = {p: p.read_bytes() for p in samples}
    counts = {p: _queries(t) for p, t in texts.items()}
    out = folder / "pasta"
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for a, b in itertools.permutations([p for p in samples if counts[p] > 0], 2):
        if len(files) == n_pasta:
            break
        data = texts[a] + texts[b]
        if _queries(data) != counts[a] + counts[b]:
            continue
        path = out / f"{len(files):03d}_{a.stem}+{b.stem}.m10"
        path.write_bytes(data)
        files.append(path)
    records = folder / "records"
    records.mkdir(exist_ok=True)
    for name in ("materials", "tasks"):
        with gzip.open(MATERIALS / f"{name}.jsonl.gz", "rt") as src:
            lines = list(itertools.islice(src, record_files * records_per_file))
        for i in range(record_files):
            path = records / f"{name}_{i:02d}.jsonl"
            path.write_text("".join(lines[i * records_per_file:(i + 1) * records_per_file]))
            files.append(path)
    if shared_files:
        files += _shared(folder / "shared", shared_files)
    return files


def _shared(out: Path, n: int, window: int = 40, step: int = 15) -> list[Path]:
    """``n`` materials files: file j holds records j*step .. j*step+window (each record in two or
    three files) in its own version; mtimes in an order unlike the names'."""
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(MATERIALS / "materials.jsonl.gz", "rt") as src:
        records = [json.loads(line) for line in itertools.islice(src, 2000)][-(n * step + window):]
    files = []
    base = 1_700_000_000
    for j in range(n):
        path = out / f"shared_{j:02d}.jsonl"
        path.write_text("".join(json.dumps({**r, "corpus_version": j}) + "\n" for r in records[j * step:j * step + window]))
        when = base + ((j * 7) % n) * 60  # a permutation of the files' order
        os.utime(path, (when, when))
        files.append(path)
    return files


def snapshot(db) -> dict:
    """What must be equal between two loads: every data collection's ``_id`` set, which holder's
    version each record is (its content and line), the versions kept, and the ledger."""
    state = {c: sorted(map(str, db[c].distinct("_id"))) for c in DATA}
    state["counts"] = {c: db[c].count_documents({}) for c in DATA}
    state["ledger"] = sorted((d["_id"], d["status"], d.get("sha256")) for d in db.ingest_files.find(
        {}, {"status": 1, "sha256": 1}))
    for c in ("materials", "tasks"):
        state[f"{c}_versions"] = sorted((str(d["_id"]), d["_source"]["sha256"], d["_source"]["line"])
                                        for d in db[c].find({}, {"_source": 1}))
    state["versions"] = sorted((v["_id"]["c"], str(v["_id"]["k"]), v["_id"]["s"]) for v in db.ingest_versions.find(
        {}, {"_id": 1}))
    return state


def assert_exact(db, expected: dict) -> None:
    """``db`` is what a clean load gives (``expected``: its :func:`snapshot`), and the ledger holds
    nothing in flight: no claim, no owner, no version left to drop, no batch."""
    assert snapshot(db) == expected
    assert db.ingest_claims.count_documents({}) == 0
    assert db.ingest_files.count_documents({"owner": {"$exists": True}}) == 0
    assert db.ingest_files.count_documents({"drop.0": {"$exists": True}}) == 0
    assert db.ingest_batches.count_documents({}) == 0
