"""A file's content as documents: parsed, built, and handed to the writer in batches.

``-m 10`` files stream: their documents are content-addressed (``_id``s from the
file's sha256), so writing them again inserts only what is missing.  A query block too
large to hold (its hits in the parser's spool, :mod:`ingest.parsers.pasta.spool`) is read
back twice, a chunk at a time: for its search's fingerprint, then for its hit documents,
sent in batches as they are built.  Record
files (materials, tasks) are checked whole first — every record must parse and
be storable — and then written by natural key (:mod:`ingest.load.records`: every
holder's version kept, the newest stored), so that a bad record anywhere
leaves nothing of the file written.  Checking builds every document anyway; a
file whose documents are few enough keeps them for the write instead of
building them twice: at most :data:`KEEP_CHECKED_BYTES` of decompressed input
(counted as it is read, never estimated from the compressed size) and
:data:`KEEP_CHECKED_DOCUMENTS` documents.

Every pass reads through :func:`ingest.load.reading.read_pass`, so a file that
changes while it is loaded is named as changed, never loaded half of each version.

Every document is held to its collection's contract (:mod:`ingest.load.contracts`: the declared
kind of each curated field) as it is built: a record's value read losslessly is stored so with a
warning, any other value of another kind set aside (``FileOutcome.put_aside``); a search
document that breaks it fails its file.

:func:`content_filters` selects every search document made from one content.
"""

from __future__ import annotations

import re
import time

from ingest.config import setting
from ingest.documents import prefix_range, record_document, search_documents, search_id_prefix
from ingest.errors import ParseError
from ingest.load.contracts import CONTRACTS
from ingest.load.outcome import FileOutcome
from ingest.load.reading import Changed, Version, read_pass
from ingest.load.writer import INSERT, RECORDS
from ingest.store.catalog import HITS, MATERIALS, SEARCHES, TASKS

__all__ = ["write_content", "content_filters", "documents_of", "bad_records", "MAX_ERRORS_KEPT", "MAX_BAD_RECORDS",
           "AT_THE_BOUND", "RECORD_COLLECTIONS"]

MAX_ERRORS_KEPT = 50
#: A record file stops being read at this many bad records (``--max-bad-records``; 0: no bound): it
#: fails whatever follows, and a file of millions of bad records (10 million ``{}`` fit in 19 KB
#: of gzip) would otherwise be read to its end for nothing.
MAX_BAD_RECORDS = 100
RECORD_COLLECTIONS = {"material": MATERIALS, "task": TASKS}
#: A record file keeps its checked documents for the write while the decompressed bytes read
#: stay within this ...
KEEP_CHECKED_BYTES = 8 << 20
#: ... and the documents within this (a million tiny records fit in 75 KB of gzip;
#: ``SCI_INGEST_KEEP_DOCUMENTS``).
KEEP_CHECKED_DOCUMENTS = setting("SCI_INGEST_KEEP_DOCUMENTS")


def content_filters(sha: str) -> tuple[tuple[str, dict], ...]:
    """(collection, filter) pairs selecting every search document made from the content ``sha``.

    By the prefix their ids share (a search's ``_id`` is ``sha[:20]:<query>``, a
    hit's ``<search _id>:<rank>``), so the ``_id`` index, which a bulk load
    keeps, serves the range.  Records go by their versions (``ingest.load.records``).
    """
    in_range = prefix_range(search_id_prefix(sha))  # "<sha[:20]>:" up to "<sha[:20]>;"
    return (SEARCHES, {"_id": in_range}), (HITS, {"_id": in_range})


def write_content(version: Version, fmt, outcome: FileOutcome, send, batch_size: int,
                  max_bad: int = MAX_BAD_RECORDS) -> None:
    """Parse the file of ``version`` and ``send(collection, documents, mode)`` its documents in batches.

    Fills ``outcome.records``, ``warnings``, ``errors`` and ``parse_seconds``;
    raises ParseError (or OSError, or :class:`~ingest.load.reading.Changed`) on
    bad input, before anything of a record file is sent; a record file at its
    ``max_bad``-th bad record (0: no bound), without reading further.
    """
    if fmt.kind == "search":
        with read_pass(version) as handle:
            _search_documents(handle, version, fmt, outcome, send, batch_size)
    else:
        _record_documents(version, fmt, outcome, send, batch_size, max_bad)


