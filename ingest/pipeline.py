"""The main job: the steps load → analyze → validate, with a timing row for every stage.

Words used here and everywhere else in sci-ingest:

* a **step** is one of :data:`STEPS`, what ``sci-ingest run`` chains and what
  each Airflow task runs: ``load_step`` here, ``analyze`` and ``validate`` from the plugin
  that provides them (:mod:`ingest.plugins`; ``analytics.steps`` in this project);
* an **analysis** is one declared computation over a collection
  (``analytics.registry``); the analyze step runs the chosen analyses;
* a **stage** is a timed unit of work with one row in ``stage_timings``
  (``cluster``, ``parse``, ``load``, ``index``, ``analyze.<analysis>``,
  ``validate``; see ``ingest.timing``).

``run()`` is what ``sci-ingest run`` and ``make run`` call; ``task_load``,
``task_analyze`` and ``task_validate`` are the same steps as Airflow tasks
(each one a transaction of its own, given the run id by the scheduler).
The steps of one run share one Dask cluster, started when a step first needs
it (:class:`Cluster`).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ingest.cluster import dask_client, warm_up
from ingest.config import SAMPLES_DIR, SYNTHETIC_SAMPLES, Settings
from ingest.errors import (
    RUN_STATUS,
    ConfigError,
    DiskFull,
    Exit,
    InputError,
    SciIngestError,
    ServerUnavailable,
    stopped_by,
)
from ingest.load import LoadOptions, LoadStopped, LoadSummary, indexes, load_paths
from ingest.load.run import resume_command
from ingest.plugins import step
from ingest.report import timing_table
from ingest.server.connection import Connection, database, log_to_stderr, prepare
from ingest.store.catalog import TIMINGS
from ingest.store.mongo import ping, redact
from ingest.store.retry import Retry, process_alive
from ingest.store.servers import ServerInfo
from ingest.store.space import own_disk_full
from ingest.timing import StageRecord, Timings, command_start, from_epoch, own_seconds, utcnow

if TYPE_CHECKING:
    from ingest.cluster import DaskClient

_log = logging.getLogger(__name__)

STEPS = ("load", "analyze", "validate")
#: The run report's exit codes, from the one table (:class:`ingest.errors.Exit`).
EXIT_OK, EXIT_FATAL, EXIT_PARTIAL, EXIT_INTERRUPTED = Exit.OK, Exit.FATAL, Exit.PARTIAL, Exit.INTERRUPTED
EXIT_VALIDATION = Exit.VALIDATION


def new_run_id() -> str:
    """A run id for runs started by hand (Airflow passes its own)."""
    return f"run-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def default_inputs() -> list[Path]:
    """The bundled samples, loaded when no path is given (a checkout's: an installed wheel has none)."""
    if not SAMPLES_DIR.is_dir():
        raise ConfigError("no paths given and no bundled samples here (an installed sci-ingest has none; "
                          "they are in a checkout): name the files or folders to load")
    return [SAMPLES_DIR / "pasta", SAMPLES_DIR / "materials"]


class Verdicts(Protocol):
    """The validate step's report as the run reads it (the plugin's: ``analytics.validation``'s)."""

    @property
    def verdict(self) -> str: ...

    @property
    def failed_suites(self) -> list: ...

    def raise_for_critical(self) -> None: ...


@dataclass
class RunReport:
    run_id: str
    server: ServerInfo
    uri: str
    stages: list[StageRecord] = field(default_factory=list)
    load: LoadSummary | None = None
    analysis: list = field(default_factory=list)
    validation: Verdicts | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    resume: str | None = None  # the command that goes on after an interruption
    stopped: dict | None = None  # an interruption after the load: by what, in which stage, what it undid
    exit_code: Exit = EXIT_OK

    @property
    def status(self) -> str:
        """The run's status: the word of its exit code (:data:`ingest.errors.RUN_STATUS`), the same in
        ``--json``, on its ``close`` row and in ``timings --list``."""
        if self.exit_code == EXIT_VALIDATION and self.validation is not None:  # set with the report
            return self.validation.verdict
        return RUN_STATUS[self.exit_code]

    def as_json(self) -> dict:
        load = self.load.as_dict() if self.load is not None else {}
        out = {
            "run_id": self.run_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "server": {**self.server.as_dict(), "uri": redact(self.uri)},
            "stages": [r.as_json() for r in self.stages if r.scope == "run"],
            "inserted": load.get("inserted", 0),
            "updated": load.get("updated", 0),
            "skipped": load.get("skipped", 0),
            "failed": load.get("failed", []),
            "warnings": [{"path": f["path"], "total": f.get("warnings_total", len(f["warnings"])),
                          "first": f["warnings"]} for f in load.get("files", []) if f.get("warnings")],
            "set_aside": [{"path": f["path"], "total": f["set_aside_total"], "first": f["set_aside"]}
                          for f in load.get("files", []) if f.get("set_aside_total") and f["status"] == "loaded"],
            "files": {k: load.get(k, 0) for k in ("files_loaded", "files_skipped", "files_failed",
                                                  "files_not_reached", "kept_from_last_good")},
            "load": {k: load[k] for k in ("workers", "write_concern", "retries", "dry_run", "rolled_back")
                     if k in load},
            "analysis": [_jsonable(a) for a in self.analysis],
            "validation": _validation_json(self.validation) if self.validation is not None else None,
            "notes": self.notes,
        }
        if self.error:
            out["error"] = self.error
        if self.resume:
            out["resume"] = self.resume
        if self.stopped:
            out["stopped"] = self.stopped
        return out


def _jsonable(obj) -> dict:
    data = asdict(obj) if is_dataclass(obj) and not isinstance(obj, type) else dict(obj)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}


