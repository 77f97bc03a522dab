"""What a server is and which indexes it has: its kind, version and topology (``hello``,
``buildInfo``), and the catalog's indexes made or dropped (hashed shard-key ones where it can)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pymongo

from ingest.errors import UnsupportedFeature
from ingest.store.catalog import INDEXES, SHARD_KEYS
from ingest.store.mongo import _reason, db_errors

__all__ = ["ServerInfo", "describe", "ensure_indexes", "drop_indexes", "ensure_hashed_indexes"]


@dataclass(frozen=True)
class ServerInfo:
    kind: str  # "SecantusDB" | "MongoDB"
    version: str  # the MongoDB version the server reports (or speaks)
    topology: str  # "standalone" | "replica set" | "sharded (mongos)"
    engine_version: str | None = None  # SecantusDB's own version
    set_name: str | None = None
    hashed_indexes: bool | None = None
    sharding: bool = False

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def label(self) -> str:
        own = f" {self.engine_version}" if self.engine_version else ""
        speaks = f" (speaks MongoDB {self.version})" if self.engine_version else f" {self.version}"
        topo = self.topology + (f" '{self.set_name}'" if self.set_name else "")
        return f"{self.kind}{own}{speaks}, {topo}"


def describe(mongo: pymongo.MongoClient) -> ServerInfo:
    """Kind, version and topology from ``hello`` and ``buildInfo``."""
    with db_errors("asking the server hello/buildInfo"):
        hello = mongo.admin.command("hello")
        build = mongo.admin.command("buildInfo")
    secantus = build.get("secantusVersion")
    if hello.get("msg") == "isdbgrid":
        topology = "sharded (mongos)"
    elif hello.get("setName"):
        topology = "replica set"
    else:
        topology = "standalone"
    return ServerInfo(
        kind="SecantusDB" if secantus else "MongoDB",
        version=str(build.get("version", "unknown")),
        topology=topology,
        engine_version=secantus,
        set_name=hello.get("setName"),
        sharding=topology.startswith("sharded"),
    )


def ensure_indexes(db, indexes: dict[str, list] = INDEXES) -> int:
    """Create ``indexes`` ({collection: [keys, ...]}, default all of :mod:`ingest.store.catalog`),
    idempotently; returns how many were missing."""
    created = 0
    with db_errors(f"creating indexes in {db.name}"):
        for coll, specs in indexes.items():
            existing = {tuple(info["key"]) for info in db[coll].index_information().values()}
            for keys in specs:
                if tuple(keys) not in existing:
                    db[coll].create_index(keys)
                    created += 1
    return created


def drop_indexes(db, indexes: dict[str, list]) -> int:
    """Drop those of ``indexes`` that exist (by key); returns how many were dropped."""
    dropped = 0
    with db_errors(f"dropping indexes in {db.name}"):
        for coll, specs in indexes.items():
            wanted = {tuple(keys) for keys in specs}
            for name, info in db[coll].index_information().items():
                if tuple(info["key"]) in wanted:
                    db[coll].drop_index(name)
                    dropped += 1
    return dropped


def ensure_hashed_indexes(db) -> dict[str, str]:
    """Create the hashed indexes the shard keys need, where the server has them.

    Returns {collection: outcome}.  A server without hashed indexes (SecantusDB)
    is detected from its refusal and reported, never worked around.
    """
    outcomes: dict[str, str] = {}
    for coll, field in SHARD_KEYS.items():
        try:
            with db_errors(f"creating the hashed index on {coll}.{field}", feature="hashed indexes"):
                db[coll].create_index([(field, "hashed")])
        except UnsupportedFeature as exc:
            reason = _reason(exc.__cause__)
            raise UnsupportedFeature(
                f"no hashed shard-key indexes: the server refused them ({reason}); the collections "
                "work unsharded here and get them on a real MongoDB (`sci-ingest shard` via mongos)"
            ) from exc.__cause__
        outcomes[coll] = f"hashed index on {field}"
    return outcomes
