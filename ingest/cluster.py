"""The Dask cluster that loading and the analyses run on.

:func:`dask_client` connects to a scheduler (``--scheduler`` /
``DASK_SCHEDULER_ADDRESS``: the same command then spreads over many machines)
or starts a private ``LocalCluster``; :func:`warm_up` prepares every worker once
for a step's tasks (the loader and parsers for ``load``; what a plugin names for its
steps, such as the readers and the analyses for ``analyze``), so a step's timing
measures the step and not the workers' imports.  Nothing here knows any analysis.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ingest import plugins
from ingest.config import default_workers, setting
from ingest.errors import AnalysisError, ConfigError
from ingest.fileio import library_messages_again, stderr_line
from ingest.tls import TLS_ENV, client_security, plain_tcp_risk

if TYPE_CHECKING:
    from typing import TypeAlias

    from dask.distributed import Client

    from ingest.inprocess import InProcessClient

    #: What :func:`dask_client` yields: a Dask client, or for small work this process's stand-in.
    DaskClient: TypeAlias = Client | InProcessClient

__all__ = ["dask_client", "warm_up", "thread_count", "import_for_load", "scheduler_security", "WORKER_CONFIG"]

#: Dask configuration every worker of a private cluster runs with, restarted ones included.
WORKER_CONFIG: dict = {"distributed": {"worker": {"profile": {"enabled": False}}}}


@contextmanager
def dask_client(scheduler_address: str | None = None, n_workers: int | None = None, *,
                in_process: bool = False, tls_dir: str | None = None) -> Iterator[DaskClient]:
    """A Dask client for the duration of the block, closed at exit.

    With ``scheduler_address`` (e.g. the value of ``DASK_SCHEDULER_ADDRESS``),
    connect to that scheduler; its workers must be able to import sci-ingest.  A ``tls://``
    scheduler is shown the ``client`` certificate of ``tls_dir`` (default ``$SCI_INGEST_DASK_TLS``:
    :mod:`ingest.tls`) or what Dask's configuration names; a plain ``tcp://`` one off this host
    gets a warning on stderr.
    Otherwise start a private ``LocalCluster`` of ``n_workers`` (default:
    the cores, :func:`ingest.config.default_workers`) single-threaded worker
    processes, with quiet logs and the scheduler's HTTP port chosen freely (not
    8787, which another cluster may hold), and shut it down at exit; with ``in_process``
    (small work, see :data:`ingest.config.DEFAULT_SMALL_WORK`), no cluster at all: an
    :class:`ingest.inprocess.InProcessClient` runs the same tasks here, one at a time on one
    worker thread, without importing ``distributed``.  The client is not made the global
    default.
    """
    if in_process and not scheduler_address:
        from ingest.inprocess import InProcessClient  # noqa: PLC0415 - lazy: Dask's core (0.1 s), only for small work

        here = InProcessClient()
        try:
            yield here
        finally:
            here.close()
        return
    from dask.distributed import Client, LocalCluster  # noqa: PLC0415 - lazy: analytics.runner reads ingest.cluster and must stay light; distributed costs 0.3 s

    library_messages_again()  # Dask's loggers, set up by its import: one line each in a command

    if scheduler_address:
        client = _connect(Client, scheduler_address, tls_dir)
        try:
            yield client
        finally:
            client.close()
        return

    import dask  # noqa: PLC0415 - lazy: analytics.runner reads ingest.cluster and must stay light; dask costs 0.1 s

    with _main_not_rerun():
        yield from _local_client(dask, Client, LocalCluster, n_workers)


def _connect(Client, address: str, tls_dir: str | None):
    """A client of the scheduler at ``address``: with the ``client`` certificate of ``tls_dir``
    (default ``$SCI_INGEST_DASK_TLS``), else as Dask's configuration says; a warning first when
    the address is plain TCP off this host (:func:`ingest.tls.plain_tcp_risk`)."""
    risk = plain_tcp_risk(address)
    if risk:
        stderr_line(f"warning: {risk}")
    security = scheduler_security(address, tls_dir)
    try:
        return Client(address, timeout="15s", set_as_default=False, security=security)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc


def scheduler_security(address: str, tls_dir: str | None = None):
    """What sci-ingest shows the scheduler at ``address``: the ``client`` certificate of ``tls_dir``
    (default ``$SCI_INGEST_DASK_TLS``: a ``distributed.Security``), else None (Dask's configuration
    decides).  :class:`ConfigError` names a missing file, a ``tls://`` scheduler with no certificate
    to show, or a plain one where the certificate requires encryption."""
    folder = tls_dir if tls_dir is not None else str(setting(TLS_ENV) or "")
    security = client_security(folder)
    if security is not None and not address.startswith("tls://"):  # Dask would refuse it with a traceback
        raise ConfigError(f"{TLS_ENV}={folder} makes sci-ingest speak TLS only, and the Dask scheduler {address} "
                          "is plain TCP: give its tls:// address (or unset the setting)")
    if address.startswith("tls://") and security is None and not dask_tls_configured():
        raise ConfigError(f"the Dask scheduler {address} speaks TLS: give sci-ingest a client certificate "
                          f"({TLS_ENV}=DIR, made by `sci-ingest certs DIR`, or Dask's distributed.comm.tls settings)")
    return security


def dask_tls_configured() -> bool:
    """Whether Dask's own configuration names a certificate authority (``distributed.comm.tls.ca-file``)."""
    import dask  # noqa: PLC0415 - lazy: analytics.runner reads ingest.cluster and must stay light; dask costs 0.1 s

    return bool(dask.config.get("distributed.comm.tls.ca-file", None))


