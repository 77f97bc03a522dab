"""A corpus of hundreds of distinct real files for the load tests, built from the bundled samples.

``-m 10`` files: two different real sample outputs concatenated (a file of two
runs, which FASTA users make with ``cat`` and the parser reads), so every file
has its own content; only pairs that parse to the sum of their parts' queries
are used.  Record files: the sample materials and tasks in slices, each record
in one file only (no natural key in two files, so "the same ids as a clean
load" has one answer whatever the order).
"""

from __future__ import annotations

import gzip
import io
import itertools
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


def build(folder: Path, n_pasta: int = 200, record_files: int = 10, records_per_file: int = 60) -> list[Path]:
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
    return files


def snapshot(db) -> dict:
    """What must be equal between two loads: every data collection's ``_id`` set, and the ledger."""
    state = {c: sorted(map(str, db[c].distinct("_id"))) for c in DATA}
    state["counts"] = {c: db[c].count_documents({}) for c in DATA}
    state["ledger"] = sorted((d["_id"], d["status"]) for d in db.ingest_files.find({}, {"status": 1}))
    return state