def _validation_json(report) -> dict:
    return {
        "ok": report.ok,
        "verdict": report.verdict,
        "failed_suites": len(report.failed_suites),
        "rows_checked": report.rows_checked,
        "suites": [
            {"suite": s.suite, "collection": s.collection, "rows": s.rows, "status": s.status,
             "success": s.success, "failed": s.failed,
             "failures": s.failures, **({"verdict_of": s.reused_from} if s.reused_from else {}),
             **({"rows_new": s.rows_new} if s.rows_new is not None else {})}
            for s in report.suites
        ],
    }


# ------------------------------------------------------------------------ the cluster
class Cluster:
    """The run's Dask cluster: started (a timed ``cluster`` stage) when a step first needs it.

    ``settings.dask_scheduler`` names a running scheduler; otherwise a private
    ``LocalCluster`` of ``workers`` processes is started and closed with the
    stack.  Each use warms the workers up for its step's modules once (in-process, for small
    work, :func:`ingest.cluster.dask_client`: this process).
    """

    def __init__(self, settings: Settings, timings: Timings, stack: ExitStack, workers: int | None = None):
        self.settings, self.timings, self.stack, self.workers = settings, timings, stack, workers
        self._client: DaskClient | None = None
        self._in_process = False
        self._warm: set[str] = set()

    @property
    def started(self) -> bool:
        """Whether a step has started (or connected to) the cluster already."""
        return self._client is not None

    def client(self, purpose: str, uri: str | None = None, *, in_process: bool = False,
               since: dt.datetime | None = None) -> DaskClient:
        """The cluster's client, its workers warmed up for ``purpose`` (and this process's pool for ``uri``).

        ``in_process``: when the cluster starts here (no scheduler given), its one worker runs in
        this process (small work: :func:`ingest.cluster.dask_client`).  ``since``: when the step
        began deciding that (its documents counted): the row starting the cluster includes it."""
        if self._client is None:
            self._in_process = in_process and not self.settings.dask_scheduler
            with self.timings.stage("cluster", started=since) as rec:
                self._client = self.stack.enter_context(dask_client(self.settings.dask_scheduler, self.workers,
                                                                    in_process=self._in_process))
                rec.records_in = rec.records_out = None
                rec.workers = warm_up(self._client, purpose, uri, in_process=self._in_process)
                rec.detail = {"scheduler": self.settings.dask_scheduler or ("in-process" if self._in_process
                                                                            else "LocalCluster")}
            self._warm.add(purpose)
        elif purpose not in self._warm:
            with self.timings.stage(f"warm_up.{purpose}", started=since) as rec:  # imports: timed, not the step's
                rec.records_in = rec.records_out = None
                rec.workers = warm_up(self._client, purpose, uri, in_process=self._in_process)
            self._warm.add(purpose)
        return self._client


