"""Thin glue between Airflow and the sci-ingest pipeline.

Everything Airflow-specific that the DAG files need lives here so the DAGs stay
declarations.  Airflow (and pymongo, through the Mongo provider) is imported
lazily inside the functions: importing this module costs nothing and works
without Airflow installed.

* :func:`resolve_mongo_uri` -- where MongoDB is: ``MONGODB_URI`` first, then
  the Airflow connection ``mongo_default`` (only when running under Airflow,
  unless asked), else ``None`` (the pipeline then starts or reuses the
  embedded server) -- or, with the Variable ``sci_ingest_no_embedded``
  on, a failure at once naming what to configure.
* :func:`uri_from_connection` -- a MongoDB URI from an Airflow connection,
  built the way :class:`airflow.providers.mongo.hooks.mongo.MongoHook` builds
  its client (its ``uri`` plus the connection extras, which the hook passes to
  ``MongoClient`` as keyword options and which we carry as URI options).
* :func:`run_task` -- call a pipeline step's task function and turn deterministic failures
  (bad input, bad config, failed validation) into ``AirflowFailException`` so
  Airflow does not retry what cannot succeed on a retry; transient errors
  (server, database) propagate unchanged and are retried.
* :func:`paths_param` -- the ``paths`` DAG param normalised to ``list[str] | None``.
* :func:`announce_landing`, :func:`landing_event_extra` -- a landing run's Asset event and what it
  carries; :func:`log_trigger` -- what a curated run reacts to, said in its log.
* :func:`curated_schedule` -- the curated DAG's Assets or its daily catch-up (Airflow issue #56050);
  :func:`wait_while_held` -- the Variable ``sci_ingest_curated_hold`` holding a curated run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from functools import reduce
from operator import or_
from typing import Any
from urllib.parse import urlencode

from ingest.config import NO_DATABASE, begin_command, parse_flag, setting
from ingest.errors import ConfigError, InputError, ValidationFailed

MONGODB_URI_ENV = "MONGODB_URI"
DEFAULT_CONN_ID = "mongo_default"
#: The Airflow Variable that forbids the embedded server to every task (true/false; also
#: ``SCI_INGEST_NO_EMBEDDED=1`` in the workers' environment).
NO_EMBEDDED_VARIABLE = "sci_ingest_no_embedded"

# Errors a retry cannot fix: the same input / config / data fails the same way.
DETERMINISTIC_ERRORS: tuple[type[Exception], ...] = (ConfigError, InputError, ValidationFailed)


def _option_value(value: Any) -> str:
    """A connection-extra value as a URI option value (JSON booleans -> true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def uri_from_connection(conn_id: str = DEFAULT_CONN_ID) -> str | None:
    """The MongoDB URI of Airflow connection ``conn_id``; None if it is not defined.

    Uses the Mongo provider's ``MongoHook``: it validates the connection
    (``conn_type`` must be ``mongo``; an SRV connection must not set a port) and
    builds ``mongodb[+srv]://[login:password@]host[:port][/schema]``.  The hook
    hands the remaining connection extras to ``MongoClient`` as keyword options
    (e.g. ``directConnection``, ``replicaSet``, ``tls``, ``authSource``); here
    they become URI options so the result is one self-contained string.  The
    hook's ``allow_insecure`` extra becomes ``tlsAllowInvalidCertificates=true``
    when TLS is on, exactly as the hook does.

    Raises :class:`ConfigError` if the connection exists but is unusable, or if
    Airflow / its Mongo provider is not installed.
    """
    try:
        from airflow.exceptions import AirflowConfigException  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s
        from airflow.providers.mongo.hooks.mongo import MongoHook  # noqa: PLC0415 - lazy: the DAG parse reads this module; the hook (pymongo) costs 0.1 s more
        from airflow.sdk.exceptions import AirflowNotFoundException  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s
    except ImportError as exc:
        raise ConfigError(
            f"cannot read Airflow connection {conn_id!r}: apache-airflow with "
            f"apache-airflow-providers-mongo is not installed ({exc})"
        ) from exc

    try:
        hook = MongoHook(mongo_conn_id=conn_id)
    except AirflowNotFoundException:
        return None
    except AirflowConfigException as exc:
        raise ConfigError(f"Airflow connection {conn_id!r} is not a usable MongoDB connection: {exc}") from exc

    if not hook.connection.host:
        raise ConfigError(f"Airflow connection {conn_id!r} has no host")
    # hook.extras: the connection extras after the hook removed its own keys
    # ("srv" is consumed by the URI scheme; "allow_insecure" is translated).
    options = {key: _option_value(value) for key, value in hook.extras.items() if value is not None}
    if hook.ssl_enabled and "ssl" not in options and "tls" not in options:
        # The hook drops "ssl" from its options when allow_insecure is set; TLS stays on.
        options["tls"] = "true"
    if hook.allow_insecure:
        options["tlsAllowInvalidCertificates"] = "true"
    uri = hook.uri
    if options:
        # MongoHook's URI has no query; a bare host needs the "/" before "?".
        sep = "?" if hook.connection.schema else "/?"
        uri = f"{uri}{sep}{urlencode(options)}"
    return uri


def resolve_mongo_uri(conn_id: str = DEFAULT_CONN_ID, *, use_airflow: bool | None = None) -> str | None:
    """Where the pipeline's MongoDB is.

    1. ``MONGODB_URI`` environment variable (non-empty) -- returned as is;
    2. the Airflow connection ``conn_id`` (default ``mongo_default``; define it
       in the UI/CLI or as ``AIRFLOW_CONN_MONGO_DEFAULT='mongo://host:27017/?directConnection=true'``
       -- note the connection type is ``mongo``, not ``mongodb``), if defined;
    3. ``None``: no external database configured -- the pipeline starts or
       reuses the embedded server; unless the Variable ``sci_ingest_no_embedded``
       is on: then the task fails at once (no retries) naming what to configure.

    ``use_airflow``: whether to consult Airflow at step 2.  ``None`` (default)
    means "when running under Airflow", i.e. when Airflow is already imported
    (always the case inside a task); a plain ``sci-ingest`` run then never pays
    Airflow's multi-second import nor creates ``$AIRFLOW_HOME``.  ``True``
    imports Airflow if it is installed; ``False`` skips step 2.
    """
    env = os.environ.get(MONGODB_URI_ENV, "").strip()
    if env:
        return env
    if use_airflow is None:
        use_airflow = "airflow" in sys.modules
    if not use_airflow:
        return None
    try:
        import airflow  # noqa: PLC0415,F401 - lazy: only to learn whether Airflow is installed; it costs 1.9 s
    except ImportError:
        return None
    with failing_at_once():  # a connection that cannot work, or none where one is required: no retries
        uri = uri_from_connection(conn_id)
        if uri is None and _no_embedded_variable():
            raise ConfigError(NO_DATABASE)
    return uri


def _no_embedded_variable() -> bool:
    """Whether the Airflow Variable ``sci_ingest_no_embedded`` (or ``AIRFLOW_VAR_SCI_INGEST_NO_EMBEDDED``)
    is on: a deployment's way to forbid the embedded server to every task."""
    from airflow.sdk import Variable  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

    return parse_flag(Variable.get(NO_EMBEDDED_VARIABLE, default="") or "", f"the Airflow Variable {NO_EMBEDDED_VARIABLE}")


def paths_param(params: Mapping[str, Any] | None) -> list[str] | None:
    """The ``paths`` DAG param as a list of strings, or None for "the bundled samples".

    Accepts a list (the declared type) or, for convenience from the CLI/UI, a
    single string with one path per line or comma-separated.
    """
    raw = (params or {}).get("paths")
    if raw is None or raw == "" or raw == []:
        return None
    if isinstance(raw, str):
        items = [p.strip() for chunk in raw.splitlines() for p in chunk.split(",")]
    elif isinstance(raw, (list, tuple)):
        items = [str(p).strip() for p in raw]
    else:
        raise ConfigError(f"param 'paths' must be a list of paths, got {type(raw).__name__}")
    items = [p for p in items if p]
    return items or None


def task_defaults(**overrides: Any) -> dict:
    """The ``default_args`` of the project's DAGs: transient failures retried with backoff, a
    task bounded in time (deterministic failures never retry: :func:`run_task`)."""
    return {"owner": "sci-ingest", "retries": 2, "retry_delay": timedelta(minutes=1),
            "retry_exponential_backoff": True, "execution_timeout": timedelta(hours=2), **overrides}


#: The collections the scheduled ingestion declares as Airflow Assets (the curated DAG runs on them).
ASSET_COLLECTIONS = ("searches", "hits", "materials", "tasks")


def collection_asset(collection: str, db_name: str | None = None):
    """The Airflow Asset of a data collection: ``sci-ingest://<db>/<collection>``."""
    from airflow.sdk import Asset  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

    db = db_name or setting("SCI_INGEST_DB")
    return Asset(name=f"{db}.{collection}", uri=f"sci-ingest://{db}/{collection}", group="sci-ingest")


def data_day(context: Mapping[str, Any]) -> str:
    """``YYYY-MM-DD`` of the run's data: its data interval's start (a scheduled run, a
    backfill, a manual run given a logical date), else the day it was triggered for."""
    moment = context.get("data_interval_start") or context.get("logical_date")
    if moment is None:
        moment = context["dag_run"].run_after
    return moment.strftime("%Y-%m-%d")


#: What an Asset event of the landing DAG carries (its ``extra``): :func:`landing_event_extra`.
EVENT_FIELDS = ("run_id", "day", "collection", "documents", "files_loaded", "files_skipped", "files_failed",
                "set_aside", "warnings", "load_checks")


def landing_event_extra(result: Mapping[str, Any], collection: str) -> dict:
    """The ``extra`` of the Asset event a landing run emits for ``collection``: JSON only.

    ``result`` is what :func:`ingest.pipeline.task_load_landing` returned.  ``documents``: the
    documents the files loaded by this run hold in ``collection``; ``files_*``, ``set_aside`` and
    ``warnings`` are the whole load's.  The landing DAG does not validate (the curated DAG's
    ``validate`` does): ``load_checks`` is the loader's own verdict, ``clean`` when no file failed
    and no value was set aside, else ``partial`` - never a validation verdict it does not have.
    """
    failed, set_aside = int(result.get("files_failed") or 0), int(result.get("set_aside") or 0)
    extra = {"run_id": str(result.get("run_id") or ""), "day": str(result.get("day") or ""), "collection": collection,
             "documents": int((result.get("documents") or {}).get(collection, 0)),
             "files_loaded": int(result.get("files_loaded") or 0), "files_skipped": int(result.get("files_skipped") or 0),
             "files_failed": failed, "set_aside": set_aside, "warnings": int(result.get("warnings") or 0),
             "load_checks": "clean" if failed == 0 and set_aside == 0 else "partial"}  # fmt: skip
    return extra


def backfill_result(results: Sequence[Mapping[str, Any] | None], planned: int) -> dict:
    """The batches of a ``sci_ingest_backfill`` run as one load's result, for :func:`landing_event_extra`:
    the counts summed; ``day`` empty (a backfill loads given paths, not a day's folder).  Of the
    ``planned`` batches, one whose task failed has no result (the announce tasks run when all are
    done): it counts in ``files_failed`` as one file at least, so that the event never says ``clean``."""
    done = [r for r in results if r]
    merged: dict[str, Any] = {
        "run_id": next((str(r["run_id"]) for r in done if r.get("run_id")), ""), "day": "",
        "changed": sorted({c for r in done for c in r.get("changed", [])}), "documents": {}}
    for key in ("files_loaded", "files_skipped", "files_failed", "set_aside", "warnings"):
        merged[key] = sum(int(r.get(key) or 0) for r in done)
    merged["files_failed"] += max(0, planned - len(done))
    for r in done:
        for coll, n in (r.get("documents") or {}).items():
            merged["documents"][coll] = merged["documents"].get(coll, 0) + int(n)
    return merged


def announce_landing(context: Mapping[str, Any], collection: str, result: Mapping[str, Any]) -> dict:
    """A landing run's announce task: skipped (no Asset event) unless the load wrote into
    ``collection``; else its Asset event carries :func:`landing_event_extra` (returned too).

    No partition key: on Airflow 3.3.2 an event with one queues only partition-aware Dags
    (``AssetManager._queue_dagruns``), so ``sci_ingest_curated`` would never run on it; the day is
    in the extra instead (docs/airflow.md, "What an Asset event carries")."""
    from airflow.sdk.exceptions import AirflowSkipException  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

    if collection not in result.get("changed", []):
        raise AirflowSkipException(f"no {collection} documents written" + (f" on {result['day']}" if result.get("day")
                                                                         else " by any batch"))
    extra = landing_event_extra(result, collection)
    context["outlet_events"][collection_asset(collection)].extra = extra
    print(f"announcing {collection_asset(collection).name}: {event_summary(extra)}", file=sys.stderr, flush=True)
    return extra


#: The Airflow Variable that holds the curated runs after their analyses, before they validate (true/false):
#: an operator's window to look at fresh analyses before the verdicts, and the scheduler test's way to keep
#: a run active while events arrive (docs/airflow.md).
CURATED_HOLD_VARIABLE = "sci_ingest_curated_hold"


def wait_while_held(every: float = 3.0) -> bool:
    """Wait while the Variable :data:`CURATED_HOLD_VARIABLE` is on (the task's ``execution_timeout``
    bounds the wait); whether it waited.  The task log says when it waits and when it is released."""
    from airflow.sdk import Variable  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

    def held() -> bool:
        with failing_at_once():  # a value that is no flag: no retry
            value = Variable.get(CURATED_HOLD_VARIABLE, default="") or ""
            return parse_flag(value, f"the Airflow Variable {CURATED_HOLD_VARIABLE}")

    if not held():
        return False
    print(f"held: the Airflow Variable {CURATED_HOLD_VARIABLE} is on; waiting until it is off or deleted",
          file=sys.stderr, flush=True)  # fmt: skip
    while held():
        time.sleep(every)
    print(f"released: the Airflow Variable {CURATED_HOLD_VARIABLE} is off", file=sys.stderr, flush=True)
    return True


#: The curated DAG's catch-up: besides its Asset events, a scheduled run each day at 06:00 UTC (the landing
#: DAG's daily run starts at 00:00), so that work waiting on an event Airflow holds back (issue #56050) waits
#: a day at most.  A run reads what was loaded since each analysis last ran (the ledger), not the events.
#: Airflow's own configuration changes it: ``[sci_ingest] curated_catch_up`` (a cron expression, or ``none``
#: for Asset events alone), e.g. ``AIRFLOW__SCI_INGEST__CURATED_CATCH_UP``.
CURATED_CATCH_UP = "0 6 * * *"


def curated_schedule():
    """``sci_ingest_curated``'s schedule: any collection's Asset event, or the daily catch-up.

    The catch-up is a cron trigger: unpausing the DAG (``catchup=False``) runs the latest tick at once."""
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, conf  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

    assets = reduce(or_, (collection_asset(c) for c in ASSET_COLLECTIONS))
    cron = (conf.get("sci_ingest", "curated_catch_up", fallback=CURATED_CATCH_UP) or "").strip()
    if cron.lower() in ("", "none", "off"):
        return assets
    return AssetOrTimeSchedule(timetable=CronTriggerTimetable(cron, timezone="UTC"), assets=assets)


def event_summary(extra: Mapping[str, Any] | None) -> str:
    """One line of an event's ``extra`` as the curated run's log says it (an event without one: said)."""
    if not extra:
        return "no extra (not emitted by sci_ingest_landing or sci_ingest_backfill: e.g. the REST API)"
    said = [f"day {extra['day']}" if extra.get("day") else "",
            f"{extra['documents']:,} {extra.get('collection', '')} document(s)" if "documents" in extra else "",
            f"files {extra.get('files_loaded', 0)} loaded/{extra.get('files_failed', 0)} failed"
            if "files_loaded" in extra else "",
            f"{extra['set_aside']} value(s) set aside" if extra.get("set_aside") else "",
            f"{extra['warnings']} warning(s)" if extra.get("warnings") else "",
            f"load checks {extra['load_checks']}" if extra.get("load_checks") else ""]  # fmt: skip
    others = sorted(set(extra) - set(EVENT_FIELDS))
    return ", ".join([s for s in said if s] + ([f"other keys: {', '.join(others)}"] if others else [])) or "empty extra"


def log_trigger(context: Mapping[str, Any]) -> list[str]:
    """Say which Asset events started an Asset-triggered run, one line each (source DAG and run,
    collection, what the event's extra says), and that the analyses read the ledger; returns the lines."""
    events = context.get("triggering_asset_events") or {}
    lines = []
    for asset, asset_events in dict(events).items():
        for event in asset_events:
            source = f"{event.source_dag_id}/{event.source_run_id}" if event.source_dag_id else "the REST API"
            key = f" partition {event.partition_key}" if getattr(event, "partition_key", None) else ""
            lines.append(f"reacting to {getattr(asset, 'name', asset)}{key} from {source} "
                         f"({event.source_task_id or 'no task'}, {event.timestamp:%Y-%m-%dT%H:%M:%SZ}): "
                         f"{event_summary(event.extra)}")  # fmt: skip
    if not lines:
        run = context.get("dag_run")
        kind = str(getattr(getattr(run, "run_type", None), "value", getattr(run, "run_type", "")) or "")
        lines.append("no Asset event: the daily catch-up run (it reads whatever was loaded since each analysis last ran)"
                     if kind == "scheduled" else f"no Asset event ({kind or 'manual'} run)")  # fmt: skip
    for line in lines:
        print(f"triggered by: {line}", file=sys.stderr, flush=True)
    print("each analysis says below what changed in its sources since it last ran and what it read (from the "
          "ledger, not from the events)", file=sys.stderr, flush=True)
    return lines


def lineage_of(context: Mapping[str, Any]) -> dict:
    """The Airflow task of a task context, stamped on every stage-timing row it writes."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return {"dag_id": ti.dag_id, "run_id": context["run_id"], "task_id": ti.task_id,
            "try_number": getattr(ti, "try_number", None), "map_index": None if map_index in (None, -1) else map_index}


def run_task(func: Callable[..., dict], *args: Any, **kwargs: Any) -> dict:
    """Call a pipeline task function; fail the task without retries on deterministic errors.

    ``ConfigError``, ``InputError`` (``ParseError``, ``UnknownFormat``) and
    ``ValidationFailed`` are re-raised as ``AirflowFailException`` (chained with
    ``from``) because retrying the same run cannot change the outcome.  Other
    errors -- ``ServerError``, ``DatabaseError``, anything unexpected -- propagate
    and are retried according to the task's ``retries``.

    A task that does not finish (killed: SIGTERM; its ``execution_timeout``; an error) ends its
    operations still running on the servers it used before it goes (as a stopped command does:
    :func:`ingest.store.operations.end_operations`), so that its retry does not meet them there.
    """
    begin_command()
    try:
        with failing_at_once():
            return func(*args, **kwargs)
    except BaseException:
        if "ingest.store.mongo" in sys.modules:  # else the task built no client
            from ingest.store.operations import end_operations  # noqa: PLC0415 - lazy: a task that built no client does not import pymongo (0.3 s)

            end_operations(log=lambda line: print(f"sci-ingest: {line}", file=sys.stderr))
        raise


@contextmanager
def failing_at_once() -> Iterator[None]:
    """Inside the block, a deterministic error (:data:`DETERMINISTIC_ERRORS`) becomes Airflow's
    ``AirflowFailException`` (chained with ``from``): the task fails without its retries."""
    try:
        yield
    except DETERMINISTIC_ERRORS as exc:
        from airflow.sdk.exceptions import AirflowFailException  # noqa: PLC0415 - lazy: a process outside Airflow reads this module; airflow costs 1.9 s

        detail = ""
        failures = getattr(exc, "failures", None)
        if failures:
            detail = f" ({len(failures)} failed expectation(s); first: {failures[0]!r})"
        raise AirflowFailException(f"{type(exc).__name__}: {exc}{detail}") from exc
