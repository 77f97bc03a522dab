"""One file, loaded as a transaction: all of it or nothing, exactly once, whatever stops it.

The protocol's steps (:mod:`ingest.load.protocol` names them; ``ingest.store.ledger`` the entry's
fields), for one file:

1. **claim** its ledger entry (another loader holding it: wait; a dead one: take over);
2. skip it if its entry says it is loaded with the same size and mtime, or the same sha256 (a
   loader that died after finishing, or another command, may have loaded it since the plan was
   made); record it as a duplicate when another path has the same content loaded;
3. **claim** its content (sha256), mark the entry ``loading`` with the version as ``pending``,
   and **write**: queue its documents to the writer (:mod:`ingest.load.content`);
4. once they are written (meanwhile the next file is parsed: :func:`start` and :func:`complete`),
   **seal**: a journaled write that keeps the entry's final state in ``pending.written``, the
   server's identity unchanged since step 3 (else the file is written again);
5. **commit**: the entry says ``loaded``, the version it replaces goes to ``drop``; **release**
   the claims, and **roll back** the dropped contents unless another loaded path has the same one.

A bad file (parse error, unreadable, vanished, a write refused) is rolled back: its pending
content is dropped, the entry says ``failed`` with the reason and keeps the last loaded version.
Whatever stops a load between these steps leaves an entry that the next claim finishes
(:func:`ingest.load.recovery.recover_entry`).
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
from ingest.inputs import LOADED_BY_ANOTHER
from ingest.load.claims import ClaimLost, ClaimTimeout
from ingest.load.content import MAX_BAD_RECORDS, write_content
from ingest.load.early import checked_version
from ingest.load.outcome import FileOutcome
from ingest.load.protocol import (
    MAX_REWRITES,
    Context,
    commit_entry,
    drop_contents,
    failed_fields,
    incarnation,
    loaded_fields,
    same_version,
)
from ingest.load.reading import Changed, Version, version_of
from ingest.parsers import Format
from ingest.store.catalog import CLAIMS, LEDGER
from ingest.store.space import own_disk_full
from ingest.timing import utcnow

__all__ = ["InFlight", "start", "complete", "roll_back_interrupted", "dry_run"]

_INPUT_ERRORS = (ParseError, InputError, OSError, EOFError, gzip.BadGzipFile)


@dataclass
class InFlight:
    """A file whose documents are queued to the writer; :func:`complete` finishes it."""

    outcome: FileOutcome
    entry: dict
    path: Path
    fmt: Format
    version: Version
    stale: list[str]
    incarnation: object
    written: threading.Event
    started: float
    retries_before: int
    rewrites: int = field(default=0)


# ------------------------------------------------------------------ the transaction
def start(ctx: Context, key: str) -> FileOutcome | InFlight:
    """Claim, check and parse the file, and queue its documents; an outcome when that decides it."""
    outcome = FileOutcome(path=key, status="loading", worker=ctx.owner.label, started=time.time())
    retries_before = ctx.retry.retries
    try:
        entry = ctx.claims.claim_path(key)
    except ClaimTimeout as exc:
        return outcome.fail(str(exc))
    try:
        step = _start_claimed(ctx, Path(key), entry, outcome, retries_before)
    except (ClaimLost, ClaimTimeout) as exc:  # another loader has it: leave it to that one
        return _lost(ctx, outcome, exc)
    except BaseException:
        roll_back_interrupted(ctx, key)  # Ctrl-C, the server gone: roll back what can be, then stop
        raise
    if isinstance(step, FileOutcome):
        step.retries = ctx.retry.retries - retries_before
        step.keep_from(entry)  # failed: its last good version stays (docs/loading.md, "A file that fails")
    return step


def _start_claimed(ctx: Context, path: Path, entry: dict, outcome: FileOutcome,
                   retries_before: int) -> FileOutcome | InFlight:
    key = outcome.path
    try:
        now = version_of(key)
        outcome.size = now.size
        if not ctx.force and _unchanged(entry, now.size, now.mtime):
            return _already_loaded(ctx, entry, outcome, "unchanged since it was loaded")
        version = checked_version(key, now.size, outcome, ctx.max_bad_records)
    except ParseError as exc:  # its bytes proved it bad before it was hashed whole (ingest.load.early)
        return _commit_failure(ctx, outcome, str(exc), drop=_stale(entry, None))
    except Changed as exc:
        return _commit_failure(ctx, outcome, str(exc))
    except OSError as exc:
        return _commit_failure(ctx, outcome, f"cannot read: {exc.strerror or exc}")
    outcome.sha256 = sha = version.sha256
    outcome.size = version.size
    stale = _stale(entry, sha)
    if not ctx.force and entry.get("status") == "loaded" and entry.get("sha256") == sha:
        commit_entry(ctx, key, {"mtime": version.mtime}, drop=stale)
        return _already_loaded(ctx, entry, outcome, "same sha256 as when it was loaded")
    twin = None if ctx.force else ctx.ledger.loaded_with_sha(sha, exclude=key)
    if twin:
        return _duplicate(ctx, entry, outcome, version, twin, stale)
    try:
        fmt = parsers.detect(path)
    except InputError as exc:
        return _commit_failure(ctx, outcome, str(exc), drop=stale)
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


def _queue_documents(ctx: Context, flight: InFlight) -> None:
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


def complete(ctx: Context, flight: InFlight) -> FileOutcome:
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
        roll_back_interrupted(ctx, key)
        raise
    finally:
        o.retries = ctx.retry.retries - flight.retries_before


def _write_again(ctx: Context, flight: InFlight) -> None:
    flight.rewrites += 1
    if flight.rewrites > MAX_REWRITES:
        raise ServerUnavailable(f"{flight.path}: the server restarted {MAX_REWRITES + 1} times while the "
                                "file was written")
    o = flight.outcome
    o.inserted = o.updated = o.existing = 0  # counted again: all of them are this load's (see below)
    ctx.claims.claim_path(o.path)  # the restarted server may have lost the claim too
    ctx.claims.claim(CLAIMS, flight.version.sha256)
    o.records, o.warnings, o.errors, o.warnings_total = {}, [], [], 0
    o.set_aside, o.set_aside_total = [], 0
    _queue_documents(ctx, flight)


def _loaded_fields(ctx: Context, flight: InFlight) -> dict:
    """The entry of the file once loaded (kept in ``pending.written`` by the barrier, so that
    :func:`recover` can finish a load whose last ledger write a server restart lost)."""
    o, entry = flight.outcome, flight.entry
    o.load_seconds = max(0.0, time.perf_counter() - flight.started - o.parse_seconds)
    if flight.rewrites or ((entry.get("pending") or {}).get("sha256") == o.sha256
                           and entry.get("run_id") == ctx.run_id):
        # this run wrote them all: before a server restart, or in an attempt of a worker that died
        o.inserted, o.existing = o.inserted + o.existing, 0
    return loaded_fields(o, flight.version, ctx.run_id)


def _loaded(ctx: Context, flight: InFlight, final: dict) -> FileOutcome:
    o, old, sha = flight.outcome, flight.entry.get("sha256"), flight.version.sha256
    ctx.claims.release(CLAIMS, sha)
    commit_entry(ctx, o.path, final, drop=flight.stale + ([old] if old and old != sha else []),
                 unset=("pending", "duplicate_of", "failed_sha256"))
    o.status = "loaded"
    return o


def _roll_back(ctx: Context, flight: InFlight, exc: BaseException) -> FileOutcome:
    """A bad file: nothing of it stays written; its entry says why."""
    o = flight.outcome
    if isinstance(exc, ParseError) and not o.errors:  # with bad records listed, exc is their summary
        o.errors.append({"line": exc.line, "reason": exc.reason})
    reason = str(exc) if isinstance(exc, SciIngestError) else f"{flight.path}: cannot read: {exc}"
    sha = flight.version.sha256
    drop_contents(ctx, [sha], path=o.path, held={sha})
    ctx.claims.release(CLAIMS, sha)
    o.retries = ctx.retry.retries - flight.retries_before
    _commit_failure(ctx, o, reason, drop=flight.stale)
    o.keep_from(flight.entry)
    return o


# ------------------------------------------------------------------ other endings
def dry_run(key: str, worker: str, batch_size: int, max_bad_records: int = MAX_BAD_RECORDS) -> FileOutcome:
    """Everything but the protocol: read, hash, parse and build the documents; nothing written or claimed."""
    outcome = FileOutcome(path=key, status="loading", worker=worker, started=time.time())
    try:
        version = checked_version(key, version_of(key).size, outcome, max_bad_records)
        outcome.size, outcome.sha256 = version.size, version.sha256
        fmt = parsers.detect(Path(key))
        outcome.format = fmt.name
        started = time.perf_counter()
        write_content(version, fmt, outcome, lambda collection, docs, mode: None, batch_size, max_bad_records)
        outcome.load_seconds = max(0.0, time.perf_counter() - started - outcome.parse_seconds)
    except ParseError as exc:
        if not outcome.errors:  # with bad records listed, exc is their summary
            outcome.errors.append({"line": exc.line, "reason": exc.reason})
        return outcome.fail(str(exc))
    except InputError as exc:
        return outcome.fail(str(exc))
    except (OSError, EOFError) as exc:
        return outcome.fail(f"{key}: cannot read: {exc}")
    outcome.status = "loaded"
    return outcome


def _unchanged(entry: dict, size: int, mtime: float) -> bool:
    return entry.get("status") == "loaded" and same_version(entry, size, mtime)


def _already_loaded(ctx: Context, entry: dict, outcome: FileOutcome, why: str) -> FileOutcome:
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


def _duplicate(ctx: Context, entry: dict, outcome: FileOutcome, version: Version, twin: dict,
               stale: list[str]) -> FileOutcome:
    """Its content is loaded from another path: committed as a duplicate, nothing written."""
    old = entry.get("sha256")
    sha = version.sha256
    commit_entry(ctx, outcome.path, {
        "status": "loaded", "sha256": sha, "size": version.size, "mtime": version.mtime,
        "format": twin.get("format"), "records": twin.get("records", {}), "duplicate_of": twin["_id"],
        "run_id": ctx.run_id, "finished": utcnow()}, drop=stale + ([old] if old and old != sha else []))
    outcome.status, outcome.format = "skipped", twin.get("format")
    outcome.records = dict(twin.get("records") or {})
    outcome.reason = f"same content already loaded from {twin['_id']}"
    return outcome


def _commit_failure(ctx: Context, outcome: FileOutcome, reason: str, drop: list[str] | None = None) -> FileOutcome:
    """The file failed: its entry says why (and keeps its last loaded version)."""
    outcome.fail(reason)
    commit_entry(ctx, outcome.path, failed_fields(outcome, ctx.run_id), drop=drop or (), unset=("pending",))
    return outcome


def _lost(ctx: Context, outcome: FileOutcome, exc: SciIngestError) -> FileOutcome:
    """This loader lost the file to another (its claim taken over, or held too long): it forgets what it
    queued and releases what it holds.  Skipped when the ledger says the other one has loaded it (what
    it holds is counted as already loaded, as an unchanged file's: the rival loads' reports add up),
    else failed, naming why (the next run takes it up)."""
    ctx.writer.result(outcome.path)
    ctx.ledger.update(outcome.path, ctx.owner.id, unset=("owner", "lease_until"))
    ctx.claims.forget(LEDGER, outcome.path)
    if outcome.sha256:
        ctx.claims.release(CLAIMS, outcome.sha256)
    entry = ctx.ledger.lookup([outcome.path], {"status": 1, "run_id": 1, "owner": 1, "format": 1, "records": 1,
                                               "sha256": 1}).get(outcome.path) or {}
    if entry.get("status") != "loaded" or entry.get("owner"):
        return outcome.fail(str(exc))
    outcome.status = "skipped"
    outcome.reason = f"{LOADED_BY_ANOTHER} (run {entry.get('run_id')}), which took this one's claim over"
    outcome.format, outcome.sha256 = entry.get("format"), entry.get("sha256")
    outcome.records, outcome.inserted, outcome.updated, outcome.existing = dict(entry.get("records") or {}), 0, 0, 0
    return outcome


# ------------------------------------------------------------------ interruptions
def roll_back_interrupted(ctx: Context, key: str) -> None:
    """Best effort after an interruption: roll back the pending version, release the claims.

    Quick (a few seconds of retries at most): when the server is gone, the next run's claim
    finishes the rollback instead (:func:`ingest.load.recovery.recover_entry`).
    """
    budget, ctx.retry.budget_s = ctx.retry.budget_s, min(ctx.retry.budget_s, 3.0)
    try:
        ctx.writer.result(key)
        entry = ctx.ledger.get(key) or {}
        if (entry.get("owner") or {}).get("id") != ctx.owner.id:
            return
        pending = (entry.get("pending") or {}).get("sha256")
        if pending and pending != entry.get("sha256"):
            drop_contents(ctx, [pending], path=key, held={pending})
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