def documents_of(handle, version: Version, fmt, outcome: FileOutcome, limit: int,
                 max_bad: int = MAX_BAD_RECORDS) -> list | None:
    """Every document of a small file read into memory, as (collection, document, mode), or None
    when it has more than ``limit``.  Raises ParseError on bad input, as :func:`write_content`."""
    out: list = []

    def keep(collection: str, docs: list[dict], mode: str) -> None:
        out.extend((collection, doc, mode) for doc in docs)
        if len(out) > limit:
            raise _TooMany

    try:
        if fmt.kind == "search":
            _search_documents(handle, version, fmt, outcome, keep, limit + 1)
        else:
            counts, kept = _check_records(handle, version, fmt.load(), outcome, limit, max_bad)
            if kept is None:
                return None
            outcome.records = counts
            keep_records(kept, keep, limit + 1)
    except _TooMany:
        return None
    return out


class _TooMany(Exception):
    """More documents than a small file may hold in memory."""


def _search_documents(handle, version: Version, fmt, outcome: FileOutcome, send, batch_size: int) -> None:
    parse = fmt.load()
    source, sha = version.key, version.sha256
    searches: list[dict] = []
    hits: list[dict] = []
    n_queries = n_hits = 0
    parse_s = 0.0

    stream = parse(handle, source, warn=lambda message: outcome.warn(message, MAX_ERRORS_KEPT))
    while True:
        t0 = time.perf_counter()
        query = next(stream, None)
        parse_s += time.perf_counter() - t0
        if query is None:
            break
        n_queries += 1
        doc, hit_docs = search_documents(query, sha256=sha, path=outcome.path, query_index=n_queries, fmt=fmt.name)
        if isinstance(hit_docs, list):
            _keep_contracts((doc,), hit_docs, source, n_queries)
            searches.append(doc)
            hits.extend(hit_docs)
            n_hits += len(hit_docs)
        else:  # a large block's hits, read back from the parser's spool: sent a batch at a time
            _keep_contracts((doc,), (), source, n_queries)
            searches.append(doc)
            for hit_doc in hit_docs:
                _keep_contracts((), (hit_doc,), source, n_queries)
                hits.append(hit_doc)
                n_hits += 1
                if len(searches) + len(hits) >= batch_size:
                    _send_all(send, ((SEARCHES, searches), (HITS, hits)), INSERT)
                    searches, hits = [], []
        if len(searches) + len(hits) >= batch_size:
            _send_all(send, ((SEARCHES, searches), (HITS, hits)), INSERT)
            searches, hits = [], []
    if n_queries == 0:
        raise ParseError("no query block (>>>) found", source=source)
    _send_all(send, ((SEARCHES, searches), (HITS, hits)), INSERT)
    outcome.records = {"searches": n_queries, "hits": n_hits}
    outcome.parse_seconds = parse_s


def _keep_contracts(searches, hits, source: str, query_index: int) -> None:
    """Search documents keep their contracts by construction (the parser fails a file whose numbers
    do not read); one that does not is a defect of the parser, and fails its file."""
    for coll, docs in ((SEARCHES, searches), (HITS, hits)):
        findings = CONTRACTS[coll].findings
        for doc in docs:
            for f in findings(doc):
                raise ParseError(f"query {query_index}: {coll} {doc['_id']}: {f.said()} (a defect of the parser: "
                                 "nothing of the file is stored)", source=source)


def _send_all(send, batches, mode: str) -> None:
    for coll, docs in batches:
        if docs:
            send(coll, docs, mode)


