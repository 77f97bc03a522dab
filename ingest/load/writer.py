"""Pipelined writes: a background thread writes while the loader parses what comes next.

Batches are tagged with their file.  The loader queues a file's batches, then a
*mark* for the file, and goes on parsing the next file; the writer sets the
mark's event once every batch queued before it is written, and keeps each
file's counts (and its first error) apart.  The queue is bounded (``depth``
items), so a fast parser waits for a slow server instead of holding files in
memory.  pymongo releases the GIL while it waits on the socket, so parsing and
writing really overlap.

An error while writing one file's batch stops that file only (its later batches
are skipped; :meth:`PipelinedWriter.result` hands the error over); a server
that cannot be reached stops everything (``ServerUnavailable`` at the next
:meth:`put` or :meth:`result`).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from ingest.errors import ServerUnavailable
from ingest.load.records import write_records
from ingest.store.mongo import insert_new
from ingest.store.retry import Retry

INSERT, RECORDS = "insert", "records"

__all__ = ["PipelinedWriter", "WriteResult", "INSERT", "RECORDS", "write_batch"]


@dataclass
class WriteResult:
    inserted: int = 0
    updated: int = 0
    existing: int = 0
    seconds: float = 0.0
    error: BaseException | None = None


class PipelinedWriter:
    """Writes ``(file, collection, documents, mode)`` batches on its own thread.

    ``insert``: unordered inserts; a document whose ``_id`` is there counts as
    existing (content-addressed documents: the same ``_id`` is the same
    document).  ``records``: records of one content keyed by their natural key,
    written by :func:`ingest.load.records.write_records` (the newest holder's
    version stored).
    """

    def __init__(self, db, retry: Retry, depth: int = 3):
        self.db = db
        self.retry = retry
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._results: dict[str, WriteResult] = {}
        self._fatal: BaseException | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sci-ingest-writer", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- caller side
    def put(self, file: str, collection: str, docs: list[dict], mode: str = INSERT) -> None:
        self._raise_fatal()
        self._queue.put((file, collection, docs, mode))

    def mark(self, file: str) -> threading.Event:
        """An event set once every batch of ``file`` queued so far is written (or failed)."""
        done = threading.Event()
        self._queue.put((file, None, done, None))
        return done

    def result(self, file: str, done: threading.Event | None = None) -> WriteResult:
        """Wait for ``done`` (default: a new mark), then take the file's counts and error."""
        (done or self.mark(file)).wait()
        self._raise_fatal()
        with self._lock:
            return self._results.pop(file, None) or WriteResult()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # ---------------------------------------------------------------- writer thread
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                file, collection, payload, mode = item
                if collection is None:
                    payload.set()  # a mark: everything of the file before it is done
                    continue
                with self._lock:
                    result = self._results.setdefault(file, WriteResult())
                if result.error is None and self._fatal is None:
                    self._write(result, collection, payload, mode)
            except ServerUnavailable as exc:  # nothing more can be written: stop everything
                self._fatal = exc
            except BaseException as exc:  # this file's problem: the loader rolls it back
                result.error = exc
            finally:
                self._queue.task_done()

    def _write(self, result: WriteResult, collection: str, docs: list[dict], mode: str) -> None:
        started = time.perf_counter()
        inserted, updated, existing = write_batch(self.db, collection, docs, mode, self.retry)
        result.inserted += inserted
        result.updated += updated
        result.existing += existing
        result.seconds += time.perf_counter() - started


def write_batch(db, collection: str, docs: list[dict], mode: str, retry: Retry) -> tuple[int, int, int]:
    """Write one batch of documents: (inserted, updated, existing)."""
    if mode == RECORDS:  # records: each names its content and order in _source
        return write_records(db, collection, docs, retry)
    inserted, duplicates = retry(f"writing {collection}", insert_new, db[collection], docs)
    return inserted, 0, len(duplicates)
