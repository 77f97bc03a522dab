"""Many small files as one transaction: a constant number of round trips per batch, not per file.

The per-file protocol (:mod:`ingest.load.files`) costs about ten round trips a
file, one of them journaled; for a folder of a million one-record files that
bookkeeping, not the data, is the load.  A *small* file (at most
:data:`SMALL_FILE_BYTES` on disk, at most :data:`BATCH_DOCUMENTS` documents) is
read once into memory — hashed and parsed from the same bytes, so it is always
one version — and up to :data:`BATCH_FILES` of them go in together:

1. one read of their ledger entries and one of the contents already loaded:
   a file the ledger knows (a new version, a failure before, a duplicate
   content) goes to the per-file protocol, which handles every such case;
2. one insert claims every content of the batch (``ingest_claims``, each with
   the batch and the path): a content held by another loader goes per file;
3. the documents of every file, in a few bulk writes (records through
   :mod:`ingest.load.records`);
4. one journaled write (the barrier, ``ingest_batches``), with the server's
   identity unchanged since step 2: the documents are durable;
5. one journaled insert of every file's final ledger entry — the commit: an
   entry that appeared meanwhile (another loader) is a duplicate, and that
   file's content is dropped and the file goes per file; bad files get a
   ``failed`` entry in the same insert;
6. one delete of the batch's claims and its barrier.

Whatever stops a batch (``kill -9``, a dead worker, the server restarting)
leaves claims whose owner is gone: the next load rolls each such content back
unless a ledger entry stands for it (:func:`ingest.load.recovery.recover_claim`),
so a batch is loaded whole or not at all.  The steps' verbs (claim, write, seal,
commit, roll back, release) are the protocol's (:mod:`ingest.load.protocol`).  A server restart during the batch (its identity
changed) sends the batch's files to the per-file protocol, which writes them
again (documents are idempotent).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ingest import parsers
from ingest.config import setting
from ingest.errors import DatabaseError, InputError, ParseError, ServerUnavailable
from ingest.fileio import GZIP_MAGIC
from ingest.load.content import MAX_BAD_RECORDS, MAX_ERRORS_KEPT, documents_of
from ingest.load.outcome import FileOutcome
from ingest.load.protocol import Context, drop_contents, failed_fields, incarnation, loaded_fields
from ingest.load.reading import Version, memory_stream, read_small
from ingest.load.records import replace_older, write_versions
from ingest.load.writer import RECORDS
from ingest.store.catalog import BATCHES, CLAIMS, LEDGER
from ingest.store.mongo import durable, insert_new
from ingest.timing import utcnow

__all__ = ["SMALL_FILE_BYTES", "BATCH_FILES", "BATCH_DOCUMENTS", "BATCH_BYTES", "Prepared", "prepare", "commit"]

#: A file this large or smaller (on disk) is read whole into memory and may join a batch
#: (``SCI_INGEST_SMALL_FILE_BYTES``).
SMALL_FILE_BYTES = setting("SCI_INGEST_SMALL_FILE_BYTES")
#: Files per batch, and documents and decompressed input bytes held in memory for one batch.
BATCH_FILES = 500
BATCH_DOCUMENTS = 20_000
BATCH_BYTES = 8 << 20
_READ_ERRORS = (OSError, EOFError, zlib.error)


@dataclass
class Prepared:
    """A small file read, hashed and parsed: its documents, or why it failed."""

    outcome: FileOutcome
    version: Version | None = None
    documents: list = field(default_factory=list)  # (collection, document, mode)
    failed: bool = False
    weight: int = 0  # decompressed bytes read

    @property
    def key(self) -> str:
        return self.outcome.path

    @property
    def read(self) -> Version:
        """The version read (a file that failed may not have been read: only those that were are loaded)."""
        assert self.version is not None, f"{self.key} was not read"
        return self.version

    @property
    def sha256(self) -> str:
        return self.read.sha256

    def fail(self, reason: str) -> None:
        """Bad input: no documents; the first errors kept."""
        self.outcome.fail(reason)
        self.documents, self.failed = [], True
        del self.outcome.errors[MAX_ERRORS_KEPT:]


def prepare(key: str, worker: str, room: int, max_bad: int = MAX_BAD_RECORDS) -> Prepared | None:
    """Read, hash and parse the file ``key`` if it is small and yields at most ``room`` documents;
    None otherwise (the per-file protocol streams it).  Bad input is a failed :class:`Prepared`
    (a record file's reading stops at its ``max_bad``-th bad record; 0: no bound)."""
    outcome = FileOutcome(path=key, status="loading", worker=worker, started=time.time())
    started = time.perf_counter()
    prepared = Prepared(outcome=outcome)
    try:
        read = read_small(key, SMALL_FILE_BYTES)
        if read is None:
            return None
        prepared.version, data = read
        if data[:2] == GZIP_MAGIC and len(data) >= 18 and int.from_bytes(data[-4:], "little") > BATCH_BYTES:
            return None  # inflates past a batch's input (the gzip trailer's size, of its last member)
        outcome.size, outcome.sha256 = prepared.version.size, prepared.version.sha256
        fmt = parsers.detect_head(Path(key), memory_stream(data).read(4096))
        outcome.format = fmt.name
        handle = memory_stream(data)
        documents = documents_of(handle, prepared.version, fmt, outcome, room, max_bad)
        if documents is None:
            return None
        prepared.documents, prepared.weight = documents, handle.tell()
    except ParseError as exc:
        if not outcome.errors:  # with bad records listed, exc is their summary
            outcome.errors.append({"line": exc.line, "reason": exc.reason})
        prepared.fail(str(exc))
    except InputError as exc:  # not a known format, changed while read
        prepared.fail(str(exc))
    except _READ_ERRORS as exc:
        prepared.fail(f"{key}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    outcome.parse_seconds = time.perf_counter() - started
    outcome.parsed = time.time()
    return prepared


def commit(ctx: Context, batch: list[Prepared]) -> tuple[list[FileOutcome], list[str]]:
    """Load ``batch``: (the outcomes of the files it decided, the keys left to the per-file protocol)."""
    started = time.perf_counter()
    retry = ctx.retry
    known = ctx.ledger.lookup([p.key for p in batch], {"_id": 1})
    later = [p.key for p in batch if p.key in known]
    fresh = [p for p in batch if p.key not in known]
    twins = ctx.ledger.contents_loaded(sorted({p.sha256 for p in fresh if not p.failed}))
    loadable, seen = [], set()
    for p in fresh:
        if p.failed:
            continue
        sha = p.sha256
        if sha in twins or sha in seen:  # a duplicate content: the per-file protocol records it
            later.append(p.key)
        else:
            seen.add(sha)
            loadable.append(p)
    batch_id = f"{ctx.owner.id}#{uuid.uuid4().hex[:12]}"
    now = ctx.claims.now()
    lease = now + dt.timedelta(seconds=ctx.claims.lease_s)
    owner = ctx.owner.doc()
    _, taken = retry("claiming contents", insert_new, ctx.db[CLAIMS], [
        {"_id": p.sha256, "owner": owner, "lease_until": lease, "batch": batch_id, "path": p.key}
        for p in loadable])
    if taken:  # held by another loader: theirs to finish, or the per-file protocol's to wait for
        held_elsewhere = set(taken)
        later += [loadable[i].key for i in taken]
        loadable = [p for i, p in enumerate(loadable) if i not in held_elsewhere]
    failed = [p for p in fresh if p.failed]
    if not loadable:  # nothing to write: the bad files' entries only
        outcomes, again = _commit_entries(ctx, [], failed, started)
        return outcomes, later + again
    identity = incarnation(ctx)
    try:
        _write_documents(ctx, loadable)
        retry("making the batch durable", durable(ctx.db[BATCHES]).insert_one,
              {"_id": batch_id, "owner": owner, "files": len(loadable), "at": now})
        if incarnation(ctx) != identity:  # the server restarted: it may have lost some
            raise _Restarted
        renewed = ctx.claims.now() + dt.timedelta(seconds=ctx.claims.lease_s)
        held = retry("renewing the batch's claims", ctx.db[CLAIMS].update_many,
                     {"batch": batch_id, "owner.id": ctx.owner.id}, {"$set": {"lease_until": renewed}})
        if held.matched_count != len(loadable):  # a lease ran out (a server away for long): let go
            raise _Restarted
    except _Restarted:
        _release(ctx, batch_id)
        return [], later + [p.key for p in loadable + failed]
    except DatabaseError as exc:
        if isinstance(exc, ServerUnavailable):
            raise
        # a document the server refuses: find its file, one file at a time
        _roll_back(ctx, batch_id, loadable)
        return [], later + [p.key for p in loadable + failed]
    outcomes, again = _commit_entries(ctx, loadable, failed, started)
    _release(ctx, batch_id)
    return outcomes, later + again


class _Restarted(Exception):
    """The server's identity changed during the batch, or another loader took a claim over."""


def _write_documents(ctx: Context, loadable: list[Prepared]) -> None:
    """Every document of the batch in bulk; each file's counts on its outcome."""
    groups: dict[tuple[str, str], list[tuple[Prepared, dict]]] = {}
    for p in loadable:
        p.outcome.inserted = p.outcome.updated = p.outcome.existing = 0
        for coll, doc, mode in p.documents:
            groups.setdefault((coll, mode), []).append((p, doc))
    for (coll, mode), pairs in groups.items():
        for start in range(0, len(pairs), ctx.batch_size):
            part = pairs[start:start + ctx.batch_size]
            if mode == RECORDS:
                _write_records(ctx, coll, part)
                continue
            inserted, existing = ctx.retry(f"writing {coll}", insert_new, ctx.db[coll], [d for _, d in part])
            dup = set(existing)
            for i, (p, _) in enumerate(part):
                if i in dup:
                    p.outcome.existing += 1
                else:
                    p.outcome.inserted += 1


def _write_records(ctx: Context, coll: str, pairs: list[tuple[Prepared, dict]]) -> None:
    """Records of many files in one bulk; those already stored compared per file (exact counts)."""
    docs = [d for _, d in pairs]
    write_versions(ctx.db, coll, docs, ctx.retry)
    _, held = ctx.retry(f"writing {coll}", insert_new, ctx.db[coll], docs)
    held_set = set(held)
    held_by: dict[int, tuple[Prepared, list[dict]]] = {}
    for i, (p, doc) in enumerate(pairs):
        if i in held_set:
            held_by.setdefault(id(p), (p, []))[1].append(doc)
        else:
            p.outcome.inserted += 1
    for p, docs_held in held_by.values():
        new, modified, kept = replace_older(ctx.db, coll, docs_held, ctx.retry)
        p.outcome.inserted += new
        p.outcome.updated += modified
        p.outcome.existing += kept


def _commit_entries(ctx: Context, loadable: list[Prepared], failed: list[Prepared],
                    started: float) -> tuple[list[FileOutcome], list[str]]:
    """Insert every file's final entry; a file whose entry appeared meanwhile goes per file."""
    finished = utcnow()
    share = (time.perf_counter() - started) / max(1, len(loadable))
    entries: list[dict] = []
    for p in loadable:
        p.outcome.load_seconds, p.outcome.status = share, "loaded"
        entries.append({"_id": p.key, "path": p.key, **loaded_fields(p.outcome, p.read, ctx.run_id, finished)})
    entries += [{"_id": p.key, "path": p.key, **failed_fields(p.outcome, ctx.run_id, finished)} for p in failed]
    # journaled: acknowledged, the entries outlive a crash of the server (a lost one would leave
    # its file's documents to be dropped with its claim, after the load had reported it loaded)
    _, taken = ctx.retry("recording the batch in the ledger", insert_new, durable(ctx.db[LEDGER]), entries)
    now = time.time()
    for p in loadable + failed:
        p.outcome.ended = now
    gone = {entries[i]["_id"] for i in taken}  # another loader made these entries meanwhile:
    # the server's clock on the new entries (what analyses follow; until then they count as changed)
    ctx.ledger.stamp([e["_id"] for e in entries if e["_id"] not in gone])
    # roll ours back (their claims are held), and load them per file
    drop_contents(ctx, [p.sha256 for p in loadable if p.key in gone], held={p.sha256 for p in loadable})
    return [p.outcome for p in loadable + failed if p.key not in gone], sorted(gone)


def _roll_back(ctx: Context, batch_id: str, loadable: list[Prepared]) -> None:
    """Undo a batch that could not be written: its contents rolled back, its claims released."""
    shas = [p.sha256 for p in loadable]
    drop_contents(ctx, shas, held=set(shas))
    _release(ctx, batch_id)


def _release(ctx: Context, batch_id: str) -> None:
    """The barrier first: claims left alone by a stop in between are recovered, and remove it too."""
    ctx.retry("removing the batch's barrier", ctx.db[BATCHES].delete_one, {"_id": batch_id})
    ctx.retry("releasing the batch's claims", ctx.db[CLAIMS].delete_many,
              {"batch": batch_id, "owner.id": ctx.owner.id})
