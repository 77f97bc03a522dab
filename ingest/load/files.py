"""One file, loaded as a transaction: all of it or nothing, exactly once, whatever stops it.

The steps for a file (``ingest.store.ledger`` names the entry's fields):

1. claim its ledger entry (another loader holding it: wait; a dead one: take over);
2. skip it if its entry says it is loaded with the same size and mtime, or the
   same sha256 (a loader that died after finishing, or another command, may
   have loaded it since the plan was made); record it as a duplicate when
   another path has the same content loaded;
3. claim its content (sha256), mark the entry ``loading`` with the version as
   ``pending``, and queue its documents to the writer (:mod:`ingest.load.content`);
4. once they are written (meanwhile the next file is parsed, :func:`start`
   and :func:`complete`): a journaled barrier that also keeps the entry's final
   state in ``pending.written``, the server's identity unchanged since step 3,
   then the entry says ``loaded``, the version it replaces goes to ``drop``, the
   claims are released, and the dropped contents' documents are deleted unless
   another loaded path has the same content.

A bad file (parse error, unreadable, vanished, a write refused) is rolled back:
its pending content is dropped, the entry says ``failed`` with the reason and
keeps the last loaded version.  Whatever stops a load between these steps
(``kill -9``, a dead worker, a server restart, Ctrl-C) leaves an entry that the
next claim finishes the same way: a pending version that passed the barrier
and is still the file's content is finished (only the last ledger write was
lost), one that is not the file's content any more is dropped, dropped contents
are deleted, and the file is loaded again.

Why the barrier: a server acknowledges ``w: 1`` writes before its journal holds
them, and one killed then loses the last ones.  A journaled write is
acknowledged only once the journal holds it and everything before it; and if
the server's identity (``hello.topologyVersion.processId``) is the same before
the documents and after the barrier, one run of the server took them all.
Otherwise the file is written again (its documents are idempotent).
"""

from __future__ import annotations

import gzip
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ingest import parsers
from ingest.errors import DatabaseError, InputError, ParseError, SciIngestError, ServerUnavailable
from ingest.fileio import printable
from ingest.inputs import LOADED_BY_ANOTHER
from ingest.load.claims import ClaimLost, Claims, ClaimTimeout, Owner
from ingest.load.content import MAX_BAD_RECORDS, content_filters, write_content
from ingest.load.early import checked_version
from ingest.load.outcome import FileOutcome
from ingest.load.reading import Changed, Version, version_of
from ingest.load.records import drop_records
from ingest.load.writer import PipelinedWriter
from ingest.store.catalog import CLAIMS, LEDGER
from ingest.store.ledger import Ledger
from ingest.store.retry import Retry
from ingest.store.space import own_disk_full
from ingest.timing import utcnow

__all__ = ["FileContext", "InFlight", "start", "complete", "abandon", "recover", "dry_run", "incarnation"]

#: How often a file is written again because the server restarted while it was written.
MAX_REWRITES = 3
_INPUT_ERRORS = (ParseError, InputError, OSError, EOFError, gzip.BadGzipFile)


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
    max_bad_records: int = MAX_BAD_RECORDS  # a record file fails at this many bad records, unread further


@dataclass
class InFlight:
    """A file whose documents are queued to the writer; :func:`complete` finishes it."""

    outcome: FileOutcome
    entry: dict
    path: Path
    fmt: object
    version: Version
    stale: list[str]
    incarnation: object
    written: threading.Event
    started: float
    retries_before: int
    rewrites: int = field(default=0)


# ------------------------------------------------------------------ the transaction
def start(ctx: FileContext, key: str) -> FileOutcome | InFlight:
    """Claim, check and parse the file, and queue its documents; an outcome when that decides it."""
    outcome = FileOutcome(path=key, status="loading", worker=ctx.owner.label, started=time.time())
    retries_before = ctx.retry.retries
    if ctx.dry_run:
        return dry_run(ctx, Path(key), outcome)
    try:
        entry = ctx.claims.claim_path(key)
    except ClaimTimeout as exc:
        return _failed(outcome, str(exc))
    try:
        step = _start_claimed(ctx, Path(key), entry, outcome, retries_before)
    except (ClaimLost, ClaimTimeout) as exc:  # another loader has it: leave it to that one
        return _lost(ctx, outcome, exc)
    except BaseException:
        abandon(ctx, key)  # Ctrl-C, the server gone: roll back what can be, then stop
        raise
    if isinstance(step, FileOutcome):
        step.retries = ctx.retry.retries - retries_before
        step.keep_from(entry)  # failed: its last good version stays (docs/loading.md, "A file that fails")
    return step


