"""A suite's documents read once, in bounded chunks, and its results accumulated chunk by chunk.

:func:`document_chunks` reads the suite's query (its filter and projection) on a
background thread, as undecoded BSON, ``chunk_rows`` documents at a time, at
most ``QUEUED_CHUNKS`` ahead of the consumer: the server sends the next chunk
while this process builds the rows of the last one and Great Expectations
checks them, and memory holds a few chunks whatever the collection's size.

:class:`Accumulator` merges the per-chunk results of one suite into the
suite's result, exactly as one run over the whole table would report it:

* row-wise ("map") expectations -- every ``expect_column_values_to_*`` except
  uniqueness, the column-pair ones, ``expect_select_column_values_to_be_unique_within_record``
  -- add their ``element_count``, ``unexpected_count`` and ``missing_count``;
  ``unexpected_percent`` is recomputed over the non-missing rows, and success
  is every chunk's success, or, with ``mostly``, the share of expected rows
  over all chunks against ``mostly``; the offending samples are the first
  ``sample_size`` of all chunks;
* uniqueness (``expect_column_values_to_be_unique``,
  ``expect_compound_columns_to_be_unique``) cannot be decided per chunk, since a
  value may repeat in another: each chunk keeps a 64-bit hash of each non-missing
  value (8 bytes a row, pandas' ``hash_pandas_object``) and the duplicates are
  counted over all hashes at the end (two different values share a hash with a
  probability of about n^2 / 2^65: 3e-6 for 10 million rows);
* anything else (an aggregate such as a mean or a row count) is reported as
  passed only if it passed in every chunk, with ``"per_chunk": true`` and the
  last chunk's ``observed_value``: give such a suite a ``max_rows`` that fits
  one chunk to check it on the whole table.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from analytics.validation.frames import build_frame
from analytics.validation.gx import GreatExpectations
from analytics.validation.suites import SuiteSpec

__all__ = ["raw_chunks", "check_chunk", "ChunkResult", "Accumulator", "engine", "QUEUED_CHUNKS", "DEFAULT_CHUNK_ROWS",
           "UNIQUE_TYPES"]

#: Documents per chunk of a suite, and how many chunks the reader may run ahead.
DEFAULT_CHUNK_ROWS = 25_000
QUEUED_CHUNKS = 3
BATCH_SIZE = 5_000
UNIQUE_TYPES = {"expect_column_values_to_be_unique": "column",
                "expect_compound_columns_to_be_unique": "column_list"}
_MAP_PREFIXES = ("expect_column_values_to_", "expect_column_pair_values_", "expect_multicolumn_values_")
_MAP_TYPES = {"expect_select_column_values_to_be_unique_within_record"}
_DONE = object()


def _is_map(kind: str) -> bool:
    return kind not in UNIQUE_TYPES and (kind in _MAP_TYPES or kind.startswith(_MAP_PREFIXES))


def raw_chunks(coll, query: dict | list[dict], projection: dict, chunk_rows: int = DEFAULT_CHUNK_ROWS,
               limit: int = 0) -> Iterator[bytes]:
    """The documents of ``coll.find(query, projection)`` as raw BSON, ``chunk_rows`` at a time, read ahead
    (a list of queries: each read in turn, their documents chunked together; ``limit`` per query).

    Errors of the read are raised here, in the consumer.  Leaving the loop early
    stops the reader.
    """
    from bson.codec_options import CodecOptions  # noqa: PLC0415 - lazy: importing analytics.validation must not import bson (tests/test_validate.py); it costs 6 ms
    from bson.raw_bson import RawBSONDocument  # noqa: PLC0415 - lazy: importing analytics.validation must not import bson (tests/test_validate.py); it costs 6 ms

    raw = coll.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    chunks: queue.Queue = queue.Queue(maxsize=QUEUED_CHUNKS)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def reader() -> None:
        try:
            pending: list[bytes] = []
            for one in query if isinstance(query, list) else [query]:
                with raw.find(one, projection, batch_size=BATCH_SIZE, limit=limit) as cursor:
                    for doc in cursor:
                        pending.append(doc.raw)
                        if len(pending) >= chunk_rows:
                            if not put(b"".join(pending)):
                                return
                            pending = []
            if pending:
                put(b"".join(pending))
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)
            return
        put(_DONE)

    thread = threading.Thread(target=reader, name=f"read-{coll.name}", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(timeout=10)


@dataclass
class ChunkResult:
    """What checking one chunk found: Great Expectations' result dicts and the uniqueness hashes."""

    documents: int
    rows: int
    truncated: bool
    results: list[dict]
    hashes: dict[int, Any]  # expectation index -> uint64 array of the chunk's non-missing values
    missing: dict[int, int]  # expectation index -> rows left out of the uniqueness count
    gx_version: str | None = None


_ENGINE = None


def engine():
    """This process's Great Expectations context, made once (importing it takes seconds)."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = GreatExpectations()
    return _ENGINE


def check_chunk(spec: SuiteSpec, raw: bytes, sample_size: int, max_rows: int | None = None) -> ChunkResult:
    """Decode one raw chunk, build the suite's rows and check them (runs on a Dask worker, or here)."""
    import bson  # noqa: PLC0415 - lazy: importing analytics.validation must not import bson (tests/test_validate.py); it costs 6 ms

    docs = bson.decode_all(raw)
    frame, truncated = build_frame(spec, docs, max_rows)
    if len(frame) == 0:
        return ChunkResult(len(docs), 0, truncated, [], {}, {})
    gx = engine()
    _, results = gx.validate(spec, frame, sample_size)
    hashes, missing = {}, {}
    for i, exp in enumerate(spec.all_expectations()):
        if exp["type"] in UNIQUE_TYPES:
            hashes[i], missing[i] = _unique_hashes(exp, frame)
    return ChunkResult(len(docs), len(frame), truncated, results, hashes, missing, gx.version)


