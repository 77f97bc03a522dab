"""The bench framework: an experiment is declared once; one runner runs any of them.

An :class:`Experiment` names the study and figure it reproduces, its parameters at each
size (``tiny`` for the tests, ``quick`` by default: under two minutes on 2 cores, ``full``:
the study's axes), a module-level ``run(ctx, params) -> list[dict]`` that measures and
returns its points (one flat dict per measured point), the :class:`Plot` drawn from them
(the study figure's axes) and the :class:`Published` figures to print beside ours.

:func:`run_experiment` gives ``run`` a :class:`Context` (the MongoDB URI and the bench
database, a scratch folder, a deadline, a progress logger), then records one document per
run in ``bench_runs`` (parameters, machine, server, software, points, the comparison with
the study) and writes ``RUN_ID.json``, ``.csv`` and ``.png`` under ``OUT/NAME/``
(:mod:`analytics.bench.output`).  Experiments reach MongoDB through :mod:`ingest.store.mongo`
only, like everything else.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

from ingest.store.mongo import close_client, connect, db_errors

__all__ = ["Experiment", "Plot", "Published", "Context", "SIZES", "machine", "software", "new_run_id"]

SIZES = ("tiny", "quick", "full")
RUNS = "bench_runs"  # in the configured database: one document per run


@dataclass(frozen=True)
class Plot:
    """A line plot of the points: ``x`` against each of ``y``, one line per value of ``series``
    (a column, or None), as the study's figure draws it."""

    x: str
    y: tuple[str, ...]
    series: str | None = None
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    xlog: bool = False
    ylog: bool = False
    where: dict[str, Any] = field(default_factory=dict)  # only the points with these values


@dataclass(frozen=True)
class Published:
    """One figure of a study to print beside ours: ``value`` (None: the study gives only a
    shape, told in ``note``) in ``unit``, on ``hardware``; ours is ``metric`` of the point
    matching ``match`` (``{column: value}``; a value ``"max"``/``"min"`` of ``metric``
    picks the best point instead)."""

    figure: str
    what: str
    value: float | None
    unit: str
    hardware: str
    metric: str
    match: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    study: str  # the study's file and short name (../shared/reference/studies.md)
    figures: str  # e.g. "SS-F5.1, SS-F4.1"
    title: str
    run: Callable[[Context, dict], list[dict]]
    sizes: dict[str, dict]  # "tiny" / "quick" / "full" -> parameters
    plot: Plot
    published: tuple[Published, ...] = ()
    differences: str = ""  # what differs from the study's setup (for the report)
    needs: str = ""  # e.g. "a sharded cluster for the real run" (told by `bench list`)
    table: tuple[str, ...] = ()  # the columns printed (default: all); the CSV and JSON hold every one

    def params(self, size: str) -> dict:
        if size not in self.sizes:
            raise ValueError(f"{self.name}: no size {size!r} (sizes: {', '.join(self.sizes)})")
        return dict(self.sizes[size])


@dataclass
class Context:
    """What an experiment's ``run`` gets."""

    uri: str  # the MongoDB to measure (the embedded server by default)
    db_name: str  # the database the experiment may create, fill and drop
    server: dict  # kind, version, topology (ServerInfo.as_dict())
    embedded: bool  # the embedded SecantusDB server (no --mongo-uri)
    scratch: Path  # a folder of its own, emptied after the run
    size: str
    deadline: float  # time.monotonic() by which the run must have stopped its load generators
    log: Callable[[str], None] = print
    scheduler: str | None = None  # a Dask scheduler address (None: a LocalCluster)
    notes: list[str] = field(default_factory=list)  # what the run could not do here, and why

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def note(self, text: str) -> None:
        """Record (and say) a limit of this run: a feature the server lacks, a point cut short."""
        self.notes.append(text)
        self.log(f"note: {text}")


@contextmanager
def experiment_db(ctx: Context, collections: tuple[str, ...]) -> Iterator[tuple[Any, Any]]:
    """``(client, db)``: a client of the experiment's own and its database for the block.  When the block
    ends normally its ``collections`` are dropped; the client is closed however it ends."""
    client = connect(ctx.uri)
    try:
        yield client, client[ctx.db_name]
        with db_errors(f"dropping {', '.join(collections)}", uri=ctx.uri):
            for name in collections:
                client[ctx.db_name].drop_collection(name)
    finally:
        close_client(client)


def new_run_id(name: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{name}-{now:%Y%m%dT%H%M%SZ}-{os.urandom(3).hex()}"


def machine() -> dict:
    """Cores, memory, OS, CPU model and load of this machine."""
    info = {
        "cores": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "cpu": _cpu_model(),
        "hostname": platform.node(),
    }
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def software() -> dict:
    """Python and the versions of the packages the experiments use."""
    out = {"python": sys.version.split()[0]}
    for dist in ("sci-ingest", "pymongo", "dask", "distributed", "pandas", "pyarrow", "hdrhistogram", "SecantusDB",
                 "matplotlib"):  # fmt: skip
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out
