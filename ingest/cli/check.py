"""``sci-ingest check``: what the configured deployment can do, against what the pipeline needs.

One table (``--json``: one object): the server's kind, version and topology, the user and the
rights each command needs, journaled writes, transactions, hashed indexes, sharding through a
mongos, the readers' commands, the embedded server's known differences (each asked with a real
command: :mod:`ingest.store.capabilities`, and the plugins' checks), then the Dask scheduler:
whether it answers and how it is reached (TLS).  Exit 0 when nothing a command needs is missing;
else 1, with one line on stderr naming what is missing.  Its command line is
:mod:`ingest.cli.main`'s (``--help`` must not import pymongo, which this module does).
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

from ingest import plugins
from ingest.cli.common import settings_from
from ingest.cluster import dask_client, scheduler_security, thread_count
from ingest.config import Settings, setting
from ingest.errors import ConfigError, DatabaseError, Exit, ServerError
from ingest.fileio import stderr_line
from ingest.report import dumps, table
from ingest.server.connection import database
from ingest.store.capabilities import MISSING, NA, NEEDS, OK, WARN, row, server_rows
from ingest.tls import TLS_ENV, plain_tcp_risk

__all__ = ["cmd_check", "scheduler_rows", "COLUMNS"]

COLUMNS = [("check", "check"), ("status", "status"), ("detail", "detail"), ("needed_by", "needed by")]
#: How long a TCP connection to the scheduler may take before it is said unreachable (Dask's own
#: handshake that follows waits its 15 s: :func:`ingest.cluster.dask_client`).
CONNECT_S = 5.0
DASK_PORT = 8786
_DASK_USERS = "run, load, analyze"


def cmd_check(args) -> int:
    settings = settings_from(args)
    rows = _server_rows(settings) + scheduler_rows(settings.dask_scheduler)
    missing = [r for r in rows if r["status"] == MISSING]
    if args.json:
        print(dumps({"ok": not missing, "missing": [r["check"] for r in missing], "checks": rows}))
    else:
        print(table(rows, COLUMNS, left=len(COLUMNS)))
    if missing:
        named = "; ".join(f"{r['check']} ({r['detail'].split(' (')[0]})" for r in missing)
        stderr_line(f"error: missing what the pipeline needs: {named}")
        return Exit.FATAL
    return Exit.OK


def _server_rows(settings: Settings) -> list[dict]:
    try:
        with database(settings) as conn:
            return server_rows(conn.uri, conn.client, conn.db, conn.info, _needs(),
                               plugins.checks(), home=Path(settings.state_dir))
    except (DatabaseError, ServerError, ConfigError) as exc:
        return [row("server", MISSING, str(exc), "every command")]


def _needs() -> dict[str, tuple[str, ...]]:
    """What each command needs: load's, the plugins' steps', then query's and export's."""
    return {"load": NEEDS["load"], **plugins.needs(), **NEEDS}


def scheduler_rows(address: str | None) -> list[dict]:
    """The Dask scheduler at ``address``: how it is reached (TLS), whether it answers, its workers."""
    if not address:
        return [row("dask scheduler", NA, "none configured (--scheduler, DASK_SCHEDULER_ADDRESS): the pipeline "
                                          "starts a private cluster on this machine", _DASK_USERS)]
    rows = [_tls_row(address)]
    if rows[0]["status"] == MISSING:
        return [*rows, row("dask scheduler", NA, "not asked: no client certificate to show it", _DASK_USERS)]
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname or "", parts.port or DASK_PORT
        socket.create_connection((host, port), timeout=CONNECT_S).close()
    except (OSError, ValueError) as exc:
        return [*rows, row("dask scheduler", MISSING, f"cannot reach {address} (within {CONNECT_S:g} s: {exc})",
                           _DASK_USERS)]
    try:
        with dask_client(address) as client:
            threads, workers = thread_count(client), len(client.nthreads())
    except ConfigError as exc:
        return [*rows, row("dask scheduler", MISSING, str(exc), _DASK_USERS)]
    if not workers:
        return [*rows, row("dask scheduler", WARN, f"{address} answers, but no worker has joined: the pipeline's "
                                                   "tasks wait until one does", _DASK_USERS)]
    return [*rows, row("dask scheduler", OK, f"{address} answers: {workers} worker(s), {threads} thread(s)",
                       _DASK_USERS)]


def _tls_row(address: str) -> dict:
    try:
        security = scheduler_security(address)
    except ConfigError as exc:
        return row("dask TLS", MISSING, str(exc), _DASK_USERS)
    if address.startswith("tls://"):
        shown = (f"the client certificate of {TLS_ENV}={setting(TLS_ENV)}" if security is not None
                 else "the certificate Dask's distributed.comm.tls settings name")
        return row("dask TLS", OK, f"tls://, showing {shown}", _DASK_USERS)
    risk = plain_tcp_risk(address)
    if risk:
        return row("dask TLS", WARN, risk, _DASK_USERS)
    return row("dask TLS", NA, "plain TCP on this host's loopback: no other host reaches it", _DASK_USERS)
