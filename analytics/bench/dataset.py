"""The analysis experiments' input, and the Dask stage they time.

**Input.**  :class:`BenchData` fills ``ctx.db_name`` with what the two declared analyses
read, at a size of ``k`` copies (1x, 2x, 4x, 8x ...), the way the project's ingestion
would write it:

* ``materials``: ``n`` Materials-Project-style records made by the project's generator
  (``samples/materials/generate.py``: :func:`build` with a fixed seed, written with its
  :func:`write_jsonl_gz` into the scratch folder).  Copy ``k`` is that file with every id
  ``"mp-N"`` replaced by ``"mp-(N + k * 10,000,000)"`` -- the rule of
  ``benchmarks/load_corpus.py`` -- written as its own JSON Lines file, read back with the
  materials parser (:func:`ingest.parsers.materials.read_records`) and turned into the
  loader's documents (:func:`ingest.documents.record_document`: ``_id``, ``_ingest``,
  ``_source`` with the copy's sha256 and path), then inserted in batches.  Tasks are not
  made: neither analysis reads them.
* ``searches`` and ``hits``: every ``samples/pasta/*.m10[.gz]`` file parsed once
  (:func:`ingest.parsers.pasta.parse_dicts`); copy ``j`` of a file gets the documents of
  :func:`ingest.documents.search_documents` for a content hash derived from the file's
  sha256 and ``j``, so its ``_id`` s (``sha[:20]:query``, ``...:rank``) are new while the
  searches and hits are the samples' own.  ``pasta_copies`` copies of the whole sample
  set make one scale unit.

Growing is cumulative (:meth:`BenchData.grow` adds only the missing copies), so an
experiment measures 1x, then grows to 2x and measures again.  Counts and BSON bytes are
kept per collection (:meth:`BenchData.counts`).

**The stage.**  :func:`run_stage` is the runner's read, apply and combine
(:mod:`analytics.runner`) with the split size exposed, which the runner fixes: it plans
with :func:`analytics.reading.planning.plan_reads` (the server decides, by ``explain``, between
key ranges and one stream), then either reads ``partitions`` key ranges on the workers
(:func:`analytics.reading.partitions.read_collection`) or streams chunks of ``chunk_rows``
documents to them (the runner's own streaming loop), applies the declared per-partition
function there and combines the partials once; nothing is published.
:func:`split_for` turns a split size in bytes into that number of ranges or rows, as
mongo-hadoop's ``splitVector`` does (the collection's size over the split size, or the
split size over the average document).  :func:`frames_equal` compares two output
frames on their rows, with a float tolerance.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import bson
import numpy as np
import pandas as pd

from analytics.reading.partitions import read_collection
from analytics.reading.planning import plan_reads
from analytics.runner import apply_partition, stream_chunks
from ingest.cluster import thread_count
from ingest.documents import record_document, search_documents
from ingest.errors import ParseError
from ingest.fileio import open_binary
from ingest.parsers.materials import read_records
from ingest.parsers.pasta import parse_dicts
from ingest.store.catalog import HITS, MATERIALS, QUERY_INDEXES, SEARCHES
from ingest.store.mongo import db_errors, shared_client
from ingest.store.servers import ensure_indexes

__all__ = ["BenchData", "StageResult", "run_stage", "split_for", "collection_size", "frames_equal", "generator",
           "ID_OFFSET", "SEED"]

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "samples" / "materials" / "generate.py"
PASTA = ROOT / "samples" / "pasta"
SEED = 20240611  # the generator's default seed: the samples' own materials at n = 3000
ID_OFFSET = 10_000_000  # benchmarks/load_corpus.py: the samples' ids are below 3,500,000
BATCH = 1_000  # documents per insert_many
_ID = re.compile(rb'"mp-(\d+)"')


def generator():
    """The project's materials generator module (``samples/materials/generate.py``)."""
    name = "sci_ingest_samples_materials_generate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, GENERATOR)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class _Tally:
    documents: int = 0
    bytes: int = 0