# ------------------------------------------------------------------------ steps
def load_step(conn: Connection, timings: Timings, settings: Settings, paths: Sequence[str | Path] | None,
              options=None, *, cluster: Cluster | None = None,
              log: Callable[[str], None] = log_to_stderr) -> LoadSummary:
    """Load ``paths`` (default: the bundled samples) with ``options`` (an ``ingest.load.LoadOptions``).

    Rows: ``parse`` (files read -> documents, the parsing time summed over the
    workers), ``load`` (documents -> written, wall time of the whole load, with
    the workers, MB/s, the write concern and the retries), and ``index`` (the
    analysts' indexes built after a bulk load).
    """
    options = options or LoadOptions(workers=1)
    dask = None
    if cluster is not None and (options.workers > 1 or settings.dask_scheduler):
        def dask():
            return cluster.client("load")
    bulk, dropped = False, 0  # whether the load is bulk, and the indexes dropped before it

    def on_plan(todo) -> None:
        nonlocal bulk, dropped
        if options.dry_run:
            return
        bulk = not options.keep_indexes and indexes.is_bulk(conn.db, todo, _retry(options))
        dropped = indexes.before_load(conn.db, bulk)

    started = utcnow()
    try:
        summary = load_paths(conn.uri, settings.db_name, list(paths) if paths else default_inputs(),
                             timings.run_id, options, server_kind=conn.info.kind, dask=dask, log=log,
                             on_plan=on_plan, server_pid=conn.server_pid, lineage=timings.lineage)
    except LoadStopped:
        raise  # its rows are made of what it finished (run())
    except BaseException as exc:  # refused (w=0, say) or the database failed: a load row says so, and when
        rec = timings.new("load")
        rec.started, rec.records_in, rec.records_out = started, None, None
        timings.stopped(rec, exc)
        raise
    _load_rows(timings, summary, started, utcnow())
    if not options.dry_run and not summary.interrupted:
        with timings.stage("index") as rec:
            built = indexes.after_load(conn.db)
            rec.records_in, rec.records_out = None, built
            rec.detail = {"bulk": bulk, "dropped_before": dropped if bulk else 0}
    return summary


def _retry(options):
    return Retry(options.retry_s)


def _load_rows(timings: Timings, summary, started, ended) -> None:
    """The load's rows: per run ``parse`` (from the first file's reading to the last one's
    documents built; busy: the parsing time summed over the workers) and ``load`` (the whole
    load, discovery to report; busy: the writing time summed), then the same per worker."""
    files = [f for f in summary.files if f.status != "skipped"]
    detail = {"files": len(summary.files), "loaded": summary.count("loaded"),
              "skipped": summary.count("skipped"), "failed": summary.count("failed"),
              "documents_skipped": summary.skipped_documents, "retries": summary.total_retries,
              "write_concern": summary.write_concern or "server default", "dry_run": summary.dry_run}
    status = ("interrupted" if summary.interrupted else "partial") if (
        summary.failed or summary.set_aside or summary.interrupted) else "ok"
    for rec in _share_rows(timings, files, None, started, ended, summary.workers):
        rec.detail, rec.status = detail, status
        if rec.stage == "load":  # its rates over its own time: not the cluster it started
            own = own_seconds(rec, timings.records)
            if own < rec.seconds:
                rec.detail = {**detail, "start_up_s": round(rec.seconds - own, 6)}
                rec.rates(own)
        timings.add(rec)
    by_worker: dict[str, list] = {}
    for f in files:
        by_worker.setdefault(f.worker or "-", []).append(f)
    for worker, mine in sorted(by_worker.items()):
        for rec in _share_rows(timings, mine, worker, None, None, 1):
            rec.detail = {"files": len(mine)}
            timings.add(rec)


