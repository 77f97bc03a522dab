"""Chunk-aligned reads on a sharded cluster: one partition per chunk of the hashed shard key.

Through a ``mongos``, a collection sharded on ``{field: "hashed"}`` is already
cut into chunks, each a range ``[min, max)`` of hashed values held by one
shard (``config.chunks``; since MongoDB 5.0 keyed by the collection's ``uuid``
from ``config.collections``).  Reading one chunk per partition -- ``find`` with
``hint`` on the hashed index and the chunk's ``min``/``max`` as bounds (the
server compares them with the stored hashed keys) -- sends each partition's
query to the one shard that holds it instead of scattering every range query
to all shards, and every group of the shard-key field stays in one partition
(equal values hash alike).  :func:`plan_chunk_partitions` orders the
partitions round-robin across shards, so that the first tasks Dask runs keep
every shard busy.  Elsewhere (a replica set, a standalone, the embedded server, a
collection not sharded on a hashed key) :func:`chunk_table` answers None and
the reader plans as before (:mod:`analytics.reading.planning`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bson import MaxKey, MinKey

from analytics.reading.partitions import PartitionSpec
from ingest.errors import DatabaseError, ServerUnavailable
from ingest.schema import Column, Schema
from ingest.store.mongo import db_errors

log = logging.getLogger(__name__)

__all__ = ["Chunk", "ChunkTable", "chunk_table", "table_from", "plan_chunk_partitions", "interleave"]


@dataclass(frozen=True)
class Chunk:
    lower: Any  # the hashed value (an int64), or MinKey
    upper: Any  # exclusive; or MaxKey
    shard: str


@dataclass(frozen=True)
class ChunkTable:
    field: str  # the hashed shard-key field
    chunks: tuple[Chunk, ...]

    @property
    def shards(self) -> list[str]:
        return sorted({c.shard for c in self.chunks})


def chunk_table(client, db_name: str, collection: str) -> ChunkTable | None:
    """The chunks of ``collection`` when it is sharded on a single hashed field; None otherwise."""
    if client.admin.command("hello").get("msg") != "isdbgrid":
        return None
    config = client["config"]
    try:
        with db_errors(f"reading the chunk table of {db_name}.{collection}"):
            entry = config["collections"].find_one({"_id": f"{db_name}.{collection}"})
            if not entry:
                return None
            selector = ({"uuid": entry["uuid"]} if entry.get("uuid") is not None
                        else {"ns": f"{db_name}.{collection}"})
            rows = list(config["chunks"].find(selector, {"min": 1, "max": 1, "shard": 1}).sort("min", 1))
    except ServerUnavailable:
        raise
    except DatabaseError as exc:  # e.g. a user who may not read `config`: plan as elsewhere
        log.warning("cannot read the chunk table of %s.%s (%s); planning without it", db_name, collection, exc)
        return None
    return table_from(entry, rows)


def table_from(entry: dict, rows: list[dict]) -> ChunkTable | None:
    """A :class:`ChunkTable` from a ``config.collections`` entry and its ``config.chunks`` rows (in any order).

    None unless the key is one hashed field and the chunks cover the whole
    hashed range, MinKey to MaxKey, without gap or overlap.
    """
    if not entry or entry.get("dropped") or not entry.get("key"):
        return None
    key = list(dict(entry["key"]).items())
    if len(key) != 1 or key[0][1] != "hashed":
        return None
    field = key[0][0]
    chunks = [Chunk(r["min"][field], r["max"][field], r["shard"]) for r in rows]
    chunks.sort(key=lambda c: (not isinstance(c.lower, MinKey), -2**63 if isinstance(c.lower, MinKey) else c.lower))
    if not chunks or not isinstance(chunks[0].lower, MinKey) or not isinstance(chunks[-1].upper, MaxKey):
        return None
    if any(a.upper != b.lower for a, b in zip(chunks, chunks[1:])):
        return None
    return ChunkTable(field, tuple(chunks))


def interleave(chunks: Iterable[Chunk]) -> list[Chunk]:
    """Chunks in key order within each shard, taken one shard after another in turn."""
    by_shard: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_shard.setdefault(chunk.shard, []).append(chunk)
    queues = [by_shard[s] for s in sorted(by_shard)]
    out: list[Chunk] = []
    depth = max((len(q) for q in queues), default=0)
    for i in range(depth):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def plan_chunk_partitions(uri: str, db_name: str, collection: str, table: ChunkTable, *,
                          query: dict | None = None, columns: Iterable[Column] = ()) -> list[PartitionSpec]:
    """One partition per chunk, interleaved across shards, each read by hint on the hashed index and min/max."""
    schema = Schema(columns)
    projection = schema.projection() if len(schema) else None
    return [
        PartitionSpec(uri=uri, db_name=db_name, collection=collection, lower=chunk.lower, upper=chunk.upper,
                      upper_inclusive=False, query=query or None, projection=projection, key=table.field,
                      columns=schema.columns, index=i, hashed=True, shard=chunk.shard)
        for i, chunk in enumerate(interleave(table.chunks))
    ]
