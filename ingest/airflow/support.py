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
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
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


def log_trigger(context: Mapping[str, Any]) -> None:
    """Say which Asset events started an Asset-triggered run, and what the analyses read."""
    events = context.get("triggering_asset_events") or {}
    names = []
    for asset, asset_events in dict(events).items():
        names.append(f"{getattr(asset, 'name', asset)} ({len(asset_events)} event(s))")
    print(f"triggered by: {', '.join(names) or 'no Asset event (a manual run)'}; each analysis says below what "
          "changed in its sources and what it read", file=sys.stderr, flush=True)


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