def _share_rows(timings: Timings, files: list, worker: str | None, started, ended, workers: int) -> list:
    """``parse`` and ``load`` rows of ``files`` (a run's when ``worker`` is None, else that worker's):
    wall-clock spans from the files' own clocks where none is given, busy time summed."""
    documents = sum(f.documents for f in files)
    timed = [f for f in files if f.started and f.parsed and f.ended]  # a file without clocks has no span to give
    timed = [f for f in timed if f.worker] or timed  # the files read; else those refused unread, when they were
    first = from_epoch(min(f.started for f in timed)) if timed else started
    last_parsed = from_epoch(max(f.parsed for f in timed)) if timed else first
    last = from_epoch(max(f.ended for f in timed)) if timed else first
    rows = []
    for stage, n_in, n_out, begin, end, busy in (
            ("parse", len(files), documents, first, last_parsed, sum(f.parse_seconds for f in files)),
            ("load", documents, sum(f.inserted + f.updated for f in files), started or first, ended or last,
             sum(f.load_seconds for f in files))):
        rec = timings.new(stage)
        rec.worker, rec.scope = worker, "worker" if worker else "run"
        rec.started = begin or utcnow()
        rec.records_in, rec.records_out = n_in, n_out
        rec.bytes = sum(f.size for f in files)
        rec.workers = workers
        rec.busy_seconds = busy
        rec.finish(end or rec.started)
        rows.append(rec)
    return rows


