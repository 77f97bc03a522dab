"""The MongoDB boundary: the one place that builds clients and maps driver errors.

Everything sci-ingest does with MongoDB goes through pymongo, so a real MongoDB
(standalone, replica set, or a sharded cluster through ``mongos``) works by URI
just like the embedded SecantusDB server.  This module is the only one that
touches pymongo's client class and its exceptions:

* :func:`client` builds a ``MongoClient`` with the project's defaults
  (timeouts, app name, a bounded pool, the write concern in force); options
  written in the URI win over the defaults.  :func:`connect` also checks that
  the server answers; :func:`shared_client` keeps one client per process and
  URI (what a Dask worker reuses across partitions).
* :func:`db_errors` is the one context manager that maps driver errors to the
  project's: :class:`~ingest.errors.DatabaseError` (the server is unreachable,
  an operation failed), :class:`~ingest.errors.UnsupportedFeature` (the server
  refuses a feature it lacks) and :class:`~ingest.errors.ConfigError` (a bad
  URI), always ``raise ... from exc`` and with one readable line.
* :func:`is_transient` says which errors are worth a retry; :class:`ingest.store.retry.Retry`
  retries an operation through them.
* :func:`insert_new`, :func:`replace_documents` and :func:`conditional_writes` are the
  bulk writes the loader needs, with duplicate keys reported rather than raised;
  :func:`key_filter` is the filter of an upsert, which a sharded collection wants
  with its full shard key.
* :mod:`ingest.store.servers` describes and prepares a server (its kind, topology and
  indexes); the collections, indexes and shard keys themselves are named in
  :mod:`ingest.store.catalog`, and sharding a cluster is :mod:`ingest.sharding.collections`.
* every client tells the server the name of the command it serves
  (:func:`ingest.config.begin_command`: ``sci-ingest cmd <pid>-<random>``, inherited by the
  processes the command starts) as its app name; :mod:`ingest.store.operations`, when the
  command is stopped, kills the operations of that name still running on the servers it used.
"""

from __future__ import annotations

import atexit
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import bson
import pymongo
from bson.binary import Binary
from bson.errors import InvalidDocument
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DocumentTooLarge,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
)
from pymongo.uri_parser import parse_uri
from pymongo.write_concern import WriteConcern

from ingest.config import command_name, setting
from ingest.errors import ConfigError, DatabaseError, DiskFull, ServerUnavailable, TimeLimitExceeded, UnsupportedFeature
from ingest.secrets import redact_uri, remember
from ingest.store.catalog import SHARD_KEYS
from ingest.store.rights import lacking
from ingest.store.space import server_disk_full, storage_of

__all__ = [
    "client", "connect", "shared_client", "ping", "db_errors", "redact", "DUPLICATE_KEY", "is_transient",
    "insert_new", "replace_documents", "key_filter", "write_concern_of", "claim", "durable", "close_client",
    "close_shared", "conditional_writes", "compressed_bson", "default_timeout_ms",
    "heartbeat_timeout_ms", "command_app_name", "forget", "aside_client", "servers_used", "local_storage",
    "health",
]

APP_NAME = "sci-ingest"
#: How long an operation waits for a server to select before giving up (``SCI_INGEST_TIMEOUT_MS``) ...
TIMEOUT_MS = setting("SCI_INGEST_TIMEOUT_MS")
#: ... and for a server on this machine, which answers at once when it runs
#: (``SCI_INGEST_LOCAL_TIMEOUT_MS``): a dead local server is reported within seconds.
LOCAL_TIMEOUT_MS = setting("SCI_INGEST_LOCAL_TIMEOUT_MS")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
#: Connection pool bound per client (a Dask worker holds one client).
MAX_POOL_SIZE = 16
DUPLICATE_KEY = 11000
# Server error codes meaning "this server does not have that": CommandNotFound,
# IllegalOperation, CommandNotSupported, NotImplemented.
_UNSUPPORTED_CODES = {59, 20, 115, 238}
_MAX_TIME_EXPIRED = 50  # MaxTimeMSExpired: an operation stopped at the maxTimeMS its caller gave
_UNAUTHORIZED, _AUTHENTICATION_FAILED = 13, 18
_INTERNAL_ERROR, _OUT_OF_DISK_SPACE = 1, 14031  # InternalError (SecantusDB's answer once its disk is full)
# CannotCreateIndex: an "unsupported" refusal only where a feature is being asked for
# (SecantusDB: "hashed indexes are not supported by SecantusDB").
_CANNOT_CREATE_INDEX = 67


