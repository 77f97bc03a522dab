"""Hashed shard keys: which key each collection gets and why, and sharding a real cluster.

The study's keys grow with time (search ids, material ids), so a *ranged* key
would send every new document to the shard holding the top chunk.  Every data
collection is therefore sharded on a **hashed** key (:data:`KEYS`):

* ``hits`` on hashed ``search_id``: the analyst's common query is "the hits of
  this search" (and ``best_hits`` groups by it), so one search's hits stay on
  one shard and that query goes to one shard; hits arrive search by search, and
  hashing spreads consecutive searches over all shards;
* ``searches``, ``materials``, ``tasks`` on hashed ``_id``: they are read by
  id (a material, a task, a search), and their ids arrive in order.

A write that upserts into a sharded collection must name the full shard key
in its filter: :func:`ingest.store.mongo.key_filter` builds it (``_id`` plus the key
field; named here too, for the loader).

:func:`inspect` reads what a cluster is (through ``mongos``: version, shards,
each collection's state and zones); :func:`plan_commands` turns that into the
exact command documents; :func:`shard` sends them, refusing up-front on a
server that is not a ``mongos`` (the embedded server) and per collection
when one is sharded on another key, or holds documents where MongoDB would
pre-split only an empty collection.  Version rules (MongoDB's manual and
``initial_split_policy.cpp``): ``enableSharding`` is needed before 6.0; an
empty collection with a hashed key is pre-split into ``numInitialChunks``
chunks before 7.2 (we ask for two per shard, the old default) and into one
chunk per shard from 7.2 on (``numInitialChunks`` deprecated, then ignored);
where zones are defined, ``presplitHashedZones`` splits along them instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bson import json_util

from ingest.errors import ConfigError, SciIngestError, UnsupportedFeature
from ingest.sharding.hashkey import INT64_MAX
from ingest.store.catalog import HITS, MATERIALS, SEARCHES, SHARD_KEYS, TASKS
from ingest.store.mongo import db_errors, key_filter
from ingest.store.servers import describe

__all__ = ["KEYS", "key_filter", "ClusterState", "CollectionState", "Command", "inspect", "plan_commands",
           "run_commands", "shard", "ShardOutcome", "hashed_split_points", "chunks_per_shard"]

#: Why each collection has its key (the keys themselves: :data:`ingest.store.catalog.SHARD_KEYS`).
WHY = {
    HITS: "one search's hits on one shard: 'the hits of search X' and best_hits go to one shard; "
          "consecutive searches spread by the hash",
    SEARCHES: "read by id; ids arrive in order, the hash spreads them",
    MATERIALS: "read by material id; new ids arrive in order, the hash spreads them",
    TASKS: "read by task id; new ids arrive in order, the hash spreads them",
}
KEYS: dict[str, tuple[str, str]] = {coll: (key, WHY[coll]) for coll, key in SHARD_KEYS.items()}


def version_tuple(text: str) -> tuple[int, int]:
    parts = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in str(text).split(".")[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def chunks_per_shard(version: tuple[int, int]) -> int:
    """Chunks per shard of MongoDB's even initial split of an empty hashed collection."""
    return 1 if version >= (7, 2) else 2


