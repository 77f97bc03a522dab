"""A file's content as documents: parsed, built, and handed to the writer in batches.

``-m 10`` files stream: their documents are content-addressed (``_id``s from the
file's sha256), so writing them again inserts only what is missing.  Record
files (materials, tasks) are checked whole first — every record must parse and
be storable — and then upserted by natural key, so that a bad record anywhere
leaves nothing of the file written.  Checking builds every document anyway; a
file whose documents fit in :data:`KEEP_CHECKED_BYTES` keeps them for the write
instead of building them twice.

:func:`content_filters` selects every document made from one content.
"""

from __future__ import annotations

import time
from pathlib import Path

from ingest.catalog import HITS, MATERIALS, SEARCHES, TASKS
from ingest.documents import prefix_range, record_document, search_documents, search_id_prefix
from ingest.errors import ParseError
from ingest.fileio import open_binary
from ingest.load.outcome import FileOutcome
from ingest.load.writer import INSERT, UPSERT

__all__ = ["write_content", "content_filters", "MAX_ERRORS_KEPT"]

MAX_ERRORS_KEPT = 50
RECORD_COLLECTIONS = {"material": MATERIALS, "task": TASKS}
#: A record file this large or smaller (uncompressed bytes; a .gz file counts 4x its size) keeps
#: its checked documents for the write (in memory they take a few times their size).
KEEP_CHECKED_BYTES = 16 << 20


def content_filters(sha: str) -> tuple[tuple[str, dict], ...]:
    """(collection, filter) pairs selecting every document made from the content ``sha``.

    Search documents by the prefix their ids share (a search's ``_id`` is
    ``sha[:20]:<query>``, a hit's ``<search _id>:<rank>``), so the ``_id``
    index, which a bulk load keeps, serves the range; records by
    ``_source.sha256`` (a loader's index).
    """
    in_range = prefix_range(search_id_prefix(sha))  # "<sha[:20]>:" up to "<sha[:20]>;"
    return ((SEARCHES, {"_id": in_range}), (HITS, {"_id": in_range}),
            (MATERIALS, {"_source.sha256": sha}), (TASKS, {"_source.sha256": sha}))


def write_content(path: Path, fmt, outcome: FileOutcome, send, batch_size: int) -> None:
    """Parse ``path`` and ``send(collection, documents, mode)`` its documents in batches.

    Fills ``outcome.records``, ``warnings``, ``errors`` and ``parse_seconds``;
    raises ParseError (or OSError) on bad input, before anything of a record
    file is sent.
    """
    if fmt.kind == "search":
        _search_documents(path, fmt, outcome, send, batch_size)
    else:
        _record_documents(path, fmt, outcome, send, batch_size)


def _search_documents(path: Path, fmt, outcome: FileOutcome, send, batch_size: int) -> None:
    parse = fmt.load()
    source, sha = str(path), outcome.sha256
    searches: list[dict] = []
    hits: list[dict] = []
    n_queries = n_hits = 0
    parse_s = 0.0

    def warn(message: str) -> None:
        if len(outcome.warnings) < MAX_ERRORS_KEPT:
            outcome.warnings.append(message)

    with open_binary(path) as handle:
        stream = parse(handle, source, warn=warn)
        while True:
            t0 = time.perf_counter()
            query = next(stream, None)
            parse_s += time.perf_counter() - t0
            if query is None:
                break
            n_queries += 1
            doc, hit_docs = search_documents(query, sha256=sha, path=outcome.path, query_index=n_queries,
                                             fmt=fmt.name)
            searches.append(doc)
            hits.extend(hit_docs)
            n_hits += len(hit_docs)
            if len(searches) + len(hits) >= batch_size:
                _send_all(send, ((SEARCHES, searches), (HITS, hits)), INSERT)
                searches, hits = [], []
    if n_queries == 0:
        raise ParseError("no query block (>>>) found", source=source)
    _send_all(send, ((SEARCHES, searches), (HITS, hits)), INSERT)
    outcome.records = {"searches": n_queries, "hits": n_hits}
    outcome.parse_seconds = parse_s


def _send_all(send, batches, mode: str) -> None:
    for coll, docs in batches:
        if docs:
            send(coll, docs, mode)


def _check_records(path: Path, read_records, outcome: FileOutcome) -> tuple[dict[str, int], list | None]:
    """Pass 1: every record must parse and be storable; (counts by collection, the documents or None)."""
    counts: dict[str, int] = {}
    size = outcome.size * (4 if path.name.endswith(".gz") else 1)
    kept: list | None = [] if size <= KEEP_CHECKED_BYTES else None
    with open_binary(path) as handle:
        for item in read_records(handle, str(path)):
            if not isinstance(item, ParseError):
                try:  # build its document: pass 2 must not meet a bad one
                    doc = record_document(item, sha256=outcome.sha256, path=outcome.path)
                except ParseError as exc:
                    item = exc
                else:
                    coll = RECORD_COLLECTIONS[item.kind]
                    counts[coll] = counts.get(coll, 0) + 1
                    if kept is not None and not counts.get("bad"):
                        kept.append((coll, doc))
                    continue
            if len(outcome.errors) < MAX_ERRORS_KEPT:
                outcome.errors.append({"line": item.line, "reason": item.reason})
            counts["bad"] = counts.get("bad", 0) + 1
    if counts.get("bad"):
        first = outcome.errors[0]
        raise ParseError(
            f"{counts['bad']} bad record(s); first: {first['reason']}"
            + ("" if counts["bad"] == 1 else " (all are listed in the ledger)"),
            source=str(path), line=first["line"])
    if not counts:
        raise ParseError("no records", source=str(path))
    return counts, kept


def _record_documents(path: Path, fmt, outcome: FileOutcome, send, batch_size: int) -> None:
    read_records = fmt.load()
    started = time.perf_counter()
    counts, kept = _check_records(path, read_records, outcome)
    outcome.parse_seconds = time.perf_counter() - started
    if kept is None:  # too large to keep: read and build again (pass 2)
        def documents():
            with open_binary(path) as handle:
                for item in read_records(handle, str(path)):
                    yield RECORD_COLLECTIONS[item.kind], record_document(item, sha256=outcome.sha256,
                                                                         path=outcome.path)
        kept = documents()
    batches: dict[str, list[dict]] = {MATERIALS: [], TASKS: []}
    for coll, doc in kept:
        batches[coll].append(doc)
        if len(batches[coll]) >= batch_size:
            send(coll, batches[coll], UPSERT)
            batches[coll] = []
    _send_all(send, batches.items(), UPSERT)
    outcome.records = counts
