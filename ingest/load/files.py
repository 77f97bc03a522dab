"""One file, loaded as a transaction: all of it or nothing, exactly once, whatever stops it.

The steps for a file (``ingest.ledger`` names the entry's fields):

1. claim its ledger entry (another loader holding it: wait; a dead one: take over);
2. skip it if its entry says it is loaded with the same size and mtime, or the
   same sha256 (a loader that died after finishing, or another command, may
   have loaded it since the plan was made); record it as a duplicate when
   another path has the same content loaded;
3. claim its content (sha256), mark the entry ``loading`` with the version as
   ``pending``, and write: ``-m 10`` files stream (documents are content-
   addressed, so a rerun over a half-written version inserts only what is
   missing); record files are checked whole first and then upserted by natural
   key; parsing and writing overlap (:mod:`ingest.load.writer`);
4. mark the entry ``loaded`` with the new version, move the version it replaces
   to ``drop``, release the claims, and delete the dropped contents' documents
   unless another loaded path has the same content.

A bad file (parse error, unreadable, vanished) is rolled back: its pending
content is dropped, the entry says ``failed`` with the reason and keeps the
last loaded version.  Whatever stops a load between these steps (``kill -9``,
a dead worker, a server restart, Ctrl-C) leaves an entry that the next claim
finishes the same way: a pending version that is not the file's content any
more is dropped, dropped contents are deleted, and the file is loaded again.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from pathlib import Path

from ingest import parsers
from ingest.catalog import CLAIMS, HITS, MATERIALS, SEARCHES, TASKS
from ingest.documents import record_document, search_documents, search_id
from ingest.errors import DatabaseError, InputError, ParseError, SciIngestError, ServerUnavailable
from ingest.fileio import open_binary
from ingest.ledger import Ledger, sha256_of
from ingest.load.claims import ClaimLost, Claims, ClaimTimeout, Owner
from ingest.load.outcome import FileOutcome
from ingest.load.writer import INSERT, UPSERT, PipelinedWriter
from ingest.mongo import Retry
from ingest.timing import utcnow

__all__ = ["FileContext", "load_file", "recover", "content_filters"]

MAX_ERRORS_KEPT = 50
RECORD_COLLECTIONS = {"material": MATERIALS, "task": TASKS}
def content_filters(sha: str) -> tuple[tuple[str, dict], ...]:
    """(collection, filter) pairs selecting every document made from the content ``sha``.

    Search documents by the prefix their ids share (``search_id`` =
    ``sha[:20]:<query>``; the ``_id`` index, or the hits' ``search_id`` index,
    serves the range), records by ``_source.sha256``.
    """
    prefix = search_id(sha, 0)[:-1]  # "<sha[:20]>:"
    in_range = {"$gte": prefix, "$lt": prefix[:-1] + ";"}  # ";" follows ":"
    return ((SEARCHES, {"_id": in_range}), (HITS, {"search_id": in_range}),
            (MATERIALS, {"_source.sha256": sha}), (TASKS, {"_source.sha256": sha}))


@dataclass
class FileContext:
    """What loading a file needs: the database, the ledger, claims, the writer, the options."""

    db: object
    run_id: str
    owner: Owner
    retry: Retry
    claims: Claims | None  # None in a dry run (nothing is written, nothing claimed)
    ledger: Ledger | None
    writer: PipelinedWriter | None
    batch_size: int = 1000
    force: bool = False
    dry_run: bool = False


# ------------------------------------------------------------------ the transaction
def load_file(ctx: FileContext, key: str) -> FileOutcome:
    """Load the file at ``key`` (a resolved path) and return what happened."""
    outcome = FileOutcome(path=key, status="loading", worker=ctx.owner.label)
    retries_before = ctx.retry.retries
    try:
        if ctx.dry_run:
            return _dry_run(ctx, Path(key), outcome)
        try:
            entry = ctx.claims.claim_path(key)
        except ClaimTimeout as exc:
            return _failed(outcome, str(exc))
        try:
            return _load_claimed(ctx, Path(key), entry, outcome)
        except (ClaimLost, ClaimTimeout) as exc:  # another loader has it: leave it to that one
            ctx.writer.discard()
            ctx.ledger.update(key, ctx.owner.id, unset=("owner", "lease_until"))
            return _failed(outcome, str(exc))
        except BaseException:
            _abandon(ctx, key)  # Ctrl-C, the server gone: roll back what can be, then stop
            raise
    finally:
        outcome.retries = ctx.retry.retries - retries_before


def _load_claimed(ctx: FileContext, path: Path, entry: dict, outcome: FileOutcome) -> FileOutcome:
    key = outcome.path
    try:
        stat = path.stat()
        outcome.size = stat.st_size
        if not ctx.force and _unchanged(entry, stat.st_size, stat.st_mtime):
            return _already_loaded(ctx, entry, outcome, "unchanged since it was loaded")
        outcome.sha256 = sha256_of(path)
    except OSError as exc:
        return _fail(ctx, entry, outcome, f"cannot read: {exc.strerror or exc}")
    sha = outcome.sha256
    pending = (entry.get("pending") or {}).get("sha256")
    stale = [s for s in (pending, *entry.get("drop", ())) if s and s != sha and s != entry.get("sha256")]
    if not ctx.force and entry.get("status") == "loaded" and entry.get("sha256") == sha:
        _finish(ctx, key, {"mtime": stat.st_mtime}, drop=stale)
        return _already_loaded(ctx, entry, outcome, "same sha256 as when it was loaded")
    twin = None if ctx.force else ctx.ledger.loaded_with_sha(sha, exclude=key)
    if twin:
        old = entry.get("sha256")
        _finish(ctx, key, {"status": "loaded", "sha256": sha, "size": stat.st_size, "mtime": stat.st_mtime,
                           "format": twin.get("format"), "records": twin.get("records", {}),
                           "duplicate_of": twin["_id"], "run_id": ctx.run_id, "finished": utcnow()},
                drop=stale + ([old] if old and old != sha else []))
        outcome.status, outcome.format = "skipped", twin.get("format")
        outcome.records = dict(twin.get("records") or {})
        outcome.reason = f"same content already loaded from {twin['_id']}"
        return outcome
    try:
        fmt = parsers.detect(path)
    except InputError as exc:
        return _fail(ctx, entry, outcome, str(exc), drop=stale)
    outcome.format = fmt.name
    with ctx.claims.content(sha):
        pending = {"status": "loading", "run_id": ctx.run_id, "format": fmt.name,
                   "pending": {"sha256": sha, "size": stat.st_size, "mtime": stat.st_mtime, "format": fmt.name}}
        try:
            rewritten = _write_durably(ctx, path, fmt, outcome, pending, stale)
        except ServerUnavailable:
            raise  # not this file's fault: the run stops (the next one finishes this file)
        except (ParseError, InputError, DatabaseError, OSError, EOFError, gzip.BadGzipFile) as exc:
            ctx.writer.discard()
            if isinstance(exc, ParseError):
                outcome.errors.append({"line": exc.line, "reason": exc.reason})
            reason = str(exc) if isinstance(exc, SciIngestError) else f"{path}: cannot read: {exc}"
            _drop_contents(ctx, key, [sha], held=sha)  # nothing of it stays written
            return _fail(ctx, entry, outcome, reason, drop=stale)
        if rewritten:  # what the server had before it restarted was written by this load too
            outcome.inserted, outcome.existing = outcome.inserted + outcome.existing, 0
        if (entry.get("pending") or {}).get("sha256") == sha and entry.get("run_id") == ctx.run_id:
            # this run's own earlier attempt (a worker that died) wrote part of it
            outcome.inserted, outcome.existing = outcome.inserted + outcome.existing, 0
        old = entry.get("sha256")
        _finish(ctx, key, {
            "status": "loaded", "sha256": sha, "size": stat.st_size, "mtime": stat.st_mtime,
            "format": fmt.name, "records": outcome.records, "inserted": outcome.inserted,
            "updated": outcome.updated, "existing": outcome.existing, "error": None, "errors": [],
            "warnings": outcome.warnings, "run_id": ctx.run_id, "finished": utcnow(),
            "seconds": {"parse": round(outcome.parse_seconds, 6), "load": round(outcome.load_seconds, 6),
                        "total": round(outcome.parse_seconds + outcome.load_seconds, 6)}},
            drop=stale + ([old] if old and old != sha else []), unset=("pending", "duplicate_of", "failed_sha256"))
    outcome.status = "loaded"
    return outcome


# ------------------------------------------------------------------ writing
#: How often a file is written again because the server restarted while it was written.
MAX_REWRITES = 3


def _write_durably(ctx: FileContext, path: Path, fmt, outcome: FileOutcome, pending: dict,
                   stale: list[str]) -> bool:
    """Write the file's documents so that none can be lost after the entry says ``loaded``.

    A server acknowledges ``w: 1`` writes before its journal holds them; killed
    then, it loses the last ones.  So after the documents, a journaled write to
    the entry (which the server acknowledges only once its journal holds it and
    everything before it) is a barrier, and the server's identity
    (``hello.topologyVersion.processId``) read before the documents and after the
    barrier must not have changed: otherwise the server restarted in between,
    may have lost what it acknowledged, and the file is written again (the
    documents are idempotent).  True when the file had to be written again.
    """
    key = outcome.path
    for attempt in range(MAX_REWRITES + 1):
        before = _incarnation(ctx)
        if attempt:
            ctx.claims.claim_path(key)  # the restarted server may have lost the claim too
        ctx.ledger.update(key, ctx.owner.id, pending, push_drop=stale)
        if fmt.kind == "search":
            _write_search_file(ctx, path, fmt, outcome)
        else:
            _write_record_file(ctx, path, fmt, outcome)
        held = ctx.ledger.update(key, ctx.owner.id, {"pending.written": utcnow()}, journaled=True)
        if held and _incarnation(ctx) == before:
            return attempt > 0
    raise ServerUnavailable(f"{path}: the server restarted {MAX_REWRITES + 1} times while the file was written")


def _incarnation(ctx: FileContext):
    """Which run of the server process answers (changes when it restarts); None if it does not say."""
    hello = ctx.retry("asking the server hello", ctx.db.client.admin.command, "hello")
    return (hello.get("topologyVersion") or {}).get("processId")


def _write_search_file(ctx: FileContext, path: Path, fmt, outcome: FileOutcome) -> None:
    parse = fmt.load()
    source, sha = str(path), outcome.sha256
    searches: list[dict] = []
    hits: list[dict] = []
    n_queries = n_hits = 0
    parse_s = 0.0

    def warn(message: str) -> None:
        if len(outcome.warnings) < MAX_ERRORS_KEPT:
            outcome.warnings.append(message)

    def send() -> None:
        nonlocal searches, hits
        for coll, docs in ((SEARCHES, searches), (HITS, hits)):
            if docs and ctx.writer is not None:
                ctx.writer.put(coll, docs, INSERT)
        searches, hits = [], []
        _renew(ctx, outcome)

    started = time.perf_counter()
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
            if len(searches) + len(hits) >= ctx.batch_size:
                send()
    if n_queries == 0:
        raise ParseError("no query block (>>>) found", source=source)
    send()
    _flush(ctx, outcome, started, parse_s)
    outcome.records = {"searches": n_queries, "hits": n_hits}


def _check_records(ctx: FileContext, path: Path, read_records, outcome: FileOutcome) -> dict[str, int]:
    """Pass 1: every record must parse and be storable; counts by collection."""
    counts: dict[str, int] = {}
    with open_binary(path) as handle:
        for item in read_records(handle, str(path)):
            if not isinstance(item, ParseError):
                try:  # build its document (and drop it): pass 2 must not meet a bad one
                    record_document(item, sha256=outcome.sha256, path=outcome.path)
                except ParseError as exc:
                    item = exc
            if isinstance(item, ParseError):
                if len(outcome.errors) < MAX_ERRORS_KEPT:
                    outcome.errors.append({"line": item.line, "reason": item.reason})
                counts["bad"] = counts.get("bad", 0) + 1
            else:
                coll = RECORD_COLLECTIONS[item.kind]
                counts[coll] = counts.get(coll, 0) + 1
    if counts.get("bad"):
        first = outcome.errors[0]
        raise ParseError(
            f"{counts['bad']} bad record(s); first: {first['reason']}"
            + ("" if counts["bad"] == 1 else " (all are listed in the ledger)"),
            source=str(path), line=first["line"])
    if not counts:
        raise ParseError("no records", source=str(path))
    return counts


def _write_record_file(ctx: FileContext, path: Path, fmt, outcome: FileOutcome) -> None:
    read_records = fmt.load()
    started = time.perf_counter()
    counts = _check_records(ctx, path, read_records, outcome)
    parse_s = time.perf_counter() - started
    batches: dict[str, list[dict]] = {MATERIALS: [], TASKS: []}
    with open_binary(path) as handle:  # pass 2: write
        for item in read_records(handle, str(path)):
            coll = RECORD_COLLECTIONS[item.kind]
            batches[coll].append(record_document(item, sha256=outcome.sha256, path=outcome.path))
            if len(batches[coll]) >= ctx.batch_size:
                if ctx.writer is not None:
                    ctx.writer.put(coll, batches[coll], UPSERT)
                batches[coll] = []
                _renew(ctx, outcome)
    for coll, docs in batches.items():
        if docs and ctx.writer is not None:
            ctx.writer.put(coll, docs, UPSERT)
    _flush(ctx, outcome, started, parse_s)
    outcome.records = counts


def _renew(ctx: FileContext, outcome: FileOutcome) -> None:
    if ctx.claims is not None:
        ctx.claims.renew_all(outcome.path, outcome.sha256)


def _flush(ctx: FileContext, outcome: FileOutcome, started: float, parse_s: float) -> None:
    """Wait for the file's last batches; split its time into parsing and the rest."""
    if ctx.writer is not None:
        ctx.writer.flush()
        outcome.inserted, outcome.updated, outcome.existing, _ = ctx.writer.take_counts()
    outcome.parse_seconds = parse_s
    outcome.load_seconds = max(0.0, time.perf_counter() - started - parse_s)


