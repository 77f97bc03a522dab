"""Parallel, partitioned reads of a MongoDB collection into Dask.

Three steps, each usable alone:

1. :func:`plan_partitions` asks the server for ``n`` roughly equal key ranges
   with ``$bucketAuto`` and returns one small, picklable :class:`PartitionSpec`
   per range.  Ranges are half-open ``[lower, upper)`` except the last, whose
   upper bound is inclusive, so every matching document falls in exactly one.
   ``$bucketAuto`` never splits equal key values across buckets, so planning on
   a grouping field (``key="search_id"`` for ``hits``) keeps each group whole in
   one partition.
2. :func:`read_partition` -- a module-level function a Dask worker can import --
   reads its range through its process's client for the URI in the spec
   (:func:`ingest.mongo.shared_client`: one client per worker process), with the
   projection derived from the spec's declared columns, and returns a flat
   :class:`pandas.DataFrame` with exactly those columns and dtypes (so every
   partition, even an empty one, has the same schema; see
   :mod:`analytics.schema`).
3. :func:`read_collection` wraps the specs in ``dask.dataframe.from_map``.

SecantusDB note: its planner answers range predicates on ``_id`` with a
collection scan (no ``_id`` index range), while ranges on a *secondary* index
use that index.  Planning on an indexed field (e.g. ``search_id``) therefore
makes each partition read only its own range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from analytics.schema import Column, Schema
from ingest.errors import AnalysisError, ConfigError

__all__ = ["PartitionSpec", "plan_partitions", "read_partition", "read_collection", "meta_for"]


@dataclass(frozen=True)
class PartitionSpec:
    """One key range of one collection: everything a worker needs to read it."""

    uri: str
    db_name: str
    collection: str
    lower: Any
    upper: Any
    upper_inclusive: bool
    query: dict | None = None
    projection: dict | None = None
    key: str = "_id"
    columns: tuple[Column, ...] = field(default=())
    index: int = 0

    def filter(self) -> dict:
        """The MongoDB filter selecting exactly this partition's documents."""
        bounds = {"$gte": self.lower, ("$lte" if self.upper_inclusive else "$lt"): self.upper}
        range_filter = {self.key: bounds}
        if self.query:
            return {"$and": [self.query, range_filter]}
        return range_filter

    def describe(self) -> str:
        close = "]" if self.upper_inclusive else ")"
        return (f"{self.db_name}.{self.collection} partition {self.index} "
                f"{self.key} in [{self.lower!r}, {self.upper!r}{close}")


def _comparable(values: list) -> bool:
    """True if all boundary values are of one comparable family (str, number, ...)."""

    def family(value):
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, (int, float)):
            return "number"
        return type(value).__name__

    families = {family(v) for v in values}
    return len(families) == 1 and families <= {"str", "number", "datetime", "ObjectId"}


def plan_partitions(
    uri: str,
    db_name: str,
    collection: str,
    n: int,
    query: dict | None = None,
    *,
    key: str = "_id",
    columns: Iterable[Column] = (),
    projection: dict | None = None,
) -> list[PartitionSpec]:
    """Split ``collection`` (documents matching ``query``) into at most ``n`` key ranges.

    Uses ``$bucketAuto`` on ``key``; returns ``[]`` for an empty result.  Every
    matching document must have ``key`` set, with one comparable BSON type
    across the collection (string ``_id`` values, say); otherwise ranges could
    not cover them all and :class:`AnalysisError` is raised.  The projection is
    derived from ``columns`` unless given.
    """
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"number of partitions must be a positive integer, got {n!r}")
    schema = Schema(columns)
    if projection is None and len(schema):
        projection = schema.projection()
    from ingest.mongo import db_errors, shared_client

    pipeline: list[dict] = []
    if query:
        pipeline.append({"$match": query})
    pipeline.append({"$bucketAuto": {"groupBy": f"${key}", "buckets": n}})
    with db_errors(f"planning partitions of {db_name}.{collection} on {key}", uri=uri):
        coll = shared_client(uri)[db_name][collection]
        buckets = list(coll.aggregate(pipeline, allowDiskUse=True))
    if not buckets:
        return []
    bounds = [b["_id"]["min"] for b in buckets] + [buckets[-1]["_id"]["max"]]
    if not _comparable(bounds):
        raise AnalysisError(
            f"cannot partition {db_name}.{collection} on {key!r}: it is missing or of mixed "
            f"types (bucket bounds {bounds[0]!r} .. {bounds[-1]!r})"
        )
    last = len(buckets) - 1
    return [
        PartitionSpec(
            uri=uri, db_name=db_name, collection=collection,
            lower=bucket["_id"]["min"], upper=bucket["_id"]["max"], upper_inclusive=(i == last),
            query=query or None, projection=projection, key=key, columns=schema.columns, index=i,
        )
        for i, bucket in enumerate(buckets)
    ]


def meta_for(columns: Iterable[Column]):
    """The empty frame every :func:`read_partition` result conforms to (Dask ``meta``)."""
    return Schema(columns).empty()


def read_partition(spec: PartitionSpec):
    """Read one partition into a flat DataFrame through this process's client.

    With declared ``columns`` the frame has exactly those columns and dtypes.
    Without, nested documents are flattened with ``pandas.json_normalize``
    (dotted column names, dtypes inferred per partition -- give
    :func:`read_collection` an explicit ``meta`` then).
    """
    from ingest.mongo import db_errors, shared_client

    schema = Schema(spec.columns)
    with db_errors(f"reading {spec.describe()}", uri=spec.uri):
        cursor = shared_client(spec.uri)[spec.db_name][spec.collection].find(spec.filter(), spec.projection)
        if len(schema):
            return schema.frame(schema.read(cursor))
        docs = list(cursor)
    import pandas as pd

    return pd.json_normalize(docs) if docs else pd.DataFrame()


def read_collection(specs: list[PartitionSpec], meta=None):
    """A Dask DataFrame with one partition per spec (one empty partition if none).

    Note that Dask (``dataframe.convert-string``, on by default) turns the
    ``str`` columns into ``string[pyarrow]``, in ``meta`` and partitions alike.
    """
    import dask.dataframe as dd

    specs = list(specs)
    if meta is None:
        if not specs:
            raise ConfigError("read_collection needs meta when there are no partitions")
        meta = meta_for(specs[0].columns)
    if not specs:
        return dd.from_pandas(meta, npartitions=1)
    label = f"read-{specs[0].collection}"
    return dd.from_map(read_partition, specs, meta=meta, label=label, enforce_metadata=False)
