"""Pipelined writes: a background thread writes one batch while the loader parses the next.

The queue between them is bounded (``depth`` batches), so a fast parser waits
for a slow server instead of holding a whole file in memory.  pymongo releases
the GIL while it waits on the socket, so parsing and writing really overlap.
The first write error stops the writer; the loader sees it at its next
:meth:`PipelinedWriter.put` or at :meth:`PipelinedWriter.flush`.
"""

from __future__ import annotations

import queue
import threading
import time

from ingest.mongo import Retry, insert_new, replace_documents

INSERT, UPSERT = "insert", "upsert"


class PipelinedWriter:
    """Writes ``(collection, documents, mode)`` batches on its own thread.

    ``insert``: unordered inserts, a document whose ``_id`` is there counts as
    existing (content-addressed documents: the same ``_id`` is the same
    document).  ``upsert``: new documents are inserted and those whose natural
    key is there replace the stored version.
    """

    def __init__(self, db, retry: Retry, depth: int = 2):
        self.db = db
        self.retry = retry
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self.inserted = self.updated = self.existing = 0
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="sci-ingest-writer", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- caller side
    def put(self, collection: str, docs: list[dict], mode: str = INSERT) -> None:
        self._raise_error()
        self._queue.put((collection, docs, mode))

    def flush(self) -> None:
        """Wait until every batch is written; raise the writer's error, if any."""
        self._queue.join()
        self._raise_error()

    def take_counts(self) -> tuple[int, int, int, float]:
        """(inserted, updated, existing, seconds) since the last call; after :meth:`flush`."""
        counts = (self.inserted, self.updated, self.existing, self.seconds)
        self.inserted = self.updated = self.existing = 0
        self.seconds = 0.0
        return counts

    def discard(self) -> None:
        """Wait for the queue to empty (batches after an error are skipped) and forget the error."""
        self._queue.join()
        self._error = None
        self.take_counts()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _raise_error(self) -> None:
        if self._error is not None:  # kept until discard(): later batches are not written
            raise self._error

    # ---------------------------------------------------------------- writer thread
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    self._write(*item)
            except BaseException as exc:  # handed to the caller, which decides
                self._error = exc
            finally:
                self._queue.task_done()

    def _write(self, collection: str, docs: list[dict], mode: str) -> None:
        started = time.perf_counter()
        coll = self.db[collection]
        inserted, duplicates = self.retry(f"writing {collection}", insert_new, coll, docs)
        self.inserted += inserted
        if duplicates and mode == UPSERT:
            new, modified, unchanged = self.retry(f"writing {collection}", replace_documents, coll,
                                                  [docs[i] for i in duplicates])
            self.inserted += new
            self.updated += modified
            self.existing += unchanged
        else:
            self.existing += len(duplicates)
        self.seconds += time.perf_counter() - started