def _unique_hashes(exp: dict, frame):
    """(uint64 hashes of the non-missing values or rows, rows left out) for a uniqueness expectation."""
    import pandas as pd  # noqa: PLC0415 - lazy: importing analytics.validation must not import pandas (tests/test_validate.py); it costs 0.3 s

    kwargs = exp["kwargs"]
    if exp["type"] == "expect_column_values_to_be_unique":
        column = frame[kwargs["column"]]
        present = column[column.notna()]
        values = present.astype(str) if present.dtype == object else present
        return pd.util.hash_pandas_object(values, index=False).to_numpy(), len(column) - len(present)
    part = frame[list(kwargs["column_list"])]
    present = part[part.notna().any(axis=1)]  # GX leaves out rows whose values are all missing
    return pd.util.hash_pandas_object(present.astype(str), index=False).to_numpy(), len(part) - len(present)


class Accumulator:
    """The results of one suite, merged over its chunks (see the module docstring)."""

    def __init__(self, expectations: list[dict], sample_size: int):
        self.expectations = expectations
        self.sample_size = sample_size
        self.merged: list[dict | None] = [None] * len(expectations)
        self.hashes: dict[int, list] = {i: [] for i, e in enumerate(expectations) if e["type"] in UNIQUE_TYPES}
        self.missing: dict[int, int] = {i: 0 for i in self.hashes}
        self.rows = 0
        self.documents = 0
        self.chunks = 0
        self.truncated = False
        self.gx_version: str | None = None

    @property
    def mergeable(self) -> bool:
        """Whether every expectation is row-wise: then the merged results alone (:meth:`state`) are
        what a later run adds the chunks of new documents to, with the verdict of one run over all."""
        return all(_is_map(e["type"]) for e in self.expectations)

    def state(self) -> dict:
        """What :meth:`restore` takes back (for a :attr:`mergeable` suite)."""
        return {"merged": self.merged, "rows": self.rows, "documents": self.documents, "chunks": self.chunks,
                "truncated": self.truncated, "gx_version": self.gx_version}

    def restore(self, state: dict) -> Accumulator:
        """Continue from a :meth:`state` of the same expectations: the chunks added from here on are
        merged into it."""
        merged = list(state["merged"])
        if len(merged) != len(self.expectations) or not self.mergeable:
            raise ValueError("a suite's state is of other expectations")
        self.merged = [dict(m) if m is not None else None for m in merged]
        self.rows, self.documents, self.chunks = int(state["rows"]), int(state["documents"]), int(state["chunks"])
        self.truncated, self.gx_version = bool(state["truncated"]), state.get("gx_version")
        return self

    def add(self, chunk: ChunkResult) -> None:
        """Merge one checked chunk."""
        self.documents += chunk.documents
        self.truncated = self.truncated or chunk.truncated
        if not chunk.rows:
            return
        self.chunks += 1
        self.rows += chunk.rows
        self.gx_version = chunk.gx_version or self.gx_version
        for i, array in chunk.hashes.items():
            self.hashes[i].append(array)
            self.missing[i] += chunk.missing[i]
        for i, result in enumerate(chunk.results):
            kind = self.expectations[i]["type"]
            current = self.merged[i]
            if current is None:
                self.merged[i] = first = dict(result)
                if not _is_map(kind) and kind not in UNIQUE_TYPES:
                    first["per_chunk"] = True
                continue
            current["success"] = current["success"] and result["success"]
            current["exception"] = current.get("exception") or result.get("exception")
            for key in ("element_count", "unexpected_count", "missing_count"):
                if key in result:
                    current[key] = current.get(key, 0) + (result[key] or 0)
            for key in ("sample", "sample_rows"):
                if key in result:
                    current[key] = (current.get(key) or []) + list(result[key] or [])
                    current[key] = current[key][: self.sample_size]
            if "observed_value" in result:
                current["observed_value"] = result["observed_value"]

    def finish(self) -> tuple[dict, list[dict]]:
        """(statistics, result dicts) for the whole suite."""
        import numpy as np  # noqa: PLC0415 - lazy: importing analytics.validation must not import numpy (tests/test_validate.py); it costs 0.1 s

        results = []
        for i, result in enumerate(self.merged):
            exp = self.expectations[i]
            result = dict(result or {"expectation": exp["type"], "success": True})
            if i in self.hashes:
                everything = np.concatenate(self.hashes[i]) if self.hashes[i] else np.empty(0, dtype="uint64")
                _, counts = np.unique(everything, return_counts=True)
                result["unexpected_count"] = int(counts[counts > 1].sum())
                result["missing_count"] = self.missing[i]
                result["element_count"] = self.rows
            if "unexpected_count" in result and "element_count" in result:
                considered = result["element_count"] - (result.get("missing_count") or 0)
                unexpected = result["unexpected_count"] or 0
                result["unexpected_percent"] = unexpected / considered * 100 if considered else None
                mostly = exp["kwargs"].get("mostly")
                if i in self.hashes or mostly is not None:
                    share = (considered - unexpected) / considered if considered else 1.0
                    result["success"] = not result.get("exception") and share >= (1.0 if mostly is None else mostly)
            if self.chunks > 1:
                result["chunks"] = self.chunks
            results.append(result)
        successful = sum(1 for r in results if r["success"])
        stats = {"evaluated_expectations": len(results), "successful_expectations": successful,
                 "unsuccessful_expectations": len(results) - successful}
        return stats, results
