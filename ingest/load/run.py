"""Running a load: the plan, then the tasks on Dask workers (or in this process), then the report.

The driver (:func:`load_paths`) discovers the files, skips the unchanged ones
with a few ledger queries, finishes what interrupted loads left behind, packs
the rest into tasks and runs :func:`load_group` for each:

* on a Dask cluster (a ``LocalCluster`` of ``workers`` processes, or the
  scheduler of ``--scheduler`` / ``DASK_SCHEDULER_ADDRESS``): every worker
  process keeps one MongoDB client, one ledger, one set of claims and one
  pipelined writer for all its tasks; a task whose worker dies is run again by
  Dask on another worker, and the claims make that exact;
* or, for one worker and no scheduler, in this process (the same function).

Ctrl-C, or a server that stays away longer than the retries allow, stops the
load: files finished stay loaded, the ones in flight are rolled back (when the
server answers), and :class:`LoadStopped` carries the summary and the command
that resumes for the report.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tqdm import tqdm

from ingest.config import default_workers
from ingest.errors import ConfigError, SciIngestError, ServerUnavailable, stopped_by
from ingest.fileio import printable
from ingest.inputs import LOADED_BY_ANOTHER
from ingest.load.batch import BATCH_BYTES, BATCH_DOCUMENTS, BATCH_FILES, commit, prepare
from ingest.load.claims import LEASE_S, MAX_WAIT_S, Claims, Owner
from ingest.load.content import MAX_BAD_RECORDS
from ingest.load.files import InFlight, complete, dry_run, roll_back_interrupted, start
from ingest.load.indexes import add_written
from ingest.load.keys import ensure_key_scheme
from ingest.load.outcome import FileOutcome, LoadSummary
from ingest.load.plan import FileTask, discover, group, plan
from ingest.load.protocol import Context
from ingest.load.records import ensure_versions
from ingest.load.recovery import recover_others, recover_run, release_ghosts
from ingest.load.writer import PipelinedWriter
from ingest.store.catalog import TIMINGS
from ingest.store.ledger import Ledger
from ingest.store.mongo import insert_new, replace_documents, shared_client, write_concern_of
from ingest.store.retry import Retry
from ingest.timing import StageRecord, from_epoch

if TYPE_CHECKING:  # distributed costs 0.5 s to import: a load with nothing new starts no cluster
    from distributed import Client

__all__ = ["LoadOptions", "LoadJob", "LoadStopped", "load_paths", "load_group", "resume_command"]


@dataclass(frozen=True)
class LoadOptions:
    workers: int = field(default_factory=default_workers)
    batch_size: int = 1000
    force: bool = False
    dry_run: bool = False
    write_concern: dict | None = None  # None: the URI's, else the server's default
    retry_s: float = 60.0  # how long each operation is retried through transient errors
    keep_indexes: bool = False
    progress: bool = True
    include_hidden: bool = False  # hidden files found in directories: loaded, not named as skipped
    max_bad_records: int = MAX_BAD_RECORDS  # a record file fails at this many bad records (0: no bound)


@dataclass(frozen=True)
class LoadJob:
    """What a worker needs to load files: small and picklable (a URI, never a client), with the
    load's settings as the command gave them (one :class:`LoadOptions`, never copied field by field)."""

    uri: str
    db_name: str
    run_id: str
    options: LoadOptions = field(default_factory=LoadOptions)
    server_kind: str | None = None
    server_pid: int | None = None  # the private embedded server's process: no retrying once it is gone
    lease_s: float = LEASE_S
    max_wait_s: float = MAX_WAIT_S
    lineage: dict | None = None  # the Airflow task loading (on the per-file timing rows)