def _local_client(dask, Client, LocalCluster, n_workers: int | None):
    try:
        # No statistical profiler in the workers: on Python 3.11 before 3.11.9 its
        # sys._current_frames() can deadlock a process whose threads come and go
        # (CPython gh-106883), and a load's worker has a writer and pymongo's threads.
        # Given to the nannies, not set around the constructor: a worker that a nanny
        # starts again after it died must get it too (a config set only while the
        # cluster starts is gone by then, and the new worker profiled and hung).
        cluster = LocalCluster(
            n_workers=n_workers or default_workers(),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # no fixed port: another cluster may hold 8787 (its warning is noise)
            silence_logs=logging.CRITICAL,  # task errors reach the caller through their futures
            # the nannies replace whole top-level sections: give them all of the config
            config=dask.config.merge(dask.config.config, WORKER_CONFIG),
        )
    except (OSError, TimeoutError) as exc:
        raise AnalysisError(f"could not start a local Dask cluster: {exc}") from exc
    yield from _serve(Client, cluster)


def _serve(Client, cluster):
    """A client of ``cluster`` while the caller's block runs; both closed after it."""
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """While the block runs, worker processes started with ``spawn`` (Dask's default, and
    what its nannies use to restart a worker) do not run this process's ``__main__`` again.

    multiprocessing's spawn makes each child import the parent's main module (its path or
    its module name) before the task.  The workers need nothing from it: every function
    they run lives in ``ingest`` or ``analytics``.  And some mains must not run twice: inside
    an Airflow task the main is Airflow's own entry point, whose import sets up Airflow's
    metadata database, which a task may not touch (the worker died at once with
    "Nanny failed to start worker process").  ``__main__`` is a stand-in without a file or
    spec for the duration, so the children have nothing to import; fork is not the way out:
    the task process has threads (pymongo's, Airflow's), and forkserver's children import
    the main all the same.
    """
    main = sys.modules.get("__main__")
    if main is None or (getattr(main, "__spec__", None) is None and getattr(main, "__file__", None) is None):
        yield
        return
    stand_in = types.ModuleType("__main__")
    stand_in.__dict__.update({k: v for k, v in vars(main).items() if k not in ("__file__", "__spec__", "__loader__")})
    stand_in.__spec__ = None
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("__main__") is stand_in:
            sys.modules["__main__"] = main


def thread_count(client) -> int:
    """How many tasks the cluster behind ``client`` runs at once (at least 1)."""
    return max(1, sum(client.nthreads().values()))


def warm_up(client, purpose: str = "analyze", uri: str | None = None, *, in_process: bool = False) -> int:
    """Prepare every worker for ``purpose``'s tasks once; returns the worker count.

    ``load`` imports the loader and the parsers; any other purpose is a plugin's
    (:data:`ingest.plugins` ``WARM_UPS``: the analyses import their readers and modules, and
    walk their code once; the validation makes Great Expectations' context, which takes
    seconds).  With ``uri``, the calling process also opens its shared connection pool for
    ``uri`` (the one the streams read through), so the first stage does not pay the connection.
    ``in_process``: the worker is this process (:func:`dask_client`), prepared once, not twice
    (and a process that is prepared already, such as a child of a kept command process, is not
    prepared again: the plugin's function says so).
    """
    if purpose == "load":
        return len(client.run(import_for_load))
    prepare, here = _plugin_warm_up(purpose)
    replies = client.run(prepare)
    if here and not in_process:
        prepare()
    if uri:
        from ingest.store.mongo import db_errors, shared_client  # noqa: PLC0415 - lazy: analytics.validation imports this module and must not import pymongo (tests/test_validate.py); pymongo costs 0.12 s

        with db_errors("connecting", uri=uri):
            shared_client(uri).admin.command("ping")
    return len(replies)


def _plugin_warm_up(purpose: str):
    found = plugins.warm_up(purpose)
    if found is None:
        raise ConfigError(f"nothing prepares Dask workers for {purpose!r}: no installed plugin names it")
    return found


def import_for_load() -> bool:
    """Import the loader and the parsers (run on every worker: importing is its purpose)."""
    import ingest.documents  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import ingest.load.run  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import ingest.parsers.materials  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose
    import ingest.parsers.pasta  # noqa: PLC0415,F401 - lazy: a warm-up: importing on each worker is its purpose

    return True