def _check_records(handle, version: Version, read_records, outcome: FileOutcome,
                   keep_documents: int, max_bad: int = MAX_BAD_RECORDS) -> tuple[dict[str, int], list | None]:
    """Pass 1: every record must parse and be storable; (counts by collection, the documents or None).

    The documents are kept while the decompressed bytes read (``handle.tell()``) stay within
    :data:`KEEP_CHECKED_BYTES` and they number at most ``keep_documents``.  At the ``max_bad``-th
    bad record (0: no bound) the reading stops and the file fails (:func:`bad_records`).
    """
    counts: dict[str, int] = {}
    kept: list | None = []
    order = version.order
    stopped = False
    for item in read_records(handle, version.key):
        if not isinstance(item, ParseError):
            for message in item.warnings:  # numbers that are not finite (the value policy)
                outcome.warn(f"{version.key}:{item.line}: {message}", MAX_ERRORS_KEPT)
            def warn_at(message: str, line: int = item.line) -> None:
                outcome.warn(f"{version.key}:{line}: {message}", MAX_ERRORS_KEPT)

            try:  # build its document: pass 2 must not meet a bad one
                doc = record_document(item, sha256=version.sha256, path=outcome.path, warn=warn_at)  # dates as found
            except ParseError as exc:
                item = exc
            else:
                coll = RECORD_COLLECTIONS[item.kind]
                for aside, message in CONTRACTS[coll].enforce(doc):  # values of another kind
                    said = f"{version.key}:{item.line}: {message}"
                    if aside:
                        outcome.put_aside(said, MAX_ERRORS_KEPT)
                    else:
                        outcome.warn(said, MAX_ERRORS_KEPT)
                counts[coll] = counts.get(coll, 0) + 1
                if kept is not None and not counts.get("bad"):
                    doc["_source"]["order"] = order
                    kept.append((coll, doc))
                    if len(kept) > keep_documents or handle.tell() > KEEP_CHECKED_BYTES:
                        kept = None  # too many to hold: pass 2 builds them again
                continue
        if len(outcome.errors) < MAX_ERRORS_KEPT:
            outcome.errors.append({"line": item.line, "reason": item.reason})
        counts["bad"] = counts.get("bad", 0) + 1
        if counts["bad"] == max_bad:
            stopped = True
            break  # the file fails whatever follows: read no further
    if counts.get("bad"):
        raise bad_records(version.key, outcome.errors, counts["bad"], stopped=AT_THE_BOUND if stopped else "")
    if not counts:
        raise ParseError("no records", source=version.key)
    return counts, kept


def _record_documents(version: Version, fmt, outcome: FileOutcome, send, batch_size: int, max_bad: int) -> None:
    read_records = fmt.load()
    started = time.perf_counter()
    with read_pass(version) as handle:
        counts, kept = _check_records(handle, version, read_records, outcome, KEEP_CHECKED_DOCUMENTS, max_bad)
    outcome.parse_seconds = time.perf_counter() - started
    if kept is None:  # too large to keep: read and build again (pass 2), checked to be the same bytes
        with read_pass(version) as handle:
            keep_records(_built(handle, version, read_records, outcome.path), send, batch_size)
    else:
        keep_records(kept, send, batch_size)
    outcome.records = counts


#: What a failure says of a file whose reading stopped at the bound of bad records.
AT_THE_BOUND = ", the bound (--max-bad-records): the rest of the file is not read"


def bad_records(key: str, errors: list[dict], count: int, *, stopped: str = "") -> ParseError:
    """The failure of a record file with ``count`` bad records, ``errors`` the first ones: at the first
    one's line, with the count and the next few, ``file:line: reason`` each; ``stopped``: why the
    rest of the file was not read (at the bound of bad records: :data:`AT_THE_BOUND`)."""
    first = errors[0]
    text = f"{count} bad record(s){stopped}; first: {first['reason']}"
    if count > 1:
        said, then = _PLACE.sub("", first["reason"]), []
        for e in errors[1:_NAMED]:
            same, said = _PLACE.sub("", e["reason"]) == said, _PLACE.sub("", e["reason"])
            then.append(f"{key}:{e['line']}: {'the same' if same else e['reason']}")
        text += "; then " + "; ".join(then) if then else ""
        text += (" (all are listed in the ledger)" if count <= len(errors)
                 else f" (the first {len(errors)} are listed in the ledger)")
    return ParseError(text, source=key, line=first["line"])


#: Bad records a file's failure names in its one line (the ledger and --json keep more).
_NAMED = 3
_PLACE = re.compile(r" \((?:starting )?line \d+\)$")  # where a record of an array or object stream starts


def _built(handle, version: Version, read_records, path: str):
    order = version.order
    for item in read_records(handle, version.key):
        if isinstance(item, ParseError):  # pass 1 found none: these are not the bytes it checked
            raise Changed(version.key, f"line {item.line} is bad now: {item.reason}")
        doc = record_document(item, sha256=version.sha256, path=path)
        doc["_source"]["order"] = order
        coll = RECORD_COLLECTIONS[item.kind]
        CONTRACTS[coll].enforce(doc)  # as pass 1 did (which named what it changed)
        yield coll, doc


def keep_records(documents, send, batch_size: int) -> None:
    """Send (collection, document) pairs in batches of ``batch_size`` per collection."""
    batches: dict[str, list[dict]] = {MATERIALS: [], TASKS: []}
    for coll, doc in documents:
        batches[coll].append(doc)
        if len(batches[coll]) >= batch_size:
            send(coll, batches[coll], RECORDS)
            batches[coll] = []
    _send_all(send, batches.items(), RECORDS)