def hashed_split_points(chunks: int) -> list[int]:
    """MongoDB's split points for ``chunks`` initial chunks of a hashed key (symmetric around 0).

    ``InitialSplitPolicy::calculateHashedSplitPoints``: the interval is
    ``(INT64_MAX // chunks) * 2``; an even count splits at 0 and at +-k
    intervals, an odd one at +-(interval/2 + k intervals).
    """
    if chunks < 1:
        raise ValueError("at least one chunk")
    if chunks == 1:
        return []
    interval = (INT64_MAX // chunks) * 2
    points, current = [], 0
    if chunks % 2 == 0:
        points.append(0)
        current += interval
    else:
        current += interval // 2
    for _ in range((chunks - 1) // 2):
        points += [current, -current]
        current += interval
    return sorted(points)


# ------------------------------------------------------------------ the cluster as it is
@dataclass
class CollectionState:
    exists: bool = False
    empty: bool = True
    sharded_key: dict | None = None  # the key it is sharded on, if it is
    zones: int = 0  # zone ranges defined for it


@dataclass
class ClusterState:
    kind: str  # "mongos", or what the server is otherwise
    version: tuple[int, int]
    version_text: str
    shards: list[str]
    collections: dict[str, CollectionState] = field(default_factory=dict)

    @property
    def is_mongos(self) -> bool:
        return self.kind == "mongos"


def inspect(client, db_name: str, *, version: str | None = None, shards: int | None = None) -> ClusterState:
    """What the server behind ``client`` is, and each data collection's state there.

    Off a ``mongos`` (``--dry-run`` against the embedded server) the state is
    that of a new cluster: ``shards`` shards, empty collections, the server's
    MongoDB version unless ``version`` is given.
    """
    info = describe(client)
    state = ClusterState(kind="mongos" if info.sharding else info.label(), version=version_tuple(version or info.version),
                         version_text=version or info.version, shards=[])
    if not state.is_mongos:  # a plan for a new cluster: this server's own collections say nothing about it
        state.shards = [f"shard{i}" for i in range(shards or 0)]
        state.collections = {coll: CollectionState() for coll in KEYS}
        return state
    db, config = client[db_name], client["config"]
    with db_errors(f"reading the sharding state of {db_name}"):
        names = set(db.list_collection_names())
        state.shards = sorted(s["_id"] for s in client.admin.command("listShards")["shards"])
        for coll in KEYS:
            found = CollectionState(exists=coll in names)
            found.empty = not found.exists or db[coll].find_one({}, {"_id": 1}) is None
            entry = config["collections"].find_one({"_id": f"{db_name}.{coll}"})
            if entry and not entry.get("dropped") and entry.get("key"):
                found.sharded_key = dict(entry["key"])
            found.zones = config["tags"].count_documents({"ns": f"{db_name}.{coll}"})
            state.collections[coll] = found
    return state


# ------------------------------------------------------------------ the commands
@dataclass(frozen=True)
class Command:
    database: str  # where it runs: "admin" or the data database
    document: dict
    collection: str | None = None  # the collection it is for (None: the database)

    def describe(self) -> str:
        return f"{self.database}: {json_util.dumps(self.document)}"


@dataclass
class ShardOutcome:
    collection: str
    key: dict
    status: str  # "planned", "sharded", "already sharded", "refused"
    reason: str = ""


def plan_commands(db_name: str, state: ClusterState) -> tuple[list[Command], list[ShardOutcome]]:
    """The command documents that shard ``db_name``'s collections, and what each collection gets.

    A collection already sharded on its key needs nothing; one sharded on
    another key, or holding documents while the version pre-splits only empty
    collections, is refused (with the reason) and gets no command.
    """
    commands: list[Command] = []
    outcomes: list[ShardOutcome] = []
    if state.version < (6, 0):
        commands.append(Command("admin", {"enableSharding": db_name}))
    for coll, (field_name, _) in KEYS.items():
        key = {field_name: "hashed"}
        found = state.collections.get(coll, CollectionState())
        if found.sharded_key is not None:
            if found.sharded_key == key:
                outcomes.append(ShardOutcome(coll, key, "already sharded", "on the same key: nothing to do"))
            else:
                outcomes.append(ShardOutcome(coll, key, "refused",
                                             f"already sharded on {found.sharded_key}, not {key}: a shard key is "
                                             "changed with reshardCollection, not here"))
            continue
        if not found.empty:
            outcomes.append(ShardOutcome(coll, key, "refused",
                                         "not empty: MongoDB splits a hashed key evenly only on an empty "
                                         "collection (shard before loading)"))
            continue
        commands.append(Command(db_name, {"createIndexes": coll,
                                          "indexes": [{"key": key, "name": f"{field_name}_hashed"}]}, coll))
        document: dict[str, Any] = {"shardCollection": f"{db_name}.{coll}", "key": key}
        if found.zones:
            document["presplitHashedZones"] = True
        elif state.version < (7, 2):
            document["numInitialChunks"] = chunks_per_shard(state.version) * max(1, len(state.shards))
        commands.append(Command("admin", document, coll))
        outcomes.append(ShardOutcome(coll, key, "planned", _split_words(found, state)))
    return commands, outcomes


def _split_words(found: CollectionState, state: ClusterState) -> str:
    if found.zones:
        return f"pre-split along its {found.zones} zone range(s)"
    per = chunks_per_shard(state.version)
    total = f" ({per * len(state.shards)} in all)" if state.shards else ""
    return f"pre-split into {'one chunk' if per == 1 else f'{per} chunks'} per shard{total}"


def run_commands(client, commands: list[Command]) -> list[dict]:
    """Send ``commands`` in order; the replies.  A refusal raises (through :func:`ingest.store.mongo.db_errors`)."""
    replies = []
    for command in commands:
        name = next(iter(command.document))
        with db_errors(f"{name} {command.collection or command.database}", feature="sharding"):
            replies.append(client[command.database].command(command.document))
    return replies


def shard(client, db_name: str, *, dry_run: bool = False, version: str | None = None,
          shards: int | None = None) -> tuple[ClusterState, list[Command], list[ShardOutcome]]:
    """Plan and (unless ``dry_run``) send the sharding commands; raises UnsupportedFeature off a mongos.

    Each collection's commands run together; one the cluster refuses is
    reported in its outcome and the others go on.
    """
    if shards is not None and shards < 1:
        raise ConfigError(f"--shards must be at least 1, not {shards}")
    state = inspect(client, db_name, version=version, shards=shards)
    if not state.is_mongos and not dry_run:
        raise UnsupportedFeature(f"sharding needs a sharded cluster reached through mongos; this is {state.kind} "
                                 "(nothing was sent; `sci-ingest shard --dry-run` prints the commands)")
    if not state.is_mongos and state.version < (7, 2) and not state.shards:
        raise ConfigError(f"planning for MongoDB {state.version_text} needs --shards N: before 7.2 the even "
                          "initial split is numInitialChunks, which counts the shards")
    commands, outcomes = plan_commands(db_name, state)
    if dry_run:
        return state, commands, outcomes
    run_commands(client, [c for c in commands if c.collection is None])  # enableSharding: all or nothing
    by_collection = {o.collection: o for o in outcomes}
    for coll, outcome in by_collection.items():
        if outcome.status != "planned":
            continue
        try:
            run_commands(client, [c for c in commands if c.collection == coll])
        except SciIngestError as exc:
            outcome.status, outcome.reason = "refused", str(exc)
        else:
            outcome.status = "sharded"
    return state, commands, outcomes
