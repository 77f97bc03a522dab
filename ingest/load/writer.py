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
from ingest.mongo import Retry, insert_new, replace_documents

INSERT, UPSERT = "insert", "upsert"

__all__ = ["PipelinedWriter", "WriteResult", "INSERT", "UPSERT"]


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
    document).  ``upsert``: new documents are inserted and those whose natural
    key is there replace the stored version.
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
        coll = self.db[collection]
        inserted, duplicates = self.retry(f"writing {collection}", insert_new, coll, docs)
        result.inserted += inserted
        if duplicates and mode == UPSERT:
            new, modified, unchanged = self.retry(f"writing {collection}", replace_documents, coll,
                                                  [docs[i] for i in duplicates])
            result.inserted += new
            result.updated += modified
            result.existing += unchanged
        else:
            result.existing += len(duplicates)
        result.seconds += time.perf_counter() - started
