"""The Dask cluster the analyses (and, later, loading) run on.

:func:`dask_client` connects to a scheduler (``--scheduler`` /
``DASK_SCHEDULER_ADDRESS``: the same command then spreads over many machines)
or starts a private ``LocalCluster``; :func:`warm_up` imports the readers and
the analyses on every worker once, so the first analysis's timing measures the
analysis and not the workers' imports.  Nothing here knows any analysis.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from ingest.errors import AnalysisError, ConfigError

__all__ = ["dask_client", "warm_up", "LOCAL_WORKERS"]

#: Worker processes of the private LocalCluster (single-threaded each).
LOCAL_WORKERS = 2


@contextmanager
def dask_client(scheduler_address: str | None = None) -> Iterator["distributed.Client"]:  # noqa: F821
    """A Dask client for the duration of the block, closed at exit.

    With ``scheduler_address`` (e.g. the value of ``DASK_SCHEDULER_ADDRESS``),
    connect to that scheduler; its workers must be able to import sci-ingest.
    Otherwise start a private ``LocalCluster`` of :data:`LOCAL_WORKERS`
    single-threaded worker processes, without dashboard and with quiet logs,
    and shut it down at exit.  The client is not made the global default.
    """
    from dask.distributed import Client, LocalCluster

    if scheduler_address:
        try:
            client = Client(scheduler_address, timeout="15s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {scheduler_address}: {exc}") from exc
        try:
            yield client
        finally:
            client.close()
        return

    try:
        cluster = LocalCluster(
            n_workers=LOCAL_WORKERS,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    except (OSError, TimeoutError) as exc:
        raise AnalysisError(f"could not start a local Dask cluster: {exc}") from exc
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def warm_up(client) -> int:
    """Import the partition readers and every analysis on every worker; returns the worker count."""
    replies = client.run(_import_worker_modules)
    return len(replies)


def _import_worker_modules() -> bool:
    import analytics.partitions  # noqa: F401  (pandas, pyarrow, pymongo)
    from analytics.registry import all_analyses

    all_analyses()  # imports every analysis module
    return True