# --------------------------------------------------------------------- the run
def run(settings: Settings, paths: Sequence[str | Path] | None = None, *, steps: Sequence[str] = STEPS,
        analyses: Sequence[str] | None = None, load_options=None, force: bool = False,
        run_id: str | None = None, log: Callable[[str], None] = log_to_stderr,
        incremental: bool = False) -> RunReport:
    """Run ``steps`` (default: all) on the configured database.

    ``analyses`` chooses the analyses; ``load_options`` (``ingest.load.LoadOptions``)
    the load's workers, write concern, retries, ...; ``force`` reloads known files;
    ``incremental``: analyses read only what changed where they can, and suites nothing of which
    changed keep their verdicts.
    """
    entered = utcnow()
    run_id = run_id or new_run_id()
    options = load_options or LoadOptions()
    if force and not options.force:
        options = replace(options, force=True)
    with database(settings, log=log) as conn:
        report = RunReport(run_id=run_id, server=conn.info, uri=conn.uri)
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS])
        report.stages = timings.records
        stopped = None
        _start_up_row(timings, entered)
        try:
            with ExitStack() as stack:  # the cluster closes here, before a rollback after Ctrl-C
                cluster = Cluster(settings, timings, stack, options.workers)
                with timings.stage("connect") as rec:  # the server found and asked, the loader's indexes checked
                    rec.started, rec.records_in, rec.records_out = entered, None, None
                    rec.detail = {"server": conn.info.kind}
                    report.notes = prepare(conn, query_indexes="load" not in steps)
                if "load" in steps:
                    report.load = load_step(conn, timings, settings, paths, options, cluster=cluster, log=log)
                    if report.load.failed or report.load.set_aside:  # files failed, or values set aside
                        report.exit_code = EXIT_PARTIAL
                if "analyze" in steps:
                    report.analysis = step("analyze")(conn, timings, settings, analyses, cluster=cluster,
                                                      incremental=incremental, log=log)
                if "validate" in steps:
                    report.validation = step("validate")(conn, timings, settings, cluster=cluster,
                                                         incremental=incremental, log=log)
                    report.validation.raise_for_critical()
                    if report.validation.failed_suites:  # what analysts read is not right: not green
                        report.exit_code = EXIT_VALIDATION
        except LoadStopped as exc:
            stopped = exc
        except SciIngestError as exc:  # a name or value found wrong once the run began (64), any other (1): the class says
            full = own_disk_full(exc, settings.out_dir, settings.state_dir)  # the server's disk, or ours (Parquet)
            report.error = str(full or exc)  # its message names what failed and why: no class name
            report.exit_code = exc.exit_code
        except KeyboardInterrupt as exc:  # Ctrl-C (SIGTERM) outside a load: what was finished, undone, how to go on
            _interrupted(report, timings, exc)
        except BaseException:  # a defect: the run's end recorded, then on
            _close_row(timings, RUN_STATUS[Exit.FATAL], Exit.FATAL)
            raise
        gone = False
        if stopped is not None:
            # a full disk cannot take a rollback either: the next run finishes it, once there is room
            gone = isinstance(stopped.cause, DiskFull) or (conn.server_pid is not None
                                                           and not process_alive(conn.server_pid))
            if not gone and (stopped.interrupted or isinstance(stopped.cause, ServerUnavailable)):
                gone = ping(conn.uri) is None  # its retry window is spent, or stopped: none for the rollback
            if not gone:  # a server that exited or does not answer cannot be asked: the next run finishes it
                stopped.roll_back()
            report.load, report.resume = stopped.summary, stopped.resume
            if stopped.interrupted:
                report.error, report.exit_code = f"interrupted ({stopped.by})", EXIT_INTERRUPTED
            elif isinstance(stopped.cause, DiskFull):  # one line: where, and what to do
                report.error, report.exit_code = str(stopped.cause), EXIT_FATAL
            else:
                report.error, report.exit_code = str(stopped.cause), EXIT_FATAL
            if not gone:
                try:
                    _load_rows(timings, stopped.summary, None, None)  # the files' own clocks span it
                except SciIngestError:
                    pass  # the server is gone: the report still says what was done
        report.notes += synthetic_note(report.load)
        if not gone:
            _close_row(timings, report.status, report.exit_code)
        return report


#: What a stage stopped half-way leaves, for the report of an interrupted run (none: it changes nothing).
_UNDONE = {"analyze": "its output is replaced whole or not at all: the next run computes it again unless it "
                      "was published already (the output from before stands until then)",
           "validate": "the verdicts it had not recorded yet are checked again by the next run",
           "index": "the indexes it had not built yet are built by the next run",
           "load": "what it began is finished or rolled back by the next run (the ledger knows it)"}


def _interrupted(report: RunReport, timings: Timings, exc: KeyboardInterrupt) -> None:
    """``report`` of a run stopped by Ctrl-C or SIGTERM after its load: the stages finished (their rows,
    the analyses published), the one stopped and what it undid, the command that goes on."""
    report.error, report.exit_code = f"interrupted ({stopped_by(exc)})", EXIT_INTERRUPTED
    report.resume = resume_command()
    rows = [r for r in timings.records if r.scope == "run"]
    if not report.analysis:  # the step returns its results at its end: the ones published are in their rows
        report.analysis = [{"name": r.stage.partition(".")[2], "records_in": r.records_in,
                            "records_out": r.records_out, "collection": r.detail.get("collection"),
                            "parquet_path": r.detail.get("parquet"), "scope": r.detail.get("scope") or {}}
                           for r in rows if r.stage.startswith("analyze.") and r.status == "ok"]
    stage = next((r.stage for r in reversed(rows) if r.status == "interrupted"), None)
    step = (stage or "").partition(".")[0]
    report.stopped = {"by": stopped_by(exc), "stage": stage,
                      "undone": _UNDONE.get(step, "nothing of it needs undoing") if stage else "nothing was in flight"}


