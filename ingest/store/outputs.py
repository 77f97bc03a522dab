"""Where a database's Parquet outputs live: ``<home>/out/<server>/<db>/``, one folder per server and database.

The outputs of an analysis are a MongoDB collection of a database and a Parquet file; the file belongs
to the database it was computed from (issue 41: one folder for every database let ``--db other``
overwrite the default database's files, and an incremental run then extended the other database's
file).  So the folder is

* ``<home>/out/embedded/<db>/`` for the home's own embedded server: the one a command starts or finds
  without a URI, and the same server reached by its URI (``sci-ingest airflow`` hands its tasks the
  URI of the home's server: their outputs and the commands' are one set);
* ``<home>/out/<hosts>[+<replica set>]/<db>/`` for a server given by URI: each host as
  ``host_port`` (lower case; 27017 when the URI names no port; a ``mongodb+srv://`` name as
  ``name_srv``), sorted and joined by commas, and the URI's ``replicaSet``.  Never the user name, the
  password or any other option: ``mongodb://u:secret@db1:27017,db2/?replicaSet=rs0&tls=true`` is
  ``db1_27017,db2_27017+rs0``.

Every character outside letters, digits and ``_.-~`` (in a host, the set name or the database
name) is percent-encoded, and a name's leading dot too, so a folder name is never a path, hidden
or ambiguous; a name longer than :data:`MAX_NAME` characters is cut and ends with a hash of the
whole.  The server's identity proper (:attr:`Outputs.server`: ``embedded:<home>``, or
``host:port,...[/set]``) is what each Parquet file records in its metadata beside the database,
and an incremental run extends only a file whose recorded database and server are its own.

A caller that names a folder itself (``analytics.analyze(uri, db, run_id, out_dir)``, the benchmarks,
the tests) gets that folder as it is (:func:`outputs_at`); its files record the URI's server.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

__all__ = ["Outputs", "outputs_of", "outputs_at", "as_outputs", "uri_server", "same_hosts", "EMBEDDED", "MAX_NAME"]

#: The folder of the home's own embedded server's databases (a URI's folder always holds ``_``).
EMBEDDED = "embedded"
#: Longest folder name made here (file systems allow 255 bytes).
MAX_NAME = 120
_DEFAULT_PORT = "27017"


@dataclass(frozen=True)
class Outputs:
    """The Parquet outputs of one database: their folder, and the database and server they come from."""

    folder: Path
    db: str
    #: The server's identity, recorded in every Parquet file (``embedded:<home>`` or ``host:port,...[/set]``).
    server: str

    def path(self, analysis) -> Path:
        """The Parquet file of ``analysis`` (anything with a ``parquet_name``)."""
        return self.folder / analysis.parquet_name

    def origin(self) -> dict:
        """What each Parquet file records of where it was computed (its ``sci_ingest`` metadata)."""
        return {"db": self.db, "server": self.server}


def _component(encoded: str, whole: str) -> str:
    """``encoded`` (percent-encoded parts) as one safe path component: no leading dot, never empty,
    at most :data:`MAX_NAME` characters (a longer one cut, ending with a hash of ``whole``)."""
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > MAX_NAME:
        encoded = encoded[:MAX_NAME - 17] + "~" + hashlib.sha256(whole.encode()).hexdigest()[:16]
    return encoded or "%00"


def _db_folder(db_name: str) -> str:
    return _component(quote(db_name, safe=""), db_name)


def _hosts(uri: str) -> tuple[list[tuple[str, str]], str | None]:
    """([(host, port)], replica set or None) of ``uri``; its credentials and other options are never read."""
    scheme, sep, rest = str(uri).partition("://")
    if not sep:
        scheme, rest = "mongodb", str(uri)
    head, _, query = rest.partition("?")
    head = head.rsplit("@", 1)[-1].split("/", 1)[0]  # a Unix socket's path is percent-encoded: no "/"
    srv = scheme.lower() == "mongodb+srv"
    hosts = set()
    for part in filter(None, head.split(",")):
        host, port = unquote(part), _DEFAULT_PORT
        if host.endswith(".sock"):  # a Unix socket's path
            port = ""
        elif host.startswith("["):  # [IPv6]:port
            inside, _, after = host[1:].partition("]")
            host, port = inside, after.lstrip(":") or port
        elif host.count(":") == 1:
            host, port = host.split(":")
        hosts.add((host.lower(), "srv" if srv else port))
    replica_set = None
    for option in query.replace(";", "&").split("&"):
        key, eq, value = option.partition("=")
        if eq and key.strip().lower() == "replicaset" and value:
            replica_set = unquote(value)
    return sorted(hosts), replica_set


def uri_server(uri: str) -> tuple[str, str]:
    """(folder name, identity) of the server ``uri`` names: its hosts and replica set, nothing else."""
    hosts, replica_set = _hosts(uri)
    identity = ",".join(f"{h}:{p}" if p else h for h, p in hosts) + (f"/{replica_set}" if replica_set else "")
    folder = ",".join(f"{quote(h, safe='')}_{p}" if p else quote(h, safe="") for h, p in hosts)
    if replica_set:
        folder += "+" + quote(replica_set, safe="")
    return _component(folder, identity), identity or "unknown"


def same_hosts(uri: str, other: str) -> bool:
    """Whether two URIs name the same hosts (a server reached by two URIs: other options, credentials)."""
    mine = _hosts(uri)[0]
    return bool(mine) and mine == _hosts(other)[0]


def _embedded(settings) -> Outputs:
    home = Path(settings.state_dir).resolve()
    return Outputs(Path(settings.out_dir) / EMBEDDED / _db_folder(settings.db_name), settings.db_name,
                   f"{EMBEDDED}:{home}")


def outputs_of(settings, conn) -> Outputs:
    """The outputs folder of the command's database (``settings.db_name``) on the server of ``conn``
    (a :class:`ingest.server.connection.Connection`: ``home`` when it is the home's embedded server,
    also reached by URI)."""
    if conn.home:
        return _embedded(settings)
    folder, identity = uri_server(conn.uri)
    return Outputs(Path(settings.out_dir) / folder / _db_folder(settings.db_name), settings.db_name, identity)


def outputs_at(folder, uri: str, db_name: str) -> Outputs:
    """Outputs in the folder a caller chose, recording the server ``uri`` names and ``db_name``."""
    return Outputs(Path(folder), db_name, uri_server(uri)[1])


def as_outputs(where, uri: str, db_name: str) -> Outputs:
    """``where`` when it is :class:`Outputs` already, else a folder chosen by the caller (:func:`outputs_at`)."""
    return where if isinstance(where, Outputs) else outputs_at(where, uri, db_name)