class LoadStopped(SciIngestError):
    """The load stopped before its end: Ctrl-C (``interrupted``) or the server gone (``cause``).

    ``summary`` says what was finished, ``resume`` is the command that goes on.
    Call :meth:`roll_back` once the workers are gone (the cluster closed): it
    rolls back the files they left half-written and lists them in the summary.
    """

    def __init__(self, summary: LoadSummary, job: LoadJob, resume: str, cause: SciIngestError | None = None,
                 by: str = "Ctrl-C"):
        self.summary, self.job, self.resume, self.cause, self.by = summary, job, resume, cause, by
        self.interrupted = cause is None
        what = f"interrupted ({by})" if cause is None else str(cause)
        super().__init__(f"{what}; resume with: {resume}")

    def roll_back(self) -> list[str]:
        """Roll back what the workers left half-written; count what they finished (from the ledger)."""
        done = [] if self.job.options.dry_run else recover_run(_context(self.job))
        self.summary.rolled_back += done
        _add_finished(self.job, self.summary)
        if not self.job.options.dry_run:
            ctx = _context(self.job)
            try:
                add_written(ctx.db, _inserted(self.summary), ctx.retry)
            except SciIngestError:
                pass  # the server is gone: the tally stays low, which errs towards a bulk load
        return done


# ------------------------------------------------------------------ worker side
#: The longest a loader waits for one reply (a batch of 1,000 documents takes well under a
#: second): a reply that never comes is then a timeout, retried, not a hang.
SOCKET_TIMEOUT_MS = 120_000

_CONTEXTS: dict[tuple, Context] = {}
_CONTEXTS_LOCK = threading.Lock()


def _client(uri: str, write_concern: dict | None):
    """The loader's client: its writes are retried by sci-ingest (idempotent), not by the driver."""
    return shared_client(uri, write_concern=write_concern, retry_writes=False, socket_timeout_ms=SOCKET_TIMEOUT_MS)


def _context(job: LoadJob) -> Context:
    """This thread's context for ``job``: the process's client; a ledger, claim set and writer
    of its own (a Dask worker with several threads runs several loaders), reused across tasks."""
    key = (os.getpid(), threading.get_ident(), repr(job))
    with _CONTEXTS_LOCK:
        return _CONTEXTS.get(key) or _new_context(job, key)


def _new_context(job: LoadJob, key: tuple) -> Context:
    db = _client(job.uri, job.options.write_concern)[job.db_name]
    retry = Retry(job.options.retry_s, uri=job.uri, server_pid=job.server_pid)
    slot = sum(1 for k in _CONTEXTS if k[0] == key[0] and k[2] == key[2])
    owner = Owner.this_process(job.run_id, slot)
    ctx = _CONTEXTS[key] = Context(
        db=db, run_id=job.run_id, owner=owner, retry=retry, claims=Claims(db, owner, retry, job.lease_s, job.max_wait_s),
        ledger=Ledger(db, retry), writer=PipelinedWriter(db, retry), batch_size=job.options.batch_size,
        force=job.options.force, max_bad_records=job.options.max_bad_records)
    return ctx


def load_group(job: LoadJob, keys: list[str], new: Sequence[str] = ()) -> list[dict]:
    """Load the files ``keys`` (a Dask task); their outcomes as dicts.

    Small files of ``new`` (files the ledger did not know when the load was
    planned) go in batches (:mod:`ingest.load.batch`); the others, and whatever
    a batch hands back, one by one, pipelined: while the writer writes one
    file's documents, the next file is read and parsed; a file is completed once
    its documents are written.
    """
    ctx = _context(job)
    retries = ctx.retry.retries
    outcomes: list[FileOutcome] = []
    flights: list[InFlight] = []
    order = {key: i for i, key in enumerate(keys)}
    try:
        if new:
            keys = _load_batches(ctx, keys, set(new), outcomes)
        for key in keys:
            step = start(ctx, key)
            while flights:
                outcomes.append(complete(ctx, flights.pop(0)))
            if isinstance(step, InFlight):
                flights.append(step)
            else:
                outcomes.append(step)
        while flights:
            outcomes.append(complete(ctx, flights.pop(0)))
        outcomes.sort(key=lambda o: order[o.path])  # the group's order, batched or not (a batch of one is a file)
        _decided(outcomes)
        try:
            _record_file_timings(ctx, job, outcomes)
        except ServerUnavailable:
            if not ctx.retry.server_gone():
                raise  # with the retries it spent, counted below as every other stop's
            # the private server exited after these files were loaded: they are reported as
            # loaded, and the run stops with the server's exit at its next operation
    except BaseException as exc:
        for flight in flights:
            roll_back_interrupted(ctx, flight.outcome.path)
        # what the task did before the stop, for the report (pickled with the error across Dask): the files
        # it finished and the retries none of them counted (a window of retries spent on the one that failed)
        _carry(exc, _decided(outcomes), max(0, ctx.retry.retries - retries - sum(o.retries for o in outcomes)))
        raise
    if outcomes:  # retries no file counted (a batch handed back, the timings' write) go on the last one
        outcomes[-1].retries += max(0, ctx.retry.retries - retries - sum(o.retries for o in outcomes))
    return [o.as_dict() for o in outcomes]


