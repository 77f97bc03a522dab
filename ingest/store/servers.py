"""What a server is and which indexes it has: its kind, version and topology (``hello``,
``buildInfo``), what requests cost it (:class:`Traits`), and the catalog's indexes made or dropped
(hashed shard-key ones where it can).

:func:`server_of` asks a server what it is once per client, and :func:`traits` says how sci-ingest
shapes its requests there.  The embedded SecantusDB answers what MongoDB answers (where it does
not, :mod:`ingest.store.differences` probes it and says so), but some requests cost it far more,
measured on the development machine:

* ``$in``: its cost per element grows with the list (a ledger of 2,000 entries: 0.11 ms an
  element at 50, 0.16 at 100, 1 ms at 1,000, 4.4 at 5,000), so lists go in chunks of 50;
* an ``$or`` of ranges is a collection scan there, so each range is a query of its own;
* a count reads every document (about 8 µs a document: 0.5 s for 60,000), so a count that only
  decides how to work gets a time budget;
* a projection is applied in Python, document by document (a fifth to a quarter of a read's
  server time on search hits), so small documents are read whole;
* ``renameCollection`` copies every row and index entry (20,000 rows with four indexes: 2.1 s,
  0.8 s without; issue 40), so a published output is renamed bare and indexed in place.

A MongoDB (standalone, replica set, mongos) gets the plain requests: ``$in`` lists and ``$or`` s of
up to 2,000 values or ranges (a command is at most 16 MB of BSON, and a path up to 4 KB: 8 MB at
most), its counts from metadata, its projections on the server.  The claims of the loader
(:func:`ingest.store.mongo.claim`) are the one protocol on both: conditional updates on ``_id``
(never ``$or`` nor findAndModify, which SecantusDB answers by a scan), exact on either.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pymongo

from ingest.errors import UnsupportedFeature
from ingest.store.catalog import INDEXES, SHARD_KEYS
from ingest.store.mongo import db_errors, driver_reason

__all__ = ["ServerInfo", "Traits", "describe", "server_of", "traits", "traits_of", "ensure_indexes", "drop_indexes",
           "ensure_hashed_indexes", "MONGODB", "SECANTUSDB"]


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


_DESCRIBED: dict[int, ServerInfo] = {}


def server_of(db) -> ServerInfo:
    """The server behind ``db`` (:func:`describe`, asked once per client)."""
    key = id(db.client)
    if key not in _DESCRIBED:
        _DESCRIBED[key] = describe(db.client)
    return _DESCRIBED[key]


@dataclass(frozen=True)
class Traits:
    """How requests are shaped for a server (the module docstring says why each)."""

    #: values per ``$in`` query, ranges per ``$or`` (a command's BSON is bounded: 16 MB)
    in_values: int = 2000
    #: whether an ``$or`` of ranges is answered through the index (else one query per range)
    or_of_ranges: bool = True
    #: whether counting reads every document (a count that decides how to work is then budgeted)
    counts_scan: bool = False
    #: whether the server projects in Python (small documents are then read whole)
    projects_in_python: bool = False
    #: whether renaming a collection copies it (an output is then renamed before it is indexed)
    renames_by_copying: bool = False


MONGODB = Traits()
SECANTUSDB = Traits(in_values=50, or_of_ranges=False, counts_scan=True, projects_in_python=True,
                    renames_by_copying=True)


def traits(db) -> Traits:
    """How sci-ingest shapes its requests for the server behind ``db`` (its kind, asked once)."""
    return traits_of(server_of(db))


def traits_of(info: ServerInfo) -> Traits:
    """The traits of a server already described (a connection's ``info``)."""
    return SECANTUSDB if info.kind == "SecantusDB" else MONGODB


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
            reason = driver_reason(exc.__cause__ or exc)  # db_errors raised it from the driver's error
            raise UnsupportedFeature(
                f"no hashed shard-key indexes: the server refused them ({reason}); the collections "
                "work unsharded here and get them on a real MongoDB (`sci-ingest shard` via mongos)"
            ) from exc.__cause__
        outcomes[coll] = f"hashed index on {field}"
    return outcomes
