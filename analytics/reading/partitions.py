"""Parallel, partitioned reads of a MongoDB collection into Dask.

Three steps, each usable alone:

1. :func:`plan_partitions` splits the key into ``n`` roughly equal ranges from
   what the server answers cheaply: the smallest and largest key (index walks
   of one entry) and the quantiles of a ``$sample`` of the key, and returns one
   small, picklable :class:`PartitionSpec` per range.  Ranges are half-open
   ``[lower, upper)`` except the last, whose upper bound is inclusive, so every
   matching document falls in exactly one; a split point is a key value, so
   planning on a grouping field (``key="search_id"`` for ``hits``) keeps each
   group whole in one partition.
2. :func:`read_partition` -- a module-level function a Dask worker can import --
   reads its range through its process's client for the URI in the spec
   (:func:`ingest.store.mongo.shared_client`: one client per worker process), with the
   projection derived from the spec's declared columns, and returns a flat
   :class:`pandas.DataFrame` with exactly those columns and dtypes (so every
   partition, even an empty one, has the same schema; see
   :mod:`ingest.schema`).
3. :func:`read_collection` wraps the specs in ``dask.dataframe.from_map``.

Whether ranges pay at all is the server's business: :mod:`analytics.reading.planning`
asks it by ``explain`` and reads the source as one stream when it cannot seek
or sample the key cheaply (the embedded server).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ingest.errors import AnalysisError, ConfigError
from ingest.schema import Column, Schema, get_path
from ingest.store.mongo import db_errors, shared_client

__all__ = ["PartitionSpec", "plan_partitions", "read_partition", "read_collection", "meta_for", "range_filter"]


def range_filter(query: dict | None, key: str, bounds: dict) -> dict:
    """``query`` and a range on ``key`` as one filter (one ``$and`` only when the two clash)."""
    if not query:
        return {key: bounds}
    if key in query or any(k.startswith("$") for k in query):
        return {"$and": [query, {key: bounds}]}
    return {**query, key: bounds}


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
    #: a chunk of a hashed shard key (:mod:`analytics.reading.chunks`): ``lower``/``upper`` are hashed
    #: values (or MinKey/MaxKey), read with ``hint`` on the hashed index and ``min``/``max``
    hashed: bool = False
    shard: str | None = None

    def filter(self) -> dict:
        """The MongoDB filter selecting exactly this partition's documents (with :meth:`find_options`)."""
        if self.hashed:
            return dict(self.query or {})
        bounds = {"$gte": self.lower, ("$lte" if self.upper_inclusive else "$lt"): self.upper}
        return range_filter(self.query, self.key, bounds)

    def find_options(self) -> dict:
        """The ``find`` options besides filter and projection: for a hashed chunk, the index and its bounds."""
        if not self.hashed:
            return {}
        return {"hint": [(self.key, "hashed")], "min": {self.key: self.lower}, "max": {self.key: self.upper}}

    def describe(self) -> str:
        if self.hashed:
            return (f"{self.db_name}.{self.collection} chunk {self.index} on {self.shard}: hashed "
                    f"{self.key} in [{self.lower!r}, {self.upper!r})")
        close = "]" if self.upper_inclusive else ")"
        return (f"{self.db_name}.{self.collection} partition {self.index} "
                f"{self.key} in [{self.lower!r}, {self.upper!r}{close}")


#: ``$sample`` size: this many keys per partition, within these limits.
SAMPLE_PER_PARTITION = 64
MIN_SAMPLE = 256
MAX_SAMPLE = 8_192