def _dry_run(ctx: FileContext, path: Path, outcome: FileOutcome) -> FileOutcome:
    """Everything but the writes: read, hash, parse, build the documents."""
    try:
        outcome.size = path.stat().st_size
        outcome.sha256 = sha256_of(path)
        fmt = parsers.detect(path)
        outcome.format = fmt.name
        if fmt.kind == "search":
            _write_search_file(ctx, path, fmt, outcome)
        else:
            _write_record_file(ctx, path, fmt, outcome)
    except ParseError as exc:
        outcome.errors.append({"line": exc.line, "reason": exc.reason})
        return _failed(outcome, str(exc))
    except InputError as exc:
        return _failed(outcome, str(exc))
    except (OSError, EOFError) as exc:
        return _failed(outcome, f"{path}: cannot read: {exc}")
    outcome.status = "loaded"
    return outcome


# ------------------------------------------------------------------ ledger transitions
def _unchanged(entry: dict, size: int, mtime: float) -> bool:
    return entry.get("status") == "loaded" and entry.get("size") == size and entry.get("mtime") == mtime


def _already_loaded(ctx: FileContext, entry: dict, outcome: FileOutcome, why: str) -> FileOutcome:
    """Skipped: loaded before (or meanwhile); a file this run already loaded counts as loaded."""
    ctx.ledger.update(outcome.path, ctx.owner.id, unset=("owner", "lease_until"))
    outcome.format = entry.get("format")
    outcome.sha256 = outcome.sha256 or entry.get("sha256")
    outcome.records = dict(entry.get("records") or {})
    if entry.get("run_id") == ctx.run_id and entry.get("status") == "loaded" and not entry.get("duplicate_of"):
        outcome.status = "loaded"  # by this run, in an attempt whose report was lost (a worker died)
        outcome.inserted, outcome.updated = entry.get("inserted", 0), entry.get("updated", 0)
        outcome.existing = entry.get("existing", 0)
        return outcome
    outcome.status, outcome.reason = "skipped", why
    return outcome