# ------------------------------------------------------------------ clients
#: How long a connection attempt and the monitor's heartbeat may wait (a URI's connectTimeoutMS
#: wins): for a server on this machine, and (pymongo's default) on another host, where it bounds
#: how soon a silent server (a link down) is given up (docs/cluster.md; tests/test_hosts.py).
HEARTBEAT_TIMEOUT_MS, REMOTE_HEARTBEAT_TIMEOUT_MS = 60_000, 20_000


def _defaults(uri: str, timeout_ms: int, max_pool_size: int, write_concern: dict | None,
              retry_writes: bool | None, socket_timeout_ms: int | None) -> dict:
    """Client keyword options, leaving out every option the URI already sets."""
    written = uri.partition("?")[2].lower()
    options = {
        "appname": command_app_name(),
        "serverSelectionTimeoutMS": timeout_ms,
        # Also the monitor's wait for a heartbeat: a server that does not answer one in time is
        # marked unknown and the driver cancels every operation in flight on it.  The embedded
        # server answers nothing for up to 7 s while it sorts 600,000 documents, so this is not
        # the short server-selection timeout (a dead local server refuses connections at once).
        "connectTimeoutMS": heartbeat_timeout_ms(uri),
        "maxPoolSize": max_pool_size,
    }
    if retry_writes is not None:
        options["retryWrites"] = retry_writes
    if socket_timeout_ms is not None:
        options["socketTimeoutMS"] = socket_timeout_ms
    for key, value in (write_concern or {}).items():
        options[{"j": "journal", "wtimeout": "wTimeoutMS"}.get(key, key)] = value
    return {k: v for k, v in options.items() if f"{k.lower()}=" not in written}


def _on_this_machine(uri: str) -> bool:
    hosts = str(uri).partition("://")[2].rpartition("@")[2].partition("/")[0].partition("?")[0]
    names = [h.rsplit(":", 1)[0] if not h.startswith("[") else h.split("]")[0] + "]" for h in hosts.split(",") if h]
    return bool(names) and all(n in _LOOPBACK for n in names)


def default_timeout_ms(uri: str) -> int:
    """The server-selection timeout for ``uri``: short for a loopback server, longer otherwise."""
    return LOCAL_TIMEOUT_MS if _on_this_machine(uri) else TIMEOUT_MS


def heartbeat_timeout_ms(uri: str) -> int:
    """The connect and heartbeat timeout for ``uri`` when the URI sets none (see the constants)."""
    return HEARTBEAT_TIMEOUT_MS if _on_this_machine(uri) else REMOTE_HEARTBEAT_TIMEOUT_MS


def client(uri: str, *, timeout_ms: int | None = None, max_pool_size: int = MAX_POOL_SIZE,
           write_concern: dict | None = None, retry_writes: bool | None = None,
           socket_timeout_ms: int | None = None, **options) -> pymongo.MongoClient:
    """A client for ``uri`` (not yet contacted: pymongo connects on first use).

    ``write_concern`` is e.g. ``{"w": "majority", "j": True}``; by default the
    URI's (or the server's) write concern is in force.  ``retry_writes=False``
    turns the driver's own single retry of a write off, for callers whose writes
    are idempotent and retried by :class:`Retry` (the loader): a whole batch is
    then sent again, which does not depend on how the server remembers a write
    it half did before it restarted.  ``socket_timeout_ms`` bounds the wait for
    any one reply (default: none), for callers whose every operation is short:
    a reply that never comes then becomes a retried timeout instead of a hang.
    A malformed URI raises :class:`ConfigError`.  The URI's secrets are remembered
    first, so no message about it can show them (:mod:`ingest.secrets`).  Any other
    keyword is a ``MongoClient`` option (e.g. ``serverMonitoringMode``).
    """
    remember(str(uri))
    if timeout_ms is None:
        timeout_ms = default_timeout_ms(uri)
    _USED.add(str(uri))
    try:
        return pymongo.MongoClient(uri, **{**_defaults(uri, timeout_ms, max_pool_size, write_concern, retry_writes,
                                                       socket_timeout_ms), **options})
    except (ConfigurationError, ValueError, TypeError) as exc:
        raise ConfigError(f"bad MongoDB URI {redact(str(uri))!r}: {exc}") from exc