class BenchData:
    """The materials and search documents of ``ctx.db_name``, grown copy by copy.

    ``materials``: records per copy; ``pasta_copies``: copies of the whole
    ``samples/pasta`` set per copy (0: no search documents).  Nothing is written
    until :meth:`grow`.
    """

    def __init__(self, ctx, *, materials: int = 3000, pasta_copies: int = 0, seed: int = SEED):
        self.ctx = ctx
        self.uri, self.db_name = ctx.uri, ctx.db_name
        self.n_materials, self.pasta_copies, self.seed = materials, pasta_copies, seed
        self.scale = 0  # copies written so far
        self.tally = {MATERIALS: _Tally(), SEARCHES: _Tally(), HITS: _Tally()}
        self.load_seconds = 0.0
        self._lines: list[bytes] | None = None
        self._queries: list[tuple[str, str, list[dict]]] | None = None
        self.folder = Path(ctx.scratch) / "bench-data"

    # ------------------------------------------------------------------ sources
    def _material_lines(self) -> list[bytes]:
        """The generator's records (written once with its own writer), as JSON lines."""
        if self._lines is None:
            gen = generator()
            self.folder.mkdir(parents=True, exist_ok=True)
            materials, _tasks = gen.build(self.seed, self.n_materials)
            path = self.folder / "materials.jsonl.gz"
            gen.write_jsonl_gz(path, materials)
            with gzip.open(path, "rb") as fh:
                self._lines = fh.read().splitlines(keepends=True)
            if sum(len(_ID.findall(x)) for x in self._lines) != sum(x.count(b"mp-") for x in self._lines):
                raise ValueError("an 'mp-' outside a quoted id: the id shift would miss it")
        return self._lines

    def _pasta_queries(self) -> list[tuple[str, str, list[dict]]]:
        """(sha256, resolved path, query dicts) of every sample ``-m 10`` file, parsed once."""
        if self._queries is None:
            found = []
            for path in sorted(PASTA.glob("*.m10")) + sorted(PASTA.glob("*.m10.gz")):
                with open_binary(path) as handle:
                    queries = list(parse_dicts(handle, str(path)))
                found.append((_sha256(path.read_bytes()), str(path.resolve()), queries))
            self._queries = found
        return self._queries

    # ------------------------------------------------------------------ documents
    def material_documents(self, copy: int) -> list[dict]:
        """The loader's documents of materials copy ``copy`` (its file written to scratch first)."""
        lines = self._material_lines()
        offset = copy * ID_OFFSET
        data = b"".join(lines if not copy else
                        (_ID.sub(lambda m: b'"mp-%d"' % (int(m.group(1)) + offset), x) for x in lines))
        path = self.folder / f"materials_c{copy:02d}.jsonl"
        path.write_bytes(data)
        sha, where = _sha256(data), str(path.resolve())
        docs = []
        for item in read_records(io.BytesIO(data), str(path)):
            if isinstance(item, ParseError):
                raise item
            if item.kind == "material":
                docs.append(record_document(item, sha256=sha, path=where))
        return docs

    def search_documents(self, copy: int) -> tuple[list[dict], list[dict]]:
        """(searches, hits) documents of pasta copy ``copy``: new ids, the samples' content."""
        searches: list[dict] = []
        hits: list[dict] = []
        for sha, path, queries in self._pasta_queries():
            shifted = sha if copy == 0 else _sha256(f"{sha}:copy{copy}".encode())
            where = path if copy == 0 else f"{path}#copy{copy}"
            for index, query in enumerate(queries, start=1):
                doc, its_hits = search_documents(query, sha256=shifted, path=where, query_index=index)
                searches.append(doc)
                hits.extend(its_hits)
        return searches, hits

    def _insert(self, db, collection: str, docs: list[dict]) -> None:
        tally = self.tally[collection]
        with db_errors(f"inserting bench documents into {self.db_name}.{collection}", uri=self.uri):
            for start in range(0, len(docs), BATCH):
                batch = docs[start:start + BATCH]
                db[collection].insert_many(batch, ordered=False)
        tally.documents += len(docs)
        tally.bytes += sum(len(bson.encode(d)) for d in docs)

    # ------------------------------------------------------------------ growing
    def grow(self, scale: int) -> dict:
        """Write the copies missing up to ``scale`` (cumulative); the counts afterwards."""
        if scale <= self.scale:
            return self.counts()
        started = time.perf_counter()
        db = shared_client(self.uri)[self.db_name]
        for copy in range(self.scale, scale):
            if self.n_materials:
                self._insert(db, MATERIALS, self.material_documents(copy))
            for j in range(copy * self.pasta_copies, (copy + 1) * self.pasta_copies):
                searches, hits = self.search_documents(j)
                self._insert(db, SEARCHES, searches)
                self._insert(db, HITS, hits)
        if self.pasta_copies and self.scale == 0:  # the catalog's (search_id, rank): the runner reads hits on it
            ensure_indexes(db, {HITS: QUERY_INDEXES[HITS][:1]})
        self.load_seconds += time.perf_counter() - started
        self.ctx.log(f"bench data at {scale}x: {self.describe()} ({time.perf_counter() - started:.1f} s)")
        self.scale = scale
        return self.counts()

    def seconds_per_copy(self) -> float:
        return self.load_seconds / self.scale if self.scale else 0.0

    def counts(self) -> dict:
        """Documents and BSON bytes per collection, at the current scale."""
        out = {"scale": self.scale}
        for name, tally in self.tally.items():
            out[f"{name}_documents"] = tally.documents
            out[f"{name}_bytes"] = tally.bytes
        return out

    def documents(self, collection: str) -> int:
        return self.tally[collection].documents

    def bytes(self, collection: str) -> int:
        return self.tally[collection].bytes

    def describe(self) -> str:
        return ", ".join(f"{t.documents:,} {name} ({t.bytes / 2**20:.1f} MB)"
                         for name, t in self.tally.items() if t.documents)


