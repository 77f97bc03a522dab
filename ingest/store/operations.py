"""A stopped command's operations, ended on the servers it used.

Every client a command builds tells the server the command's name as its app name
(:func:`ingest.store.mongo.command_app_name`, inherited by the processes it starts);
:func:`end_operations` finds the operations of that name still running (``currentOp``) and kills
them (``killOp``), where the server can: SecantusDB cannot interrupt an operation, and is told so
in one line (docs/embedded-server.md).
"""

from __future__ import annotations

import time

import pymongo

from ingest.config import command_name
from ingest.errors import DatabaseError, SciIngestError
from ingest.store.mongo import APP_NAME, aside_client, close_shared, db_errors, redact, servers_used

__all__ = ["end_operations", "STOP_TIMEOUT_MS"]

#: How long a stopped command waits for the server to say which of its operations run (``currentOp``)
#: and for those it killed to be gone: a server that does not answer in time is left as it is.
STOP_TIMEOUT_MS = 2000
#: On SecantusDB: how long the connections of the command's closed clients are given to be unregistered
#: (at once when idle; a connection still there then is an operation running on).
_CLOSING_S = 0.5


def end_operations(log=None) -> int:
    """End this command's operations still running on the servers it used; how many were killed.

    For a command that is stopped (Ctrl-C, SIGTERM, an Airflow task killed or timed out): its
    operations are those whose app name is the command's (:func:`ingest.store.mongo.command_app_name`), from this
    process or from those it started (a ``LocalCluster``'s workers).  This process's shared clients
    are closed first.  Each server this process used is asked (``currentOp``) for them, they are
    killed (``killOp``), and the server is asked again until they are gone (at most
    :data:`STOP_TIMEOUT_MS`).  SecantusDB cannot interrupt an operation: its ``killOp`` closes the
    connection and the operation runs on to its end (pymongo then even sends a read again), so
    there nothing is killed and ``log`` gets one line saying how many operations run on.  Never
    raises: a server that does not answer is left as it is (``log`` says so).
    """
    name = command_name()
    if not name:
        return 0
    close_shared()
    killed = 0
    for uri in servers_used():
        try:
            with db_errors(f"ending this command's operations at {redact(uri)}", uri=uri):
                killed += _end_operations_at(uri, name, log or (lambda line: None))
        except SciIngestError as exc:
            if log:
                log(f"this command's operations could not be ended: {exc}")
    return killed


def _end_operations_at(uri: str, name: str, log) -> int:
    stopper = aside_client(uri, timeout_ms=STOP_TIMEOUT_MS, max_pool_size=1, appname=f"{APP_NAME} stopper",
                           connectTimeoutMS=STOP_TIMEOUT_MS, socketTimeoutMS=STOP_TIMEOUT_MS)
    try:
        if stopper.admin.command("buildInfo").get("secantusVersion"):
            running = _operations(stopper, name)
            end = time.monotonic() + _CLOSING_S
            while running and time.monotonic() < end:  # the connections of clients just closed
                time.sleep(0.05)
                running = _operations(stopper, name)
            if running:
                what = ", ".join(sorted({str(op.get("op")) for op in running}))
                log(f"{len(running)} operation(s) of this command ({what}) run on at {redact(uri)} until they end: "
                    "SecantusDB cannot interrupt an operation (its killOp only closes the connection)")
            return 0
        running = _operations(stopper, name)
        for op in running:
            stopper.admin.command("killOp", op=op["opid"])
        left, end = running, time.monotonic() + STOP_TIMEOUT_MS / 1000
        while left and time.monotonic() < end:  # killOp marks them; each ends at its next check
            time.sleep(0.05)
            left = _operations(stopper, name)
        if left:
            log(f"{len(left)} operation(s) of this command still run at {redact(uri)} after killOp")
        return len(running)
    finally:
        stopper.close()


def _operations(mongo: pymongo.MongoClient, name: str) -> list[dict]:
    """The operations in progress whose app name is ``name``: ``currentOp`` filtered by it (where the
    server filters; SecantusDB lists every connection, its client metadata naming the app)."""
    try:
        with db_errors("listing the operations in progress"):
            reply = mongo.admin.command({"currentOp": 1, "active": True, "appName": name})
    except DatabaseError:  # not allowed to see every user's: this user's own are this command's
        reply = mongo.admin.command({"currentOp": 1, "$ownOps": True, "active": True, "appName": name})
    return [op for op in reply.get("inprog", []) if op.get("active") and op.get("opid") is not None
            and op.get("type", "op") == "op" and _app_name(op) == name]


def _app_name(op: dict) -> str | None:
    metadata = op.get("clientMetadata") or {}
    return op.get("appName") or (metadata.get("application") or {}).get("name")