def connect(uri: str, timeout_ms: int | None = None, **options) -> pymongo.MongoClient:
    """A client for ``uri``, checked to answer ``ping``; raises DatabaseError if nothing answers."""
    new = client(uri, timeout_ms=timeout_ms, **options)
    try:
        with db_errors("connecting", uri=uri):
            new.admin.command("ping")
    except DatabaseError:
        new.close()
        raise
    return new


_SHARED: dict[tuple, pymongo.MongoClient] = {}
_SHARED_LOCK = threading.Lock()
_USED: set[str] = set()  # the URIs of this process's clients: the servers end_operations visits


def shared_client(uri: str, **options) -> pymongo.MongoClient:
    """This process's client for ``uri``: built once, reused, closed at exit.

    Dask partition readers run many tasks per worker process; each would
    otherwise open (and tear down) a connection pool per partition.  The key
    includes the process id, so a forked child never reuses its parent's
    sockets, and the command's name (its app name), so that a process
    running one command after another gives each clients of its own.
    """
    key = (os.getpid(), uri, command_app_name(), repr(sorted(options.items())))  # a new command: new clients
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = client(uri, **options)
            if len(_SHARED) == 1:
                atexit.register(close_shared)
    return found


def close_shared() -> None:
    with _SHARED_LOCK:
        mine = [k for k in _SHARED if k[0] == os.getpid()]
        for key in mine:
            close_client(_SHARED.pop(key))


def close_client(mongo: pymongo.MongoClient) -> None:
    """Close ``mongo``; at once when its server is known to be down (``close`` would otherwise wait
    a whole server-selection timeout to end its sessions on a server that is not there)."""
    if mongo.topology_description.has_readable_server():
        mongo.close()


# ------------------------------------------------------------------ a command's clients
def command_app_name() -> str:
    """The app name clients tell the server: the command's (:func:`ingest.config.begin_command`),
    else ``sci-ingest``."""
    return command_name() or APP_NAME


def forget(uri: str) -> None:
    """The server at ``uri`` is gone (a command's private server, stopped): nothing to end there."""
    _USED.discard(str(uri))


def aside_client(uri: str, **options) -> pymongo.MongoClient:
    """A client doing none of the command's work (a probe, the stopper): :func:`end_operations` does
    not visit its server for it (a probe of a server that is gone would cost a whole timeout)."""
    known = str(uri) in _USED
    new = client(uri, **options)
    if not known:
        forget(uri)
    return new


def servers_used() -> list[str]:
    """The URIs this process built clients for (what :func:`ingest.store.operations.end_operations` visits)."""
    return sorted(_USED)


def ping(uri: str, timeout_ms: int = 500) -> dict | None:
    """The server's ``hello`` reply, or None if nothing answers at ``uri`` within ``timeout_ms``."""
    return health(uri, timeout_ms, storage=False)[0]


def health(uri: str, timeout_ms: int = 500, *, storage: bool = True) -> tuple[dict | None, str | None]:
    """The server's ``hello`` reply (None if nothing answers within ``timeout_ms``; empty when it refuses
    the URI's credentials) and, with ``storage``,
    its answer to a read of its storage (its collections' names) when that is an internal error twice
    in a row (SecantusDB after a WiredTiger panic: its disk was full), else None (it answers, or
    refuses for the user's rights)."""
    try:
        probe = aside_client(uri, timeout_ms=timeout_ms, max_pool_size=1, connectTimeoutMS=timeout_ms)
    except ConfigError:
        return None, None
    fault = None
    try:
        try:
            hello = probe.admin.command("hello")
        except OperationFailure:  # it answers, refusing the URI's credentials: the command that uses them says so
            return {}, None
        for _ in range(2 if storage else 0):
            try:
                probe.admin.command("listCollections", nameOnly=True)
                return hello, None
            except OperationFailure as exc:
                if exc.code != _INTERNAL_ERROR:
                    return hello, None
                fault = driver_reason(exc)
        return hello, fault
    except PyMongoError:
        return None, None
    finally:
        probe.close()