def _start_claimed(ctx: FileContext, path: Path, entry: dict, outcome: FileOutcome,
                   retries_before: int) -> FileOutcome | InFlight:
    key = outcome.path
    try:
        now = version_of(key)
        outcome.size = now.size
        if not ctx.force and _unchanged(entry, now.size, now.mtime):
            return _already_loaded(ctx, entry, outcome, "unchanged since it was loaded")
        version = checked_version(key, now.size, outcome, ctx.max_bad_records)
    except ParseError as exc:  # its bytes proved it bad before it was hashed whole (ingest.load.early)
        return _fail(ctx, outcome, str(exc), drop=_stale(entry, None))
    except Changed as exc:
        return _fail(ctx, outcome, str(exc))
    except OSError as exc:
        return _fail(ctx, outcome, f"cannot read: {exc.strerror or exc}")
    outcome.sha256 = sha = version.sha256
    outcome.size = version.size
    stale = _stale(entry, sha)
    if not ctx.force and entry.get("status") == "loaded" and entry.get("sha256") == sha:
        _finish(ctx, key, {"mtime": version.mtime}, drop=stale)
        return _already_loaded(ctx, entry, outcome, "same sha256 as when it was loaded")
    twin = None if ctx.force else ctx.ledger.loaded_with_sha(sha, exclude=key)
    if twin:
        return _duplicate(ctx, entry, outcome, version, twin, stale)
    try:
        fmt = parsers.detect(path)
    except InputError as exc:
        return _fail(ctx, outcome, str(exc), drop=stale)
    outcome.format = fmt.name
    ctx.claims.claim(CLAIMS, sha)
    flight = InFlight(outcome=outcome, entry=entry, path=path, fmt=fmt, version=version, stale=stale,
                      incarnation=None, written=threading.Event(), started=time.perf_counter(),
                      retries_before=retries_before)
    try:
        _queue_documents(ctx, flight)
    except _INPUT_ERRORS as exc:
        full = own_disk_full(exc, tempfile.gettempdir())
        if full is not None:  # no room for a big block's spill (TMPDIR): the machine's fault, not the file's
            raise full from exc  # the load stops as for a full disk of the server; start() rolls this file back
        ctx.writer.result(key)  # what was queued is written: then it goes
        return _roll_back(ctx, flight, exc)
    return flight


def _stale(entry: dict, sha: str | None) -> list[str]:
    """The contents an interrupted load left to drop: pending or dropped, neither ``sha`` nor the loaded one."""
    pending = (entry.get("pending") or {}).get("sha256")
    return [s for s in (pending, *entry.get("drop", ())) if s and s != sha and s != entry.get("sha256")]


def _queue_documents(ctx: FileContext, flight: InFlight) -> None:
    """Mark the entry ``loading`` with the version as ``pending``; parse and queue its documents."""
    o, version, fmt = flight.outcome, flight.version, flight.fmt
    flight.incarnation = incarnation(ctx)
    ctx.ledger.update(o.path, ctx.owner.id, {
        "status": "loading", "run_id": ctx.run_id, "format": fmt.name,
        "pending": {"sha256": o.sha256, "size": version.size, "mtime": version.mtime, "format": fmt.name}},
        push_drop=flight.stale)

    def send(collection: str, docs: list[dict], mode: str) -> None:
        ctx.writer.put(o.path, collection, docs, mode)
        ctx.claims.renew_due()

    write_content(version, fmt, o, send, ctx.batch_size, ctx.max_bad_records)
    o.parsed = time.time()
    flight.written = ctx.writer.mark(o.path)