def synthetic_note(summary) -> list[str]:
    """A note when the load read the bundled synthetic samples (:data:`ingest.config.SYNTHETIC_SAMPLES`,
    by sha256: loaded now or before), which say "synthetic samples" plainly; else none."""
    names = sorted({SYNTHETIC_SAMPLES[f.sha256] for f in getattr(summary, "files", ())
                    if f.sha256 in SYNTHETIC_SAMPLES})
    if not names:
        return []
    return [f"synthetic samples: {', '.join(names)} are generated data (samples/materials/README.md), not real "
            "Materials Project records: what is analysed and validated of them describes made-up materials"]


def _start_up_row(timings: Timings, entered) -> None:
    """``start-up``: from the command's start (its process's, or its caller's for a kept process,
    :mod:`ingest.cli.kept`) to the run's: the interpreter, the imports, the options read.  Only
    for a command: an Airflow task's process began long before its run."""
    began, kept = command_start()
    if began is None:
        return
    rec = timings.new("start-up")
    rec.started, rec.records_in, rec.records_out = began, None, None
    rec.detail = {"process": "forked by a kept process" if kept else "its own"}
    rec.finish(entered)
    timings.add(rec)


def _close_row(timings: Timings, status: str, exit_code: int) -> None:
    """``close``: from the end of the run's last stage to now: the cluster shut down, the steps'
    resources let go (a rollback after a stop too).  It records the run's end: ``detail.run_status``
    and ``detail.exit_code``, what the command exits with (:func:`ingest.timing.run_status` reads
    them).  Not written when the server no longer answers (the report says why)."""
    ends = [r.ended for r in timings.records if r.scope == "run" and r.ended is not None]
    if not ends:
        return
    rec = timings.new("close")
    rec.started, rec.records_in, rec.records_out = max(ends), None, None
    rec.detail = {"run_status": status, "exit_code": int(exit_code)}
    try:
        rec.finish()
        timings.add(rec)
    except SciIngestError:
        pass


# ------------------------------------------------------------------ Airflow tasks
def _task_settings(mongo_uri: str | None) -> Settings:
    return Settings.from_env(mongo_uri=mongo_uri, progress=False)


def _log_stage_table(timings: Timings) -> None:
    """The task log ends with the stage table of what the task did."""
    rows = [r.as_json() for r in timings.records if r.scope == "run"]  # the rows `sci-ingest timings` shows
    if rows:
        log_to_stderr("stage timings of this task:\n" + timing_table(rows))


def task_load(run_id: str, paths: list[str] | None = None, mongo_uri: str | None = None,
              lineage: dict | None = None) -> dict:
    """Airflow task: load ``paths`` (default: the bundled samples). Raises if every file failed."""
    return _task_load(run_id, paths, mongo_uri, lineage)[0]


def task_load_landing(run_id: str, day: str, mongo_uri: str | None = None, lineage: dict | None = None) -> dict:
    """Airflow task: load the landing folder of ``day`` (``YYYY-MM-DD``): ``<landing>/<day>/``.

    A day whose folder does not exist loaded nothing (no error: nothing landed).  Files
    already loaded are skipped by the ledger (their sha256), so running a day again loads
    nothing new.  ``changed``: the collections that got documents written, for the DAG's
    Assets.
    """
    if not _DAY.fullmatch(day or ""):
        raise ConfigError(f"a landing day is YYYY-MM-DD, not {day!r}")
    folder = _task_settings(mongo_uri).landing_dir / day
    if not folder.is_dir():
        log_to_stderr(f"nothing landed for {day}: {folder} does not exist")
        return {"run_id": run_id, "day": day, "folder": str(folder), "files": 0, "changed": []}
    result, summary = _task_load(run_id, [str(folder)], mongo_uri, lineage)
    changed = _changed(summary)
    log_to_stderr(f"{day}: {summary.count('loaded')} file(s) loaded, {summary.count('skipped')} already loaded, "
                  f"{summary.count('failed')} failed; collections written: {', '.join(changed) or 'none'}")
    return {**result, "day": day, "folder": str(folder), "changed": changed}


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def task_load_batch(run_id: str, batch: list[str], force: bool = False, mongo_uri: str | None = None,
                    lineage: dict | None = None) -> dict:
    """Airflow task: load one batch of files of a manual backfill (``force``: load them again
    even if the ledger has them); ``changed``: the collections that got documents written."""
    result, summary = _task_load(run_id, batch, mongo_uri, lineage, force=force)
    return {**result, "changed": _changed(summary)}