def redact(uri: str) -> str:
    """The URI without its password or secret options, for messages and reports."""
    return redact_uri(uri)


# ------------------------------------------------------------------ errors
def driver_reason(exc: BaseException) -> str:
    """One readable line for a driver error (any other exception: its text)."""
    if isinstance(exc, BulkWriteError):
        errors = exc.details.get("writeErrors") or exc.details.get("writeConcernErrors") or [{}]
        return str(errors[0].get("errmsg") or exc)
    if isinstance(exc, OperationFailure):
        details = exc.details or {}
        return str(details.get("errmsg") or exc)
    text = str(exc)
    # ServerSelectionTimeoutError appends the timeouts and a whole topology description.
    for cut in (", Timeout:", " (configured timeouts"):
        text = text.split(cut, 1)[0]
    return text.strip() or type(exc).__name__


@contextmanager
def db_errors(what: str, *, uri: str | None = None, feature: str | None = None) -> Iterator[None]:
    """Map pymongo errors raised in the block to the project's errors.

    ``what`` says what was being done ("reading the ledger"); ``uri`` (shown
    without its password) is named when the server cannot be reached;
    ``feature`` names what an "unsupported" refusal is about.
    """
    try:
        yield
    except ConfigurationError as exc:
        raise ConfigError(f"{what}: {exc}") from exc
    except ConnectionFailure as exc:
        where = f" at {redact(uri)}" if uri else ""
        raise ServerUnavailable(f"{what}: cannot reach MongoDB{where}: {driver_reason(exc)}") from exc
    except OperationFailure as exc:
        if exc.code in _UNSUPPORTED_CODES or (feature and exc.code == _CANNOT_CREATE_INDEX):
            about = f" {feature}" if feature else ""
            raise UnsupportedFeature(f"{what}: the server does not support{about}: {driver_reason(exc)}") from exc
        if exc.code == _MAX_TIME_EXPIRED:  # maxTimeMS, which the caller set
            raise TimeLimitExceeded(f"{what}: {driver_reason(exc)}") from exc
        if exc.code in (_UNAUTHORIZED, _AUTHENTICATION_FAILED):  # what the user lacks first (ingest.store.rights)
            used = [uri] if uri else servers_used()
            who = used[0] if len(used) == 1 else None
            raise DatabaseError(lacking(driver_reason(exc), what, who, aside_client)) from exc
        full = _disk_full(exc, uri)
        if full is not None:  # SecantusDB's "internal server error" once its disk is full
            raise full from exc
        raise DatabaseError(f"{what}: {driver_reason(exc)}") from exc
    except PyMongoError as exc:
        raise DatabaseError(f"{what}: {driver_reason(exc)}") from exc


def _disk_full(exc: OperationFailure, uri: str | None) -> DiskFull | None:
    """The full disk behind a server's error (:func:`ingest.store.space.server_disk_full`), or None;
    ``uri`` the server's, else each server this process used."""
    errors = (exc.details or {}).get("writeErrors") if isinstance(exc, BulkWriteError) else None
    code, message = ((errors[0].get("code"), str(errors[0].get("errmsg") or "")) if errors
                     else (exc.code, driver_reason(exc)))
    if code not in (_INTERNAL_ERROR, _OUT_OF_DISK_SPACE) and "No space" not in message and "quota" not in message:
        return None
    for server in [uri] if uri else servers_used():
        found = server_disk_full(code, message, local_storage(server), redact(server).partition("://")[2])
        if found is not None:
            return found
    return None


def local_storage(uri: str):
    """The data directory of the server at ``uri`` when it runs on this machine and says where on its
    command line (:func:`ingest.store.space.storage_of`), else None."""
    if not str(uri).startswith("mongodb://") or not _on_this_machine(uri):
        return None
    try:
        nodes = parse_uri(str(uri))["nodelist"]
    except (ConfigurationError, ValueError):
        return None
    return storage_of(nodes[0][1]) if len(nodes) == 1 else None