def _family(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _comparable(values: list) -> bool:
    """True if all boundary values are of one comparable family (str, number, ...)."""
    families = {_family(v) for v in values}
    return len(families) == 1 and families <= {"str", "number", "datetime", "ObjectId"}


def _edge(coll, query: dict | None, key: str, direction: int):
    """The smallest (1) or largest (-1) ``key`` value among the matching documents (an index walk of one)."""
    projection = {key: 1} if key == "_id" else {key: 1, "_id": 0}
    for doc in coll.find(query or {}, projection, sort=[(key, direction)], limit=1):
        return True, get_path(doc, key)
    return False, None


def _sample_splits(coll, query: dict | None, key: str, n: int, lower, upper) -> list:
    """Up to ``n - 1`` increasing split points strictly inside ``(lower, upper]``, from a ``$sample``."""
    size = min(max(SAMPLE_PER_PARTITION * n, MIN_SAMPLE), MAX_SAMPLE)
    pipeline: list[dict] = [{"$sample": {"size": size}}]  # first, so MongoDB uses a random cursor
    if query:
        pipeline.append({"$match": query})
    pipeline.append({"$project": {"_id": 0, "k": f"${key}"}})
    family = _family(lower)
    values = sorted(v for v in (d.get("k") for d in coll.aggregate(pipeline)) if _family(v) == family)
    splits: list = []
    for i in range(1, n):
        if not values:
            break
        point = values[min(len(values) - 1, i * len(values) // n)]
        if lower < point <= upper and (not splits or point > splits[-1]):
            splits.append(point)
    return splits


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

    The outer bounds are the smallest and largest ``key`` (two index walks of
    one entry on MongoDB); the split points between them are quantiles of a
    ``$sample`` of the key (a pseudo-random cursor on MongoDB), so planning
    reads a few thousand keys, never the collection.  A split point is a key
    value and ranges are half-open, so equal keys always share a range: planning
    on a grouping field keeps each group whole.  Returns ``[]`` for an empty
    result.  Every matching document must have ``key`` set, with one comparable
    BSON type (strings, say): since an index orders types one after another,
    the smallest and largest keys being of one family proves that all are;
    otherwise :class:`AnalysisError` is raised.  The projection is derived from
    ``columns`` unless given.
    """
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"number of partitions must be a positive integer, got {n!r}")
    schema = Schema(columns)
    if projection is None and len(schema):
        projection = schema.projection()

    with db_errors(f"planning partitions of {db_name}.{collection} on {key}", uri=uri):
        coll = shared_client(uri)[db_name][collection]
        found, lower = _edge(coll, query, key, 1)
        if not found:
            return []
        _, upper = _edge(coll, query, key, -1)
        if not _comparable([lower, upper]):
            raise AnalysisError(
                f"cannot partition {db_name}.{collection} on {key!r}: it is missing or of mixed "
                f"types (smallest {lower!r}, largest {upper!r})"
            )
        splits = _sample_splits(coll, query, key, n, lower, upper) if n > 1 and lower != upper else []
    bounds = [lower, *splits, upper]
    last = len(bounds) - 2
    return [
        PartitionSpec(
            uri=uri, db_name=db_name, collection=collection,
            lower=bounds[i], upper=bounds[i + 1], upper_inclusive=(i == last),
            query=query or None, projection=projection, key=key, columns=schema.columns, index=i,
        )
        for i in range(last + 1)
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
    schema = Schema(spec.columns)
    with db_errors(f"reading {spec.describe()}", uri=spec.uri):
        cursor = shared_client(spec.uri)[spec.db_name][spec.collection].find(spec.filter(), spec.projection,
                                                                             **spec.find_options())
        if len(schema):
            return schema.frame(schema.read(cursor))
        docs = list(cursor)
    import pandas as pd  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); pandas costs 0.3 s

    return pd.json_normalize(docs) if docs else pd.DataFrame()


def read_collection(specs: list[PartitionSpec], meta=None):
    """A Dask DataFrame with one partition per spec (one empty partition if none).

    Note that Dask (``dataframe.convert-string``, on by default) turns the
    ``str`` columns into ``string[pyarrow]``, in ``meta`` and partitions alike.
    """
    import dask.dataframe as dd  # noqa: PLC0415 - lazy: analytics.runner imports this module and must stay light (tests/test_analytics.py); dask.dataframe costs 1 s

    specs = list(specs)
    if meta is None:
        if not specs:
            raise ConfigError("read_collection needs meta when there are no partitions")
        meta = meta_for(specs[0].columns)
    if not specs:
        return dd.from_pandas(meta, npartitions=1)
    label = f"read-{specs[0].collection}"
    return dd.from_map(read_partition, specs, meta=meta, label=label, enforce_metadata=False)
