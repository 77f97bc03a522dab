"""Small work without a cluster: the Dask client calls the runners make, answered in this process.

A command whose work is small (:data:`ingest.config.DEFAULT_SMALL_WORK`) does not start a
``LocalCluster``: :func:`ingest.cluster.dask_client` gives it an :class:`InProcessClient`.
That client runs the submitted tasks one after the other on one worker thread of this
process (as the in-process worker it replaces did: the command's main thread reads the next
chunk from the server while the worker decodes and analyses the last), and task graphs
(``compute``) on Dask's synchronous scheduler.  Nothing is distributed and nothing new is
invented: it answers the calls of ``distributed.Client`` that the runners make (``submit``,
``map``, ``gather``, ``compute`` with ``sync=True``, ``run``, ``nthreads``, ``close``) with the same
meaning, so the runners have one code path and the same results on both
(``tests/test_paper_analyses.py`` compares them row for row).

What ``submit`` returns, a :class:`Done`, is a ``dask.delayed.Delayed`` whose graph waits for
the task: like a ``distributed`` future it can be an argument of a later ``submit`` (anywhere
in a plain list, tuple or dict) or of a delayed task graph.  A task that raised keeps its
exception, raised again by ``result()`` and by any task that is given it.

Why not ``distributed`` in this process: importing it and starting an in-process
``LocalCluster`` cost 0.35-0.38 s of every small ``analyze`` (measured on the bundled
samples), a third of the command's time outside its analyses.  Dask's core is imported here
(0.1 s), so :mod:`ingest.cluster` imports this module only when it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import dask
from dask.delayed import Delayed, delayed

__all__ = ["InProcessClient", "Done", "WORKER"]

#: The name the one worker answers to in ``run`` and ``nthreads``.
WORKER = "in-process"


class Done(Delayed):
    """A task given to the worker thread: its outcome when it has run (``result``), and a node of
    a Dask graph that waits for it (so it can be an argument of a delayed task)."""

    __slots__ = ("_future",)

    @classmethod
    def of(cls, future: Future) -> Done:
        node = delayed(_outcome, pure=False)(future)
        done = cls(node.key, node.dask)
        done._future = future
        return done

    def result(self, timeout: float | None = None) -> Any:
        return self._future.result(timeout)


def _outcome(future: Future) -> Any:
    return future.result()


def _values(arg: Any) -> Any:
    """``arg`` with each :class:`Done` in it replaced by its value: in plain lists, tuples, sets and
    dicts, as ``distributed`` looks for futures (not in their subclasses: a named tuple is a value)."""
    kind = type(arg)
    if kind is Done:
        return arg.result()
    if kind in (list, tuple, set):
        return kind(_values(a) for a in arg)
    if kind is dict:
        return {k: _values(v) for k, v in arg.items()}
    return arg


def _call(func: Callable, args: tuple, kwargs: dict) -> Any:
    """Run on the worker thread: the arguments' tasks were submitted before, so they have run."""
    return func(*_values(args), **_values(kwargs))


class InProcessClient:
    """The ``distributed.Client`` calls of the runners, run in this process on one worker thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sci-ingest-task")

    def submit(self, func: Callable, *args, pure: bool | None = None, key: str | None = None,  # noqa: ARG002
               **kwargs) -> Done:
        return Done.of(self._pool.submit(_call, func, args, kwargs))

    def map(self, func: Callable, iterable: Iterable, pure: bool | None = None, **kwargs) -> list[Done]:  # noqa: ARG002
        return [self.submit(func, item, **kwargs) for item in iterable]

    def gather(self, futures):
        if isinstance(futures, Done):
            return futures.result()
        return [f.result() if isinstance(f, Done) else f for f in futures]

    def compute(self, collections, sync: bool = True):
        """Task graphs on Dask's synchronous scheduler, here, their values returned (the runners
        ask ``sync=True``; their :class:`Done` nodes wait for the worker thread)."""
        if not sync:
            raise ValueError("InProcessClient.compute runs the graphs here: call it with sync=True")
        many = isinstance(collections, (list, tuple))
        values = dask.compute(*(collections if many else [collections]), scheduler="sync")
        return list(values) if many else values[0]

    def run(self, func: Callable, *args, **kwargs) -> dict:
        return {WORKER: func(*args, **kwargs)}

    def nthreads(self) -> dict:
        return {WORKER: 1}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return "<InProcessClient: one worker thread in this process>"

