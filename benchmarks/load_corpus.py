"""The load-benchmark corpus: its files, its documents, its materials part.

    python benchmarks/load_corpus.py materials OUT_DIR SCALE   # write OUT_DIR/materials/*.jsonl.gz
    python benchmarks/load_corpus.py count DIR ...             # files, bytes, documents (JSON on stdout)
    python benchmarks/load_corpus.py summary OUT_DIR SCALE STARTED JOBS
        # count OUT_DIR, write OUT_DIR/.corpus.json (with the generation time since the
        # epoch time STARTED), print one line

Used by ``make_load_corpus.sh`` (which runs ssearch36 for the ``-m 10`` part) and by
``bench_load.py`` (which pre-builds the documents for its raw-insert ceiling).  Needs the
project installed (``make install``): documents are made by the project's own parsers and
document builders, so they are the loader's documents, ``_id``s included.

**Materials part.** ``samples/materials/materials.jsonl.gz`` (3000 records) and
``tasks.jsonl.gz`` (6040) are split, in file order, into ``PARTS`` (10) files each per
copy; copy 0 is the samples as they are.  ``SCALE`` copies are written; copy ``k`` > 0 has
every id ``"mp-N"`` (in ``material_id``, ``task_id``, ``task_ids`` and wherever else an id
is written) replaced by ``"mp-(N + k * 10,000,000)"`` (the samples' ids are below
3,500,000), so natural keys stay distinct across all files and the links between
materials and tasks still hold.  gzip with mtime 0 and no name: the same bytes every time.

**Documents.** One ``searches`` document per query and one ``hits`` document per hit of a
``-m 10`` file (``parse_dicts`` -> ``ingest.documents.search_documents``), one
``materials`` / ``tasks`` document per record (``read_records`` ->
``ingest.documents.record_document``), with the file's sha256 and resolved path, as the
loader writes them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "materials"
PARTS = 10
ID_OFFSET = 10_000_000
SEARCH_SUFFIXES = (".m10", ".m10.gz")
RECORD_SUFFIXES = (".jsonl", ".jsonl.gz")
_ID = re.compile(rb'"mp-(\d+)"')


# ------------------------------------------------------------------ files
def corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    """The data files under ``paths`` (sorted; hidden files and directories left out)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [Path(root) / f for f in sorted(files)
                      if not f.startswith(".") and f.endswith(SEARCH_SUFFIXES + RECORD_SUFFIXES)]
    return found


def is_search_file(path: Path) -> bool:
    return path.name.endswith(SEARCH_SUFFIXES)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------ documents
def documents(path: Path) -> Iterator[tuple[str, dict]]:
    """(collection, document) for every document the loader stores for ``path``."""
    from ingest.documents import record_document, search_documents
    from ingest.errors import ParseError
    from ingest.fileio import open_binary
    from ingest.store.catalog import HITS, MATERIALS, SEARCHES, TASKS

    sha = sha256_of(path)
    key = str(Path(path).resolve())
    with open_binary(path) as handle:
        if is_search_file(path):
            from ingest.parsers.pasta import parse_dicts

            for index, query in enumerate(parse_dicts(handle, str(path)), start=1):
                doc, hits = search_documents(query, sha256=sha, path=key, query_index=index, fmt="pasta")
                yield SEARCHES, doc
                for hit in hits:
                    yield HITS, hit
        else:
            from ingest.parsers.materials import read_records

            colls = {"material": MATERIALS, "task": TASKS}
            for item in read_records(handle, str(path)):
                if isinstance(item, ParseError):
                    raise item
                yield colls[item.kind], record_document(item, sha256=sha, path=key)


def count(paths: Iterable[str | Path]) -> dict:
    """Files, bytes and documents by collection (1 + hits per query; one per record)."""
    from ingest.errors import ParseError
    from ingest.fileio import open_binary
    from ingest.parsers.materials import read_records
    from ingest.parsers.pasta import parse_dicts

    files = corpus_files(paths)
    docs = {"searches": 0, "hits": 0, "materials": 0, "tasks": 0}
    search_files = 0
    for path in files:
        with open_binary(path) as handle:
            if is_search_file(path):
                search_files += 1
                for query in parse_dicts(handle, str(path), sequences=False):
                    docs["searches"] += 1
                    docs["hits"] += len(query["hits"])
            else:
                for item in read_records(handle, str(path)):
                    if isinstance(item, ParseError):
                        raise item
                    docs["materials" if item.kind == "material" else "tasks"] += 1
    return {"files": len(files), "search_files": search_files, "record_files": len(files) - search_files,
            "bytes": sum(p.stat().st_size for p in files), "documents": sum(docs.values()), "by_collection": docs}


# ------------------------------------------------------------------ materials part
def _shifted(line: bytes, offset: int) -> bytes:
    return _ID.sub(lambda m: b'"mp-%d"' % (int(m.group(1)) + offset), line)


def write_materials(out_dir: Path, scale: int, parts: int = PARTS) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in ("materials", "tasks"):
        with gzip.open(SAMPLES / f"{kind}.jsonl.gz", "rb") as fh:
            lines = fh.read().splitlines(keepends=True)
        quoted = sum(len(_ID.findall(line)) for line in lines)
        if quoted != sum(line.count(b"mp-") for line in lines):
            raise SystemExit(f"{kind}: an 'mp-' outside a quoted id; the id shift would miss it")
        for copy in range(scale):
            rows = lines if copy == 0 else [_shifted(line, copy * ID_OFFSET) for line in lines]
            for part in range(parts):
                path = out_dir / f"{kind}_c{copy:02d}_p{part:02d}.jsonl.gz"
                chunk = rows[part * len(rows) // parts: (part + 1) * len(rows) // parts]
                with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    gz.writelines(chunk)
                written.append(path)
    return written


def summary(out_dir: Path, scale: int, started: float, jobs: int) -> dict:
    generation = time.time() - started
    t0 = time.perf_counter()
    figures = count([out_dir])
    figures.update(scale=scale, jobs=jobs, generation_seconds=round(generation, 1),
                   count_seconds=round(time.perf_counter() - t0, 1))
    (out_dir / ".corpus.json").write_text(json.dumps(figures) + "\n")
    d = figures["by_collection"]
    print(f"{out_dir}: {figures['files']} files ({figures['search_files']} -m 10, {figures['record_files']} "
          f"JSON Lines), {figures['bytes']:,} bytes, {figures['documents']:,} documents ({d['searches']:,} "
          f"searches, {d['hits']:,} hits, {d['materials']:,} materials, {d['tasks']:,} tasks); generated in "
          f"{figures['generation_seconds']} s ({jobs} jobs), counted in {figures['count_seconds']} s")
    return figures


def main(argv: list[str]) -> int:
    if argv[:1] == ["materials"] and len(argv) == 3:
        files = write_materials(Path(argv[1]) / "materials", int(argv[2]))
        print(f"{len(files)} materials/tasks files in {Path(argv[1]) / 'materials'}", file=sys.stderr)
        return 0
    if argv[:1] == ["summary"] and len(argv) == 5:
        summary(Path(argv[1]), int(argv[2]), float(argv[3]), int(argv[4]))
        return 0
    if argv[:1] == ["count"] and len(argv) >= 2:
        print(json.dumps(count(argv[1:])))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
