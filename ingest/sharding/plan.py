"""Where the documents would land on N shards: a hashed key against a ranged key on the same field.

For each data collection and its shard-key field (:data:`ingest.sharding.collections.KEYS`),
the keys actually loaded (read in the server's natural order, which for a
collection that only grew is the order of arrival) or a generated sample of
sequential keys, with each document's size, are placed two ways:

**hashed** -- MongoDB's even initial split of an empty collection
(:func:`ingest.sharding.collections.hashed_split_points`: one chunk per shard from 7.2,
two before), chunks given to shards in contiguous blocks, each key placed by
its real hashed value (:func:`ingest.sharding.hashkey.hash64`).  Inserts land where
they will stay, so the arrival figure is the at-rest one.

**ranged** -- at rest, chunks split at the key's quantiles once everything is
loaded (the balanced end state: one contiguous range per shard).  While
loading, in arrival order, MongoDB's own rules: an unsplit collection is one
chunk on the primary shard; a chunk larger than the range size
(``chunk_bytes``, MongoDB's default 128 MB) is split at its median key; the
balancer moves a chunk from the fullest to the emptiest shard when their data
differ by three range sizes or more.  Every insert goes to the shard that owns
its key's chunk at that moment.

Figures per placement: documents and bytes per shard, max/mean and the
coefficient of variation (population standard deviation / mean) of both, and
the share of the last 10 % of inserts that went to the busiest shard.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import bson
from bson import ObjectId
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from ingest.errors import DatabaseError, ServerUnavailable
from ingest.sharding.collections import chunks_per_shard, hashed_split_points
from ingest.sharding.hashkey import hash64
from ingest.store.mongo import db_errors

__all__ = ["KeySample", "Placement", "read_keys", "generated_keys", "hashed_placement", "ranged_placement",
           "plan_collection", "sort_key", "DEFAULT_CHUNK_BYTES", "LAST_SHARE"]

DEFAULT_CHUNK_BYTES = 128 * 2**20  # MongoDB's default range (chunk) size since 6.0
LAST_SHARE = 0.10  # "the last 10 % of inserts"


@dataclass
class KeySample:
    collection: str
    field: str
    keys: list  # in arrival order
    sizes: list[int]  # BSON bytes per document
    source: str  # "loaded" or "generated"


@dataclass
class Placement:
    scheme: str  # "hashed" or "ranged"
    docs: list[int]
    bytes: list[int]
    last_share: float  # share of the last 10 % of inserts on the busiest shard
    last_shard: int
    chunks: int
    detail: dict = field(default_factory=dict)

    @staticmethod
    def _ratio(values: list[int]) -> float:
        mean = sum(values) / len(values) if values else 0.0
        return max(values) / mean if mean else float("nan")

    @staticmethod
    def _cv(values: list[int]) -> float:
        mean = sum(values) / len(values) if values else 0.0
        if not mean:
            return float("nan")
        return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean

    @property
    def max_over_mean(self) -> float:
        return self._ratio(self.docs)

    @property
    def cv(self) -> float:
        return self._cv(self.docs)

    @property
    def bytes_max_over_mean(self) -> float:
        return self._ratio(self.bytes)

    @property
    def bytes_cv(self) -> float:
        return self._cv(self.bytes)

    def as_dict(self) -> dict:
        return {"scheme": self.scheme, "docs": self.docs, "bytes": self.bytes,
                "max_over_mean": self.max_over_mean, "cv": self.cv,
                "bytes_max_over_mean": self.bytes_max_over_mean, "bytes_cv": self.bytes_cv,
                "last_10pct_on_busiest_shard": self.last_share, "busiest_shard": self.last_shard,
                "chunks": self.chunks, **self.detail}


# ------------------------------------------------------------------ the keys
def read_keys(db, collection: str, key_field: str) -> KeySample:
    """The shard-key value and BSON size of every document, in the server's natural order.

    One aggregation (``$bsonSize``) where the server has it; otherwise the raw
    documents are read and measured here.  A document without the field has
    the key null, as MongoDB places it.
    """
    keys: list = []
    sizes: list[int] = []
    try:
        with db_errors(f"reading the {key_field} keys of {collection}"):
            cursor = db[collection].aggregate(
                [{"$project": {"_id": 0, "k": f"${key_field}", "s": {"$bsonSize": "$$ROOT"}}}], batchSize=10_000)
            for doc in cursor:
                keys.append(doc.get("k"))
                sizes.append(int(doc["s"]))
    except ServerUnavailable:
        raise
    except DatabaseError:  # no $bsonSize here: measure the raw documents instead
        keys, sizes = [], []
        raw = db.get_collection(collection, codec_options=CodecOptions(document_class=RawBSONDocument))
        for doc in raw.find({}, batch_size=10_000):
            keys.append(doc.get(key_field))
            sizes.append(len(doc.raw))
    return KeySample(collection, key_field, keys, sizes, "loaded")


def generated_keys(collection: str, key_field: str, count: int, size: int = 1024) -> KeySample:
    """``count`` sequential keys, as an id that grows with time would arrive."""
    return KeySample(collection, key_field, [f"{collection}-{i:012d}" for i in range(count)], [size] * count,
                     "generated")


def sort_key(value: Any) -> tuple:
    """A key ordering BSON values as MongoDB does: by canonical type, then by value."""
    if value is None:
        return (5, 0)
    if isinstance(value, bool):
        return (40, value)
    if isinstance(value, (int, float)):
        return (10, -math.inf if isinstance(value, float) and math.isnan(value) else value)
    if isinstance(value, str):
        return (15, value)
    if isinstance(value, ObjectId):
        return (35, value.binary)
    to_decimal = getattr(value, "to_decimal", None)
    if to_decimal is not None:
        number = to_decimal()
        return (10, -math.inf if number.is_nan() else float(number))
    return (50, bson.encode({"": value}))


# ------------------------------------------------------------------ placements
def _last_share(shard_of_insert: list[int], shards: int) -> tuple[float, int]:
    tail = shard_of_insert[len(shard_of_insert) - max(1, math.ceil(len(shard_of_insert) * LAST_SHARE)):]
    counts = [0] * shards
    for shard in tail:
        counts[shard] += 1
    busiest = max(range(shards), key=counts.__getitem__)
    return (counts[busiest] / len(tail) if tail else float("nan")), busiest


def hashed_placement(sample: KeySample, shards: int, version: tuple[int, int] = (8, 0)) -> Placement:
    per = chunks_per_shard(version)
    points = hashed_split_points(per * shards)
    docs, nbytes, arrival = [0] * shards, [0] * shards, []
    for key, size in zip(sample.keys, sample.sizes):
        shard = (bisect_right(points, hash64(key)) // per) % shards
        docs[shard] += 1
        nbytes[shard] += size
        arrival.append(shard)
    share, busiest = _last_share(arrival, shards)
    return Placement("hashed", docs, nbytes, share, busiest, per * shards,
                     {"chunks_per_shard": per, "split_points": points})


def ranged_placement(sample: KeySample, shards: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Placement:
    ordered = sorted((sort_key(k), size) for k, size in zip(sample.keys, sample.sizes))
    n = len(ordered)
    bounds = [ordered[min(n - 1, round(i * n / shards))][0] for i in range(1, shards)] if n else []
    docs, nbytes = [0] * shards, [0] * shards
    for key, size in ordered:
        shard = bisect_right(bounds, key)
        docs[shard] += 1
        nbytes[shard] += size
    arrival, chunks = _load_in_arrival_order(sample, shards, chunk_bytes)
    share, busiest = _last_share(arrival, shards)
    return Placement("ranged", docs, nbytes, share, busiest, shards,
                     {"chunks_while_loading": chunks, "chunk_bytes": chunk_bytes})


def _load_in_arrival_order(sample: KeySample, shards: int, chunk_bytes: int) -> tuple[list[int], int]:
    """The shard each insert went to under MongoDB's split and balancer rules (module docstring)."""
    lows: list[tuple] = []  # the lower bound of every chunk but the first (MinKey)
    owner, size = [0], [0]  # per chunk: shard, bytes, keys
    members: list[list[tuple[tuple, int]]] = [[]]
    shard_bytes = [0] * shards
    arrival = []
    for key, nbytes in zip(sample.keys, sample.sizes):
        skey = sort_key(key)
        chunk = bisect_right(lows, skey)
        arrival.append(owner[chunk])
        size[chunk] += nbytes
        shard_bytes[owner[chunk]] += nbytes
        members[chunk].append((skey, nbytes))
        if size[chunk] > chunk_bytes:
            _split(chunk, lows, owner, size, members)
        _balance(owner, size, shard_bytes, chunk_bytes)
    return arrival, len(owner)


