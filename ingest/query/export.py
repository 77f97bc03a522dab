"""``sci-ingest export``: a curated collection to Parquet, Arrow IPC or CSV, in bounded memory.

The query's raw BSON batches (:data:`BATCH` documents each, the projection of the
columns) are read by a background thread, at most :data:`AHEAD` batches ahead, while this
thread converts the previous ones (:class:`ingest.query.arrow.Converter`: pymongoarrow with
the declared schema, documents of other types set aside) and writes them.  The embedded
server builds a query's whole result before it sends the first batch (11 of the 13.5 s of
200,000 hits); the conversion then overlaps the server encoding the rest.  Parquet row
groups hold up to :data:`ROW_GROUP` rows, the only rows held at once.

Outputs are written to a temporary file next to ``--out`` and renamed when complete.  The
documents set aside are listed in ``<out>.rejects.jsonl`` (one JSON line each: ``_id`` and,
per field, the path, the kind expected, the type found and the value); a stale rejects
file of an earlier export of the same name is removed.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from bson import json_util

from ingest.query.arrow import Converter
from ingest.store.mongo import db_errors

__all__ = ["BATCH", "AHEAD", "ROW_GROUP", "FORMATS", "ExportResult", "export", "rejects_path", "summary_lines"]

BATCH = 2000
AHEAD = 4
ROW_GROUP = 65_536
FORMATS = ("parquet", "arrow", "csv")
_END = object()


@dataclass
class ExportResult:
    path: str
    format: str
    rows: int = 0
    documents: int = 0
    rejected: int = 0
    rejected_by: dict = field(default_factory=dict)  # "field (path): type" -> count
    nan_nulls: dict = field(default_factory=dict)
    rejects_path: str | None = None
    fast_batches: int = 0
    exact_batches: int = 0
    seconds: float = 0.0
    columns: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def rejects_path(out: str) -> str:
    return f"{out}.rejects.jsonl"


def _tmp_name(path: str) -> str:
    folder, base = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{base}.{os.getpid()}.part")


class _Reader(threading.Thread):
    """Drains a raw-batch cursor into a bounded queue (the exception, if any, travels through it)."""

    def __init__(self, cursor, ahead: int):
        super().__init__(name="sci-ingest-export-reader", daemon=True)
        self.cursor, self.stop = cursor, threading.Event()
        self.queue: queue.Queue[object] = queue.Queue(maxsize=ahead)  # raw batches (bytes), then _END or the error

    def run(self) -> None:
        try:
            for batch in self.cursor:
                while not self.stop.is_set():
                    try:
                        self.queue.put(batch, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if self.stop.is_set():
                    break
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, which maps it
            self._put(exc)
        finally:
            self.cursor.close()

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def batches(self):
        while True:
            item = self.queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


class _Writer:
    """One output file of ``schema`` in ``fmt``, written to ``tmp``."""

    def __init__(self, fmt: str, tmp: str, schema):
        self.fmt, self.tmp, self.schema = fmt, tmp, schema
        self.buffer: list = []
        self.buffered = 0
        if fmt == "parquet":
            self.writer = pq.ParquetWriter(tmp, schema)
        elif fmt == "arrow":
            self.sink = pa.OSFile(tmp, "wb")
            self.writer = pa.ipc.new_file(self.sink, schema)
        elif fmt == "csv":
            self.lists = [i for i, f in enumerate(schema) if pa.types.is_list(f.type)]
            text = pa.schema([pa.field(f.name, pa.string()) if i in self.lists else f for i, f in enumerate(schema)])
            self.csv_schema = text
            self.writer = pcsv.CSVWriter(tmp, text)
        else:
            raise ValueError(f"unknown export format {fmt!r}")

    def write(self, table) -> None:
        if not table.num_rows:
            return
        if self.fmt == "parquet":  # row groups of up to ROW_GROUP rows
            self.buffer.append(table)
            self.buffered += table.num_rows
            if self.buffered >= ROW_GROUP:
                self._flush()
        elif self.fmt == "csv":
            self.writer.write_table(self._csv(table))
        else:
            self.writer.write_table(table)

    def _csv(self, table):
        """List columns as JSON text (``["Fe","O"]``), as ``sci-ingest query --format csv`` writes them."""
        for i in self.lists:
            values = [None if v is None else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
                      for v in table.column(i).to_pylist()]
            table = table.set_column(i, self.csv_schema.field(i), pa.array(values, pa.string()))
        return table

    def _flush(self) -> None:
        if self.buffer:
            self.writer.write_table(pa.concat_tables(self.buffer))
            self.buffer, self.buffered = [], 0

    def close(self) -> None:
        if self.fmt == "parquet":
            self._flush()
        self.writer.close()
        if self.fmt == "arrow":
            self.sink.close()


def export(coll, spec, fmt: str, out: str, *, batch_size: int = BATCH, ahead: int = AHEAD) -> ExportResult:
    """Export ``spec`` (:class:`ingest.query.compile.Spec`) from ``coll`` to ``out`` as ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; expected one of {FORMATS}")
    started = time.perf_counter()
    converter = Converter(spec.fields, coll.codec_options)
    result = ExportResult(path=out, format=fmt, columns=[f.name for f in spec.fields])
    tmp, tmp_rejects = _tmp_name(out), _tmp_name(rejects_path(out))
    reader = _Reader(coll.find_raw_batches(spec.filter, spec.projection, **spec.find_options(batch_size)), ahead)
    writer = _Writer(fmt, tmp, converter.schema)
    rejects_file = None
    by: Counter[str] = Counter()
    try:
        reader.start()
        with db_errors(f"exporting {coll.name}"):
            for batch in reader.batches():
                table, rejects = converter.convert(batch)
                writer.write(table)
                result.rows += table.num_rows
                result.documents += table.num_rows + len(rejects)
                for reject in rejects:
                    if rejects_file is None:
                        rejects_file = open(tmp_rejects, "w", encoding="utf-8")
                    rejects_file.write(json_util.dumps({"_id": reject.id, "problems": reject.problems},
                                                       json_options=json_util.RELAXED_JSON_OPTIONS) + "\n")
                    by.update({f"{p['at']}: {p['found']}" if "at" in p else f"{p['field']} ({p['path']}): {p['found']}"
                               for p in reject.problems})
                result.rejected += len(rejects)
        writer.close()
        if rejects_file is not None:
            rejects_file.close()
            rejects_file = None
            os.replace(tmp_rejects, rejects_path(out))
            result.rejects_path = rejects_path(out)
        elif os.path.exists(rejects_path(out)):
            os.unlink(rejects_path(out))  # from an earlier export of the same name: no longer true
        os.replace(tmp, out)
    except BaseException:
        reader.stop.set()
        for path in (tmp, tmp_rejects):
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    finally:
        reader.stop.set()
        if rejects_file is not None:
            rejects_file.close()
    result.rejected_by = dict(by.most_common())
    result.nan_nulls = dict(converter.nan_nulls)
    result.fast_batches, result.exact_batches = converter.fast_batches, converter.exact_batches
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def summary_lines(result: ExportResult, collection: str) -> list[tuple[str, str]]:
    """(level, message) lines for stderr."""
    lines = [("info", f"exported {result.rows:,} rows of {collection} to {result.path} ({result.format}, "
                      f"{len(result.columns)} columns) in {result.seconds:.2f} s")]
    if result.rejected:
        detail = "; ".join(f"{k} x{v}" for k, v in result.rejected_by.items())
        lines.append(("warning", f"{result.rejected:,} of {result.documents:,} documents set aside (a field's type "
                                 f"differs from the declared schema): {detail}; each is named in "
                                 f"{result.rejects_path}"))
    if result.nan_nulls:
        detail = ", ".join(f"{k} x{v}" for k, v in result.nan_nulls.items())
        lines.append(("note", f"NaN values written as null: {detail}"))
    return lines