# ------------------------------------------------------------------ the stage
def collection_size(uri: str, db_name: str, collection: str) -> tuple[int, int]:
    """(documents, data bytes) of ``collection`` as the server reports them (``collStats``)."""
    with db_errors(f"asking the size of {db_name}.{collection}", uri=uri):
        stats = shared_client(uri)[db_name].command("collStats", collection)
    return int(stats.get("count") or 0), int(stats.get("size") or 0)


def split_for(uri: str, db_name: str, collection: str, split_bytes: float) -> tuple[int, int]:
    """(key ranges, rows per chunk) for splits of ``split_bytes`` of ``collection``.

    As mongo-hadoop's ``splitVector``: ranges = the collection's data size over the
    split size; rows = the split size over the average document size (at least 1).
    """
    count, size = collection_size(uri, db_name, collection)
    average = size / count if count else 1.0
    return max(1, math.ceil(size / split_bytes)), max(1, int(split_bytes // max(average, 1.0)))


@dataclass
class StageResult:
    frame: object  # the output frame (conformed to the analysis's output types)
    excluded: dict
    rows: int  # records read
    partitions: int  # key ranges or streamed chunks
    mode: str  # "ranges" or "stream"
    seconds: float
    plan: dict = field(default_factory=dict)


def run_stage(analysis, client, uri: str, db_name: str, *, partitions: int | None = None,
              chunk_rows: int | None = None, mode: str | None = None) -> StageResult:
    """Plan, read, apply and combine ``analysis`` on the Dask ``client`` (nothing published).

    ``partitions`` key ranges when the server's plans allow them (or ``mode="ranges"``),
    else one stream in chunks of ``chunk_rows`` (sorted on the group key, if any, so a
    group is never split).
    """
    from dask import delayed  # noqa: PLC0415 - lazy: bench list imports every experiment (this module with them); dask costs 0.1 s

    started = time.perf_counter()
    plan = plan_reads(uri, db_name, analysis.source, columns=analysis.columns, key=analysis.partition_key,
                      query=analysis.filter or None, group_key=analysis.group_key, partitions=partitions,
                      threads=thread_count(client), mode=mode, chunk_rows=chunk_rows, sort_groups=True)
    if plan.mode == "stream":
        done = stream_chunks(analysis, client, plan.stream)
        partials, rows, parts = [p for _, p, _ in done], sum(r for r, _, _ in done), len(done)
    elif plan.specs:
        ddf = read_collection(plan.specs, analysis.schema.empty())
        done = client.compute([delayed(apply_partition)(analysis.partition, part) for part in ddf.to_delayed()], sync=True)
        partials, rows, parts = [p for _, p in done], sum(r for r, _ in done), len(plan.specs)
    else:
        partials, rows, parts = [], 0, 0
    frame, excluded = analysis.combine_partials(partials)
    return StageResult(frame=frame, excluded=excluded, rows=rows, partitions=parts, mode=plan.mode,
                       seconds=time.perf_counter() - started, plan=plan.describe())


# ------------------------------------------------------------------ comparing outputs
def frames_equal(a, b, key: str, rtol: float = 1e-9, atol: float = 1e-9) -> tuple[bool, str]:
    """Whether two output frames hold the same rows (sorted on ``key``): numbers within a
    tolerance (NaN equal to NaN), everything else exactly (missing equal to missing); and why not."""
    if list(a.columns) != list(b.columns):
        return False, f"columns differ: {list(a.columns)} vs {list(b.columns)}"
    if len(a) != len(b):
        return False, f"{len(a)} rows vs {len(b)}"
    a = a.sort_values(key, kind="mergesort").reset_index(drop=True)
    b = b.sort_values(key, kind="mergesort").reset_index(drop=True)
    for col in a.columns:
        x, y = a[col], b[col]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y) \
                and not pd.api.types.is_bool_dtype(x):
            xv = pd.to_numeric(x, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
            yv = pd.to_numeric(y, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
            if not np.allclose(xv, yv, rtol=rtol, atol=atol, equal_nan=True):
                bad = int(np.flatnonzero(~np.isclose(xv, yv, rtol=rtol, atol=atol, equal_nan=True))[0])
                return False, f"{col} differs at {a[key].iloc[bad]!r}: {xv[bad]!r} vs {yv[bad]!r}"
        else:
            xs = [None if pd.isna(v) else str(v) for v in x]
            ys = [None if pd.isna(v) else str(v) for v in y]
            if xs != ys:
                bad = next(i for i, (p, q) in enumerate(zip(xs, ys)) if p != q)
                return False, f"{col} differs at {a[key].iloc[bad]!r}: {xs[bad]!r} vs {ys[bad]!r}"
    return True, ""
