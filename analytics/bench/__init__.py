"""``sci-ingest bench``: the source studies' experiments, one command each.

Each experiment is declared once (:class:`~analytics.bench.core.Experiment`) in a module
of :mod:`analytics.bench.experiments`, bound to that module's ``EXPERIMENTS``; the runner
(:mod:`analytics.bench.runner`) runs any of them the same way, stores the run in
``bench_runs``, writes CSV/JSON/PNG, and prints the points and the comparison with the
study's published figures (``../shared/reference/studies.md`` summarises the studies).
:mod:`analytics.bench.report` renders every stored run as one offline HTML page.
"""

from __future__ import annotations

import importlib
import pkgutil

from analytics.bench import experiments as package
from analytics.bench.core import SIZES, Context, Experiment, Plot, Published
from ingest.errors import UsageError

__all__ = ["Experiment", "Plot", "Published", "Context", "SIZES", "ORDER", "all_experiments", "get_experiment",
           "UnknownExperiment"]

# the order of `bench list` (the issue's), and the names every release must have
ORDER = ("workers", "shard-plan", "engines", "split-size", "sinks", "checkpoint", "faults", "cache", "ycsb",
         "write-concern")  # fmt: skip


class UnknownExperiment(UsageError):
    """A name that no benchmark experiment has."""


def all_experiments() -> dict[str, Experiment]:
    """Every declared experiment by name, in ``ORDER`` (others after it, by name)."""
    found: dict[str, Experiment] = {}
    for mod in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{mod.name}")
        for exp in getattr(module, "EXPERIMENTS", ()):
            if exp.name in found:
                raise ValueError(f"experiment {exp.name!r} declared twice")
            found[exp.name] = exp
    rank = {n: i for i, n in enumerate(ORDER)}
    return {n: found[n] for n in sorted(found, key=lambda n: (rank.get(n, len(ORDER)), n))}


def get_experiment(name: str) -> Experiment:
    experiments = all_experiments()
    if name not in experiments:
        raise UnknownExperiment(f"unknown experiment {name!r}; known: {', '.join(experiments)}")
    return experiments[name]
