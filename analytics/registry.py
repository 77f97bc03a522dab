"""The analyses, each declared once, and the registry that finds them.

An analysis is a :class:`Analysis` declaration in a module of the
:mod:`analytics.analyses` package, next to its pure per-partition function:

* ``source`` collection, an optional ``filter``, the input ``columns``
  (:class:`analytics.schema.Column`: the projection and types derive from them);
* ``partition_key``: the field the source is split into key ranges on, and
  ``group_key``: the field whose equal values must meet in one partition (when
  the two differ the runner shuffles the rows on ``group_key`` first);
* ``partition``: a pure module-level function, pandas frame in, partial result
  out (a frame, or anything picklable that ``combine`` understands);
* ``combine``: partial results of every partition in, the output frame out
  (optionally with ``{reason: count}`` of input records left out); by default
  :func:`concat_by_id`;
* ``output`` collection, ``output_id`` (the column that becomes ``_id``),
  ``output_types`` (``{column: dtype}``), the Parquet file's name;
* ``file_prefix`` (optional): input file content (sha256) in, the prefix every
  group key made from that file starts with out.  Declared by an analysis with
  one output row per group, it can be brought up to date with only the groups of
  the files loaded since it last ran (:mod:`analytics.increment`).

The runner (:mod:`analytics.runner`) runs any declaration the same way: plan,
read, apply, combine, publish.  Adding an analysis is one new module in
``analytics/analyses/`` (its function and its declaration, bound to the
module-level name ``ANALYSIS``) plus one expectation suite in
``schemas/expectations/``; nothing else names it.  Analyses are ordered by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

from analytics.schema import Column, Schema, conform, empty
from ingest.errors import AnalysisError, ConfigError

__all__ = ["Analysis", "UnknownAnalysis", "all_analyses", "analysis_names", "get_analysis", "select_analyses",
           "concat_by_id"]


@dataclass(frozen=True)
class Analysis:
    """The declaration of one analysis (see the module docstring)."""

    name: str
    description: str
    source: str
    columns: tuple[Column, ...]
    partition: Callable[[Any], Any]
    output: str
    output_id: str
    output_types: dict[str, str]
    combine: Callable[[list], Any] | None = None
    filter: dict = field(default_factory=dict)
    partition_key: str = "_id"
    group_key: str | None = None
    parquet: str | None = None
    file_prefix: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", Schema(self.columns).columns)
        if self.output_id not in self.output_types:
            raise ConfigError(f"analysis {self.name}: output_id {self.output_id!r} is not an output column")
        if self.group_key is not None and self.group_key not in self.schema.names:
            raise ConfigError(f"analysis {self.name}: group_key {self.group_key!r} is not an input column")
        if self.file_prefix is not None and not self.mends_groups:
            raise ConfigError(f"analysis {self.name}: file_prefix needs one output row per group "
                              "(group_key == output_id, the default combine)")

    @property
    def schema(self) -> Schema:
        return Schema(self.columns)

    @property
    def mends_groups(self) -> bool:
        """Whether a group split between partitions can be mended after the fact.

        True when the output has one row per group keyed by it (the default
        combine, ``output_id == group_key``): the rows of a split group are
        dropped and the group is read again whole.  The runner then streams the
        source unsorted instead of paying for a server-side sort.
        """
        return self.group_key is not None and self.combine is None and self.output_id == self.group_key

    @property
    def parquet_name(self) -> str:
        return f"{self.parquet or self.name}.parquet"

    def combine_partials(self, partials: list) -> tuple[Any, dict[str, int]]:
        """(output frame conformed to ``output_types``, excluded counts) from the partials."""
        combined = self.combine(partials) if self.combine else concat_by_id(self, partials)
        frame, excluded = combined if isinstance(combined, tuple) else (combined, {})
        return conform(frame, self.output_types), dict(excluded)

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "output": self.output,
                "parquet": self.parquet_name, "description": self.description}


def concat_by_id(analysis: Analysis, partials: list):
    """The default combine: the partitions' frames end to end, sorted by the output id.

    An id met in two partitions is an error (the partitioning split a group).
    """
    import pandas as pd

    frames = [p for p in partials if len(p)]
    if not frames:
        return empty(analysis.output_types)
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(analysis.output_id, kind="mergesort").reset_index(drop=True)
    if frame[analysis.output_id].duplicated().any():
        raise AnalysisError(f"{analysis.name}: a {analysis.output_id} appeared in more than one partition")
    return frame


# ------------------------------------------------------------------ the registry
class UnknownAnalysis(ConfigError):
    """A name that no declared analysis has; ``known`` lists the names there are."""

    def __init__(self, unknown: list[str], known: list[str]):
        self.unknown, self.known = unknown, known
        super().__init__(f"unknown analysis {', '.join(map(repr, unknown))}; known: {', '.join(known)}")


_FOUND: dict[str, Analysis] | None = None


def _discover() -> dict[str, Analysis]:
    global _FOUND
    if _FOUND is None:
        import analytics.analyses as package

        found: dict[str, Analysis] = {}
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            analysis = getattr(module, "ANALYSIS", None)
            if not isinstance(analysis, Analysis):
                raise ConfigError(f"{module.__name__} declares no ANALYSIS = Analysis(...)")
            if analysis.name in found:
                raise ConfigError(f"analysis {analysis.name!r} declared twice ({module.__name__})")
            found[analysis.name] = analysis
        _FOUND = dict(sorted(found.items()))
    return _FOUND


def all_analyses() -> list[Analysis]:
    """Every declared analysis, ordered by name."""
    return list(_discover().values())


def analysis_names() -> list[str]:
    return list(_discover())


def get_analysis(name: str) -> Analysis:
    try:
        return _discover()[name]
    except KeyError:
        raise UnknownAnalysis([name], analysis_names()) from None


def select_analyses(wanted: list[str] | tuple[str, ...] | None) -> list[Analysis]:
    """The named analyses in the order given (all when ``wanted`` is empty or None)."""
    if not wanted:
        return all_analyses()
    unknown = [n for n in wanted if n not in _discover()]
    if unknown:
        raise UnknownAnalysis(unknown, analysis_names())
    return [get_analysis(n) for n in dict.fromkeys(wanted)]
