"""Stage timing: every timed stage of every run leaves one row in ``stage_timings``.

A *stage* is a timed unit of work: ``parse`` and ``load`` (overall and per
file), ``cluster``, ``index``, ``analyze.<analysis>`` and ``validate``.  A row:
run_id, stage, file (where the stage is per file), worker (``host:pid`` of the
process that did it, where a stage is split over workers), started, ended,
seconds, records_in, records_out, bytes, workers (how many took part),
records_per_s, mb_per_s, peak_rss_mb, server kind, status ("ok" | "partial" |
"failed" | "skipped"), error, detail (e.g. the write concern of a load), and, for a row
written by an Airflow task, ``airflow``: {dag_id, run_id, task_id, try_number, map_index}.  ``peak_rss_mb`` is the peak resident set size of the
sci-ingest process so far (``getrusage``).

Every row has the wall-clock ``started`` and ``ended`` of the work it describes, and
``seconds = ended - started``; work done in parallel (the files parsed on several workers)
keeps its summed busy time in ``busy_seconds``.  ``scope`` says the level of a row:
``run`` (a stage of the run), ``worker`` (one worker's share of the load) or ``file`` (one
file's parse or load), so that one filter selects each level; :func:`level_filter` also
reads rows written before ``scope`` existed.  ``docs/timings.md`` is the schema (field,
type, meaning, unit).

Rows have deterministic ids, ``<run_id>:<stage>[:<worker>][:<file>]``, and are
written by replacing, so a retried task (Airflow retries with the same run id)
replaces its rows instead of adding a second set.
"""

from __future__ import annotations

import datetime as dt
import resource
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from ingest.dates import command_began_at
from ingest.errors import SciIngestError
from ingest.report import iso_utc
from ingest.store.mongo import db_errors

SCOPES = ("run", "worker", "file")
#: A ``started`` before this is a clock that was never set: rows written before stage timing was made
#: robust (a refused file's ``parse`` dated 1970-01-01); readers of old rows leave it out.
NEVER_SET = dt.datetime(1970, 1, 2)


def level_filter(scope: str) -> dict:
    """The filter of one level of rows; rows written before ``scope`` existed are read too (a run's
    rows had neither ``file`` nor ``worker``, a file's had ``file``)."""
    if scope == "run":
        return {"file": {"$exists": False}, "worker": {"$exists": False}}
    if scope == "file":
        return {"file": {"$exists": True}}
    return {"scope": scope}


def from_epoch(seconds: float | None) -> dt.datetime | None:
    """Epoch seconds as a UTC datetime; None for a clock that was never set (None, or the 0 that
    stood for it): never 1970-01-01, never a span of the whole Unix time."""
    if not seconds or seconds <= 0:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def command_start() -> tuple[dt.datetime | None, bool]:
    """(when the command began, whether a kept process runs it); (None, False) outside a command
    (an Airflow task, a test calling the pipeline: their process began long before)."""
    began, kept = command_began_at()
    return (from_epoch(began) if began is not None else None), kept


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class StageRecord:
    run_id: str
    stage: str
    file: str | None = None
    worker: str | None = None
    started: dt.datetime | None = field(default_factory=utcnow)  # None: never started (finish: when it ended)
    ended: dt.datetime | None = None
    seconds: float = 0.0
    records_in: int | None = 0
    records_out: int | None = 0
    bytes: int = 0
    workers: int | None = None
    records_per_s: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    server_kind: str | None = None
    status: str = "ok"
    error: str | None = None
    detail: dict = field(default_factory=dict)
    airflow: dict | None = None  # the Airflow task that wrote the row (dag_id, run_id, task_id, try_number)
    scope: str = "run"  # run | worker | file
    busy_seconds: float | None = None  # parallel work: the time summed over who did it

    def rates(self, seconds: float) -> None:
        """``records_per_s`` and ``mb_per_s`` over ``seconds`` (the row's own work: :func:`own_seconds`)."""
        base = max(self.records_in or 0, self.records_out or 0)
        self.records_per_s = round(base / seconds, 1) if seconds > 0 and base else None
        self.mb_per_s = round(self.bytes / 1e6 / seconds, 2) if seconds > 0 and self.bytes else None

    def finish(self, ended: dt.datetime | None = None) -> None:
        """End the row (now, or at ``ended``): ``seconds`` is ``ended - started``, the wall clock.
        A row whose start was never set is recorded at the time it ended (zero seconds)."""
        self.ended = ended or utcnow()
        if self.started is None:
            self.started = self.ended
        elif self.ended < self.started:
            self.ended = self.started
        self.seconds = round((self.ended - self.started).total_seconds(), 6)
        if self.busy_seconds is not None:
            self.busy_seconds = round(self.busy_seconds, 6)
        self.rates(self.seconds)
        self.peak_rss_mb = peak_rss_mb()

    @property
    def row_id(self) -> str:
        """``<run_id>:<stage>[:<worker>][:<file>]``: the same for a retry of the same work."""
        return ":".join(p for p in (self.run_id, self.stage, self.worker, self.file) if p is not None)

    def as_doc(self) -> dict:
        doc = asdict(self)
        return {"_id": self.row_id, **{k: v for k, v in doc.items() if v is not None and v != {}}}

    def as_json(self) -> dict:
        """JSON-ready; stage, records_in, records_out and seconds are always present (null = not applicable)."""
        doc = {"records_in": self.records_in, "records_out": self.records_out, **self.as_doc()}
        del doc["_id"]
        for key in ("started", "ended"):
            if key in doc:
                doc[key] = iso_utc(doc[key])
        return doc


