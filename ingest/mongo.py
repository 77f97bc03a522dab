"""MongoDB access: connecting, describing the server, collections and indexes.

Everything here goes through pymongo, so a real MongoDB (standalone, replica
set, or a sharded cluster through ``mongos``) works by URI just like the
embedded SecantusDB server.  pymongo errors are mapped to
:class:`ingest.errors.DatabaseError` here, at the I/O boundary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pymongo
from pymongo.errors import OperationFailure, PyMongoError

from ingest.errors import DatabaseError, UnsupportedFeature

SEARCHES = "searches"
HITS = "hits"
MATERIALS = "materials"
TASKS = "tasks"
LEDGER = "ingest_files"
TIMINGS = "stage_timings"
VALIDATION = "validation_runs"

# Secondary indexes analysts and the pipeline rely on.
INDEXES: dict[str, list[list[tuple[str, int]]]] = {
    SEARCHES: [[("query_id", 1)], [("source.sha256", 1)], [("source.path", 1)]],
    HITS: [[("search_id", 1), ("rank", 1)], [("query_id", 1)], [("hit_id", 1)], [("source.sha256", 1)],
           [("source.path", 1)]],
    MATERIALS: [[("elements", 1)], [("chemsys", 1)], [("formula_pretty", 1)]],
    TASKS: [[("material_id", 1)]],
    LEDGER: [[("sha256", 1)], [("status", 1)]],
    TIMINGS: [[("run_id", 1), ("stage", 1)]],
    VALIDATION: [[("run_id", 1)]],
}

# Hashed shard keys for a sharded cluster: searches and their hits spread evenly,
# and the hits of one search stay together on one shard.
SHARD_KEYS: dict[str, str] = {SEARCHES: "_id", HITS: "search_id", MATERIALS: "_id", TASKS: "_id"}


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


def connect(uri: str, timeout_ms: int = 10_000) -> pymongo.MongoClient:
    """A client for ``uri``, checked to answer; raises DatabaseError if nothing answers."""
    try:
        options = {"appname": "sci-ingest"}
        if "serverselectiontimeoutms" not in uri.lower():  # an explicit URI option wins
            options["serverSelectionTimeoutMS"] = timeout_ms
        client = pymongo.MongoClient(uri, **options)
        client.admin.command("ping")
    except PyMongoError as exc:
        raise DatabaseError(f"cannot reach MongoDB at {redact(uri)}: {exc}") from exc
    return client


def redact(uri: str) -> str:
    """The URI without a password, for messages and reports."""
    if "@" not in uri or "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def describe(client: pymongo.MongoClient) -> ServerInfo:
    """Kind, version and topology from ``hello`` and ``buildInfo``."""
    try:
        hello = client.admin.command("hello")
        build = client.admin.command("buildInfo")
    except PyMongoError as exc:
        raise DatabaseError(f"server did not answer hello/buildInfo: {exc}") from exc
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


def ensure_indexes(db) -> None:
    """Create the secondary indexes (idempotent)."""
    try:
        for coll, specs in INDEXES.items():
            for keys in specs:
                db[coll].create_index(keys)
    except PyMongoError as exc:
        raise DatabaseError(f"creating indexes in {db.name}: {exc}") from exc


def ensure_hashed_indexes(db) -> dict[str, str]:
    """Create the hashed indexes the shard keys need, where the server has them.

    Returns {collection: outcome}.  A server without hashed indexes (SecantusDB)
    is detected from its refusal and reported, never worked around.
    """
    outcomes: dict[str, str] = {}
    for coll, field in SHARD_KEYS.items():
        try:
            db[coll].create_index([(field, "hashed")])
            outcomes[coll] = f"hashed index on {field}"
        except OperationFailure as exc:
            if exc.code == 67 or "hashed" in str(exc).lower():
                reason = (exc.details or {}).get("errmsg") or str(exc)
                raise UnsupportedFeature(
                    f"no hashed shard-key indexes: the server refused them ({reason}); the collections "
                    "work unsharded here and get them on a real MongoDB (`sci-ingest shard` via mongos)"
                ) from exc
            raise DatabaseError(f"creating hashed index on {coll}.{field}: {exc}") from exc
        except PyMongoError as exc:
            raise DatabaseError(f"creating hashed index on {coll}.{field}: {exc}") from exc
    return outcomes


def shard_collections(client: pymongo.MongoClient, db_name: str) -> dict[str, str]:
    """Shard the data collections on their hashed keys (needs ``mongos``)."""
    info = describe(client)
    if not info.sharding:
        raise UnsupportedFeature(
            f"sharding needs a sharded cluster reached through mongos; this is {info.label()}"
        )
    done = {}
    try:
        client.admin.command("enableSharding", db_name)
        for coll, field in SHARD_KEYS.items():
            client.admin.command("shardCollection", f"{db_name}.{coll}", key={field: "hashed"})
            done[coll] = f"{{{field}: 'hashed'}}"
    except PyMongoError as exc:
        raise DatabaseError(f"sharding {db_name}: {exc}") from exc
    return done
