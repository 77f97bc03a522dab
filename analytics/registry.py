"""The analyses, each declared once, and the registry that finds them.

An analysis is a :class:`Analysis` declaration in a module of the
:mod:`analytics.analyses` package, next to its pure per-partition function:

* ``source`` collection, an optional ``filter``, the input ``columns``
  (:class:`ingest.schema.Column`: the projection and types derive from them);
* ``partition_key``: the field the source is split into key ranges on, and
  ``group_key``: the field whose equal values must meet in one partition (when
  the two differ the runner shuffles the rows on ``group_key`` first);
* ``partition``: a pure module-level function, pandas frame in, partial result
  out (a frame, or anything picklable that ``combine`` understands);
* ``combine``: partial results of every partition in, the output frame out
  (optionally with ``{reason: count}`` of input records left out); by default
  :func:`concat_by_id`;
* ``output`` collection, ``output_id`` (the column that becomes ``_id``), the
  Parquet file's name, and ``outputs``: one
  :class:`ingest.schema.OutputColumn` ``(name, dtype, meaning, unit)`` per
  output column, in order.  The unit is declared explicitly (``""`` for
  identifiers and other dimensionless values); a list column declares its
  element type (``list<string>``).  ``output_types`` (``{column: pandas dtype}``),
  the Parquet file's Arrow schema (:attr:`Analysis.arrow_schema`) and what
  ``sci-ingest query OUTPUT --fields-list``, the manual (docs/) and the HTML report say
  of each column derive from it; an analysis whose output column lacks a
  meaning or a unit is refused when it is declared (so the registry never
  lists it);
* ``file_prefix`` (optional): input file content (sha256) in, the prefix every
  group key made from that file starts with out.  Declared by an analysis with
  one output row per group, it can be brought up to date with only the groups of
  the files loaded since it last ran (:mod:`analytics.increment`); its output gets an index
  on the group key (the changed groups' rows are replaced and removed by key ranges);
* ``questions`` analysts ask of the output and the ``indexes`` that answer them
  (each a list of ``(field, 1 | -1)``; built before the output is published, so
  the collection never appears without them);
* ``plot`` (optional): the output frame in, a matplotlib ``Figure`` out, for
  ``sci-ingest report``;
* ``join`` (optional): a :class:`Side` input -- another collection (``source``,
  ``filter``, ``columns``, and the ``key`` column the analysis joins on) read
  once, whole, on the Dask workers (in ranges of ``key`` or as a stream, as the
  server's plans say), each part passed through the side's optional
  ``prepare`` (pure, frame in, frame out: e.g. wide raw columns reduced to what
  the join compares) where it was read, then concatenated into one frame that
  stays on the cluster and is handed to every partition: ``partition(frame,
  side)``.  The function stays pure (frames in, partial out) and does the join
  itself; the prepared side must fit in a worker's memory.  An analysis with a
  side input cannot be brought up to date incrementally (its rows depend on the
  side too);
* ``regroup`` and ``per_group`` (optional, together): a second parallel stage
  for analyses whose units of work are only known once every partition has been
  seen (``hull_energy``: one phase diagram per maximal chemical system).
  ``regroup`` gets the partials of every partition, in the driver, and returns
  ``(units, {reason: count})``; ``per_group`` runs on a worker once per unit;
  ``combine`` then gets the ``per_group`` results instead of the partials, and
  the counts of both are added up;
* ``merge`` (optional): a :class:`Merge` -- how an aggregate over the whole source takes in
  the documents of new files without reading the others again (``hit_distributions``,
  ``library_hits``);
* ``summary`` (optional): the output frame in, ``{name: number}`` out -- a few
  numbers describing the output as a whole (e.g. quantiles of a difference),
  kept with the result (:attr:`analytics.runner.AnalysisResult.summary`) and in
  the Parquet file's metadata.

:meth:`Analysis.run_frames` runs the same stages in this process on in-memory
frames, without Dask or MongoDB (for tests and notebooks).

The runner (:mod:`analytics.runner`) runs any declaration the same way: plan,
read, apply, combine, publish.  Adding an analysis is one new module in
``analytics/analyses/`` (its function and its declaration, bound to the
module-level name ``ANALYSIS``) plus one expectation suite in
``schemas/expectations/``; nothing else names it.  Analyses are ordered by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import analytics.analyses as analyses_package
from ingest.documents import search_id_prefix
from ingest.errors import AnalysisError, ConfigError, UsageError
from ingest.schema import (
    Column,
    OutputColumn,
    Schema,
    check_outputs,
    conform,
    empty,
    output_arrow_schema,
    output_dtypes,
)

__all__ = ["Analysis", "Merge", "Side", "UnknownAnalysis", "all_analyses", "analysis_names", "get_analysis",
           "select_analyses", "concat_by_id", "gather_partials", "output_table", "RUN_ID"]

#: The column every published row carries besides the declared ones, declared as they are.
RUN_ID = OutputColumn("run_id", "str", "the run that wrote it", "")


@dataclass(frozen=True)
class Side:
    """A side input of an analysis: a collection read once, whole, and handed to every partition.

    ``key`` names the declared column the analysis joins on: the side is read in
    ranges of its path (an index is made on it if none leads with it).
    ``prepare`` (optional, pure) turns each part as read into what the
    partitions get.
    """

    source: str
    columns: tuple[Column, ...]
    key: str
    filter: dict = field(default_factory=dict)
    prepare: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", Schema(self.columns).columns)
        if self.key not in self.schema.names:
            raise ConfigError(f"side input {self.source}: key {self.key!r} is not one of its columns")

    @property
    def schema(self) -> Schema:
        return Schema(self.columns)

    @property
    def key_path(self) -> str:
        return next(c.path for c in self.columns if c.name == self.key)

    def prepared(self, frame):
        """One part of the side as read, prepared for the partitions."""
        return self.prepare(frame) if self.prepare is not None else frame


@dataclass(frozen=True)
class Merge:
    """How an aggregate takes in the documents of new files without reading the others again.

    ``function(output, excluded, new, before)`` gets the published table and its left-out
    counts, the new files' rows (the declared columns) and the rows of files loaded before that
    share a value of one of the ``before_by`` columns with them (each an index seek), and returns
    ``(table, counts)`` as a whole run over all of them would, or None when it cannot (the table
    is then computed whole).  A new file's documents are those whose ``by`` column starts with
    ``prefix(content sha256)``.  Only new files are merged: a file replaced or reloaded makes
    the next run read the whole source (:mod:`analytics.increment`).
    """

    function: Callable[..., Any]
    before_by: tuple[str, ...] = ()
    by: str = "search_id"
    prefix: Callable[[str], str] = search_id_prefix


@dataclass(frozen=True)
class Analysis:
    """The declaration of one analysis (see the module docstring)."""

    name: str
    description: str
    source: str
    columns: tuple[Column, ...]
    partition: Callable[..., Any]  # (frame), or (frame, side) with a side input (join)
    output: str
    output_id: str
    outputs: tuple[OutputColumn, ...]
    combine: Callable[[list], Any] | None = None
    filter: dict = field(default_factory=dict)
    partition_key: str = "_id"
    group_key: str | None = None
    parquet: str | None = None
    file_prefix: Callable[[str], str] | None = None
    questions: tuple[str, ...] = ()
    indexes: tuple[tuple[tuple[str, int], ...], ...] = ()
    plot: Callable[[Any], Any] | None = None
    join: Side | None = None
    regroup: Callable[[list], tuple[list, dict[str, int]]] | None = None
    per_group: Callable[[Any], Any] | None = None
    summary: Callable[[Any], dict[str, float]] | None = None
    merge: Merge | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", Schema(self.columns).columns)
        object.__setattr__(self, "outputs", check_outputs(f"analysis {self.name}", self.outputs))
        if RUN_ID.name in self.output_types:
            raise ConfigError(f"analysis {self.name}: output column {RUN_ID.name!r} is the runner's (every row's run)")
        if self.output_id not in self.output_types:
            raise ConfigError(f"analysis {self.name}: output_id {self.output_id!r} is not an output column")
        if self.group_key is not None and self.group_key not in self.schema.names:
            raise ConfigError(f"analysis {self.name}: group_key {self.group_key!r} is not an input column")
        indexes = tuple(tuple((f, int(d)) for f, d in ix) for ix in self.indexes)
        if self.file_prefix is not None and self.group_key and not any(ix[0][0] == self.group_key for ix in indexes):
            # the changed publish removes a vanished group's rows by its key's range: an index seek
            # (the embedded server scans a range of _id, and an $or of ranges whatever the field)
            indexes += (((self.group_key, 1),),)
        object.__setattr__(self, "indexes", indexes)
        for ix in self.indexes:
            unknown = [f for f, _ in ix if f not in self.output_types and f != "_id"]
            if unknown or any(d not in (1, -1) for _, d in ix):
                raise ConfigError(f"analysis {self.name}: index {list(ix)} names no output column or has a "
                                  "direction other than 1 / -1")
        if (self.regroup is None) != (self.per_group is None):
            raise ConfigError(f"analysis {self.name}: regroup and per_group are declared together")
        if self.file_prefix is not None and (self.join is not None or self.regroup is not None):
            raise ConfigError(f"analysis {self.name}: file_prefix cannot go with a side input or a regroup "
                              "stage (an output row would depend on more than its group's file)")
        if self.merge is not None:
            unknown = [c for c in (self.merge.by, *self.merge.before_by) if c not in self.schema.names]
            if unknown or self.join is not None or self.regroup is not None or self.file_prefix is not None:
                raise ConfigError(f"analysis {self.name}: merge names columns it does not read ({unknown}) or goes "
                                  "with a side input, a regroup stage or file_prefix")
        if self.file_prefix is not None and not self.mends_groups:
            raise ConfigError(f"analysis {self.name}: file_prefix needs one output row per group "
                              "(group_key == output_id, the default combine)")

    @property
    def schema(self) -> Schema:
        return Schema(self.columns)

    @property
    def output_types(self) -> dict[str, str]:
        """``{column: pandas dtype}`` of the output, derived from :attr:`outputs` (a ``list<string>``
        column is an ``object`` column of lists)."""
        return output_dtypes(self.outputs)

    @property
    def arrow_schema(self):
        """The Arrow schema of the published Parquet file: the declared columns then ``run_id``, each
        with its declared type (lists keep ``list<string>`` when empty) and its meaning and unit as
        field metadata."""
        return output_arrow_schema(self.outputs, (RUN_ID,))

    def output_column(self, name: str) -> OutputColumn:
        return next(c for c in self.outputs if c.name == name)

    @property
    def mends_groups(self) -> bool:
        """Whether a group split between partitions can be mended after the fact.

        True when the output has one row per group keyed by it (the default
        combine, ``output_id == group_key``): the rows of a split group are
        dropped and the group is read again whole.  The runner then streams the
        source unsorted instead of paying for a server-side sort.
        """
        return (self.group_key is not None and self.combine is None and self.regroup is None
                and self.output_id == self.group_key)

    @property
    def parquet_name(self) -> str:
        return f"{self.parquet or self.name}.parquet"

    def combine_partials(self, partials: list) -> tuple[Any, dict[str, int]]:
        """(output frame conformed to ``output_types``, excluded counts) from the partials."""
        combined = self.combine(partials) if self.combine else concat_by_id(self, partials)
        frame, excluded = combined if isinstance(combined, tuple) else (combined, {})
        return conform(frame, self.output_types), dict(excluded)

    def finish(self, partials: list, map_units: Callable[[Callable, list], list] | None = None
               ) -> tuple[Any, dict[str, int]]:
        """(output frame, excluded counts) from the partitions' partials: regroup and
        ``per_group`` when declared (each unit through ``map_units(per_group, units)``,
        by default here, one after the other), then combine."""
        early: dict[str, int] = {}
        if self.regroup is not None and self.per_group is not None:  # declared together (__post_init__)
            units, early = self.regroup(list(partials))
            units = list(units)
            partials = (map_units or _map_here)(self.per_group, units) if units else []
        frame, excluded = self.combine_partials(partials)
        for reason, count in early.items():
            excluded[reason] = excluded.get(reason, 0) + int(count)
        return frame, excluded

    def apply(self, frame, side=None) -> Any:
        """The partition function on one frame (with the side frame when a side input is declared)."""
        return self.partition(frame, side) if self.join is not None else self.partition(frame)

    def run_frames(self, frames: list, side=None) -> tuple[Any, dict[str, int]]:
        """The whole analysis in this process on in-memory ``frames`` (one per partition)
        and, when declared, the ``side`` frame as read (it is prepared here): what the runner
        computes, without Dask or MongoDB."""
        if self.join is not None:
            side = self.join.prepared(self.join.schema.empty() if side is None else side)
        return self.finish([self.apply(f, side) for f in frames])

    def describe(self) -> dict:
        described: dict[str, Any] = {"name": self.name, "source": self.source, "output": self.output,
                     "parquet": self.parquet_name, "description": self.description,
                     "questions": list(self.questions), "indexes": [[list(k) for k in ix] for ix in self.indexes],
                     "outputs": [c._asdict() for c in self.outputs]}
        if self.join is not None:
            described["join"] = {"source": self.join.source, "key": self.join.key}
        return described


def _map_here(function: Callable, units: list) -> list:
    return [function(unit) for unit in units]


def gather_partials(partials, reasons=()) -> tuple[list, dict[str, int]]:
    """The non-empty frames of ``(frame, {reason: count})`` partials, and the counts added up
    (every one of ``reasons`` present, 0 when none was counted)."""
    excluded = dict.fromkeys(reasons, 0)
    frames = []
    for frame, counts in partials:
        if len(frame):
            frames.append(frame)
        for reason, n in counts.items():
            excluded[reason] = excluded.get(reason, 0) + int(n)
    return frames, excluded


def concat_by_id(analysis: Analysis, partials: list):
    """The default combine: the partitions' frames end to end, sorted by the output id.

    An id met in two partitions is an error (the partitioning split a group).
    """
    import pandas as pd  # noqa: PLC0415 - lazy: --help reads analytics.registry (the plugin); pandas costs 0.3 s

    frames = [p for p in partials if len(p)]
    if not frames:
        return empty(analysis.output_types)
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(analysis.output_id, kind="mergesort").reset_index(drop=True)
    if frame[analysis.output_id].duplicated().any():
        raise AnalysisError(f"{analysis.name}: a {analysis.output_id} appeared in more than one partition")
    return frame


def output_table(analysis: Analysis, frame, run_id: str):
    """``frame`` and its ``run_id`` as the Arrow table the Parquet file holds, of the declared schema
    (:attr:`Analysis.arrow_schema`): a list column is ``list<string>`` even when every
    list is empty or there is no row (inferred from the values it would be ``list<null>``, or ``null``)."""
    import pyarrow as pa  # noqa: PLC0415 - lazy: --help reads analytics.registry (the plugin); pyarrow costs 0.22 s

    schema = analysis.arrow_schema
    frame = frame.loc[:, [name for name in schema.names if name != "run_id"]]
    try:
        return pa.Table.from_pandas(frame.assign(run_id=run_id), schema=schema, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError) as exc:
        raise AnalysisError(f"analysis {analysis.name}: its output does not fit its declared columns: {exc}") from exc


# ------------------------------------------------------------------ the registry
class UnknownAnalysis(UsageError):
    """A name that no declared analysis has; ``known`` lists the names there are."""

    def __init__(self, unknown: list[str], known: list[str]):
        self.unknown, self.known = unknown, known
        super().__init__(f"unknown analysis {', '.join(map(repr, unknown))}; known: {', '.join(known)}")


_FOUND: dict[str, Analysis] | None = None


def _discover() -> dict[str, Analysis]:
    global _FOUND
    if _FOUND is None:
        found: dict[str, Analysis] = {}
        for info in pkgutil.iter_modules(analyses_package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{analyses_package.__name__}.{info.name}")
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


def select_analyses(wanted: Sequence[str] | None) -> list[Analysis]:
    """The named analyses in the order given (all when ``wanted`` is empty or None)."""
    if not wanted:
        return all_analyses()
    unknown = [n for n in wanted if n not in _discover()]
    if unknown:
        raise UnknownAnalysis(unknown, analysis_names())
    return [get_analysis(n) for n in dict.fromkeys(wanted)]