class Timings:
    """Collects stage records for one run and writes each to MongoDB as it ends."""

    def __init__(self, run_id: str, server_kind: str | None = None, collection=None, lineage: dict | None = None):
        self.run_id = run_id
        self.server_kind = server_kind
        self.collection = collection
        self.lineage = lineage  # the Airflow task writing the rows, on each of them
        self.records: list[StageRecord] = []

    def new(self, stage: str, file: str | None = None) -> StageRecord:
        return StageRecord(run_id=self.run_id, stage=stage, file=file, server_kind=self.server_kind,
                           airflow=self.lineage)

    def add(self, record: StageRecord) -> StageRecord:
        if record.ended is None:
            record.finish()
        self.records.append(record)
        if self.collection is not None:
            doc = record.as_doc()
            with db_errors(f"recording the timing of stage {record.stage}"):
                self.collection.replace_one({"_id": doc["_id"]}, doc, upsert=True)
        return record

    def stopped(self, record: StageRecord, exc: BaseException) -> None:
        """Keep ``record``, ended now by ``exc``: status "interrupted" (Ctrl-C, SIGTERM) or "failed",
        with the error.  A row the server cannot take is let go: ``exc`` is what the caller raises."""
        record.status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        record.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        record.finish()
        try:
            self.add(record)
        except SciIngestError:
            pass

    @contextmanager
    def stage(self, stage: str, file: str | None = None, started: dt.datetime | None = None
              ) -> Iterator[StageRecord]:
        """Time a block; on an exception the row is kept with status "failed" ("interrupted" for
        Ctrl-C) and the error.  ``started``: the row began earlier, with the work that decided it
        (a count, say)."""
        record = self.new(stage, file)
        if started is not None:
            record.started = started
        try:
            yield record
        except BaseException as exc:
            self.stopped(record, exc)
            raise
        record.finish()
        self.add(record)


def is_start_up(stage: str) -> bool:
    """Whether ``stage`` is a step's start-up inside another stage's span: the cluster started, a
    step's modules imported on the workers (``warm_up.*``)."""
    return stage == "cluster" or stage.startswith("warm_up.")


def own_seconds(row, rows: Iterable) -> float:
    """The seconds of ``row`` (a :class:`StageRecord` or a stored row of a run) less the start-up
    stages (:func:`is_start_up`) of ``rows`` that lie inside its span: a load that started the Dask
    cluster took the cluster's seconds too, which are not the load's throughput."""
    get = (lambda r, k: r.get(k)) if isinstance(row, dict) else getattr
    begin, end, seconds = get(row, "started"), get(row, "ended"), get(row, "seconds") or 0.0
    if begin is None or end is None:
        return seconds
    inside = 0.0
    for other in rows:
        o_begin, o_end = get(other, "started"), get(other, "ended")
        if other is row or not is_start_up(get(other, "stage") or "") or o_begin is None or o_end is None:
            continue
        inside += max(0.0, (min(end, o_end) - max(begin, o_begin)).total_seconds())
    return max(0.0, seconds - inside)


#: Stage statuses from the worst down: a run's status, where its command recorded none, is its worst.
_WORST_FIRST = ("failed", "refused", "interrupted", "partial")


def run_status(rows: Iterable[dict]) -> str:
    """A run's status from its run-level rows (stage, status, detail): the one its command recorded
    on its ``close`` row (``detail.run_status``: the status of its exit code,
    :data:`ingest.errors.RUN_STATUS`); else the worst of its stages' (an Airflow task's rows, a run
    recorded before); a command's run (a ``start-up`` row) without a ``close`` row is "unfinished":
    still running, or stopped before it could record its end (its server gone)."""
    rows = list(rows)
    for row in rows:
        recorded = (row.get("detail") or {}).get("run_status") if row.get("stage") == "close" else None
        if recorded:
            return recorded
    stages = {row.get("stage") for row in rows}
    if "start-up" in stages and "close" not in stages:
        return "unfinished"
    found = {row.get("status") for row in rows}
    return next((s for s in _WORST_FIRST if s in found), "ok")