def complete(ctx: FileContext, flight: InFlight) -> FileOutcome:
    """Wait for the file's documents, make them durable, and finish (or roll back) its entry."""
    o, key = flight.outcome, flight.outcome.path
    try:
        while True:
            result = ctx.writer.result(key, flight.written)
            o.inserted += result.inserted
            o.updated += result.updated
            o.existing += result.existing
            if result.error is not None:
                if isinstance(result.error, DatabaseError):
                    return _roll_back(ctx, flight, result.error)
                if isinstance(result.error, Exception):  # what this file's documents met: its failure alone
                    return _roll_back(ctx, flight, DatabaseError(
                        f"{flight.path}: writing its documents failed: {type(result.error).__name__}: "
                        f"{result.error}"))
                raise result.error
            final = _loaded_fields(ctx, flight)
            held = ctx.ledger.update(key, ctx.owner.id, {"pending.written": final}, journaled=True)
            if held and incarnation(ctx) == flight.incarnation:
                break
            _write_again(ctx, flight)  # the server restarted meanwhile: it may have lost some
        return _loaded(ctx, flight, final)
    except (ClaimLost, ClaimTimeout) as exc:
        return _lost(ctx, o, exc)
    except BaseException:
        abandon(ctx, key)
        raise
    finally:
        o.retries = ctx.retry.retries - flight.retries_before


def _write_again(ctx: FileContext, flight: InFlight) -> None:
    flight.rewrites += 1
    if flight.rewrites > MAX_REWRITES:
        raise ServerUnavailable(f"{flight.path}: the server restarted {MAX_REWRITES + 1} times while the "
                                "file was written")
    o = flight.outcome
    o.inserted = o.updated = o.existing = 0  # counted again: all of them are this load's (see below)
    ctx.claims.claim_path(o.path)  # the restarted server may have lost the claim too
    ctx.claims.claim(CLAIMS, o.sha256)
    o.records, o.warnings, o.errors, o.warnings_total = {}, [], [], 0
    o.set_aside, o.set_aside_total = [], 0
    _queue_documents(ctx, flight)


def _loaded_fields(ctx: FileContext, flight: InFlight) -> dict:
    """The entry of the file once loaded (kept in ``pending.written`` by the barrier, so that
    :func:`recover` can finish a load whose last ledger write a server restart lost)."""
    o, entry = flight.outcome, flight.entry
    o.load_seconds = max(0.0, time.perf_counter() - flight.started - o.parse_seconds)
    if flight.rewrites or ((entry.get("pending") or {}).get("sha256") == o.sha256
                           and entry.get("run_id") == ctx.run_id):
        # this run wrote them all: before a server restart, or in an attempt of a worker that died
        o.inserted, o.existing = o.inserted + o.existing, 0
    return {
        "status": "loaded", "sha256": o.sha256, "size": flight.version.size, "mtime": flight.version.mtime,
        "format": o.format, "records": o.records, "inserted": o.inserted, "updated": o.updated,
        "existing": o.existing, "error": None, "errors": [], "warnings": o.warnings,
        "warnings_total": o.warnings_total, "set_aside": o.set_aside, "set_aside_total": o.set_aside_total,
        "run_id": ctx.run_id,
        "finished": utcnow(), "seconds": {"parse": round(o.parse_seconds, 6), "load": round(o.load_seconds, 6),
                                          "total": round(o.parse_seconds + o.load_seconds, 6)}}


def _loaded(ctx: FileContext, flight: InFlight, final: dict) -> FileOutcome:
    o, old = flight.outcome, flight.entry.get("sha256")
    ctx.claims.release(CLAIMS, o.sha256)
    _finish(ctx, o.path, final, drop=flight.stale + ([old] if old and old != o.sha256 else []),
            unset=("pending", "duplicate_of", "failed_sha256"))
    o.status = "loaded"
    return o


def _roll_back(ctx: FileContext, flight: InFlight, exc: BaseException) -> FileOutcome:
    """A bad file: nothing of it stays written; its entry says why."""
    o = flight.outcome
    if isinstance(exc, ParseError) and not o.errors:  # with bad records listed, exc is their summary
        o.errors.append({"line": exc.line, "reason": exc.reason})
    reason = str(exc) if isinstance(exc, SciIngestError) else f"{flight.path}: cannot read: {exc}"
    _drop_contents(ctx, o.path, [o.sha256], held=o.sha256)
    ctx.claims.release(CLAIMS, o.sha256)
    o.retries = ctx.retry.retries - flight.retries_before
    _fail(ctx, o, reason, drop=flight.stale)
    o.keep_from(flight.entry)
    return o