def _changed(summary) -> list[str]:
    return sorted({coll for f in summary.files if f.status == "loaded" and f.inserted + f.updated > 0
                   for coll, n in f.records.items() if n})  # fmt: skip


def _task_load(run_id: str, paths, mongo_uri: str | None, lineage: dict | None, force: bool = False):
    """(the task's result, the load summary); it loads in the task's own process, unless
    ``DASK_SCHEDULER_ADDRESS`` names a cluster to spread the files over."""
    settings = _task_settings(mongo_uri)
    with database(settings) as conn, ExitStack() as stack:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS], lineage)
        stack.callback(_log_stage_table, timings)
        prepare(conn)
        cluster = Cluster(settings, timings, stack) if settings.dask_scheduler else None
        summary = load_step(conn, timings, settings, paths, LoadOptions(workers=1, progress=False, force=force),
                            cluster=cluster)
    result = {"run_id": run_id, **summary.as_dict()}
    result.pop("files")
    loaded = [f for f in summary.files if f.status == "loaded"]
    # what an Asset event of the landing says (ingest.airflow.support.landing_event_extra)
    result["documents"] = {coll: sum(f.records.get(coll, 0) for f in loaded) for coll in _changed(summary)}
    result["warnings"] = sum(f.warnings_total for f in loaded)
    if summary.files and summary.count("failed") == len(summary.files):
        raise InputError(f"every input failed: {result['failed'][:3]}")
    return result, summary


def task_analyze(run_id: str, mongo_uri: str | None = None, lineage: dict | None = None,
                 incremental: bool = False) -> dict:
    """Airflow task: every analysis (``incremental``: only what changed where it can, saying which)."""
    settings = _task_settings(mongo_uri)
    with database(settings) as conn:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS], lineage)
        try:
            results = step("analyze")(conn, timings, settings, incremental=incremental)
        finally:
            _log_stage_table(timings)
    return {"run_id": run_id, "analyses": [_jsonable(r) for r in results]}


def task_validate(run_id: str, mongo_uri: str | None = None, lineage: dict | None = None,
                  incremental: bool = False, on_failure: str = "fail") -> dict:
    """Airflow task: every suite (``incremental``: a suite nothing of which changed keeps its verdict).
    A failed critical expectation fails the task; so does one of severity ``error`` unless
    ``on_failure`` is ``warn`` (then the task log says so and the task succeeds)."""
    if on_failure not in ("fail", "warn"):
        raise ConfigError(f"on_failure must be 'fail' or 'warn', not {on_failure!r}")
    settings = _task_settings(mongo_uri)
    with database(settings) as conn:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS], lineage)
        try:
            report = step("validate")(conn, timings, settings, incremental=incremental)
        finally:
            _log_stage_table(timings)
    _log.info("validation %s: %s", run_id, report.summary())
    report.raise_for_critical()
    if on_failure == "warn":
        if report.failed_suites:
            _log.warning("validation %s: %s; the DAG is set to warn (on_failure='warn'), so the task goes on",
                        run_id, report.verdict)
    else:
        report.raise_for_failed()
    return {"run_id": run_id, **_validation_json(report)}