def _dry_run_group(job: LoadJob, keys: list[str]) -> list[dict]:
    """A dry run's task: each file read, parsed and built; nothing claimed, nothing written."""
    worker, outcomes = f"{socket.gethostname()}:{os.getpid()}", []
    try:
        for key in keys:
            outcomes.append(dry_run(key, worker, job.options.batch_size, job.options.max_bad_records))
    except BaseException as exc:  # what it finished, for the report (as a load's task)
        _carry(exc, _decided(outcomes), 0)
        raise
    return [o.as_dict() for o in _decided(outcomes)]


def _carry(exc: BaseException, finished: list[FileOutcome], retries: int) -> None:
    """What a stopped task did, for the report: the files it finished and the retries none of them
    counted, on its error (pickled with it across Dask; :func:`load_paths` reads them)."""
    vars(exc).update(finished=[o.as_dict() for o in finished], retries=retries)


def _decided(outcomes: list[FileOutcome]) -> list[FileOutcome]:
    """``outcomes``, each with its wall clock: decided now unless it says when."""
    now = time.time()
    for o in outcomes:
        o.decided(now)
    return outcomes


def _load_batches(ctx: Context, keys: list[str], new: set[str], outcomes: list[FileOutcome]) -> list[str]:
    """Load the small new files of ``keys`` in batches, their outcomes added to ``outcomes`` as each batch
    commits (a stop keeps those); the keys left to load one by one."""
    rest: list[str] = []
    batch: list = []
    held = weight = 0

    def flush() -> None:
        nonlocal batch, held, weight
        if batch:
            done, again = commit(ctx, batch)
            outcomes.extend(done)
            rest.extend(again)
        batch, held, weight = [], 0, 0

    for key in keys:
        if key not in new:
            rest.append(key)
            continue
        prepared = prepare(key, ctx.owner.label, BATCH_DOCUMENTS - held, ctx.max_bad_records)
        if prepared is None and batch:  # it may fit a batch of its own
            flush()
            prepared = prepare(key, ctx.owner.label, BATCH_DOCUMENTS, ctx.max_bad_records)
        if prepared is None:
            rest.append(key)
            continue
        batch.append(prepared)
        held += len(prepared.documents)
        weight += prepared.weight
        if len(batch) >= BATCH_FILES or held >= BATCH_DOCUMENTS or weight >= BATCH_BYTES:
            flush()
    flush()
    return rest


def _record_file_timings(ctx: Context, job: LoadJob, outcomes: list[FileOutcome]) -> None:
    """A parse and a load row per file written, with the worker (one round trip per task)."""
    rows = []
    for o in outcomes:
        if o.status == "skipped":
            continue
        written = o.inserted + o.updated
        for stage, span, busy, n_out in (("parse", (o.started, o.parsed), o.parse_seconds, o.documents),
                                         ("load", (o.parsed, o.ended), o.load_seconds, written)):
            rec = StageRecord(run_id=job.run_id, stage=stage, file=o.path, worker=o.worker, airflow=job.lineage,
                              server_kind=job.server_kind, records_in=o.documents, records_out=n_out,
                              bytes=o.size, status="ok" if o.status == "loaded" else o.status,
                              error=o.reason if o.status == "failed" else None, scope="file",
                              started=from_epoch(span[0]), busy_seconds=busy)
            rec.detail = {"retries": o.retries} if o.retries else {}
            rec.finish(from_epoch(span[1]))
            rows.append(rec.as_doc())
    if rows:  # inserted; a row written before (a task run again) replaced
        _, again = ctx.retry("recording the timings of the files", insert_new, ctx.db[TIMINGS], rows)
        if again:
            ctx.retry("recording the timings of the files", replace_documents, ctx.db[TIMINGS],
                      [rows[i] for i in again])