# ------------------------------------------------------------------ other endings
def dry_run(ctx: FileContext, path: Path, outcome: FileOutcome) -> FileOutcome:
    """Everything but the writes: read, hash, parse, build the documents."""
    try:
        version = checked_version(str(path), version_of(str(path)).size, outcome, ctx.max_bad_records)
        outcome.size, outcome.sha256 = version.size, version.sha256
        fmt = parsers.detect(path)
        outcome.format = fmt.name
        started = time.perf_counter()
        write_content(version, fmt, outcome, lambda collection, docs, mode: None, ctx.batch_size,
                      ctx.max_bad_records)
        outcome.load_seconds = max(0.0, time.perf_counter() - started - outcome.parse_seconds)
    except ParseError as exc:
        if not outcome.errors:  # with bad records listed, exc is their summary
            outcome.errors.append({"line": exc.line, "reason": exc.reason})
        return _failed(outcome, str(exc))
    except InputError as exc:
        return _failed(outcome, str(exc))
    except (OSError, EOFError) as exc:
        return _failed(outcome, f"{path}: cannot read: {exc}")
    outcome.status = "loaded"
    return outcome


def _same_version(record: dict, size: int, mtime: float) -> bool:
    """Whether ``record`` (an entry, or its pending version) describes a file of this size and mtime."""
    return record.get("size") == size and record.get("mtime") == mtime


def _unchanged(entry: dict, size: int, mtime: float) -> bool:
    return entry.get("status") == "loaded" and _same_version(entry, size, mtime)


def _already_loaded(ctx: FileContext, entry: dict, outcome: FileOutcome, why: str) -> FileOutcome:
    """Skipped: loaded before (or meanwhile); a file this run already loaded counts as loaded."""
    ctx.ledger.update(outcome.path, ctx.owner.id, unset=("owner", "lease_until"))
    ctx.claims.forget(LEDGER, outcome.path)
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


def _duplicate(ctx: FileContext, entry: dict, outcome: FileOutcome, version: Version, twin: dict,
               stale: list[str]) -> FileOutcome:
    """Its content is loaded from another path: recorded as a duplicate, nothing written."""
    old = entry.get("sha256")
    sha = outcome.sha256
    _finish(ctx, outcome.path, {
        "status": "loaded", "sha256": sha, "size": version.size, "mtime": version.mtime,
        "format": twin.get("format"), "records": twin.get("records", {}), "duplicate_of": twin["_id"],
        "run_id": ctx.run_id, "finished": utcnow()}, drop=stale + ([old] if old and old != sha else []))
    outcome.status, outcome.format = "skipped", twin.get("format")
    outcome.records = dict(twin.get("records") or {})
    outcome.reason = f"same content already loaded from {twin['_id']}"
    return outcome


def _finish(ctx: FileContext, key: str, set_fields: dict, drop: list[str] = (),
            unset: tuple[str, ...] = ()) -> None:
    """Write the entry's final state and release it; then delete what it dropped."""
    drop = list(dict.fromkeys(drop))
    ctx.ledger.update(key, ctx.owner.id, set_fields, unset=("owner", "lease_until", *unset), push_drop=drop)
    ctx.claims.forget(LEDGER, key)
    if drop:
        _drop_contents(ctx, key, drop)


def _fail(ctx: FileContext, outcome: FileOutcome, reason: str, drop: list[str] = ()) -> FileOutcome:
    _failed(outcome, reason)
    _finish(ctx, outcome.path, {
        "status": "failed", "error": printable(reason, backslash=False), "errors": outcome.errors,
        "warnings": outcome.warnings, "warnings_total": outcome.warnings_total,
        "failed_sha256": outcome.sha256, "run_id": ctx.run_id, "finished": utcnow()},
        drop=drop, unset=("pending",))
    return outcome


def _failed(outcome: FileOutcome, reason: str) -> FileOutcome:
    outcome.status, outcome.reason = "failed", reason
    outcome.records, outcome.inserted, outcome.updated, outcome.existing = {}, 0, 0, 0
    return outcome


