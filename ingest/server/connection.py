"""Where the run's MongoDB is: a URI, or the home's embedded server.

:func:`database` yields a :class:`Connection` to the configured MongoDB, or to
the embedded SecantusDB server of the home: the one running (left by ``sci-ingest
server start`` or by an earlier command), else a per-home server started for the
next commands too (:mod:`ingest.server.keeper`), else, with ``SCI_INGEST_SERVER_IDLE=0``,
a private one started for the block and stopped after it.
:func:`prepare` creates the indexes every step relies on and notes what the
server lacks, and where it answers differently from MongoDB (:mod:`ingest.store.differences`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from pymongo import MongoClient
from pymongo.database import Database

from ingest.config import Settings, require_uri
from ingest.errors import UnsupportedFeature
from ingest.fileio import printable
from ingest.server import keeper
from ingest.server.access import load_credentials, with_credentials
from ingest.server.embedded import EmbeddedServer, running_server
from ingest.server.state import recorded
from ingest.store.catalog import LOAD_INDEXES, QUERY_INDEXES
from ingest.store.differences import probe
from ingest.store.indexes import ensure_exact_indexes, exact_indexes, withheld_note
from ingest.store.mongo import close_client, connect, forget
from ingest.store.outputs import same_hosts
from ingest.store.servers import ServerInfo, describe, ensure_hashed_indexes, ensure_indexes

__all__ = ["Connection", "database", "prepare", "log_to_stderr"]


def log_to_stderr(message: str) -> None:
    """``message`` on stderr (an Airflow task's log): its lines kept, each without a control character."""
    lines = (printable(line, backslash=False) for line in str(message).split("\n"))
    print("\n".join(lines), file=sys.stderr, flush=True)


@dataclass
class Connection:
    uri: str
    client: MongoClient
    db: Database
    info: ServerInfo
    embedded: str | None  # None | "private" | "per-home" | "shared"
    server_pid: int | None = None  # the embedded server's process when nothing restarts it once it is gone
    home: bool = False  # the home's embedded server (started, found, or named by the URI): its outputs folder


@contextmanager
def database(settings: Settings, log: Callable[[str], None] = log_to_stderr) -> Iterator[Connection]:
    """Connect to the configured MongoDB, or to the embedded server (started if needed)."""
    with ExitStack() as stack:
        uri, embedded, server_pid = settings.mongo_uri, None, None
        if not uri:
            require_uri(settings)  # production: no URI is an error, never a private local database
            uri, embedded, server_pid = _embedded(settings, stack, log)
        client = None
        try:
            client = connect(uri)
            info = describe(client)
            yield Connection(uri=uri, client=client, db=client[settings.db_name], info=info, embedded=embedded,
                             server_pid=server_pid, home=embedded is not None or _home_server(uri, settings))
        finally:
            if client is not None:
                close_client(client)


def _home_server(uri: str, settings: Settings) -> bool:
    """Whether ``uri`` names the server recorded in the home (its embedded server, reached by URI)."""
    state = recorded(Path(settings.state_dir))
    return state is not None and bool(state.get("uri")) and same_hosts(uri, state["uri"])


def _embedded(settings: Settings, stack: ExitStack, log: Callable[[str], None]) -> tuple[str, str, int | None]:
    """(URI, kind, the server's pid when nothing restarts it) of the home's embedded server: the one
    running (``sci-ingest server start``'s, or the per-home server an earlier command started), else
    a new per-home server (:mod:`ingest.server.keeper`), else (``SCI_INGEST_SERVER_IDLE=0``) a private one,
    stopped when ``stack`` closes."""
    creds = load_credentials(settings.state_dir)  # the home has authentication on
    idle_s = keeper.idle_timeout()
    stack.enter_context(keeper.using(settings.state_dir))  # a per-home server does not stop under this command
    state = running_server(settings.state_dir, log=log)  # a broken one (its disk was full) is restarted
    if state is None and idle_s > 0:
        state = keeper.start(settings.state_dir, idle_s, log)
    if state is not None:
        kind = "per-home" if state.get("idle_s") else "shared"
        return with_credentials(state["uri"], creds), kind, state["pid"] if state.get("keeper") else None
    server = EmbeddedServer(settings.db_dir, auth=creds is not None)
    log(f"note: starting the embedded SecantusDB server (data in {settings.db_dir}) ...")
    uri = with_credentials(server.start(), creds)
    stack.callback(forget, uri)  # stopped with its operations: a stopped command has nothing to end there
    stack.callback(server.stop)
    return uri, "private", server.child.pid


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
        ensure_exact_indexes(conn.db, QUERY_INDEXES)
    note = _index_note(conn)
    if note:
        notes.append(note)
    found = probe(conn.db)  # once per server process (ingest.store.differences)
    differs = found.note()
    if differs:
        notes.append(differs)
    elif not found.probed:
        notes.append(f"the server's answers were not probed against MongoDB's: {found.error}")
    if not conn.info.sharding:
        notes.append(f"not sharded: {conn.info.topology} (use `sci-ingest shard` against mongos to shard)")
    return notes


def _index_note(conn: Connection) -> str | None:
    """On a server whose index keys lose the order of numbers: which indexes are built without
    their float fields (the choice in force), in one line."""
    changed = {}
    for coll, specs in QUERY_INDEXES.items():
        cut = exact_indexes(conn.db, coll, specs)[1]
        if cut:
            changed[coll] = cut
    return withheld_note(changed)