# ------------------------------------------------------------------ retries
# Server error codes that go away by themselves: the server is shutting down or
# restarting, a primary stepped down (an election), the network failed.
_TRANSIENT_CODES = {
    6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,  # HostUnreachable ... NotPrimaryOrSecondary
    64, 50,  # WriteConcernFailed (wtimeout), MaxTimeMSExpired
}


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may go away on its own (retry it), as opposed to a real refusal."""
    if isinstance(exc, ConnectionFailure):  # network errors, timeouts, server selection, not-primary
        return True
    if isinstance(exc, PyMongoError) and (exc.has_error_label("RetryableWriteError")
                                           or exc.has_error_label("TransientTransactionError")):
        return True
    if isinstance(exc, BulkWriteError):
        errors = exc.details.get("writeErrors") or []
        concern = exc.details.get("writeConcernErrors") or []
        codes = {e.get("code") for e in errors + concern}
        return bool(codes) and codes <= _TRANSIENT_CODES | {DUPLICATE_KEY} and bool(codes - {DUPLICATE_KEY})
    if isinstance(exc, OperationFailure):
        return exc.code in _TRANSIENT_CODES
    return False


# ------------------------------------------------------------------ write concern
def durable(collection):
    """``collection`` writing with ``j: true`` added to its write concern.

    A journaled write is acknowledged only once the server's journal holds it
    and everything written before it, so a ledger entry written this way after
    a file's documents never outlives them in a crash (with ``w: 1`` alone, a
    server killed at the wrong moment loses the last acknowledged writes).
    """
    return collection.with_options(write_concern=WriteConcern(**{**collection.write_concern.document, "j": True}))


def write_concern_of(mongo: pymongo.MongoClient) -> dict:
    """The write concern in force on a client: its own options, else ``{}`` (the server's default)."""
    return dict(mongo.write_concern.document)


# ------------------------------------------------------------------ claims
def claim(collection, key: str, owner: dict, now, lease_until, *, takeover: str | None = None,
          fields: dict | None = None) -> dict | None:
    """Atomically make ``owner`` the holder of document ``key`` (created if absent): when nobody
    holds it (no lease, or one ended before ``now``), ``owner`` does, or the holder is ``takeover``
    (an owner known to be dead).  The document as it now is, or None when another holder keeps it;
    ``fields`` are set too.  Raw driver errors propagate (call it through :class:`Retry`).

    Conditional updates on ``_id`` and a read: never ``$or`` nor findAndModify, which the embedded
    server answers by scanning the collection (30-80 ms a claim on a ledger of 2,000 files).
    """
    change = {"$set": {"owner": owner, "lease_until": lease_until, **(fields or {})}}
    attempts = [{"_id": key, "lease_until": {"$not": {"$gte": now}}}, {"_id": key, "owner.id": owner["id"]}]
    if takeover:
        attempts.append({"_id": key, "owner.id": takeover})
    for upsert, query in zip((True, False, False), attempts):
        try:  # the first creates the document when absent; held by another, that insert is a duplicate
            result = collection.update_one(query, change, upsert=upsert)
        except DuplicateKeyError:
            continue
        if result.matched_count or result.upserted_id is not None:
            held = collection.find_one({"_id": key})
            return held if held is not None and (held.get("owner") or {}).get("id") == owner["id"] else None
    return None


# ------------------------------------------------------------------ bulk writes
def insert_new(collection, docs: list[dict]) -> tuple[int, list[int]]:
    """Unordered insert; returns (documents inserted, indexes of those whose ``_id`` was there).

    Other errors propagate as the driver raised them: call it through
    :class:`Retry` (or inside :func:`db_errors`).
    """
    if not docs:
        return 0, []
    try:
        result = collection.insert_many(docs, ordered=False)
        return len(result.inserted_ids), []
    except DocumentTooLarge as exc:  # refused before it was sent
        raise DatabaseError(_too_large(docs)) from exc
    except InvalidDocument as exc:  # e.g. a NUL byte in a field name: BSON cannot hold it
        raise DatabaseError(_not_storable(docs, exc)) from exc
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        big = [e["index"] for e in errors if e.get("code") == _BSON_TOO_LARGE and "index" in e]
        if big:
            raise DatabaseError(_too_large([docs[i] for i in big])) from exc
        if any(e.get("code") != DUPLICATE_KEY for e in errors) or exc.details.get("writeConcernErrors"):
            raise
        return exc.details.get("nInserted", 0), [e["index"] for e in errors]


#: MongoDB's largest document (BSON bytes), and its refusal of a bigger one (BSONObjectTooLarge).
MAX_BSON_BYTES = 16 * 1024 * 1024
_BSON_TOO_LARGE = 10334


def _too_large(docs: list[dict]) -> str:
    """Which document of ``docs`` is over the BSON limit, named by its file and line when it has them."""
    size, doc = max(((len(bson.encode(d)), d) for d in docs), key=lambda pair: pair[0])
    return (f"{_where(doc)}document {doc.get('_id')!r} is {size:,} bytes as BSON, over MongoDB's "
            f"{MAX_BSON_BYTES:,}-byte limit")


def _where(doc: dict) -> str:
    """``file:line: `` of a document whose ``_source`` says where it was read, else nothing."""
    source = doc.get("_source")
    if isinstance(source, dict) and source.get("path") and source.get("line"):
        return f"{source['path']}:{source['line']}: "
    return ""


def _not_storable(docs: list[dict], exc: Exception) -> str:
    """Which document of ``docs`` BSON cannot encode, and why."""
    for doc in docs:
        try:
            bson.encode(doc)
        except InvalidDocument as bad:
            return f"{_where(doc)}document {doc.get('_id')!r} cannot be stored: {bad}"
    return f"a document cannot be stored: {exc}"


def key_filter(collection: str, doc: dict) -> dict:
    """The filter that upserts ``doc`` on a sharded ``collection``: ``_id`` and the full shard key
    (:data:`ingest.store.catalog.SHARD_KEYS`)."""
    query = {"_id": doc["_id"]}
    key = SHARD_KEYS.get(collection)
    if key and key != "_id":
        query[key] = doc.get(key)
    return query


def replace_documents(collection, docs: list[dict]) -> tuple[int, int, int]:
    """Replace each document by ``_id`` and shard key (inserting it if absent); (inserted, modified, unchanged).

    Errors propagate as the driver raised them (call it through :class:`Retry`).
    """
    try:  # the filter names the full shard key: a sharded collection refuses an upsert without it
        result = collection.bulk_write(
            [pymongo.ReplaceOne(key_filter(collection.name, d), d, upsert=True) for d in docs], ordered=True)
    except InvalidDocument as exc:
        raise DatabaseError(_not_storable(docs, exc)) from exc
    return result.upserted_count, result.modified_count, result.matched_count - result.modified_count


def compressed_bson(doc: dict) -> Binary:
    """``doc`` as zlib-compressed BSON (a version kept aside); DatabaseError when BSON cannot hold it."""
    try:
        return Binary(zlib.compress(bson.encode(doc), 1))
    except InvalidDocument as exc:
        raise DatabaseError(_not_storable([doc], exc)) from exc


def conditional_writes(collection, ops: list) -> tuple[int, int, int, int, int]:
    """Unordered conditional writes (replace or delete where the document is as expected, upserts
    whose condition fails on an existing ``_id``): (upserted, modified, unchanged, deleted, refused).

    A duplicate key is an upsert whose condition did not hold (the document is
    there in another state): counted as refused, not raised.  Other errors
    propagate as the driver raised them (call it through :class:`Retry`).
    """
    try:
        result = collection.bulk_write(ops, ordered=False)
        refused = 0
        counts = result.bulk_api_result
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(e.get("code") != DUPLICATE_KEY for e in errors) or exc.details.get("writeConcernErrors"):
            raise
        refused, counts = len(errors), exc.details
    matched, modified = counts.get("nMatched", 0), counts.get("nModified", 0)
    return counts.get("nUpserted", 0), modified, matched - modified, counts.get("nRemoved", 0), refused