def _lost(ctx: FileContext, outcome: FileOutcome, exc: SciIngestError) -> FileOutcome:
    """This loader lost the file to another (its claim taken over, or held too long): skipped when the
    ledger says the other one has loaded it (what it holds is counted as already loaded, as an unchanged
    file's: the rival loads' reports add up), else failed, naming why (the next run takes it up)."""
    _let_go(ctx, outcome.path, outcome)
    entry = ctx.ledger.lookup([outcome.path], {"status": 1, "run_id": 1, "owner": 1, "format": 1, "records": 1,
                                               "sha256": 1}).get(outcome.path) or {}
    if entry.get("status") != "loaded" or entry.get("owner"):
        return _failed(outcome, str(exc))
    outcome.status = "skipped"
    outcome.reason = f"{LOADED_BY_ANOTHER} (run {entry.get('run_id')}), which took this one's claim over"
    outcome.format, outcome.sha256 = entry.get("format"), entry.get("sha256")
    outcome.records, outcome.inserted, outcome.updated, outcome.existing = dict(entry.get("records") or {}), 0, 0, 0
    return outcome


def _let_go(ctx: FileContext, key: str, outcome: FileOutcome) -> None:
    """This loader lost the file to another: forget what it queued, release what it holds."""
    ctx.writer.result(key)
    ctx.ledger.update(key, ctx.owner.id, unset=("owner", "lease_until"))
    ctx.claims.forget(LEDGER, key)
    if outcome.sha256:
        ctx.claims.release(CLAIMS, outcome.sha256)


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
    if ctx.ledger.holds_content(sha, exclude=key):
        return  # another path stands for the same content: its documents stay
    for coll, selector in content_filters(sha):
        ctx.retry(f"removing documents of {sha[:12]} from {coll}", ctx.db[coll].delete_many, selector)
    drop_records(ctx.db, sha, ctx.retry)  # its records fall back to their next holder, or go


def incarnation(ctx: FileContext):
    """Which run of the server process answers (changes when it restarts); None if it does not say."""
    hello = ctx.retry("asking the server hello", ctx.db.client.admin.command, "hello")
    return (hello.get("topologyVersion") or {}).get("processId")


# ------------------------------------------------------------------ interruptions
def abandon(ctx: FileContext, key: str) -> None:
    """Best effort after an interruption: drop the pending version, release the claims.

    Quick (a few seconds of retries at most): when the server is gone, the next
    run's claim finishes the rollback instead.
    """
    budget, ctx.retry.budget_s = ctx.retry.budget_s, min(ctx.retry.budget_s, 3.0)
    try:
        ctx.writer.result(key)
        entry = ctx.ledger.get(key) or {}
        if (entry.get("owner") or {}).get("id") != ctx.owner.id:
            return
        pending = (entry.get("pending") or {}).get("sha256")
        if pending and pending != entry.get("sha256"):
            _drop_contents(ctx, key, [pending], held=pending)
        back = "loaded" if entry.get("sha256") else "failed"
        ctx.ledger.update(key, ctx.owner.id, {"status": back, "error": "interrupted; rolled back"},
                          unset=("pending", "owner", "lease_until"))
        ctx.claims.forget(LEDGER, key)
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
    if entry.get("status") == "loading" and _written_and_current(key, entry.get("pending") or {}):
        old = entry.get("sha256")  # its documents are durable; only the final ledger write was lost
        _finish(ctx, key, entry["pending"]["written"],
                drop=[s for s in (*entry.get("drop", ()), old) if s and s != pending],
                unset=("pending", "duplicate_of", "failed_sha256"))
        return True
    drop = [s for s in (pending, *entry.get("drop", ())) if s and s != entry.get("sha256")]
    if not entry.get("status") and not drop:
        ctx.ledger.remove(key, ctx.owner.id)  # claimed, then stopped before anything happened
        ctx.claims.forget(LEDGER, key)
        return True
    fields: dict = {}
    if entry.get("status") == "loading":
        fields = {"status": "loaded" if entry.get("sha256") else "failed",
                  "error": "an interrupted load was rolled back"}
    _finish(ctx, key, fields, drop=drop, unset=("pending",))
    return True


def _written_and_current(key: str, pending: dict) -> bool:
    """Whether the pending version passed the barrier and is still the file's content."""
    final = pending.get("written")
    if not isinstance(final, dict):
        return False
    try:
        stat = Path(key).stat()
    except OSError:
        return False
    return _same_version(final, stat.st_size, stat.st_mtime)
