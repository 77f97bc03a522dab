"""One query read once as a stream and cut client-side into bounded chunks.

The alternative to key-range partitions for servers that cannot sample or seek
a key cheaply (see :mod:`analytics.reading.planning`).  :func:`read_chunks` runs one
``find`` with the projection derived from the declared columns (or none, for
the whole documents: :func:`analytics.reading.planning.whole_documents`) and yields the
documents undecoded, about ``chunk_rows`` at a time; :func:`chunk_frame` turns
one chunk into a typed frame wherever
the chunk is handled -- on a Dask worker, in parallel with the read of the
next one.  Memory holds about one chunk per worker whatever the collection's
size.  With a group path a chunk is cut only where the group's value changes
(a group larger than a chunk makes that chunk larger, never splits it).  When
the spec is ``sorted`` the query is sorted on the group path, so the documents
of one group always travel together; unsorted, a group whose documents are not
contiguous in the server's natural order can reach several chunks, and the
reader of the stream must mend it (:func:`analytics.runner` re-reads such
groups whole).  Sorting is not free: the embedded server builds the whole sorted result
before the first batch (a 10x ``hits`` read took 61 s sorted, 48 s unsorted).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import bson
from bson.errors import InvalidBSON

from ingest.schema import Column, Schema, get_path
from ingest.store.mongo import db_errors, shared_client

__all__ = ["StreamSpec", "read_chunks", "chunk_frame", "batch_starts"]

#: Documents per server round trip, and per chunk unless a spec says otherwise.
BATCH_SIZE = 5_000
DEFAULT_CHUNK_ROWS = 5_000


@dataclass(frozen=True)
class StreamSpec:
    """Everything needed to stream one source: where, which documents, which columns, in what order."""

    uri: str
    db_name: str
    collection: str
    query: dict | None = None
    #: Several queries read one after the other as one stream (``query`` is then unused): key ranges
    #: of distinct groups, each its own index seek.
    queries: tuple[dict, ...] = ()
    columns: tuple[Column, ...] = field(default=())
    group_key: str | None = None  # the declared column whose equal values belong together
    group_path: str | None = None  # its document path: chunks are cut only where its value changes
    sorted: bool = False  # sort the query on group_path (every group then arrives whole)
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    whole_documents: bool = False  # no projection: the documents as stored (see analytics.reading.planning)

    def describe(self) -> str:
        order = ""
        if self.group_path:
            order = f", sorted on {self.group_path}" if self.sorted else f", cut where {self.group_path} changes"
        whole = ", whole documents" if self.whole_documents else ""
        ranges = f" of {len(self.queries)} queries" if self.queries else ""
        return f"{self.db_name}.{self.collection} as one stream{ranges}{order}{whole}"


def read_chunks(spec: StreamSpec) -> Iterator[tuple[int, bytes]]:
    """``(documents, raw BSON)`` chunks of about ``spec.chunk_rows`` documents, in stream order.

    The server's batches arrive as raw bytes (``find_raw_batches``): the driver
    makes no object per document, and this loop only walks the documents'
    length prefixes, decoding just the documents it must compare at a cut.
    Whoever handles a chunk (a Dask worker) decodes it with :func:`chunk_frame`,
    so decoding runs in parallel with the read.
    """
    schema = Schema(spec.columns)
    path = spec.group_path
    sort = [(path, 1)] if path and spec.sorted else None
    pending = bytearray()
    count = 0
    last = b""  # the last document of ``pending``
    boundary: object = _UNSET  # the group key the current oversized chunk must not be cut in
    coll = shared_client(spec.uri)[spec.db_name][spec.collection]
    for query in spec.queries or (spec.query or {},):
        with db_errors(f"reading {spec.describe()}", uri=spec.uri):
            cursor = coll.find_raw_batches(query, None if spec.whole_documents else schema.projection(),
                                           sort=sort, batch_size=BATCH_SIZE)
            try:
                for batch in cursor:
                    starts = batch_starts(batch)
                    i, n = 0, len(starts) - 1
                    while i < n:
                        room = spec.chunk_rows - count
                        if room > 0:  # fill the chunk
                            j = min(n, i + room)
                        elif path is None:  # full, and the next document opens a new chunk
                            j = i
                        else:  # full: run on to the end of its last group
                            if boundary is _UNSET:
                                boundary = _raw_path(last, path)
                            j = i
                            while j < n and _raw_path(batch[starts[j]:starts[j + 1]], path) == boundary:
                                j += 1
                        if j > i:
                            pending += batch[starts[i]:starts[j]]
                            count += j - i
                            last = batch[starts[j - 1]:starts[j]]
                            i = j
                        elif room <= 0:  # full, and document i opens a new chunk
                            yield count, bytes(pending)
                            pending, count, boundary = bytearray(), 0, _UNSET
            finally:
                cursor.close()
    if count:
        yield count, bytes(pending)


def chunk_frame(columns: tuple[Column, ...], raw: bytes):
    """The typed frame of one raw chunk (runs where the chunk is handled, e.g. on a Dask worker).

    Two ways to the same frame.  A chunk that holds, under the declared names, only
    values of the declared kinds (and no null inside a list of strings) goes through
    pymongoarrow (:meth:`ingest.query.arrow.Converter.clean`: its screen finds the
    others in the raw bytes); any other chunk is decoded by the ``bson`` module and
    read value by value (:meth:`ingest.schema.Schema.read`: :func:`ingest.schema.coerce`'s
    rules).  A clean chunk reads the same both ways (``tests/test_chunk_frames.py``
    holds them to it).  The first way costs less (the few-hits shape's 36,000 projected
    hits: 0.21-0.25 s against 0.29-0.39 s) and, unlike the second, is fast enough for whole
    documents (:func:`analytics.reading.planning.whole_documents`)."""
    schema = Schema(columns)
    converter = _converter(schema.columns)
    table = converter.clean(raw) if converter is not None else None
    if table is not None:
        return schema.frame_of(table)
    return schema.frame(schema.read(bson.decode_all(raw)))


@functools.lru_cache(maxsize=64)
def _converter(columns: tuple[Column, ...]):
    """The pymongoarrow reader of ``columns``; None where a path is not of its shapes (a negative
    list index, a list of lists): those chunks are read the exact way."""
    if any(part.startswith("-") for c in columns for part in c.path.split(".")):
        return None
    from ingest.query.arrow import Converter  # noqa: PLC0415 - lazy: pymongoarrow and pyarrow.compute cost 0.1 s at import, paid only where chunks are decoded

    try:
        return Converter(columns)
    except ValueError:
        return None


_UNSET = object()


def batch_starts(batch: bytes) -> list[int]:
    """Where each document of a raw batch starts, and the batch's end."""
    starts = [0]
    end, pos = len(batch), 0
    while pos < end:
        size = int.from_bytes(batch[pos:pos + 4], "little")
        if size < 5 or pos + size > end:  # never loop on a length that cannot be
            raise InvalidBSON(f"a document of the server's batch claims {size} bytes at byte {pos} of {end}")
        pos += size
        starts.append(pos)
    return starts


def _raw_path(raw: bytes, path: str):
    return get_path(bson.decode(raw), path)