# ------------------------------------------------------------------ driver side
def load_paths(uri: str, db_name: str, paths: Sequence, run_id: str, options: LoadOptions = LoadOptions(), *,
               server_kind: str | None = None, dask: Callable[[], Client] | None = None,
               log: Callable[[str], None] | None = None,
               on_plan: Callable[[list[FileTask]], None] | None = None,
               server_pid: int | None = None, lineage: dict | None = None) -> LoadSummary:
    """Load ``paths`` (files or directories) into ``db_name``; the summary of what happened.

    ``dask``: a function returning the ``distributed.Client`` to run the tasks
    on, called only when there is something to load (None: in this process).  ``on_plan`` is called with the files to load before any is
    loaded (the index plan uses it).  Raises :class:`LoadStopped` on Ctrl-C and
    when the server stays away longer than the retries allow.
    """
    log = log or (lambda message: None)
    job = LoadJob(uri=uri, db_name=db_name, run_id=run_id, options=options, server_kind=server_kind,
                  server_pid=server_pid, lineage=lineage)
    db = _client(uri, options.write_concern)[db_name]
    retry = Retry(options.retry_s, uri=uri, server_pid=server_pid)
    in_force = write_concern_of(db.client)
    if not options.dry_run and in_force.get("w") == 0:
        raise ConfigError("unacknowledged writes (w=0) cannot be used for a ledgered load: the ledger could "
                          "record a file that never landed; use w=1 or more (benchmarks may use w=0)")
    given: dict[str, str] = {}  # the key of a link -> the path the user gave: what messages name
    files, missing = discover(paths, include_hidden=options.include_hidden, given=given)
    ledger = Ledger(db, retry)
    todo, decided = plan(ledger, files, options.force)
    now = time.time()
    for outcome in missing + decided:  # refused or skipped unread: their clocks say when that was decided
        outcome.decided(now)
        _as_given(outcome, given)
    client = dask() if dask is not None and todo else None
    summary = LoadSummary(files=missing + decided, workers=_worker_count(client, options),
                          write_concern=in_force, dry_run=options.dry_run, planned=len(files) + len(missing))
    refused = [o for o in missing + decided if o.status == "failed"]
    if refused and not options.dry_run:  # loaded before? their last good versions stay: counted
        held = ledger.lookup([o.path for o in refused], {"status": 1, "sha256": 1, "records": 1, "duplicate_of": 1})
        for outcome in refused:
            outcome.keep_from(held.get(outcome.path))
    for outcome in missing:  # refused (failed) or hidden (skipped): each named
        log(f"{outcome.status}: {outcome.line}{outcome.kept_note}")
    for outcome in decided:
        if outcome.status == "failed":
            log(f"failed: {outcome.line}{outcome.kept_note}")
    if not options.dry_run:
        ensure_versions(db, retry)  # once per database: one read afterwards
        rekeyed = ensure_key_scheme(db, retry)  # once per database: one read afterwards
        if rekeyed is not None and rekeyed.moved:
            log(rekeyed.note())
        summary.rolled_back += recover_others(_context(job), {t.key for t in todo})
    if on_plan is not None:
        on_plan(todo)
    groups = group(todo, summary.workers)
    new = {t.key for t in todo if not t.known}
    try:
        _run_groups(job, groups, [[k for k in g if k in new] for g in groups], client, summary, log,
                    options.progress, len(todo), given)
    except (KeyboardInterrupt, ServerUnavailable) as exc:
        summary.interrupted = isinstance(exc, KeyboardInterrupt)
        known = {f.path for f in summary.files}  # the stopped task's finished files, its uncounted retries
        summary.files += [o for o in map(FileOutcome.from_dict, getattr(exc, "finished", ())) if o.path not in known]
        summary.retries += retry.retries + getattr(exc, "retries", 0)
        if client is not None:
            client.cancel(list(_PENDING))
        cause = exc if isinstance(exc, ServerUnavailable) else None
        raise LoadStopped(summary, job, resume_command(), cause, stopped_by(exc)) from None
    if not options.dry_run:
        release_ghosts(_context(job))
        add_written(db, _inserted(summary), retry)
    summary.retries += retry.retries
    return summary