def _split(chunk: int, lows: list, owner: list, size: list, members: list) -> None:
    keys = sorted(members[chunk])
    median = keys[len(keys) // 2][0]
    if median == keys[0][0]:  # one value fills the chunk: MongoDB cannot split it (a jumbo chunk)
        return
    low = [m for m in keys if m[0] < median]
    high = [m for m in keys if m[0] >= median]
    lows.insert(chunk, median)
    owner.insert(chunk + 1, owner[chunk])
    members[chunk:chunk + 1] = [low, high]
    size[chunk:chunk + 1] = [sum(b for _, b in low), sum(b for _, b in high)]


def _balance(owner: list, size: list, shard_bytes: list, chunk_bytes: int) -> None:
    fullest = max(range(len(shard_bytes)), key=shard_bytes.__getitem__)
    emptiest = min(range(len(shard_bytes)), key=shard_bytes.__getitem__)
    if shard_bytes[fullest] - shard_bytes[emptiest] < 3 * chunk_bytes:
        return
    chunk = next(i for i, s in enumerate(owner) if s == fullest)  # the donor's lowest range
    owner[chunk] = emptiest
    shard_bytes[fullest] -= size[chunk]
    shard_bytes[emptiest] += size[chunk]


def plan_collection(sample: KeySample, shards: int, version: tuple[int, int] = (8, 0),
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> dict:
    """Both placements of one collection's keys, as a dict for reports and JSON."""
    if shards < 1:
        raise ValueError("at least one shard")
    return {"collection": sample.collection, "key": sample.field, "source": sample.source,
            "documents": len(sample.keys), "bytes": sum(sample.sizes),
            "hashed": hashed_placement(sample, shards, version), "ranged": ranged_placement(sample, shards, chunk_bytes)}


def rows(plans: Iterable[dict]) -> list[dict]:
    """One table row per collection and placement."""
    out = []
    for plan in plans:
        for scheme in ("hashed", "ranged"):
            p: Placement = plan[scheme]
            out.append({"collection": plan["collection"], "key": f"{plan['key']} ({scheme})",
                        "docs": "/".join(str(d) for d in p.docs), "max_mean": f"{p.max_over_mean:.3f}",
                        "cv": f"{p.cv:.3f}", "mb": "/".join(f"{b / 2**20:.1f}" for b in p.bytes),
                        "bytes_max_mean": f"{p.bytes_max_over_mean:.3f}",
                        "last": f"{100 * p.last_share:.0f} % (shard {p.last_shard})"})
    return out


def write_png(plans: list[dict], path, shards: int) -> None:
    """One panel per collection: documents per shard, hashed beside ranged (at rest), and the
    share of the last 10 % of inserts on the busiest shard in each panel's title."""
    import matplotlib  # noqa: PLC0415 - lazy: the shard-plan experiment draws nothing; matplotlib and pyplot cost 0.3 s (0.7 s cold)

    matplotlib.use("Agg")  # before pyplot: no display
    import matplotlib.pyplot as plt  # noqa: PLC0415 - lazy: the shard-plan experiment draws nothing; matplotlib and pyplot cost 0.3 s (0.7 s cold)

    fig, axes = plt.subplots(1, max(1, len(plans)), figsize=(4.2 * max(1, len(plans)), 3.8), squeeze=False)
    width = 0.4
    for ax, plan in zip(axes[0], plans):
        x = list(range(shards))
        for offset, scheme, colour in ((-width / 2, "hashed", "#1f77b4"), (width / 2, "ranged", "#ff7f0e")):
            p: Placement = plan[scheme]
            ax.bar([i + offset for i in x], p.docs, width, color=colour,
                   label=f"{scheme}: max/mean {p.max_over_mean:.2f}, last 10 % {100 * p.last_share:.0f} % on one")
        ax.set_xticks(x, [f"shard {i}" for i in x])
        ax.set_title(f"{plan['collection']} by {plan['key']} ({plan['documents']:,} docs, {plan['source']})",
                     fontsize=9)
        ax.set_ylabel("documents at rest")
        ax.legend(fontsize=7, loc="lower center")
    fig.suptitle(f"hashed vs ranged shard key on {shards} shards", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
