"""Where the run's MongoDB is: a URI, a long-lived embedded server, or a private one.

:func:`database` yields a :class:`Connection` to the configured MongoDB, or to
the embedded SecantusDB server (the long-lived one ``sci-ingest server start``
left running, else a private one started for the block and stopped after it).
:func:`prepare` creates the indexes every step relies on and notes what the
server lacks.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from ingest.catalog import LOAD_INDEXES
from ingest.config import Settings
from ingest.errors import UnsupportedFeature
from ingest.mongo import ServerInfo, close_client, connect, describe, ensure_hashed_indexes, ensure_indexes

__all__ = ["Connection", "database", "prepare", "log_to_stderr"]


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Connection:
    uri: str
    client: object
    db: object
    info: ServerInfo
    embedded: str | None  # None | "private" | "shared"
    server_pid: int | None = None  # the private server's process (nothing restarts it once it is gone)


@contextmanager
def database(settings: Settings, log: Callable[[str], None] = log_to_stderr) -> Iterator[Connection]:
    """Connect to the configured MongoDB, or to the embedded server (started if needed)."""
    server = None
    embedded = None
    uri = settings.mongo_uri
    if not uri:
        from ingest.access import load_credentials, with_credentials
        from ingest.server import EmbeddedServer, running_server

        creds = load_credentials(settings.state_dir)  # the home has authentication on
        shared = running_server(settings.state_dir)
        if shared:
            uri, embedded = with_credentials(shared["uri"], creds), "shared"
        else:
            server = EmbeddedServer(settings.db_dir, auth=creds is not None)
            log(f"starting the embedded SecantusDB server (data in {settings.db_dir}) ...")
            uri, embedded = with_credentials(server.start(), creds), "private"
    client = None
    try:
        client = connect(uri)
        info = describe(client)
        yield Connection(uri=uri, client=client, db=client[settings.db_name], info=info, embedded=embedded,
                         server_pid=server.process.pid if server is not None and server.process else None)
    finally:
        if client is not None:
            close_client(client)
        if server is not None:
            server.stop()


def prepare(conn: Connection, query_indexes: bool = False) -> list[str]:
    """The loader's indexes, and hashed shard-key indexes where the server has them; returns notes.

    The analysts' indexes are the load step's business (built after a bulk
    load, see ``ingest.load.indexes``); a database nobody loads gets them here
    when ``query_indexes`` is set.
    """
    ensure_indexes(conn.db, LOAD_INDEXES)
    notes = []
    try:
        done = ensure_hashed_indexes(conn.db)
        notes.append("hashed shard-key indexes: " + ", ".join(f"{c} ({o})" for c, o in done.items()))
    except UnsupportedFeature as exc:
        notes.append(str(exc))
    if query_indexes:
        from ingest.catalog import QUERY_INDEXES

        ensure_indexes(conn.db, QUERY_INDEXES)
    if not conn.info.sharding:
        notes.append(f"not sharded: {conn.info.topology} (use `sci-ingest shard` against mongos to shard)")
    return notes