def _finish(ctx: FileContext, key: str, set_fields: dict, drop: list[str] = (),
            unset: tuple[str, ...] = ()) -> None:
    """Write the entry's final state and release it; then delete what it dropped."""
    drop = list(dict.fromkeys(drop))
    ctx.ledger.update(key, ctx.owner.id, set_fields, unset=("owner", "lease_until", *unset),
                      push_drop=drop, journaled=True)
    if drop:
        _drop_contents(ctx, key, drop)


def _fail(ctx: FileContext, entry: dict, outcome: FileOutcome, reason: str, drop: list[str] = ()) -> FileOutcome:
    _failed(outcome, reason)
    _finish(ctx, outcome.path, {
        "status": "failed", "error": reason, "errors": outcome.errors, "warnings": outcome.warnings,
        "failed_sha256": outcome.sha256, "run_id": ctx.run_id, "finished": utcnow()},
        drop=drop, unset=("pending",))
    return outcome


def _failed(outcome: FileOutcome, reason: str) -> FileOutcome:
    outcome.status, outcome.reason = "failed", reason
    outcome.records, outcome.inserted, outcome.updated, outcome.existing = {}, 0, 0, 0
    return outcome


def _drop_contents(ctx: FileContext, key: str, shas: list[str], held: str | None = None) -> None:
    """Delete the documents of each content, unless another loaded path has that content."""
    for sha in shas:
        if sha == held:
            _delete_unreferenced(ctx, key, sha)
        else:
            with ctx.claims.content(sha):
                _delete_unreferenced(ctx, key, sha)
        ctx.ledger.pull_drop(key, sha)


