"""Retries through transient failures: :class:`Retry` runs a MongoDB operation again through network
errors, a restarting server, elections and timeouts (:func:`ingest.store.mongo.is_transient` says
which), with exponential backoff and jitter (tenacity) within a time budget, and counts the retries;
:func:`stop_retrying` ends every wait at once when the command is stopped (Ctrl-C, SIGTERM).

Apart from :mod:`ingest.store.mongo`, which stays the one module that builds clients and maps the
driver's errors: this module calls it (:func:`~ingest.store.mongo.db_errors`) and catches nothing
of pymongo's by name.
"""

from __future__ import annotations

import random
import threading

import psutil

from ingest.errors import DiskFull, SciIngestError, ServerUnavailable
from ingest.fileio import stderr_line
from ingest.store.mongo import db_errors, is_transient

__all__ = ["Retry", "stop_retrying", "process_alive"]


#: Set once the command is stopped (Ctrl-C, SIGTERM: :func:`stop_retrying`): every wait between
#: retries ends at once, on every thread, and no retry begins.
_STOPPING = threading.Event()
_STOPPED_BY: list[BaseException] = []


def stop_retrying(cause: BaseException | None = None) -> None:
    """The command is stopping: :class:`Retry` waits no more (its last error stands).  ``cause``, the
    KeyboardInterrupt the stop raises, is raised again by a wait of the main thread: the first is
    lost when the signal comes inside a callback (Python only prints it there)."""
    if cause is not None:
        _STOPPED_BY.append(cause)
    _STOPPING.set()


class Retry:
    """Run MongoDB operations through transient failures, within ``budget_s`` seconds each.

    Waits grow exponentially with random jitter (tenacity's
    ``wait_random_exponential``), capped at ``max_wait_s``; :attr:`retries`
    counts every retry.  Past the budget the last error is mapped as
    :func:`db_errors` maps it (:class:`ServerUnavailable` when the server could
    not be reached).  A budget of 0 disables retrying, and so does a stop
    (:func:`stop_retrying`), which also ends a wait at once.
    """

    def __init__(self, budget_s: float = 60.0, *, max_wait_s: float = 5.0, uri: str | None = None,
                 server_pid: int | None = None):
        self.budget_s = budget_s
        self.max_wait_s = max_wait_s
        self.uri = uri
        self.server_pid = server_pid  # a server process of this host: once it is gone, stop at once
        self.retries = 0
        self.warned = False  # the first retry says so on stderr, once

    def _count(self, state) -> None:
        self.retries += 1

    def server_gone(self) -> bool:
        """Whether the server process this retries for (``server_pid``) has exited: nothing
        restarts a private embedded server, so waiting for it would only delay the error."""
        return self.server_pid is not None and not process_alive(self.server_pid)

    def __call__(self, what: str, fn, *args, **kwargs):
        try:  # the usual case, without building a retry loop (tens of microseconds a call)
            return fn(*args, **kwargs)
        except Exception as exc:
            if self.budget_s <= 0 or _STOPPING.is_set() or not is_transient(exc):
                self._raise(what, exc)
            failed = [exc]
        self.retries += 1
        self._warn(what, failed[0])
        import tenacity  # noqa: PLC0415 - lazy: the keeper reads this module; tenacity costs 25 ms, needed only on a transient error

        def wait(seconds: float) -> None:  # a stop ends it, and the retries: the stop's, else the last error
            if _STOPPING.wait(seconds):
                if _STOPPED_BY and threading.current_thread() is threading.main_thread():
                    raise _STOPPED_BY[-1]
                raise failed[-1]

        def before_sleep(state) -> None:
            self._count(state)
            failed.append(state.outcome.exception())

        budget = tenacity.stop_after_delay(self.budget_s)
        wait(random.uniform(0, 0.2))
        retrying = tenacity.Retrying(
            stop=lambda state: budget(state) or self.server_gone(),
            wait=tenacity.wait_random_exponential(multiplier=0.2, max=self.max_wait_s),
            retry=tenacity.retry_if_exception(is_transient),
            before_sleep=before_sleep,
            sleep=wait,
            reraise=True,
        )
        try:
            return retrying(fn, *args, **kwargs)
        except Exception as exc:
            self._raise(what, exc)

    def _warn(self, what: str, exc: Exception) -> None:
        """One line on stderr as the retries begin (the first time only): what failed, for how long
        it is retried, and that a stop ends the wait."""
        if self.warned:
            return
        self.warned = True
        try:
            self._raise(what, exc)
        except SciIngestError as mapped:
            stderr_line(f"warning: {mapped}; retrying for up to {self.budget_s:g} s (--retry-for; Ctrl-C or "
                        "SIGTERM stops the wait)")

    def _raise(self, what: str, exc: Exception):
        """``exc`` mapped as :func:`db_errors` maps it, naming a server that has exited."""
        try:
            with db_errors(what, uri=self.uri):
                raise exc
        except ServerUnavailable as mapped:
            if self.server_gone() and not isinstance(mapped, DiskFull):
                raise ServerUnavailable(f"{what}: the embedded SecantusDB server (pid {self.server_pid}) "
                                        "has exited; its log is server.log in the sci-ingest home") from exc
            raise mapped from exc


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
