"""The main job: the steps load → analyze → validate, with a timing row for every stage.

Words used here and everywhere else in sci-ingest:

* a **step** is one of :data:`STEPS`, what ``sci-ingest run`` chains and what
  each Airflow task runs (``load_step``, ``analyze_step``, ``validate_step``);
* an **analysis** is one declared computation over a collection
  (``analytics.registry``); the analyze step runs the chosen analyses;
* a **stage** is a timed unit of work with one row in ``stage_timings``
  (``parse``, ``load``, ``analyze.cluster``, ``analyze.<analysis>``,
  ``validate``; see ``ingest.timing``).

``run()`` is what ``sci-ingest run`` and ``make run`` call; ``task_load``,
``task_analyze`` and ``task_validate`` are the same steps as Airflow tasks
(each one a transaction of its own, given the run id by the scheduler).
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ingest.config import SAMPLES_DIR, Settings
from ingest.errors import InputError, SciIngestError, UnsupportedFeature, ValidationFailed
from ingest.catalog import TIMINGS
from ingest.mongo import ServerInfo, connect, describe, ensure_hashed_indexes, ensure_indexes, redact
from ingest.timing import StageRecord, Timings

STEPS = ("load", "analyze", "validate")
EXIT_OK, EXIT_FATAL, EXIT_PARTIAL = 0, 1, 2


def new_run_id() -> str:
    """A run id for runs started by hand (Airflow passes its own)."""
    return f"run-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def default_inputs() -> list[Path]:
    return [SAMPLES_DIR / "pasta", SAMPLES_DIR / "materials"]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Connection:
    uri: str
    client: object
    db: object
    info: ServerInfo
    embedded: str | None  # None | "private" | "shared"


@contextmanager
def database(settings: Settings, log: Callable[[str], None] = _stderr) -> Iterator[Connection]:
    """Connect to the configured MongoDB, or to the embedded server (started if needed)."""
    server = None
    embedded = None
    uri = settings.mongo_uri
    if not uri:
        from ingest.server import EmbeddedServer, running_server

        shared = running_server(settings.state_dir)
        if shared:
            uri, embedded = shared["uri"], "shared"
        else:
            server = EmbeddedServer(settings.db_dir)
            log(f"starting the embedded SecantusDB server (data in {settings.db_dir}) ...")
            uri, embedded = server.start(), "private"
    client = None
    try:
        client = connect(uri)
        info = describe(client)
        yield Connection(uri=uri, client=client, db=client[settings.db_name], info=info, embedded=embedded)
    finally:
        if client is not None:
            client.close()
        if server is not None:
            server.stop()


def prepare(conn: Connection, log: Callable[[str], None] = _stderr) -> list[str]:
    """Indexes, and hashed shard-key indexes where the server supports them; returns notes."""
    ensure_indexes(conn.db)
    notes = []
    try:
        done = ensure_hashed_indexes(conn.db)
        notes.append("hashed shard-key indexes: " + ", ".join(f"{c} ({o})" for c, o in done.items()))
    except UnsupportedFeature as exc:
        notes.append(str(exc))
    if not conn.info.sharding:
        notes.append(f"not sharded: {conn.info.topology} (use `sci-ingest shard` against mongos to shard)")
    return notes


@dataclass
class RunReport:
    run_id: str
    server: ServerInfo
    uri: str
    stages: list[StageRecord] = field(default_factory=list)
    load: object | None = None  # LoadSummary
    analysis: list = field(default_factory=list)
    validation: object | None = None  # ValidationReport
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    exit_code: int = EXIT_OK

    def as_json(self) -> dict:
        load = self.load.as_dict() if self.load is not None else {}
        out = {
            "run_id": self.run_id,
            "status": {EXIT_OK: "ok", EXIT_PARTIAL: "partial", EXIT_FATAL: "failed"}[self.exit_code],
            "exit_code": self.exit_code,
            "server": {**self.server.as_dict(), "uri": redact(self.uri)},
            "stages": [r.as_json() for r in self.stages if r.file is None],
            "inserted": load.get("inserted", 0),
            "updated": load.get("updated", 0),
            "skipped": load.get("skipped", 0),
            "failed": load.get("failed", []),
            "files": {k: load.get(k, 0) for k in ("files_loaded", "files_skipped", "files_failed")},
            "analysis": [_jsonable(a) for a in self.analysis],
            "validation": _validation_json(self.validation),
            "notes": self.notes,
        }
        if self.error:
            out["error"] = self.error
        return out


def _jsonable(obj) -> dict:
    from dataclasses import asdict, is_dataclass

    data = asdict(obj) if is_dataclass(obj) else dict(obj)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}


def _validation_json(report) -> dict | None:
    if report is None:
        return None
    return {
        "ok": report.ok,
        "rows_checked": report.rows_checked,
        "suites": [
            {"suite": s.suite, "collection": s.collection, "rows": s.rows, "success": s.success,
             "failures": s.failures}
            for s in report.suites
        ],
    }


# ------------------------------------------------------------------------ steps
def load_step(conn: Connection, timings: Timings, settings: Settings, paths: Sequence[str | Path] | None,
              *, force: bool = False, log: Callable[[str], None] = _stderr):
    from ingest.loader import Loader

    loader = Loader(conn.db, timings.run_id, timings, batch_size=settings.batch_size, force=force,
                    progress=settings.progress, log=log)
    started = time.perf_counter()
    summary = loader.load(list(paths) if paths else default_inputs())
    wall = time.perf_counter() - started
    files = [f for f in summary.files if f.status != "skipped"]
    documents = sum(f.documents for f in files)
    parse_seconds = sum(f.parse_seconds for f in files)
    rows = {
        # parse: files read -> documents produced (time inside the parsers);
        # load: documents -> documents written (everything else: ledger checks, hashing, writes)
        "parse": (len(files), documents, parse_seconds),
        "load": (documents, summary.inserted + summary.updated, max(0.0, wall - parse_seconds)),
    }
    for stage, (n_in, n_out, seconds) in rows.items():
        rec = timings.new(stage)
        rec.records_in, rec.records_out = n_in, n_out
        rec.bytes = sum(f.size for f in files)
        rec.detail = {"files": len(summary.files), "loaded": summary.count("loaded"),
                      "skipped": summary.count("skipped"), "failed": summary.count("failed"),
                      "documents_skipped": summary.skipped_documents}
        if summary.failed:
            rec.status = "partial"
        rec.finish(seconds)
        timings.add(rec)
    return summary


def analyze_step(conn: Connection, timings: Timings, settings: Settings, names: Sequence[str] | None = None):
    """Run the named analyses (default: all) on one Dask cluster, one timed stage each."""
    from analytics.cluster import dask_client, warm_up
    from analytics.registry import select_analyses
    from analytics.runner import run_analysis

    chosen = select_analyses(names)
    results = []
    with ExitStack() as stack:
        with timings.stage("analyze.cluster") as rec:  # start (or reach) the cluster, warm its workers
            client = stack.enter_context(dask_client(settings.dask_scheduler))
            rec.records_in = rec.records_out = None
            rec.detail = {"scheduler": settings.dask_scheduler or "LocalCluster", "workers": warm_up(client)}
        for analysis in chosen:
            with timings.stage(f"analyze.{analysis.name}") as rec:
                result = run_analysis(analysis, client, conn.uri, settings.db_name, timings.run_id,
                                      settings.out_dir)
                rec.records_in, rec.records_out = result.records_in, result.records_out
                rec.detail = {"partitions": result.partitions, "collection": result.collection,
                              "parquet": str(result.parquet_path), "excluded": result.excluded}
                results.append(result)
    return results


def validate_step(conn: Connection, timings: Timings, settings: Settings):
    from analytics.validation import validate

    with timings.stage("validate") as rec:
        report = validate(conn.uri, settings.db_name, timings.run_id)
        rec.records_in = report.rows_checked
        rec.records_out = sum(1 for s in report.suites if s.success)
        rec.detail = {"suites": len(report.suites), "ok": report.ok}
        if not report.ok:
            rec.status = "failed"
            rec.error = "critical expectation failed"
    return report


# --------------------------------------------------------------------- the run
def run(settings: Settings, paths: Sequence[str | Path] | None = None, *, steps: Sequence[str] = STEPS,
        analyses: Sequence[str] | None = None, force: bool = False, run_id: str | None = None,
        log: Callable[[str], None] = _stderr) -> RunReport:
    """Run ``steps`` (default: all) on the configured database; ``analyses`` chooses the analyses."""
    run_id = run_id or new_run_id()
    with database(settings, log=log) as conn:
        report = RunReport(run_id=run_id, server=conn.info, uri=conn.uri)
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS])
        report.stages = timings.records
        try:
            report.notes = prepare(conn, log=log)
            if "load" in steps:
                report.load = load_step(conn, timings, settings, paths, force=force, log=log)
                if report.load.failed:
                    report.exit_code = EXIT_PARTIAL
            if "analyze" in steps:
                report.analysis = analyze_step(conn, timings, settings, analyses)
            if "validate" in steps:
                report.validation = validate_step(conn, timings, settings)
                report.validation.raise_for_critical()
        except ValidationFailed as exc:
            report.error = str(exc)
            report.exit_code = EXIT_FATAL
        except SciIngestError as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            report.exit_code = EXIT_FATAL
        return report


# ------------------------------------------------------------------ Airflow tasks
def _task_settings(mongo_uri: str | None) -> Settings:
    return Settings.from_env(mongo_uri=mongo_uri, progress=False)


def task_load(run_id: str, paths: list[str] | None = None, mongo_uri: str | None = None) -> dict:
    """Airflow task: load ``paths`` (default: the bundled samples). Raises if every file failed."""
    settings = _task_settings(mongo_uri)
    with database(settings) as conn:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS])
        prepare(conn)
        summary = load_step(conn, timings, settings, paths)
    result = {"run_id": run_id, **summary.as_dict()}
    result.pop("files")
    if summary.files and summary.count("failed") == len(summary.files):
        raise InputError(f"every input failed: {result['failed'][:3]}")
    return result


def task_analyze(run_id: str, mongo_uri: str | None = None) -> dict:
    settings = _task_settings(mongo_uri)
    with database(settings) as conn:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS])
        results = analyze_step(conn, timings, settings)
    return {"run_id": run_id, "analyses": [_jsonable(r) for r in results]}


def task_validate(run_id: str, mongo_uri: str | None = None) -> dict:
    settings = _task_settings(mongo_uri)
    with database(settings) as conn:
        timings = Timings(run_id, conn.info.kind, conn.db[TIMINGS])
        report = validate_step(conn, timings, settings)
    report.raise_for_critical()
    return {"run_id": run_id, **_validation_json(report)}