def _delete_unreferenced(ctx: FileContext, key: str, sha: str) -> None:
    if ctx.ledger.loaded_with_sha(sha, exclude=key):
        return  # another path stands for the same content: its documents stay
    for coll, selector in content_filters(sha):
        ctx.retry(f"removing documents of {sha[:12]} from {coll}", ctx.db[coll].delete_many, selector)


def _abandon(ctx: FileContext, key: str) -> None:
    """Best effort after an interruption: drop the pending version, release the claims.

    Quick (a few seconds of retries at most): when the server is gone, the next
    run's claim finishes the rollback instead.
    """
    budget, ctx.retry.budget_s = ctx.retry.budget_s, min(ctx.retry.budget_s, 3.0)
    try:
        if ctx.writer is not None:
            ctx.writer.discard()
        entry = ctx.ledger.get(key) or {}
        if (entry.get("owner") or {}).get("id") != ctx.owner.id:
            return
        pending = (entry.get("pending") or {}).get("sha256")
        if pending and pending != entry.get("sha256"):
            _drop_contents(ctx, key, [pending], held=pending)
        back = "loaded" if entry.get("sha256") else "failed"
        ctx.ledger.update(key, ctx.owner.id, {"status": back, "error": "interrupted; rolled back"},
                          unset=("pending", "owner", "lease_until"))
        if pending:
            ctx.claims.release(CLAIMS, pending)
    except (SciIngestError, KeyboardInterrupt):
        pass  # the next run's claim finishes the rollback
    finally:
        ctx.retry.budget_s = budget




def recover(ctx: FileContext, key: str) -> bool:
    """Finish what an interrupted loader left of ``key`` without loading it again.

    Its pending version is rolled back and its dropped contents deleted; the
    entry says ``loaded`` again when it had a loaded version, else ``failed``.
    False when a live loader holds it (that one finishes it).
    """
    try:
        entry = ctx.claims.claim_path(key)
    except ClaimTimeout:
        return False
    pending = (entry.get("pending") or {}).get("sha256")
    drop = [s for s in (pending, *entry.get("drop", ())) if s and s != entry.get("sha256")]
    if not entry.get("status") and not drop:
        ctx.ledger.remove(key, ctx.owner.id)  # claimed, then stopped before anything happened
        return True
    fields: dict = {}
    if entry.get("status") == "loading":
        fields = {"status": "loaded" if entry.get("sha256") else "failed",
                  "error": "an interrupted load was rolled back"}
    _finish(ctx, key, fields, drop=drop, unset=("pending",))
    return True