def _as_given(outcome: FileOutcome, given: dict[str, str]) -> FileOutcome:
    """``outcome`` named in messages by the path the user gave, when its key is another (a link)."""
    if outcome.path in given:
        outcome.shown_path = printable(given[outcome.path])
    return outcome


def resume_command() -> str:
    """The command that goes on after a stop: this one again (the ledger skips what was finished)."""
    return "sci-ingest " + shlex.join(sys.argv[1:])


def _inserted(summary: LoadSummary) -> int:
    return sum(f.inserted for f in summary.files if f.status == "loaded")


_PENDING: set = set()


def _worker_count(dask: Client | None, options: LoadOptions) -> int:
    if dask is None:
        return 1
    try:
        return max(1, len(dask.scheduler_info().get("workers", {})))
    except Exception:  # a scheduler that cannot say: the option is the best guess
        return options.workers


def _run_groups(job: LoadJob, groups: list[list[str]], news: list[list[str]], dask: Client | None, summary: LoadSummary, log,
                progress: bool, n_files: int, given: dict[str, str]) -> None:
    bar = _progress(n_files, progress)
    try:
        if dask is None:
            results = (load_group(job, keys, new) for keys, new in zip(groups, news))
        else:
            from dask.distributed import as_completed  # noqa: PLC0415 - lazy: a load with nothing new starts no cluster; distributed costs 0.5 s

            futures = dask.map(load_group, [job] * len(groups), groups, news, pure=False)
            _PENDING.update(futures)
            results = (future.result() for future in as_completed(futures, loop=dask.loop))
        for result in results:
            for data in result:
                outcome = _as_given(FileOutcome.from_dict(data), given)
                summary.files.append(outcome)
                if outcome.status == "failed":
                    log(f"failed: {outcome.line}{outcome.kept_note}")
                elif outcome.status == "skipped" and (outcome.reason or "").startswith(LOADED_BY_ANOTHER):
                    log(f"note: {outcome.line}")  # not a failure: the ledger has it loaded
                _log_warnings(outcome, log)
            if bar is not None:
                bar.update(len(result))
    finally:
        _PENDING.clear()
        if bar is not None:
            bar.close()


#: Warnings of one file printed on stderr; the rest are counted there, and kept in the ledger
#: (the first 50) and in ``--json``.
WARNINGS_SHOWN = 3


#: Values set aside of one file named on stderr (:mod:`ingest.load.contracts`); the rest likewise.
SET_ASIDE_SHOWN = 10


def _log_warnings(outcome: FileOutcome, log) -> None:
    for level, kept, total, shown, what in (
            ("set aside", outcome.set_aside, outcome.set_aside_total, SET_ASIDE_SHOWN, "value(s) set aside"),
            ("warning", outcome.warnings, outcome.warnings_total, WARNINGS_SHOWN, "warning(s)")):
        for message in kept[:shown]:
            log(f"{level}: {message}")
        more = total - min(len(kept), shown)
        if more > 0:
            log(f"{level}: {outcome.shown}: {more} more {what} (the first {len(kept)} in the ledger entry "
                "and in --json)")


def _progress(total: int, enabled: bool):
    if not enabled or not total:
        return None
    return tqdm(total=total, desc="load", unit="file", disable=None, leave=False)


def _add_finished(job: LoadJob, summary: LoadSummary) -> None:
    """Files this run finished whose task did not report back before the stop."""
    if job.options.dry_run:
        return
    ctx = _context(job)
    known = {f.path for f in summary.files}
    try:
        entries = ctx.retry("reading the ledger", lambda: list(ctx.ledger.coll.find(
            {"run_id": job.run_id, "status": "loaded"}, {"pending": 0, "errors": 0, "warnings": 0, "set_aside": 0})))
    except SciIngestError:
        return  # the server is gone: the report keeps what the tasks reported
    for e in entries:
        if e["_id"] not in known:
            summary.files.append(FileOutcome(
                path=e["_id"], status="loaded", format=e.get("format"), sha256=e.get("sha256"),
                size=e.get("size", 0), records=dict(e.get("records") or {}), inserted=e.get("inserted", 0),
                updated=e.get("updated", 0), existing=e.get("existing", 0),
                set_aside_total=e.get("set_aside_total", 0)))
